#include "tilelang/analysis/patterns.h"

#include "tilelang/ir/equality.h"

namespace tilelang::analysis {

namespace {

// Is every value of the float format `narrow` also a value of `wide`?
bool float_holds(ir::DType wide, ir::DType narrow) {
  using ir::DType;
  if (wide == narrow || wide == DType::F64) return true;
  const bool eight_bit_or_less = narrow == DType::F8E4M3 || narrow == DType::F8E5M2 || narrow == DType::F4E2M1;
  switch (wide) {
    case DType::F32: return narrow != DType::F64;  // every narrower format (ue8m0's 2^-127 is a subnormal)
    case DType::BF16: return eight_bit_or_less || narrow == DType::UE8M0;
    case DType::F16: return eight_bit_or_less;
    case DType::F8E4M3:
    case DType::F8E5M2: return narrow == DType::F4E2M1;
    default: return false;
  }
}

}  // namespace

ir::Expr strip_float_casts(const ir::Expr& expr) {
  ir::Expr cur = expr;
  while (const auto* c = ir::as<ir::CastNode>(cur)) {
    if (!rt::is_float(c->dtype) || !rt::is_float(c->value->dtype) || !float_holds(c->dtype, c->value->dtype)) break;
    cur = c->value;
  }
  return cur;
}

ir::Expr strip_store_rounding(const ir::Expr& value, ir::DType dtype) {
  ir::Expr cur = value;
  while (const auto* c = ir::as<ir::CastNode>(cur)) {
    if (!rt::is_float(c->dtype) || !rt::is_float(c->value->dtype)) break;
    if (!float_holds(c->dtype, dtype) && !float_holds(c->dtype, c->value->dtype)) break;
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
