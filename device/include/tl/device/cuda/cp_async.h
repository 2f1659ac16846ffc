// Asynchronous global -> shared copies (cp.async, sm_80 and later), for software-pipelined loads:
// a thread issues copies, closes them into a group with cp_async_commit(), and later waits until
// at most N of its groups are still in flight (cp_async_wait<N>()); a block barrier after the wait
// makes every thread's copies visible to the block.
#pragma once

#include "tl/device/cuda/arch.h"

namespace tl::cuda {

// 16 bytes from global to shared memory, both 16-byte aligned; when !pred nothing is read and the
// destination is zero-filled (bounds guards).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(pred ? 16 : 0) : "memory");
#else
  __trap();  // the code generator does not pipeline with cp.async before sm_80
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace tl::cuda
