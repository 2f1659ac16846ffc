// Structural equality. Free variables compare by identity; variables bound inside the compared trees
// (loop, let, block and thread variables) compare by position, so two separately built copies of the
// same program are equal. Buffers compare by identity unless allocated inside the compared trees.
#pragma once

#include "tilelang/ir/ir.h"

namespace tilelang::ir {

bool structural_equal(const Expr& a, const Expr& b);
bool structural_equal(const Stmt& a, const Stmt& b);

}  // namespace tilelang::ir
