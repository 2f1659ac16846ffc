#include "tilelang/passes/schedule_cpu.h"

#include <algorithm>
#include <map>
#include <set>

#include "rt/cpu_info.h"
#include "tl/device/cpu/gemm.h"
#include "tilelang/analysis/dependence.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

constexpr int64_t kMinParallelWork = 1 << 14;  // iterations x statements below which threads cost more than they give

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
  return analysis::elementwise_along(loop) && analysis::iterations_independent(loop);
}

class Scheduler : public ir::IRMutator {
 public:
  explicit Scheduler(const rt::CpuInfo& cpu) : cpu_(cpu) {}

 protected:
  ir::Stmt visit(const ir::KernelLaunchNode&, const ir::Stmt& self) override { return self; }  // blocks are the parallel unit there

  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    if (!in_parallel_ && cpu_.cores > 1 && analysis::iterations_independent(n)) {
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
    ir::Stmt out = ir::make_for(n.var, n.min, n.extent, kind, body, n.loc, n.pipelining());
    if (vectorizable(*ir::as<ir::ForNode>(out))) return ir::make_for(n.var, n.min, n.extent, ir::ForKind::Vectorized, body, n.loc);
    return out;
  }

  ir::Stmt visit(const ir::GemmNode& n, const ir::Stmt& self) override {
    // Cache blocks from the host's caches and the micro-tile its vector width gets (the recipe
    // lives with the gemm itself, in tl/device/cpu/gemm.h).
    tl::cpu::GemmBlocking b = tl::cpu::blocking_for(cpu_.l1d_bytes, cpu_.l2_bytes, tl::cpu::micro_tile_for(cpu_.simd_bits), cpu_.cores);
    ir::GemmTiling t{b.mc, b.nc, b.kc, in_parallel_ ? 1 : cpu_.cores};
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
