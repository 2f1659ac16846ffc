#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Folds constants, canonicalizes affine index arithmetic, drops branches with constant conditions,
// loops that run zero times and lets of constants or variables, and inlines loops that run once.
ir::PrimFunc simplify(const ir::PrimFunc& func, const PassOptions& options);

// The same on one statement or expression, for passes that build IR.
ir::Stmt simplify_stmt(const ir::Stmt& stmt);
ir::Expr simplify_expr(const ir::Expr& expr);

}  // namespace tilelang::passes
