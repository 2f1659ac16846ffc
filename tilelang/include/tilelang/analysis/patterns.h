// Small matchers shared by the passes that recognize computations in loop nests.
#pragma once

#include <vector>

#include "tilelang/ir/ir.h"

namespace tilelang::analysis {

// The expression under float-to-float casts that keep every value (float16 to float32, ...). A
// narrowing cast is an explicit rounding, which a recognized computation must not drop.
ir::Expr strip_float_casts(const ir::Expr& expr);

// The value a store into a `dtype` element writes, under the float casts that rounding to `dtype`
// makes redundant: those to a type holding every `dtype` value (the store's own rounding) and the
// lossless ones. A cast to a narrower type (`float32(float8_e4m3(s + x))` into a float32 `s`) stays.
ir::Expr strip_store_rounding(const ir::Expr& value, ir::DType dtype);

// Is `expr` (under lossless float casts) a load of `buffer` at exactly these indices?
bool loads_element(const ir::Expr& expr, const ir::Buffer& buffer, const std::vector<ir::Expr>& indices);

}  // namespace tilelang::analysis
