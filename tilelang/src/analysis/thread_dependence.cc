#include "tilelang/analysis/thread_dependence.h"

#include "tilelang/analysis/access.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::analysis {

ThreadDependence::ThreadDependence(const ir::Stmt& body, const ir::VarNode* thread_var) {
  vars_.insert(thread_var);
  for (bool changed = true; changed;) {
    size_t before = per_thread_.size() + vars_.size();
    scan(body, false);
    changed = per_thread_.size() + vars_.size() != before;
  }
}

bool ThreadDependence::dependent(const ir::Stmt& s) const {
  Accesses a = accesses_of(s);
  for (const ir::VarNode* v : vars_)
    if (a.vars.count(v)) return true;
  for (const ir::BufferNode* b : per_thread_)
    if (a.read.count(b) || a.written.count(b)) return true;
  return false;
}

bool ThreadDependence::uses_thread_index(const ir::Stmt& s) const {
  Accesses a = accesses_of(s);
  for (const ir::VarNode* v : vars_)
    if (a.vars.count(v)) return true;
  return false;
}

bool ThreadDependence::dependent(const ir::Expr& e) const {
  bool dep = false;
  ir::for_each_expr(e, [&](const ir::Expr& x) {
    if (x->kind == ir::NodeKind::Var) dep |= vars_.count(static_cast<const ir::VarNode*>(x.get())) > 0;
    if (const auto* l = ir::as<ir::BufferLoadNode>(x)) dep |= per_thread_.count(l->buffer.get()) > 0;
  });
  return dep;
}

void ThreadDependence::scan(const ir::Stmt& s, bool dep_ctx) {
  if (!s) return;
  if (const auto* st = ir::as<ir::BufferStoreNode>(s)) {
    bool dep = dep_ctx || dependent(st->value);
    for (const ir::Expr& i : st->indices) dep |= dependent(i);
    if (dep && st->buffer->scope == ir::Scope::Local) per_thread_.insert(st->buffer.get());
  } else if (const auto* seq = ir::as<ir::SeqNode>(s)) {
    for (const ir::Stmt& x : seq->stmts) scan(x, dep_ctx);
  } else if (const auto* f = ir::as<ir::ForNode>(s)) {
    bool dep = dep_ctx || dependent(f->min) || dependent(f->extent);
    if (dep) vars_.insert(f->var.get());
    scan(f->body, dep);
  } else if (const auto* i = ir::as<ir::IfThenElseNode>(s)) {
    bool d = dep_ctx || dependent(i->cond);
    scan(i->then_case, d);
    scan(i->else_case, d);
  } else if (const auto* l = ir::as<ir::LetStmtNode>(s)) {
    if (dep_ctx || dependent(l->value)) vars_.insert(l->var.get());
    scan(l->body, dep_ctx);
  } else if (const auto* a = ir::as<ir::AllocateNode>(s)) {
    scan(a->body, dep_ctx);
  } else if (dep_ctx) {
    // Tile operations under per-thread control write per-thread data too.
    Accesses acc = accesses_of(s);
    for (const ir::BufferNode* b : acc.written)
      if (b->scope == ir::Scope::Local) per_thread_.insert(b);
  }
}

}  // namespace tilelang::analysis
