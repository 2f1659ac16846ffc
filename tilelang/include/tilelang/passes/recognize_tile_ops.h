#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Finds tile operations in the scalar loop nests of a @tile_kernel:
//  - C[.., i, j] (+)= A[.., i, k] * B[.., k, j] over loops i, j, k (any order, either operand
//    transposed, optional batch loops) becomes a gemm accumulated in f32; a zero fill of C just
//    before it becomes the gemm's `clear`;
//  - an elementwise loop nest right after that gemm which reads the gemm's temporary result only
//    at its own element becomes the gemm's fused epilogue, and the temporary disappears.
// Reductions and elementwise maps that remain are handled by promote_reductions and the schedule.
ir::PrimFunc recognize_tile_ops(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
