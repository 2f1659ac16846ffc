#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Puts the whole-tensor code of a function (what runs outside T.Kernel) on the GPU as kernel
// launches, in program order:
//  - a gemm that the Hopper GEMM kernel can take (sm_90a, bf16/f16 operands, aligned rows, no
//    batch) stays a gemm: the code generator launches that kernel; a fused epilogue then runs as
//    a launch of its own over a temporary;
//  - any other gemm becomes a generic kernel, one thread per output element;
//  - a nest of loops whose iterations are independent becomes one launch with a thread per
//    iteration (the nest flattened);
//  - what is left runs in a launch of one thread (correct, slow: such code is inherently serial).
// The whole-tensor temporaries stay allocations at function level; the runtime provides them.
ir::PrimFunc lower_host_cuda(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
