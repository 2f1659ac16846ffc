#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// A loop nest that only accumulates into one element, B[idx] = B[idx] (+|max|min) e with none of
// its loop variables in idx, accumulates in a local scalar of at least f32 instead, and writes B
// once at the end: reductions round to B's dtype once, and the accumulator can live in a register.
ir::PrimFunc promote_reductions(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
