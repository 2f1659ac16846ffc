// Small matchers shared by the passes that recognize computations in loop nests.
#pragma once

#include <vector>

#include "tilelang/ir/ir.h"

namespace tilelang::analysis {

// The expression under any float-to-float casts (they do not change which element is read).
ir::Expr strip_float_casts(const ir::Expr& expr);

// Is `expr` (under float casts) a load of `buffer` at exactly these indices?
bool loads_element(const ir::Expr& expr, const ir::Buffer& buffer, const std::vector<ir::Expr>& indices);

}  // namespace tilelang::analysis
