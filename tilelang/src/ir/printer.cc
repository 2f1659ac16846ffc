#include "tilelang/ir/printer.h"

#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "rt/error.h"
#include "tilelang/ir/fragment_layout.h"
#include "tilelang/ir/name_table.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::ir {
namespace {

// Binding strength of an expression for parenthesization; higher binds tighter.
int precedence(const Expr& e) {
  const BinaryNode* b = as<BinaryNode>(e);
  if (!b) return e->kind == NodeKind::Unary ? 7 : 10;
  switch (b->op) {
    case BinaryOp::Or: return 1;
    case BinaryOp::And: return 2;
    case BinaryOp::EQ: case BinaryOp::NE: case BinaryOp::LT:
    case BinaryOp::LE: case BinaryOp::GT: case BinaryOp::GE: return 3;
    case BinaryOp::BitOr: case BinaryOp::BitXor: case BinaryOp::BitAnd: return 4;
    case BinaryOp::Shl: case BinaryOp::Shr: return 4;
    case BinaryOp::Add: case BinaryOp::Sub: return 5;
    case BinaryOp::Mul: case BinaryOp::Div: case BinaryOp::FloorDiv: case BinaryOp::FloorMod: return 6;
    case BinaryOp::Pow: return 8;
    case BinaryOp::Min: case BinaryOp::Max: return 10;  // printed as calls
  }
  return 10;
}

std::string format_float(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os << std::setprecision(9) << v;
  std::string s = os.str();
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

class Printer : public IRVisitor {
 public:
  std::string expr(const Expr& e) {
    switch (e->kind) {
      case NodeKind::IntImm: {
        int64_t v = as<IntImmNode>(e)->value;
        if (e->dtype == DType::Bool) return v ? "True" : "False";
        if (e->dtype == DType::I32) return std::to_string(v);
        return rt::str(rt::name(e->dtype), "(", v, ")");
      }
      case NodeKind::FloatImm: {
        std::string s = format_float(as<FloatImmNode>(e)->value);
        return e->dtype == DType::F32 ? s : rt::str(rt::name(e->dtype), "(", s, ")");
      }
      case NodeKind::Var: return var(as<VarNode>(e));
      case NodeKind::Binary: {
        const BinaryNode* b = as<BinaryNode>(e);
        if (b->op == BinaryOp::Min || b->op == BinaryOp::Max)
          return rt::str(op_symbol(b->op), "(", expr(b->a), ", ", expr(b->b), ")");
        int p = precedence(e);
        // Left-associative: the right operand needs parentheses at equal precedence (** is the reverse).
        bool right_assoc = b->op == BinaryOp::Pow;
        std::string lhs = wrap(b->a, right_assoc ? p + 1 : p);
        std::string rhs = wrap(b->b, right_assoc ? p : p + 1);
        return rt::str(lhs, " ", op_symbol(b->op), " ", rhs);
      }
      case NodeKind::Unary: {
        const UnaryNode* u = as<UnaryNode>(e);
        return rt::str(op_symbol(u->op), wrap(u->a, 7));
      }
      case NodeKind::Select: {
        const SelectNode* s = as<SelectNode>(e);
        return rt::str("select(", expr(s->cond), ", ", expr(s->t), ", ", expr(s->f), ")");
      }
      case NodeKind::Cast: return rt::str(rt::name(e->dtype), "(", expr(as<CastNode>(e)->value), ")");
      case NodeKind::Call: {
        const CallNode* c = as<CallNode>(e);
        std::string s = c->call_kind == CallKind::Extern ? rt::str("extern<", rt::name(e->dtype), ">.", c->name, "(") : c->name + "(";
        for (size_t i = 0; i < c->args.size(); ++i) s += (i ? ", " : "") + expr(c->args[i]);
        return s + ")";
      }
      case NodeKind::BufferLoad: {
        const BufferLoadNode* l = as<BufferLoadNode>(e);
        return rt::str(buffer(l->buffer), "[", list(l->indices), "]");
      }
      default: return "<stmt?>";
    }
  }

  std::string region(const Region& r) {
    std::string s = buffer(r.buffer) + "[";
    for (size_t i = 0; i < r.ranges.size(); ++i)
      s += (i ? ", " : "") + expr(r.ranges[i].min) + " +: " + expr(r.ranges[i].extent);
    return s + "]";
  }

  std::string buffer_decl(const Buffer& b) {
    return rt::str(buffer(b), ": ", scope_name(b->scope), " ", rt::name(b->dtype), shape(b->shape), b->layout ? " registers of " + b->layout->to_string() : "",
                   b->swizzled ? " swizzled" : "");
  }

  std::string shape(const std::vector<Expr>& dims) { return "[" + list(dims) + "]"; }

  void func(const PrimFunc& f) {
    out_ << (f.style == FuncStyle::TileKernel ? "@tile_kernel\n" : "@prim_func\n") << "func " << f.name << "(";
    bool first = true;
    for (const Param& p : f.params) {
      out_ << (first ? "" : ", ") << (p.is_output ? "out " : "") << buffer_decl(p.buffer);
      first = false;
    }
    out_ << "):\n";
    indent_ = 1;
    visit_stmt(f.body);
  }

  void stmt(const Stmt& s) { visit_stmt(s); }
  std::string text() const { return out_.str(); }

 protected:
  void visit(const BufferStoreNode& n) override {
    if (n.atomic_add)
      line(rt::str("atomic_add(", buffer(n.buffer), "[", list(n.indices), "], ", expr(n.value), ")"));
    else
      line(rt::str(buffer(n.buffer), "[", list(n.indices), "] = ", expr(n.value)));
  }
  void visit(const LetStmtNode& n) override {
    line(rt::str("let ", var(n.var.get()), ": ", rt::name(n.var->dtype), " = ", expr(n.value)));
    visit_stmt(n.body);
  }
  void visit(const ForNode& n) override {
    std::string extra = n.for_kind == ForKind::Pipelined ? rt::str(", stages=", n.num_stages) : "";
    if (n.warp_specialize) extra += rt::str(", warp_specialize=", *n.warp_specialize ? "true" : "false");
    if (n.depth > 0) extra += rt::str(", depth=", n.depth);
    line(rt::str("for ", var(n.var.get()), " in ", for_kind_name(n.for_kind), "(", expr(n.min), ", ", expr(n.extent), extra, "):"));
    nested(n.body);
  }
  void visit(const IfThenElseNode& n) override {
    line("if " + expr(n.cond) + ":");
    nested(n.then_case);
    if (n.else_case) {
      line("else:");
      nested(n.else_case);
    }
  }
  void visit(const SeqNode& n) override {
    if (n.stmts.empty()) line("pass");
    for (const Stmt& s : n.stmts) visit_stmt(s);
  }
  void visit(const AllocateNode& n) override {
    line("alloc " + buffer_decl(n.buffer));
    visit_stmt(n.body);
  }
  void visit(const EvaluateNode& n) override { line(expr(n.value)); }
  void visit(const InlineCodeNode& n) override {
    std::ostringstream os;
    os << "inline_code[" << (n.target.empty() ? "any" : n.target) << "](" << std::quoted(n.code);
    for (const auto& [name, e] : n.args) os << ", " << name << "=" << expr(e);
    line(os.str() + ")");
  }
  void visit(const KernelLaunchNode& n) override {
    std::string s = "kernel grid(";
    for (size_t i = 0; i < n.grid.size(); ++i) s += rt::str(i ? ", " : "", var(n.block_vars[i].get()), ": ", expr(n.grid[i]));
    s += rt::str(") threads(", var(n.thread_var.get()), ": ", n.threads, ")");
    if (n.swizzle_panel) s += rt::str(" swizzle(", n.swizzle_panel, ")");
    line(s + ":");
    nested(n.body);
  }
  void visit(const BarrierNode&) override { line("barrier()"); }
  void visit(const CopyNode& n) override {
    if (n.barrier) line(rt::str("bulk_copy(", region(n.src), " -> ", region(n.dst), ", barrier=", expr(n.barrier), ")"));
    else line(rt::str("copy(", region(n.src), " -> ", region(n.dst), ")"));
  }
  void visit(const GemmNode& n) override {
    std::string s = rt::str("gemm(", region(n.a), ", ", region(n.b), ", ", region(n.c));
    if (n.trans_a) s += ", trans_a";
    if (n.trans_b) s += ", trans_b";
    if (n.clear_accum) s += ", clear";
    s += rt::str(", accum=", rt::name(n.accum_dtype));
    if (n.tiling.block_m)
      s += rt::str(", tiling=", n.tiling.block_m, "x", n.tiling.block_n, "x", n.tiling.block_k, "/", n.tiling.threads, "t");
    s += ")";
    if (!n.epilogue) return line(s);
    line(rt::str(s, " epilogue(", var(n.acc.get()), ", ", var(n.epilogue_indices[0].get()), ", ", var(n.epilogue_indices[1].get()), "):"));
    nested(n.epilogue);
  }
  void visit(const FillNode& n) override { line(rt::str("fill(", region(n.dst), ", ", expr(n.value), ")")); }
  void visit(const ReduceNode& n) override {
    line(rt::str("reduce_", reduce_kind_name(n.reduce_kind), "(", region(n.src), " -> ", region(n.dst), ", dim=", n.dim,
                 n.clear ? ", clear" : "", ")"));
  }

 private:
  std::string wrap(const Expr& e, int min_prec) {
    std::string s = expr(e);
    return precedence(e) < min_prec ? "(" + s + ")" : s;
  }
  std::string list(const std::vector<Expr>& es) {
    std::string s;
    for (size_t i = 0; i < es.size(); ++i) s += (i ? ", " : "") + expr(es[i]);
    return s;
  }
  std::string var(const VarNode* v) { return v ? names_.name(v, v->name) : "_"; }
  std::string buffer(const Buffer& b) { return names_.name(b.get(), b->name); }
  void line(const std::string& s) { out_ << std::string(2 * indent_, ' ') << s << "\n"; }
  void nested(const Stmt& s) {
    ++indent_;
    visit_stmt(s);
    --indent_;
  }

  NameTable names_;
  std::ostringstream out_;
  int indent_ = 0;
};

}  // namespace

std::string print(const PrimFunc& func) {
  Printer p;
  p.func(func);
  return p.text();
}
std::string print(const Stmt& stmt) {
  Printer p;
  p.stmt(stmt);
  return p.text();
}
std::string print(const Expr& expr) { return Printer().expr(expr); }
std::string print(const Region& region) { return Printer().region(region); }
std::string shape_string(const std::vector<Expr>& shape) { return Printer().shape(shape); }

}  // namespace tilelang::ir
