#include "tilelang/passes/sink_allocations.h"

#include "tilelang/analysis/access.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

// Does `body` write the scalar before any read of it, on every path?
bool written_first(const ir::Stmt& body, const ir::BufferNode* buf) {
  std::vector<ir::Stmt> stmts;
  if (const auto* seq = ir::as<ir::SeqNode>(body)) stmts = seq->stmts;
  else stmts = {body};
  for (const ir::Stmt& s : stmts) {
    if (!analysis::uses_buffer(s, buf)) continue;
    if (const auto* st = ir::as<ir::BufferStoreNode>(s)) return st->buffer.get() == buf && !analysis::uses_buffer(st->value, buf);
    if (const auto* let = ir::as<ir::LetStmtNode>(s)) return !analysis::uses_buffer(let->value, buf) && written_first(let->body, buf);
    if (const auto* a = ir::as<ir::AllocateNode>(s)) return written_first(a->body, buf);
    return false;
  }
  return false;
}

// Places `alloc` around the deepest loop body that holds every use of its buffer and writes it
// first; null when no loop qualifies.
ir::Stmt sink(const ir::Stmt& s, const ir::Buffer& buf) {
  if (const auto* seq = ir::as<ir::SeqNode>(s)) {
    int user = -1;
    for (size_t i = 0; i < seq->stmts.size(); ++i) {
      if (!analysis::uses_buffer(seq->stmts[i], buf.get())) continue;
      if (user >= 0) return nullptr;  // used by two statements: it lives at this level
      user = static_cast<int>(i);
    }
    if (user < 0) return nullptr;
    ir::Stmt inner = sink(seq->stmts[user], buf);
    if (!inner) return nullptr;
    std::vector<ir::Stmt> stmts = seq->stmts;
    stmts[user] = inner;
    return ir::make_seq(std::move(stmts), seq->loc);
  }
  if (const auto* f = ir::as<ir::ForNode>(s)) {
    if (ir::Stmt deeper = sink(f->body, buf)) return ir::make_for(f->var, f->min, f->extent, f->for_kind, deeper, f->loc, f->pipelining());
    if (!written_first(f->body, buf.get())) return nullptr;
    return ir::make_for(f->var, f->min, f->extent, f->for_kind, ir::make_allocate(buf, f->body, buf->loc), f->loc, f->pipelining());
  }
  if (const auto* a = ir::as<ir::AllocateNode>(s)) {
    ir::Stmt inner = sink(a->body, buf);
    return inner ? ir::make_allocate(a->buffer, inner, a->loc) : nullptr;
  }
  if (const auto* let = ir::as<ir::LetStmtNode>(s)) {
    ir::Stmt inner = sink(let->body, buf);
    return inner ? ir::make_let(let->var, let->value, inner, let->loc) : nullptr;
  }
  return nullptr;
}

class Sinker : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::AllocateNode& n, const ir::Stmt& self) override {
    ir::Stmt body = mutate(n.body);
    if (n.buffer->scope == ir::Scope::Local && n.buffer->shape.empty()) {
      if (ir::Stmt sunk = sink(body, n.buffer)) return mutate(sunk);
    }
    return body == n.body ? self : ir::make_allocate(n.buffer, body, n.loc);
  }
};

}  // namespace

ir::PrimFunc sink_allocations(const ir::PrimFunc& func, const PassOptions&) {
  ir::PrimFunc out = func;
  out.body = Sinker().mutate(func.body);
  return out;
}

}  // namespace tilelang::passes
