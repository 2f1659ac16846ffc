#include "tilelang/analysis/linear.h"

#include "tilelang/ir/op.h"

namespace tilelang::analysis {
namespace {

void add_scaled(Linear& into, const Linear& x, int64_t scale) {
  into.constant += x.constant * scale;
  for (const auto& [v, c] : x.terms) {
    bool found = false;
    for (auto& [w, d] : into.terms) {
      if (w == v) {
        d += c * scale;
        found = true;
      }
    }
    if (!found) into.terms.push_back({v, c * scale});
  }
  std::erase_if(into.terms, [](const auto& t) { return t.second == 0; });
}

}  // namespace

int64_t Linear::coefficient(const ir::VarNode* v) const {
  for (const auto& [w, c] : terms)
    if (w.get() == v) return c;
  return 0;
}

std::optional<Linear> as_linear(const ir::Expr& e) {
  if (!rt::is_int(e->dtype)) return std::nullopt;
  if (auto c = ir::as_const_int(e)) return Linear{{}, *c};
  if (e->kind == ir::NodeKind::Var) return Linear{{{std::static_pointer_cast<const ir::VarNode>(e), 1}}, 0};
  if (const auto* cast = ir::as<ir::CastNode>(e)) {
    if (rt::is_int(cast->value->dtype) && rt::bits(cast->value->dtype) <= rt::bits(e->dtype)) return as_linear(cast->value);
    return std::nullopt;
  }
  if (const auto* u = ir::as<ir::UnaryNode>(e); u && u->op == ir::UnaryOp::Neg) {
    auto a = as_linear(u->a);
    if (!a) return std::nullopt;
    Linear out;
    add_scaled(out, *a, -1);
    return out;
  }
  const auto* b = ir::as<ir::BinaryNode>(e);
  if (!b) return std::nullopt;
  if (b->op == ir::BinaryOp::Add || b->op == ir::BinaryOp::Sub) {
    auto x = as_linear(b->a), y = as_linear(b->b);
    if (!x || !y) return std::nullopt;
    Linear out = *x;
    add_scaled(out, *y, b->op == ir::BinaryOp::Add ? 1 : -1);
    return out;
  }
  if (b->op == ir::BinaryOp::Mul) {
    auto x = as_linear(b->a), y = as_linear(b->b);
    if (!x || !y) return std::nullopt;
    if (x->terms.empty()) std::swap(x, y);
    if (!y->terms.empty()) return std::nullopt;  // product of two variables
    Linear out;
    add_scaled(out, *x, y->constant);
    return out;
  }
  return std::nullopt;
}

ir::Expr from_linear(const Linear& linear, ir::DType dtype) {
  ir::Expr out;
  for (const auto& [v, c] : linear.terms) {
    ir::Expr term = ir::cast(dtype, v);
    if (c == -1 && out) {
      out = ir::sub(out, term);
      continue;
    }
    if (c != 1) term = ir::mul(term, ir::make_int(c, dtype));
    out = out ? ir::add(out, term) : term;
  }
  if (!out) return ir::make_int(linear.constant, dtype);
  if (linear.constant > 0) return ir::add(out, ir::make_int(linear.constant, dtype));
  if (linear.constant < 0) return ir::sub(out, ir::make_int(-linear.constant, dtype));
  return out;
}

ir::Expr canonical(const ir::Expr& expr) {
  if (!rt::is_int(expr->dtype) || expr->kind != ir::NodeKind::Binary) return expr;
  auto lin = as_linear(expr);
  return lin ? from_linear(*lin, expr->dtype) : expr;
}

}  // namespace tilelang::analysis
