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

// The e4m3 codes of the e2m1 magnitudes (0, 0.5, 1, 1.5, 2, 3, 4, 6), four per word: exact, every
// e2m1 value is an e4m3 value.
inline constexpr tl::uint32_t kE2m1Codes0 = 0x3C383000u, kE2m1Codes1 = 0x4C484440u;

// The e4m3 codes of the e2m1 magnitudes times `ratio` (a power of two <= 1; round to nearest, so
// magnitudes below e4m3's smallest subnormal, 2^-9, round to 0 or 2^-9), as two table words.
__device__ __forceinline__ void scaled_e2m1_codes(float ratio, tl::uint32_t& t0, tl::uint32_t& t1) {
  auto pair = [&](float lo, float hi) {  // two codes: lo in the low byte
    tl::uint16_t r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi * ratio), "f"(lo * ratio));
    return tl::uint32_t(r);
  };
  t0 = pair(0.0f, 0.5f) | (pair(1.0f, 1.5f) << 16);
  t1 = pair(2.0f, 3.0f) | (pair(4.0f, 6.0f) << 16);
}

// Eight e2m1 values (w: value i in nibble i, the low nibble first) as eight e4m3 codes: values 0-3
// in the low word, 4-7 in the high one. Byte permutes do both halves of the work, four values
// each: one looks up the magnitudes in the table words (t0: magnitudes 0-3, t1: 4-7; kE2m1Codes
// for the values themselves), one picks 0x00 or 0x80 for the signs moved to bit 0 of each nibble
// (about half the instructions of moving the sign bits with shifts and masks).
__device__ __forceinline__ void e2m1x8_to_e4m3x8(tl::uint32_t w, tl::uint32_t t0, tl::uint32_t t1,
                                                 tl::uint32_t& lo, tl::uint32_t& hi) {
  auto permute = [](tl::uint32_t a, tl::uint32_t b, tl::uint32_t selector) {  // selector's low 4 nibbles
    tl::uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
    return r;
  };
  constexpr tl::uint32_t kSignBytes = 0x00008000u;  // byte 0: 0x00 (positive), byte 1: 0x80
  const tl::uint32_t magnitude = w & 0x77777777u, sign = (w >> 3) & 0x11111111u;
  lo = permute(t0, t1, magnitude) | permute(kSignBytes, 0u, sign);
  hi = permute(t0, t1, magnitude >> 16) | permute(kSignBytes, 0u, sign >> 16);
}

// The same eight values as e4m3 codes of the values / 64, without a table: an e2m1 code's three
// magnitude bits shifted into bits 2-4 and its sign into bit 7 read, as e4m3, 2^-6 times the value
// (exact for every e2m1 value, 0.5 becoming a subnormal); the caller multiplies the product by 64.
// Each byte's two nibbles are converted where they lie, then interleaved: 9 instructions against 11.
__device__ __forceinline__ void e2m1x8_to_e4m3x8_over64(tl::uint32_t w, tl::uint32_t& lo, tl::uint32_t& hi) {
  const tl::uint32_t even = ((w << 4) & 0x80808080u) | ((w << 2) & 0x1C1C1C1Cu);  // values 0, 2, 4, 6
  const tl::uint32_t odd = (w & 0x80808080u) | ((w >> 2) & 0x1C1C1C1Cu);         // values 1, 3, 5, 7
  asm("prmt.b32 %0, %1, %2, 0x5140;" : "=r"(lo) : "r"(even), "r"(odd));
  asm("prmt.b32 %0, %1, %2, 0x7362;" : "=r"(hi) : "r"(even), "r"(odd));
}

// One 16-byte chunk of packed FP4 B (32 values of K: 32q .. 32q + 31 of row r) expanded with the
// table words t0/t1 into output chunks 2q and 2q + 1 of the 128-byte swizzled row (16-byte chunk j
// of row r at chunk j ^ (r % 8)). Shared-memory addresses.
__device__ __forceinline__ void fp4_expand_chunk(tl::uint32_t packed, tl::uint32_t out, int r, int q, tl::uint32_t t0,
                                                 tl::uint32_t t1) {
  tl::uint32_t v[4], o[8];
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(packed + tl::uint32_t(r * 64 + q * 16)));
#pragma unroll
  for (int j = 0; j < 4; ++j) e2m1x8_to_e4m3x8(v[j], t0, t1, o[2 * j], o[2 * j + 1]);
  const tl::uint32_t row = out + tl::uint32_t(r * 128);
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(row + (tl::uint32_t((2 * q) ^ (r & 7)) << 4)),
               "r"(o[0]), "r"(o[1]), "r"(o[2]), "r"(o[3])
               : "memory");
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(row + (tl::uint32_t((2 * q + 1) ^ (r & 7)) << 4)),
               "r"(o[4]), "r"(o[5]), "r"(o[6]), "r"(o[7])
               : "memory");
}

// The FP4 B tile of one pipeline stage, expanded in shared memory for wgmma (sm90_gemm.cuh with
// kFp4B): `packed` holds kRows rows of 64 bytes (128 e2m1 values of K, as TMA loaded them, no
// swizzle); `out` receives kRows rows of 128 e4m3 bytes in the 128-byte swizzle TMA would have
// written (`out` 1024-byte aligned). Thread `tid` of `threads` takes every threads-th chunk.
//
// kFold (power-of-two scales per row and 32 of K, `scales` [4][kRows] floats): each row's four
// groups are expanded times scale / the largest scale of the row's nonzero groups, which then
// replaces the first scale, so that the row is promoted once per 128 of K with it. Exact while a
// group's ratio is at least 2^-8 (e4m3's range); a smaller group rounds at e4m3's subnormal step,
// an error of at most 2^-10 of that largest scale per value, against values of at least 0.5 of it
// in the group that sets it. A thread takes whole rows: it alone reads and rewrites their scales.
template <int kRows, bool kFold>
__device__ __forceinline__ void fp4_expand_tile(tl::uint32_t packed, tl::uint32_t out, float* scales, int tid,
                                                int threads) {
  if constexpr (!kFold) {
    for (int i = tid; i < kRows * 4; i += threads)
      fp4_expand_chunk(packed, out, i >> 2, i & 3, kE2m1Codes0, kE2m1Codes1);
  } else {
    for (int r = tid; r < kRows; r += threads) {
      // Exponent fields compare powers of two (UE8M0's 2^-127 included: its field is 0). Groups
      // whose values are all zero do not count (a quantizer may give them any scale).
      // (The producer warpgroup runs this with 40 registers: the scales are read again below rather
      // than kept.)
      auto field = [](float x) { return int((__float_as_uint(x) >> 23) & 0xFFu); };
      int emax = -1;
      float smax = scales[r];
#pragma unroll 1
      for (int q = 0; q < 4; ++q) {
        const float sq = scales[q * kRows + r];
        tl::uint32_t v[4];
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                     : "r"(packed + tl::uint32_t(r * 64 + q * 16)));
        if (((v[0] | v[1] | v[2] | v[3]) & 0x77777777u) != 0 && field(sq) > emax) emax = field(sq), smax = sq;
      }
      if (emax < 0) emax = field(smax);
#pragma unroll 1
      for (int q = 0; q < 4; ++q) {
        const int d = emax - field(scales[q * kRows + r]);  // the group is 2^-d of the row's scale
        tl::uint32_t t0 = kE2m1Codes0, t1 = kE2m1Codes1;
        if (d > 0) scaled_e2m1_codes(d < 127 ? __uint_as_float(tl::uint32_t(127 - d) << 23) : 0.0f, t0, t1);
        fp4_expand_chunk(packed, out, r, q, t0, t1);
      }
      scales[r] = smax;
    }
  }
}

}  // namespace deepgemm::kernels
