// A helper of pipeline_loads_cuda: a scheduled T.Pipelined loop (ForNode::depth 1,
// frontend/pipeline_schedule.h) split into its first step, the steps between and its last step.
#pragma once

#include "tilelang/ir/ir.h"

namespace tilelang::passes {

// `for var in [min, min + extent): body` as
//   if extent >= 1: body at min;  for var in [min + 1, min + extent - 1): body;  if extent >= 2: body at min + extent - 1
// with each condition of the body's top level (the schedule's guards) that a part decides for all
// its steps removed: the steps between then run the whole body without branches (ptxas pipelines
// wgmma across a loop body only without them).
ir::Stmt peel_loop(const ir::Var& var, const ir::Expr& min, const ir::Expr& extent, const ir::Stmt& body, const SourceLoc& loc);

}  // namespace tilelang::passes
