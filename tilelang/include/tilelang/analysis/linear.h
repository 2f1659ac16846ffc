// Integer expressions as affine forms c0 + sum(ci * vi) when they are affine, for bounds,
// simplification and pattern matching of index expressions.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "tilelang/ir/ir.h"

namespace tilelang::analysis {

struct Linear {
  std::vector<std::pair<ir::Var, int64_t>> terms;  // distinct variables, non-zero coefficients, in first-seen order
  int64_t constant = 0;

  int64_t coefficient(const ir::VarNode* v) const;
};

// Null when the expression is not affine in its variables (products of variables, divisions, loads...).
std::optional<Linear> as_linear(const ir::Expr& expr);
// Rebuilds a canonical expression of the given integer dtype.
ir::Expr from_linear(const Linear& linear, ir::DType dtype);
// The canonical form of an affine integer expression (terms merged: (b + 1) * 64 - b * 64 is 64);
// other expressions come back unchanged.
ir::Expr canonical(const ir::Expr& expr);

}  // namespace tilelang::analysis
