#include "tilelang/passes/pipeline_loads_cuda.h"

#include <map>
#include <set>

#include "tilelang/analysis/access.h"
#include "tilelang/analysis/vector_copy.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"

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

// The destination of a global -> shared copy nest that moves 16 bytes a thread; null otherwise.
const ir::BufferNode* async_copy_destination(const ir::Stmt& s, bool tensors_aligned) {
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

 private:
  bool tensors_aligned_;
  const ir::ForNode* loop_ = nullptr;  // the pipelined loop being walked
  std::map<const ir::ForNode*, std::vector<std::pair<size_t, const ir::BufferNode*>>> candidates_;
  std::map<const ir::BufferNode*, std::set<const ir::ForNode*>> users_;  // null: outside pipelined loops
};

// Accesses of staged buffers go to one stage: x[i, j] -> x[stage, i, j]; a stored copy becomes
// asynchronous when `async`.
class ToStage : public ir::IRMutator {
 public:
  ToStage(const std::map<const ir::BufferNode*, ir::Buffer>& staged, ir::Expr stage, bool async) : staged_(staged), stage_(std::move(stage)), async_(async) {}

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
};

ir::Stmt intrinsic(const char* name, std::vector<ir::Expr> args, const SourceLoc& loc) {
  return std::make_shared<const ir::EvaluateNode>(std::make_shared<const ir::CallNode>(ir::DType::I32, ir::CallKind::Intrinsic, name, std::move(args), loc), loc);
}

class Pipeliner : public ir::IRMutator {
 public:
  explicit Pipeliner(std::map<const ir::ForNode*, Plan> plans) : plans_(std::move(plans)) {
    for (const auto& [loop, plan] : plans_) staged_.insert(plan.staged.begin(), plan.staged.end());
  }

 protected:
  ir::Stmt visit(const ir::AllocateNode& n, const ir::Stmt& self) override {
    auto it = staged_.find(n.buffer.get());
    if (it == staged_.end()) return ir::IRMutator::visit(n, self);
    return ir::make_allocate(it->second, mutate(n.body), n.loc);
  }

  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    auto it = plans_.find(&n);
    if (it == plans_.end()) return ir::IRMutator::visit(n, self);
    const Plan& plan = it->second;
    const SourceLoc& loc = n.loc;
    const int64_t stages = n.num_stages;
    std::vector<ir::Stmt> body = statements(n.body), copies, rest;
    for (size_t i = 0; i < body.size(); ++i) (plan.copies.count(i) ? copies : rest).push_back(body[i]);
    // The copies of iteration `iter` (an offset from the loop's start) into stage `stage`, if it exists.
    auto load_ahead = [&](const ir::Expr& iter, const ir::Expr& stage) {
      std::vector<ir::Stmt> out;
      ToStage to_stage(plan.staged, stage, true);
      for (const ir::Stmt& c : copies) out.push_back(to_stage.mutate(ir::substitute(c, {{n.var.get(), ir::add(n.min, iter)}})));
      return ir::make_if(ir::compare(ir::BinaryOp::LT, iter, n.extent), ir::make_seq(std::move(out), loc), nullptr, loc);
    };
    ir::Var p = ir::make_var("p", n.var->dtype, loc);
    ir::Stmt prologue = ir::make_for(p, ir::make_int(0, p->dtype), ir::make_int(stages - 1, p->dtype), ir::ForKind::Unrolled,
                                     ir::make_seq({load_ahead(p, p), intrinsic(ir::kAsyncCommit, {}, loc)}), loc);
    ir::Expr iter = ir::sub(n.var, n.min);
    ir::Expr ahead = ir::add(iter, ir::make_int(stages - 1, iter->dtype));
    std::vector<ir::Stmt> steady{load_ahead(ahead, ir::floor_mod(ahead, ir::make_int(stages, iter->dtype))), intrinsic(ir::kAsyncCommit, {}, loc),
                                 intrinsic(ir::kAsyncWait, {ir::make_int(stages - 1)}, loc), std::make_shared<const ir::BarrierNode>(loc)};
    ToStage to_stage(plan.staged, ir::floor_mod(iter, ir::make_int(stages, iter->dtype)), false);
    for (const ir::Stmt& s : rest) steady.push_back(to_stage.mutate(mutate(s)));
    ir::Stmt loop = ir::make_for(n.var, n.min, n.extent, ir::ForKind::Serial, ir::make_seq(std::move(steady), loc), loc);
    return ir::make_seq({prologue, loop}, loc);
  }

 private:
  std::map<const ir::ForNode*, Plan> plans_;
  std::map<const ir::BufferNode*, ir::Buffer> staged_;
};

// "sm_90a" -> 90.
int arch_number(const std::string& arch) {
  int v = 0;
  for (char c : arch)
    if (c >= '0' && c <= '9') v = v * 10 + (c - '0');
  return v;
}

}  // namespace

ir::PrimFunc pipeline_loads_cuda(const ir::PrimFunc& func, const PassOptions& options) {
  if (options.target.kind != Target::Kind::CUDA || arch_number(options.target.arch) < 80) return func;
  Planner planner(options.tensors_aligned);
  planner.visit_stmt(func.body);
  auto plans = planner.plans();
  if (plans.empty()) return func;
  ir::PrimFunc out = func;
  out.body = Pipeliner(std::move(plans)).mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
