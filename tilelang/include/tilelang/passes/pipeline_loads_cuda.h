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
// A scheduled loop of depth 1 (T.Pipelined's order/stage/group) is lowered with its first and last
// steps peeled (peel_loop.h): the steps between run the body without the schedule's conditions.
//
// On sm_90a, with S >= 3, the one gemm of a loop whose accumulator nothing else in the loop touches
// is followed by gemm_in_flight(1): on wgmma it runs on while the next iteration loads and waits,
// and is complete one iteration later. The stage it reads is then refilled an iteration later too,
// so the copies run S - 2 iterations ahead instead of S - 1.
//
// On sm_90 and later the loop's copies arrive whole (lower_tile_ops keeps them) and those TMA can
// move (bulk_copy_allowed: a box of a constant-shape, aligned tensor into a whole 2-D tile) become
// bulk copies (a CopyNode with the address of its stage's mbarrier); the others are lowered to
// nests as above. Thread 0 issues a stage's boxes and arrives on its "full" barrier; every thread
// waits for the iteration's phase instead of a cp.async group. When all the loop's copies are bulk,
// the block barriers go too: each warp releases a stage on a "free" barrier when done with it
// (after the in-flight gemm's iteration, or at the end of the body), and thread 0 waits on that
// before loading into the stage again. The barriers live in a shared array allocated around the
// loop (full ones first) and are initialized before its prologue.
//
// Warp specialization (sm_90a), for a kernel's loop whose copies are all bulk, unless the loop says
// warp_specialize=False (an error where it cannot apply and the loop says True; see Pipeliner's
// obstacle checks): the kernel body becomes
//   init the barriers; barrier (the whole block)
//   if producer_warpgroup(threads): for p < n: acquire the stage's use S back; the copies of p; arrive
//   else: the kernel as written, its loop now: wait for the stage; the rest of the body; release
// with the barriers and the staged tiles allocated around both roles. The code generator adds the
// producer warpgroup to the launch, the register moves and the consumers' named barriers.
ir::PrimFunc pipeline_loads_cuda(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
