// Replacing variables by expressions, and buffers by buffers, throughout a tree.
#pragma once

#include <map>

#include "tilelang/ir/ir.h"

namespace tilelang::ir {

using VarMap = std::map<const VarNode*, Expr>;

Expr substitute(const Expr& expr, const VarMap& vars);
Stmt substitute(const Stmt& stmt, const VarMap& vars);
Stmt replace_buffers(const Stmt& stmt, const std::map<const BufferNode*, Buffer>& buffers);

}  // namespace tilelang::ir
