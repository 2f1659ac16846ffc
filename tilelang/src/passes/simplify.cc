#include "tilelang/passes/simplify.h"

#include "tilelang/analysis/bounds.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

// Folds constants and canonicalizes affine expressions; integer comparisons that the ranges of the
// enclosing loops' variables decide become constants (a mask like `k * 64 + j < 4096` inside loops
// that never reach 4096 disappears, with the selects and branches it guarded).
class Simplifier : public ir::IRMutator {
 protected:
  ir::Expr visit(const ir::BinaryNode& n, const ir::Expr& self) override {
    ir::Expr a = mutate(n.a), b = mutate(n.b);
    if (ir::is_comparison(n.op))
      if (auto known = analysis::decide_comparison(n.op, a, b, loop_ranges_)) return ir::make_bool(*known, n.loc);
    ir::Expr out = ir::is_comparison(n.op) ? ir::compare(n.op, a, b, n.loc) : ir::binary(n.op, a, b, n.loc);
    if (out->dtype != n.dtype) out = (a == n.a && b == n.b) ? self : ir::make_binary(n.op, n.dtype, a, b, n.loc);
    return analysis::canonical(out);
  }
  ir::Expr visit(const ir::CastNode& n, const ir::Expr& self) override {
    ir::Expr v = mutate(n.value);
    return ir::cast(n.dtype, v, n.loc);
  }
  ir::Expr visit(const ir::SelectNode& n, const ir::Expr& self) override {
    ir::Expr c = mutate(n.cond), t = mutate(n.t), f = mutate(n.f);
    if (auto v = ir::as_const_int(c)) return *v ? t : f;
    if (c == n.cond && t == n.t && f == n.f) return self;
    return ir::make_select(n.dtype, c, t, f, n.loc);
  }
  ir::Expr visit(const ir::UnaryNode& n, const ir::Expr& self) override {
    ir::Expr a = mutate(n.a);
    if (a == n.a) return self;
    if (n.op == ir::UnaryOp::Neg) return ir::neg(a, n.loc);
    if (n.op == ir::UnaryOp::Not) return ir::logical_not(a, n.loc);
    return ir::bit_not(a, n.loc);
  }

  ir::Stmt visit(const ir::IfThenElseNode& n, const ir::Stmt& self) override {
    ir::Expr c = mutate(n.cond);
    if (auto v = ir::as_const_int(c)) return *v ? mutate(n.then_case) : (n.else_case ? mutate(n.else_case) : ir::make_seq({}));
    ir::Stmt t = mutate(n.then_case), e = mutate(n.else_case);
    if (e && ir::is_no_op(e)) e = nullptr;
    if (ir::is_no_op(t) && !e) return ir::make_seq({});
    if (c == n.cond && t == n.then_case && e == n.else_case) return self;
    return ir::make_if(c, t, e, n.loc);
  }
  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    ir::Expr min = mutate(n.min), extent = mutate(n.extent);
    auto e = ir::as_const_int(extent);
    if (e && *e <= 0) return ir::make_seq({});
    if (e && *e == 1 && n.for_kind != ir::ForKind::Pipelined) return mutate(ir::substitute(n.body, {{n.var.get(), min}}));
    // Inside the body the variable runs over [min, min + extent - 1] (bounded when those are).
    const analysis::Interval lo = analysis::bound_of(min, loop_ranges_), count = analysis::bound_of(extent, loop_ranges_);
    if (lo.known() && count.known() && *count.lo >= 1) loop_ranges_[n.var.get()] = {*lo.lo, *lo.hi + *count.hi - 1};
    ir::Stmt body = mutate(n.body);
    loop_ranges_.erase(n.var.get());
    if (ir::is_no_op(body)) return body;
    if (min == n.min && extent == n.extent && body == n.body) return self;
    return ir::make_for(n.var, min, extent, n.for_kind, body, n.loc, n.pipelining());
  }
  ir::Stmt visit(const ir::LetStmtNode& n, const ir::Stmt& self) override {
    ir::Expr v = mutate(n.value);
    if (v->kind == ir::NodeKind::IntImm || v->kind == ir::NodeKind::FloatImm || v->kind == ir::NodeKind::Var)
      return mutate(ir::substitute(n.body, {{n.var.get(), v}}));
    ir::Stmt body = mutate(n.body);
    if (v == n.value && body == n.body) return self;
    return ir::make_let(n.var, v, body, n.loc);
  }

 private:
  analysis::VarRanges loop_ranges_;  // of the loops around the node being simplified
};

}  // namespace

ir::Stmt simplify_stmt(const ir::Stmt& stmt) { return Simplifier().mutate(stmt); }
ir::Expr simplify_expr(const ir::Expr& expr) { return Simplifier().mutate(expr); }

ir::PrimFunc simplify(const ir::PrimFunc& func, const PassOptions&) {
  ir::PrimFunc out = func;
  out.body = simplify_stmt(func.body);
  return out;
}

}  // namespace tilelang::passes
