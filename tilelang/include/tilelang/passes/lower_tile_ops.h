#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Turns copies, fills and reductions into loop nests over their regions (parallel loops, which
// backends map to threads, lanes or vector units). Copies read 0 outside the source tensor and drop
// writes outside the destination; the guards are left out where the indices provably stay inside.
// Gemms stay whole: each backend calls its own tile routine.
//
// On sm_90 and later, the global -> shared copies among the statements of a T.Pipelined loop stay
// whole: pipeline_loads_cuda turns those it can into bulk tensor copies (TMA) and lowers the rest
// with lower_copies. Copies with a barrier (bulk copies) are never lowered.
ir::PrimFunc lower_tile_ops(const ir::PrimFunc& func, const PassOptions& options);
ir::Stmt lower_copies(const ir::Stmt& stmt);

}  // namespace tilelang::passes
