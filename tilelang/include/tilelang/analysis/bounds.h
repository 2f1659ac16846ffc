// Ranges of integer expressions given ranges of their variables (interval arithmetic). The result
// contains every value the expression can take; for affine expressions of independent variables it
// is exact (see check_bounds). A subexpression whose range leaves its dtype (the machine arithmetic
// would wrap) makes the result unbounded.
#pragma once

#include <map>
#include <optional>

#include "tilelang/ir/ir.h"

namespace tilelang::analysis {

struct Interval {
  std::optional<int64_t> lo, hi;  // inclusive; unset: unbounded on that side
  static Interval point(int64_t v) { return {v, v}; }
  bool known() const { return lo && hi; }
};

using VarRanges = std::map<const ir::VarNode*, Interval>;

Interval bound_of(const ir::Expr& expr, const VarRanges& ranges);

// Does the expression provably lie in [lo, hi] for all values of its variables?
bool provably_within(const ir::Expr& expr, int64_t lo, int64_t hi, const VarRanges& ranges);

// The value of the integer comparison `a op b` when the ranges decide it for every value of the
// variables (EQ, NE, LT, LE, GT, GE), else nullopt.
std::optional<bool> decide_comparison(ir::BinaryOp op, const ir::Expr& a, const ir::Expr& b, const VarRanges& ranges);

}  // namespace tilelang::analysis
