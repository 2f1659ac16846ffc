// T.Pipelined(n, order=[...], stage=[...], group=[...]): the body's statements, in groups, run in
// another order and some of them one or more iterations late, as TileLang's pipeline annotations
// ask (docs/language.md 4.4). `group` splits the body into runs of consecutive statements (by index,
// from 0); group g runs at position order[g] of the scheduled body, for iteration k - stage[g] while
// the loop is at k. A group with stage and order -1 holds copies from a global tensor into a shared
// tile that the pipeline loads (pipeline_loads_cuda.h): each takes the stage of the first group that
// reads its tile and runs just before it. With D the largest stage, the loop becomes
//   for k in T.Pipelined(n + D):  the groups in order, group g on iteration k - stage[g]
// and group g only where that iteration exists (a condition; the copies run unconditionally, an
// iteration before or after the range loads a tile nobody in the loop reads). The result is the plain
// loop's on every target: the schedule is rejected (with where and why) when it would run two
// statements that touch the same buffer, one of them writing it, in another order than the plain
// loop does.
#pragma once

#include "tilelang/frontend/value.h"
#include "tilelang/ir/ir.h"

namespace tilelang::frontend {

ir::Stmt schedule_pipelined(const ir::Var& var, const ir::Expr& min, const ir::Expr& extent, const ir::Stmt& body, const PipelineSchedule& schedule,
                            const SourceLoc& loc, const ir::Pipelining& pipelining);

// A function's body: an error where a statement after a scheduled loop reads a tile the loop's copies
// load before overwriting it (those copies also ran on the steps past the last iteration).
void check_loads_after_scheduled_loops(const ir::Stmt& body);

}  // namespace tilelang::frontend
