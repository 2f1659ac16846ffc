// Warp-level tensor-core matrix multiply (mma.sync, sm_80 and later) for T.gemm: C (float)
// (=|+=) op(A) * op(B) with A and B in bf16 or f16 in shared memory (m16n8k16), and C either in the
// threads' registers (tile_gemm_mma_regs, the layout of tilelang/ir/fragment_layout.h) or in shared
// memory (tile_gemm_mma: each call reads C into registers and writes it back); in registers also
// 8-bit A and B, K-major (m16n8k32): int8 / uint8 into an int32 C (sm_80), e4m3 / e5m2 into float
// (sm_89).
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

// The 8-bit form, m16n8k32 (PTX ISA, .s8/.u8 and .e4m3/.e5m2 inputs): in bytes its A and B
// fragments are the m16n8k16 ones above -- a0 = A[g][4t..4t+3], a2 = A[g][4t+16..], b0 =
// B[4t..4t+3][g], b1 = B[4t+16..][g] -- and C's is the same. Integers sum in int32 (wrapping).
template <class TA, class TB, class Acc>
__device__ __forceinline__ void mma_m16n8k32([[maybe_unused]] Acc (&c)[4], [[maybe_unused]] const uint32_t (&a)[4],
                                             [[maybe_unused]] const uint32_t (&b)[2]) {
  constexpr bool kInt = is_same_v<Acc, int32_t>;
  static_assert(kInt ? (is_same_v<TA, int8_t> || is_same_v<TA, uint8_t>) && (is_same_v<TB, int8_t> || is_same_v<TB, uint8_t>)
                     : is_same_v<Acc, float> && (is_same_v<TA, float8_e4m3_t> || is_same_v<TA, float8_e5m2_t>) &&
                           (is_same_v<TB, float8_e4m3_t> || is_same_v<TB, float8_e5m2_t>),
                "m16n8k32: int8/uint8 into int32, or e4m3/e5m2 into float");
#define TL_MMA_K32(D, TA_, TB_, REG)                                                                                               \
  asm volatile("mma.sync.aligned.m16n8k32.row.col." D "." TA_ "." TB_ "." D " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
               : REG(c[0]), REG(c[1]), REG(c[2]), REG(c[3])                                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kInt) {
    constexpr bool ua = is_same_v<TA, uint8_t>, ub = is_same_v<TB, uint8_t>;
    if constexpr (ua && ub) TL_MMA_K32("s32", "u8", "u8", "+r");
    else if constexpr (ua) TL_MMA_K32("s32", "u8", "s8", "+r");
    else if constexpr (ub) TL_MMA_K32("s32", "s8", "u8", "+r");
    else TL_MMA_K32("s32", "s8", "s8", "+r");
    return;
  }
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (!kInt) {
    constexpr bool ea = is_same_v<TA, float8_e5m2_t>, eb = is_same_v<TB, float8_e5m2_t>;
    if constexpr (ea && eb) TL_MMA_K32("f32", "e5m2", "e5m2", "+f");
    else if constexpr (ea) TL_MMA_K32("f32", "e5m2", "e4m3", "+f");
    else if constexpr (eb) TL_MMA_K32("f32", "e4m3", "e5m2", "+f");
    else TL_MMA_K32("f32", "e4m3", "e4m3", "+f");
    return;
  }
#endif
#undef TL_MMA_K32
  __trap();  // integers need sm_80, float8 sm_89; the code generator does not choose this path below them
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

// The address of element (row, col) of an operand tile with rows of kLd elements (col at the start
// of a 16-byte chunk, so the chunk is whole); a swizzled tile has kRows rows.
template <int kLd, bool kSwizzled, int kRows, class T>
__device__ __forceinline__ const T* operand_at(const T* base, int row, int col) {
  if constexpr (kSwizzled) return base + swizzled_offset<kLd, int(sizeof(T)), kRows>(row, col);
  else return base + int64_t(row) * kLd + col;
}

// acc (=|+=) opA(A) * opB(B) over K (a multiple of 16; of 32 for 8-bit inputs, which are K-major:
// A [M, K], B [N, K], with an int32 acc for integers) for the block's accumulator tile in registers:
// warp w owns the warp tile at row block w / kWarpsN, column block w % kWarpsN, of kAtomsM x kAtomsN
// atoms of 16 x 8 (kAtomsN even); register 4 * (am * kAtomsN + an) + c of a lane holds atom (am, an)
// at row lane / 4 + 8 * (c / 2), column 2 * (lane % 4) + c % 2. A is M x K (K x M when kTransA), B
// is K x N (N x K when kTransB), in shared memory with rows 16-byte aligned; kSwizzleA / kSwizzleB:
// the operand is a swizzled tile (swizzle.h) of kRowsA / kRowsB rows of lda / ldb elements, read
// from a row that is a multiple of 8. All threads of the block call it; it does not synchronize.
template <class T, bool kTransA, bool kTransB, int kWarpsN, int kAtomsM, int kAtomsN, bool kSwizzleA, bool kSwizzleB, int kLda, int kLdb,
          int kRowsA, int kRowsB, class TB = T, class Acc = float>
__device__ __forceinline__ void tile_gemm_mma_regs(int K, const T* A, const TB* B, Acc* acc, bool clear) {
  static_assert(kAtomsN % 2 == 0, "ldmatrix.x4 loads B for two atoms of 8 columns at once");
  static_assert(sizeof(T) == sizeof(TB) && (sizeof(T) == 2 ? is_same_v<T, TB> && is_same_v<Acc, float> : sizeof(T) == 1 && !kTransA && kTransB),
                "mma.sync tiles: 16-bit inputs of one type into float, or K-major 8-bit inputs");
  // ldmatrix moves 16-byte rows: 8 elements of 16 bits, 16 of 8 bits (a k32 step's bytes are a k16 step's).
  constexpr int kChunk = 16 / int(sizeof(T));
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int row0 = (warp / kWarpsN) * kAtomsM * 16, col0 = (warp % kWarpsN) * kAtomsN * 8;
  if (clear)
#pragma unroll
    for (int i = 0; i < kAtomsM * kAtomsN * 4; ++i) acc[i] = Acc(0);
  // The row each lane addresses for ldmatrix.x4, and which 16-byte half of the k step it starts at.
  const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8, lhalf = (lane >> 4) * kChunk;
  for (int k0 = 0; k0 < K; k0 += 2 * kChunk) {
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
        ldmatrix_x4<false>(r, operand_at<kLdb, kSwizzleB, kRowsB>(B, n + (lane & 7) + (lane >> 4) * 8, k0 + ((lane >> 3) & 1) * kChunk));
      else
        ldmatrix_x4<true>(r, operand_at<kLdb, kSwizzleB, kRowsB>(B, k0 + lrow, n + lhalf));
      b[an][0] = r[0], b[an][1] = r[1], b[an + 1][0] = r[2], b[an + 1][1] = r[3];
    }
#pragma unroll
    for (int am = 0; am < kAtomsM; ++am)
#pragma unroll
      for (int an = 0; an < kAtomsN; ++an) {
        Acc(&c)[4] = *reinterpret_cast<Acc(*)[4]>(acc + 4 * (am * kAtomsN + an));
        if constexpr (sizeof(T) == 2) mma_m16n8k16<T>(c, a[am], b[an]);
        else mma_m16n8k32<T, TB>(c, a[am], b[an]);
      }
  }
}

}  // namespace tl::cuda
