#include "tilelang/ir/ir.h"

#include "rt/error.h"

namespace tilelang::ir {

const char* kind_name(NodeKind kind) {
  switch (kind) {
#define TL_EXPR_NODE(Name) \
  case NodeKind::Name:     \
    return #Name;
#define TL_STMT_NODE(Name) TL_EXPR_NODE(Name)
#include "tilelang/ir/nodes.def"
  }
  return "?";
}

const char* scope_name(Scope scope) {
  switch (scope) {
    case Scope::Global: return "global";
    case Scope::Shared: return "shared";
    case Scope::Fragment: return "fragment";
    case Scope::Local: return "local";
  }
  return "?";
}

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::FloorDiv: return "//";
    case BinaryOp::FloorMod: return "%";
    case BinaryOp::Min: return "min";
    case BinaryOp::Max: return "max";
    case BinaryOp::Pow: return "**";
    case BinaryOp::EQ: return "==";
    case BinaryOp::NE: return "!=";
    case BinaryOp::LT: return "<";
    case BinaryOp::LE: return "<=";
    case BinaryOp::GT: return ">";
    case BinaryOp::GE: return ">=";
    case BinaryOp::And: return "and";
    case BinaryOp::Or: return "or";
    case BinaryOp::BitAnd: return "&";
    case BinaryOp::BitOr: return "|";
    case BinaryOp::BitXor: return "^";
    case BinaryOp::Shl: return "<<";
    case BinaryOp::Shr: return ">>";
  }
  return "?";
}

bool is_comparison(BinaryOp op) { return op >= BinaryOp::EQ && op <= BinaryOp::GE; }
bool is_logical(BinaryOp op) { return op == BinaryOp::And || op == BinaryOp::Or; }

const char* op_symbol(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "-";
    case UnaryOp::Not: return "not ";
    case UnaryOp::BitNot: return "~";
  }
  return "?";
}

const char* for_kind_name(ForKind kind) {
  switch (kind) {
    case ForKind::Serial: return "serial";
    case ForKind::Parallel: return "parallel";
    case ForKind::Unrolled: return "unrolled";
    case ForKind::Vectorized: return "vectorized";
    case ForKind::Pipelined: return "pipelined";
  }
  return "?";
}

const char* reduce_kind_name(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum: return "sum";
    case ReduceKind::Max: return "max";
    case ReduceKind::Min: return "min";
    case ReduceKind::AbsSum: return "abssum";
    case ReduceKind::AbsMax: return "absmax";
  }
  return "?";
}

Buffer make_buffer(std::string name, DType dtype, std::vector<Expr> shape, Scope scope, SourceLoc loc) {
  return std::make_shared<const BufferNode>(BufferNode{std::move(name), dtype, std::move(shape), scope, std::move(loc)});
}

Region full_region(const Buffer& buffer, SourceLoc loc) {
  Region region{buffer, {}, std::move(loc)};
  for (const Expr& extent : buffer->shape) region.ranges.push_back({make_int(0, extent->dtype), extent});
  return region;
}

Expr make_int(int64_t value, DType dtype, SourceLoc loc) { return std::make_shared<const IntImmNode>(dtype, value, std::move(loc)); }
Expr make_bool(bool value, SourceLoc loc) { return make_int(value ? 1 : 0, DType::Bool, std::move(loc)); }
Expr make_float(double value, DType dtype, SourceLoc loc) { return std::make_shared<const FloatImmNode>(dtype, value, std::move(loc)); }
Var make_var(std::string name, DType dtype, SourceLoc loc) { return std::make_shared<const VarNode>(dtype, std::move(name), std::move(loc)); }

Expr make_binary(BinaryOp op, DType dtype, Expr a, Expr b, SourceLoc loc) {
  RT_ICHECK(a && b, "binary ", op_symbol(op), " needs two operands");
  return std::make_shared<const BinaryNode>(dtype, op, std::move(a), std::move(b), std::move(loc));
}
Expr make_unary(UnaryOp op, DType dtype, Expr a, SourceLoc loc) {
  RT_ICHECK(a);
  return std::make_shared<const UnaryNode>(dtype, op, std::move(a), std::move(loc));
}
Expr make_select(DType dtype, Expr cond, Expr t, Expr f, SourceLoc loc) {
  RT_ICHECK(cond && t && f);
  return std::make_shared<const SelectNode>(dtype, std::move(cond), std::move(t), std::move(f), std::move(loc));
}
Expr make_cast(DType dtype, Expr value, SourceLoc loc) {
  RT_ICHECK(value);
  if (value->dtype == dtype) return value;
  return std::make_shared<const CastNode>(dtype, std::move(value), std::move(loc));
}
Expr make_call(DType dtype, CallKind kind, std::string name, std::vector<Expr> args, SourceLoc loc) {
  return std::make_shared<const CallNode>(dtype, kind, std::move(name), std::move(args), std::move(loc));
}
Expr make_load(Buffer buffer, std::vector<Expr> indices, SourceLoc loc) {
  RT_ICHECK(buffer && indices.size() == buffer->shape.size(), "load of ", buffer ? buffer->name : "?", " with ",
            indices.size(), " indices");
  return std::make_shared<const BufferLoadNode>(std::move(buffer), std::move(indices), std::move(loc));
}

Stmt make_store(Buffer buffer, std::vector<Expr> indices, Expr value, SourceLoc loc, bool atomic_add) {
  RT_ICHECK(buffer && value && indices.size() == buffer->shape.size(), "store to ", buffer ? buffer->name : "?");
  return std::make_shared<const BufferStoreNode>(std::move(buffer), std::move(indices), std::move(value), atomic_add, std::move(loc));
}
Stmt make_let(Var var, Expr value, Stmt body, SourceLoc loc) {
  return std::make_shared<const LetStmtNode>(std::move(var), std::move(value), std::move(body), std::move(loc));
}
Stmt make_for(Var var, Expr min, Expr extent, ForKind kind, Stmt body, SourceLoc loc, Pipelining pipelining) {
  return std::make_shared<const ForNode>(std::move(var), std::move(min), std::move(extent), kind, std::move(pipelining), std::move(body), std::move(loc));
}
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case, SourceLoc loc) {
  return std::make_shared<const IfThenElseNode>(std::move(cond), std::move(then_case), std::move(else_case), std::move(loc));
}
Stmt make_seq(std::vector<Stmt> stmts, SourceLoc loc) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s) continue;
    if (const SeqNode* seq = as<SeqNode>(s)) {
      flat.insert(flat.end(), seq->stmts.begin(), seq->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  return std::make_shared<const SeqNode>(std::move(flat), std::move(loc));
}
Stmt make_allocate(Buffer buffer, Stmt body, SourceLoc loc) {
  return std::make_shared<const AllocateNode>(std::move(buffer), std::move(body), std::move(loc));
}
Stmt make_evaluate(Expr value, SourceLoc loc) { return std::make_shared<const EvaluateNode>(std::move(value), std::move(loc)); }

bool is_no_op(const Stmt& stmt) {
  const SeqNode* seq = as<SeqNode>(stmt);
  return !stmt || (seq && seq->stmts.empty());
}

}  // namespace tilelang::ir
