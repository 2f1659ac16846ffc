// The operand preparation kernel of the GPU path: a contiguous copy of a strided 3-D view, with an
// element conversion. The GEMM kernel (sm90_gemm.cuh) reads A and B K-major through TMA (FP8 wgmma
// has no transposed operands) and FP32 scale factors; operands given MN-major (the nn/tn/tt
// layouts) and UE8M0 scales go through this copy first, and FP4 B through fp4_to_fp8_body.
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

// FP4 B to e4m3, exactly (every e2m1 value is an e4m3 value): out[(g * rows + r) * cols + c] = the
// e2m1 element at nibble offset g * s_g + r * s_r + c * s_c of `in` (two per byte, low nibble
// first). Launch: 256 threads per block, any grid (a grid-stride loop).
__device__ __forceinline__ void fp4_to_fp8_body(const tl::uint8_t* __restrict__ in, tl::uint8_t* __restrict__ out,
                                                int groups, int rows, int cols, tl::int64_t s_g, tl::int64_t s_r,
                                                tl::int64_t s_c) {
  const tl::int64_t total = tl::int64_t(groups) * rows * cols;
  for (tl::int64_t i = tl::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += tl::int64_t(gridDim.x) * blockDim.x) {
    const tl::int64_t c = i % cols, r = (i / cols) % rows, g = i / (tl::int64_t(cols) * rows);
    const tl::int64_t nibble = g * s_g + r * s_r + c * s_c;
    const tl::uint8_t bits = (in[nibble >> 1] >> ((nibble & 1) * 4)) & 0xF;
    out[i] = tl::float8_e4m3_t::from_float(tl::detail::e2m1_to_float(bits)).bits;
  }
}

}  // namespace deepgemm::kernels
