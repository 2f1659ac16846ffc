#include "codegen/codegen_c.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>

#include "rt/error.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/ir/op.h"

namespace tilelang::codegen {
namespace {

// Never handed out as generated names: C++ and CUDA keywords and the names our prologues use.
const std::set<std::string> kReserved = {
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const", "constexpr",
    "continue", "default", "delete", "do", "double", "else", "enum", "explicit", "extern", "false", "float", "for", "friend",
    "goto", "if", "inline", "int", "long", "namespace", "new", "not", "or", "private", "protected", "public", "register",
    "return", "short", "signed", "sizeof", "static", "struct", "switch", "template", "this", "throw", "true", "try", "typedef",
    "union", "unsigned", "using", "virtual", "void", "volatile", "while", "xor", "std", "tl", "buffers", "dims", "num_threads", "failure",
    "main", "abs", "min", "max", "exp", "log", "sqrt", "pow", "floor", "ceil", "round", "int8_t", "int32_t", "int64_t", "uint8_t",
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "tl_smem"};

}  // namespace

const char* storage_type(ir::DType t) {
  switch (t) {
    case ir::DType::Bool: return "bool";
    case ir::DType::I8: return "int8_t";
    case ir::DType::U8: return "uint8_t";
    case ir::DType::I32: return "int32_t";
    case ir::DType::I64: return "int64_t";
    case ir::DType::F16: return "tl::half_t";
    case ir::DType::BF16: return "tl::bfloat16_t";
    case ir::DType::F32: return "float";
    case ir::DType::F64: return "double";
    case ir::DType::F8E4M3: return "tl::float8_e4m3_t";
    case ir::DType::F8E5M2: return "tl::float8_e5m2_t";
    case ir::DType::F4E2M1: return "uint8_t";  // packed pairs
    case ir::DType::UE8M0: return "tl::ue8m0_t";
  }
  return "?";
}

const char* format_type(ir::DType t) { return t == ir::DType::F4E2M1 ? "tl::float4_e2m1_t" : storage_type(t); }

const char* value_type(ir::DType t) {
  if (t == ir::DType::F64) return "double";
  if (rt::is_float(t)) return "float";
  return storage_type(t);
}

bool converts(ir::DType t) { return rt::is_float(t) && t != ir::DType::F32 && t != ir::DType::F64; }

std::string float_literal(double v, ir::DType t) {
  bool f64 = t == ir::DType::F64;
  // A float literal denotes the float the value rounds to: past FLT_MAX (and half an ulp) that is an
  // infinity, written as one (1e+308f is "out of range" to NVRTC).
  if (!f64 && std::isfinite(v) && std::fabs(v) >= 0x1.ffffffp127) v = std::copysign(HUGE_VAL, v);
  // Through tl/device/scalar.h: the <cmath> macros do not exist under NVRTC.
  if (std::isinf(v)) return rt::str("(", v > 0 ? "" : "-", f64 ? "double(tl::float_inf())" : "tl::float_inf()", ")");
  if (std::isnan(v)) return f64 ? "double(tl::float_nan())" : "tl::float_nan()";
  char buf[64];
  std::snprintf(buf, sizeof buf, f64 ? "%.17g" : "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return f64 ? s : s + "f";
}

CodegenC::CodegenC() : names_(kReserved) {}

std::vector<ir::Var> CodegenC::dim_vars_of(const ir::PrimFunc& func) {
  std::vector<ir::Var> out;
  std::set<const ir::ExprNode*> seen;
  for (const ir::Param& p : func.params)
    for (const ir::Expr& d : p.buffer->shape)
      ir::for_each_expr(d, [&](const ir::Expr& e) {
        if (e->kind == ir::NodeKind::Var && seen.insert(e.get()).second) out.push_back(std::static_pointer_cast<const ir::VarNode>(e));
      });
  return out;
}

std::string CodegenC::expr(const ir::Expr& e) {
  switch (e->kind) {
    case ir::NodeKind::IntImm: {
      int64_t v = ir::as<ir::IntImmNode>(e)->value;
      if (e->dtype == ir::DType::Bool) return v ? "true" : "false";
      if (e->dtype == ir::DType::I64) return v >= INT32_MIN && v <= INT32_MAX ? std::to_string(v) : rt::str("int64_t(", v, "LL)");
      if (e->dtype == ir::DType::I32) return v == INT32_MIN ? "(-2147483647 - 1)" : std::to_string(v);
      return rt::str(storage_type(e->dtype), "(", v, ")");
    }
    case ir::NodeKind::FloatImm: return float_literal(ir::as<ir::FloatImmNode>(e)->value, e->dtype);
    case ir::NodeKind::Var: return var(static_cast<const ir::VarNode*>(e.get()));
    case ir::NodeKind::Binary: return binary(*ir::as<ir::BinaryNode>(e));
    case ir::NodeKind::Unary: {
      const auto* u = ir::as<ir::UnaryNode>(e);
      const char* op = u->op == ir::UnaryOp::Neg ? "-" : u->op == ir::UnaryOp::Not ? "!" : "~";
      return rt::str("(", op, expr(u->a), ")");
    }
    case ir::NodeKind::Select: {
      const auto* s = ir::as<ir::SelectNode>(e);
      return rt::str("(", expr(s->cond), " ? ", expr(s->t), " : ", expr(s->f), ")");
    }
    case ir::NodeKind::Cast: {
      const auto* c = ir::as<ir::CastNode>(e);
      std::string v = expr(c->value);
      if (converts(e->dtype))
        return rt::str("tl::round_to<", format_type(e->dtype), ">(", narrowing_source(c->value, v).value_or("static_cast<float>(" + v + ")"), ")");
      // Float to integer saturates (NaN: 0) on every target alike (tl/device/numeric.h).
      if (rt::is_int(e->dtype) && rt::is_float(c->value->dtype)) return rt::str("tl::trunc_to<", value_type(e->dtype), ">(", v, ")");
      return rt::str("static_cast<", value_type(e->dtype), ">(", v, ")");
    }
    case ir::NodeKind::Call: return call(*ir::as<ir::CallNode>(e));
    case ir::NodeKind::BufferLoad: {
      const auto* l = ir::as<ir::BufferLoadNode>(e);
      if (is_scalar_var(l->buffer)) return converts(l->buffer->dtype) ? rt::str("tl::to_float(", buffer(l->buffer), ")") : buffer(l->buffer);
      if (l->buffer->dtype == ir::DType::F4E2M1) return rt::str("tl::load_fp4(", buffer(l->buffer), ", ", flat(l->buffer, l->indices), ")");
      std::string ref = rt::str(buffer(l->buffer), "[", flat(l->buffer, l->indices), "]");
      return converts(l->buffer->dtype) ? rt::str("tl::to_float(", ref, ")") : ref;
    }
    default: RT_UNREACHABLE("statement in expression");
  }
}

std::string CodegenC::binary(const ir::BinaryNode& b) {
  std::string x = expr(b.a), y = expr(b.b);
  const char* vt = value_type(b.a->dtype);
  // By a power of two, Python's // and % are an arithmetic shift and a mask, for negative values
  // too (two's complement): plain operators the C++ and CUDA compilers fold and combine, where the
  // generic floordiv/floormod must test signs (index arithmetic is full of these).
  if ((b.op == ir::BinaryOp::FloorDiv || b.op == ir::BinaryOp::FloorMod) && rt::is_int(b.a->dtype) &&
      rt::bits(b.a->dtype) >= 32) {
    if (auto c = ir::as_const_int(b.b); c && *c > 0 && (*c & (*c - 1)) == 0) {
      int shift = 0;
      while ((int64_t(1) << shift) < *c) ++shift;
      return b.op == ir::BinaryOp::FloorDiv ? rt::str("(", x, " >> ", shift, ")") : rt::str("(", x, " & ", *c - 1, ")");
    }
  }
  // A shift by a run-time amount goes through the helpers, which define the amounts C++ and CUDA
  // leave undefined; a constant amount is in range (verify checks it) and keeps the plain operator.
  if ((b.op == ir::BinaryOp::Shl || b.op == ir::BinaryOp::Shr) && !ir::as_const_int(b.b))
    return rt::str(b.op == ir::BinaryOp::Shl ? "tl::shl(" : "tl::shr(", x, ", ", y, ")");
  switch (b.op) {
    case ir::BinaryOp::Min: return min_max(false, x, y, b.a->dtype);
    case ir::BinaryOp::Max: return min_max(true, x, y, b.a->dtype);
    case ir::BinaryOp::Pow: return math("pow", {x, y}, b.dtype);
    // Floats take the float/double overloads (the template is for integers: it uses %).
    case ir::BinaryOp::FloorDiv:
      if (rt::is_float(b.a->dtype)) return rt::str("tl::floordiv(", vt, "(", x, "), ", vt, "(", y, "))");
      return rt::str("tl::floordiv<", vt, ">(", x, ", ", ir::as_const_int(b.b) ? y : int_divisor(y, b), ")");
    case ir::BinaryOp::FloorMod:
      if (rt::is_float(b.a->dtype)) return rt::str("tl::floormod(", vt, "(", x, "), ", vt, "(", y, "))");
      return rt::str("tl::floormod<", vt, ">(", x, ", ", ir::as_const_int(b.b) ? y : int_divisor(y, b), ")");
    case ir::BinaryOp::Div:  // on integers only from T.truncdiv / T.truncmod
      if (rt::is_int(b.a->dtype)) return rt::str("tl::truncdiv<", vt, ">(", x, ", ", ir::as_const_int(b.b) ? y : int_divisor(y, b), ")");
      return rt::str("(", x, " / ", y, ")");
    case ir::BinaryOp::And: return rt::str("(", x, " && ", y, ")");
    case ir::BinaryOp::Or: return rt::str("(", x, " || ", y, ")");
    default: return rt::str("(", x, " ", ir::op_symbol(b.op), " ", y, ")");
  }
}

std::string CodegenC::call(const ir::CallNode& c) {
  if (c.name == "address_of" && c.call_kind == ir::CallKind::Intrinsic) {
    const auto* l = ir::as<ir::BufferLoadNode>(c.args.at(0));
    RT_ICHECK(l, "address_of needs a load");
    return rt::str("(&", buffer(l->buffer), "[", flat(l->buffer, l->indices), "])");
  }
  std::vector<std::string> a;
  for (const ir::Expr& x : c.args) a.push_back(expr(x));
  if (c.call_kind == ir::CallKind::Extern) {
    user_code_.push_back(c.loc);
    std::string s = c.name + "(";
    for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
    return s + ")";
  }
  return math(c.name, a, c.dtype);
}

std::string CodegenC::flat(const ir::Buffer& b, const std::vector<ir::Expr>& idx) {
  if (idx.empty()) return "0";
  ir::Expr offset = ir::cast(ir::DType::I64, idx[0]);
  for (size_t d = 1; d < idx.size(); ++d)
    offset = ir::add(ir::mul(offset, ir::cast(ir::DType::I64, b->shape[d])), ir::cast(ir::DType::I64, idx[d]));
  return expr(analysis::canonical(offset));
}

ir::Expr CodegenC::element_count(const ir::Buffer& b) {
  ir::Expr n = ir::make_int(1, ir::DType::I64);
  for (const ir::Expr& d : b->shape) n = ir::mul(n, ir::cast(ir::DType::I64, d));
  return n;
}

std::optional<int64_t> CodegenC::constant_element_count(const ir::Buffer& b, const SourceLoc& loc) {
  int64_t n = 1;
  bool overflow = false;
  std::string product;  // "2 x 3", for the error
  for (const ir::Expr& d : b->shape) {
    auto c = ir::as_const_int(d);
    if (!c) return std::nullopt;
    overflow |= __builtin_mul_overflow(n, *c, &n);
    product += rt::str(product.empty() ? "" : " x ", *c);
  }
  if (overflow) error_at(loc, rt::str(describe(b), " has ", product, " elements, more than int64 holds"));
  return n;
}

std::string CodegenC::describe(const ir::Buffer& b) {
  if (b->scope == ir::Scope::Global) return rt::str("tensor '", b->name, "'");
  // A fragment the CUDA lowering keeps in registers is local with a layout: still the user's fragment.
  return rt::str(b->layout ? "fragment" : ir::scope_name(b->scope), " tile '", b->name, "'");
}

void CodegenC::visit(const ir::BufferStoreNode& n) {
  if (n.atomic_add) {
    if (n.buffer->dtype == ir::DType::F4E2M1) error_at(n.loc, "atomic_add into float4 tensors is not supported");
    line(atomic_add(rt::str("&", buffer(n.buffer), "[", flat(n.buffer, n.indices), "]"), expr(n.value), n.buffer->dtype) + ";");
    return;
  }
  if (n.buffer->dtype == ir::DType::F4E2M1) {
    const std::string v = expr(n.value);
    line(rt::str("tl::store_fp4(", buffer(n.buffer), ", ", flat(n.buffer, n.indices), ", ", narrowing_source(n.value, v).value_or(v), ");"));
    return;
  }
  std::string ref = is_scalar_var(n.buffer) ? buffer(n.buffer) : rt::str(buffer(n.buffer), "[", flat(n.buffer, n.indices), "]");
  line(rt::str(ref, " = ", stored_value(n.buffer, n.value), ";"));
}

std::string CodegenC::stored_value(const ir::Buffer& b, const ir::Expr& value) {
  if (!converts(b->dtype)) return expr(value);
  // Storing rounds to the buffer's format: a cast to it before the store is redundant, and an
  // element of the same format is copied as is.
  ir::Expr v = value;
  if (const auto* c = ir::as<ir::CastNode>(v); c && c->dtype == b->dtype) v = c->value;
  const auto* l = ir::as<ir::BufferLoadNode>(v);
  if (l && l->buffer->dtype == b->dtype && !is_scalar_var(l->buffer)) return rt::str(buffer(l->buffer), "[", flat(l->buffer, l->indices), "]");
  std::string code = expr(v);
  return rt::str("tl::from_float<", storage_type(b->dtype), ">(", narrowing_source(v, code).value_or(code), ")");
}

// `code`, the value of `value`, as the float a narrow float format rounds from, where converting it
// to float may round: float64 and 32/64-bit integers go through a float rounded to odd
// (tl::to_float_odd), which makes the narrow rounding the correctly rounded one (a float rounded to
// nearest first rounded twice). Other types convert to float exactly: nullopt.
std::optional<std::string> CodegenC::narrowing_source(const ir::Expr& value, const std::string& code) {
  switch (value->dtype) {
    case ir::DType::F64: return rt::str("tl::to_float_odd(", code, ")");
    case ir::DType::I32:
    case ir::DType::I64: return rt::str("tl::to_float_odd(static_cast<int64_t>(", code, "))");
    default: return std::nullopt;
  }
}

void CodegenC::visit(const ir::LetStmtNode& n) {
  line(rt::str("const ", value_type(n.var->dtype), " ", var(n.var.get()), " = ", expr(n.value), ";"));
  visit_stmt(n.body);
}

void CodegenC::visit(const ir::ForNode& n) {
  std::string v = var(n.var.get());
  const char* t = value_type(n.var->dtype);
  // `for (T v = lb; v < ub; ++v)` with a loop-invariant bound (OpenMP's canonical form): a
  // computed bound goes into a constant first.
  std::string bound;
  auto lo = ir::as_const_int(n.min), ext = ir::as_const_int(n.extent);
  if (lo && ext) {
    bound = std::to_string(*lo + *ext);
  } else {
    bound = names_.name(&n, v + "_end");
    line(rt::str("const ", t, " ", bound, " = ", expr(n.min), " + ", expr(n.extent), ";"));
  }
  loop_annotation(n);
  line(rt::str("for (", t, " ", v, " = ", expr(n.min), "; ", v, " < ", bound, "; ++", v, ") {"));
  loop_body(n);
  line("}");
}

void CodegenC::visit(const ir::IfThenElseNode& n) {
  line(rt::str("if (", expr(n.cond), ") {"));
  nested(n.then_case);
  if (n.else_case) {
    line("} else {");
    nested(n.else_case);
  }
  line("}");
}

void CodegenC::visit(const ir::EvaluateNode& n) { line(expr(n.value) + ";"); }

void CodegenC::visit(const ir::InlineCodeNode& n) {
  if (!n.target.empty() && n.target != target_name())
    error_at(n.loc, rt::str("this T.inline_code is for target '", n.target, "' and cannot run on the ", target_name()));
  // Replace each {name} by its argument; a {name} without an argument is the user's mistake.
  static const std::regex placeholder(R"(\{([A-Za-z_][A-Za-z0-9_]*)\})");
  std::string code, rest = n.code;
  std::smatch m;
  while (std::regex_search(rest, m, placeholder)) {
    auto arg = std::find_if(n.args.begin(), n.args.end(), [&](const auto& a) { return a.first == m[1].str(); });
    if (arg == n.args.end()) error_at(n.loc, rt::str("T.inline_code has no argument named '", m[1].str(), "' for {", m[1].str(), "}"));
    code += m.prefix().str() + expr(arg->second);
    rest = m.suffix().str();
  }
  code += rest;
  user_code_.push_back(n.loc);
  line(rt::str("{  // T.inline_code at ", n.loc.to_string()));
  body_ << code << "\n";
  line("}");
}

void CodegenC::visit(const ir::CopyNode& n) { RT_UNREACHABLE("copy at ", n.loc.to_string(), " was not lowered"); }
void CodegenC::visit(const ir::FillNode& n) { RT_UNREACHABLE("fill at ", n.loc.to_string(), " was not lowered"); }
void CodegenC::visit(const ir::ReduceNode& n) { RT_UNREACHABLE("reduce at ", n.loc.to_string(), " was not lowered"); }

}  // namespace tilelang::codegen
