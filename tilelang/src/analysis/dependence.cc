#include "tilelang/analysis/dependence.h"

#include <map>
#include <set>

#include "tilelang/analysis/access.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/ir/equality.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::analysis {
namespace {

// Statements that write memory, with the indices or regions they write.
struct Write {
  const ir::BufferNode* buffer;
  std::vector<ir::Expr> indices;  // element writes
  const ir::Region* region;       // tile writes
  bool atomic;
};

class WriteCollector : public ir::IRVisitor {
 public:
  std::vector<Write> writes;
  std::set<const ir::BufferNode*> allocated;
  bool opaque = false;  // extern calls or inline code: unknown effects

 protected:
  void visit(const ir::BufferStoreNode& n) override {
    writes.push_back({n.buffer.get(), n.indices, nullptr, n.atomic_add});
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::AllocateNode& n) override {
    allocated.insert(n.buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::GemmNode& n) override {
    writes.push_back({n.c.buffer.get(), {}, &n.c, false});
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::CopyNode& n) override { writes.push_back({n.dst.buffer.get(), {}, &n.dst, false}); }
  void visit(const ir::FillNode& n) override { writes.push_back({n.dst.buffer.get(), {}, &n.dst, false}); }
  void visit(const ir::ReduceNode& n) override { writes.push_back({n.dst.buffer.get(), {}, &n.dst, false}); }
  void visit(const ir::CallNode& n) override {
    opaque |= n.call_kind == ir::CallKind::Extern;
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::InlineCodeNode&) override { opaque = true; }
};

// Is `e` the loop variable plus something that does not change inside the loop?
bool is_var_plus_invariant(const ir::Expr& e, const ir::VarNode* var, const std::set<const ir::VarNode*>& inner) {
  auto lin = as_linear(e);
  if (!lin || lin->coefficient(var) != 1) return false;
  for (const auto& [v, c] : lin->terms)
    if (v.get() != var && inner.count(v.get())) return false;
  return true;
}

// Per dimension, the index a write stores at: its element index, or the start of a region
// dimension of extent 1 (null for a wider one).
std::vector<ir::Expr> written_position(const Write& w) {
  if (!w.region) return w.indices;
  std::vector<ir::Expr> at;
  for (const ir::Range& r : w.region->ranges) at.push_back(ir::is_const_int(r.extent, 1) ? r.min : nullptr);
  return at;
}

}  // namespace

std::set<const ir::VarNode*> vars_bound_inside(const ir::Stmt& s) {
  std::set<const ir::VarNode*> out;
  struct Binder : ir::IRVisitor {
    std::set<const ir::VarNode*>& out;
    explicit Binder(std::set<const ir::VarNode*>& o) : out(o) {}
    void visit(const ir::ForNode& n) override {
      out.insert(n.var.get());
      ir::IRVisitor::visit(n);
    }
    void visit(const ir::LetStmtNode& n) override {
      out.insert(n.var.get());
      ir::IRVisitor::visit(n);
    }
  } b(out);
  b.visit_stmt(s);
  return out;
}

bool iterations_independent(const ir::ForNode& loop) {
  WriteCollector wc;
  wc.visit_stmt(loop.body);
  if (wc.opaque) return false;
  std::set<const ir::VarNode*> inner = vars_bound_inside(loop.body);
  const ir::VarNode* var = loop.var.get();
  std::map<const ir::BufferNode*, std::vector<const Write*>> by_buffer;
  for (const Write& w : wc.writes) {
    if (wc.allocated.count(w.buffer)) continue;  // private to the iteration
    if (w.atomic) continue;
    by_buffer[w.buffer].push_back(&w);
  }
  // Each iteration owns what it writes of a buffer when, in some dimension, every write of it is at
  // the same loop variable plus invariant: `y[i] = ..; y[i + 1] = ..` writes across iterations.
  for (const auto& [buf, ws] : by_buffer) {
    const std::vector<ir::Expr> first = written_position(*ws.front());
    bool owned = false;
    for (size_t d = 0; d < first.size() && !owned; ++d) {
      owned = first[d] && is_var_plus_invariant(first[d], var, inner);
      for (const Write* w : ws) {
        const std::vector<ir::Expr> at = written_position(*w);
        owned &= at.size() == first.size() && at[d] && ir::structural_equal(at[d], first[d]);
      }
    }
    if (!owned) return false;
  }
  // Reads of written buffers must be at exactly the written element.
  bool ok = true;
  ir::for_each_expr(loop.body, [&](const ir::Expr& e) {
    const auto* l = ir::as<ir::BufferLoadNode>(e);
    if (!l) return;
    auto it = by_buffer.find(l->buffer.get());
    if (it == by_buffer.end()) return;
    bool same = false;
    for (const Write* w : it->second) {
      if (w->region || w->indices.size() != l->indices.size()) continue;
      bool eq = true;
      for (size_t d = 0; d < l->indices.size(); ++d) eq &= ir::structural_equal(l->indices[d], w->indices[d]);
      same |= eq;
    }
    ok &= same;
  });
  // Tile operations reading a written buffer: only allowed when the buffer is not read at all.
  Accesses acc = accesses_of(loop.body);
  for (const auto& [buf, ws] : by_buffer)
    for (const Write* w : ws)
      if (w->region && acc.read.count(buf)) ok = false;
  return ok;
}

bool elementwise_along(const ir::ForNode& loop) {
  WriteCollector wc;
  wc.visit_stmt(loop.body);
  if (wc.opaque || wc.writes.empty()) return false;
  std::set<const ir::VarNode*> inner = vars_bound_inside(loop.body);
  if (!inner.empty()) return false;  // nested loops or lets: leave it to the compiler
  for (const Write& w : wc.writes)
    if (w.region || w.atomic || w.indices.empty() || !is_var_plus_invariant(w.indices.back(), loop.var.get(), inner)) return false;
  return true;
}

}  // namespace tilelang::analysis
