// Traversal of the IR: IRVisitor walks, IRMutator rebuilds. One `visit` overload per node kind of
// nodes.def; the defaults walk (or rebuild) every child, so a pass overrides only the nodes it is about.
// IRMutator rebuilds a node only when a child changed, so an unchanged tree keeps its identity.
#pragma once

#include <functional>

#include "tilelang/ir/ir.h"

namespace tilelang::ir {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  void visit_expr(const Expr& expr);  // null is skipped
  void visit_stmt(const Stmt& stmt);
  void visit_region(const Region& region);  // the range expressions

 protected:
#define TL_EXPR_NODE(Name) virtual void visit(const Name##Node& node);
#define TL_STMT_NODE(Name) virtual void visit(const Name##Node& node);
#include "tilelang/ir/nodes.def"
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  Expr mutate(const Expr& expr);  // null stays null
  Stmt mutate(const Stmt& stmt);
  Region mutate_region(const Region& region);
  std::vector<Expr> mutate_all(const std::vector<Expr>& exprs, bool* changed);
  // Buffers referenced by loads, stores, regions and allocations pass through here (identity by default).
  virtual Buffer mutate_buffer(const Buffer& buffer) { return buffer; }

 protected:
#define TL_EXPR_NODE(Name) virtual Expr visit(const Name##Node& node, const Expr& self);
#define TL_STMT_NODE(Name) virtual Stmt visit(const Name##Node& node, const Stmt& self);
#include "tilelang/ir/nodes.def"
};

// Calls f on every expression node under stmt (each node of each expression tree), parents first.
void for_each_expr(const Stmt& stmt, const std::function<void(const Expr&)>& f);
void for_each_expr(const Expr& expr, const std::function<void(const Expr&)>& f);

}  // namespace tilelang::ir
