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
//
// On sm_90a, with S >= 3, the one gemm of a loop whose accumulator nothing else in the loop touches
// is followed by gemm_in_flight(1): on wgmma it runs on while the next iteration loads and waits,
// and is complete one iteration later. The stage it reads is then refilled an iteration later too,
// so the copies run S - 2 iterations ahead instead of S - 1.
ir::PrimFunc pipeline_loads_cuda(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
