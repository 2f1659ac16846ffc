#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Reports, as a user error at the access, every tensor index that provably leaves its dimension for
// some iteration: the index is affine in loop, block and thread variables whose ranges are known
// at compile time, and no enclosing condition restricts them. Tile copies are exempt (they clip at
// tensor edges by definition); the regions of other tile operations are checked too.
ir::PrimFunc check_bounds(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
