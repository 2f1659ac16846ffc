// The second pass of a split-K GEMM (gpu.cc): the GEMM kernel wrote one FP32 partial D per range of
// K into a workspace W [splits, m, n]; this sums them, adds C, and writes D in its own type:
//   d[r * d_sr + c] = TD((C ? c[r * c_sr + c] : 0) + sum_s W[s][r][c])
// The partials are added in split order, so the result does not depend on scheduling.
// Launch: 256 threads per block, any grid (a grid-stride loop over the m x n outputs).
#pragma once

#include "tl/device/numeric.h"

namespace deepgemm::kernels {

template <class TD, bool kHasC>
__device__ __forceinline__ void split_k_reduce_body(const float* __restrict__ w, int splits, int m, int n,
                                                    const float* __restrict__ c, tl::int64_t c_sr,
                                                    TD* __restrict__ d, tl::int64_t d_sr) {
  const tl::int64_t total = tl::int64_t(m) * n, slice = total;
  for (tl::int64_t i = tl::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += tl::int64_t(gridDim.x) * blockDim.x) {
    const tl::int64_t r = i / n, col = i - r * n;
    float acc = 0.0f;
    if constexpr (kHasC) acc = c[r * c_sr + col];
    for (int s = 0; s < splits; ++s) acc += w[s * slice + i];
    d[r * d_sr + col] = TD(acc);
  }
}

}  // namespace deepgemm::kernels
