// Which buffers and variables a piece of IR touches.
#pragma once

#include <set>
#include <string>

#include "tilelang/ir/ir.h"

namespace tilelang::analysis {

struct Accesses {
  std::set<const ir::BufferNode*> read, written;
  std::set<const ir::VarNode*> vars;  // variables referenced (not those bound inside)
};

Accesses accesses_of(const ir::Stmt& stmt);
bool uses_var(const ir::Expr& expr, const ir::VarNode* var);
bool uses_var(const ir::Stmt& stmt, const ir::VarNode* var);
bool uses_buffer(const ir::Stmt& stmt, const ir::BufferNode* buffer);
bool uses_buffer(const ir::Expr& expr, const ir::BufferNode* buffer);
// Whether a statement calls code of the user's (T.call_extern, T.inline_code), which may touch anything.
bool calls_user_code(const ir::Stmt& stmt);
// Whether a statement calls the compiler's intrinsic `name` (ir/op.h) anywhere.
bool calls_intrinsic(const ir::Stmt& stmt, const std::string& name);

}  // namespace tilelang::analysis
