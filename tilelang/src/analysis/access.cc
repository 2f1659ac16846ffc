#include "tilelang/analysis/access.h"

#include "tilelang/ir/visitor.h"

namespace tilelang::analysis {
namespace {

class Collector : public ir::IRVisitor {
 public:
  Accesses out;

 protected:
  void visit(const ir::VarNode& v) override { out.vars.insert(&v); }
  void visit(const ir::BufferLoadNode& n) override {
    out.read.insert(n.buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::BufferStoreNode& n) override {
    out.written.insert(n.buffer.get());
    if (n.atomic_add) out.read.insert(n.buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::CopyNode& n) override {
    out.read.insert(n.src.buffer.get());
    out.written.insert(n.dst.buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::GemmNode& n) override {
    out.read.insert(n.a.buffer.get());
    out.read.insert(n.b.buffer.get());
    if (!n.epilogue) out.written.insert(n.c.buffer.get());
    if (!n.clear_accum) out.read.insert(n.c.buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::FillNode& n) override {
    out.written.insert(n.dst.buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::ReduceNode& n) override {
    out.read.insert(n.src.buffer.get());
    out.written.insert(n.dst.buffer.get());
    if (!n.clear) out.read.insert(n.dst.buffer.get());
    ir::IRVisitor::visit(n);
  }
};

}  // namespace

Accesses accesses_of(const ir::Stmt& stmt) {
  Collector c;
  c.visit_stmt(stmt);
  return c.out;
}

bool uses_var(const ir::Expr& expr, const ir::VarNode* var) {
  bool found = false;
  ir::for_each_expr(expr, [&](const ir::Expr& e) { found |= e.get() == var; });
  return found;
}
bool uses_var(const ir::Stmt& stmt, const ir::VarNode* var) { return accesses_of(stmt).vars.count(var) > 0; }

bool uses_buffer(const ir::Stmt& stmt, const ir::BufferNode* buffer) {
  Accesses a = accesses_of(stmt);
  return a.read.count(buffer) || a.written.count(buffer);
}
bool uses_buffer(const ir::Expr& expr, const ir::BufferNode* buffer) {
  bool found = false;
  ir::for_each_expr(expr, [&](const ir::Expr& e) {
    if (const auto* l = ir::as<ir::BufferLoadNode>(e)) found |= l->buffer.get() == buffer;
  });
  return found;
}

bool calls_user_code(const ir::Stmt& s) {
  struct Finder : ir::IRVisitor {
    bool found = false;
    using ir::IRVisitor::visit;
    void visit(const ir::InlineCodeNode&) override { found = true; }
    void visit(const ir::CallNode& n) override {
      found = found || n.call_kind == ir::CallKind::Extern;
      ir::IRVisitor::visit(n);
    }
  } finder;
  finder.visit_stmt(s);
  return finder.found;
}

bool calls_intrinsic(const ir::Stmt& s, const std::string& name) {
  bool found = false;
  ir::for_each_expr(s, [&](const ir::Expr& e) {
    const auto* c = ir::as<ir::CallNode>(e);
    found = found || (c && c->call_kind == ir::CallKind::Intrinsic && c->name == name);
  });
  return found;
}

}  // namespace tilelang::analysis
