// The IR as text, the `--emit=ir` and `--emit=lowered` stages. Deterministic: names are made unique
// in order of first appearance. Regions print as `buf[min +: extent, ...]`.
#pragma once

#include <string>

#include "tilelang/ir/ir.h"

namespace tilelang::ir {

std::string print(const PrimFunc& func);
std::string print(const Stmt& stmt);
std::string print(const Expr& expr);
std::string print(const Region& region);
std::string shape_string(const std::vector<Expr>& shape);  // "[64, 32]"

}  // namespace tilelang::ir
