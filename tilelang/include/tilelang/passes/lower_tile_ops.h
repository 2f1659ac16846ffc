#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Turns copies, fills and reductions into loop nests over their regions (parallel loops, which
// backends map to threads, lanes or vector units). Copies read 0 outside the source tensor and drop
// writes outside the destination; the guards are left out where the indices provably stay inside.
// Gemms stay whole: each backend calls its own tile routine.
ir::PrimFunc lower_tile_ops(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
