#include "tilelang/passes/wgmma_waits.h"

#include <algorithm>
#include <optional>
#include <set>

#include "tilelang/analysis/access.h"
#include "tilelang/analysis/register_fragments.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

// A committed wgmma group that may not have completed.
struct Group {
  int64_t index;                                // its place in the path's commit order
  // The registers its gemms use: accumulators and A operands (none: an empty group; several gemms: merged paths).
  std::vector<ir::Buffer> regs;
  std::set<const ir::BufferNode*> operands;
};

struct State {
  std::vector<Group> pending;  // oldest first
  int64_t commits = 0;         // groups committed on this path (since the enclosing loop body began)
};

ir::Stmt intrinsic(const char* name, std::vector<ir::Expr> args, const SourceLoc& loc) {
  return ir::make_evaluate(ir::make_call(ir::DType::I32, ir::CallKind::Intrinsic, name, std::move(args), loc), loc);
}

bool is_call(const ir::Stmt& s, const char* name) {
  const auto* e = ir::as<ir::EvaluateNode>(s);
  const auto* c = e ? ir::as<ir::CallNode>(e->value) : nullptr;
  return c && c->name == name;
}

// A loop with a wgmma gemm in it, anywhere in `s`.
bool has_gemm_loop(const ir::Stmt& s) {
  struct Finder : ir::IRVisitor {
    bool found = false;
    using ir::IRVisitor::visit;
    void visit(const ir::ForNode& n) override { found = found || analysis::calls_wgmma(n.body); }
  } finder;
  finder.visit_stmt(s);
  return finder.found;
}

// A statement's accesses that a gemm in flight may conflict with. A wgmma gemm's read of its A in
// registers is none: wgmma instructions in flight may read the same A registers (those of one gemm
// do), so only other code touching them waits.
analysis::Accesses waited_accesses(const ir::Stmt& s) {
  analysis::Accesses a = analysis::accesses_of(s);
  const auto* g = ir::as<ir::GemmNode>(s);
  if (g && analysis::is_wgmma(*g) && g->a.buffer->scope == ir::Scope::Local) a.read.erase(g->a.buffer.get());
  return a;
}

bool touches(const Group& g, const analysis::Accesses& a) {
  for (const ir::Buffer& acc : g.regs)
    if (a.read.count(acc.get()) || a.written.count(acc.get())) return true;
  for (const ir::BufferNode* b : g.operands)
    if (a.written.count(b)) return true;
  return false;
}

ir::Stmt seq(std::vector<ir::Stmt> stmts, const SourceLoc& loc) {
  stmts.erase(std::remove(stmts.begin(), stmts.end(), nullptr), stmts.end());
  return stmts.size() == 1 ? stmts[0] : ir::make_seq(std::move(stmts), loc);
}

class Waits {
 public:
  Waits(std::vector<ir::Buffer> accs, int64_t threads) : accs_(std::move(accs)), warpgroups_(threads / 128) {}

  ir::Stmt run(const ir::Stmt& s, State& st) {
    if (const auto* q = ir::as<ir::SeqNode>(s)) {
      std::vector<ir::Stmt> out;
      for (size_t i = 0; i < q->stmts.size(); ++i) {
        const auto* g = ir::as<ir::GemmNode>(q->stmts[i]);
        // The pipeliner's overlapped gemm waits for the one before it (gemm_in_flight); the loop
        // around it drains the last (below). Where that loop is gone (one iteration, simplified
        // away; a peeled iteration), it is a gemm like the others, waited for where it is needed.
        if (g && i + 1 < q->stmts.size() && is_call(q->stmts[i + 1], ir::kGemmInFlight)) {
          if (loop_in_flight_.empty()) {
            out.push_back(run(q->stmts[i++], st));
            continue;
          }
          std::vector<ir::Buffer>& drained = loop_in_flight_.back();
          if (std::find(drained.begin(), drained.end(), g->c.buffer) == drained.end()) drained.push_back(g->c.buffer);
          out.push_back(wait_for(waited_accesses(q->stmts[i]), st, s->loc));
          out.push_back(q->stmts[i]);
          out.push_back(q->stmts[++i]);
          continue;
        }
        out.push_back(run(q->stmts[i], st));
      }
      return seq(std::move(out), s->loc);
    }
    if (const auto* a = ir::as<ir::AllocateNode>(s)) {
      in_scope_.insert(a->buffer.get());
      ir::Stmt body = run(a->body, st);
      in_scope_.erase(a->buffer.get());
      // The tile's bytes are reused after its scope.
      analysis::Accesses gone;
      gone.written.insert(a->buffer.get());
      return ir::make_allocate(a->buffer, seq({body, wait_for(gone, st, s->loc)}, s->loc), s->loc);
    }
    if (const auto* l = ir::as<ir::LetStmtNode>(s)) return ir::make_let(l->var, l->value, run(l->body, st), s->loc);
    if (const auto* f = ir::as<ir::ForNode>(s); f && analysis::calls_wgmma(f->body)) {
      // The body starts with nothing in flight and leaves nothing in flight but the overlapped
      // gemms, whose last groups complete right after the loop: an explicit wait, which stays
      // where it is when a later pass removes a loop of one iteration.
      ir::Stmt before = drain(st, s->loc);
      State inner;
      loop_in_flight_.emplace_back();
      ir::Stmt body = run(f->body, inner);
      std::vector<ir::Expr> after{ir::make_int(0)};
      for (const ir::Buffer& acc : loop_in_flight_.back()) after.push_back(first_element(acc, s->loc));
      loop_in_flight_.pop_back();
      body = seq({body, drain(inner, s->loc)}, s->loc);
      ir::Stmt loop = ir::make_for(f->var, f->min, f->extent, f->for_kind, body, s->loc, f->pipelining());
      return seq({before, loop, after.size() > 1 ? intrinsic(ir::kWgmmaWait, std::move(after), s->loc) : nullptr}, s->loc);
    }
    if (const auto* c = ir::as<ir::IfThenElseNode>(s)) return branch(*c, st);
    if (ir::as<ir::BarrierNode>(s) && warpgroups_ > 1) {
      // Past a barrier the other warpgroups may write the shared tiles this one's gemms still read
      // (a wait covers only the warpgroup's own groups): those groups complete before it.
      analysis::Accesses shared;
      for (const Group& g : st.pending)
        for (const ir::BufferNode* b : g.operands)
          if (b->scope == ir::Scope::Shared) shared.written.insert(b);
      return seq({wait_for(shared, st, s->loc), s}, s->loc);
    }
    return leaf(s, st);
  }

  // Waits for everything in flight.
  ir::Stmt drain(State& st, const SourceLoc& loc) { return st.pending.empty() ? nullptr : wait_through(st, st.pending.size() - 1, loc); }

 private:
  ir::Stmt leaf(const ir::Stmt& s, State& st) {
    ir::Stmt wait = wait_for(waited_accesses(s), st, s->loc, is_call(s, ir::kBulkRelease) || analysis::calls_user_code(s));
    const auto* g = ir::as<ir::GemmNode>(s);
    if (!g || !analysis::is_wgmma(*g)) {
      // An int32 accumulator other code writes (T.clear's zeros) is pinned right after it: without
      // the pin ptxas materializes the constants above setmaxnreg, where the consumers do not yet
      // have their registers, and spills them (int8 128 x 128 tiles on one warpgroup, two blocks an
      // SM: 560 bytes and every wgmma serialized). Float zeros it places well, except where a
      // pipelined loop that may run no iteration follows: then it serialized the loop's wgmma (C7515,
      // pipelined_in_serial_loop.py), so any accumulator's constant fill is pinned too.
      std::vector<ir::Expr> pins;
      const analysis::Accesses written = analysis::accesses_of(s);
      for (const ir::Buffer& acc : accs_)
        if (written.written.count(acc.get()) && in_scope_.count(acc.get()) && (acc->dtype == ir::DType::I32 || fills_with_a_constant(s, acc)))
          pins.push_back(first_element(acc, s->loc));
      return seq({wait, s, pins.empty() ? nullptr : intrinsic(ir::kWgmmaPin, std::move(pins), s->loc)}, s->loc);
    }
    std::vector<ir::Expr> pins;
    for (const ir::Buffer& acc : accs_) {
      bool in_flight = acc == g->c.buffer;
      for (const Group& p : st.pending) in_flight = in_flight || std::find(p.regs.begin(), p.regs.end(), acc) != p.regs.end();
      if (!in_flight && in_scope_.count(acc.get())) pins.push_back(first_element(acc, s->loc));
    }
    // An A operand in registers (wgmma's RS form) may not be read or written until the gemm completes, as its accumulator.
    std::vector<ir::Buffer> regs{g->c.buffer};
    if (g->a.buffer->scope == ir::Scope::Local) regs.push_back(g->a.buffer);
    st.pending.push_back({st.commits++, std::move(regs), {g->a.buffer.get(), g->b.buffer.get()}});
    // The marker right after the gemm (codegen).
    return seq({wait, pins.empty() ? nullptr : intrinsic(ir::kWgmmaPin, std::move(pins), s->loc), s, intrinsic(ir::kWgmmaAsync, {}, s->loc)}, s->loc);
  }

  // A condition: each branch from the state before it (so the waits go where their branch needs
  // them); then the states merged.
  ir::Stmt branch(const ir::IfThenElseNode& n, State& st) {
    const SourceLoc& loc = n.loc;
    ir::Stmt cond_wait = wait_for(analysis::accesses_of(ir::make_evaluate(n.cond, loc)), st, loc);
    // The warp-specialized kernel's roles: the producer commits nothing (and one thread of it runs
    // its branch); the consumers finish their groups within theirs.
    const auto* role = ir::as<ir::CallNode>(n.cond);
    if (has_gemm_loop(n.then_case) || (n.else_case && has_gemm_loop(n.else_case)) || (role && role->name == ir::kProducerWarpgroup)) {
      ir::Stmt before = drain(st, loc);
      auto own = [&](const ir::Stmt& b) -> ir::Stmt {
        if (!b) return nullptr;
        State inner;
        ir::Stmt out = run(b, inner);
        return seq({out, drain(inner, loc)}, loc);
      };
      return seq({cond_wait, before, ir::make_if(n.cond, own(n.then_case), own(n.else_case), loc)}, loc);
    }
    State t = st, e = st;
    std::vector<ir::Stmt> then_out{run(n.then_case, t)}, else_out;
    if (n.else_case) else_out.push_back(run(n.else_case, e));
    auto leaves_new = [&](const State& x) { return !x.pending.empty() && x.pending.back().index >= st.commits; };
    if (leaves_new(t) || leaves_new(e)) {
      // Empty groups where fewer were committed, so a group's count of younger ones is the same on both paths.
      for (auto [x, out] : {std::pair{&t, &then_out}, std::pair{&e, &else_out}})
        while (x->commits < std::max(t.commits, e.commits)) {
          out->push_back(intrinsic(ir::kWgmmaCommit, {}, loc));
          x->pending.push_back({x->commits++, {}, {}});
        }
    }
    // In flight after it: what is in flight on either path. Where the counts differ, the smaller
    // (a wait for fewer younger groups than there are waits for more: still correct).
    State merged;
    merged.commits = std::min(t.commits, e.commits);
    for (int64_t i = std::min(first(t), first(e)); i < merged.commits; ++i) {
      Group g{i, {}, {}};
      for (const State* x : {&t, &e})
        for (const Group& p : x->pending)
          if (p.index == i) {
            for (const ir::Buffer& a : p.regs)
              if (std::find(g.regs.begin(), g.regs.end(), a) == g.regs.end()) g.regs.push_back(a);
            g.operands.insert(p.operands.begin(), p.operands.end());
          }
      merged.pending.push_back(std::move(g));
    }
    st = std::move(merged);
    return seq({cond_wait, ir::make_if(n.cond, seq(std::move(then_out), loc), else_out.empty() ? nullptr : seq(std::move(else_out), loc), loc)}, loc);
  }

  // Whether `s` is a loop nest (or a store) writing one constant into `acc` (T.clear as lowered).
  static bool fills_with_a_constant(const ir::Stmt& s, const ir::Buffer& acc) {
    const ir::Stmt* at = &s;
    while (const auto* f = ir::as<ir::ForNode>(*at)) at = &f->body;
    const auto* st = ir::as<ir::BufferStoreNode>(*at);
    if (!st || st->buffer != acc) return false;
    ir::Expr v = st->value;
    while (const auto* c = ir::as<ir::CastNode>(v)) v = c->value;
    return v->kind == ir::NodeKind::IntImm || v->kind == ir::NodeKind::FloatImm;
  }

  static ir::Expr first_element(const ir::Buffer& acc, const SourceLoc& loc) {
    return ir::make_load(acc, std::vector<ir::Expr>(acc->shape.size(), ir::make_int(0)), loc);
  }

  static int64_t first(const State& x) { return x.pending.empty() ? x.commits : x.pending.front().index; }

  // The wait a statement with accesses `a` needs first (everything with `all`); null if none.
  ir::Stmt wait_for(const analysis::Accesses& a, State& st, const SourceLoc& loc, bool all = false) {
    std::optional<size_t> youngest;
    for (size_t i = 0; i < st.pending.size(); ++i)
      if (all || touches(st.pending[i], a)) youngest = i;
    return youngest ? wait_through(st, *youngest, loc) : nullptr;
  }

  // Waits until pending[0 .. j] have completed: wgmma.wait_group allows the groups committed after
  // j (at most 7) to remain in flight; the accumulators that completed are pinned after it.
  ir::Stmt wait_through(State& st, size_t j, const SourceLoc& loc) {
    std::vector<ir::Expr> args{ir::make_int(std::min<int64_t>(st.commits - 1 - st.pending[j].index, 7))};
    std::vector<ir::Buffer> done;
    for (size_t i = 0; i <= j; ++i)
      for (const ir::Buffer& acc : st.pending[i].regs)
        if (std::find(done.begin(), done.end(), acc) == done.end()) done.push_back(acc);
    for (const ir::Buffer& acc : done) args.push_back(first_element(acc, loc));
    st.pending.erase(st.pending.begin(), st.pending.begin() + j + 1);
    return intrinsic(ir::kWgmmaWait, std::move(args), loc);
  }

  std::vector<ir::Buffer> accs_;  // of the kernel's wgmma gemms
  int64_t warpgroups_;            // the kernel's (the consumers' in a warp-specialized one)
  std::set<const ir::BufferNode*> in_scope_;  // allocated around the statement being rewritten
  // Per loop being rewritten (innermost last): the accumulators of its overlapped gemms.
  std::vector<std::vector<ir::Buffer>> loop_in_flight_;
};

class Kernels : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::KernelLaunchNode& n, const ir::Stmt& self) override {
    if (!analysis::calls_wgmma(n.body)) return self;
    struct Accs : ir::IRVisitor {
      std::vector<ir::Buffer> found;
      using ir::IRVisitor::visit;
      void visit(const ir::GemmNode& g) override {
        if (analysis::is_wgmma(g) && std::find(found.begin(), found.end(), g.c.buffer) == found.end()) found.push_back(g.c.buffer);
      }
    } accs;
    accs.visit_stmt(n.body);
    Waits waits(accs.found, n.threads);
    State st;
    ir::Stmt body = waits.run(n.body, st);
    body = seq({body, waits.drain(st, n.loc)}, n.loc);
    return std::make_shared<const ir::KernelLaunchNode>(n.grid, n.block_vars, n.threads, n.thread_var, n.swizzle_panel, body, n.loc);
  }
};

}  // namespace

ir::PrimFunc wgmma_waits(const ir::PrimFunc& func, const PassOptions& options) {
  if (options.target.kind != Target::Kind::CUDA || options.target.arch != "sm_90a") return func;
  ir::PrimFunc out = func;
  out.body = Kernels().mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
