#include "tilelang/analysis/bounds.h"

#include <algorithm>

#include "tilelang/ir/op.h"

namespace tilelang::analysis {
namespace {

using Opt = std::optional<int64_t>;

// Sums and products of bounds; unbounded where int64 itself would overflow.
Opt add(Opt a, Opt b) {
  int64_t s;
  return a && b && !__builtin_add_overflow(*a, *b, &s) ? Opt(s) : std::nullopt;
}
Opt mul(Opt a, int64_t c) {
  int64_t p;
  return a && !__builtin_mul_overflow(*a, c, &p) ? Opt(p) : std::nullopt;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Interval mul_const(const Interval& x, int64_t c) {
  if (c >= 0) return {mul(x.lo, c), mul(x.hi, c)};
  return {mul(x.hi, c), mul(x.lo, c)};
}

// x op y for the arithmetic operators (b: the node, for its constant operands).
Interval binary_bound(const ir::BinaryNode& b, const Interval& x, const Interval& y) {
  switch (b.op) {
    case ir::BinaryOp::Add: return {add(x.lo, y.lo), add(x.hi, y.hi)};
    case ir::BinaryOp::Sub: return {add(x.lo, mul(y.hi, -1)), add(x.hi, mul(y.lo, -1))};
    case ir::BinaryOp::Mul: {
      if (auto c = ir::as_const_int(b.b)) return mul_const(x, *c);
      if (auto c = ir::as_const_int(b.a)) return mul_const(y, *c);
      if (x.known() && y.known()) {
        const Opt p[] = {mul(x.lo, *y.lo), mul(x.lo, *y.hi), mul(x.hi, *y.lo), mul(x.hi, *y.hi)};
        if (!p[0] || !p[1] || !p[2] || !p[3]) return {};
        return {std::min({*p[0], *p[1], *p[2], *p[3]}), std::max({*p[0], *p[1], *p[2], *p[3]})};
      }
      return {};
    }
    case ir::BinaryOp::Min:
      return {x.lo && y.lo ? Opt(std::min(*x.lo, *y.lo)) : std::nullopt,
              x.hi && y.hi ? Opt(std::min(*x.hi, *y.hi)) : (x.hi ? x.hi : y.hi)};
    case ir::BinaryOp::Max:
      return {x.lo && y.lo ? Opt(std::max(*x.lo, *y.lo)) : (x.lo ? x.lo : y.lo),
              x.hi && y.hi ? Opt(std::max(*x.hi, *y.hi)) : std::nullopt};
    case ir::BinaryOp::FloorDiv:
      if (auto c = ir::as_const_int(b.b); c && *c > 0)
        return {x.lo ? Opt(floor_div(*x.lo, *c)) : std::nullopt, x.hi ? Opt(floor_div(*x.hi, *c)) : std::nullopt};
      return {};
    case ir::BinaryOp::FloorMod:
      if (auto c = ir::as_const_int(b.b); c && *c > 0) {
        if (x.known() && *x.lo >= 0 && *x.hi < *c) return x;
        return {0, *c - 1};
      }
      return {};
    default: return {};
  }
}

// The interval, or unbounded when it leaves what `dtype` holds: the machine arithmetic wraps there,
// and the exact bounds computed here would no longer contain its values.
Interval within_dtype(const Interval& x, ir::DType dtype) {
  const int bits = rt::bits(dtype);
  if (bits >= 64 || !x.known()) return x;
  const bool is_signed = rt::info(dtype).is_signed_int;
  const int64_t lo = is_signed ? -(int64_t(1) << (bits - 1)) : 0;
  const int64_t hi = is_signed ? (int64_t(1) << (bits - 1)) - 1 : (int64_t(1) << bits) - 1;
  return *x.lo >= lo && *x.hi <= hi ? x : Interval{};
}

}  // namespace

Interval bound_of(const ir::Expr& e, const VarRanges& ranges) {
  if (auto c = ir::as_const_int(e)) return Interval::point(*c);
  if (e->dtype == ir::DType::Bool) return {0, 1};
  if (!rt::is_int(e->dtype)) return {};
  switch (e->kind) {
    case ir::NodeKind::Var: {
      auto it = ranges.find(static_cast<const ir::VarNode*>(e.get()));
      return it == ranges.end() ? Interval{} : it->second;
    }
    case ir::NodeKind::Cast: return within_dtype(bound_of(ir::as<ir::CastNode>(e)->value, ranges), e->dtype);
    case ir::NodeKind::Select: {
      const auto* s = ir::as<ir::SelectNode>(e);
      Interval a = bound_of(s->t, ranges), b = bound_of(s->f, ranges);
      return {a.lo && b.lo ? Opt(std::min(*a.lo, *b.lo)) : std::nullopt, a.hi && b.hi ? Opt(std::max(*a.hi, *b.hi)) : std::nullopt};
    }
    case ir::NodeKind::Unary: {
      const auto* u = ir::as<ir::UnaryNode>(e);
      if (u->op == ir::UnaryOp::Neg) return within_dtype(mul_const(bound_of(u->a, ranges), -1), e->dtype);
      return {};
    }
    case ir::NodeKind::Binary: {
      const auto* b = ir::as<ir::BinaryNode>(e);
      Interval x = bound_of(b->a, ranges), y = bound_of(b->b, ranges);
      return within_dtype(binary_bound(*b, x, y), e->dtype);
    }
    default: return {};
  }
}

bool provably_within(const ir::Expr& expr, int64_t lo, int64_t hi, const VarRanges& ranges) {
  Interval i = bound_of(expr, ranges);
  return i.known() && *i.lo >= lo && *i.hi <= hi;
}

std::optional<bool> decide_comparison(ir::BinaryOp op, const ir::Expr& a, const ir::Expr& b, const VarRanges& ranges) {
  if (!rt::is_int(a->dtype) || !rt::is_int(b->dtype)) return std::nullopt;
  const Interval x = bound_of(a, ranges), y = bound_of(b, ranges);
  if (!x.known() || !y.known()) return std::nullopt;
  auto decided = [](bool holds, bool fails) {
    return holds ? std::optional<bool>(true) : fails ? std::optional<bool>(false) : std::nullopt;
  };
  switch (op) {
    case ir::BinaryOp::LT: return decided(*x.hi < *y.lo, *x.lo >= *y.hi);
    case ir::BinaryOp::LE: return decided(*x.hi <= *y.lo, *x.lo > *y.hi);
    case ir::BinaryOp::GT: return decided(*x.lo > *y.hi, *x.hi <= *y.lo);
    case ir::BinaryOp::GE: return decided(*x.lo >= *y.hi, *x.hi < *y.lo);
    case ir::BinaryOp::EQ:
    case ir::BinaryOp::NE: {
      const bool disjoint = *x.hi < *y.lo || *y.hi < *x.lo;
      const bool same_point = *x.lo == *x.hi && *y.lo == *y.hi && *x.lo == *y.lo;
      return op == ir::BinaryOp::EQ ? decided(same_point, disjoint) : decided(disjoint, same_point);
    }
    default: return std::nullopt;
  }
}

}  // namespace tilelang::analysis
