#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Moves the allocation of a local scalar into the innermost loop body that holds all its uses,
// when that body writes it before reading it. Mutable Python names are declared at the top of a
// function; once inside the loop they are private to each iteration, so the loop can run in parallel.
ir::PrimFunc sink_allocations(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
