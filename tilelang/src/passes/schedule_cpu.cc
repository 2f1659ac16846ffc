#include "tilelang/passes/schedule_cpu.h"

#include <algorithm>
#include <map>
#include <set>

#include "rt/cpu_info.h"
#include "tilelang/analysis/access.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/ir/equality.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

constexpr int64_t kMinParallelWork = 1 << 14;  // iterations x statements below which threads cost more than they give

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
  auto lin = analysis::as_linear(e);
  if (!lin || lin->coefficient(var) != 1) return false;
  for (const auto& [v, c] : lin->terms)
    if (v.get() != var && inner.count(v.get())) return false;
  return true;
}

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

// Can the iterations of `loop` run at the same time? Each iteration must write its own elements
// (an index that is the loop variable plus an invariant), read what it writes only at those same
// elements, and keep its scalars to itself.
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
    bool own = false;
    if (w.region) {
      for (const ir::Range& r : w.region->ranges) own |= ir::is_const_int(r.extent, 1) && is_var_plus_invariant(r.min, var, inner);
    } else {
      for (const ir::Expr& i : w.indices) own |= is_var_plus_invariant(i, var, inner);
    }
    if (!own) return false;
    by_buffer[w.buffer].push_back(&w);
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
  analysis::Accesses acc = analysis::accesses_of(loop.body);
  for (const auto& [buf, ws] : by_buffer)
    for (const Write* w : ws)
      if (w->region && acc.read.count(buf)) ok = false;
  return ok;
}

// Iterations times statements, when the extents are known.
std::optional<int64_t> work_of(const ir::Stmt& s) {
  if (const auto* f = ir::as<ir::ForNode>(s)) {
    auto ext = ir::as_const_int(f->extent);
    auto inner = work_of(f->body);
    if (!ext || !inner) return std::nullopt;
    return *ext * *inner;
  }
  if (const auto* seq = ir::as<ir::SeqNode>(s)) {
    int64_t total = 0;
    for (const ir::Stmt& x : seq->stmts) {
      auto w = work_of(x);
      if (!w) return std::nullopt;
      total += *w;
    }
    return total;
  }
  if (const auto* a = ir::as<ir::AllocateNode>(s)) return work_of(a->body);
  if (const auto* l = ir::as<ir::LetStmtNode>(s)) return work_of(l->body);
  if (const auto* i = ir::as<ir::IfThenElseNode>(s)) {
    auto t = work_of(i->then_case);
    auto e = i->else_case ? work_of(i->else_case) : std::optional<int64_t>(0);
    if (!t || !e) return std::nullopt;
    return std::max(*t, *e);
  }
  if (ir::as<ir::GemmNode>(s)) return int64_t{1} << 30;
  return 1;
}

// An innermost loop whose every store is elementwise along the loop variable in the last
// dimension can use vector lanes.
bool vectorizable(const ir::ForNode& loop) {
  if (ir::as<ir::ForNode>(loop.body)) return false;
  WriteCollector wc;
  wc.visit_stmt(loop.body);
  if (wc.opaque || wc.writes.empty()) return false;
  std::set<const ir::VarNode*> inner = vars_bound_inside(loop.body);
  if (!inner.empty()) return false;  // nested loops or lets: leave it to the compiler
  for (const Write& w : wc.writes)
    if (w.region || w.atomic || w.indices.empty() || !is_var_plus_invariant(w.indices.back(), loop.var.get(), inner)) return false;
  return iterations_independent(loop);
}

class Scheduler : public ir::IRMutator {
 public:
  explicit Scheduler(const rt::CpuInfo& cpu) : cpu_(cpu) {}

 protected:
  ir::Stmt visit(const ir::KernelLaunchNode&, const ir::Stmt& self) override { return self; }  // blocks are the parallel unit there

  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    if (!in_parallel_ && cpu_.cores > 1 && iterations_independent(n)) {
      auto work = work_of(self);
      if (!work || *work >= kMinParallelWork) {
        ++in_parallel_;
        ir::Stmt body = mutate(n.body);
        --in_parallel_;
        return ir::make_for(n.var, n.min, n.extent, ir::ForKind::Parallel, body, n.loc);
      }
    }
    ir::Stmt body = mutate(n.body);
    ir::ForKind kind = n.for_kind == ir::ForKind::Parallel ? ir::ForKind::Serial : n.for_kind;
    ir::Stmt out = ir::make_for(n.var, n.min, n.extent, kind, body, n.loc, n.num_stages);
    if (vectorizable(*ir::as<ir::ForNode>(out))) return ir::make_for(n.var, n.min, n.extent, ir::ForKind::Vectorized, body, n.loc);
    return out;
  }

  ir::Stmt visit(const ir::GemmNode& n, const ir::Stmt& self) override {
    // Block sizes from the caches (the BLIS recipe): a kc x nr sliver of B and an mr x kc sliver of
    // A stay in L1, an mc x kc block of A in L2, a kc x nc panel of B in L3 (or the L2s together).
    ir::GemmTiling t;
    int64_t elem = 4;  // operands are packed as f32
    t.block_k = std::clamp<int64_t>(cpu_.l1d_bytes / (2 * 32 * elem) / 16 * 16, 128, 512);
    t.block_m = std::clamp<int64_t>(cpu_.l2_bytes / (2 * t.block_k * elem) / 16 * 16, 48, 480);
    int64_t l3 = cpu_.l3_bytes > 0 ? std::min<int64_t>(cpu_.l3_bytes, cpu_.l2_bytes * cpu_.cores * 4) : cpu_.l2_bytes * cpu_.cores;
    t.block_n = std::clamp<int64_t>(l3 / (2 * t.block_k * elem) / 64 * 64, 256, 4096);
    t.threads = in_parallel_ ? 1 : cpu_.cores;
    return std::make_shared<const ir::GemmNode>(n.a, n.b, n.c, n.trans_a, n.trans_b, n.clear_accum, n.accum_dtype, n.epilogue, n.acc,
                                                n.epilogue_indices, n.loc, t);
  }

 private:
  const rt::CpuInfo& cpu_;
  int in_parallel_ = 0;
};

}  // namespace

ir::PrimFunc schedule_cpu(const ir::PrimFunc& func, const PassOptions& options) {
  if (options.target.kind != Target::Kind::CPU) return func;
  ir::PrimFunc out = func;
  out.body = Scheduler(rt::cpu_info()).mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
