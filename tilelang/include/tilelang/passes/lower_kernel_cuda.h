#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Maps the tile-level code of each T.Kernel onto the threads of a CUDA block:
//  - fragments that tensor-core gemms accumulate into go to registers when their other uses allow
//    (analysis/register_fragments.h), and on sm_90a 16- and 8-bit A operands of wgmma gemms with them
//    (PassOptions::wgmma_register_a); the rest of the fragments live in shared memory;
//  - a nest of parallel loops (T.Parallel, lowered copies, fills) over a register fragment runs in
//    each thread over the elements its registers hold; a row reduction of one combines them with
//    warp shuffles; any other nest is flattened and its iterations dealt round-robin to the
//    threads, 16 bytes a thread at a time where a copy allows (analysis/vector_copy.h);
//  - a store that is the same for every thread (and writes shared, fragment or global memory) is
//    done by thread 0; local (register) scalars are kept by every thread;
//  - code that uses the thread index runs as written, per thread;
//  - a barrier goes before the first statement that touches shared memory a statement since the
//    last barrier wrote (or writes what it read), and ends every loop body that writes memory other
//    threads read.
ir::PrimFunc lower_kernel_cuda(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
