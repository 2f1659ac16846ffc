#include "tilelang/ir/substitute.h"

#include "tilelang/ir/visitor.h"

namespace tilelang::ir {
namespace {

class Substituter : public IRMutator {
 public:
  Substituter(const VarMap& vars, const std::map<const BufferNode*, Buffer>& buffers) : vars_(vars), buffers_(buffers) {}
  Buffer mutate_buffer(const Buffer& b) override {
    auto it = buffers_.find(b.get());
    return it == buffers_.end() ? b : it->second;
  }

 protected:
  Expr visit(const VarNode& n, const Expr& self) override {
    auto it = vars_.find(&n);
    return it == vars_.end() ? self : it->second;
  }

 private:
  const VarMap& vars_;
  const std::map<const BufferNode*, Buffer>& buffers_;
};

const std::map<const BufferNode*, Buffer> kNoBuffers;
const VarMap kNoVars;

}  // namespace

Expr substitute(const Expr& expr, const VarMap& vars) { return vars.empty() ? expr : Substituter(vars, kNoBuffers).mutate(expr); }
Stmt substitute(const Stmt& stmt, const VarMap& vars) { return vars.empty() ? stmt : Substituter(vars, kNoBuffers).mutate(stmt); }
Stmt replace_buffers(const Stmt& stmt, const std::map<const BufferNode*, Buffer>& buffers) {
  return buffers.empty() ? stmt : Substituter(kNoVars, buffers).mutate(stmt);
}

}  // namespace tilelang::ir
