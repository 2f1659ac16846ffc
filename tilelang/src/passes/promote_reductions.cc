#include "tilelang/passes/promote_reductions.h"

#include "tilelang/analysis/access.h"
#include "tilelang/ir/equality.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

ir::Expr strip_float_casts(const ir::Expr& e) {
  ir::Expr cur = e;
  while (const auto* c = ir::as<ir::CastNode>(cur)) {
    if (!rt::is_float(c->dtype) || !rt::is_float(c->value->dtype)) break;
    cur = c->value;
  }
  return cur;
}

ir::DType accumulator_dtype(ir::DType t) {
  if (rt::is_float(t)) return t == ir::DType::F64 ? t : ir::DType::F32;
  return t == ir::DType::I64 ? t : ir::DType::I32;
}

class Promoter : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::KernelLaunchNode&, const ir::Stmt& self) override { return self; }

  ir::Stmt visit(const ir::ForNode& n, const ir::Stmt& self) override {
    // The perfect nest under this loop, down to one store.
    std::vector<const ir::ForNode*> loops;
    ir::Stmt cur = self;
    while (const auto* f = ir::as<ir::ForNode>(cur)) {
      loops.push_back(f);
      cur = f->body;
    }
    const auto* store = ir::as<ir::BufferStoreNode>(cur);
    if (!store || store->atomic_add) return ir::IRMutator::visit(n, self);
    for (const ir::ForNode* f : loops)
      for (const ir::Expr& i : store->indices)
        if (analysis::uses_var(i, f->var.get())) return ir::IRMutator::visit(n, self);
    const auto* op = ir::as<ir::BinaryNode>(strip_float_casts(store->value));
    if (!op || (op->op != ir::BinaryOp::Add && op->op != ir::BinaryOp::Max && op->op != ir::BinaryOp::Min)) return ir::IRMutator::visit(n, self);
    auto is_self = [&](const ir::Expr& e) {
      const auto* l = ir::as<ir::BufferLoadNode>(strip_float_casts(e));
      if (!l || l->buffer != store->buffer) return false;
      for (size_t d = 0; d < l->indices.size(); ++d)
        if (!ir::structural_equal(l->indices[d], store->indices[d])) return false;
      return true;
    };
    ir::Expr term = is_self(op->a) ? op->b : is_self(op->b) ? op->a : nullptr;
    if (!term || analysis::uses_buffer(term, store->buffer.get())) return ir::IRMutator::visit(n, self);

    const ir::Buffer& b = store->buffer;
    ir::DType t = accumulator_dtype(b->dtype);
    ir::Buffer acc = ir::make_buffer(b->name + "_acc", t, {}, ir::Scope::Local, store->loc);
    ir::Expr acc_value = ir::make_load(acc, {});
    ir::Expr term_t = ir::cast(t, term);
    ir::Expr combined = op->op == ir::BinaryOp::Add ? ir::add(acc_value, term_t) : op->op == ir::BinaryOp::Max ? ir::max(acc_value, term_t) : ir::min(acc_value, term_t);
    ir::Stmt inner = ir::make_store(acc, {}, combined, store->loc);
    for (auto it = loops.rbegin(); it != loops.rend(); ++it)
      inner = ir::make_for((*it)->var, (*it)->min, (*it)->extent, (*it)->for_kind, inner, (*it)->loc, (*it)->num_stages);
    ir::Stmt body = ir::make_seq({ir::make_store(acc, {}, ir::cast(t, ir::make_load(b, store->indices)), store->loc), inner,
                                  ir::make_store(b, store->indices, ir::cast(b->dtype, ir::make_load(acc, {})), store->loc)});
    return ir::make_allocate(acc, body, store->loc);
  }
};

}  // namespace

ir::PrimFunc promote_reductions(const ir::PrimFunc& func, const PassOptions&) {
  ir::PrimFunc out = func;
  out.body = Promoter().mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
