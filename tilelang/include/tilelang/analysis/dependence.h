// Whether the iterations of a loop can run at the same time (on threads, lanes or GPU threads).
#pragma once

#include <set>

#include "tilelang/ir/ir.h"

namespace tilelang::analysis {

// The variables that loops and lets inside `s` bind.
std::set<const ir::VarNode*> vars_bound_inside(const ir::Stmt& s);

// True when each iteration writes only its own elements (some index of every write is the loop
// variable plus something invariant in the loop), reads what it writes only at those elements,
// keeps its scalars to itself (allocated inside the loop) and calls nothing opaque. Conservative:
// false means "not proven".
bool iterations_independent(const ir::ForNode& loop);

// True when every store in the loop's body writes the loop variable (plus an invariant) in its
// last index, with no inner loops or lets: the loop is elementwise over contiguous memory.
bool elementwise_along(const ir::ForNode& loop);

}  // namespace tilelang::analysis
