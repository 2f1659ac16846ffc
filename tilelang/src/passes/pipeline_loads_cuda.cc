#include "tilelang/passes/pipeline_loads_cuda.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "rt/dtype.h"
#include "rt/env.h"
#include "rt/error.h"
#include "tilelang/diagnostics.h"
#include "tilelang/analysis/access.h"
#include "tilelang/analysis/dependence.h"
#include "tilelang/analysis/vector_copy.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"
#include "tilelang/passes/bulk_copy.h"
#include "tilelang/passes/lower_tile_ops.h"
#include "tilelang/passes/peel_loop.h"
#include "tilelang/passes/shared_memory.h"

namespace tilelang::passes {
namespace {

// The copies of one pipelined loop to load ahead: their positions in the body, and the staged
// (multi-buffered) shared buffer of each destination.
struct Plan {
  std::set<size_t> copies;
  std::map<const ir::BufferNode*, ir::Buffer> staged;
};

std::vector<ir::Stmt> statements(const ir::Stmt& body) {
  if (const auto* seq = ir::as<ir::SeqNode>(body)) return seq->stmts;
  return {body};
}

// The destination of a global -> shared copy that runs asynchronously: a whole copy (a bulk copy
// candidate) or a copy nest that moves 16 bytes a thread; null otherwise.
const ir::BufferNode* async_copy_destination(const ir::Stmt& s, bool tensors_aligned) {
  if (const auto* c = ir::as<ir::CopyNode>(s))
    return c->src.buffer->scope == ir::Scope::Global && c->dst.buffer->scope == ir::Scope::Shared ? c->dst.buffer.get() : nullptr;
  std::vector<const ir::ForNode*> nest;
  ir::Stmt cur = s;
  while (const auto* f = ir::as<ir::ForNode>(cur)) {
    if (f->for_kind != ir::ForKind::Parallel) return nullptr;
    nest.push_back(f);
    cur = f->body;
  }
  const auto* st = ir::as<ir::BufferStoreNode>(cur);
  if (nest.empty() || !st || st->buffer->scope != ir::Scope::Shared) return nullptr;
  const auto* ld = analysis::vector_source(*st, nest.back()->var.get());
  if (!ld || ld->buffer->scope != ir::Scope::Global || analysis::vector_width(nest, cur, tensors_aligned) == 1) return nullptr;
  analysis::Accesses acc = analysis::accesses_of(s);
  if (acc.read.size() != 1) return nullptr;  // the source only: nothing computed in the loop
  return st->buffer.get();
}

// Finds the pipelined loops of a kernel and what each loads ahead. A copy qualifies when its
// destination is touched nowhere but in its loop, written only by it, and read only after it.
class Planner : public ir::IRVisitor {
 public:
  Planner(bool tensors_aligned) : tensors_aligned_(tensors_aligned) {}

  std::map<const ir::ForNode*, Plan> plans() {
    std::map<const ir::ForNode*, Plan> out;
    for (auto& [loop, candidates] : candidates_) {
      Plan plan;
      for (const auto& [index, buffer] : candidates) {
        if (users_[buffer] != std::set<const ir::ForNode*>{loop}) continue;
        plan.copies.insert(index);
        std::vector<ir::Expr> shape{ir::make_int(loop->num_stages)};
        shape.insert(shape.end(), buffer->shape.begin(), buffer->shape.end());
        plan.staged[buffer] = ir::make_buffer(buffer->name, buffer->dtype, shape, ir::Scope::Shared, buffer->loc);
      }
      if (!plan.copies.empty()) out[loop] = std::move(plan);
    }
    return out;
  }

 protected:
  using ir::IRVisitor::visit;
  void visit(const ir::ForNode& n) override {
    if (n.for_kind != ir::ForKind::Pipelined || n.num_stages < 2 || loop_) return ir::IRVisitor::visit(n);
    std::vector<ir::Stmt> body = statements(n.body);
    std::vector<analysis::Accesses> acc;
    std::map<const ir::BufferNode*, int> writers;  // how many statements of the body write each buffer
    for (const ir::Stmt& s : body) {
      acc.push_back(analysis::accesses_of(s));
      for (const ir::BufferNode* b : acc.back().written) ++writers[b];
    }
    std::set<const ir::BufferNode*> touched;  // by the statements before the current one
    for (size_t i = 0; i < body.size(); ++i) {
      const ir::BufferNode* dst = async_copy_destination(body[i], tensors_aligned_);
      if (dst && !touched.count(dst) && writers[dst] == 1) candidates_[&n].push_back({i, dst});
      touched.insert(acc[i].read.begin(), acc[i].read.end());
      touched.insert(acc[i].written.begin(), acc[i].written.end());
    }
    loop_ = &n;
    ir::IRVisitor::visit(n);
    loop_ = nullptr;
  }
  void visit(const ir::BufferLoadNode& n) override {
    users_[n.buffer.get()].insert(loop_);
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::BufferStoreNode& n) override {
    users_[n.buffer.get()].insert(loop_);
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::GemmNode& n) override {
    for (const ir::Region* r : {&n.a, &n.b, &n.c}) users_[r->buffer.get()].insert(loop_);
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::CopyNode& n) override {
    for (const ir::Region* r : {&n.src, &n.dst}) users_[r->buffer.get()].insert(loop_);
    ir::IRVisitor::visit(n);
  }

 private:
  bool tensors_aligned_;
  const ir::ForNode* loop_ = nullptr;  // the pipelined loop being walked
  std::map<const ir::ForNode*, std::vector<std::pair<size_t, const ir::BufferNode*>>> candidates_;
  std::map<const ir::BufferNode*, std::set<const ir::ForNode*>> users_;  // null: outside pipelined loops
};

// The copies chosen to become bulk copies get a placeholder barrier (the pipeliner sets each
// stage's), which keeps them whole through lower_copies.
class MarkBulk : public ir::IRMutator {
 public:
  explicit MarkBulk(const std::set<const ir::CopyNode*>& bulk) : bulk_(bulk) {}

 protected:
  ir::Stmt visit(const ir::CopyNode& n, const ir::Stmt& self) override {
    if (!bulk_.count(&n)) return self;
    return std::make_shared<const ir::CopyNode>(n.src, n.dst, n.loc, ir::make_int(0));
  }

 private:
  const std::set<const ir::CopyNode*>& bulk_;
};

// Accesses of staged buffers go to one stage: x[i, j] -> x[stage, i, j]; a stored copy becomes
// asynchronous when `async`, and a bulk copy completes on `barrier`.
class ToStage : public ir::IRMutator {
 public:
  ToStage(const std::map<const ir::BufferNode*, ir::Buffer>& staged, ir::Expr stage, bool async, ir::Expr barrier = nullptr)
      : staged_(staged), stage_(std::move(stage)), async_(async), barrier_(std::move(barrier)) {}

 protected:
  ir::Expr visit(const ir::BufferLoadNode& n, const ir::Expr& self) override {
    auto it = staged_.find(n.buffer.get());
    if (it == staged_.end()) return ir::IRMutator::visit(n, self);
    return ir::make_load(it->second, indices(n.indices), n.loc);
  }
  ir::Stmt visit(const ir::BufferStoreNode& n, const ir::Stmt& self) override {
    auto it = staged_.find(n.buffer.get());
    if (it == staged_.end()) return ir::IRMutator::visit(n, self);
    ir::Expr value = mutate(n.value);
    if (async_) value = std::make_shared<const ir::CallNode>(value->dtype, ir::CallKind::Intrinsic, ir::kAsyncCopy, std::vector<ir::Expr>{value}, n.loc);
    return ir::make_store(it->second, indices(n.indices), value, n.loc);
  }
  ir::Stmt visit(const ir::CopyNode& n, const ir::Stmt& self) override {
    if (!staged_.count(n.dst.buffer.get())) return ir::IRMutator::visit(n, self);
    return std::make_shared<const ir::CopyNode>(n.src, region(n.dst), n.loc, barrier_);
  }
  ir::Stmt visit(const ir::GemmNode& n, const ir::Stmt& self) override {
    if (!staged_.count(n.a.buffer.get()) && !staged_.count(n.b.buffer.get()) && !staged_.count(n.c.buffer.get())) return ir::IRMutator::visit(n, self);
    return std::make_shared<const ir::GemmNode>(region(n.a), region(n.b), region(n.c), n.trans_a, n.trans_b, n.clear_accum, n.accum_dtype, n.epilogue, n.acc,
                                                n.epilogue_indices, n.loc, n.tiling);
  }

 private:
  std::vector<ir::Expr> indices(const std::vector<ir::Expr>& idx) {
    std::vector<ir::Expr> out{stage_};
    for (const ir::Expr& i : idx) out.push_back(mutate(i));
    return out;
  }
  ir::Region region(const ir::Region& r) {
    auto it = staged_.find(r.buffer.get());
    if (it == staged_.end()) return r;
    ir::Region out{it->second, {{stage_, ir::make_int(1, stage_->dtype)}}, r.loc};
    out.ranges.insert(out.ranges.end(), r.ranges.begin(), r.ranges.end());
    return out;
  }

  const std::map<const ir::BufferNode*, ir::Buffer>& staged_;
  ir::Expr stage_;
  bool async_;
  ir::Expr barrier_;
};

ir::Stmt intrinsic(const char* name, std::vector<ir::Expr> args, const SourceLoc& loc) {
  return std::make_shared<const ir::EvaluateNode>(std::make_shared<const ir::CallNode>(ir::DType::I32, ir::CallKind::Intrinsic, name, std::move(args), loc), loc);
}

// The one gemm among a loop's statements that nothing else in the loop touches the accumulator of
// or writes an operand of (so on wgmma it may run on into the next iteration: its operands other
// than the stages must stay as they are, a fragment A maybe in registers); none when there is not
// exactly one gemm.
std::optional<size_t> gemm_to_overlap(const std::vector<ir::Stmt>& rest) {
  std::optional<size_t> gemm;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (!ir::as<ir::GemmNode>(rest[i])) continue;
    if (gemm) return std::nullopt;
    gemm = i;
  }
  if (!gemm) return std::nullopt;
  const auto* g = ir::as<ir::GemmNode>(rest[*gemm]);
  const ir::BufferNode* acc = g->c.buffer.get();
  if (acc->scope != ir::Scope::Fragment) return std::nullopt;
  for (size_t i = 0; i < rest.size(); ++i) {
    analysis::Accesses a = analysis::accesses_of(rest[i]);
    if (i != *gemm && (a.read.count(acc) || a.written.count(acc) || a.written.count(g->a.buffer.get()) || a.written.count(g->b.buffer.get())))
      return std::nullopt;
  }
  return gemm;
}

// The pipelined loops of a kernel, outermost ones only (as the Planner takes them).
std::vector<const ir::ForNode*> pipelined_loops(const ir::Stmt& body) {
  struct Finder : ir::IRVisitor {
    std::vector<const ir::ForNode*> loops;
    using ir::IRVisitor::visit;
    void visit(const ir::ForNode& n) override {
      if (n.for_kind == ir::ForKind::Pipelined) return loops.push_back(&n);
      ir::IRVisitor::visit(n);
    }
  } finder;
  finder.visit_stmt(body);
  return finder.loops;
}

// Whether `loop` is reached from `s` through sequences, allocations and lets only (the lets on the
// way collected, outermost first).
bool at_top_level(const ir::Stmt& s, const ir::ForNode* loop, std::vector<const ir::LetStmtNode*>& lets) {
  if (s.get() == loop) return true;
  if (const auto* a = ir::as<ir::AllocateNode>(s)) return at_top_level(a->body, loop, lets);
  if (const auto* l = ir::as<ir::LetStmtNode>(s)) {
    lets.push_back(l);
    if (at_top_level(l->body, loop, lets)) return true;
    lets.pop_back();
    return false;
  }
  if (const auto* seq = ir::as<ir::SeqNode>(s))
    for (const ir::Stmt& x : seq->stmts)
      if (at_top_level(x, loop, lets)) return true;
  return false;
}

// The lets of `lets` (outermost first) that `s` uses, directly or through the values of the later
// ones used. The producer binds only these: a binding of the thread index around the loop
// (`tx = T.get_thread_binding(0)` at the kernel's top) that its copies never use must not keep it
// from running them on its own.
std::vector<const ir::LetStmtNode*> lets_used(const std::vector<const ir::LetStmtNode*>& lets, const ir::Stmt& s) {
  std::set<const ir::VarNode*> used = analysis::accesses_of(s).vars;
  std::vector<const ir::LetStmtNode*> out;
  for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
    if (!used.count((*it)->var.get())) continue;
    out.insert(out.begin(), *it);
    ir::for_each_expr((*it)->value, [&](const ir::Expr& x) {
      if (x->kind == ir::NodeKind::Var) used.insert(static_cast<const ir::VarNode*>(x.get()));
    });
  }
  return out;
}

// A warp-specialized kernel (sm_90a): the launch gains a producer warpgroup after the kernel's
// `threads`, which only issues the pipelined loop's bulk copies, stage by stage, each after the
// consumers have released the stage's use before; the kernel's threads become the consumers, run
// everything else (the loop waits for each stage's copies, runs the body and releases the stage)
// and synchronize among themselves only. Why: the loads no longer wait behind the consumers' work
// in program order, and the producer's registers go to the consumers (setmaxnreg, the code
// generator). The parts the kernel's lowering builds while walking its loop:
struct Specialized {
  const ir::ForNode* loop;
  std::vector<const ir::LetStmtNode*> lets;  // bound around the loop; the producer needs them too
  ir::Stmt producer;                         // the copies' loop
  ir::Buffer bars;                           // the stages' full and free mbarriers
  ir::Stmt init;
  // The loop's stage tiles, allocated in each role around its own loop: the consumers' code after
  // the loop (the epilogue's staging tile) reuses their memory -- the producer has issued its last
  // copy by then and the consumers have waited for every copy. Both roles must see them at the same
  // offsets, so the shared tiles that enclose the consumers' loop are hoisted around both roles.
  std::vector<ir::Buffer> staged;
  std::vector<ir::Buffer> hoisted;
  // Persistent: the launch runs at most the blocks the GPU holds at once and each role walks the
  // kernel's blocks in rounds (ir::kPersistentRounds), the stages counted on across them (the loop
  // runs `extent` times every block, so round r's iterations start at r x extent). Why: the producer
  // loads the next block's first stages while the consumers finish one (its epilogue, its stores)
  // and each block's fixed start is paid once per SM. The consumers' tiles then never reuse the
  // stages' memory (the producer writes them during the epilogue).
  bool persistent = false;
  ir::Var round;
};

// Whether the loop runs the same number of iterations in every block of the kernel: its extent
// reads no memory and no variable the kernel binds but through lets of such values.
bool same_extent_every_block(const ir::KernelLaunchNode& n, const ir::ForNode& loop) {
  std::map<const ir::VarNode*, ir::Expr> lets;
  struct Lets : ir::IRVisitor {
    std::map<const ir::VarNode*, ir::Expr>& out;
    explicit Lets(std::map<const ir::VarNode*, ir::Expr>& o) : out(o) {}
    using ir::IRVisitor::visit;
    void visit(const ir::LetStmtNode& l) override {
      out[l.var.get()] = l.value;
      ir::IRVisitor::visit(l);
    }
  } collect(lets);
  collect.visit_stmt(n.body);
  std::set<const ir::VarNode*> bound = analysis::vars_bound_inside(n.body);
  bound.insert(n.thread_var.get());
  for (const ir::Var& v : n.block_vars) bound.insert(v.get());
  std::function<bool(const ir::Expr&)> same = [&](const ir::Expr& e) {
    bool ok = true;
    ir::for_each_expr(e, [&](const ir::Expr& x) {
      if (ir::as<ir::BufferLoadNode>(x)) ok = false;
      if (x->kind != ir::NodeKind::Var) return;
      const auto* v = static_cast<const ir::VarNode*>(x.get());
      if (auto let = lets.find(v); let != lets.end()) ok = ok && same(let->second);
      else ok = ok && !bound.count(v);
    });
    return ok;
  };
  return same(loop.extent);
}

// Shared memory a warp-specialized kernel needs (an upper bound on the code generator's layout): the
// stages' barriers, the shared tiles around both roles, the stages, and the consumers' shared tiles
// until their loop ends, which lie above the stages (the producer fills those from the start),
// summed rather than nested. Fragments are left out (most become registers).
int64_t specialized_shared_bytes(const ir::Stmt& consumers, const Specialized& parts) {
  struct Count : ir::IRVisitor {
    std::set<const ir::BufferNode*> staged;
    int64_t bytes = 0;
    bool loop_done = false;
    using ir::IRVisitor::visit;
    void visit(const ir::AllocateNode& n) override {
      const bool stage = staged.count(n.buffer.get()) > 0;
      if (!stage && !loop_done && n.buffer->scope == ir::Scope::Shared) bytes += shared_tile_bytes(n.buffer);
      ir::IRVisitor::visit(n);
      loop_done = loop_done || stage;
    }
  } count;
  int64_t total = shared_tile_bytes(parts.bars);
  for (const ir::Buffer& b : parts.staged) {
    count.staged.insert(b.get());
    total += shared_tile_bytes(b);
  }
  for (const ir::Buffer& b : parts.hoisted)
    if (b->scope == ir::Scope::Shared) total += shared_tile_bytes(b);
  count.visit_stmt(consumers);
  return total + count.bytes;
}

// The largest shared tile the kernel lowering may stage a fragment's store to a global tensor
// through (lower_kernel_cuda's store_through_shared, the epilogue's 16-byte stores): beside the
// stages of a persistent kernel there must be room for it too.
int64_t epilogue_staging_bytes(const ir::Stmt& consumers) {
  struct Stores : ir::IRVisitor {
    int64_t most = 0;
    using ir::IRVisitor::visit;
    void visit(const ir::BufferStoreNode& n) override {
      if (n.buffer->scope == ir::Scope::Global)
        ir::for_each_expr(n.value, [&](const ir::Expr& x) {
          const auto* l = ir::as<ir::BufferLoadNode>(x);
          if (!l || l->buffer->scope != ir::Scope::Fragment) return;
          ir::Buffer tile = ir::make_buffer(n.buffer->name, n.buffer->dtype, l->buffer->shape, ir::Scope::Shared, n.loc);
          most = std::max(most, shared_tile_bytes(tile));
        });
      ir::IRVisitor::visit(n);
    }
  } stores;
  stores.visit_stmt(consumers);
  return stores.most;
}

class Pipeliner : public ir::IRMutator {
 public:
  Pipeliner(std::map<const ir::ForNode*, Plan> plans, bool hopper, int64_t smem_limit)
      : plans_(std::move(plans)), overlap_gemms_(hopper), warp_specialize_(hopper), smem_limit_(smem_limit) {
    for (const auto& [loop, plan] : plans_) staged_.insert(plan.staged.begin(), plan.staged.end());
  }

 protected:
  ir::Stmt visit(const ir::AllocateNode& n, const ir::Stmt& self) override {
    auto it = staged_.find(n.buffer.get());
    if (it == staged_.end()) return hoist(n) ? mutate(n.body) : ir::IRMutator::visit(n, self);
    if (ws_ && plans_.at(ws_->loop).staged.count(n.buffer.get())) {  // allocated in each role
      ws_->staged.push_back(it->second);
      return mutate(n.body);
    }
    return ir::make_allocate(it->second, mutate(n.body), n.loc);
  }

  // A shared tile enclosing the warp-specialized loop: hoisted around both roles (Specialized).
  bool hoist(const ir::AllocateNode& n) {
    std::vector<const ir::LetStmtNode*> lets;
    if (!ws_ || (n.buffer->scope != ir::Scope::Shared && n.buffer->scope != ir::Scope::Fragment) ||
        !at_top_level(n.body, ws_->loop, lets))
      return false;
    ws_->hoisted.push_back(n.buffer);
    return true;
  }

  ir::Stmt visit(const ir::KernelLaunchNode& n, const ir::Stmt& self) override {
    if (!warp_specialize_) return ir::IRMutator::visit(n, self);
    std::vector<const ir::ForNode*> loops = pipelined_loops(n.body);
    // A loop that asks for it must get it; the others get it where it applies.
    const ir::ForNode* asked = nullptr;
    for (const ir::ForNode* l : loops)
      if (l->warp_specialize.value_or(false)) asked = asked ? asked : l;
    const ir::ForNode* loop = asked;
    for (const ir::ForNode* l : loops)
      if (!loop && plans_.count(l) && l->warp_specialize.value_or(true)) loop = l;
    if (!loop) return ir::IRMutator::visit(n, self);
    std::string why = obstacle(n, *loop, loops);
    std::vector<const ir::LetStmtNode*> lets;
    if (why.empty() && !at_top_level(n.body, loop, lets))
      why = "it runs inside another loop or a condition of the kernel (the producer warpgroup runs the loop's copies on their own)";
    // Persistent where every block runs the loop alike, the stages fit beside every other shared
    // tile and a block has its SM to itself (TL_PERSISTENT_KERNELS=0: never, for A/B runs); else
    // one block a tile as before.
    Specialized parts;
    ir::Stmt consumers;
    for (bool persistent : {same_extent_every_block(n, *loop) && rt::env_string("TL_PERSISTENT_KERNELS", "1") != "0", false}) {
      if (!why.empty()) break;
      parts = Specialized{loop, lets, nullptr, nullptr, nullptr, {}, {}, persistent, ir::make_var("round", ir::DType::I32, loop->loc)};
      ws_ = &parts;
      consumers = mutate(n.body);
      ws_ = nullptr;
      parts.lets = lets_used(parts.lets, parts.producer);
      why = producer_obstacle(n, parts);
      const int64_t need = specialized_shared_bytes(consumers, parts) + (persistent ? epilogue_staging_bytes(consumers) : 0);
      // Two blocks an SM already overlap one's epilogue with the other's loop: there persistence
      // measured 1-2.6% slower (64 x 64 attention, docs/perf.md stop 35), so one block a tile.
      if (why.empty() && persistent && need <= smem_limit_ && specialized_blocks_per_sm(n.threads, need) > 1) continue;
      if (!why.empty() || need <= smem_limit_) break;
      if (!persistent)
        why = rt::str("with a producer the consumers' shared tiles before the loop lie above the stages it fills: up to ",
                      need, " bytes of shared memory, more than the ", smem_limit_, " a block may use");
    }
    if (!why.empty()) {
      if (asked) error_at(asked->loc, "cannot warp-specialize this T.Pipelined loop: " + why);
      return ir::IRMutator::visit(n, self);
    }
    const SourceLoc& loc = loop->loc;
    ir::Stmt producer = parts.producer;
    // The lets (and a persistent kernel's round and block coordinates), bound anew for the producer
    // (each variable keeps one binding).
    ir::VarMap fresh;
    for (const ir::LetStmtNode* l : parts.lets) fresh[l->var.get()] = ir::make_var(l->var->name, l->var->dtype, l->loc);
    std::vector<ir::Var> producer_blocks;
    const ir::Var producer_round = ir::make_var(parts.round->name, parts.round->dtype, loc);
    if (parts.persistent) {
      for (const ir::Var& v : n.block_vars) {
        producer_blocks.push_back(ir::make_var(v->name, v->dtype, v->loc));
        fresh[v.get()] = producer_blocks.back();
      }
      fresh[parts.round.get()] = producer_round;
    }
    producer = ir::substitute(producer, fresh);
    for (auto it = parts.lets.rbegin(); it != parts.lets.rend(); ++it) {
      const ir::Var& v = std::static_pointer_cast<const ir::VarNode>(fresh.at((*it)->var.get()));
      producer = ir::make_let(v, ir::substitute((*it)->value, fresh), producer, (*it)->loc);
    }
    if (parts.persistent) {
      // The kernel's block variables stay unused (each variable keeps one binding).
      ir::VarMap rounds_blocks;
      std::vector<ir::Var> consumer_blocks;
      for (const ir::Var& v : n.block_vars) {
        consumer_blocks.push_back(ir::make_var(v->name, v->dtype, v->loc));
        rounds_blocks[v.get()] = consumer_blocks.back();
      }
      producer = persistent_rounds(producer_round, producer_blocks, producer, loc);
      consumers = persistent_rounds(parts.round, consumer_blocks, ir::substitute(consumers, rounds_blocks), loc);
      for (const ir::Buffer& b : parts.staged) consumers = ir::make_allocate(b, consumers, loc);
    }
    ir::Expr is_producer = ir::make_call(ir::DType::Bool, ir::CallKind::Intrinsic, ir::kProducerWarpgroup, {ir::make_int(n.threads)}, loc);
    for (const ir::Buffer& b : parts.staged) producer = ir::make_allocate(b, producer, loc);
    ir::Stmt body = ir::make_seq({parts.init, std::make_shared<const ir::BarrierNode>(loc), ir::make_if(is_producer, producer, consumers, loc)}, loc);
    for (auto b = parts.hoisted.rbegin(); b != parts.hoisted.rend(); ++b) body = ir::make_allocate(*b, body, loc);
    body = ir::make_allocate(parts.bars, body, loc);
    return std::make_shared<const ir::KernelLaunchNode>(n.grid, n.block_vars, n.threads, n.thread_var, n.swizzle_panel, body, n.loc);
  }

  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    auto it = plans_.find(&n);
    if (it == plans_.end()) {
      ++enclosing_loops_;
      ir::Stmt out = ir::IRMutator::visit(n, self);
      --enclosing_loops_;
      return out;
    }
    const Plan& plan = it->second;
    const SourceLoc& loc = n.loc;
    const int64_t stages = n.num_stages;
    std::vector<ir::Stmt> body = statements(n.body), copies, rest;
    for (size_t i = 0; i < body.size(); ++i) (plan.copies.count(i) ? copies : rest).push_back(body[i]);
    const bool specialized = ws_ && ws_->loop == &n;
    // A gemm left in flight while the next iteration loads: the stage it reads is then refilled
    // one iteration later, so the loads run one stage less ahead. (A producer warpgroup waits for
    // the release instead, so there it costs no stage.)
    std::optional<size_t> overlapped = overlap_gemms_ && stages >= (specialized ? 2 : 3) ? gemm_to_overlap(rest) : std::nullopt;
    // A persistent kernel's consumers release a round's last stage as soon as its loop has drained
    // the gemm in flight (the code generator drains right after the loop; a peeled loop's last gemm
    // is waited for only where its accumulator is next touched), so the producer has every stage for
    // the next round's loads during the epilogue.
    const bool release_last = specialized && ws_->persistent && overlapped && n.depth != 1;
    const int64_t ahead_by = overlapped ? stages - 2 : stages - 1;
    // Bulk copies complete on one mbarrier per stage ("full"), the others (cp.async) in commit
    // groups. With bulk copies only, the block never synchronizes for the stages: each warp
    // releases a stage it has finished reading on a second mbarrier ("free"), and thread 0 waits
    // for that before loading into the stage again.
    bool bulk = false, element_wise = false;
    for (const ir::Stmt& c : copies) (ir::as<ir::CopyNode>(c) ? bulk : element_wise) = true;
    const bool free_barriers = bulk && !element_wise;
    ir::Buffer bars = ir::make_buffer(n.var->name + "_stage_bars", ir::DType::I64, {ir::make_int(free_barriers ? 2 * stages : stages)}, ir::Scope::Shared, loc);
    auto bar = [&](const ir::Expr& index) { return ir::make_call(ir::DType::I64, ir::CallKind::Intrinsic, "address_of", {ir::make_load(bars, {index}, loc)}, loc); };
    auto free_bar = [&](const ir::Expr& stage) { return bar(ir::add(stage, ir::make_int(stages, stage->dtype))); };
    auto use_parity = [&](const ir::Expr& iter, int64_t back) {  // parity of phase iter / S - back of its stage
      return ir::floor_mod(ir::add(ir::floor_div(iter, ir::make_int(stages, iter->dtype)), ir::make_int(back, iter->dtype)), ir::make_int(2, iter->dtype));
    };
    // The copies of iteration `iter` (an offset from the loop's start; `run` in the stages' sequence)
    // into stage `stage`.
    auto load = [&](const ir::Expr& iter, const ir::Expr& run, const ir::Expr& stage) {
      std::vector<ir::Stmt> out;
      if (free_barriers)  // the stage's use S iterations back is released
        out.push_back(ir::make_if(ir::compare(ir::BinaryOp::GE, run, ir::make_int(stages, run->dtype)),
                                  intrinsic(ir::kBulkAcquire, {free_bar(stage), use_parity(run, 1)}, loc), nullptr, loc));
      ToStage to_stage(plan.staged, stage, true, bulk ? bar(stage) : nullptr);
      for (const ir::Stmt& c : copies) out.push_back(to_stage.mutate(ir::substitute(c, {{n.var.get(), ir::add(n.min, iter)}})));
      if (free_barriers) out.push_back(intrinsic(ir::kBulkArrive, {bar(stage)}, loc));
      return ir::make_seq(std::move(out), loc);
    };
    // ... if it exists.
    auto load_ahead = [&](const ir::Expr& iter, const ir::Expr& stage) {
      return ir::make_if(ir::compare(ir::BinaryOp::LT, iter, n.extent), load(iter, iter, stage), nullptr, loc);
    };
    // A stage's copies are all issued (also past the loop's end, where there are none).
    auto close = [&](const ir::Expr& stage) {
      std::vector<ir::Stmt> out;
      if (element_wise) out.push_back(intrinsic(ir::kAsyncCommit, {}, loc));
      if (bulk && !free_barriers) out.push_back(intrinsic(ir::kBulkArrive, {bar(stage)}, loc));
      return out;
    };
    ir::Var p = ir::make_var("p", n.var->dtype, loc);
    ir::Expr iter = ir::sub(n.var, n.min);
    // The iteration's place in the stages' sequence: a persistent kernel's rounds go on counting.
    auto stage_count = [&](const ir::Expr& it) {
      return specialized && ws_->persistent ? ir::add(ir::mul(ir::cast(it->dtype, ws_->round), ir::cast(it->dtype, n.extent)), it) : it;
    };
    const ir::Expr run = stage_count(iter);
    ir::Expr stage = ir::floor_mod(run, ir::make_int(stages, iter->dtype));
    // The consumers' part of an iteration: wait for the stage, the rest of the body on it, release it.
    auto consume = [&](std::vector<ir::Stmt>& steady) {
      if (bulk) steady.push_back(intrinsic(ir::kBulkWait, {bar(stage), use_parity(run, 0)}, loc));
      if (!free_barriers) steady.push_back(std::make_shared<const ir::BarrierNode>(loc));
      ToStage to_stage(plan.staged, stage, false);
      for (size_t i = 0; i < rest.size(); ++i) {
        steady.push_back(to_stage.mutate(mutate(rest[i])));
        if (overlapped != i) continue;
        steady.push_back(intrinsic(ir::kGemmInFlight, {ir::make_int(1)}, loc));
        // The gemm of the iteration before has finished with its stage (in a persistent kernel's
        // peeled loop, also in a round's first iteration: the last of the round before, waited
        // for by then).
        if (free_barriers) {
          ir::Expr before = ir::floor_mod(ir::add(run, ir::make_int(stages - 1, iter->dtype)), ir::make_int(stages, iter->dtype));
          steady.push_back(ir::make_if(ir::compare(ir::BinaryOp::GE, release_last ? iter : run, ir::make_int(1, iter->dtype)),
                                       intrinsic(ir::kBulkRelease, {free_bar(before)}, loc), nullptr, loc));
        }
      }
      if (free_barriers && !overlapped) steady.push_back(intrinsic(ir::kBulkRelease, {free_bar(stage)}, loc));
    };
    if (specialized) {
      RT_ICHECK(free_barriers, "a warp-specialized loop with copies other than bulk ones at ", loc.to_string());
      // The producer loads every iteration in turn; the consumers' loop only consumes.
      const ir::Expr p_run = stage_count(p);
      ws_->producer = ir::make_for(p, ir::make_int(0, p->dtype), n.extent, ir::ForKind::Serial,
                                   load(p, p_run, ir::floor_mod(p_run, ir::make_int(stages, p->dtype))), loc);
      ws_->bars = bars;
      ws_->init = intrinsic(ir::kBulkInit, {bar(ir::make_int(0)), ir::make_int(stages), ir::make_int(1)}, loc);
      std::vector<ir::Stmt> steady;
      consume(steady);
      ir::Stmt consumers = serial(n, ir::make_seq(std::move(steady), loc));
      if (release_last) {
        ir::Expr last = ir::floor_mod(stage_count(ir::sub(n.extent, ir::make_int(1, n.extent->dtype))), ir::make_int(stages, iter->dtype));
        consumers = ir::make_seq({consumers, ir::make_if(ir::compare(ir::BinaryOp::GE, n.extent, ir::make_int(1, n.extent->dtype)),
                                                         intrinsic(ir::kBulkRelease, {free_bar(last)}, loc), nullptr, loc)},
                                 loc);
      }
      if (!ws_->persistent)  // (a persistent kernel's stages enclose the consumers' rounds)
        for (const ir::Buffer& b : ws_->staged) consumers = ir::make_allocate(b, consumers, loc);
      return consumers;
    }
    std::vector<ir::Stmt> first{load_ahead(p, p)};
    for (ir::Stmt& s : close(p)) first.push_back(std::move(s));
    ir::Stmt prologue = ir::make_for(p, ir::make_int(0, p->dtype), ir::make_int(ahead_by, p->dtype), ir::ForKind::Unrolled, ir::make_seq(std::move(first), loc), loc);
    ir::Expr ahead = ir::add(iter, ir::make_int(ahead_by, iter->dtype));
    ir::Expr ahead_stage = ir::floor_mod(ahead, ir::make_int(stages, iter->dtype));
    std::vector<ir::Stmt> steady{load_ahead(ahead, ahead_stage)};
    for (ir::Stmt& s : close(ahead_stage)) steady.push_back(std::move(s));
    if (element_wise) steady.push_back(intrinsic(ir::kAsyncWait, {ir::make_int(ahead_by)}, loc));
    consume(steady);
    // Beside cp.async copies, the block's barrier frees the stages (block barriers do not see bulk copies).
    if (bulk && !free_barriers) steady.push_back(std::make_shared<const ir::BarrierNode>(loc));
    ir::Stmt loop = serial(n, ir::make_seq(std::move(steady), loc));
    if (!bulk) return ir::make_seq({prologue, loop}, loc);
    ir::Stmt init = intrinsic(ir::kBulkInit, {bar(ir::make_int(0)), ir::make_int(stages), ir::make_int(free_barriers ? 1 : 0)}, loc);
    std::vector<ir::Stmt> seq{init, std::make_shared<const ir::BarrierNode>(loc), prologue, loop};
    // Inside another loop the init runs again while the warps that lag may still be in the previous
    // run's last iterations (the loop has no block barrier with free barriers): waiting on a full
    // barrier that thread 0 resets, or releasing a stage into the new run's free barrier. Every warp
    // must have left the previous run first.
    if (enclosing_loops_ > 0) seq.insert(seq.begin(), std::make_shared<const ir::BarrierNode>(loc));
    return ir::make_allocate(bars, ir::make_seq(std::move(seq), loc), loc);
  }

 private:
  // The lowered loop; a scheduled one (depth 1) with its first and last steps peeled, so that the
  // steps between have no branches around their gemms.
  static ir::Stmt serial(const ir::ForNode& n, const ir::Stmt& body) {
    if (n.depth == 1) return peel_loop(n.var, n.min, n.extent, body, n.loc);
    return ir::make_for(n.var, n.min, n.extent, ir::ForKind::Serial, body, n.loc);
  }

  // A persistent kernel's role: `body` for each of the block's rounds, its block coordinates bound.
  static ir::Stmt persistent_rounds(const ir::Var& round, const std::vector<ir::Var>& block_vars, ir::Stmt body, const SourceLoc& loc) {
    for (size_t d = block_vars.size(); d-- > 0;) {
      ir::Expr coord = ir::make_call(ir::DType::I32, ir::CallKind::Intrinsic, ir::kPersistentBlock, {round, ir::make_int(int64_t(d))}, loc);
      body = ir::make_let(block_vars[d], ir::cast(block_vars[d]->dtype, coord), body, loc);
    }
    ir::Expr rounds = ir::make_call(ir::DType::I32, ir::CallKind::Intrinsic, ir::kPersistentRounds, {}, loc);
    return ir::make_for(round, ir::make_int(0, round->dtype), rounds, ir::ForKind::Serial, body, loc);
  }

  // Why the kernel's `loop` cannot be warp-specialized (before its lowering); empty if it can.
  std::string obstacle(const ir::KernelLaunchNode& n, const ir::ForNode& loop, const std::vector<const ir::ForNode*>& loops) const {
    auto plan = plans_.find(&loop);
    if (plan == plans_.end())
      return "none of its copies loads ahead by TMA (a T.copy of a box of a constant-shape, 16-byte-aligned tensor into a whole 2-D shared tile that only the loop uses)";
    std::vector<ir::Stmt> body = statements(loop.body);
    for (size_t i : plan->second.copies) {
      const auto* c = ir::as<ir::CopyNode>(body[i]);
      if (!c) return rt::str("the copy at ", body[i]->loc.to_string(), " cannot go by TMA (a box of a constant-shape, 16-byte-aligned tensor into a whole 2-D tile)");
    }
    for (const ir::ForNode* l : loops)
      if (l != &loop && plans_.count(l)) return rt::str("the kernel has another pipelined loop that loads ahead, at ", l->loc.to_string());
    if (n.threads % 128 != 0) return rt::str("the kernel's ", n.threads, " threads are not whole warpgroups of 128");
    if (n.threads + 128 > 1024) return rt::str("a producer warpgroup beside the kernel's ", n.threads, " threads exceeds 1024 threads a block");
    if (analysis::calls_user_code(n.body)) return "the kernel calls code of its own (T.call_extern, T.inline_code), which may synchronize the whole block without the producer";
    return "";
  }

  // Why the producer cannot run the copies on its own: it may read nothing the kernel computes
  // (the thread index, the consumers' variables, memory the kernel writes).
  std::string producer_obstacle(const ir::KernelLaunchNode& n, const Specialized& parts) const {
    ir::Stmt producer = parts.producer;
    for (auto it = parts.lets.rbegin(); it != parts.lets.rend(); ++it) producer = ir::make_let((*it)->var, (*it)->value, producer, (*it)->loc);
    analysis::Accesses kernel = analysis::accesses_of(n.body), own = analysis::accesses_of(producer);
    // The variables the kernel binds, but for the lets the producer binds again.
    std::set<const ir::VarNode*> bound = analysis::vars_bound_inside(n.body);
    bound.insert(n.thread_var.get());
    for (const ir::LetStmtNode* l : parts.lets) bound.erase(l->var.get());
    for (const ir::VarNode* v : own.vars)
      if (bound.count(v)) return rt::str("the loop's bounds or the tiles it loads depend on '", v->name, "', which the kernel's threads compute");
    for (const ir::BufferNode* b : own.read)
      if (b != parts.bars.get() && (b->scope != ir::Scope::Global || kernel.written.count(b)))
        return rt::str("the loop's bounds or the tiles it loads depend on '", b->name, "', which the kernel writes");
    return "";
  }

  std::map<const ir::ForNode*, Plan> plans_;
  std::map<const ir::BufferNode*, ir::Buffer> staged_;
  bool overlap_gemms_;     // sm_90a: gemms may become asynchronous wgmma
  bool warp_specialize_;   // sm_90a
  int64_t smem_limit_;     // shared memory one block may use
  int enclosing_loops_ = 0;  // loops (not pipelined) around the statement being lowered
  Specialized* ws_ = nullptr;  // the warp-specialized kernel being lowered
};

}  // namespace

ir::PrimFunc pipeline_loads_cuda(const ir::PrimFunc& func, const PassOptions& options) {
  if (options.target.kind != Target::Kind::CUDA || options.target.sm() < 80) return func;
  // Copies left whole (lower_tile_ops, sm_90+) that the loops load ahead become bulk copies where
  // TMA can move them; the others are lowered to loop nests as everywhere else.
  Planner whole(options.tensors_aligned);
  whole.visit_stmt(func.body);
  std::set<const ir::CopyNode*> bulk;
  for (const auto& [loop, plan] : whole.plans()) {
    std::vector<ir::Stmt> body = statements(loop->body);
    for (size_t i : plan.copies)
      if (const auto* c = ir::as<ir::CopyNode>(body[i]); c && tma_box_allowed(c->src, c->dst, options.tensors_aligned)) bulk.insert(c);
  }
  ir::PrimFunc out = func;
  out.body = lower_copies(MarkBulk(bulk).mutate(func.body));
  Planner planner(options.tensors_aligned);
  planner.visit_stmt(out.body);
  auto plans = planner.plans();
  out.body = Pipeliner(std::move(plans), options.target.arch == "sm_90a", shared_memory_per_block(options.target.sm())).mutate(out.body);
  return out;
}

}  // namespace tilelang::passes
