#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Checks that the IR is well formed: every variable and buffer is used inside the scope that
// defines it, indices match ranks, stored values have the buffer's dtype, barriers sit inside
// kernels. A variable used outside its Python scope (a loop variable after its loop) is the user's
// error; anything else is ours. Returns the function unchanged.
ir::PrimFunc verify(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
