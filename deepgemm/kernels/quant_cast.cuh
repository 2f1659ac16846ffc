// The quantization casts of deepgemm/quant.h on the GPU (src/quant.cc launches them). The arithmetic
// is the CPU path's: the conversions of the tl numeric types (the same code on host and device),
// the largest magnitude of a block, an IEEE division for the scale and its inverse and one product
// per element, so both paths give the same bits:
//   scale = max(amax, 1e-4) / fmax (ue8m0: the power of two at or above), q = round(x * (1 / scale))
// Inputs are 2-D with any non-negative strides (element (i, j) at i * s0 + j * s1).
// Launch: 256 threads per block, any grid (grid-stride loops).
#pragma once

#include "tl/device/numeric.h"

namespace deepgemm::kernels {

__device__ __forceinline__ float quant_scale(float amax, float fmax, int ue8m0) {
  const float s = fmaxf(amax, 1e-4f) / fmax;
  return ue8m0 ? tl::ue8m0_t::from_float_ceil(s).to_float() : s;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Per row and block of `block` columns, one warp each: FP8 per token (block 128, fmax 448, q e4m3
// [rows, k]) or FP4 (block 32 or 128, fmax 6, q e2m1 packed two per byte along k; k even).
// scales: [rows, ceil(k / block)].
template <class TIn, bool kFp4>
__device__ __forceinline__ void cast_row_blocks_body(const TIn* in, tl::int64_t rows, tl::int64_t k, tl::int64_t s0,
                                                     tl::int64_t s1, int block, float fmax, int ue8m0, tl::uint8_t* q,
                                                     float* scales) {
  const int lane = int(threadIdx.x) & 31;
  const tl::int64_t kb = (k + block - 1) / block, items = rows * kb;
  const tl::int64_t warps = tl::int64_t(gridDim.x) * (blockDim.x / 32);
  for (tl::int64_t w = tl::int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; w < items; w += warps) {
    const tl::int64_t i = w / kb, b = w - i * kb, k0 = b * block, k1 = k0 + block < k ? k0 + block : k;
    const TIn* row = in + i * s0;
    float amax = 0.0f;
    for (tl::int64_t j = k0 + lane; j < k1; j += 32) amax = fmaxf(amax, fabsf(tl::to_float(row[j * s1])));
    const float s = quant_scale(warp_max(amax), fmax, ue8m0), inv = 1.0f / s;
    if (lane == 0) scales[i * kb + b] = s;
    if constexpr (kFp4) {
      for (tl::int64_t j = k0 + 2 * lane; j < k1; j += 64)
        q[(i * k + j) / 2] =
            tl::float4_e2m1x2_t::from_float(tl::to_float(row[j * s1]) * inv, tl::to_float(row[(j + 1) * s1]) * inv).bits;
    } else {
      for (tl::int64_t j = k0 + lane; j < k1; j += 32)
        q[i * k + j] = tl::float8_e4m3_t::from_float(tl::to_float(row[j * s1]) * inv).bits;
    }
  }
}

// Per 128 x 128 block of x [m, n], one thread block each: e4m3 [m, n], scales [ceil(m/128), ceil(n/128)].
template <class TIn>
__device__ __forceinline__ void cast_blocks_body(const TIn* in, tl::int64_t m, tl::int64_t n, tl::int64_t s0,
                                                 tl::int64_t s1, int ue8m0, tl::uint8_t* q, float* scales) {
  __shared__ float partial[32];
  const tl::int64_t mb = (m + 127) / 128, nb = (n + 127) / 128;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32;
  for (tl::int64_t tile = blockIdx.x; tile < mb * nb; tile += gridDim.x) {
    const tl::int64_t i0 = tile / nb * 128, j0 = tile % nb * 128;
    float amax = 0.0f;
    for (int e = int(threadIdx.x); e < 128 * 128; e += int(blockDim.x)) {
      const tl::int64_t i = i0 + e / 128, j = j0 + e % 128;
      if (i < m && j < n) amax = fmaxf(amax, fabsf(tl::to_float(in[i * s0 + j * s1])));
    }
    amax = warp_max(amax);
    if (lane == 0) partial[warp] = amax;
    __syncthreads();
    for (int w = 0; w < warps; ++w) amax = fmaxf(amax, partial[w]);
    const float s = quant_scale(amax, 448.0f, ue8m0), inv = 1.0f / s;
    if (threadIdx.x == 0) scales[tile] = s;
    for (int e = int(threadIdx.x); e < 128 * 128; e += int(blockDim.x)) {
      const tl::int64_t i = i0 + e / 128, j = j0 + e % 128;
      if (i < m && j < n) q[i * n + j] = tl::float8_e4m3_t::from_float(tl::to_float(in[i * s0 + j * s1]) * inv).bits;
    }
    __syncthreads();  // `partial` is rewritten by the next tile
  }
}

// Per column and 128 rows of x [k, n], one thread each: e4m3 [k, n], scales [ceil(k/128), n].
template <class TIn>
__device__ __forceinline__ void cast_columns_body(const TIn* in, tl::int64_t k, tl::int64_t n, tl::int64_t s0,
                                                  tl::int64_t s1, int ue8m0, tl::uint8_t* q, float* scales) {
  const tl::int64_t kb = (k + 127) / 128, items = kb * n;
  for (tl::int64_t item = tl::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += tl::int64_t(gridDim.x) * blockDim.x) {
    const tl::int64_t b = item / n, j = item - b * n, i0 = b * 128, i1 = i0 + 128 < k ? i0 + 128 : k;
    float amax = 0.0f;
    for (tl::int64_t i = i0; i < i1; ++i) amax = fmaxf(amax, fabsf(tl::to_float(in[i * s0 + j * s1])));
    const float s = quant_scale(amax, 448.0f, ue8m0), inv = 1.0f / s;
    scales[item] = s;
    for (tl::int64_t i = i0; i < i1; ++i)
      q[i * n + j] = tl::float8_e4m3_t::from_float(tl::to_float(in[i * s0 + j * s1]) * inv).bits;
  }
}

}  // namespace deepgemm::kernels
