// Warp-level tensor-core matrix multiply (mma.sync.m16n8k16, sm_80 and later) for T.gemm:
// C (float) (=|+=) op(A) * op(B) with A and B in bf16 or f16 in shared memory, and C either in
// the threads' registers (tile_gemm_mma_regs, the layout of tilelang/ir/fragment_layout.h) or in
// shared memory (tile_gemm_mma: each call reads C into registers and writes it back).
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16/.f16 inputs; g = lane / 4, t = lane % 4):
//   A (16 x 16): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16 x 8):  b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C (16 x 8):  c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1]
#pragma once

#include "tl/device/cuda/arch.h"
#include "tl/device/cuda/swizzle.h"
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
// N % 32 == 0, K % 16 == 0, every warp of the kernel's `threads` (the first of the block, a multiple
// of 32) taking 32 x 32 tiles of C in turn. Each of them calls it; it does not synchronize.
template <class T>
__device__ __forceinline__ void tile_gemm_mma(int M, int N, int K, const T* A, int64_t lda, bool trans_a, const T* B, int64_t ldb,
                                              bool trans_b, float* C, int64_t ldc, bool clear, int threads) {
  constexpr int kMI = 2, kNI = 4;  // a warp tile is 2 x 4 mma tiles: 32 x 32 of C
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5, warps = threads >> 5;
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

// Four 8 x 8 matrices of 16-bit elements from shared memory into one register each: lane l gives the
// address of row l % 8 of matrix l / 8; with kTrans each matrix arrives transposed.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
#else
  __trap();
#endif
}

// The address of 16-bit element (row, col) of an operand tile with rows of kLd elements (col a
// multiple of 8, so the 16-byte chunk it starts is whole); a swizzled tile has kRows rows.
template <int kLd, bool kSwizzled, int kRows, class T>
__device__ __forceinline__ const T* operand_at(const T* base, int row, int col) {
  if constexpr (kSwizzled) return base + swizzled_offset<kLd, 2, kRows>(row, col);
  else return base + int64_t(row) * kLd + col;
}

// acc (=|+=) opA(A) * opB(B) over K (a multiple of 16) for the block's accumulator tile in registers:
// warp w owns the warp tile at row block w / kWarpsN, column block w % kWarpsN, of kAtomsM x kAtomsN
// atoms of 16 x 8 (kAtomsN even); register 4 * (am * kAtomsN + an) + c of a lane holds atom (am, an)
// at row lane / 4 + 8 * (c / 2), column 2 * (lane % 4) + c % 2. A is M x K (K x M when kTransA), B
// is K x N (N x K when kTransB), in shared memory with rows 16-byte aligned; kSwizzleA / kSwizzleB:
// the operand is a swizzled tile (swizzle.h) of kRowsA / kRowsB rows of lda / ldb elements, read
// from a row that is a multiple of 8. All threads of the block call it; it does not synchronize.
template <class T, bool kTransA, bool kTransB, int kWarpsN, int kAtomsM, int kAtomsN, bool kSwizzleA, bool kSwizzleB, int kLda, int kLdb,
          int kRowsA, int kRowsB>
__device__ __forceinline__ void tile_gemm_mma_regs(int K, const T* A, const T* B, float* acc, bool clear) {
  static_assert(kAtomsN % 2 == 0, "ldmatrix.x4 loads B for two atoms of 8 columns at once");
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int row0 = (warp / kWarpsN) * kAtomsM * 16, col0 = (warp % kWarpsN) * kAtomsN * 8;
  if (clear)
#pragma unroll
    for (int i = 0; i < kAtomsM * kAtomsN * 4; ++i) acc[i] = 0.0f;
  // The row each lane addresses for ldmatrix.x4, and which 8-element half of the 16 it starts at.
  const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8, lhalf = (lane >> 4) * 8;
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t a[kAtomsM][4], b[kAtomsN][2];
#pragma unroll
    for (int am = 0; am < kAtomsM; ++am) {
      const int m = row0 + am * 16;
      // Matrices: (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
      if constexpr (kTransA)  // A stored K x M: rows of the stored matrix run along k
        ldmatrix_x4<true>(a[am], operand_at<kLda, kSwizzleA, kRowsA>(A, k0 + (lane & 7) + (lane >> 4) * 8, m + ((lane >> 3) & 1) * 8));
      else
        ldmatrix_x4<false>(a[am], operand_at<kLda, kSwizzleA, kRowsA>(A, m + lrow, k0 + lhalf));
    }
#pragma unroll
    for (int an = 0; an < kAtomsN; an += 2) {
      const int n = col0 + an * 8;
      uint32_t r[4];
      // Matrices: b0 and b1 of column atom an, then b0 and b1 of atom an + 1.
      if constexpr (kTransB)  // B stored N x K: rows run along n
        ldmatrix_x4<false>(r, operand_at<kLdb, kSwizzleB, kRowsB>(B, n + (lane & 7) + (lane >> 4) * 8, k0 + ((lane >> 3) & 1) * 8));
      else
        ldmatrix_x4<true>(r, operand_at<kLdb, kSwizzleB, kRowsB>(B, k0 + lrow, n + lhalf));
      b[an][0] = r[0], b[an][1] = r[1], b[an + 1][0] = r[2], b[an + 1][1] = r[3];
    }
#pragma unroll
    for (int am = 0; am < kAtomsM; ++am)
#pragma unroll
      for (int an = 0; an < kAtomsN; ++an) {
        float(&c)[4] = *reinterpret_cast<float(*)[4]>(acc + 4 * (am * kAtomsN + an));
        mma_m16n8k16<T>(c, a[am], b[an]);
      }
  }
}

}  // namespace tl::cuda
