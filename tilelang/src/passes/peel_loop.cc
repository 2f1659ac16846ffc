#include "tilelang/passes/peel_loop.h"

#include <optional>

#include "rt/dtype.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

// Whether `cond` holds for every value of `var` in [lo, hi] (true), for none (false), or neither or
// unknown: comparisons affine in var whose difference is a constant at the ends that matter.
std::optional<bool> decide(const ir::Expr& cond, const ir::VarNode* var, const ir::Expr& lo, const ir::Expr& hi) {
  const auto* b = ir::as<ir::BinaryNode>(cond);
  if (!b) return std::nullopt;
  if (b->op == ir::BinaryOp::And) {
    std::optional<bool> x = decide(b->a, var, lo, hi), y = decide(b->b, var, lo, hi);
    if (x == false || y == false) return false;
    if (x == true && y == true) return true;
    return std::nullopt;
  }
  const bool upper = b->op == ir::BinaryOp::LT || b->op == ir::BinaryOp::LE, lower = b->op == ir::BinaryOp::GT || b->op == ir::BinaryOp::GE;
  if ((!upper && !lower) || !rt::is_int(b->a->dtype) || !rt::is_int(b->b->dtype)) return std::nullopt;
  const ir::Expr diff = ir::sub(b->a, b->b);
  std::optional<analysis::Linear> l = analysis::as_linear(diff);
  if (!l) return std::nullopt;
  const int64_t c = l->coefficient(var);
  auto at = [&](const ir::Expr& v) -> std::optional<int64_t> {
    std::optional<analysis::Linear> x = analysis::as_linear(ir::substitute(diff, {{var, v}}));
    if (!x || !x->terms.empty()) return std::nullopt;
    return x->constant;
  };
  auto holds = [&](int64_t d) {
    switch (b->op) {
      case ir::BinaryOp::LT: return d < 0;
      case ir::BinaryOp::LE: return d <= 0;
      case ir::BinaryOp::GT: return d > 0;
      default: return d >= 0;
    }
  };
  // The difference grows with var when c > 0: an upper bound holds throughout when it holds at its
  // largest value, fails throughout when it fails at its smallest (and conversely).
  const ir::Expr& largest = c >= 0 ? hi : lo;
  const ir::Expr& smallest = c >= 0 ? lo : hi;
  std::optional<int64_t> all = at(upper ? largest : smallest), none = at(upper ? smallest : largest);
  if (all && holds(*all)) return true;
  if (none && !holds(*none)) return false;
  return std::nullopt;
}

// The body for var in [lo, hi]: top-level conditions decided there resolved.
ir::Stmt specialize(const ir::Stmt& body, const ir::VarNode* var, const ir::Expr& lo, const ir::Expr& hi) {
  std::vector<ir::Stmt> out;
  for (const ir::Stmt& s : ir::as<ir::SeqNode>(body) ? ir::as<ir::SeqNode>(body)->stmts : std::vector<ir::Stmt>{body}) {
    const auto* c = ir::as<ir::IfThenElseNode>(s);
    std::optional<bool> known = c ? decide(c->cond, var, lo, hi) : std::nullopt;
    if (!known) out.push_back(s);
    else if (*known) out.push_back(c->then_case);
    else if (c->else_case) out.push_back(c->else_case);
  }
  return ir::make_seq(std::move(out), body->loc);
}

// A copy of the body whose allocations and let bindings have buffers and variables of their own:
// the peeled steps may end up in one C++ scope once their conditions fold, where bindings shared
// between the copies would be declared twice.
class FreshBindings : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::AllocateNode& n, const ir::Stmt&) override {
    const ir::Buffer fresh = std::make_shared<const ir::BufferNode>(*n.buffer);
    return ir::make_allocate(fresh, mutate(ir::replace_buffers(n.body, {{n.buffer.get(), fresh}})), n.loc);
  }
  ir::Stmt visit(const ir::LetStmtNode& n, const ir::Stmt&) override {
    const ir::Var fresh = ir::make_var(n.var->name, n.var->dtype, n.var->loc);
    return ir::make_let(fresh, mutate(n.value), mutate(ir::substitute(n.body, {{n.var.get(), fresh}})), n.loc);
  }
};

}  // namespace

ir::Stmt peel_loop(const ir::Var& var, const ir::Expr& min, const ir::Expr& extent, const ir::Stmt& body, const SourceLoc& loc) {
  const ir::DType t = var->dtype;
  auto one = [&](int64_t v) { return ir::make_int(v, t); };
  auto step = [&](const ir::Expr& at) { return FreshBindings().mutate(ir::substitute(specialize(body, var.get(), at, at), {{var.get(), at}})); };
  const ir::Expr last = ir::add(min, ir::sub(extent, one(1)));
  ir::Stmt between = ir::make_for(var, ir::add(min, one(1)), ir::sub(extent, one(2)), ir::ForKind::Serial,
                                  specialize(body, var.get(), ir::add(min, one(1)), ir::sub(last, one(1))), loc);
  return ir::make_seq({ir::make_if(ir::compare(ir::BinaryOp::GE, extent, one(1)), step(min), nullptr, loc), between,
                       ir::make_if(ir::compare(ir::BinaryOp::GE, extent, one(2)), step(last), nullptr, loc)},
                      loc);
}

}  // namespace tilelang::passes
