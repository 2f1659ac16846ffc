// The operand preparation kernel of the GPU path: a contiguous copy of a strided 3-D view, with an
// element conversion. The GEMM kernel (sm90_gemm.cuh) reads A and B K-major through TMA (FP8 wgmma
// has no transposed operands) and FP32 scale factors; operands given MN-major (the nn/tn/tt
// layouts) and UE8M0 scales go through this copy first. FP4 B is expanded inside the GEMM kernel
// (fp4_expand_tile below).
//
//   out[(g * rows + r) * out_ld + c] = TOut(in[g * s_g + r * s_r + c * s_c])   (out_ld >= cols)
//
// Launch: block (32, 8), grid (ceil(cols / 32), ceil(rows / 32), groups). Each block moves a 32 x 32
// tile through shared memory, so both the strided read (along whichever of r and c is contiguous
// in the source) and the contiguous write are coalesced.
#pragma once

#include "tl/device/cuda/arch.h"

namespace deepgemm::kernels {

template <class TIn, class TOut>
__device__ __forceinline__ TOut layout_convert(TIn x) {
  if constexpr (tl::cuda::is_same_v<TIn, TOut>) {
    return x;
  } else {
    return TOut(x.to_float());  // ue8m0_t -> float: the power of two
  }
}

template <class TIn, class TOut>
__device__ __forceinline__ void layout_copy_body(const TIn* __restrict__ in, TOut* __restrict__ out, int rows,
                                                 int cols, tl::int64_t s_g, tl::int64_t s_r, tl::int64_t s_c,
                                                 tl::int64_t out_ld) {
  __shared__ TOut tile[32][33];  // [c - c0][r - r0]; the padding column avoids bank conflicts
  const int g = int(blockIdx.z), r0 = int(blockIdx.y) * 32, c0 = int(blockIdx.x) * 32;
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const TIn* src = in + g * s_g;
  const bool rows_contiguous = s_r == 1 && s_c != 1;  // lanes walk r when the source is contiguous along r
#pragma unroll
  for (int i = 0; i < 32; i += 8) {
    const int lr = rows_contiguous ? tx : ty + i, lc = rows_contiguous ? ty + i : tx;
    const int r = r0 + lr, c = c0 + lc;
    if (r < rows && c < cols) tile[lc][lr] = layout_convert<TIn, TOut>(src[r * s_r + c * s_c]);
  }
  __syncthreads();
  TOut* dst = out + tl::int64_t(g) * rows * out_ld;
#pragma unroll
  for (int i = 0; i < 32; i += 8) {
    const int r = r0 + ty + i, c = c0 + tx;
    if (r < rows && c < cols) dst[tl::int64_t(r) * out_ld + c] = tile[tx][ty + i];
  }
}

// Eight e2m1 values (w: value i in nibble i, the low nibble first) as eight e4m3 codes, exactly
// (every e2m1 value is an e4m3 value): values 0-3 in the low word, 4-7 in the high one. A byte
// permute looks up the magnitudes (0, 0.5, 1, 1.5, 2, 3, 4, 6); the sign bits move from bit 3 of
// each nibble to bit 7 of each byte.
__device__ __forceinline__ void e2m1x8_to_e4m3x8(tl::uint32_t w, tl::uint32_t& lo, tl::uint32_t& hi) {
  constexpr tl::uint32_t kTable0 = 0x3C383000u, kTable1 = 0x4C484440u;  // codes of magnitudes 0-3, 4-7
  auto magnitudes = [](tl::uint32_t selector) {
    tl::uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(kTable0), "r"(kTable1), "r"(selector & 0x7777u));
    return r;
  };
  auto signs = [](tl::uint32_t nibbles) {  // bit 4i + 3 -> bit 8i + 7, i = 0..3
    tl::uint32_t t = nibbles & 0x8888u;
    t = (t | (t << 8)) & 0x00880088u;
    t = (t | (t << 4)) & 0x08080808u;
    return t << 4;
  };
  lo = magnitudes(w) | signs(w);
  hi = magnitudes(w >> 16) | signs(w >> 16);
}

// The FP4 B tile of one pipeline stage, expanded in shared memory for wgmma (sm90_gemm.cuh with
// kFp4B): `packed` holds kRows rows of 64 bytes (128 e2m1 values of K, as TMA loaded them, no
// swizzle); `out` receives kRows rows of 128 e4m3 bytes in the 128-byte swizzle TMA would have
// written (16-byte chunk j of row r at chunk j ^ (r % 8); `out` 1024-byte aligned). Thread `tid` of
// `threads` takes every threads-th 16-byte packed chunk. Shared-memory addresses.
template <int kRows>
__device__ __forceinline__ void fp4_expand_tile(tl::uint32_t packed, tl::uint32_t out, int tid, int threads) {
  for (int i = tid; i < kRows * 4; i += threads) {
    const int r = i >> 2, q = i & 3;
    tl::uint32_t v[4], o[8];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "r"(packed + tl::uint32_t(r * 64 + q * 16)));
#pragma unroll
    for (int j = 0; j < 4; ++j) e2m1x8_to_e4m3x8(v[j], o[2 * j], o[2 * j + 1]);
    // Packed chunk q holds K 32q .. 32q + 31: output chunks 2q and 2q + 1.
    const tl::uint32_t row = out + tl::uint32_t(r * 128);
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(row + (tl::uint32_t((2 * q) ^ (r & 7)) << 4)),
                 "r"(o[0]), "r"(o[1]), "r"(o[2]), "r"(o[3])
                 : "memory");
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(row + (tl::uint32_t((2 * q + 1) ^ (r & 7)) << 4)),
                 "r"(o[4]), "r"(o[5]), "r"(o[6]), "r"(o[7])
                 : "memory");
  }
}

}  // namespace deepgemm::kernels
