// wgmma (sm_90a): warpgroup-wide asynchronous matrix multiply-accumulate with operands in shared
// memory described by 64-bit matrix descriptors, accumulators in registers.
//
// Why: wgmma is the only way to reach Hopper's dense tensor-core rate. One instruction computes
// D[64 x N] (+)= A[64 x 16] * B[16 x N] for the 128 threads of a warpgroup; it is issued
// asynchronously (fence -> mma... -> commit_group -> wait_group<n>), so several k-steps are in
// flight while the warpgroup waits on the next TMA stage.
//
// Shared-memory layouts used here (the ones TMA produces with CU_TENSOR_MAP_SWIZZLE_128B, tile
// base 1024-byte aligned; 16-bit elements, so 64 elements fill one 128-byte row):
//   K-major   (A [M,K] row-major; B given as [N,K] row-major): rows of 64 K-elements (128 B), one
//             row per M (or N) index, 8-row groups of 1024 B, the 16-byte chunks of row r XORed
//             with r % 8. Descriptor: SBO = 1024 (next 8 rows), LBO unused (set to 1), and a k16
//             step inside the 64-wide row advances the start address by 32 bytes.
//   MN-major  (B given as [K,N] row-major, the seed matmul's layout): boxes of 64 N x BLOCK_K,
//             each row = 64 N-elements (128 B) for one k, 8 k-rows per 1024 B group, boxes of
//             64 N placed one after another (BLOCK_K * 128 bytes apart). Descriptor: LBO = the box
//             stride (next 64 N), SBO = 1024 (next 8 k), a k16 step advances 16 rows = 2048 bytes,
//             and the instruction's transpose bit for B is set (imm-trans-b = 1).
//
// Accumulator fragment of m64nNk16 with FP32 D, thread t of the warpgroup (w = t / 32, l = t % 32),
// register i in [0, N/2):
//     row = 16 * w + l / 4 + 8 * ((i / 2) % 2)
//     col = 8 * (i / 4) + 2 * (l % 4) + (i % 2)
// i.e. for each 8-column block j the thread holds (row0, c), (row0, c+1), (row0+8, c), (row0+8,
// c+1) with row0 = 16w + l/4, c = 8j + 2(l%4), in registers 4j .. 4j+3. Index the array only with
// compile-time constants (unrolled loops), or it moves to local memory.
#pragma once

#include "tl/device/cuda/arch.h"
#include "tl/device/cuda/wgmma_ops.h"

namespace tl::cuda {

// Swizzle mode field of the descriptor (bits 62-63).
enum class SmemSwizzle : uint32_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

// Matrix descriptor (PTX ISA "Matrix Descriptor Format" for wgmma):
//   bits  0-13  start address >> 4         bits 16-29  leading-dimension byte offset >> 4
//   bits 32-45  stride-dimension byte offset >> 4
//   bits 49-51  base offset (0: the swizzle pattern starts on its natural boundary, 1024 B for
//               128-byte swizzle, which our tiles guarantee)
//   bits 62-63  swizzle mode
TL_DEVICE uint64_t make_smem_desc(uint32_t smem_byte_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                  SmemSwizzle swizzle) {
  uint64_t d = 0;
  d |= uint64_t((smem_byte_addr & 0x3FFFFu) >> 4);
  d |= uint64_t((lbo_bytes & 0x3FFFFu) >> 4) << 16;
  d |= uint64_t((sbo_bytes & 0x3FFFFu) >> 4) << 32;
  d |= uint64_t(uint32_t(swizzle)) << 62;
  return d;
}
TL_DEVICE uint64_t make_smem_desc(const void* smem_ptr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                  SmemSwizzle swizzle) {
  return make_smem_desc(smem_addr(smem_ptr), lbo_bytes, sbo_bytes, swizzle);
}

// Descriptor of a K-major, 128-byte-swizzled tile of 16-bit elements (rows of 64 K-elements).
TL_DEVICE uint64_t make_smem_desc_kmajor_sw128(const void* tile) {
  return make_smem_desc(tile, 16u, 1024u, SmemSwizzle::k128B);
}
// Descriptor of an MN-major, 128-byte-swizzled tile of 16-bit elements made of boxes of 64 MN x
// (box_bytes / 128) K, the boxes `box_bytes` apart.
TL_DEVICE uint64_t make_smem_desc_mnmajor_sw128(const void* tile, uint32_t box_bytes) {
  return make_smem_desc(tile, box_bytes, 1024u, SmemSwizzle::k128B);
}
// Moves a descriptor's start address by `bytes` (a multiple of 16; the address field cannot carry
// past 14 bits for addresses inside the 228 KB of shared memory).
TL_DEVICE uint64_t smem_desc_add(uint64_t desc, uint32_t bytes) { return desc + uint64_t(bytes >> 4); }

// ---------------------------------------------------------------------------------------------
// Ordering of the asynchronous operations (all warpgroup-collective: every thread executes them).

// Before the first wgmma of a batch, and whenever registers used by wgmma were touched by other
// instructions since the last one (e.g. accumulators zeroed or read).
TL_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
// Closes the batch of wgmma issued since the last commit into one wgmma-group.
TL_DEVICE void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most kPending wgmma-groups of this warpgroup are in flight.
template <int kPending>
TL_DEVICE void wgmma_wait_group() {
  static_assert(kPending >= 0 && kPending <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// The compiler does not know that wgmma writes the accumulators asynchronously: pin every
// accumulator register (float or int32_t) at a point (after wgmma_wait_group before reading them,
// after writing them before wgmma_fence), so no read or write moves across it.
template <int kN, class Acc>
TL_DEVICE void fence_accumulators(Acc (&acc)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) fence_operand(acc[i]);
}

// ---------------------------------------------------------------------------------------------
// D[64 x N] (+)= A[64 x 16] * B[16 x N], FP32 accumulate, A and B (bfloat16_t or half_t) from
// shared memory. kTransB = false: B K-major; true: B N-major; kTransA likewise for A (M-major).
// accumulate = false overwrites D (D = A*B).
template <class T, int N, bool kTransB, bool kTransA = false>
TL_DEVICE void wgmma_m64k16_ss([[maybe_unused]] uint64_t desc_a, [[maybe_unused]] uint64_t desc_b,
                               [[maybe_unused]] float (&d)[N / 2], [[maybe_unused]] bool accumulate = true) {
  static_assert(is_same_v<T, bfloat16_t> || is_same_v<T, half_t>, "wgmma k16: bfloat16_t or half_t inputs");
#if defined(TL_CUDA_SM90A)
  detail::WgmmaSsF32<N>::template run<is_same_v<T, bfloat16_t>, kTransA ? 1 : 0, kTransB ? 1 : 0>(desc_a, desc_b, d,
                                                                                              accumulate ? 1u : 0u);
#else
  __trap();  // wgmma needs sm_90a: compile with -gencode=arch=compute_90a,code=sm_90a
#endif
}

// D[64 x N] (+)= A[64 x 16] * B[16 x N] with A from registers: `a` is this thread's A fragment,
// two 16-bit elements a register, laid out as the accumulator above over two adjacent 8-column
// blocks (register 0: row0, columns c and c+1; 1: row0 + 8, the same columns; 2 and 3: likewise 8
// columns on), so an FP32 accumulator's 16 columns packed in pairs are it as they stand. B as in
// wgmma_m64k16_ss. The registers must not change until a wait covers the instruction.
template <class T, int N, bool kTransB>
TL_DEVICE void wgmma_m64k16_rs([[maybe_unused]] const uint32_t (&a)[4], [[maybe_unused]] uint64_t desc_b,
                               [[maybe_unused]] float (&d)[N / 2], [[maybe_unused]] bool accumulate = true) {
  static_assert(is_same_v<T, bfloat16_t> || is_same_v<T, half_t>, "wgmma k16: bfloat16_t or half_t inputs");
#if defined(TL_CUDA_SM90A)
  detail::WgmmaRsF32<N>::template run<is_same_v<T, bfloat16_t>, kTransB ? 1 : 0>(a, desc_b, d, accumulate ? 1u : 0u);
#else
  __trap();  // wgmma needs sm_90a: compile with -gencode=arch=compute_90a,code=sm_90a
#endif
}

// D[64 x N] (+)= A[64 x 32] * B[32 x N], FP32 accumulate, A and B 8-bit floats (e4m3, or e5m2 with
// kAE5M2 / kBE5M2; the two may differ) from shared memory, both K-major (8-bit wgmma has no
// transposed operands). The 128-byte swizzled K-major tiles of make_smem_desc_kmajor_sw128 hold 128
// K-elements per row here, and a k32 step advances the start address by 32 bytes, as a k16 step
// does for 16-bit inputs.
template <int N, bool kAE5M2 = false, bool kBE5M2 = kAE5M2>
TL_DEVICE void wgmma_m64k32_ss_fp8([[maybe_unused]] uint64_t desc_a, [[maybe_unused]] uint64_t desc_b,
                                   [[maybe_unused]] float (&d)[N / 2], [[maybe_unused]] bool accumulate = true) {
#if defined(TL_CUDA_SM90A)
  detail::WgmmaSsF32Fp8<N>::template run<kAE5M2, kBE5M2>(desc_a, desc_b, d, accumulate ? 1u : 0u);
#else
  __trap();  // wgmma needs sm_90a: compile with -gencode=arch=compute_90a,code=sm_90a
#endif
}

// The same for 8-bit integers into a 32-bit integer accumulator (int8, or uint8 with kAUnsigned /
// kBUnsigned): exact products, sums that wrap modulo 2^32 (no saturation). The accumulator fragment
// has the FP32 layout above.
template <int N, bool kAUnsigned = false, bool kBUnsigned = false>
TL_DEVICE void wgmma_m64k32_ss_int8([[maybe_unused]] uint64_t desc_a, [[maybe_unused]] uint64_t desc_b,
                                    [[maybe_unused]] int32_t (&d)[N / 2], [[maybe_unused]] bool accumulate = true) {
#if defined(TL_CUDA_SM90A)
  detail::WgmmaSsS32Int8<N>::template run<kAUnsigned, kBUnsigned>(desc_a, desc_b, d, accumulate ? 1u : 0u);
#else
  __trap();  // wgmma needs sm_90a: compile with -gencode=arch=compute_90a,code=sm_90a
#endif
}

// The 8-bit forms with A from registers: `a` is this thread's A fragment of the k32 step, four
// 8-bit elements a register (low byte first), with q = l % 4: register 0 holds row0, columns 4q ..
// 4q + 3; register 1 row0 + 8, the same columns; registers 2 and 3 likewise 16 columns on. (Not
// the FP32 accumulator's column order: a thread holds 4 adjacent columns of each 16, not 2 of each
// 8 -- converting an accumulator into this fragment moves bytes within each quad of lanes.) B as in
// wgmma_m64k32_ss_fp8 / _int8. The registers must not change until a wait covers the instruction.
template <int N, bool kAE5M2 = false, bool kBE5M2 = kAE5M2>
TL_DEVICE void wgmma_m64k32_rs_fp8([[maybe_unused]] const uint32_t (&a)[4], [[maybe_unused]] uint64_t desc_b,
                                   [[maybe_unused]] float (&d)[N / 2], [[maybe_unused]] bool accumulate = true) {
#if defined(TL_CUDA_SM90A)
  detail::WgmmaRsF32Fp8<N>::template run<kAE5M2, kBE5M2>(a, desc_b, d, accumulate ? 1u : 0u);
#else
  __trap();  // wgmma needs sm_90a: compile with -gencode=arch=compute_90a,code=sm_90a
#endif
}
template <int N, bool kAUnsigned = false, bool kBUnsigned = false>
TL_DEVICE void wgmma_m64k32_rs_int8([[maybe_unused]] const uint32_t (&a)[4], [[maybe_unused]] uint64_t desc_b,
                                    [[maybe_unused]] int32_t (&d)[N / 2], [[maybe_unused]] bool accumulate = true) {
#if defined(TL_CUDA_SM90A)
  detail::WgmmaRsS32Int8<N>::template run<kAUnsigned, kBUnsigned>(a, desc_b, d, accumulate ? 1u : 0u);
#else
  __trap();  // wgmma needs sm_90a: compile with -gencode=arch=compute_90a,code=sm_90a
#endif
}

}  // namespace tl::cuda
