#include "tilelang/analysis/patterns.h"

#include "tilelang/ir/equality.h"

namespace tilelang::analysis {

ir::Expr strip_float_casts(const ir::Expr& expr) {
  ir::Expr cur = expr;
  while (const auto* c = ir::as<ir::CastNode>(cur)) {
    if (!rt::is_float(c->dtype) || !rt::is_float(c->value->dtype)) break;
    cur = c->value;
  }
  return cur;
}

bool loads_element(const ir::Expr& expr, const ir::Buffer& buffer, const std::vector<ir::Expr>& indices) {
  const auto* l = ir::as<ir::BufferLoadNode>(strip_float_casts(expr));
  if (!l || l->buffer != buffer || l->indices.size() != indices.size()) return false;
  for (size_t d = 0; d < indices.size(); ++d)
    if (!ir::structural_equal(l->indices[d], indices[d])) return false;
  return true;
}

}  // namespace tilelang::analysis
