#include "tilelang/passes/lower_host_cuda.h"

#include <algorithm>

#include "rt/error.h"
#include "tilelang/analysis/access.h"
#include "tilelang/analysis/dependence.h"
#include "tilelang/diagnostics.h"
#include "tilelang/ir/equality.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

constexpr int64_t kThreads = 256;  // threads per block of the generated whole-tensor kernels

// A launch of `threads` threads per block whose body already is per-thread code: loops inside it
// run serially in each thread.
ir::Stmt launch(std::vector<ir::Expr> grid, int64_t threads, const std::function<ir::Stmt(const std::vector<ir::Var>&, const ir::Var&)>& body,
                const SourceLoc& loc) {
  static const char* kNames[] = {"bx", "by", "bz"};
  std::vector<ir::Var> blocks;
  for (size_t i = 0; i < grid.size(); ++i) blocks.push_back(ir::make_var(kNames[i], ir::DType::I32, loc));
  ir::Var tx = ir::make_var("tx", ir::DType::I32, loc);
  for (ir::Expr& g : grid) g = ir::cast(ir::DType::I32, g);
  return std::make_shared<const ir::KernelLaunchNode>(std::move(grid), blocks, threads, tx, 0, body(blocks, tx), loc);
}

// Inner loops of per-thread code run serially.
class SerializeLoops : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    ir::Stmt body = mutate(n.body);
    if (n.for_kind == ir::ForKind::Serial && body == n.body) return self;
    ir::ForKind kind = n.for_kind == ir::ForKind::Unrolled ? n.for_kind : ir::ForKind::Serial;
    return ir::make_for(n.var, n.min, n.extent, kind, body, n.loc);
  }
};
ir::Stmt serial(const ir::Stmt& s) { return SerializeLoops().mutate(s); }

bool hopper_gemm_fits(const ir::GemmNode& g, const PassOptions& options) {
  // TMA needs 16-byte aligned tensor bases.
  if (options.target.arch != "sm_90a" || !options.tensors_aligned) return false;
  ir::DType t = g.a.buffer->dtype;
  if ((t != ir::DType::BF16 && t != ir::DType::F16) || g.b.buffer->dtype != t) return false;
  if (g.trans_a || g.a.ranges.size() != 2 || g.b.ranges.size() != 2 || g.c.ranges.size() != 2) return false;
  // Whole operands (TMA describes whole tensors), 16-byte rows.
  auto whole = [](const ir::Region& r) {
    for (size_t d = 0; d < r.ranges.size(); ++d)
      if (!ir::is_const_int(r.ranges[d].min, 0) || !ir::structural_equal(r.ranges[d].extent, r.buffer->shape[d])) return false;
    return true;
  };
  if (!whole(g.a) || !whole(g.b) || !whole(g.c)) return false;
  auto k = ir::as_const_int(g.a.buffer->shape[1]), n = ir::as_const_int(g.c.buffer->shape[1]);
  if (!k || !n || *k % 8 != 0 || *n % 8 != 0) return false;
  // C: the operands' dtype (TMA store) or float32 (direct store).
  ir::DType tc = g.epilogue ? t : g.c.buffer->dtype;
  return tc == t || tc == ir::DType::F32;
}

// C = A * B (+ epilogue) with one thread per element of C: any dtype, layout, batch, epilogue.
ir::Stmt generic_gemm(const ir::GemmNode& g, const std::vector<const ir::ForNode*>& batch, const SourceLoc& loc) {
  size_t rc = g.c.ranges.size(), ra = g.a.ranges.size();
  ir::Expr m = g.c.ranges[rc - 2].extent, n = g.c.ranges[rc - 1].extent;
  ir::Expr k = g.trans_a ? g.a.ranges[ra - 2].extent : g.a.ranges[ra - 1].extent;
  ir::Expr batches = ir::make_int(1);
  for (const ir::ForNode* f : batch) batches = ir::mul(batches, f->extent);
  constexpr int64_t kTile = 16;
  return launch({ir::floor_div(ir::add(n, ir::make_int(kTile - 1)), ir::make_int(kTile)),
                 ir::floor_div(ir::add(m, ir::make_int(kTile - 1)), ir::make_int(kTile)), batches},
                kTile * kTile,
                [&](const std::vector<ir::Var>& b, const ir::Var& tx) {
                  ir::Var i = ir::make_var("i", ir::DType::I32, loc), j = ir::make_var("j", ir::DType::I32, loc);
                  ir::Var kk = ir::make_var("k", ir::DType::I32, loc);
                  // Batch loop variables from the z block index, innermost fastest.
                  ir::VarMap batch_vars;
                  ir::Expr rest = b[2];
                  for (size_t d = batch.size(); d-- > 0;) {
                    batch_vars[batch[d]->var.get()] = ir::add(batch[d]->min, ir::floor_mod(rest, ir::cast(ir::DType::I32, batch[d]->extent)));
                    rest = ir::floor_div(rest, ir::cast(ir::DType::I32, batch[d]->extent));
                  }
                  auto at = [&](const ir::Region& r, const ir::Expr& row, const ir::Expr& col) {
                    std::vector<ir::Expr> idx;
                    for (size_t d = 0; d + 2 < r.ranges.size(); ++d) idx.push_back(ir::substitute(r.ranges[d].min, batch_vars));
                    idx.push_back(ir::add(ir::substitute(r.ranges[r.ranges.size() - 2].min, batch_vars), row));
                    idx.push_back(ir::add(ir::substitute(r.ranges[r.ranges.size() - 1].min, batch_vars), col));
                    return ir::make_load(r.buffer, idx, loc);
                  };
                  ir::Buffer acc = ir::make_buffer("acc", g.accum_dtype, {}, ir::Scope::Local, loc);
                  ir::Expr a = g.trans_a ? at(g.a, kk, i) : at(g.a, i, kk);
                  ir::Expr bv = g.trans_b ? at(g.b, j, kk) : at(g.b, kk, j);
                  ir::Expr c_elem = at(g.c, i, j);
                  ir::Stmt init = ir::make_store(acc, {}, g.clear_accum ? ir::cast(g.accum_dtype, ir::make_int(0)) : ir::cast(g.accum_dtype, c_elem), loc);
                  ir::Stmt loop = ir::make_for(kk, ir::make_int(0), ir::cast(ir::DType::I32, k), ir::ForKind::Serial,
                                               ir::make_store(acc, {}, ir::add(ir::make_load(acc, {}), ir::mul(ir::cast(g.accum_dtype, a), ir::cast(g.accum_dtype, bv))), loc), loc);
                  ir::Stmt finish;
                  if (g.epilogue) {
                    ir::VarMap bind{{g.acc.get(), ir::make_load(acc, {})},
                                    {g.epilogue_indices[0].get(), ir::add(g.c.ranges[rc - 2].min, i)},
                                    {g.epilogue_indices[1].get(), ir::add(g.c.ranges[rc - 1].min, j)}};
                    finish = ir::substitute(serial(g.epilogue), bind);
                  } else {
                    const auto* l = ir::as<ir::BufferLoadNode>(c_elem);
                    finish = ir::make_store(g.c.buffer, l->indices, ir::cast(g.c.buffer->dtype, ir::make_load(acc, {})), loc);
                  }
                  ir::Stmt body = ir::make_allocate(acc, ir::make_seq({init, loop, finish}), loc);
                  body = ir::make_if(ir::logical_and(ir::compare(ir::BinaryOp::LT, i, ir::cast(ir::DType::I32, m)),
                                                     ir::compare(ir::BinaryOp::LT, j, ir::cast(ir::DType::I32, n))),
                                     body, nullptr, loc);
                  body = ir::make_let(j, ir::add(ir::mul(b[0], ir::make_int(kTile)), ir::floor_mod(tx, ir::make_int(kTile))), body, loc);
                  return ir::make_let(i, ir::add(ir::mul(b[1], ir::make_int(kTile)), ir::floor_div(tx, ir::make_int(kTile))), body, loc);
                },
                loc);
}

// A Hopper gemm whose epilogue runs as its own launch: the gemm writes a temporary of its
// accumulator's dtype, the epilogue reads it element by element -- the accumulator as the language
// defines a fused epilogue (a temporary of the operands' dtype rounded it first: with float16
// operands, `max(acc + bias, 0)` of a float32 `acc` added the bias to a float16 value, and a
// bfloat16 `acc` was rounded twice; found by difftest's seed_epi family on the H200).
ir::Stmt hopper_gemm(const ir::GemmNode& g, std::vector<ir::Buffer>& temps, const SourceLoc& loc) {
  if (!g.epilogue) return std::make_shared<const ir::GemmNode>(g);
  ir::DType t = g.accum_dtype;
  ir::Buffer tmp = ir::make_buffer(g.c.buffer->name + "_gemm", t, g.c.buffer->shape, ir::Scope::Global, loc);
  temps.push_back(tmp);
  ir::Region c{tmp, g.c.ranges, g.c.loc};
  ir::Stmt gemm = std::make_shared<const ir::GemmNode>(g.a, g.b, c, g.trans_a, g.trans_b, true, g.accum_dtype, nullptr, nullptr, std::vector<ir::Var>{}, loc, g.tiling);
  ir::Expr m = c.ranges[0].extent, n = c.ranges[1].extent;
  ir::Stmt epilogue = launch({ir::floor_div(ir::add(ir::mul(m, n), ir::make_int(kThreads - 1)), ir::make_int(kThreads))}, kThreads,
                             [&](const std::vector<ir::Var>& b, const ir::Var& tx) {
                               ir::Var e = ir::make_var("e", ir::DType::I32, loc);
                               ir::Expr i = ir::floor_div(e, ir::cast(ir::DType::I32, n)), j = ir::floor_mod(e, ir::cast(ir::DType::I32, n));
                               ir::Expr value = ir::cast(g.accum_dtype, ir::make_load(tmp, {ir::add(c.ranges[0].min, i), ir::add(c.ranges[1].min, j)}, loc));
                               ir::VarMap bind{{g.acc.get(), value}, {g.epilogue_indices[0].get(), ir::add(c.ranges[0].min, i)},
                                               {g.epilogue_indices[1].get(), ir::add(c.ranges[1].min, j)}};
                               ir::Stmt body = ir::make_if(ir::compare(ir::BinaryOp::LT, e, ir::cast(ir::DType::I32, ir::mul(m, n))),
                                                           ir::substitute(serial(g.epilogue), bind), nullptr, loc);
                               return ir::make_let(e, ir::add(ir::mul(b[0], ir::make_int(kThreads)), tx), body, loc);
                             },
                             loc);
  return ir::make_seq({gemm, epilogue});
}

// The first T.Kernel launch under a statement, if any.
class FindLaunch : public ir::IRVisitor {
 public:
  const ir::KernelLaunchNode* found = nullptr;

 protected:
  void visit(const ir::KernelLaunchNode& n) override {
    if (!found) found = &n;
  }
};

// Whole-tensor temporaries inside `s` (not in its T.Kernel launches), taken out of it: their
// allocations are widened to around `s`, where the host makes them.
class TakeGlobalAllocations : public ir::IRMutator {
 public:
  std::vector<ir::Buffer> taken;

 protected:
  ir::Stmt visit(const ir::KernelLaunchNode&, const ir::Stmt& self) override { return self; }
  ir::Stmt visit(const ir::AllocateNode& n, const ir::Stmt& self) override {
    if (n.buffer->scope != ir::Scope::Global) return ir::IRMutator::visit(n, self);
    taken.push_back(n.buffer);
    return mutate(n.body);
  }
};

// One whole-tensor statement as launches.
ir::Stmt to_launches(const ir::Stmt& s, const PassOptions& options, std::vector<ir::Buffer>& temps) {
  if (ir::as<ir::KernelLaunchNode>(s) || ir::is_no_op(s)) return s;
  // A host-level local (a mutable scalar: `t = 0.0` then a loop) makes its statements one serial
  // kernel; the tensors allocated under it go around that kernel (they were an error inside it).
  if (const auto* a = ir::as<ir::AllocateNode>(s); a && a->buffer->scope != ir::Scope::Global) {
    TakeGlobalAllocations take;
    ir::Stmt rest = take.mutate(s);
    if (!take.taken.empty()) {
      ir::Stmt out = to_launches(rest, options, temps);
      for (auto it = take.taken.rbegin(); it != take.taken.rend(); ++it) out = ir::make_allocate(*it, out, (*it)->loc);
      return out;
    }
  }
  if (const auto* seq = ir::as<ir::SeqNode>(s)) {
    std::vector<ir::Stmt> out;
    for (const ir::Stmt& x : seq->stmts) out.push_back(to_launches(x, options, temps));
    return ir::make_seq(std::move(out), seq->loc);
  }
  if (const auto* a = ir::as<ir::AllocateNode>(s); a && a->buffer->scope == ir::Scope::Global)
    return ir::make_allocate(a->buffer, to_launches(a->body, options, temps), a->loc);
  // What is left becomes device code, so it must not hold a launch of its own (the CPU runs such a
  // host loop of launches; the CUDA host code is a plain sequence of launches).
  FindLaunch find;
  find.visit_stmt(s);
  if (find.found)
    error_at(find.found->loc, rt::str("this T.Kernel is inside a loop or 'if' outside any kernel (at ", s->loc.to_string(),
                                      "), which the CUDA target cannot run: its host code only launches kernels one after another; "
                                      "make the loop a grid dimension of the T.Kernel or move it into the kernel"));
  // A gemm, possibly inside batch loops.
  std::vector<const ir::ForNode*> batch;
  ir::Stmt cur = s;
  while (const auto* f = ir::as<ir::ForNode>(cur)) {
    batch.push_back(f);
    cur = f->body;
  }
  if (const auto* g = ir::as<ir::GemmNode>(cur)) {
    if (batch.empty() && hopper_gemm_fits(*g, options)) return hopper_gemm(*g, temps, g->loc);
    return generic_gemm(*g, batch, g->loc);
  }
  // Independent loop nests: one thread per iteration of the nest's independent loops. A loop whose
  // range depends on an outer one of the nest (`for j in range(i, n)`, a triangle) is not flattened
  // into the grid: it runs in each thread of the loops around it (its bounds named a variable the
  // grid does not have -- a located error on a valid program, found by difftest's seed families).
  std::vector<const ir::ForNode*> nest;
  cur = s;
  auto depends_on_nest = [&](const ir::ForNode& f) {
    return std::any_of(nest.begin(), nest.end(), [&](const ir::ForNode* outer) {
      return analysis::uses_var(f.min, outer->var.get()) || analysis::uses_var(f.extent, outer->var.get());
    });
  };
  while (const auto* f = ir::as<ir::ForNode>(cur)) {
    if (!analysis::iterations_independent(*f) || depends_on_nest(*f)) break;
    nest.push_back(f);
    cur = f->body;
  }
  if (!nest.empty()) {
    ir::Expr total = ir::make_int(1, ir::DType::I64);
    for (const ir::ForNode* f : nest) total = ir::mul(total, ir::cast(ir::DType::I64, f->extent));
    ir::Stmt inner = serial(cur);
    const SourceLoc& loc = s->loc;
    return launch({ir::cast(ir::DType::I32, ir::floor_div(ir::add(total, ir::make_int(kThreads - 1, ir::DType::I64)), ir::make_int(kThreads, ir::DType::I64)))},
                  kThreads,
                  [&](const std::vector<ir::Var>& b, const ir::Var& tx) {
                    ir::Var e = ir::make_var("e", ir::DType::I64, loc);
                    ir::VarMap bind;
                    ir::Expr rest = e;
                    for (size_t d = nest.size(); d-- > 0;) {
                      ir::Expr ext = ir::cast(ir::DType::I64, nest[d]->extent);
                      bind[nest[d]->var.get()] = ir::cast(nest[d]->var->dtype, ir::add(ir::cast(ir::DType::I64, nest[d]->min), ir::floor_mod(rest, ext)));
                      rest = ir::floor_div(rest, ext);
                    }
                    ir::Stmt body = ir::make_if(ir::compare(ir::BinaryOp::LT, e, total), ir::substitute(inner, bind), nullptr, loc);
                    return ir::make_let(e, ir::add(ir::mul(ir::cast(ir::DType::I64, b[0]), ir::make_int(kThreads, ir::DType::I64)), ir::cast(ir::DType::I64, tx)),
                                        body, loc);
                  },
                  loc);
  }
  // Serial code: one thread.
  return launch({ir::make_int(1)}, 1, [&](const std::vector<ir::Var>&, const ir::Var&) { return serial(s); }, s->loc);
}

}  // namespace

ir::PrimFunc lower_host_cuda(const ir::PrimFunc& func, const PassOptions& options) {
  if (options.target.kind != Target::Kind::CUDA) return func;
  std::vector<ir::Buffer> temps;
  ir::PrimFunc out = func;
  out.body = to_launches(func.body, options, temps);
  // Temporaries made here (gemm results feeding an epilogue) are allocated around the whole body.
  for (const ir::Buffer& t : temps) out.body = ir::make_allocate(t, out.body, t->loc);
  return out;
}

}  // namespace tilelang::passes
