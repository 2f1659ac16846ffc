#include "tilelang/passes/lower_kernel_cpu.h"

#include <algorithm>
#include <set>

#include "rt/error.h"
#include "tilelang/analysis/access.h"
#include "tilelang/analysis/thread_dependence.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

bool contains_barrier(const ir::Stmt& s) {
  bool found = false;
  struct Finder : ir::IRVisitor {
    bool& found;
    explicit Finder(bool& f) : found(f) {}
    void visit(const ir::BarrierNode&) override { found = true; }
  } f(found);
  f.visit_stmt(s);
  return found;
}

// Whether evaluating e again anywhere in body gives its value before body: it calls no code of the
// user's and reads no memory that body writes.
bool recomputable_in(const ir::Expr& e, const ir::Stmt& body) {
  const analysis::Accesses body_accesses = analysis::accesses_of(body);
  const bool user_code = analysis::calls_user_code(body);
  bool same = true;
  ir::for_each_expr(e, [&](const ir::Expr& x) {
    if (const auto* l = ir::as<ir::BufferLoadNode>(x)) same &= !user_code && !body_accesses.written.count(l->buffer.get());
    if (const auto* c = ir::as<ir::CallNode>(x)) same &= c->call_kind != ir::CallKind::Extern;
  });
  return same;
}

// Binds var = value again at the top of each thread loop (over tid) that uses var.
class RebindInThreadLoops : public ir::IRMutator {
 public:
  RebindInThreadLoops(const ir::Var& tid, const ir::Var& var, const ir::Expr& value) : tid_(tid), var_(var), value_(value) {}

 protected:
  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    if (n.var != tid_ || !analysis::uses_var(n.body, var_.get())) return ir::IRMutator::visit(n, self);
    return ir::make_for(n.var, n.min, n.extent, n.for_kind, ir::make_let(var_, value_, n.body, n.loc), n.loc, n.pipelining());
  }

 private:
  ir::Var tid_, var_;
  ir::Expr value_;
};

class ThreadLoops {
 public:
  ThreadLoops(const analysis::ThreadDependence& dep, ir::Var tid, int64_t threads) : dep_(dep), tid_(std::move(tid)), threads_(threads) {}

  ir::Stmt wrap(const ir::Stmt& s) {
    const bool barrier = contains_barrier(s);
    if (!barrier && !dep_.dependent(s)) return s;
    if (!barrier && !holds_block_level(s)) return loop(s);
    if (ir::as<ir::BarrierNode>(s)) return ir::make_seq({});
    if (const auto* seq = ir::as<ir::SeqNode>(s)) {
      // Consecutive per-thread statements share one loop; barriers and block-level statements end it.
      std::vector<ir::Stmt> out, run;
      auto flush = [&] {
        if (!run.empty()) out.push_back(loop(ir::make_seq(run)));
        run.clear();
      };
      for (const ir::Stmt& x : seq->stmts) {
        if (runs_in_thread_loop(x)) {
          run.push_back(x);
          continue;
        }
        flush();
        out.push_back(wrap(x));
      }
      flush();
      return ir::make_seq(std::move(out), seq->loc);
    }
    if (const auto* f = ir::as<ir::ForNode>(s)) {
      if (dep_.dependent(f->min) || dep_.dependent(f->extent)) barrier_error(s);
      return ir::make_for(f->var, f->min, f->extent, f->for_kind, wrap(f->body), f->loc, f->pipelining());
    }
    if (const auto* i = ir::as<ir::IfThenElseNode>(s)) {
      if (dep_.dependent(i->cond)) barrier_error(s);
      return ir::make_if(i->cond, wrap(i->then_case), i->else_case ? wrap(i->else_case) : nullptr, i->loc);
    }
    if (const auto* a = ir::as<ir::AllocateNode>(s)) return ir::make_allocate(a->buffer, wrap(a->body), a->loc);
    if (const auto* l = ir::as<ir::LetStmtNode>(s)) {
      ir::Stmt body = wrap(l->body);
      if (!dep_.dependent(l->value)) return ir::make_let(l->var, l->value, body, l->loc);
      // A per-thread value, maybe used in several thread loops: each binds it again, which gives the
      // value of the binding unless memory it reads is written after it. Such a value is kept, one
      // per thread, as it was at the binding (what each GPU thread's register holds).
      if (!recomputable_in(l->value, l->body) && !used_only_at_the_start(l->body, l->var.get())) return kept_per_thread(*l, body);
      return RebindInThreadLoops(tid_, l->var, l->value).mutate(body);
    }
    barrier_error(s);
  }

 private:
  [[noreturn]] void barrier_error(const ir::Stmt& s) {
    error_at(s->loc, "T.sync_threads() under a condition or loop that depends on the thread index: every thread of the block must reach it");
  }
  // let var = value in `body` (its thread loops built): each thread's value stored where it is bound,
  // into a per-thread array the body's uses read.
  ir::Stmt kept_per_thread(const ir::LetStmtNode& l, const ir::Stmt& body) {
    ir::Buffer kept = ir::make_buffer(l.var->name, l.var->dtype, {ir::make_int(threads_)}, ir::Scope::Local, l.loc);
    ir::Stmt uses = ir::substitute(body, {{l.var.get(), ir::make_load(kept, {tid_}, l.loc)}});
    return ir::make_allocate(kept, ir::make_seq({loop(ir::make_store(kept, {tid_}, l.value, l.loc)), uses}, l.loc), l.loc);
  }
  ir::Stmt loop(const ir::Stmt& s) {
    return ir::make_for(tid_, ir::make_int(0), ir::make_int(threads_), ir::ForKind::Serial, s, s->loc);
  }
  // Whether a per-thread statement holds block-level statements, which run once per block and so stay
  // out of the thread loops: those not under a condition, loop bound or let that depends on the thread.
  bool holds_block_level(const ir::Stmt& s) const {
    if (!dep_.dependent(s)) return true;
    if (const auto* seq = ir::as<ir::SeqNode>(s))
      return std::any_of(seq->stmts.begin(), seq->stmts.end(), [&](const ir::Stmt& x) { return holds_block_level(x); });
    if (const auto* f = ir::as<ir::ForNode>(s)) return !dep_.dependent(f->min) && !dep_.dependent(f->extent) && holds_block_level(f->body);
    if (const auto* i = ir::as<ir::IfThenElseNode>(s))
      return !dep_.dependent(i->cond) && (holds_block_level(i->then_case) || (i->else_case && holds_block_level(i->else_case)));
    if (const auto* a = ir::as<ir::AllocateNode>(s)) return holds_block_level(a->body);
    if (const auto* l = ir::as<ir::LetStmtNode>(s)) return holds_block_level(l->body);
    return false;
  }
  // Whether a statement of a list joins its neighbours' thread loop.
  bool runs_in_thread_loop(const ir::Stmt& s) const { return !contains_barrier(s) && dep_.dependent(s) && !holds_block_level(s); }
  // Whether var is used only by the per-thread statements that body starts with: the thread loop at
  // the place of the binding.
  bool used_only_at_the_start(const ir::Stmt& body, const ir::VarNode* var) const {
    const auto* seq = ir::as<ir::SeqNode>(body);
    if (!seq) return !analysis::uses_var(body, var);
    auto rest = std::find_if_not(seq->stmts.begin(), seq->stmts.end(), [&](const ir::Stmt& x) { return runs_in_thread_loop(x); });
    return std::none_of(rest, seq->stmts.end(), [&](const ir::Stmt& x) { return analysis::uses_var(x, var); });
  }
  const analysis::ThreadDependence& dep_;
  ir::Var tid_;
  int64_t threads_;
};

// Gives per-thread buffers allocated outside the thread loops one copy per thread.
class Privatize : public ir::IRMutator {
 public:
  Privatize(const std::set<const ir::BufferNode*>& per_thread, ir::Var tid, int64_t threads)
      : per_thread_(per_thread), tid_(std::move(tid)), threads_(threads) {}

 protected:
  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    if (n.var != tid_) return ir::IRMutator::visit(n, self);
    ++in_thread_loop_;
    ir::Stmt out = ir::IRMutator::visit(n, self);
    --in_thread_loop_;
    return out;
  }
  ir::Stmt visit(const ir::AllocateNode& n, const ir::Stmt& self) override {
    if (in_thread_loop_ || !per_thread_.count(n.buffer.get())) return ir::IRMutator::visit(n, self);
    std::vector<ir::Expr> shape = {ir::make_int(threads_)};
    shape.insert(shape.end(), n.buffer->shape.begin(), n.buffer->shape.end());
    ir::Buffer expanded = ir::make_buffer(n.buffer->name, n.buffer->dtype, shape, n.buffer->scope, n.buffer->loc);
    expanded_[n.buffer.get()] = expanded;
    return ir::make_allocate(expanded, mutate(n.body), n.loc);
  }
  ir::Expr visit(const ir::BufferLoadNode& n, const ir::Expr& self) override {
    auto it = expanded_.find(n.buffer.get());
    if (it == expanded_.end()) return ir::IRMutator::visit(n, self);
    bool changed = false;
    std::vector<ir::Expr> idx = {tid_};
    for (const ir::Expr& e : mutate_all(n.indices, &changed)) idx.push_back(e);
    return ir::make_load(it->second, idx, n.loc);
  }
  ir::Stmt visit(const ir::BufferStoreNode& n, const ir::Stmt& self) override {
    auto it = expanded_.find(n.buffer.get());
    if (it == expanded_.end()) return ir::IRMutator::visit(n, self);
    bool changed = false;
    std::vector<ir::Expr> idx = {tid_};
    for (const ir::Expr& e : mutate_all(n.indices, &changed)) idx.push_back(e);
    return ir::make_store(it->second, idx, mutate(n.value), n.loc, n.atomic_add);
  }

 private:
  const std::set<const ir::BufferNode*>& per_thread_;
  ir::Var tid_;
  int64_t threads_;
  int in_thread_loop_ = 0;
  std::map<const ir::BufferNode*, ir::Buffer> expanded_;
};

class KernelLowerer : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::KernelLaunchNode& n, const ir::Stmt&) override {
    ir::Var tid = ir::make_var("tid", ir::DType::I32, n.loc);
    ir::Stmt body = ir::substitute(n.body, {{n.thread_var.get(), tid}});
    analysis::ThreadDependence dep(body, tid.get());
    body = ThreadLoops(dep, tid, n.threads).wrap(body);
    body = Privatize(dep.per_thread(), tid, n.threads).mutate(body);
    return std::make_shared<const ir::KernelLaunchNode>(n.grid, n.block_vars, n.threads, n.thread_var, n.swizzle_panel, body, n.loc);
  }
};

}  // namespace

ir::PrimFunc lower_kernel_cpu(const ir::PrimFunc& func, const PassOptions& options) {
  if (options.target.kind != Target::Kind::CPU) return func;
  ir::PrimFunc out = func;
  out.body = KernelLowerer().mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
