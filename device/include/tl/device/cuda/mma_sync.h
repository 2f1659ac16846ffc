// Warp-level tensor-core matrix multiply (mma.sync.m16n8k16, sm_80 and later) on tiles held in
// shared memory, for T.gemm: C (float, shared) (=|+=) op(A) * op(B) with A and B in bf16 or f16.
//
// Why here: it is the portable tensor-core path (Ampere, Ada, Hopper) of T.gemm while the
// Hopper-only wgmma lowering with register fragments is built; each call reads C into registers,
// accumulates the whole K extent, and writes C back, so fragments can stay in shared memory.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16/.f16 inputs; g = lane / 4, t = lane % 4):
//   A (16 x 16): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16 x 8):  b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C (16 x 8):  c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1]
#pragma once

#include "tl/device/cuda/arch.h"
#include "tl/device/numeric.h"

namespace tl::cuda {

// Two 16-bit values packed into one 32-bit register, low half first.
__device__ __forceinline__ uint32_t pack2(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (is_same_v<T, half_t>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  __trap();  // no tensor cores before sm_80; the code generator does not choose this path there
#endif
}

// C[i*ldc + j] (=|+=) sum_k opA(i,k) opB(k,j) for an M x N x K problem with M % 32 == 0,
// N % 32 == 0, K % 16 == 0, every warp of the block taking 32 x 32 tiles of C in turn. All threads
// of the block call it (a multiple of 32 of them); it does not synchronize.
template <class T>
__device__ __forceinline__ void tile_gemm_mma(int M, int N, int K, const T* A, int64_t lda, bool trans_a, const T* B, int64_t ldb,
                                              bool trans_b, float* C, int64_t ldc, bool clear) {
  constexpr int kMI = 2, kNI = 4;  // a warp tile is 2 x 4 mma tiles: 32 x 32 of C
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5, warps = int(blockDim.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const uint16_t* a16 = reinterpret_cast<const uint16_t*>(A);
  const uint16_t* b16 = reinterpret_cast<const uint16_t*>(B);
  auto a_at = [&](int i, int k) -> uint16_t { return trans_a ? a16[int64_t(k) * lda + i] : a16[int64_t(i) * lda + k]; };
  auto b_at = [&](int k, int j) -> uint16_t { return trans_b ? b16[int64_t(j) * ldb + k] : b16[int64_t(k) * ldb + j]; };
  const int tiles_n = N / (8 * kNI), tiles = (M / (16 * kMI)) * tiles_n;
  for (int tile = warp; tile < tiles; tile += warps) {
    const int i0 = (tile / tiles_n) * 16 * kMI, j0 = (tile % tiles_n) * 8 * kNI;
    float acc[kMI][kNI][4];
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni) {
        const int r = i0 + mi * 16 + g, c = j0 + ni * 8 + 2 * t;
        acc[mi][ni][0] = clear ? 0.0f : C[int64_t(r) * ldc + c];
        acc[mi][ni][1] = clear ? 0.0f : C[int64_t(r) * ldc + c + 1];
        acc[mi][ni][2] = clear ? 0.0f : C[int64_t(r + 8) * ldc + c];
        acc[mi][ni][3] = clear ? 0.0f : C[int64_t(r + 8) * ldc + c + 1];
      }
    for (int k0 = 0; k0 < K; k0 += 16) {
      uint32_t a[kMI][4], b[kNI][2];
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi) {
        const int r = i0 + mi * 16 + g, k = k0 + 2 * t;
        a[mi][0] = pack2(a_at(r, k), a_at(r, k + 1));
        a[mi][1] = pack2(a_at(r + 8, k), a_at(r + 8, k + 1));
        a[mi][2] = pack2(a_at(r, k + 8), a_at(r, k + 9));
        a[mi][3] = pack2(a_at(r + 8, k + 8), a_at(r + 8, k + 9));
      }
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni) {
        const int c = j0 + ni * 8 + g, k = k0 + 2 * t;
        b[ni][0] = pack2(b_at(k, c), b_at(k + 1, c));
        b[ni][1] = pack2(b_at(k + 8, c), b_at(k + 9, c));
      }
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
        for (int ni = 0; ni < kNI; ++ni) mma_m16n8k16<T>(acc[mi][ni], a[mi], b[ni]);
    }
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni) {
        const int r = i0 + mi * 16 + g, c = j0 + ni * 8 + 2 * t;
        C[int64_t(r) * ldc + c] = acc[mi][ni][0];
        C[int64_t(r) * ldc + c + 1] = acc[mi][ni][1];
        C[int64_t(r + 8) * ldc + c] = acc[mi][ni][2];
        C[int64_t(r + 8) * ldc + c + 1] = acc[mi][ni][3];
      }
  }
}

}  // namespace tl::cuda
