// CUDA device basics for the sm_90a primitives: the TL_DEVICE macro, who-am-I helpers (thread,
// lane, warp, warpgroup), electing one lane, named barriers, proxy fences, register reallocation.
//
// Why a header of its own: every other tl/device/cuda/ header needs these, and keeping them apart
// keeps the PTX for "which thread issues" separate from the PTX for "what it issues" (TMA, wgmma,
// mbarrier). Everything is inline PTX or a compiler builtin, so this compiles under nvcc and
// NVRTC alike (no CUDA headers are included; tl/device/numeric.h supplies the fixed-width types).
//
// Conventions of tl::cuda:
// - A warpgroup is 4 consecutive warps starting at a warp index divisible by 4 (wgmma's rule).
// - Index helpers return values that are uniform across the warp (or warpgroup) where the name
//   says so; they go through __shfl_sync so the compiler knows it too (it then keeps role branches
//   warp-uniform, which wgmma and setmaxnreg need).
// - Shared-memory addresses passed to PTX are 32-bit .shared::cta addresses (smem_addr()).
#pragma once

#include "tl/device/numeric.h"

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#error "tl/device/cuda/ headers are CUDA device code: compile them with nvcc or NVRTC"
#endif

#ifndef TL_DEVICE
#define TL_DEVICE __device__ __forceinline__
#endif
#ifndef TL_DEVICE_NOINLINE
#define TL_DEVICE_NOINLINE __device__ __noinline__
#endif

// Hopper-only instructions (wgmma, setmaxnreg) exist on sm_90a; TMA and mbarrier tx-counts on sm_90.
// Host passes and other targets see the declarations but must not reach the code.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#define TL_CUDA_SM90 1
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TL_CUDA_SM90A 1
#endif

namespace tl::cuda {

// <type_traits> is not available under NVRTC.
template <class A, class B>
inline constexpr bool is_same_v = false;
template <class A>
inline constexpr bool is_same_v<A, A> = true;

// ---------------------------------------------------------------------------------------------
// Who am I.
TL_DEVICE int thread_idx() { return int(threadIdx.x); }
TL_DEVICE int lane_idx() { return int(threadIdx.x & 31u); }
// Warp index within the block, uniform across the warp.
TL_DEVICE int warp_idx() { return __shfl_sync(0xffffffffu, int(threadIdx.x >> 5), 0); }
// Warpgroup (128 threads) index within the block, uniform across the warp.
TL_DEVICE int warpgroup_idx() { return __shfl_sync(0xffffffffu, int(threadIdx.x >> 7), 0); }
// Warp index within its warpgroup (0..3), uniform across the warp.
TL_DEVICE int warp_idx_in_warpgroup() { return __shfl_sync(0xffffffffu, int((threadIdx.x >> 5) & 3u), 0); }
// Thread index within its warpgroup (0..127).
TL_DEVICE int thread_idx_in_warpgroup() { return int(threadIdx.x & 127u); }

// True in exactly one active lane of the (fully converged) warp: the single-thread issue point for
// TMA and barrier work. elect.sync picks the leader in hardware, without a compare on lane ids.
TL_DEVICE bool elect_one_sync() {
  uint32_t pred = 0;
  asm volatile(
      "{\n"
      ".reg .b32 %%rx;\n"
      ".reg .pred %%px;\n"
      "elect.sync %%rx|%%px, %1;\n"
      "@%%px mov.s32 %0, 1;\n"
      "}\n"
      : "+r"(pred)
      : "r"(0xffffffffu));
  return pred != 0;
}

// ---------------------------------------------------------------------------------------------
// Shared-memory addresses.
TL_DEVICE uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// ---------------------------------------------------------------------------------------------
// Named barriers: a subset of the block's warps synchronizes without stopping the others (the
// producer warpgroup keeps loading while the consumers sync). Id 0 is __syncthreads(); use 1..15.
// `threads` is a multiple of 32 and counts every thread that takes part.
TL_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// bar.sync that also returns whether `pred` held in any of the `threads` threads: a broadcast of
// one thread's decision without a shared-memory word.
TL_DEVICE bool named_barrier_sync_or(int id, int threads, bool pred) {
  uint32_t any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n barrier.cta.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}"
      : "=r"(any)
      : "r"(uint32_t(pred)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}
TL_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Fences.
// Generic-proxy writes to shared memory (st.shared, stmatrix) become visible to the async proxy
// (TMA store, wgmma operand reads). Each writing thread issues it before the barrier that hands
// the data over.
TL_DEVICE void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Makes mbarrier.init visible to the async proxy and to other CTAs of the cluster; issue after
// initializing barriers, before the block-wide (or cluster-wide) sync.
TL_DEVICE void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// Orders this thread's prior memory accesses before later ones as seen by the whole CTA / GPU.
TL_DEVICE void fence_acq_rel_cta() { asm volatile("fence.acq_rel.cta;" ::: "memory"); }
TL_DEVICE void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// ---------------------------------------------------------------------------------------------
// Register reallocation between warpgroups (sm_90a). Producers give registers back, consumers take
// them: the kernel must have a register cap at entry (__launch_bounds__(threads, 1)) and every warp
// of a warpgroup must execute the same call. kRegs is a multiple of 8 in [24, 256].
template <int kRegs>
TL_DEVICE void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
#if defined(TL_CUDA_SM90A)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
#endif
}
template <int kRegs>
TL_DEVICE void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
#if defined(TL_CUDA_SM90A)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
#endif
}

// ---------------------------------------------------------------------------------------------
// Clusters (hooks for TMA multicast; a kernel launched without a cluster is a cluster of one).
TL_DEVICE uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
TL_DEVICE uint32_t cluster_nctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
// Programmatic dependent launch (sm_90; no-ops in a kernel not launched that way, see
// rt::CudaKernel::launch_overlapping): griddep_launch_dependents lets the kernel queued after this
// one start once every block of this one has executed it (or exited); griddep_wait blocks until the
// kernel before this one has completed and its writes are visible. A kernel that touches no global
// memory before griddep_wait may be launched overlapping whatever precedes it.
TL_DEVICE void griddep_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
TL_DEVICE void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// All threads of all CTAs in the cluster.
TL_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// Time, in nanoseconds (coarse ticks): bounded waits and debugging.
TL_DEVICE uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Keeps the compiler from moving reads or writes of `r` across this point. Accumulators written by
// wgmma asynchronously need it around wgmma.wait_group (see wgmma.h).
TL_DEVICE void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
TL_DEVICE void fence_operand(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
TL_DEVICE void fence_operand(int32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

}  // namespace tl::cuda
