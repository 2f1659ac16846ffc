#include "tilelang/analysis/vector_copy.h"

#include <cmath>

#include "rt/dtype.h"
#include "tilelang/analysis/access.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/ir/op.h"

namespace tilelang::analysis {
namespace {

// A constant whose bits are all zero in any dtype (0 or +0.0, possibly cast).
bool is_positive_zero(const ir::Expr& e) {
  if (const auto* c = ir::as<ir::CastNode>(e)) return is_positive_zero(c->value);
  auto v = ir::as_const_float(e);
  return v && *v == 0.0 && !std::signbit(*v);
}

// The stored value without pipeline_cuda's async_copy marker.
const ir::Expr& copied_value(const ir::BufferStoreNode& st) {
  const auto* c = ir::as<ir::CallNode>(st.value);
  return c && c->call_kind == ir::CallKind::Intrinsic && c->name == ir::kAsyncCopy ? c->args.at(0) : st.value;
}

}  // namespace

const ir::SelectNode* vector_guard(const ir::BufferStoreNode& st) { return ir::as<ir::SelectNode>(copied_value(st)); }

const ir::BufferLoadNode* vector_source(const ir::BufferStoreNode& st, const ir::VarNode* inner) {
  const ir::Expr& value = copied_value(st);
  if (const auto* ld = ir::as<ir::BufferLoadNode>(value)) return ld;
  const auto* sel = ir::as<ir::SelectNode>(value);
  if (!sel || uses_var(sel->cond, inner) || !is_positive_zero(sel->f)) return nullptr;
  return ir::as<ir::BufferLoadNode>(sel->t);
}

int64_t vector_width(const std::vector<const ir::ForNode*>& nest, const ir::Stmt& body, bool tensors_aligned) {
  const auto* st = ir::as<ir::BufferStoreNode>(body);
  if (!st || st->atomic_add || nest.empty()) return 1;
  const ir::ForNode* inner = nest.back();
  const auto* ld = vector_source(*st, inner->var.get());
  if (!ld || ld->buffer->dtype != st->buffer->dtype) return 1;
  if (!tensors_aligned && (st->buffer->scope == ir::Scope::Global || ld->buffer->scope == ir::Scope::Global)) return 1;
  int bits = rt::bits(st->buffer->dtype);
  if (bits != 16 && bits != 32) return 1;
  const int64_t vec = 128 / bits;
  auto ext = ir::as_const_int(inner->extent);
  if (!ext || *ext % vec != 0 || !ir::is_const_int(inner->min, 0)) return 1;
  auto aligned = [&](const ir::Buffer& b, const std::vector<ir::Expr>& idx) {
    // Every index but the last moves by whole rows, a multiple of the vector whatever its value
    // when the row stride is; the last is the innermost variable plus multiples of the vector.
    int64_t stride = 1;
    for (size_t d = idx.size(); d-- > 1;) {
      auto extent = ir::as_const_int(b->shape[d]);
      if (!extent) return false;
      stride *= *extent;
      if (stride % vec != 0 || uses_var(idx[d - 1], inner->var.get())) return false;
    }
    auto lin = as_linear(idx.back());
    if (!lin || lin->constant % vec != 0 || lin->coefficient(inner->var.get()) != 1) return false;
    for (const auto& [v, c] : lin->terms)
      if (v.get() != inner->var.get() && c % vec != 0) return false;
    return true;
  };
  return aligned(st->buffer, st->indices) && aligned(ld->buffer, ld->indices) ? vec : 1;
}

}  // namespace tilelang::analysis
