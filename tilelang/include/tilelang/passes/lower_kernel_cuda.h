#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Maps the tile-level code of each T.Kernel onto the threads of a CUDA block:
//  - a nest of parallel loops (T.Parallel, lowered copies, fills, reductions) is flattened and its
//    iterations dealt round-robin to the threads;
//  - a store that is the same for every thread (and writes shared, fragment or global memory) is
//    done by thread 0; local (register) scalars are kept by every thread;
//  - code that uses the thread index runs as written, per thread;
//  - a barrier follows every statement whose writes (or reads) a later statement of the same block
//    touches, and ends every loop body that writes memory other threads read.
// Fragments live in shared memory in this first version (their register layouts come later).
ir::PrimFunc lower_kernel_cuda(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
