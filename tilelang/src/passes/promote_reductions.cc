#include "tilelang/passes/promote_reductions.h"

#include <optional>

#include "tilelang/analysis/access.h"
#include "tilelang/analysis/patterns.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

// At least float32 (int32), and float64 where the stored type or the added term is: each step of
// the loop adds a float64 term in float64.
ir::DType accumulator_dtype(ir::DType stored, ir::DType term) {
  if (rt::is_float(stored)) return stored == ir::DType::F64 || term == ir::DType::F64 ? ir::DType::F64 : ir::DType::F32;
  return stored == ir::DType::I64 ? stored : ir::DType::I32;
}

class Promoter : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::KernelLaunchNode&, const ir::Stmt& self) override { return self; }

  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    // The perfect nest under this loop, down to a body of stores.
    std::vector<const ir::ForNode*> loops;
    ir::Stmt cur = self;
    while (const auto* f = ir::as<ir::ForNode>(cur)) {
      loops.push_back(f);
      cur = f->body;
    }
    std::vector<const ir::BufferStoreNode*> stores;
    if (const auto* st = ir::as<ir::BufferStoreNode>(cur)) stores.push_back(st);
    if (const auto* seq = ir::as<ir::SeqNode>(cur))
      for (const ir::Stmt& x : seq->stmts) stores.push_back(ir::as<ir::BufferStoreNode>(x));
    std::vector<Reduction> reds;
    for (const ir::BufferStoreNode* st : stores) {
      auto r = match(st, loops);
      if (!r) return ir::IRMutator::visit(n, self);
      reds.push_back(*r);
    }
    // Each accumulates into its own buffer, and no term, index or loop bound reads what the group
    // writes (an inner loop's bounds are computed anew each time it starts, from the stored value;
    // an index that reads a stored tensor, `s[t[0]] += x[j]; t[0] += 1` or `s[s[0]] += 1`, moves
    // from step to step, so there is no one element to hold in an accumulator).
    bool needed = false;
    for (size_t i = 0; i < reds.size(); ++i) {
      needed |= !reds[i].already_accumulator;
      const ir::BufferNode* written = reds[i].store->buffer.get();
      for (size_t j = 0; j < reds.size(); ++j) {
        if (i != j && reds[i].store->buffer == reds[j].store->buffer) return ir::IRMutator::visit(n, self);
        if (analysis::uses_buffer(reds[j].term, written)) return ir::IRMutator::visit(n, self);
        for (const ir::Expr& index : reds[j].store->indices)
          if (analysis::uses_buffer(index, written)) return ir::IRMutator::visit(n, self);
      }
      for (const ir::ForNode* f : loops)
        if (analysis::uses_buffer(f->min, written) || analysis::uses_buffer(f->extent, written)) return ir::IRMutator::visit(n, self);
    }
    if (reds.empty() || !needed) return ir::IRMutator::visit(n, self);

    std::vector<ir::Stmt> init, update, finish;
    std::vector<ir::Buffer> accs;
    for (const Reduction& r : reds) {
      const ir::Buffer& b = r.store->buffer;
      ir::DType t = accumulator_dtype(b->dtype, r.term->dtype);
      ir::Buffer acc = ir::make_buffer(b->name + "_acc", t, {}, ir::Scope::Local, r.store->loc);
      accs.push_back(acc);
      ir::Expr a = ir::make_load(acc, {}), term = ir::cast(t, r.term);
      ir::Expr combined = r.op == ir::BinaryOp::Add ? ir::add(a, term) : r.op == ir::BinaryOp::Max ? ir::max(a, term) : ir::min(a, term);
      init.push_back(ir::make_store(acc, {}, ir::cast(t, ir::make_load(b, r.store->indices)), r.store->loc));
      update.push_back(ir::make_store(acc, {}, combined, r.store->loc));
      finish.push_back(ir::make_store(b, r.store->indices, ir::cast(b->dtype, ir::make_load(acc, {})), r.store->loc));
    }
    ir::Stmt inner = ir::make_seq(std::move(update));
    for (auto it = loops.rbegin(); it != loops.rend(); ++it)
      inner = ir::make_for((*it)->var, (*it)->min, (*it)->extent, (*it)->for_kind, inner, (*it)->loc, (*it)->pipelining());
    init.push_back(inner);
    init.insert(init.end(), finish.begin(), finish.end());
    ir::Stmt body = ir::make_seq(std::move(init));
    for (auto it = accs.rbegin(); it != accs.rend(); ++it) body = ir::make_allocate(*it, body, (*it)->loc);
    return body;
  }

 private:
  struct Reduction {
    const ir::BufferStoreNode* store;
    ir::BinaryOp op;
    ir::Expr term;
    bool already_accumulator;  // a local scalar of the accumulator's type
  };

  // B[idx] = B[idx] (+|max|min) term, with idx invariant in every loop of the nest.
  static std::optional<Reduction> match(const ir::BufferStoreNode* store, const std::vector<const ir::ForNode*>& loops) {
    if (!store || store->atomic_add) return std::nullopt;
    for (const ir::ForNode* f : loops)
      for (const ir::Expr& i : store->indices)
        if (analysis::uses_var(i, f->var.get())) return std::nullopt;
    const auto* op = ir::as<ir::BinaryNode>(analysis::strip_store_rounding(store->value, store->buffer->dtype));
    if (!op || (op->op != ir::BinaryOp::Add && op->op != ir::BinaryOp::Max && op->op != ir::BinaryOp::Min)) return std::nullopt;
    auto is_self = [&](const ir::Expr& e) { return analysis::loads_element(e, store->buffer, store->indices); };
    ir::Expr term = is_self(op->a) ? op->b : is_self(op->b) ? op->a : nullptr;
    if (!term || analysis::uses_buffer(term, store->buffer.get())) return std::nullopt;
    const ir::Buffer& b = store->buffer;
    bool acc = b->scope == ir::Scope::Local && b->shape.empty() && b->dtype == accumulator_dtype(b->dtype, term->dtype);
    return Reduction{store, op->op, term, acc};
  }
};

}  // namespace

ir::PrimFunc promote_reductions(const ir::PrimFunc& func, const PassOptions&) {
  ir::PrimFunc out = func;
  out.body = Promoter().mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
