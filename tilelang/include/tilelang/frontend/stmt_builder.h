// Collects the statements of a kernel body as the elaborator walks it. Python declares buffers and
// let-bound names in the middle of a block, while the IR scopes them with a body: the builder keeps
// them as markers and, when a block closes, wraps everything after each marker into its body.
#pragma once

#include <vector>

#include "tilelang/ir/ir.h"

namespace tilelang::frontend {

class StmtBuilder {
 public:
  void open_block();
  ir::Stmt close_block();
  size_t depth() const { return blocks_.size(); }

  void emit(ir::Stmt stmt);
  void emit_allocate(ir::Buffer buffer, SourceLoc loc);
  void emit_let(ir::Var var, ir::Expr value, SourceLoc loc);
  // Allocates at the start of the block at `depth` (1 = outermost), so the buffer outlives the inner
  // blocks it was first assigned in: mutable scalars and whole-tensor temporaries use this.
  void hoist_allocate(size_t depth, ir::Buffer buffer, SourceLoc loc);

 private:
  struct Item {
    enum class Kind { Stmt, Allocate, Let } kind;
    ir::Stmt stmt;
    ir::Buffer buffer;
    ir::Var var;
    ir::Expr value;
    SourceLoc loc;
  };
  std::vector<std::vector<Item>> blocks_;
};

}  // namespace tilelang::frontend
