#include "tilelang/frontend/stmt_builder.h"

#include "rt/error.h"

namespace tilelang::frontend {

void StmtBuilder::open_block() { blocks_.emplace_back(); }

ir::Stmt StmtBuilder::close_block() {
  RT_ICHECK(!blocks_.empty());
  std::vector<Item> items = std::move(blocks_.back());
  blocks_.pop_back();
  // Fold from the end: each marker takes the statements after it as its body.
  std::vector<ir::Stmt> tail;
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    switch (it->kind) {
      case Item::Kind::Stmt: tail.insert(tail.begin(), it->stmt); break;
      case Item::Kind::Allocate: tail = {ir::make_allocate(it->buffer, ir::make_seq(std::move(tail)), it->loc)}; break;
      case Item::Kind::Let: tail = {ir::make_let(it->var, it->value, ir::make_seq(std::move(tail)), it->loc)}; break;
    }
  }
  return ir::make_seq(std::move(tail));
}

void StmtBuilder::emit(ir::Stmt stmt) {
  RT_ICHECK(!blocks_.empty());
  if (!ir::is_no_op(stmt)) blocks_.back().push_back({Item::Kind::Stmt, std::move(stmt), nullptr, nullptr, nullptr, {}});
}

void StmtBuilder::emit_allocate(ir::Buffer buffer, SourceLoc loc) {
  RT_ICHECK(!blocks_.empty());
  blocks_.back().push_back({Item::Kind::Allocate, nullptr, std::move(buffer), nullptr, nullptr, std::move(loc)});
}

void StmtBuilder::emit_let(ir::Var var, ir::Expr value, SourceLoc loc) {
  RT_ICHECK(!blocks_.empty());
  blocks_.back().push_back({Item::Kind::Let, nullptr, nullptr, std::move(var), std::move(value), std::move(loc)});
}

void StmtBuilder::hoist_allocate(size_t depth, ir::Buffer buffer, SourceLoc loc) {
  RT_ICHECK(depth >= 1 && depth <= blocks_.size());
  std::vector<Item>& block = blocks_[depth - 1];
  block.insert(block.begin(), {Item::Kind::Allocate, nullptr, std::move(buffer), nullptr, nullptr, std::move(loc)});
}

}  // namespace tilelang::frontend
