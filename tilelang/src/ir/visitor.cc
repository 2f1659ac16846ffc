#include "tilelang/ir/visitor.h"

#include "rt/error.h"

namespace tilelang::ir {

// ---------------------------------------------------------------- IRVisitor

void IRVisitor::visit_expr(const Expr& expr) {
  if (!expr) return;
  switch (expr->kind) {
#define TL_EXPR_NODE(Name)                                   \
  case NodeKind::Name:                                       \
    visit(static_cast<const Name##Node&>(*expr));            \
    return;
#include "tilelang/ir/nodes.def"
    default: RT_UNREACHABLE("statement kind ", kind_name(expr->kind), " in an expression");
  }
}

void IRVisitor::visit_stmt(const Stmt& stmt) {
  if (!stmt) return;
  switch (stmt->kind) {
#define TL_STMT_NODE(Name)                                   \
  case NodeKind::Name:                                       \
    visit(static_cast<const Name##Node&>(*stmt));            \
    return;
#include "tilelang/ir/nodes.def"
    default: RT_UNREACHABLE("expression kind ", kind_name(stmt->kind), " in a statement");
  }
}

void IRVisitor::visit_region(const Region& region) {
  for (const Range& r : region.ranges) {
    visit_expr(r.min);
    visit_expr(r.extent);
  }
}

void IRVisitor::visit(const IntImmNode&) {}
void IRVisitor::visit(const FloatImmNode&) {}
void IRVisitor::visit(const VarNode&) {}
void IRVisitor::visit(const BinaryNode& n) { visit_expr(n.a); visit_expr(n.b); }
void IRVisitor::visit(const UnaryNode& n) { visit_expr(n.a); }
void IRVisitor::visit(const SelectNode& n) { visit_expr(n.cond); visit_expr(n.t); visit_expr(n.f); }
void IRVisitor::visit(const CastNode& n) { visit_expr(n.value); }
void IRVisitor::visit(const CallNode& n) { for (const Expr& a : n.args) visit_expr(a); }
void IRVisitor::visit(const BufferLoadNode& n) { for (const Expr& i : n.indices) visit_expr(i); }

void IRVisitor::visit(const BufferStoreNode& n) {
  for (const Expr& i : n.indices) visit_expr(i);
  visit_expr(n.value);
}
void IRVisitor::visit(const LetStmtNode& n) { visit_expr(n.value); visit_stmt(n.body); }
void IRVisitor::visit(const ForNode& n) { visit_expr(n.min); visit_expr(n.extent); visit_stmt(n.body); }
void IRVisitor::visit(const IfThenElseNode& n) { visit_expr(n.cond); visit_stmt(n.then_case); visit_stmt(n.else_case); }
void IRVisitor::visit(const SeqNode& n) { for (const Stmt& s : n.stmts) visit_stmt(s); }
void IRVisitor::visit(const AllocateNode& n) { visit_stmt(n.body); }
void IRVisitor::visit(const EvaluateNode& n) { visit_expr(n.value); }
void IRVisitor::visit(const InlineCodeNode& n) {
  for (const auto& [name, e] : n.args) visit_expr(e);
}
void IRVisitor::visit(const KernelLaunchNode& n) {
  for (const Expr& g : n.grid) visit_expr(g);
  visit_stmt(n.body);
}
void IRVisitor::visit(const BarrierNode&) {}
void IRVisitor::visit(const CopyNode& n) {
  visit_region(n.src);
  visit_region(n.dst);
  visit_expr(n.barrier);
}
void IRVisitor::visit(const GemmNode& n) {
  visit_region(n.a);
  visit_region(n.b);
  visit_region(n.c);
  visit_stmt(n.epilogue);
}
void IRVisitor::visit(const FillNode& n) { visit_region(n.dst); visit_expr(n.value); }
void IRVisitor::visit(const ReduceNode& n) { visit_region(n.src); visit_region(n.dst); }

// ---------------------------------------------------------------- IRMutator

Expr IRMutator::mutate(const Expr& expr) {
  if (!expr) return expr;
  switch (expr->kind) {
#define TL_EXPR_NODE(Name)                                   \
  case NodeKind::Name:                                       \
    return visit(static_cast<const Name##Node&>(*expr), expr);
#include "tilelang/ir/nodes.def"
    default: RT_UNREACHABLE("statement kind ", kind_name(expr->kind), " in an expression");
  }
}

Stmt IRMutator::mutate(const Stmt& stmt) {
  if (!stmt) return stmt;
  switch (stmt->kind) {
#define TL_STMT_NODE(Name)                                   \
  case NodeKind::Name:                                       \
    return visit(static_cast<const Name##Node&>(*stmt), stmt);
#include "tilelang/ir/nodes.def"
    default: RT_UNREACHABLE("expression kind ", kind_name(stmt->kind), " in a statement");
  }
}

std::vector<Expr> IRMutator::mutate_all(const std::vector<Expr>& exprs, bool* changed) {
  std::vector<Expr> out;
  out.reserve(exprs.size());
  for (const Expr& e : exprs) {
    out.push_back(mutate(e));
    if (out.back() != e) *changed = true;
  }
  return out;
}

Region IRMutator::mutate_region(const Region& region) {
  Region out{mutate_buffer(region.buffer), {}, region.loc};
  for (const Range& r : region.ranges) out.ranges.push_back({mutate(r.min), mutate(r.extent)});
  return out;
}

namespace {
bool same_region(const Region& a, const Region& b) {
  if (a.buffer != b.buffer || a.ranges.size() != b.ranges.size()) return false;
  for (size_t i = 0; i < a.ranges.size(); ++i)
    if (a.ranges[i].min != b.ranges[i].min || a.ranges[i].extent != b.ranges[i].extent) return false;
  return true;
}
}  // namespace

Expr IRMutator::visit(const IntImmNode&, const Expr& self) { return self; }
Expr IRMutator::visit(const FloatImmNode&, const Expr& self) { return self; }
Expr IRMutator::visit(const VarNode&, const Expr& self) { return self; }

Expr IRMutator::visit(const BinaryNode& n, const Expr& self) {
  Expr a = mutate(n.a), b = mutate(n.b);
  if (a == n.a && b == n.b) return self;
  return make_binary(n.op, n.dtype, a, b, n.loc);
}
Expr IRMutator::visit(const UnaryNode& n, const Expr& self) {
  Expr a = mutate(n.a);
  return a == n.a ? self : make_unary(n.op, n.dtype, a, n.loc);
}
Expr IRMutator::visit(const SelectNode& n, const Expr& self) {
  Expr c = mutate(n.cond), t = mutate(n.t), f = mutate(n.f);
  if (c == n.cond && t == n.t && f == n.f) return self;
  return make_select(n.dtype, c, t, f, n.loc);
}
Expr IRMutator::visit(const CastNode& n, const Expr& self) {
  Expr v = mutate(n.value);
  return v == n.value ? self : make_cast(n.dtype, v, n.loc);
}
Expr IRMutator::visit(const CallNode& n, const Expr& self) {
  bool changed = false;
  std::vector<Expr> args = mutate_all(n.args, &changed);
  return changed ? make_call(n.dtype, n.call_kind, n.name, std::move(args), n.loc) : self;
}
Expr IRMutator::visit(const BufferLoadNode& n, const Expr& self) {
  bool changed = false;
  std::vector<Expr> idx = mutate_all(n.indices, &changed);
  Buffer buffer = mutate_buffer(n.buffer);
  if (!changed && buffer == n.buffer) return self;
  return make_load(buffer, std::move(idx), n.loc);
}

Stmt IRMutator::visit(const BufferStoreNode& n, const Stmt& self) {
  bool changed = false;
  std::vector<Expr> idx = mutate_all(n.indices, &changed);
  Expr value = mutate(n.value);
  Buffer buffer = mutate_buffer(n.buffer);
  if (!changed && value == n.value && buffer == n.buffer) return self;
  return make_store(buffer, std::move(idx), value, n.loc, n.atomic_add);
}
Stmt IRMutator::visit(const LetStmtNode& n, const Stmt& self) {
  Expr value = mutate(n.value);
  Stmt body = mutate(n.body);
  if (value == n.value && body == n.body) return self;
  return make_let(n.var, value, body, n.loc);
}
Stmt IRMutator::visit(const ForNode& n, const Stmt& self) {
  Expr min = mutate(n.min), extent = mutate(n.extent);
  Stmt body = mutate(n.body);
  if (min == n.min && extent == n.extent && body == n.body) return self;
  return make_for(n.var, min, extent, n.for_kind, body, n.loc, n.pipelining());
}
Stmt IRMutator::visit(const IfThenElseNode& n, const Stmt& self) {
  Expr cond = mutate(n.cond);
  Stmt t = mutate(n.then_case), e = mutate(n.else_case);
  if (cond == n.cond && t == n.then_case && e == n.else_case) return self;
  return make_if(cond, t, e, n.loc);
}
Stmt IRMutator::visit(const SeqNode& n, const Stmt& self) {
  std::vector<Stmt> stmts;
  bool changed = false;
  for (const Stmt& s : n.stmts) {
    stmts.push_back(mutate(s));
    if (stmts.back() != s) changed = true;
  }
  return changed ? make_seq(std::move(stmts), n.loc) : self;
}
Stmt IRMutator::visit(const AllocateNode& n, const Stmt& self) {
  Buffer buffer = mutate_buffer(n.buffer);
  Stmt body = mutate(n.body);
  if (buffer == n.buffer && body == n.body) return self;
  return make_allocate(buffer, body, n.loc);
}
Stmt IRMutator::visit(const EvaluateNode& n, const Stmt& self) {
  Expr v = mutate(n.value);
  return v == n.value ? self : make_evaluate(v, n.loc);
}
Stmt IRMutator::visit(const InlineCodeNode& n, const Stmt& self) {
  bool changed = false;
  std::vector<std::pair<std::string, Expr>> args;
  for (const auto& [name, e] : n.args) {
    args.push_back({name, mutate(e)});
    changed |= args.back().second != e;
  }
  return changed ? std::make_shared<const InlineCodeNode>(n.target, n.code, std::move(args), n.loc) : self;
}
Stmt IRMutator::visit(const KernelLaunchNode& n, const Stmt& self) {
  bool changed = false;
  std::vector<Expr> grid = mutate_all(n.grid, &changed);
  Stmt body = mutate(n.body);
  if (!changed && body == n.body) return self;
  return std::make_shared<const KernelLaunchNode>(std::move(grid), n.block_vars, n.threads, n.thread_var, n.swizzle_panel, body, n.loc);
}
Stmt IRMutator::visit(const BarrierNode&, const Stmt& self) { return self; }
Stmt IRMutator::visit(const CopyNode& n, const Stmt& self) {
  Region src = mutate_region(n.src), dst = mutate_region(n.dst);
  Expr barrier = n.barrier ? mutate(n.barrier) : nullptr;
  if (same_region(src, n.src) && same_region(dst, n.dst) && barrier == n.barrier) return self;
  return std::make_shared<const CopyNode>(std::move(src), std::move(dst), n.loc, std::move(barrier));
}
Stmt IRMutator::visit(const GemmNode& n, const Stmt& self) {
  Region a = mutate_region(n.a), b = mutate_region(n.b), c = mutate_region(n.c);
  Stmt epilogue = mutate(n.epilogue);
  if (same_region(a, n.a) && same_region(b, n.b) && same_region(c, n.c) && epilogue == n.epilogue) return self;
  return std::make_shared<const GemmNode>(std::move(a), std::move(b), std::move(c), n.trans_a, n.trans_b, n.clear_accum,
                                          n.accum_dtype, epilogue, n.acc, n.epilogue_indices, n.loc, n.tiling);
}
Stmt IRMutator::visit(const FillNode& n, const Stmt& self) {
  Region dst = mutate_region(n.dst);
  Expr value = mutate(n.value);
  if (same_region(dst, n.dst) && value == n.value) return self;
  return std::make_shared<const FillNode>(std::move(dst), value, n.loc);
}
Stmt IRMutator::visit(const ReduceNode& n, const Stmt& self) {
  Region src = mutate_region(n.src), dst = mutate_region(n.dst);
  if (same_region(src, n.src) && same_region(dst, n.dst)) return self;
  return std::make_shared<const ReduceNode>(n.reduce_kind, std::move(src), std::move(dst), n.dim, n.clear, n.loc);
}

// ---------------------------------------------------------------- for_each_expr

namespace {
class ExprWalker : public IRVisitor {
 public:
  explicit ExprWalker(const std::function<void(const Expr&)>& f) : f_(f) {}
  void walk(const Expr& e) {
    if (!e) return;
    f_(e);
    visit_expr(e);
  }

 protected:
  // Every child expression goes through walk() so f sees it before its own children.
  void visit(const BinaryNode& n) override { walk(n.a); walk(n.b); }
  void visit(const UnaryNode& n) override { walk(n.a); }
  void visit(const SelectNode& n) override { walk(n.cond); walk(n.t); walk(n.f); }
  void visit(const CastNode& n) override { walk(n.value); }
  void visit(const CallNode& n) override { for (const Expr& a : n.args) walk(a); }
  void visit(const BufferLoadNode& n) override { for (const Expr& i : n.indices) walk(i); }
  void visit(const BufferStoreNode& n) override {
    for (const Expr& i : n.indices) walk(i);
    walk(n.value);
  }
  void visit(const LetStmtNode& n) override { walk(n.value); visit_stmt(n.body); }
  void visit(const ForNode& n) override { walk(n.min); walk(n.extent); visit_stmt(n.body); }
  void visit(const IfThenElseNode& n) override { walk(n.cond); visit_stmt(n.then_case); visit_stmt(n.else_case); }
  void visit(const EvaluateNode& n) override { walk(n.value); }
  void visit(const InlineCodeNode& n) override {
    for (const auto& [name, e] : n.args) walk(e);
  }
  void visit(const KernelLaunchNode& n) override {
    for (const Expr& g : n.grid) walk(g);
    visit_stmt(n.body);
  }
  void visit(const CopyNode& n) override {
    walk_region(n.src);
    walk_region(n.dst);
    if (n.barrier) walk(n.barrier);
  }
  void visit(const GemmNode& n) override {
    walk_region(n.a);
    walk_region(n.b);
    walk_region(n.c);
    visit_stmt(n.epilogue);
  }
  void visit(const FillNode& n) override { walk_region(n.dst); walk(n.value); }
  void visit(const ReduceNode& n) override { walk_region(n.src); walk_region(n.dst); }

 private:
  void walk_region(const Region& r) {
    for (const Range& range : r.ranges) {
      walk(range.min);
      walk(range.extent);
    }
  }
  const std::function<void(const Expr&)>& f_;
};
}  // namespace

void for_each_expr(const Stmt& stmt, const std::function<void(const Expr&)>& f) { ExprWalker(f).visit_stmt(stmt); }
void for_each_expr(const Expr& expr, const std::function<void(const Expr&)>& f) { ExprWalker(f).walk(expr); }

}  // namespace tilelang::ir
