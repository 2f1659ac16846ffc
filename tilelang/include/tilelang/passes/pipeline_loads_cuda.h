#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Software pipelining of T.Pipelined loops in GPU kernels (sm_80 and later), before the block
// lowering. In `for k in T.Pipelined(n, num_stages=S)`, each global -> shared copy of the body that
// moves 16 bytes a thread (analysis/vector_copy.h) and whose destination nothing else writes or
// reads before it becomes a load S - 1 iterations ahead, with cp.async into one of S copies of its
// shared buffer:
//   prologue: for p < S - 1: copies of iteration p into stage p; commit
//   for k: copies of iteration k + S - 1 into stage (k + S - 1) % S; commit; wait until iteration
//          k's group has landed; barrier; the rest of the body on stage k % S
// (the block lowering then ends each iteration with a barrier before the stage is overwritten).
// Other loops, and copies that do not qualify, stay as written.
ir::PrimFunc pipeline_loads_cuda(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
