#include "tilelang/passes/recognize_tile_ops.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "rt/error.h"
#include "tilelang/analysis/access.h"
#include "tilelang/analysis/patterns.h"
#include "tilelang/ir/equality.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

using analysis::strip_float_casts;

struct Loop {
  ir::Var var;
  ir::Expr min, extent;
  SourceLoc loc;
};

// A perfect loop nest: loops each holding exactly the next, down to a non-loop body.
struct Nest {
  std::vector<Loop> loops;
  ir::Stmt body;
};

Nest nest_of(const ir::Stmt& s) {
  Nest n;
  ir::Stmt cur = s;
  while (const auto* f = ir::as<ir::ForNode>(cur)) {
    if (f->for_kind != ir::ForKind::Serial && f->for_kind != ir::ForKind::Parallel) break;
    n.loops.push_back({f->var, f->min, f->extent, f->loc});
    cur = f->body;
  }
  n.body = cur;
  return n;
}

const ir::VarNode* as_var(const ir::Expr& e) { return e && e->kind == ir::NodeKind::Var ? static_cast<const ir::VarNode*>(e.get()) : nullptr; }

const Loop* loop_of(const Nest& n, const ir::VarNode* v) {
  for (const Loop& l : n.loops)
    if (l.var.get() == v) return &l;
  return nullptr;
}


// An index of the product: a loop variable of the nest, or a constant -- what a loop of one iteration
// becomes (simplify inlines those before recognition runs: a product of one row or column, a batch
// of one), or an index the program wrote so. A constant is a region of extent 1 at that index.
struct Axis {
  ir::Var var;   // null for a constant
  ir::Expr index;  // the constant
  bool matches(const ir::Expr& e) const {
    if (var) return as_var(e) == var.get();
    auto c = ir::as_const_int(e), mine = ir::as_const_int(index);
    return c && mine && *c == *mine;
  }
};

struct GemmMatch {
  ir::Buffer a, b, c;
  std::vector<Axis> batch;  // the shared leading indices
  Axis i, j;
  ir::Var k;
  bool trans_a = false, trans_b = false;
  ir::DType accum = ir::DType::F32;
};

// Is `load` an operand indexed [batch.., row, k] (false) or [batch.., k, row] (true)?
std::optional<bool> operand_layout(const ir::BufferLoadNode* load, const std::vector<Axis>& batch, const Axis& row, const ir::Var& k) {
  if (!load || load->indices.size() != batch.size() + 2) return std::nullopt;
  for (size_t d = 0; d < batch.size(); ++d)
    if (!batch[d].matches(load->indices[d])) return std::nullopt;
  const ir::Expr& x = load->indices[batch.size()];
  const ir::Expr& y = load->indices[batch.size() + 1];
  if (row.matches(x) && as_var(y) == k.get()) return false;
  if (as_var(x) == k.get() && row.matches(y)) return true;
  return std::nullopt;
}

// C[.., i, j] = C[.., i, j] + X * Y over a perfect nest of i, j, k (and batch) loops.
std::optional<GemmMatch> match_gemm(const Nest& nest) {
  const auto* store = ir::as<ir::BufferStoreNode>(nest.body);
  if (!store || store->atomic_add || store->indices.size() < 2 || store->buffer->scope != ir::Scope::Global) return std::nullopt;
  const auto* add = ir::as<ir::BinaryNode>(analysis::strip_store_rounding(store->value, store->buffer->dtype));
  if (!add || add->op != ir::BinaryOp::Add) return std::nullopt;
  auto is_self = [&](const ir::Expr& e) { return analysis::loads_element(e, store->buffer, store->indices); };
  ir::Expr lhs = strip_float_casts(add->a), rhs = strip_float_casts(add->b);
  ir::Expr product = is_self(lhs) ? rhs : is_self(rhs) ? lhs : nullptr;
  const auto* mul = ir::as<ir::BinaryNode>(product);
  if (!mul || mul->op != ir::BinaryOp::Mul) return std::nullopt;

  std::vector<Axis> idx;  // C's indices: distinct loop variables of the nest, or constants
  size_t loop_indices = 0;
  for (const ir::Expr& e : store->indices) {
    if (ir::as_const_int(e)) {
      idx.push_back({nullptr, e});
      continue;
    }
    const Loop* l = loop_of(nest, as_var(e));
    if (!l || std::any_of(idx.begin(), idx.end(), [&](const Axis& a) { return a.var == l->var; })) return std::nullopt;
    idx.push_back({l->var, nullptr});
    ++loop_indices;
  }
  if (nest.loops.size() != loop_indices + 1) return std::nullopt;
  // The gemm's regions are the loops' ranges: a triangular nest (`for k in range(i)`) is no product.
  for (const Loop& bounded : nest.loops)
    for (const Loop& l : nest.loops)
      if (analysis::uses_var(bounded.min, l.var.get()) || analysis::uses_var(bounded.extent, l.var.get())) return std::nullopt;
  GemmMatch m;
  for (const Loop& l : nest.loops)
    if (std::none_of(idx.begin(), idx.end(), [&](const Axis& a) { return a.var == l.var; })) m.k = l.var;
  if (!m.k) return std::nullopt;
  m.c = store->buffer;
  // A bound that reads C changes as the nest updates C (`for k in range(int(c[0, 0]))` is evaluated
  // anew for each (i, j)); the gemm's regions are computed once, before it runs.
  for (const Loop& l : nest.loops)
    if (analysis::uses_buffer(l.min, m.c.get()) || analysis::uses_buffer(l.extent, m.c.get())) return std::nullopt;
  m.batch.assign(idx.begin(), idx.end() - 2);
  m.i = idx[idx.size() - 2];
  m.j = idx.back();
  const auto* x = ir::as<ir::BufferLoadNode>(strip_float_casts(mul->a));
  const auto* y = ir::as<ir::BufferLoadNode>(strip_float_casts(mul->b));
  for (int attempt = 0; attempt < 2; ++attempt, std::swap(x, y)) {
    auto ta = operand_layout(x, m.batch, m.i, m.k);  // A[i, k] plain, A[k, i] transposed
    auto tb = operand_layout(y, m.batch, m.j, m.k);  // B[j, k] transposed, B[k, j] plain
    if (!ta || !tb) continue;
    m.a = x->buffer;
    m.b = y->buffer;
    if (m.a == m.c || m.b == m.c) return std::nullopt;
    m.trans_a = *ta;
    m.trans_b = !*tb;
    // Float operands of at most 32 bits accumulate in f32 on every backend. Integer, f64 and packed
    // f4 products stay loops, where promote_reductions gives them an accumulator of their own type,
    // and so do sums into a float64 C (an f32 gemm would drop the precision they ask for).
    auto narrow_float = [](ir::DType t) { return rt::is_float(t) && t != ir::DType::F64 && t != ir::DType::F4E2M1 && t != ir::DType::UE8M0; };
    if (!narrow_float(m.a->dtype) || !narrow_float(m.b->dtype) || !narrow_float(m.c->dtype)) return std::nullopt;
    m.accum = ir::DType::F32;
    return m;
  }
  return std::nullopt;
}

ir::Range axis_range(const Nest& n, const Axis& a) {
  if (!a.var) return {a.index, ir::make_int(1, a.index->dtype)};
  const Loop* l = loop_of(n, a.var.get());
  return {l->min, l->extent};
}

// The gemm statement (inside its batch loops) for a match.
ir::Stmt build_gemm(const Nest& nest, const GemmMatch& m, bool clear, SourceLoc loc) {
  const Axis k{m.k, nullptr};
  auto region = [&](const ir::Buffer& buf, const Axis& r0, const Axis& r1, bool trans) {
    ir::Region out{buf, {}, loc};
    for (const Axis& b : m.batch) out.ranges.push_back(b.var ? ir::Range{b.var, ir::make_int(1, b.var->dtype)} : axis_range(nest, b));
    out.ranges.push_back(axis_range(nest, trans ? r1 : r0));
    out.ranges.push_back(axis_range(nest, trans ? r0 : r1));
    return out;
  };
  ir::Stmt s = std::make_shared<const ir::GemmNode>(region(m.a, m.i, k, m.trans_a), region(m.b, k, m.j, m.trans_b),
                                                    region(m.c, m.i, m.j, false), m.trans_a, m.trans_b, clear, m.accum, nullptr,
                                                    nullptr, std::vector<ir::Var>{}, loc);
  for (auto it = m.batch.rbegin(); it != m.batch.rend(); ++it) {
    if (!it->var) continue;
    const Loop* l = loop_of(nest, it->var.get());
    s = ir::make_for(l->var, l->min, l->extent, ir::ForKind::Serial, s, l->loc);
  }
  return s;
}

bool covers_whole(const ir::Region& r) {
  for (size_t d = 0; d < r.ranges.size(); ++d)
    if (!ir::is_const_int(r.ranges[d].min, 0) || !ir::structural_equal(r.ranges[d].extent, r.buffer->shape[d])) return false;
  return true;
}

bool is_zero(const ir::Expr& e) {
  auto f = ir::as_const_float(e);
  return f && *f == 0.0;
}

// Replaces C[i, j] loads by the accumulator (cast to C's dtype, as the unfused program stored it).
class AccumulatorSubst : public ir::IRMutator {
 public:
  AccumulatorSubst(const ir::BufferNode* c, const ir::VarNode* i, const ir::VarNode* j, ir::Expr acc)
      : c_(c), i_(i), j_(j), acc_(std::move(acc)) {}
  bool other_use = false;  // C read at another element

 protected:
  ir::Expr visit(const ir::BufferLoadNode& n, const ir::Expr& self) override {
    if (n.buffer.get() != c_) return ir::IRMutator::visit(n, self);
    if (n.indices.size() == 2 && as_var(n.indices[0]) == i_ && as_var(n.indices[1]) == j_) return acc_;
    other_use = true;
    return self;
  }

 private:
  const ir::BufferNode* c_;
  const ir::VarNode *i_, *j_;
  ir::Expr acc_;
};

// An elementwise nest over exactly C's region that only stores at its own element.
ir::Stmt try_fuse_epilogue(const ir::GemmNode& gemm, const ir::Stmt& next) {
  Nest nest = nest_of(next);
  if (nest.loops.size() != 2 || gemm.c.ranges.size() != 2) return nullptr;
  for (int d = 0; d < 2; ++d)
    if (!ir::structural_equal(nest.loops[d].min, gemm.c.ranges[d].min) || !ir::structural_equal(nest.loops[d].extent, gemm.c.ranges[d].extent))
      return nullptr;
  const ir::VarNode* vi = nest.loops[0].var.get();
  const ir::VarNode* vj = nest.loops[1].var.get();
  // The body: lets and stores only, every store at [vi, vj] of a buffer other than A, B, C.
  bool ok = true;
  std::function<void(const ir::Stmt&)> check = [&](const ir::Stmt& s) {
    if (const auto* seq = ir::as<ir::SeqNode>(s)) {
      for (const ir::Stmt& x : seq->stmts) check(x);
    } else if (const auto* let = ir::as<ir::LetStmtNode>(s)) {
      check(let->body);
    } else if (const auto* st = ir::as<ir::BufferStoreNode>(s)) {
      ok &= !st->atomic_add && st->indices.size() == 2 && as_var(st->indices[0]) == vi && as_var(st->indices[1]) == vj &&
            st->buffer != gemm.a.buffer && st->buffer != gemm.b.buffer && st->buffer != gemm.c.buffer;
    } else {
      ok = false;
    }
  };
  check(nest.body);
  if (!ok) return nullptr;
  // Stored buffers may be read only at the element being written.
  analysis::Accesses acc = analysis::accesses_of(nest.body);
  for (const ir::BufferNode* w : acc.written) {
    bool bad = false;
    ir::for_each_expr(nest.body, [&](const ir::Expr& e) {
      if (const auto* l = ir::as<ir::BufferLoadNode>(e); l && l->buffer.get() == w)
        bad |= !(l->indices.size() == 2 && as_var(l->indices[0]) == vi && as_var(l->indices[1]) == vj);
    });
    if (bad) return nullptr;
  }
  ir::Var acc_var = ir::make_var("acc", gemm.accum_dtype, gemm.loc);
  AccumulatorSubst subst(gemm.c.buffer.get(), vi, vj, ir::cast(gemm.c.buffer->dtype, acc_var));
  ir::Stmt epilogue = subst.mutate(nest.body);
  if (subst.other_use) return nullptr;
  return std::make_shared<const ir::GemmNode>(gemm.a, gemm.b, gemm.c, gemm.trans_a, gemm.trans_b, gemm.clear_accum, gemm.accum_dtype,
                                              epilogue, acc_var, std::vector<ir::Var>{nest.loops[0].var, nest.loops[1].var}, gemm.loc);
}

class Recognizer : public ir::IRMutator {
 public:
  explicit Recognizer(const ir::PrimFunc& func) {
    for (const ir::Param& p : func.params) params_.insert(p.buffer.get());
  }

 protected:
  ir::Stmt visit(const ir::KernelLaunchNode&, const ir::Stmt& self) override { return self; }  // explicit tile programs

  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    Nest nest = nest_of(self);
    if (auto m = match_gemm(nest)) return build_gemm(nest, *m, false, nest.body->loc);
    return ir::IRMutator::visit(n, self);
  }

  ir::Stmt visit(const ir::SeqNode& n, const ir::Stmt& self) override {
    std::vector<ir::Stmt> stmts;
    for (const ir::Stmt& s : n.stmts) stmts.push_back(mutate(s));
    // A zero fill of the whole C right before a gemm that writes all of C becomes the gemm's clear.
    for (size_t i = 1; i < stmts.size(); ++i) {
      const auto* fill = ir::as<ir::FillNode>(stmts[i - 1]);
      const auto* gemm = ir::as<ir::GemmNode>(stmts[i]);
      if (!fill || !gemm || gemm->clear_accum || fill->dst.buffer != gemm->c.buffer || !is_zero(fill->value)) continue;
      if (!covers_whole(fill->dst) || !covers_whole(gemm->c)) continue;
      stmts[i] = std::make_shared<const ir::GemmNode>(gemm->a, gemm->b, gemm->c, gemm->trans_a, gemm->trans_b, true, gemm->accum_dtype,
                                                      gemm->epilogue, gemm->acc, gemm->epilogue_indices, gemm->loc);
      stmts[i - 1] = ir::make_seq({});
    }
    return ir::make_seq(std::move(stmts), n.loc);
  }

  ir::Stmt visit(const ir::AllocateNode& n, const ir::Stmt& self) override {
    ir::Stmt body = mutate(n.body);
    if (n.buffer->scope == ir::Scope::Global && !params_.count(n.buffer.get())) {
      if (ir::Stmt fused = fuse_into_gemm(n.buffer.get(), body)) return fused;
    }
    return body == n.body ? self : ir::make_allocate(n.buffer, body, n.loc);
  }

 private:
  // When the temporary is written by one gemm and read only by the elementwise nest right after
  // it, that nest becomes the gemm's epilogue and the temporary goes away.
  ir::Stmt fuse_into_gemm(const ir::BufferNode* c, const ir::Stmt& body) {
    std::vector<const ir::AllocateNode*> allocs;  // other temporaries hoisted around the same body
    ir::Stmt cur = body;
    while (const auto* a = ir::as<ir::AllocateNode>(cur)) {
      allocs.push_back(a);
      cur = a->body;
    }
    const auto* seq = ir::as<ir::SeqNode>(cur);
    if (!seq) return nullptr;
    std::vector<ir::Stmt> stmts = seq->stmts;
    for (size_t i = 0; i + 1 < stmts.size(); ++i) {
      const auto* gemm = ir::as<ir::GemmNode>(stmts[i]);
      if (!gemm || gemm->c.buffer.get() != c || !gemm->clear_accum || gemm->epilogue) continue;
      ir::Stmt fused = try_fuse_epilogue(*gemm, stmts[i + 1]);
      if (!fused) continue;
      bool used_elsewhere = false;
      for (size_t j = 0; j < stmts.size(); ++j)
        if (j != i && j != i + 1) used_elsewhere |= analysis::uses_buffer(stmts[j], c);
      if (used_elsewhere) continue;
      stmts[i] = fused;
      stmts.erase(stmts.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      ir::Stmt out = ir::make_seq(std::move(stmts), seq->loc);
      for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) out = ir::make_allocate((*it)->buffer, out, (*it)->loc);
      return out;
    }
    return nullptr;
  }

  std::set<const ir::BufferNode*> params_;
};

}  // namespace

ir::PrimFunc recognize_tile_ops(const ir::PrimFunc& func, const PassOptions&) {
  if (func.style != ir::FuncStyle::TileKernel) return func;
  ir::PrimFunc out = func;
  out.body = Recognizer(func).mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
