#include "tilelang/passes/verify.h"

#include <set>

#include "rt/error.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/printer.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

class Verifier : public ir::IRVisitor {
 public:
  explicit Verifier(const ir::PrimFunc& func) {
    for (const ir::Param& p : func.params) {
      buffers_.insert(p.buffer.get());
      for (const ir::Expr& d : p.buffer->shape)
        ir::for_each_expr(d, [&](const ir::Expr& e) {
          if (e->kind == ir::NodeKind::Var) vars_.insert(static_cast<const ir::VarNode*>(e.get()));
        });
    }
  }

 protected:
  void visit(const ir::VarNode& v) override {
    if (!vars_.count(&v))
      error_at(stmt_loc_, rt::str("'", v.name, "' is used outside the loop, 'with' or block that defines it; assign what you need to a name before that block ends"));
  }
  void visit(const ir::BufferLoadNode& n) override {
    use_buffer(n.buffer, n.loc);
    RT_ICHECK(n.indices.size() == n.buffer->shape.size(), "load of ", n.buffer->name, " has ", n.indices.size(), " indices");
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::BufferStoreNode& n) override {
    at(n.loc);
    use_buffer(n.buffer, n.loc);
    RT_ICHECK(n.indices.size() == n.buffer->shape.size(), "store to ", n.buffer->name, " has ", n.indices.size(), " indices");
    RT_ICHECK(n.value->dtype == n.buffer->dtype, "store of ", rt::name(n.value->dtype), " into ", rt::name(n.buffer->dtype), " buffer ", n.buffer->name);
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::LetStmtNode& n) override {
    at(n.loc);
    visit_expr(n.value);
    RT_ICHECK(n.value->dtype == n.var->dtype, "let ", n.var->name, " of ", rt::name(n.var->dtype), " bound to ", rt::name(n.value->dtype));
    scoped_var(n.var, [&] { visit_stmt(n.body); });
  }
  void visit(const ir::ForNode& n) override {
    at(n.loc);
    visit_expr(n.min);
    visit_expr(n.extent);
    RT_ICHECK(rt::is_int(n.min->dtype) && rt::is_int(n.extent->dtype), "loop bounds of ", n.var->name, " are not integers");
    scoped_var(n.var, [&] { visit_stmt(n.body); });
  }
  void visit(const ir::IfThenElseNode& n) override {
    at(n.loc);
    RT_ICHECK(n.cond->dtype == ir::DType::Bool, "if condition of type ", rt::name(n.cond->dtype));
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::AllocateNode& n) override {
    at(n.loc);
    for (const ir::Expr& d : n.buffer->shape) visit_expr(d);
    RT_ICHECK(!buffers_.count(n.buffer.get()), "buffer ", n.buffer->name, " allocated twice");
    buffers_.insert(n.buffer.get());
    visit_stmt(n.body);
    buffers_.erase(n.buffer.get());
  }
  void visit(const ir::KernelLaunchNode& n) override {
    at(n.loc);
    RT_ICHECK(!in_kernel_, "nested kernel launch");
    RT_ICHECK(n.block_vars.size() == n.grid.size() && !n.grid.empty() && n.grid.size() <= 3, "kernel grid");
    for (const ir::Expr& g : n.grid) visit_expr(g);
    in_kernel_ = true;
    for (const ir::Var& v : n.block_vars) vars_.insert(v.get());
    vars_.insert(n.thread_var.get());
    visit_stmt(n.body);
    for (const ir::Var& v : n.block_vars) vars_.erase(v.get());
    vars_.erase(n.thread_var.get());
    in_kernel_ = false;
  }
  void visit(const ir::BarrierNode& n) override { RT_ICHECK(in_kernel_, "barrier outside a kernel at ", n.loc.to_string()); }
  void visit(const ir::CopyNode& n) override {
    at(n.loc);
    region(n.src);
    region(n.dst);
  }
  void visit(const ir::FillNode& n) override {
    at(n.loc);
    region(n.dst);
    visit_expr(n.value);
  }
  void visit(const ir::ReduceNode& n) override {
    at(n.loc);
    region(n.src);
    region(n.dst);
    RT_ICHECK(n.dim >= 0 && n.dim < static_cast<int>(n.src.ranges.size()), "reduce dim");
  }
  void visit(const ir::GemmNode& n) override {
    at(n.loc);
    region(n.a);
    region(n.b);
    if (n.epilogue) visit_region(n.c);  // with an epilogue, C only describes the result's shape
    else region(n.c);
    if (n.epilogue) {
      RT_ICHECK(n.acc && n.epilogue_indices.size() == 2, "gemm epilogue without its variables");
      vars_.insert(n.acc.get());
      for (const ir::Var& v : n.epilogue_indices) vars_.insert(v.get());
      visit_stmt(n.epilogue);
      vars_.erase(n.acc.get());
      for (const ir::Var& v : n.epilogue_indices) vars_.erase(v.get());
    }
  }
  void visit(const ir::EvaluateNode& n) override {
    at(n.loc);
    ir::IRVisitor::visit(n);
  }
  // An integer division or remainder by a constant zero, and a shift by a constant amount outside
  // [0, width): undefined on every target (constant folding leaves them for this check; the code
  // generators define run-time shift amounts).
  void visit(const ir::BinaryNode& n) override {
    const SourceLoc& loc = n.loc.known() ? n.loc : stmt_loc_;
    const bool divides = n.op == ir::BinaryOp::Div || n.op == ir::BinaryOp::FloorDiv || n.op == ir::BinaryOp::FloorMod;
    if (divides && rt::is_int(n.a->dtype) && ir::is_const_int(n.b, 0))
      error_at(loc, rt::str("integer ", n.op == ir::BinaryOp::FloorMod ? "remainder" : "division", " by zero"));
    auto amount = ir::as_const_int(n.b);
    if ((n.op == ir::BinaryOp::Shl || n.op == ir::BinaryOp::Shr) && amount && (*amount < 0 || *amount >= rt::bits(n.dtype)))
      error_at(loc, rt::str("shift amount ", *amount, " is out of range: ", rt::name(n.dtype), " values shift by 0 to ", rt::bits(n.dtype) - 1));
    ir::IRVisitor::visit(n);
  }

 private:
  void at(const SourceLoc& loc) {
    if (loc.known()) stmt_loc_ = loc;
  }
  void use_buffer(const ir::Buffer& b, const SourceLoc& loc) {
    if (!buffers_.count(b.get()))
      error_at(loc.known() ? loc : stmt_loc_, rt::str("tensor '", b->name, "' is used outside the block that allocates it"));
  }
  void region(const ir::Region& r) {
    use_buffer(r.buffer, r.loc);
    RT_ICHECK(r.ranges.size() == r.buffer->shape.size(), "region of ", r.buffer->name, " has ", r.ranges.size(), " ranges for rank ",
              r.buffer->shape.size());
    visit_region(r);
  }
  template <class F>
  void scoped_var(const ir::Var& v, F&& body) {
    bool fresh = vars_.insert(v.get()).second;
    RT_ICHECK(fresh, "variable ", v->name, " bound twice");
    body();
    vars_.erase(v.get());
  }

  std::set<const ir::VarNode*> vars_;
  std::set<const ir::BufferNode*> buffers_;
  bool in_kernel_ = false;
  SourceLoc stmt_loc_;
};

}  // namespace

ir::PrimFunc verify(const ir::PrimFunc& func, const PassOptions&) {
  Verifier v(func);
  v.visit_stmt(func.body);
  return func;
}

}  // namespace tilelang::passes
