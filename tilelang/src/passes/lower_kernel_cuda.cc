#include "tilelang/passes/lower_kernel_cuda.h"

#include <set>

#include "rt/error.h"
#include "tilelang/analysis/access.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/analysis/thread_dependence.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

bool shared_between_threads(const ir::BufferNode* b) { return b->scope != ir::Scope::Local; }

// Memory other threads can see, that a statement writes and reads.
struct SharedAccess {
  std::set<const ir::BufferNode*> read, written;
};
SharedAccess shared_access(const ir::Stmt& s) {
  analysis::Accesses a = analysis::accesses_of(s);
  SharedAccess out;
  for (const ir::BufferNode* b : a.read)
    if (shared_between_threads(b)) out.read.insert(b);
  for (const ir::BufferNode* b : a.written)
    if (shared_between_threads(b)) out.written.insert(b);
  return out;
}
bool conflicts(const SharedAccess& first, const SharedAccess& later) {
  for (const ir::BufferNode* b : first.written)
    if (later.read.count(b) || later.written.count(b)) return true;
  for (const ir::BufferNode* b : first.read)
    if (later.written.count(b)) return true;
  return false;
}

ir::Stmt barrier(const SourceLoc& loc) { return std::make_shared<const ir::BarrierNode>(loc); }

// Parallel loops below the distributed ones run serially in each thread.
class SerializeParallel : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    ir::Stmt body = mutate(n.body);
    if (n.for_kind != ir::ForKind::Parallel && body == n.body) return self;
    return ir::make_for(n.var, n.min, n.extent, n.for_kind == ir::ForKind::Parallel ? ir::ForKind::Serial : n.for_kind, body, n.loc,
                        n.num_stages);
  }
};

class BlockLowering {
 public:
  BlockLowering(const analysis::ThreadDependence& dep, ir::Var tx, int64_t threads, bool tensors_aligned)
      : dep_(dep), tx_(std::move(tx)), threads_(threads), tensors_aligned_(tensors_aligned) {}

  // A statement at block level: every thread of the block reaches it.
  ir::Stmt lower(const ir::Stmt& s) {
    // Containers are walked; a statement that uses the thread index (or per-thread values) in its
    // own expressions is per-thread code and stays as written.
    if (const auto* seq = ir::as<ir::SeqNode>(s)) return lower_seq(seq->stmts, seq->loc);
    if (const auto* a = ir::as<ir::AllocateNode>(s)) return ir::make_allocate(a->buffer, lower(a->body), a->loc);
    if (const auto* l = ir::as<ir::LetStmtNode>(s)) return dep_.dependent(l->value) ? s : ir::make_let(l->var, l->value, lower(l->body), l->loc);
    if (const auto* i = ir::as<ir::IfThenElseNode>(s)) {
      if (dep_.dependent(i->cond)) return s;
      return ir::make_if(i->cond, lower(i->then_case), i->else_case ? lower(i->else_case) : nullptr, i->loc);
    }
    if (const auto* f = ir::as<ir::ForNode>(s)) {
      if (dep_.dependent(f->min) || dep_.dependent(f->extent)) return s;
      if (f->for_kind == ir::ForKind::Parallel) return distribute(s);
      ir::Stmt body = lower(f->body);
      // Loop-carried dependences through shared memory: the next iteration waits for this one.
      SharedAccess acc = shared_access(f->body);
      if (conflicts(acc, acc)) body = ir::make_seq({body, barrier(f->loc)});
      return ir::make_for(f->var, f->min, f->extent, f->for_kind, body, f->loc, f->num_stages);
    }
    if (dep_.dependent(s)) return s;
    if (const auto* st = ir::as<ir::BufferStoreNode>(s)) {
      // The same store in every thread: one thread does it (locals are every thread's own).
      if (!shared_between_threads(st->buffer.get())) return s;
      return ir::make_if(ir::compare(ir::BinaryOp::EQ, tx_, ir::make_int(0)), s, nullptr, st->loc);
    }
    return s;  // gemm (cooperative), barriers, extern calls, inline code
  }

 private:
  ir::Stmt lower_seq(const std::vector<ir::Stmt>& stmts, const SourceLoc& loc) {
    std::vector<SharedAccess> acc;
    for (const ir::Stmt& x : stmts) acc.push_back(shared_access(x));
    std::vector<ir::Stmt> out;
    for (size_t i = 0; i < stmts.size(); ++i) {
      out.push_back(lower(stmts[i]));
      if (ir::as<ir::BarrierNode>(stmts[i])) continue;
      for (size_t j = i + 1; j < stmts.size(); ++j) {
        if (ir::as<ir::BarrierNode>(stmts[j])) break;  // the user's barrier orders them already
        if (conflicts(acc[i], acc[j])) {
          out.push_back(barrier(stmts[i]->loc));
          break;
        }
      }
    }
    return ir::make_seq(std::move(out), loc);
  }

  // for i, j in T.Parallel(M, N): body  ->  each thread takes iterations tx, tx + threads, ...
  ir::Stmt distribute(const ir::Stmt& s) {
    std::vector<const ir::ForNode*> nest;
    ir::Stmt cur = s;
    while (const auto* f = ir::as<ir::ForNode>(cur)) {
      if (f->for_kind != ir::ForKind::Parallel) break;
      nest.push_back(f);
      cur = f->body;
    }
    const SourceLoc& loc = s->loc;
    // A plain copy along contiguous, aligned memory moves 16 bytes per thread at a time: the
    // innermost loop is split into vectors the code generator emits as single accesses.
    const int64_t vec = vector_width(nest, cur);
    ir::Expr total = ir::make_int(1);
    for (const ir::ForNode* f : nest) total = ir::mul(total, ir::cast(ir::DType::I32, f->extent));
    if (vec > 1) total = ir::floor_div(total, ir::make_int(vec));
    ir::Var e = ir::make_var("e", ir::DType::I32, loc);
    ir::Var lane = ir::make_var("v", ir::DType::I32, loc);
    ir::VarMap bind;
    ir::Expr rest = e;
    for (size_t d = nest.size(); d-- > 0;) {
      ir::Expr ext = ir::cast(ir::DType::I32, nest[d]->extent);
      bool inner = d + 1 == nest.size() && vec > 1;
      if (inner) ext = ir::floor_div(ext, ir::make_int(vec));
      ir::Expr idx = d == 0 ? rest : ir::floor_mod(rest, ext);
      if (inner) idx = ir::add(ir::mul(idx, ir::make_int(vec)), lane);
      bind[nest[d]->var.get()] = ir::cast(nest[d]->var->dtype, ir::add(nest[d]->min, ir::cast(nest[d]->min->dtype, idx)));
      rest = ir::floor_div(rest, ext);
    }
    ir::Stmt body = ir::substitute(SerializeParallel().mutate(cur), bind);
    if (vec > 1) body = ir::make_for(lane, ir::make_int(0), ir::make_int(vec), ir::ForKind::Vectorized, body, loc);
    auto count = ir::as_const_int(total);
    ir::Var round = ir::make_var("r", ir::DType::I32, loc);
    ir::Expr rounds = ir::floor_div(ir::add(total, ir::make_int(threads_ - 1)), ir::make_int(threads_));
    ir::Expr index = ir::add(ir::mul(round, ir::make_int(threads_)), tx_);
    if (!count || *count % threads_ != 0) body = ir::make_if(ir::compare(ir::BinaryOp::LT, e, total), body, nullptr, loc);
    body = ir::make_let(e, index, body, loc);
    return ir::make_for(round, ir::make_int(0), rounds, ir::ForKind::Unrolled, body, loc);
  }

  // Elements per 16-byte vector when the nest's body copies a tensor element of one dtype to another
  // tensor, both contiguous and 16-byte aligned along the innermost loop (offsets proven multiples
  // of the vector, global tensors' bases aligned); 1 otherwise.
  int64_t vector_width(const std::vector<const ir::ForNode*>& nest, const ir::Stmt& body) const {
    const auto* st = ir::as<ir::BufferStoreNode>(body);
    if (!st || st->atomic_add || nest.empty()) return 1;
    const auto* ld = ir::as<ir::BufferLoadNode>(st->value);
    if (!ld || ld->buffer->dtype != st->buffer->dtype) return 1;
    if (!tensors_aligned_ && (st->buffer->scope == ir::Scope::Global || ld->buffer->scope == ir::Scope::Global)) return 1;
    int bits = rt::bits(st->buffer->dtype);
    if (bits != 16 && bits != 32) return 1;
    const int64_t vec = 128 / bits;
    const ir::ForNode* inner = nest.back();
    auto ext = ir::as_const_int(inner->extent);
    if (!ext || *ext % vec != 0 || !ir::is_const_int(inner->min, 0)) return 1;
    auto aligned = [&](const ir::Buffer& b, const std::vector<ir::Expr>& idx) {
      // Flat offset: the innermost variable with coefficient 1 in the last index only; every other
      // term and the constant multiples of the vector.
      ir::Expr flat = ir::cast(ir::DType::I64, idx[0]);
      for (size_t d = 1; d < idx.size(); ++d) flat = ir::add(ir::mul(flat, ir::cast(ir::DType::I64, b->shape[d])), ir::cast(ir::DType::I64, idx[d]));
      for (size_t d = 0; d + 1 < idx.size(); ++d)
        if (analysis::uses_var(idx[d], inner->var.get())) return false;
      auto lin = analysis::as_linear(flat);
      if (!lin || lin->constant % vec != 0 || lin->coefficient(inner->var.get()) != 1) return false;
      for (const auto& [v, c] : lin->terms)
        if (v.get() != inner->var.get() && c % vec != 0) return false;
      return true;
    };
    return aligned(st->buffer, st->indices) && aligned(ld->buffer, ld->indices) ? vec : 1;
  }

  const analysis::ThreadDependence& dep_;
  ir::Var tx_;
  int64_t threads_;
  bool tensors_aligned_;
};

class KernelLowering : public ir::IRMutator {
 public:
  explicit KernelLowering(bool tensors_aligned) : tensors_aligned_(tensors_aligned) {}

 protected:
  ir::Stmt visit(const ir::KernelLaunchNode& n, const ir::Stmt&) override {
    analysis::ThreadDependence dep(n.body, n.thread_var.get());
    ir::Stmt body = BlockLowering(dep, n.thread_var, n.threads, tensors_aligned_).lower(n.body);
    return std::make_shared<const ir::KernelLaunchNode>(n.grid, n.block_vars, n.threads, n.thread_var, n.swizzle_panel, body, n.loc);
  }

 private:
  bool tensors_aligned_;
};

}  // namespace

ir::PrimFunc lower_kernel_cuda(const ir::PrimFunc& func, const PassOptions& options) {
  if (options.target.kind != Target::Kind::CUDA) return func;
  ir::PrimFunc out = func;
  out.body = KernelLowering(options.tensors_aligned).mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
