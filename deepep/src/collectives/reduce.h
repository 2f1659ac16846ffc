// Elementwise reductions of the collectives, on raw buffers of one dtype.
#pragma once

#include <cstddef>
#include <vector>

#include "deepep/collectives.h"
#include "rt/dtype.h"

namespace deepep {

bool reducible(rt::DType dtype);
// out[i] = parts[0][i] op parts[1][i] op ... in this order; f16/bf16 accumulate in f32 and round
// once. `out` may be one of the parts.
void reduce_ordered(void* out, const std::vector<const void*>& parts, size_t n, rt::DType dtype, ReduceOp op);
// dst[i] = dst[i] op src[i] (f16/bf16 through f32, rounded once).
void reduce_into(void* dst, const void* src, size_t n, rt::DType dtype, ReduceOp op);

}  // namespace deepep
