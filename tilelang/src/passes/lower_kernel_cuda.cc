#include "tilelang/passes/lower_kernel_cuda.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rt/dtype.h"
#include "rt/error.h"
#include "tilelang/analysis/access.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/analysis/register_fragments.h"
#include "tilelang/analysis/vector_copy.h"
#include "tilelang/analysis/thread_dependence.h"
#include "tilelang/diagnostics.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"
#include "tilelang/passes/bulk_copy.h"
#include "tilelang/passes/shared_memory.h"

namespace tilelang::passes {
namespace {

// The most iterations a cooperative loop over a tile is unrolled for, counting those of the loops
// inside each round (see BlockLowering).
constexpr int64_t kMaxUnrolledWork = 256;

// The most iterations of the loops nested in a statement along one path (a loop of unknown extent
// counts as 16).
class NestedIterations : public ir::IRVisitor {
 public:
  int64_t most = 1;

 protected:
  void visit(const ir::ForNode& n) override {
    auto c = ir::as_const_int(n.extent);
    const int64_t outer = current_;
    current_ = std::min<int64_t>(outer * std::max<int64_t>(c ? *c : 16, 1), int64_t(1) << 40);
    most = std::max(most, current_);
    ir::IRVisitor::visit(n);
    current_ = outer;
  }

 private:
  int64_t current_ = 1;
};

// Fragments kept in registers: the fragment, and each thread's registers (a local buffer with the
// layout) that replace it.
using Registers = std::map<const ir::BufferNode*, ir::Buffer>;

// A statement without its bulk copies: they synchronize through their stages' mbarriers
// (pipeline_loads_cuda), never through block barriers.
class WithoutBulkCopies : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::CopyNode& n, const ir::Stmt& self) override { return n.barrier ? ir::make_seq({}, n.loc) : self; }
};

// Memory other threads can see, that a statement writes and reads.
struct SharedAccess {
  std::set<const ir::BufferNode*> read, written;
};
SharedAccess shared_access(const ir::Stmt& s, const Registers& registers) {
  auto shared = [&](const ir::BufferNode* b) { return b->scope != ir::Scope::Local && !registers.count(b); };
  analysis::Accesses a = analysis::accesses_of(WithoutBulkCopies().mutate(s));
  SharedAccess out;
  for (const ir::BufferNode* b : a.read)
    if (shared(b)) out.read.insert(b);
  for (const ir::BufferNode* b : a.written)
    if (shared(b)) out.written.insert(b);
  return out;
}
bool conflicts(const SharedAccess& first, const SharedAccess& later) {
  for (const ir::BufferNode* b : first.written)
    if (later.read.count(b) || later.written.count(b)) return true;
  for (const ir::BufferNode* b : first.read)
    if (later.written.count(b)) return true;
  return false;
}

// The shared-memory tiles `s` allocates, anywhere inside it (registers and locals are not).
std::set<const ir::BufferNode*> shared_allocations(const ir::Stmt& s, const Registers& registers) {
  struct Collect : ir::IRVisitor {
    const Registers& registers;
    std::set<const ir::BufferNode*> tiles;
    explicit Collect(const Registers& r) : registers(r) {}
    void visit(const ir::AllocateNode& n) override {
      if (n.buffer->scope != ir::Scope::Local && !registers.count(n.buffer.get())) tiles.insert(n.buffer.get());
      ir::IRVisitor::visit(n);
    }
  } c(registers);
  c.visit_stmt(s);
  return c.tiles;
}

// Whether `pending` touched one of `tiles`.
bool touches(const SharedAccess& pending, const std::set<const ir::BufferNode*>& tiles) {
  for (const auto* set : {&pending.read, &pending.written})
    for (const ir::BufferNode* b : *set)
      if (tiles.count(b)) return true;
  return false;
}

ir::Stmt barrier(const SourceLoc& loc) { return std::make_shared<const ir::BarrierNode>(loc); }

// Whether the last thing `s` does is a block barrier (a tile op's staging through shared memory
// ends with one).
bool ends_with_barrier(const ir::Stmt& s) {
  if (ir::as<ir::BarrierNode>(s)) return true;
  if (const auto* seq = ir::as<ir::SeqNode>(s)) {
    for (auto it = seq->stmts.rbegin(); it != seq->stmts.rend(); ++it)
      if (!ir::is_no_op(*it)) return ends_with_barrier(*it);
    return false;
  }
  if (const auto* a = ir::as<ir::AllocateNode>(s)) return ends_with_barrier(a->body);
  if (const auto* l = ir::as<ir::LetStmtNode>(s)) return ends_with_barrier(l->body);
  return false;
}

// Whether the first thing `s` does is a block barrier.
bool starts_with_barrier(const ir::Stmt& s) {
  if (ir::as<ir::BarrierNode>(s)) return true;
  if (const auto* seq = ir::as<ir::SeqNode>(s)) {
    for (const ir::Stmt& x : seq->stmts)
      if (!ir::is_no_op(x)) return starts_with_barrier(x);
    return false;
  }
  return false;
}

// Parallel loops below the distributed ones run serially in each thread.
class SerializeParallel : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    ir::Stmt body = mutate(n.body);
    if (n.for_kind != ir::ForKind::Parallel && body == n.body) return self;
    return ir::make_for(n.var, n.min, n.extent, n.for_kind == ir::ForKind::Parallel ? ir::ForKind::Serial : n.for_kind, body, n.loc,
                        n.pipelining());
  }
};

// In a nest distributed by a register layout: element [i, j] of a register tile is the thread's
// register r, element [i] of a row vector its register `slot` (the slot of i).
class RegisterElements : public ir::IRMutator {
 public:
  RegisterElements(const Registers& registers, ir::Expr r, ir::Expr slot) : registers_(registers), r_(std::move(r)), slot_(std::move(slot)) {}

 protected:
  ir::Expr visit(const ir::BufferLoadNode& n, const ir::Expr& self) override {
    auto it = registers_.find(n.buffer.get());
    if (it == registers_.end()) return ir::IRMutator::visit(n, self);
    return std::make_shared<const ir::BufferLoadNode>(it->second, std::vector<ir::Expr>{index(*it->second)}, n.loc);
  }
  ir::Stmt visit(const ir::BufferStoreNode& n, const ir::Stmt& self) override {
    auto it = registers_.find(n.buffer.get());
    if (it == registers_.end()) return ir::IRMutator::visit(n, self);
    return std::make_shared<const ir::BufferStoreNode>(it->second, std::vector<ir::Expr>{index(*it->second)}, mutate(n.value), n.atomic_add, n.loc);
  }

 private:
  const ir::Expr& index(const ir::BufferNode& regs) const {
    const ir::Expr& e = regs.layout->row_vector ? slot_ : r_;
    RT_ICHECK(e, "register fragment ", regs.name, " touched where its layout does not place the threads");
    return e;
  }

  const Registers& registers_;
  ir::Expr r_, slot_;
};

// A shared tile's allocation moved down to the statements that use it: through the allocations
// and lets below it, and to the run of statements of a sequence from its first user to its last
// (never into a loop: a tile used in a loop lives across its iterations). The code generator reuses
// a tile's shared memory once its scope ends, so a kernel's later phases (the epilogue after the
// pipelined loop) can use the memory of the earlier ones.
ir::Stmt narrow_to_users(const ir::Buffer& buf, const ir::Stmt& body, const SourceLoc& loc) {
  if (const auto* a = ir::as<ir::AllocateNode>(body)) return ir::make_allocate(a->buffer, narrow_to_users(buf, a->body, loc), a->loc);
  if (const auto* let = ir::as<ir::LetStmtNode>(body); let && !analysis::uses_buffer(let->value, buf.get()))
    return ir::make_let(let->var, let->value, narrow_to_users(buf, let->body, loc), let->loc);
  const auto* seq = ir::as<ir::SeqNode>(body);
  if (!seq) return ir::make_allocate(buf, body, loc);
  int first = -1, last = -1;
  for (size_t i = 0; i < seq->stmts.size(); ++i)
    if (analysis::uses_buffer(seq->stmts[i], buf.get())) last = static_cast<int>(i), first = first < 0 ? last : first;
  if (first < 0) return body;
  std::vector<ir::Stmt> users(seq->stmts.begin() + first, seq->stmts.begin() + last + 1);
  ir::Stmt scoped = users.size() == 1 ? narrow_to_users(buf, users[0], loc) : ir::make_allocate(buf, ir::make_seq(std::move(users), seq->loc), loc);
  std::vector<ir::Stmt> out(seq->stmts.begin(), seq->stmts.begin() + first);
  out.push_back(scoped);
  out.insert(out.end(), seq->stmts.begin() + last + 1, seq->stmts.end());
  return ir::make_seq(std::move(out), seq->loc);
}

class NarrowSharedScopes : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::AllocateNode& n, const ir::Stmt& self) override {
    ir::Stmt body = mutate(n.body);
    if (n.buffer->scope != ir::Scope::Shared && n.buffer->scope != ir::Scope::Fragment) return body == n.body ? self : ir::make_allocate(n.buffer, body, n.loc);
    return narrow_to_users(n.buffer, body, n.loc);
  }
};

class BlockLowering {
 public:
  BlockLowering(const analysis::ThreadDependence& dep, ir::Var tx, int64_t threads, bool tensors_aligned, const Registers& registers, int64_t smem_limit,
                bool bulk_stores)
      : dep_(dep), tx_(std::move(tx)), threads_(threads), tensors_aligned_(tensors_aligned), registers_(registers), smem_limit_(smem_limit),
        bulk_stores_(bulk_stores) {}

  // The staging tiles the epilogues store by TMA: each is the kernel's own for its whole run (a store
  // may still read it while the kernel goes on), allocated around the kernel's body.
  const std::vector<ir::Buffer>& bulk_store_tiles() const { return bulk_store_tiles_; }

  // A statement at block level: every thread of the block reaches it.
  ir::Stmt lower(const ir::Stmt& s) {
    // Containers are walked; a statement that uses the thread index (or per-thread values) in its
    // own expressions is per-thread code and stays as written.
    if (const auto* seq = ir::as<ir::SeqNode>(s)) return lower_seq(seq->stmts, seq->loc);
    if (const auto* a = ir::as<ir::AllocateNode>(s)) {
      auto reg = registers_.find(a->buffer.get());
      bool smem = reg == registers_.end() && a->buffer->scope != ir::Scope::Local;
      int64_t bytes = smem ? shared_tile_bytes(a->buffer) : 0;
      smem_in_scope_ += bytes;
      ir::Stmt body = lower(a->body);
      smem_in_scope_ -= bytes;
      return ir::make_allocate(reg == registers_.end() ? a->buffer : reg->second, body, a->loc);
    }
    if (const auto* g = ir::as<ir::GemmNode>(s)) {
      // A cooperative call of all threads; a register accumulator (and A operand) is each thread's own registers.
      auto reg = registers_.find(g->c.buffer.get());
      if (reg == registers_.end()) return s;
      auto reg_a = registers_.find(g->a.buffer.get());
      ir::Region a = reg_a == registers_.end() ? g->a : ir::full_region(reg_a->second, g->a.loc);
      return std::make_shared<const ir::GemmNode>(a, g->b, ir::full_region(reg->second, g->c.loc), g->trans_a, g->trans_b, g->clear_accum,
                                                  g->accum_dtype, g->epilogue, g->acc, g->epilogue_indices, g->loc, g->tiling);
    }
    // Every thread reaches a let's body, per-thread value or not (T.get_thread_binding binds one
    // around the rest of the kernel): the body's tile ops are still the block's. Each thread evaluates
    // a let, an if's condition and a loop's bounds itself; where they read shared memory the body
    // writes, the threads meet after reading it (else a fast warp's writes reach a slow one's reading:
    // `m = s[1]` then s updated, `if s[0] < x:` over an update of s).
    if (const auto* l = ir::as<ir::LetStmtNode>(s)) {
      ir::Stmt body = lower(l->body);
      if (body_writes_read_memory({l->value}, l->body) && !starts_with_barrier(body)) body = ir::make_seq({barrier(l->loc), body}, l->loc);
      return ir::make_let(l->var, l->value, body, l->loc);
    }
    if (const auto* i = ir::as<ir::IfThenElseNode>(s)) {
      if (dep_.dependent(i->cond)) return s;
      ir::Stmt branches = ir::make_seq({i->then_case, i->else_case ? i->else_case : ir::make_seq({}, i->loc)}, i->loc);
      if (body_writes_read_memory({i->cond}, branches)) {
        ir::Var c = ir::make_var("cond", i->cond->dtype, i->loc);
        return ir::make_let(c, i->cond, lower(ir::make_seq({barrier(i->loc), ir::make_if(c, i->then_case, i->else_case, i->loc)}, i->loc)), i->loc);
      }
      return ir::make_if(i->cond, lower(i->then_case), i->else_case ? lower(i->else_case) : nullptr, i->loc);
    }
    if (const auto* f = ir::as<ir::ForNode>(s)) {
      if (dep_.dependent(f->min) || dep_.dependent(f->extent)) return s;
      if (f->for_kind != ir::ForKind::Parallel && body_writes_read_memory({f->min, f->extent}, f->body)) {
        ir::Var lo = ir::make_var(f->var->name + "_min", f->min->dtype, f->loc), n = ir::make_var(f->var->name + "_extent", f->extent->dtype, f->loc);
        ir::Stmt loop = ir::make_for(f->var, lo, n, f->for_kind, f->body, f->loc, f->pipelining());
        return ir::make_let(lo, f->min, ir::make_let(n, f->extent, lower(ir::make_seq({barrier(f->loc), loop}, f->loc)), f->loc), f->loc);
      }
      if (f->for_kind == ir::ForKind::Parallel) {
        // Per-thread code runs whole in each thread, as on the CPU: a nest that uses the thread index
        // (a tile op on the thread's own part: T.copy(loc, Y[bx, tx * 4]), T.atomic_add(G[bx, tx * 4],
        // loc)) or writes only locals (each thread's own). Shared out, a few threads ran a few of
        // their elements. (A nest over register fragments is theirs to share out by their layout.)
        if ((dep_.uses_thread_index(s) || writes_only_locals(s)) && !touches_registers(s)) return SerializeParallel().mutate(s);
        return distribute(s);
      }
      ir::Stmt body = lower(f->body);
      // Loop-carried dependences through shared memory: the next iteration waits for this one.
      SharedAccess acc = shared_access(f->body, registers_);
      if (conflicts(acc, acc) && !ends_with_barrier(body)) body = ir::make_seq({body, barrier(f->loc)});
      return ir::make_for(f->var, f->min, f->extent, f->for_kind, body, f->loc, f->pipelining());
    }
    if (dep_.dependent(s)) return s;
    if (const auto* st = ir::as<ir::BufferStoreNode>(s)) {
      // The same store in every thread: one thread does it (locals are every thread's own).
      if (st->buffer->scope == ir::Scope::Local) return s;
      return ir::make_if(ir::compare(ir::BinaryOp::EQ, tx_, ir::make_int(0)), s, nullptr, st->loc);
    }
    return s;  // barriers, extern calls, inline code
  }

 private:
  // A barrier goes just before the first statement that conflicts with shared memory touched since
  // the last barrier (the user's barriers count), so independent copies share one. A statement that
  // allocates a shared tile conflicts with the accesses to tiles whose scope ended before it: the code
  // generator may give the new tile their bytes, which other threads may still be reading.
  ir::Stmt lower_seq(const std::vector<ir::Stmt>& stmts, const SourceLoc& loc) {
    std::vector<ir::Stmt> out;
    SharedAccess pending;
    std::set<const ir::BufferNode*> ended;  // tiles allocated by the statements before
    for (const ir::Stmt& s : stmts) {
      std::set<const ir::BufferNode*> allocated = shared_allocations(s, registers_);
      if (ir::as<ir::BarrierNode>(s)) {
        pending = {};
      } else {
        SharedAccess acc = shared_access(s, registers_);
        if (conflicts(pending, acc) || (!allocated.empty() && touches(pending, ended))) {
          out.push_back(barrier(s->loc));
          pending = {};
        }
        pending.read.insert(acc.read.begin(), acc.read.end());
        pending.written.insert(acc.written.begin(), acc.written.end());
      }
      ended.insert(allocated.begin(), allocated.end());
      out.push_back(lower(s));
    }
    return ir::make_seq(std::move(out), loc);
  }

  static bool writes_only_locals(const ir::Stmt& s) {
    analysis::Accesses a = analysis::accesses_of(s);
    return !a.written.empty() &&
           std::all_of(a.written.begin(), a.written.end(), [](const ir::BufferNode* b) { return b->scope == ir::Scope::Local; });
  }
  bool touches_registers(const ir::Stmt& s) const {
    analysis::Accesses a = analysis::accesses_of(s);
    for (const auto* set : {&a.read, &a.written})
      for (const ir::BufferNode* b : *set)
        if (registers_.count(b)) return true;
    return false;
  }

  // Whether `body` writes shared memory (or a fragment kept there) that one of `exprs` reads.
  bool body_writes_read_memory(std::initializer_list<ir::Expr> exprs, const ir::Stmt& body) const {
    std::set<const ir::BufferNode*> read;
    for (const ir::Expr& e : exprs)
      ir::for_each_expr(e, [&](const ir::Expr& x) {
        if (const auto* l = ir::as<ir::BufferLoadNode>(x); l && l->buffer->scope != ir::Scope::Local && !registers_.count(l->buffer.get()))
          read.insert(l->buffer.get());
      });
    if (read.empty()) return false;
    for (const ir::BufferNode* b : shared_access(body, registers_).written)
      if (read.count(b)) return true;
    return false;
  }

  // for i, j in T.Parallel(M, N): body  ->  each thread takes the elements of a register fragment
  // the body touches, or else iterations tx, tx + threads, ...
  ir::Stmt distribute(const ir::Stmt& s) {
    if (auto red = analysis::row_reduction(*ir::as<ir::ForNode>(s)); red && registers_.count(red->source)) return distribute_reduction(*red, s->loc);
    if (auto t = analysis::tile_nest(*ir::as<ir::ForNode>(s))) {
      if (ir::Stmt staged = store_through_shared(*t, s->loc)) return staged;
      analysis::Accesses a = analysis::accesses_of(t->cols->body);
      for (const auto* set : {&a.read, &a.written})
        for (const ir::BufferNode* b : *set)
          if (registers_.count(b) && !registers_.at(b)->layout->row_vector) return distribute_by_layout(*t, *registers_.at(b)->layout, s->loc);
    }
    {  // a 1-D nest over row vectors (any other nest touching registers was ruled out)
      const auto* f = ir::as<ir::ForNode>(s);
      analysis::Accesses a = analysis::accesses_of(f->body);
      for (const auto* set : {&a.read, &a.written})
        for (const ir::BufferNode* b : *set)
          if (registers_.count(b)) return distribute_rows(*f, *registers_.at(b)->layout, s->loc);
    }
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
    const int64_t vec = analysis::vector_width(nest, cur, tensors_aligned_);
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
    // Unrolled where the rounds are few; a block of very few threads over a large tile (threads=1
    // on a 128 x 128 tile: 16384 rounds, or 128 rounds of a 128-long reduction) stays a loop, which
    // NVRTC otherwise compiles for minutes.
    auto round_count = ir::as_const_int(rounds);
    NestedIterations inner;
    inner.visit_stmt(body);
    const ir::ForKind kind = round_count && *round_count * inner.most > kMaxUnrolledWork ? ir::ForKind::Serial : ir::ForKind::Unrolled;
    return ir::make_for(round, ir::make_int(0), rounds, kind, body, loc);
  }

  // for i, j in a tile nest over register fragments -> for r in registers: i, j = layout(tx, r).
  // (register_fragments admitted only nests over the whole tile, and all fragments of one shape
  // share a layout.)
  //
  // A store of each element to memory other threads see, contiguous and aligned along the columns,
  // goes two elements at a time: registers 2m and 2m + 1 of a thread are adjacent columns of a row,
  // so the pair is one 4- or 8-byte store (a vectorized loop of 2 the code generator packs). So does
  // a store to a 16-bit register fragment (two elements a 32-bit register: one conversion of a pair)
  // and to an e4m3 one (one cvt for two elements).
  ir::Stmt distribute_by_layout(const analysis::TileNest& t, const ir::FragmentLayout& layout, const SourceLoc& loc) {
    ir::Var r = ir::make_var("r", ir::DType::I32, loc);
    ir::Expr slot = layout.warps_n == 1 ? layout.slot(r) : nullptr;
    ir::Stmt body = SerializeParallel().mutate(RegisterElements(registers_, r, slot).mutate(t.cols->body));
    ir::VarMap bind{{t.rows->var.get(), ir::cast(t.rows->var->dtype, layout.row(tx_, r))}, {t.cols->var.get(), ir::cast(t.cols->var->dtype, layout.col(tx_, r))}};
    if (paired_store(body, t.cols->var.get()) || paired_register_store(body, r.get())) {
      ir::Var pair = ir::make_var("m", ir::DType::I32, loc), lane = ir::make_var("v", ir::DType::I32, loc);
      ir::Stmt lanes = ir::make_for(lane, ir::make_int(0), ir::make_int(2), ir::ForKind::Vectorized,
                                    ir::substitute(ir::substitute(body, bind), {{r.get(), ir::add(ir::mul(pair, ir::make_int(2)), lane)}}), loc);
      return ir::make_for(pair, ir::make_int(0), ir::make_int(layout.per_thread() / 2), ir::ForKind::Unrolled, lanes, loc);
    }
    return ir::make_for(r, ir::make_int(0), ir::make_int(layout.per_thread()), ir::ForKind::Unrolled, ir::substitute(body, bind), loc);
  }

  // for i in T.Parallel(rows) over row vectors (register_fragments admitted only nests over the
  // whole vector that write no memory other threads see): each thread runs the rows it holds,
  // i = layout.row(tx, s) for its slots s.
  ir::Stmt distribute_rows(const ir::ForNode& f, const ir::FragmentLayout& layout, const SourceLoc& loc) {
    RT_ICHECK(layout.row_vector, "a 1-D nest over register fragment that is not a row vector");
    ir::Var slot = ir::make_var("s", ir::DType::I32, loc);
    ir::Stmt body = SerializeParallel().mutate(RegisterElements(registers_, nullptr, slot).mutate(f.body));
    body = ir::substitute(body, {{f.var.get(), ir::cast(f.var->dtype, layout.row(tx_, slot))}});
    return ir::make_for(slot, ir::make_int(0), ir::make_int(layout.per_thread()), ir::ForKind::Unrolled, body, loc);
  }

  // A register fragment stored to a global tensor (the epilogue's T.copy(C_local, C[...])) goes
  // through a shared tile of the tensor's dtype: the threads write their registers into it (two
  // columns at a time, swizzled: no bank conflicts), then copy it out row by row, 16 bytes a thread
  // where the tensor allows, so that a warp writes whole 128-byte lines. Only where the tile fits in
  // the shared memory left at that point; null otherwise.
  ir::Stmt store_through_shared(const analysis::TileNest& t, const SourceLoc& loc) {
    ir::Stmt body = t.cols->body;
    const auto* guard = ir::as<ir::IfThenElseNode>(body);
    if (guard && (guard->else_case || dep_.dependent(guard->cond))) return nullptr;
    const auto* st = ir::as<ir::BufferStoreNode>(guard ? guard->then_case : body);
    if (!st || st->atomic_add || st->buffer->scope != ir::Scope::Global || !tensors_aligned_) return nullptr;
    const int bits = rt::bits(st->buffer->dtype);
    if (bits != 16 && bits != 32) return nullptr;
    bool from_registers = false;
    for (const ir::BufferNode* b : analysis::accesses_of(body).read) from_registers |= registers_.count(b) > 0;
    int64_t row_chunks = t.extent_cols * bits / 128;
    if (!from_registers || t.extent_cols * bits % 128 != 0 || (row_chunks != 2 && row_chunks != 4 && row_chunks % 8 != 0) || t.extent_rows % 8 != 0) return nullptr;
    auto tile = std::make_shared<ir::BufferNode>(*ir::make_buffer(st->buffer->name + "_tile", st->buffer->dtype,
                                                                  {ir::make_int(t.extent_rows), ir::make_int(t.extent_cols)}, ir::Scope::Shared, loc));
    tile->swizzled = true;
    if (smem_in_scope_ + shared_tile_bytes(tile) > smem_limit_) return nullptr;
    const ir::Var &i = t.rows->var, &j = t.cols->var;
    ir::Expr at_ij = ir::make_load(tile, {i, j}, loc);
    ir::Stmt fill = ir::make_for(i, ir::make_int(0, i->dtype), ir::make_int(t.extent_rows, i->dtype), ir::ForKind::Parallel,
                                 ir::make_for(j, ir::make_int(0, j->dtype), ir::make_int(t.extent_cols, j->dtype), ir::ForKind::Parallel,
                                              ir::make_store(tile, {i, j}, st->value, loc), loc), loc);
    if (ir::Stmt bulk = bulk_store(*st, tile, t, guard != nullptr, fill, loc)) return bulk;
    ir::Stmt out_store = ir::make_store(st->buffer, st->indices, at_ij, loc);
    if (guard) out_store = ir::make_if(guard->cond, out_store, nullptr, loc);
    ir::Stmt drain = ir::make_for(i, ir::make_int(0, i->dtype), ir::make_int(t.extent_rows, i->dtype), ir::ForKind::Parallel,
                                  ir::make_for(j, ir::make_int(0, j->dtype), ir::make_int(t.extent_cols, j->dtype), ir::ForKind::Parallel, out_store, loc), loc);
    // The barriers around it: the tile may take the shared memory of tiles whose scope just ended
    // (still read by other warps), and the memory after it may be reused the same way.
    return ir::make_seq({barrier(loc), lower(ir::make_allocate(tile, ir::make_seq({fill, drain}, loc), loc)), barrier(loc)}, loc);
  }

  // Whether a register-nest body is one unguarded store of a 16- or 32-bit element to shared or
  // global memory at column `col` of a row, every index but the last a whole number of even rows
  // and the last `col` plus an even offset (so that two adjacent columns make one aligned store).
  bool paired_store(const ir::Stmt& body, const ir::VarNode* col) const {
    const auto* st = ir::as<ir::BufferStoreNode>(body);
    if (!st || st->atomic_add || st->buffer->scope == ir::Scope::Local || st->indices.empty()) return false;
    if (st->buffer->scope == ir::Scope::Global && !tensors_aligned_) return false;
    // (A swizzled tile keeps the order inside each 16-byte chunk, so an even column and the next stay adjacent.)
    if (rt::bits(st->buffer->dtype) != 16 && rt::bits(st->buffer->dtype) != 32) return false;
    int64_t stride = 1;
    for (size_t d = st->indices.size(); d-- > 1;) {
      auto extent = ir::as_const_int(st->buffer->shape[d]);
      if (!extent) return false;
      stride *= *extent;
      if (stride % 2 != 0 || analysis::uses_var(st->indices[d - 1], col)) return false;
    }
    auto lin = analysis::as_linear(st->indices.back());
    if (!lin || lin->constant % 2 != 0 || lin->coefficient(col) != 1) return false;
    for (const auto& [v, c] : lin->terms)
      if (v.get() != col && c % 2 != 0) return false;
    return true;
  }

  // Whether a register-nest body is one store to a 16-bit register tile at register `r`.
  bool paired_register_store(const ir::Stmt& body, const ir::VarNode* r) const {
    const auto* st = ir::as<ir::BufferStoreNode>(body);
    return st && st->buffer->scope == ir::Scope::Local && st->buffer->layout && !st->buffer->layout->row_vector &&
           (rt::bits(st->buffer->dtype) == 16 || st->buffer->dtype == ir::DType::F8E4M3) && st->indices.size() == 1 && ir::as<ir::VarNode>(st->indices[0]) == r;
  }

  // A row reduction of a register fragment (whole rows per warp): each thread combines the
  // elements of its rows it holds, the four lanes sharing a row combine theirs with shuffles, and
  // one of them finishes the reduction (init, store) for the row -- all four when it stores to a
  // row vector (each lane keeps its copy).
  ir::Stmt distribute_reduction(const analysis::RowReduction& red, const SourceLoc& loc) {
    const ir::Buffer& regs = registers_.at(red.source);
    const ir::FragmentLayout& l = *regs->layout;
    RT_ICHECK(l.warps_n == 1, "row reduction of a fragment split across warps");
    auto combine = [&](const ir::Expr& a, const ir::Expr& b) {
      return std::make_shared<const ir::BinaryNode>(a->dtype, red.combine, a, b, loc);
    };
    // Row slot s of a thread: atom row s / 2, upper or lower 8 rows (s % 2); its first register.
    ir::Var slot = ir::make_var("s", ir::DType::I32, loc);
    ir::Expr first = ir::add(ir::mul(ir::floor_div(slot, ir::make_int(2)), ir::make_int(4 * l.atoms_n())), ir::mul(ir::floor_mod(slot, ir::make_int(2)), ir::make_int(2)));
    ir::Expr row = l.row(tx_, first);
    // element(register r): the element expression with the source read from register r.
    auto element = [&](const ir::Expr& r) {
      ir::Var rv = ir::make_var("r", ir::DType::I32, loc);
      ir::Expr e = RegisterElements(registers_, rv, nullptr).mutate(red.element);
      return ir::substitute(e, {{rv.get(), r}, {red.rows->var.get(), ir::cast(red.rows->var->dtype, row)}});
    };
    ir::Buffer part = ir::make_buffer(red.red->name + "_part", red.red->dtype, {}, ir::Scope::Local, loc);
    ir::Expr part_v = ir::make_load(part, {}, loc);
    std::vector<ir::Stmt> body{ir::make_store(part, {}, element(first), loc)};
    // The other registers of the row: columns c % 2 of every atom of the row (register 4 * atom + 2 * half + c).
    for (int64_t e = 1; e < 2 * l.atoms_n(); ++e)
      body.push_back(ir::make_store(part, {}, combine(part_v, element(ir::add(first, ir::make_int((e / 2) * 4 + e % 2)))), loc));
    for (int64_t lanes : {1, 2}) {
      auto shfl = std::make_shared<const ir::CallNode>(part->dtype, ir::CallKind::Intrinsic, ir::kWarpShflXor, std::vector<ir::Expr>{part_v, ir::make_int(lanes)}, loc);
      body.push_back(ir::make_store(part, {}, combine(part_v, shfl), loc));
    }
    ir::Expr red_v = ir::make_load(red.red, {}, loc);
    ir::VarMap at_row{{red.rows->var.get(), ir::cast(red.rows->var->dtype, row)}};
    RegisterElements vectors(registers_, nullptr, slot);
    ir::Stmt store = vectors.mutate(red.store);
    ir::Stmt finish = ir::make_seq({ir::make_store(red.red, {}, ir::substitute(vectors.mutate(red.init), at_row), loc),
                                    ir::make_store(red.red, {}, combine(red_v, part_v), loc), ir::substitute(store, at_row)});
    // Memory other threads see is written once per row.
    bool shared_store = false;
    for (const ir::BufferNode* b : analysis::accesses_of(store).written) shared_store |= b->scope != ir::Scope::Local;
    ir::Expr leader = ir::compare(ir::BinaryOp::EQ, ir::floor_mod(tx_, ir::make_int(4)), ir::make_int(0));
    body.push_back(ir::make_allocate(red.red, shared_store ? ir::make_if(leader, finish, nullptr, loc) : finish, loc));
    ir::Stmt per_slot = ir::make_allocate(part, ir::make_seq(std::move(body)), loc);
    return ir::make_for(slot, ir::make_int(0), ir::make_int(2 * l.atoms_m()), ir::ForKind::Unrolled, per_slot, loc);
  }

  // In a persistent kernel (sm_90a), the staging tile of a whole tile's store goes out by TMA: thread
  // 0 issues its boxes after the fill and the block moves on to its next round while they read the
  // tile; before the next fill thread 0 waits until they have (null where the store is not such a
  // box: a guarded edge tile, a tensor TMA cannot address, indices other than [row0 + i, col0 + j]).
  ir::Stmt bulk_store(const ir::BufferStoreNode& st, const ir::Buffer& tile, const analysis::TileNest& t, bool guarded, const ir::Stmt& fill,
                      const SourceLoc& loc) {
    if (!bulk_stores_ || guarded) return nullptr;
    const ir::VarNode *i = t.rows->var.get(), *j = t.cols->var.get();
    std::vector<ir::Range> box;
    int row_dims = 0;
    for (size_t d = 0; d < st.indices.size(); ++d) {
      auto lin = analysis::as_linear(st.indices[d]);
      if (!lin) return nullptr;
      const int64_t ci = lin->coefficient(i), cj = lin->coefficient(j);
      const bool last = d + 1 == st.indices.size();
      if (cj != (last ? 1 : 0) || (ci != 0 && ci != 1) || (last && ci != 0)) return nullptr;
      row_dims += ci == 1;
      ir::Expr min = ir::substitute(st.indices[d], {{i, ir::make_int(0, t.rows->var->dtype)}, {j, ir::make_int(0, t.cols->var->dtype)}});
      if (dep_.dependent(min)) return nullptr;
      box.push_back({min, ir::make_int(last ? t.extent_cols : ci == 1 ? t.extent_rows : 1)});
    }
    const ir::Region global{st.buffer, box, loc}, whole = ir::full_region(tile, loc);
    if (row_dims != 1 || !tma_box_allowed(global, whole, tensors_aligned_)) return nullptr;
    bulk_store_tiles_.push_back(tile);
    auto call = [&](const char* name) { return ir::make_evaluate(ir::make_call(ir::DType::I32, ir::CallKind::Intrinsic, name, {}, loc), loc); };
    return ir::make_seq({call(ir::kBulkStoreWaitRead), barrier(loc), lower(fill), barrier(loc),
                         std::make_shared<const ir::CopyNode>(whole, global, loc, ir::make_int(0)), call(ir::kBulkStoreCommit)},
                        loc);
  }

  const analysis::ThreadDependence& dep_;
  ir::Var tx_;
  int64_t threads_;
  bool tensors_aligned_;
  const Registers& registers_;
  int64_t smem_limit_;         // shared memory one block may use
  int64_t smem_in_scope_ = 0;  // taken by the shared tiles whose scope the lowering is in
  bool bulk_stores_;           // epilogues may store by TMA (a persistent kernel on sm_90a)
  std::vector<ir::Buffer> bulk_store_tiles_;
};

class KernelLowering : public ir::IRMutator {
 public:
  explicit KernelLowering(const PassOptions& options)
      : tensors_aligned_(options.tensors_aligned), register_a_(options.wgmma_register_a), arch_(options.target.arch), sm_(options.target.sm()) {}

 protected:
  ir::Stmt visit(const ir::KernelLaunchNode& n, const ir::Stmt&) override {
    analysis::ThreadDependence dep(n.body, n.thread_var.get());
    Registers registers;
    analysis::TensorCorePlan plan = analysis::tensor_core_plan(n, dep, arch_, register_a_);
    for (const auto& [fragment, layout] : plan.registers) {
      auto regs = std::make_shared<ir::BufferNode>(*fragment);
      regs->scope = ir::Scope::Local;
      regs->shape = {ir::make_int(layout.per_thread())};
      regs->layout = std::make_shared<const ir::FragmentLayout>(layout);
      registers.emplace(fragment, std::move(regs));
    }
    const int64_t smem_limit = shared_memory_per_block(sm_);
    BlockLowering block(dep, n.thread_var, n.threads, tensors_aligned_, registers, smem_limit,
                        arch_ == "sm_90a" && analysis::calls_intrinsic(n.body, ir::kPersistentRounds));
    ir::Stmt body = block.lower(NarrowSharedScopes().mutate(n.body));
    for (const ir::Buffer& tile : block.bulk_store_tiles()) body = ir::make_allocate(tile, body, n.loc);
    // Tensor-core operand tiles in the bank-conflict-free layout.
    std::map<const ir::BufferNode*, ir::Buffer> swizzled;
    for (const ir::BufferNode* tile : plan.swizzled) {
      auto s = std::make_shared<ir::BufferNode>(*tile);
      s->swizzled = true;
      swizzled.emplace(tile, std::move(s));
    }
    if (!swizzled.empty()) body = ir::replace_buffers(body, swizzled);
    return std::make_shared<const ir::KernelLaunchNode>(n.grid, n.block_vars, n.threads, n.thread_var, n.swizzle_panel, body, n.loc);
  }

 private:
  bool tensors_aligned_, register_a_;
  std::string arch_;
  int sm_;
};

}  // namespace

namespace {

// T.atomic_add on the GPU (tl/device/cuda/kernel.h): 32- and 64-bit floats and integers, and the
// 16-bit floats through a compare-and-swap on their 32-bit word; narrower elements have none.
class CheckAtomicDtypes : public ir::IRVisitor {
 protected:
  void visit(const ir::BufferStoreNode& n) override {
    const rt::DType t = n.buffer->dtype;
    if (n.atomic_add && t != rt::DType::F32 && t != rt::DType::F64 && t != rt::DType::I32 && t != rt::DType::I64 && t != rt::DType::F16 &&
        t != rt::DType::BF16)
      error_at(n.loc, rt::str("T.atomic_add into '", n.buffer->name, "' of dtype ", rt::name(t),
                              " is not supported on the GPU (float32, float64, int32, int64, float16 and bfloat16 are)"));
    ir::IRVisitor::visit(n);
  }
};

}  // namespace

ir::PrimFunc lower_kernel_cuda(const ir::PrimFunc& func, const PassOptions& options) {
  if (options.target.kind != Target::Kind::CUDA) return func;
  CheckAtomicDtypes().visit_stmt(func.body);
  ir::PrimFunc out = func;
  out.body = KernelLowering(options).mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
