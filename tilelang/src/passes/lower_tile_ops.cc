#include "tilelang/passes/lower_tile_ops.h"

#include <limits>

#include "rt/error.h"
#include "tilelang/analysis/bounds.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

// A global -> shared copy, which a pipelined loop may turn into a bulk tensor copy.
bool global_to_shared(const ir::Stmt& s) {
  const auto* c = ir::as<ir::CopyNode>(s);
  return c && c->src.buffer->scope == ir::Scope::Global && c->dst.buffer->scope == ir::Scope::Shared;
}

class Lowerer : public ir::IRMutator {
 public:
  explicit Lowerer(bool keep_pipelined_copies) : keep_pipelined_copies_(keep_pipelined_copies) {}

 protected:
  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    auto lo = ir::as_const_int(n.min), ext = ir::as_const_int(n.extent);
    if (lo && ext && *ext > 0) ranges_[n.var.get()] = {*lo, *lo + *ext - 1};
    ir::Stmt out = keep_pipelined_copies_ && n.for_kind == ir::ForKind::Pipelined ? pipelined(n) : ir::IRMutator::visit(n, self);
    ranges_.erase(n.var.get());
    return out;
  }

  // The loop's own global -> shared copies stay whole; everything else is lowered.
  ir::Stmt pipelined(const ir::ForNode& n) {
    const auto* seq = ir::as<ir::SeqNode>(n.body);
    std::vector<ir::Stmt> body = seq ? seq->stmts : std::vector<ir::Stmt>{n.body};
    for (ir::Stmt& s : body)
      if (!global_to_shared(s)) s = mutate(s);
    return ir::make_for(n.var, n.min, n.extent, n.for_kind, ir::make_seq(std::move(body), n.loc), n.loc, n.pipelining());
  }
  ir::Stmt visit(const ir::KernelLaunchNode& n, const ir::Stmt& self) override {
    for (size_t i = 0; i < n.grid.size(); ++i)
      if (auto g = ir::as_const_int(n.grid[i])) ranges_[n.block_vars[i].get()] = {0, *g - 1};
    ranges_[n.thread_var.get()] = {0, n.threads - 1};
    return ir::IRMutator::visit(n, self);
  }

  ir::Stmt visit(const ir::CopyNode& n, const ir::Stmt& self) override {
    if (n.barrier) return self;
    std::vector<ir::Var> vars;
    std::vector<ir::Expr> extents;
    std::vector<ir::Expr> dst_idx = tile_indices(n.dst, vars, extents, n.loc);
    size_t v = 0;
    std::vector<ir::Expr> src_idx;
    for (const ir::Range& r : n.src.ranges) src_idx.push_back(ir::is_const_int(r.extent, 1) ? r.min : ir::add(r.min, vars[v++]));
    RT_ICHECK(v == vars.size(), "copy regions of different shapes reached lowering");
    for (size_t i = 0; i < vars.size(); ++i)
      if (auto e = ir::as_const_int(extents[i])) ranges_[vars[i].get()] = {0, *e - 1};
    ir::Expr in_src = inside(n.src.buffer, src_idx);
    ir::Expr in_dst = inside(n.dst.buffer, dst_idx);
    for (const ir::Var& x : vars) ranges_.erase(x.get());
    ir::Expr value = ir::make_load(n.src.buffer, src_idx, n.loc);
    if (!ir::is_const_int(in_src, 1)) value = ir::select(in_src, value, ir::cast(value->dtype, ir::make_int(0)), n.loc);
    ir::Stmt body = ir::make_store(n.dst.buffer, dst_idx, ir::cast(n.dst.buffer->dtype, value, n.loc), n.loc);
    if (!ir::is_const_int(in_dst, 1)) body = ir::make_if(in_dst, body, nullptr, n.loc);
    return wrap(vars, extents, body, n.loc);
  }

  ir::Stmt visit(const ir::FillNode& n, const ir::Stmt&) override {
    std::vector<ir::Var> vars;
    std::vector<ir::Expr> extents;
    std::vector<ir::Expr> idx = tile_indices(n.dst, vars, extents, n.loc);
    ir::Stmt body = ir::make_store(n.dst.buffer, idx, ir::cast(n.dst.buffer->dtype, mutate(n.value)), n.loc);
    return wrap(vars, extents, body, n.loc);
  }

  ir::Stmt visit(const ir::ReduceNode& n, const ir::Stmt&) override {
    // Loops over the kept dimensions of src; dst's non-unit dimensions follow them in order.
    std::vector<ir::Var> vars;
    std::vector<ir::Expr> extents;
    std::vector<ir::Expr> src_idx;
    ir::Var rvar = ir::make_var("r", n.src.ranges[n.dim].extent->dtype, n.loc);
    for (size_t d = 0; d < n.src.ranges.size(); ++d) {
      const ir::Range& r = n.src.ranges[d];
      if (static_cast<int>(d) == n.dim) {
        src_idx.push_back(ir::add(r.min, rvar));
      } else if (ir::is_const_int(r.extent, 1)) {
        src_idx.push_back(r.min);
      } else {
        vars.push_back(ir::make_var(rt::str("i", vars.size()), r.extent->dtype, n.loc));
        extents.push_back(r.extent);
        src_idx.push_back(ir::add(r.min, vars.back()));
      }
    }
    std::vector<ir::Expr> dst_idx;
    size_t v = 0;
    for (const ir::Range& r : n.dst.ranges) dst_idx.push_back(ir::is_const_int(r.extent, 1) ? r.min : ir::add(r.min, vars.at(v++)));
    RT_ICHECK(v == vars.size(), "reduce regions of different shapes reached lowering");

    // Accumulate in f32 (f64 for f64) or in i32 (i64 for i64), whatever the destination's width.
    ir::DType dt = n.dst.buffer->dtype;
    ir::DType t = rt::is_float(dt) ? (dt == ir::DType::F64 ? dt : ir::DType::F32) : (dt == ir::DType::I64 ? dt : ir::DType::I32);
    ir::Buffer acc = ir::make_buffer("red", t, {}, ir::Scope::Local, n.loc);
    ir::Expr x = ir::cast(t, ir::make_load(n.src.buffer, src_idx, n.loc));
    if (n.reduce_kind == ir::ReduceKind::AbsSum || n.reduce_kind == ir::ReduceKind::AbsMax) x = ir::call_math("abs", {x});
    ir::Expr a = ir::make_load(acc, {});
    ir::Expr combined;
    ir::Expr identity;
    double inf = std::numeric_limits<double>::infinity();
    switch (n.reduce_kind) {
      case ir::ReduceKind::Sum:
      case ir::ReduceKind::AbsSum: combined = ir::add(a, x); identity = ir::cast(t, ir::make_int(0)); break;
      case ir::ReduceKind::Max: combined = ir::max(a, x); identity = rt::is_float(t) ? ir::make_float(-inf, t) : ir::make_int(INT32_MIN, t); break;
      case ir::ReduceKind::AbsMax: combined = ir::max(a, x); identity = ir::cast(t, ir::make_int(0)); break;
      case ir::ReduceKind::Min: combined = ir::min(a, x); identity = rt::is_float(t) ? ir::make_float(inf, t) : ir::make_int(INT32_MAX, t); break;
    }
    ir::Expr init = n.clear ? identity : ir::cast(t, ir::make_load(n.dst.buffer, dst_idx));
    ir::Stmt body = ir::make_seq({ir::make_store(acc, {}, init, n.loc),
                                  ir::make_for(rvar, ir::make_int(0, rvar->dtype), n.src.ranges[n.dim].extent, ir::ForKind::Serial,
                                               ir::make_store(acc, {}, ir::cast(t, combined), n.loc), n.loc),
                                  ir::make_store(n.dst.buffer, dst_idx, ir::cast(dt, ir::make_load(acc, {})), n.loc)});
    return wrap(vars, extents, ir::make_allocate(acc, body, n.loc), n.loc);
  }

 private:
  // Indices for every element of a region: one loop variable per non-unit dimension.
  static std::vector<ir::Expr> tile_indices(const ir::Region& r, std::vector<ir::Var>& vars, std::vector<ir::Expr>& extents,
                                            const SourceLoc& loc) {
    std::vector<ir::Expr> idx;
    for (const ir::Range& x : r.ranges) {
      if (ir::is_const_int(x.extent, 1)) {
        idx.push_back(x.min);
        continue;
      }
      vars.push_back(ir::make_var(rt::str("i", vars.size()), x.extent->dtype, loc));
      extents.push_back(x.extent);
      idx.push_back(ir::add(x.min, vars.back()));
    }
    return idx;
  }

  static ir::Stmt wrap(const std::vector<ir::Var>& vars, const std::vector<ir::Expr>& extents, ir::Stmt body, const SourceLoc& loc) {
    for (size_t i = vars.size(); i-- > 0;)
      body = ir::make_for(vars[i], ir::make_int(0, vars[i]->dtype), extents[i], ir::ForKind::Parallel, body, loc);
    return body;
  }

  // The condition that indices lie inside the buffer, without the parts that provably hold.
  ir::Expr inside(const ir::Buffer& b, const std::vector<ir::Expr>& idx) {
    ir::Expr cond = ir::make_bool(true);
    for (size_t d = 0; d < idx.size(); ++d) {
      auto extent = ir::as_const_int(b->shape[d]);
      analysis::Interval r = analysis::bound_of(idx[d], ranges_);
      bool low_ok = r.lo && *r.lo >= 0;
      bool high_ok = extent && r.hi && *r.hi < *extent;
      if (!low_ok) cond = ir::logical_and(cond, ir::compare(ir::BinaryOp::GE, idx[d], ir::make_int(0, idx[d]->dtype)));
      if (!high_ok) cond = ir::logical_and(cond, ir::compare(ir::BinaryOp::LT, idx[d], ir::cast(idx[d]->dtype, b->shape[d])));
    }
    return cond;
  }

  analysis::VarRanges ranges_;
  bool keep_pipelined_copies_;
};

}  // namespace

ir::PrimFunc lower_tile_ops(const ir::PrimFunc& func, const PassOptions& options) {
  ir::PrimFunc out = func;
  out.body = Lowerer(options.target.kind == Target::Kind::CUDA && options.target.sm() >= 90).mutate(func.body);
  return out;
}

ir::Stmt lower_copies(const ir::Stmt& stmt) { return Lowerer(false).mutate(stmt); }

}  // namespace tilelang::passes
