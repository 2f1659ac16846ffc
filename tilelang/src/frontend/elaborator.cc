#include "frontend/elaborator.h"
#include "frontend/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "rt/error.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/printer.h"
#include "tl/device/scalar.h"

namespace tilelang::frontend {
namespace {

constexpr int kMaxCallDepth = 200;
constexpr int64_t kMaxInterpretedIterations = 1 << 20;

using ast::ExprKind;
using ast::StmtKind;

// Decorator names, resolved by value: `tile_kernel`, `T.prim_func`, `T.macro`, `tilelang.jit(...)`.
FunctionV::Decoration decoration_of(const Value& decorator) {
  if (const BuiltinV* b = decorator.get_if<BuiltinV>()) {
    if (b->name == "tile_kernel") return FunctionV::Decoration::TileKernel;
    if (b->name == "T.prim_func") return FunctionV::Decoration::PrimFunc;
    if (b->name == "T.macro") return FunctionV::Decoration::Macro;
  }
  return FunctionV::Decoration::None;
}

// Collects the names a function body assigns, counting each assignment; nested defs are skipped.
void count_assignments(const ast::Body& body, std::map<std::string, int>& counts) {
  std::function<void(const ast::Expr&, int)> target = [&](const ast::Expr& t, int weight) {
    if (t.kind == ExprKind::Name) counts[t.as<ast::NameExpr>().id] += weight;
    if (t.kind == ExprKind::Tuple)
      for (const auto& e : t.as<ast::TupleExpr>().elts) target(*e, weight);
    if (t.kind == ExprKind::List)
      for (const auto& e : t.as<ast::ListExpr>().elts) target(*e, weight);
  };
  for (const ast::StmtPtr& s : body) {
    switch (s->kind) {
      case StmtKind::Assign:
        for (const auto& t : s->as<ast::AssignStmt>().targets) target(*t, 1);
        break;
      case StmtKind::AnnAssign:
        if (s->as<ast::AnnAssignStmt>().value) target(*s->as<ast::AnnAssignStmt>().target, 1);
        break;
      case StmtKind::AugAssign: target(*s->as<ast::AugAssignStmt>().target, 2); break;  // always mutable
      case StmtKind::For: count_assignments(s->as<ast::ForStmt>().body, counts); break;
      case StmtKind::While: count_assignments(s->as<ast::WhileStmt>().body, counts); break;
      case StmtKind::If:
        count_assignments(s->as<ast::IfStmt>().body, counts);
        count_assignments(s->as<ast::IfStmt>().orelse, counts);
        break;
      case StmtKind::With: count_assignments(s->as<ast::WithStmt>().body, counts); break;
      default: break;
    }
  }
}

bool defines_prim_func(const ast::Body& body) {
  for (const ast::StmtPtr& s : body) {
    if (s->kind == StmtKind::FunctionDef) {
      for (const auto& d : s->as<ast::FunctionDef>().decorators) {
        std::string text = ast::print(*d);
        if (text == "T.prim_func" || text.ends_with(".prim_func") || text == "prim_func") return true;
      }
      if (defines_prim_func(s->as<ast::FunctionDef>().body)) return true;
    }
    if (s->kind == StmtKind::If && (defines_prim_func(s->as<ast::IfStmt>().body) || defines_prim_func(s->as<ast::IfStmt>().orelse)))
      return true;
  }
  return false;
}

std::string decorator_text(const ast::Expr& d) {
  const ast::Expr* e = &d;
  if (e->kind == ExprKind::Call) e = e->as<ast::CallExpr>().func.get();
  return ast::print(*e);
}

bool is_number(const Value& v) { return v.is<int64_t>() || v.is<double>() || v.is<bool>(); }

double as_double(const Value& v) {
  if (auto i = v.get_if<int64_t>()) return static_cast<double>(*i);
  if (auto b = v.get_if<bool>()) return *b ? 1.0 : 0.0;
  return v.get<double>();
}

int64_t as_int(const Value& v) {
  if (auto b = v.get_if<bool>()) return *b;
  return v.get<int64_t>();
}

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

int64_t int_op(ast::BinOpKind op, int64_t x, int64_t y, const SourceLoc& loc) {
  auto overflow = [&]() {
    error_at(loc, rt::str("integer overflow: ", x, " ", ast::symbol(op), " ", y,
                          " does not fit in 64 bits (kernel integers are at most 64-bit: 9223372036854775807)"));
  };
  int64_t r = 0;
  switch (op) {
    case ast::BinOpKind::Add:
      if (__builtin_add_overflow(x, y, &r)) overflow();
      return r;
    case ast::BinOpKind::Sub:
      if (__builtin_sub_overflow(x, y, &r)) overflow();
      return r;
    case ast::BinOpKind::Mul:
      if (__builtin_mul_overflow(x, y, &r)) overflow();
      return r;
    case ast::BinOpKind::FloorDiv:
      if (y == 0) error_at(loc, "integer division by zero");
      if (y == -1 && x == std::numeric_limits<int64_t>::min()) overflow();
      return py_floordiv(x, y);
    case ast::BinOpKind::Mod:
      if (y == 0) error_at(loc, "integer modulo by zero");
      if (y == -1) return 0;
      r = x % y;  // the remainder never overflows; x - (x // y) * y may in between (x = INT64_MIN)
      return r != 0 && (r < 0) != (y < 0) ? r + y : r;
    case ast::BinOpKind::Pow: {
      RT_ICHECK(y >= 0, "int_op: negative exponent");  // Python gives a float; the caller computes that
      int64_t result = 1, base = x;
      for (int64_t e = y;;) {  // by squaring: the exponent may be large (1 ** 10**18)
        if ((e & 1) && __builtin_mul_overflow(result, base, &result)) overflow();
        e >>= 1;
        if (e == 0) return result;
        if (__builtin_mul_overflow(base, base, &base)) overflow();
      }
    }
    case ast::BinOpKind::LShift:
      if (y < 0) error_at(loc, rt::str("negative shift count ", y));
      if (x == 0) return 0;
      if (y >= 63 || (x << y) >> y != x) overflow();
      return x << y;
    case ast::BinOpKind::RShift:
      if (y < 0) error_at(loc, rt::str("negative shift count ", y));
      return y >= 63 ? (x < 0 ? -1 : 0) : x >> y;
    case ast::BinOpKind::BitOr: return x | y;
    case ast::BinOpKind::BitXor: return x ^ y;
    case ast::BinOpKind::BitAnd: return x & y;
    default: break;
  }
  RT_UNREACHABLE("int_op: ", ast::symbol(op));
}

int64_t float_to_int(double d, const SourceLoc& loc, const std::string& fn) {
  if (std::isnan(d) || std::isinf(d)) error_at(loc, rt::str(fn, "() of ", d, ": cannot convert ", std::isnan(d) ? "NaN" : "infinity", " to an integer"));
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
    error_at(loc, rt::str(fn, "() of ", d, ": the value does not fit in 64 bits (kernel integers are at most 64-bit: 9223372036854775807)"));
  return static_cast<int64_t>(d);
}

int64_t int_neg(int64_t x, const SourceLoc& loc, const char* fn) {
  if (x == std::numeric_limits<int64_t>::min())
    error_at(loc, rt::str("integer overflow: ", fn, "(", x, ") does not fit in 64 bits (kernel integers are at most 64-bit: 9223372036854775807)"));
  return -x;
}

namespace {

ir::BinaryOp to_ir_op(ast::BinOpKind op) {
  switch (op) {
    case ast::BinOpKind::Add: return ir::BinaryOp::Add;
    case ast::BinOpKind::Sub: return ir::BinaryOp::Sub;
    case ast::BinOpKind::Mul: return ir::BinaryOp::Mul;
    case ast::BinOpKind::Div: return ir::BinaryOp::Div;
    case ast::BinOpKind::FloorDiv: return ir::BinaryOp::FloorDiv;
    case ast::BinOpKind::Mod: return ir::BinaryOp::FloorMod;
    case ast::BinOpKind::Pow: return ir::BinaryOp::Pow;
    case ast::BinOpKind::LShift: return ir::BinaryOp::Shl;
    case ast::BinOpKind::RShift: return ir::BinaryOp::Shr;
    case ast::BinOpKind::BitOr: return ir::BinaryOp::BitOr;
    case ast::BinOpKind::BitXor: return ir::BinaryOp::BitXor;
    case ast::BinOpKind::BitAnd: return ir::BinaryOp::BitAnd;
    case ast::BinOpKind::MatMul: break;
  }
  RT_UNREACHABLE("operator without an IR form");
}

ir::BinaryOp to_ir_cmp(ast::CmpOpKind op) {
  switch (op) {
    case ast::CmpOpKind::Eq: return ir::BinaryOp::EQ;
    case ast::CmpOpKind::NotEq: return ir::BinaryOp::NE;
    case ast::CmpOpKind::Lt: return ir::BinaryOp::LT;
    case ast::CmpOpKind::LtE: return ir::BinaryOp::LE;
    case ast::CmpOpKind::Gt: return ir::BinaryOp::GT;
    case ast::CmpOpKind::GtE: return ir::BinaryOp::GE;
    default: RT_UNREACHABLE("comparison without an IR form");
  }
}

}  // namespace

// ---------------------------------------------------------------- kernels in a file

std::vector<KernelInfo> find_kernels(const ast::Module& module) {
  std::vector<KernelInfo> out;
  for (const ast::StmtPtr& s : module.body) {
    if (s->kind != StmtKind::FunctionDef) continue;
    const auto& def = s->as<ast::FunctionDef>();
    KernelInfo info{def.name, KernelInfo::Kind::Factory, {}, {}, def.loc};
    bool is_kernel = false;
    for (const auto& d : def.decorators) {
      std::string text = decorator_text(*d);
      if (text == "tile_kernel") info.kind = KernelInfo::Kind::TileKernel, is_kernel = true;
      if (text == "T.prim_func" || text.ends_with(".prim_func") || text == "prim_func") info.kind = KernelInfo::Kind::PrimFunc, is_kernel = true;
    }
    if (!is_kernel && !defines_prim_func(def.body)) continue;
    for (const ast::Arg& a : def.args) {
      info.params.push_back(a.name);
      info.param_has_default.push_back(a.default_value != nullptr);
    }
    out.push_back(std::move(info));
  }
  return out;
}

const KernelInfo& select_kernel(const std::vector<KernelInfo>& kernels, const std::string& name, const ast::Module& module) {
  std::string names;
  for (const KernelInfo& k : kernels) names += (names.empty() ? "" : ", ") + k.name;
  if (kernels.empty())
    rt::throw_user_error(rt::str(module.file->name(), ": error: no kernel found: define a function decorated with @tile_kernel or "
                                 "@T.prim_func, or a factory function that returns a @T.prim_func"));
  if (name.empty()) {
    if (kernels.size() == 1) return kernels[0];
    rt::throw_user_error(rt::str(module.file->name(), ": error: the file defines several kernels (", names, "); pick one with --kernel NAME"));
  }
  for (const KernelInfo& k : kernels)
    if (k.name == name) return k;
  rt::throw_user_error(rt::str(module.file->name(), ": error: no kernel named '", name, "'; the file defines: ", names));
}

ir::PrimFunc elaborate(std::shared_ptr<const ast::Module> module, const ElaborateRequest& request) {
  return Elaborator(std::move(module)).build(request);
}

// ---------------------------------------------------------------- set-up

Elaborator::Elaborator(std::shared_ptr<const ast::Module> module) : module_(std::move(module)), globals_(std::make_shared<Env>()) {
  // The names every file sees without importing anything: Python's builtins, the seed dialect's
  // names, and `T`/`tilelang` so that files without the usual imports work too.
  for (const char* name : {"range", "len", "min", "max", "abs", "int", "float", "bool", "print", "tile_kernel", "zeros",
                           "zeros_like", "empty", "empty_like", "full", "ones", "isinstance", "tuple", "list", "sum",
                           "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "floor", "ceil", "erf", "sin", "cos"})
    globals_->set(name, BuiltinV{name});
  globals_->set("Tensor", BuiltinV{"Tensor"});
  for (const char* name : {"FP16", "FP32", "FP64", "BF16", "FP8", "FP8_E4M3", "FP8_E5M2", "FP4", "INT8", "UINT8", "INT32", "INT64", "BOOL"})
    globals_->set(name, DTypeV{*dtype_from_name(name)});
  globals_->set("T", ModuleV{"T"});
  globals_->set("tilelang", ModuleV{"tilelang"});
  globals_->set("__name__", std::string("tilelang_kernel"));
  globals_->set("None", NoneV{});
}

void Elaborator::run_module() {
  Frame top;
  top.env = globals_;
  frames_.push_back(&top);
  Flow flow = exec_block(module_->body);
  frames_.pop_back();
  if (flow != Flow::Normal) rt::throw_user_error(rt::str(module_->file->name(), ": error: 'return', 'break' or 'continue' outside a function"));
}

ir::PrimFunc Elaborator::build(const ElaborateRequest& request) {
  std::vector<KernelInfo> kernels = find_kernels(*module_);
  const KernelInfo& info = select_kernel(kernels, request.kernel, *module_);
  run_module();
  const Value* v = globals_->lookup(info.name);
  const FunctionV* f = v ? v->get_if<FunctionV>() : nullptr;
  if (!f) error_at(info.loc, rt::str("'", info.name, "' is not a function after running the file (it was reassigned)"));

  if (info.kind == KernelInfo::Kind::Factory) {
    // A factory: its arguments come from the request; its result must be a kernel.
    Args args;
    std::set<std::string> used;
    std::string missing;
    for (size_t i = 0; i < f->def->args.size(); ++i) {
      const ast::Arg& a = f->def->args[i];
      auto it = request.params.find(a.name);
      if (it != request.params.end()) {
        args.keywords.push_back({a.name, parse_param(a.name, it->second, a.loc)});
        args.keyword_locs.push_back(a.loc);
        used.insert(a.name);
      } else if (!a.default_value) {
        missing += rt::str(" --param ", a.name, "=...");
      }
    }
    if (!missing.empty()) error_at(f->def->loc, rt::str("kernel factory '", info.name, "' needs values for its arguments:", missing));
    for (const auto& [name, text] : request.params)
      if (!used.count(name)) error_at(f->def->loc, rt::str("kernel factory '", info.name, "' has no argument '", name, "' (from --param ", name, "=", text, ")"));
    Value result = call_function(*f, std::move(args), f->def->loc);
    const PrimFuncV* pf = result.get_if<PrimFuncV>();
    if (!pf) error_at(f->def->loc, rt::str("kernel factory '", info.name, "' returned ", type_name(result), ", not a @T.prim_func kernel"));
    ir::PrimFunc func = *pf->func;
    func.name = info.name;
    return func;
  }
  if (!request.params.empty() && info.kind == KernelInfo::Kind::PrimFunc)
    error_at(f->def->loc, rt::str("'", info.name, "' is a @T.prim_func with fixed shapes; --param values apply to factory functions only"));
  if (info.kind == KernelInfo::Kind::TileKernel) return stage_kernel(*f, info.name, &request.inputs, f->def->loc);
  return stage_kernel(*f, info.name, nullptr, f->def->loc);
}

Value Elaborator::parse_param(const std::string& name, const std::string& text, const SourceLoc& loc) {
  // A Python literal (1024, 0.5, 'float16', True, (1, 2)) or a bare word taken as a string (bfloat16).
  auto file = std::make_shared<SourceFile>(rt::str("--param ", name), "__v = " + text + "\n");
  try {
    auto parsed = ast::parse(file);
    if (parsed->body.size() == 1 && parsed->body[0]->kind == StmtKind::Assign) {
      const ast::Expr& e = *parsed->body[0]->as<ast::AssignStmt>().value;
      std::function<bool(const ast::Expr&)> literal = [&](const ast::Expr& x) {
        switch (x.kind) {
          case ExprKind::Int: case ExprKind::Float: case ExprKind::Str: case ExprKind::Bool: case ExprKind::None: return true;
          case ExprKind::UnaryOp: return x.as<ast::UnaryOpExpr>().op == ast::UnaryOpKind::Neg && literal(*x.as<ast::UnaryOpExpr>().operand);
          case ExprKind::Tuple:
            return std::all_of(x.as<ast::TupleExpr>().elts.begin(), x.as<ast::TupleExpr>().elts.end(), [&](const auto& p) { return literal(*p); });
          case ExprKind::List:
            return std::all_of(x.as<ast::ListExpr>().elts.begin(), x.as<ast::ListExpr>().elts.end(), [&](const auto& p) { return literal(*p); });
          default: return false;
        }
      };
      if (literal(e)) return eval(e);
    }
  } catch (const rt::Error&) {
  }
  return text;
}

// ---------------------------------------------------------------- statements

Elaborator::Flow Elaborator::exec_block(const ast::Body& body) {
  for (const ast::StmtPtr& s : body) {
    Flow flow = exec(*s);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Elaborator::Flow Elaborator::exec(const ast::Stmt& s) {
  switch (s.kind) {
    case StmtKind::FunctionDef: {
      auto def = std::static_pointer_cast<const ast::FunctionDef>(std::shared_ptr<const ast::Stmt>(module_, &s));
      frame().env->set(def->name, define_function(def));
      return Flow::Normal;
    }
    case StmtKind::Return:
      exec_return(s.as<ast::ReturnStmt>());
      return Flow::Return;
    case StmtKind::Assign: {
      const auto& a = s.as<ast::AssignStmt>();
      // Buffers made by the value (T.alloc_shared, zeros, ...) are named after a single plain target.
      name_hint_ = a.targets.size() == 1 && a.targets[0]->kind == ExprKind::Name ? a.targets[0]->as<ast::NameExpr>().id : "";
      Value value = eval(*a.value);
      name_hint_.clear();
      for (const auto& t : a.targets) exec_assign(*t, value, a.loc);
      return Flow::Normal;
    }
    case StmtKind::AnnAssign: {
      const auto& a = s.as<ast::AnnAssignStmt>();
      if (!a.value) return Flow::Normal;  // `x: T.int32` alone declares nothing we need
      Value value = eval(*a.value);
      Value ann = eval(*a.annotation);
      if (const DTypeV* d = ann.get_if<DTypeV>(); d && staged()) {
        if (auto e = try_expr(value)) value = ExprV{ir::convert(d->dtype, *e, a.loc)};
      }
      exec_assign(*a.target, value, a.loc);
      return Flow::Normal;
    }
    case StmtKind::AugAssign: {
      const auto& a = s.as<ast::AugAssignStmt>();
      Value current = eval(*a.target);
      Value rhs = eval(*a.value);
      exec_assign(*a.target, binary_op(a.op, current, rhs, a.loc), a.loc);
      return Flow::Normal;
    }
    case StmtKind::For: exec_for(s.as<ast::ForStmt>()); return Flow::Normal;
    case StmtKind::While: {
      const auto& w = s.as<ast::WhileStmt>();
      if (staged()) error_at(w.loc, "'while' loops are not supported in kernels; use 'for i in range(n)' or T.serial(n)");
      for (int64_t n = 0;; ++n) {
        if (n > kMaxInterpretedIterations) error_at(w.loc, "this compile-time 'while' loop runs more than 2^20 times");
        if (!truthy(eval(*w.test), w.test->loc)) break;
        Flow flow = exec_block(w.body);
        if (flow == Flow::Break) break;
        if (flow == Flow::Return) return flow;
      }
      return Flow::Normal;
    }
    case StmtKind::If: return exec_if(s.as<ast::IfStmt>());
    case StmtKind::With: exec_with(s.as<ast::WithStmt>()); return Flow::Normal;
    case StmtKind::ExprStmt: {
      const auto& e = s.as<ast::ExprStmt>();
      if (e.value->kind == ExprKind::Str) return Flow::Normal;  // docstring
      Value v = eval(*e.value);
      if (staged()) {
        if (const ExprV* x = v.get_if<ExprV>(); x && ir::as<ir::CallNode>(x->expr)) emit(ir::make_evaluate(x->expr, e.loc));
      }
      return Flow::Normal;
    }
    case StmtKind::Pass: return Flow::Normal;
    case StmtKind::Break:
    case StmtKind::Continue:
      if (staged()) error_at(s.loc, rt::str("'", s.kind == StmtKind::Break ? "break" : "continue", "' is not supported in kernels; guard the loop body with 'if' instead"));
      return s.kind == StmtKind::Break ? Flow::Break : Flow::Continue;
    case StmtKind::Import: {
      for (const ast::ImportAlias& a : s.as<ast::ImportStmt>().names) {
        std::string module = a.name;
        if (a.asname.empty()) {
          // `import a.b` binds `a`.
          std::string head = module.substr(0, module.find('.'));
          frame().env->set(head, ModuleV{head});
        } else {
          frame().env->set(a.asname, ModuleV{module == "tilelang.language" ? "T" : module});
        }
      }
      return Flow::Normal;
    }
    case StmtKind::ImportFrom: {
      const auto& imp = s.as<ast::ImportFromStmt>();
      for (const ast::ImportAlias& a : imp.names) {
        std::string bound = a.asname.empty() ? a.name : a.asname;
        if (a.name == "*") {
          // `from tilelang.language import *` brings T's members in unqualified (Kernel, copy, float16, ...).
          if (imp.module == "tilelang.language") bind_language_names(*frame().env);
          continue;
        }
        if (imp.module == "tilelang.language" || imp.module == "tilelang") {
          // `from tilelang import jit` and `from tilelang.language import copy`: the member itself.
          std::string ns = imp.module == "tilelang" ? "tilelang" : "T";
          ast::AttributeExpr member(a.loc, std::make_shared<ast::NameExpr>(a.loc, ns), a.name);
          Frame tmp;
          tmp.env = globals_;
          frames_.push_back(&tmp);
          Value v = eval_attribute(member);
          frames_.pop_back();
          frame().env->set(bound, v);
        } else {
          frame().env->set(bound, ModuleV{imp.module + "." + a.name});
        }
      }
      return Flow::Normal;
    }
    case StmtKind::Assert: {
      const auto& a = s.as<ast::AssertStmt>();
      Value test = eval(*a.test);
      if (test.is<ExprV>()) error_at(a.loc, "'assert' in a kernel needs a condition known at compile time");
      if (!truthy(test, a.loc)) {
        std::string msg = a.msg ? describe(eval(*a.msg)) : ast::print(*a.test);
        if (a.msg) {
          Value m = eval(*a.msg);
          if (auto str = m.get_if<std::string>()) msg = *str;
        }
        error_at(a.loc, "assertion failed: " + msg);
      }
      return Flow::Normal;
    }
  }
  RT_UNREACHABLE("statement kind");
}

void Elaborator::exec_return(const ast::ReturnStmt& r) {
  Frame& f = frame();
  if (!f.def) error_at(r.loc, "'return' outside a function");
  if (f.staged && f.staged_control_depth > 0)
    error_at(r.loc, "'return' inside a runtime 'if' or loop of a kernel is not supported; return at the end of the function");
  f.returned = r.value ? eval(*r.value) : Value(NoneV{});
}

Elaborator::Flow Elaborator::exec_if(const ast::IfStmt& s) {
  Value test = eval(*s.test);
  std::optional<ir::Expr> cond;
  if (staged()) {
    if (const ExprV* e = test.get_if<ExprV>()) cond = e->expr;
    if (const BufferV* b = test.get_if<BufferV>(); b && b->buffer->shape.empty()) cond = to_expr(test, s.test->loc, "the condition");
  }
  if (!cond) return truthy(test, s.test->loc) ? exec_block(s.body) : exec_block(s.orelse);
  ++frame().staged_control_depth;
  builder_.open_block();
  Flow f1 = exec_block(s.body);
  ir::Stmt then_case = builder_.close_block();
  ir::Stmt else_case;
  Flow f2 = Flow::Normal;
  if (!s.orelse.empty()) {
    builder_.open_block();
    f2 = exec_block(s.orelse);
    else_case = builder_.close_block();
  }
  --frame().staged_control_depth;
  if (f1 != Flow::Normal || f2 != Flow::Normal) error_at(s.loc, "'return', 'break' and 'continue' cannot leave a runtime 'if' in a kernel");
  emit(ir::make_if(ir::cast(rt::DType::Bool, *cond, s.loc), then_case, else_case, s.loc));
  return Flow::Normal;
}

void Elaborator::exec_for(const ast::ForStmt& s) {
  Value iter = eval(*s.iter);
  if (const LoopV* loop = iter.get_if<LoopV>()) {
    // Loops over compile-time ranges outside kernels run now; inside kernels they are staged.
    bool all_const = std::all_of(loop->dims.begin(), loop->dims.end(), [](const LoopDim& d) {
      return ir::as_const_int(d.min) && ir::as_const_int(d.extent);
    });
    if (staged()) {
      stage_loop(s, *loop);
      return;
    }
    if (!all_const || loop->dims.size() != 1) error_at(s.iter->loc, "this loop can only run inside a kernel");
    const LoopDim& d = loop->dims[0];
    int64_t lo = *ir::as_const_int(d.min), n = *ir::as_const_int(d.extent);
    if (n > kMaxInterpretedIterations) error_at(s.iter->loc, "this compile-time loop runs more than 2^20 times");
    for (int64_t k = 0; k < n; ++k) {
      exec_assign(*s.target, Value(lo + k * d.step), s.loc);
      Flow flow = exec_block(s.body);
      if (flow == Flow::Break) break;
      if (flow == Flow::Return) error_at(s.loc, "'return' inside a compile-time loop is not supported");
    }
    return;
  }
  const TupleV* items = iter.get_if<TupleV>();
  if (!items) error_at(s.iter->loc, rt::str("cannot iterate over ", type_name(iter), " (", describe(iter), ")"));
  // Iterating over a compile-time tuple or list unrolls the loop.
  for (const Value& item : items->items) {
    exec_assign(*s.target, item, s.loc);
    Flow flow = exec_block(s.body);
    if (flow == Flow::Break) break;
    if (flow == Flow::Return) error_at(s.loc, "'return' inside a loop over a tuple is not supported");
  }
}

Value Elaborator::stage_loop(const ast::ForStmt& s, const LoopV& loop) {
  std::vector<ir::Var> vars;
  std::vector<std::string> names;
  if (s.target->kind == ExprKind::Name) {
    names.push_back(s.target->as<ast::NameExpr>().id);
  } else if (s.target->kind == ExprKind::Tuple) {
    for (const auto& e : s.target->as<ast::TupleExpr>().elts) {
      if (e->kind != ExprKind::Name) error_at(e->loc, "loop variables must be plain names");
      names.push_back(e->as<ast::NameExpr>().id);
    }
  } else {
    error_at(s.target->loc, "loop variables must be plain names");
  }
  if (names.size() != loop.dims.size())
    error_at(s.target->loc, rt::str("this loop has ", loop.dims.size(), " dimension", loop.dims.size() == 1 ? "" : "s", " but ",
                                    names.size(), " loop variable", names.size() == 1 ? "" : "s"));
  std::vector<ir::Expr> bound;  // what each loop name means: the variable, or min + var * step
  for (size_t i = 0; i < names.size(); ++i) {
    const LoopDim& d = loop.dims[i];
    ir::DType t = ir::index_dtype(d.min, d.extent);
    vars.push_back(ir::make_var(names[i], t, s.target->loc));
    bound.push_back(d.step == 1 ? ir::Expr(vars.back()) : ir::add(ir::cast(t, d.min), ir::mul(vars.back(), ir::make_int(d.step, t))));
  }
  bind_loop_target(*s.target, bound);
  ++frame().staged_control_depth;
  builder_.open_block();
  Flow flow = exec_block(s.body);
  ir::Stmt body = builder_.close_block();
  --frame().staged_control_depth;
  if (flow != Flow::Normal) error_at(s.loc, "'return', 'break' and 'continue' cannot leave a runtime loop in a kernel");
  ir::ForKind kind = ir::ForKind::Serial;
  switch (loop.kind) {
    case LoopKind::Parallel: kind = ir::ForKind::Parallel; break;
    case LoopKind::Pipelined: kind = ir::ForKind::Pipelined; break;
    case LoopKind::Unrolled: kind = ir::ForKind::Unrolled; break;
    case LoopKind::Vectorized: kind = ir::ForKind::Vectorized; break;
    default: break;
  }
  for (size_t i = vars.size(); i-- > 0;) {
    const LoopDim& d = loop.dims[i];
    ir::Expr min = d.step == 1 ? ir::cast(vars[i]->dtype, d.min) : ir::make_int(0, vars[i]->dtype);
    ir::Expr extent = ir::cast(vars[i]->dtype, d.extent);
    if (loop.schedule) body = schedule_pipelined(vars[i], min, extent, body, *loop.schedule, s.loc, {loop.num_stages, loop.warp_specialize});
    else body = ir::make_for(vars[i], min, extent, kind, body, s.loc, {loop.num_stages, loop.warp_specialize});
  }
  emit(body);
  return NoneV{};
}

void Elaborator::bind_loop_target(const ast::Expr& target, const std::vector<ir::Expr>& values) {
  if (target.kind == ExprKind::Name) {
    frame().env->set(target.as<ast::NameExpr>().id, ExprV{values[0]});
    return;
  }
  const auto& elts = target.as<ast::TupleExpr>().elts;
  for (size_t i = 0; i < elts.size(); ++i) frame().env->set(elts[i]->as<ast::NameExpr>().id, ExprV{values[i]});
}

void Elaborator::exec_with(const ast::WithStmt& s) {
  if (s.items.size() != 1) error_at(s.loc, "only one context manager per 'with' is supported");
  Value ctx = eval(*s.items[0].context);
  const KernelV* kv = ctx.get_if<KernelV>();
  if (!kv) error_at(s.items[0].context->loc, rt::str("'with' needs T.Kernel(...), not ", type_name(ctx)));
  KernelScope* k = kernel();
  if (!k || !staged()) error_at(s.loc, "T.Kernel can only be used inside a @T.prim_func");
  if (!k->launches.empty()) error_at(s.loc, "T.Kernel launches cannot be nested");
  LaunchScope launch;
  static const char* kBlockNames[] = {"bx", "by", "bz"};
  for (size_t i = 0; i < kv->grid.size(); ++i) launch.block_vars.push_back(ir::make_var(kBlockNames[i], ir::DType::I32, s.loc));
  launch.thread_var = ir::make_var("tx", ir::DType::I32, s.loc);
  launch.thread_dims = kv->thread_dims;
  // Bind the `as` target: one name, or a tuple of up to three.
  if (const ast::ExprPtr& target = s.items[0].target) {
    std::vector<ast::ExprPtr> names;
    if (target->kind == ExprKind::Name) names.push_back(target);
    else if (target->kind == ExprKind::Tuple) names = target->as<ast::TupleExpr>().elts;
    else error_at(target->loc, "T.Kernel binds plain names: 'as bx' or 'as (bx, by)'");
    if (names.size() != kv->grid.size())
      error_at(target->loc, rt::str("T.Kernel has ", kv->grid.size(), " grid dimension", kv->grid.size() == 1 ? "" : "s", " but 'as' names ", names.size()));
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i]->kind != ExprKind::Name) error_at(names[i]->loc, "T.Kernel binds plain names");
      const std::string& id = names[i]->as<ast::NameExpr>().id;
      launch.block_vars[i] = ir::make_var(id, ir::DType::I32, names[i]->loc);
      frame().env->set(id, ExprV{launch.block_vars[i]});
    }
  }
  builder_.open_block();
  launch.depth = builder_.depth();
  k->launches.push_back(launch);
  Flow flow = exec_block(s.body);
  LaunchScope done = k->launches.back();
  k->launches.pop_back();
  ir::Stmt body = builder_.close_block();
  if (flow != Flow::Normal) error_at(s.loc, "'return', 'break' and 'continue' cannot leave a T.Kernel block");
  emit(std::make_shared<const ir::KernelLaunchNode>(kv->grid, done.block_vars, kv->threads, done.thread_var, done.swizzle_panel, body, s.loc));
}

void Elaborator::exec_assign(const ast::Expr& target, const Value& value, const SourceLoc& loc) {
  switch (target.kind) {
    case ExprKind::Name: {
      const std::string& name = target.as<ast::NameExpr>().id;
      if (staged() && frame().reassigned.count(name)) {
        // A name assigned several times holds a mutable scalar: x = y copies y's value into x.
        auto it = frame().env->names.find(name);
        const BufferV* current = it != frame().env->names.end() ? it->second.get_if<BufferV>() : nullptr;
        bool current_scalar = current && current->buffer->shape.empty() && current->buffer->scope == ir::Scope::Local;
        const BufferV* value_buf = value.get_if<BufferV>();
        bool scalar = is_number(value) || value.is<ExprV>() || (value_buf && value_buf->buffer->shape.empty() && current_scalar);
        if (scalar) return assign_scalar_name(name, value, loc);
      }
      if (staged() && value.is<ExprV>()) {
        // A name given a runtime value once: an immutable let binding (constants and variables fold).
        ir::Expr e = value.get<ExprV>().expr;
        if (e->kind != ir::NodeKind::IntImm && e->kind != ir::NodeKind::FloatImm && e->kind != ir::NodeKind::Var) {
          ir::Var v = ir::make_var(name, e->dtype, loc);
          builder_.emit_let(v, e, loc);
          frame().env->set(name, ExprV{v});
          return;
        }
      }
      frame().env->set(name, value);
      return;
    }
    case ExprKind::Tuple:
    case ExprKind::List: {
      const auto& elts = target.kind == ExprKind::Tuple ? target.as<ast::TupleExpr>().elts : target.as<ast::ListExpr>().elts;
      const TupleV* t = value.get_if<TupleV>();
      if (!t) error_at(target.loc, rt::str("cannot unpack ", type_name(value), " into ", elts.size(), " names"));
      if (t->items.size() != elts.size())
        error_at(target.loc, rt::str("cannot unpack ", t->items.size(), " values into ", elts.size(), " names"));
      for (size_t i = 0; i < elts.size(); ++i) exec_assign(*elts[i], t->items[i], loc);
      return;
    }
    case ExprKind::Subscript: {
      const auto& sub = target.as<ast::SubscriptExpr>();
      Value base = eval(*sub.value);
      if (!base.is<BufferV>()) error_at(sub.value->loc, rt::str("cannot assign into ", type_name(base), " (", describe(base), ")"));
      require_staged(target.loc, "storing into a tensor");
      Value place = eval(target);  // an element (a load) or a slice (a region)
      if (const ExprV* e = place.get_if<ExprV>()) {
        if (const auto* load = ir::as<ir::BufferLoadNode>(e->expr)) {
          ir::Region point{load->buffer, {}, target.loc};
          for (const ir::Expr& i : load->indices) point.ranges.push_back({i, ir::make_int(1, i->dtype)});
          return store(point, true, value, loc);
        }
      }
      if (const RegionV* r = place.get_if<RegionV>()) return store(r->region, false, value, loc);
      error_at(target.loc, "cannot assign to this expression");
    }
    case ExprKind::Attribute: error_at(target.loc, "assigning to attributes is not supported");
    default: error_at(target.loc, "cannot assign to this expression");
  }
}

void Elaborator::store(const ir::Region& target, bool point, const Value& value, const SourceLoc& loc) {
  const ir::Buffer& buf = target.buffer;
  if (point) {
    std::vector<ir::Expr> idx;
    for (const ir::Range& r : target.ranges) idx.push_back(r.min);
    ir::Expr v = to_expr(value, loc, rt::str("the value stored into ", buf->name));
    emit(ir::make_store(buf, std::move(idx), ir::cast(buf->dtype, v, loc), loc));
    return;
  }
  // A slice target: a scalar fills it, a tensor of the same shape is copied into it.
  if (auto e = try_expr(value)) {
    emit(std::make_shared<const ir::FillNode>(target, ir::cast(buf->dtype, *e, loc), loc));
    return;
  }
  emit(std::make_shared<const ir::CopyNode>(to_region(value, loc, "the value stored"), target, loc));
}

void Elaborator::assign_scalar_name(const std::string& name, const Value& value, const SourceLoc& loc) {
  auto it = frame().env->names.find(name);
  ir::Expr e = to_expr(value, loc, rt::str("the value of ", name));
  if (it != frame().env->names.end()) {
    if (const BufferV* b = it->second.get_if<BufferV>(); b && b->buffer->shape.empty() && b->buffer->scope == ir::Scope::Local) {
      if (rt::is_int(b->buffer->dtype) && rt::is_float(e->dtype))
        error_at(loc, rt::str("'", name, "' holds ", rt::name(b->buffer->dtype), " since its first assignment, but is assigned a ", rt::name(e->dtype),
                              " value here; make the first assignment a float (", name, " = 0.0)"));
      emit(ir::make_store(b->buffer, {}, ir::cast(b->buffer->dtype, e, loc), loc));
      return;
    }
  }
  // First assignment of a name the function assigns again: a mutable scalar, declared where it
  // outlives the blocks it is assigned in (the kernel launch or function body).
  rt::DType t = e->dtype == rt::DType::Bool ? rt::DType::Bool : e->dtype;
  if (is_number(value) && value.is<double>()) t = rt::DType::F32;
  if (value.is<int64_t>()) t = rt::DType::I32;
  ir::Buffer buf = ir::make_buffer(name, t, {}, ir::Scope::Local, loc);
  size_t depth = launch() ? launch()->depth : kernel()->depth;
  builder_.hoist_allocate(depth, buf, loc);
  emit(ir::make_store(buf, {}, ir::cast(t, e, loc), loc));
  frame().env->set(name, BufferV{buf});
}

// ---------------------------------------------------------------- functions and kernels

Value Elaborator::define_function(std::shared_ptr<const ast::FunctionDef> def) {
  FunctionV f{def, frame().env, {}, FunctionV::Decoration::None};
  for (const ast::Arg& a : def->args) f.defaults.push_back(a.default_value ? std::make_shared<Value>(eval(*a.default_value)) : nullptr);
  Value result = f;
  // Decorators apply innermost first.
  for (auto it = def->decorators.rbegin(); it != def->decorators.rend(); ++it) {
    Value d = eval(**it);
    FunctionV::Decoration deco = decoration_of(d);
    if (deco != FunctionV::Decoration::None) {
      FunctionV g = result.get<FunctionV>();
      g.decoration = deco;
      result = g;
      continue;
    }
    if (const BuiltinV* b = d.get_if<BuiltinV>(); b && (b->name == "tilelang.jit" || b->name == "tilelang.autotune")) continue;
    if (d.is<ModuleV>()) continue;  // decorators of modules we do not know (functools.wraps, ...) are accepted as no-ops
    error_at((*it)->loc, rt::str("unsupported decorator ", ast::print(**it)));
  }
  return result;
}

Value Elaborator::call_function(const FunctionV& f, Args args, const SourceLoc& loc) {
  if (f.decoration == FunctionV::Decoration::TileKernel || f.decoration == FunctionV::Decoration::PrimFunc)
    error_at(loc, rt::str("kernel '", f.def->name, "' cannot be called from Python code here; run it with 'tl run'"));
  if (++call_depth_ > kMaxCallDepth) error_at(loc, "too many nested calls (recursion?)");
  const ast::FunctionDef& def = *f.def;
  auto env = std::make_shared<Env>();
  env->parent = f.closure;
  // Bind arguments: positional, then keywords, then defaults.
  if (args.positional.size() > def.args.size())
    error_at(loc, rt::str(def.name, "() takes ", def.args.size(), " arguments but ", args.positional.size(), " were given"));
  std::vector<bool> bound(def.args.size(), false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    env->set(def.args[i].name, args.positional[i]);
    bound[i] = true;
  }
  for (size_t k = 0; k < args.keywords.size(); ++k) {
    const auto& [name, value] = args.keywords[k];
    auto it = std::find_if(def.args.begin(), def.args.end(), [&](const ast::Arg& a) { return a.name == name; });
    if (it == def.args.end()) error_at(args.keyword_locs[k], rt::str(def.name, "() has no argument '", name, "'"));
    size_t i = static_cast<size_t>(it - def.args.begin());
    if (bound[i]) error_at(args.keyword_locs[k], rt::str(def.name, "() got two values for argument '", name, "'"));
    env->set(name, value);
    bound[i] = true;
  }
  for (size_t i = 0; i < def.args.size(); ++i) {
    if (bound[i]) continue;
    if (!f.defaults[i]) error_at(loc, rt::str(def.name, "() is missing its argument '", def.args[i].name, "'"));
    env->set(def.args[i].name, *f.defaults[i]);
  }
  Frame fr;
  fr.env = env;
  fr.def = &def;
  fr.staged = staged();  // helpers called from a kernel body add to the same kernel
  std::map<std::string, int> counts;
  count_assignments(def.body, counts);
  for (const auto& [name, n] : counts)
    if (n > 1) fr.reassigned.insert(name);
  frames_.push_back(&fr);
  exec_block(def.body);
  frames_.pop_back();
  --call_depth_;
  Value result = fr.returned ? *fr.returned : Value(NoneV{});
  // A factory hands back its inner @T.prim_func: elaborate it now, in the factory's scope.
  if (const FunctionV* inner = result.get_if<FunctionV>(); inner && inner->decoration == FunctionV::Decoration::PrimFunc) {
    auto func = std::make_shared<const ir::PrimFunc>(stage_kernel(*inner, inner->def->name, nullptr, loc));
    return PrimFuncV{func};
  }
  return result;
}

ir::PrimFunc Elaborator::stage_kernel(const FunctionV& f, const std::string& name, const std::vector<TensorSpec>* specs, const SourceLoc& call_loc) {
  const ast::FunctionDef& def = *f.def;
  auto scope = std::make_unique<KernelScope>();
  scope->style = f.decoration == FunctionV::Decoration::TileKernel ? ir::FuncStyle::TileKernel : ir::FuncStyle::PrimFunc;
  auto env = std::make_shared<Env>();
  env->parent = f.closure;
  std::map<std::string, ir::Var> symbolic;

  if (scope->style == ir::FuncStyle::TileKernel) {
    if (!specs) error_at(def.loc, "internal: a @tile_kernel needs its input tensors to be specialized");
    if (specs->size() != def.args.size())
      rt::throw_user_error(format_diagnostic(def.loc, rt::str("kernel '", name, "' takes ", def.args.size(), " tensor", def.args.size() == 1 ? "" : "s", " (",
          [&] { std::string s; for (const auto& a : def.args) s += (s.empty() ? "" : ", ") + a.name; return s; }(),
          ") but ", specs->size(), " input", specs->size() == 1 ? " was" : "s were", " given")));
  }
  for (size_t i = 0; i < def.args.size(); ++i) {
    const ast::Arg& a = def.args[i];
    Value ann = NoneV{};
    if (a.annotation) {  // annotations evaluate in the defining scope
      Frame tmp;
      tmp.env = f.closure;
      frames_.push_back(&tmp);
      ann = eval(*a.annotation);
      frames_.pop_back();
    }
    if (const BuiltinV* b = ann.get_if<BuiltinV>(); b && b->name == "Tensor") ann = TensorTypeV{};  // bare `Tensor`: any dtype
    const TensorTypeV* tt = ann.get_if<TensorTypeV>();
    if (scope->style == ir::FuncStyle::TileKernel) {
      if (!ann.is<NoneV>() && !tt) error_at(a.loc, rt::str("parameter '", a.name, "' of a @tile_kernel must be a tensor (Tensor[FP16], ...)"));
      const TensorSpec& spec = (*specs)[i];
      if (!spec.dtype && !(tt && tt->has_dtype))
        error_at(a.loc, rt::str("parameter '", a.name, "' needs a dtype: annotate it (Tensor[FP16]) or give the input's dtype"));
      rt::DType dtype = spec.dtype ? *spec.dtype : tt->dtype;
      if (tt && tt->has_dtype && tt->dtype != dtype)
        error_at(a.loc, rt::str("parameter '", a.name, "' is declared with dtype ", rt::name(tt->dtype), " but the input tensor has dtype ", rt::name(dtype)));
      std::vector<ir::Expr> shape;
      for (const Dim& d : spec.shape) {
        if (const int64_t* n = std::get_if<int64_t>(&d)) {
          shape.push_back(ir::make_int(*n, *n > INT32_MAX ? rt::DType::I64 : rt::DType::I32));
        } else {
          const std::string& sym = std::get<std::string>(d);
          auto [it, fresh] = symbolic.try_emplace(sym, nullptr);
          if (fresh) it->second = ir::make_var(sym, rt::DType::I32, a.loc);
          shape.push_back(it->second);
        }
      }
      ir::Buffer buf = ir::make_buffer(a.name, dtype, std::move(shape), ir::Scope::Global, a.loc);
      scope->params.push_back({buf, false});
      env->set(a.name, BufferV{buf});
    } else {
      if (!tt || !tt->has_shape || !tt->has_dtype)
        error_at(a.loc, rt::str("parameter '", a.name, "' of a @T.prim_func needs a tensor annotation with shape and dtype, e.g. T.Tensor((M, N), \"float16\")"));
      std::vector<ir::Expr> shape;
      for (const Value& d : tt->shape) shape.push_back(to_expr(d, a.loc, rt::str("a dimension of ", a.name)));
      ir::Buffer buf = ir::make_buffer(a.name, tt->dtype, std::move(shape), ir::Scope::Global, a.loc);
      scope->params.push_back({buf, false});
      env->set(a.name, BufferV{buf});
    }
  }

  Frame fr;
  fr.env = env;
  fr.def = &def;
  fr.staged = true;
  std::map<std::string, int> counts;
  count_assignments(def.body, counts);
  for (const auto& [n, c] : counts)
    if (c > 1) fr.reassigned.insert(n);
  kernels_.push_back(std::move(scope));
  frames_.push_back(&fr);
  builder_.open_block();
  kernel()->depth = builder_.depth();
  exec_block(def.body);
  ir::Stmt body = builder_.close_block();
  frames_.pop_back();
  std::unique_ptr<KernelScope> done = std::move(kernels_.back());
  kernels_.pop_back();

  ir::PrimFunc func;
  func.name = name;
  func.style = done->style;
  func.loc = def.loc;
  func.params = done->params;
  if (done->style == ir::FuncStyle::TileKernel) {
    // What the kernel returns becomes its outputs; other whole-tensor temporaries stay inside.
    if (!fr.returned || fr.returned->is<NoneV>()) error_at(def.loc, rt::str("@tile_kernel '", name, "' must return the tensors it computes"));
    std::vector<Value> outs;
    if (const TupleV* t = fr.returned->get_if<TupleV>()) outs = t->items;
    else outs.push_back(*fr.returned);
    for (const Value& o : outs) {
      const BufferV* b = o.get_if<BufferV>();
      if (!b || b->buffer->scope != ir::Scope::Global)
        error_at(def.loc, rt::str("@tile_kernel '", name, "' must return tensors, not ", type_name(o)));
      bool is_temp = std::find(done->tensor_temps.begin(), done->tensor_temps.end(), b->buffer) != done->tensor_temps.end();
      bool is_param = std::any_of(func.params.begin(), func.params.end(), [&](const ir::Param& p) { return p.buffer == b->buffer; });
      if (is_param) error_at(def.loc, rt::str("@tile_kernel '", name, "' returns its input '", b->buffer->name, "'; return a new tensor (zeros_like, empty, ...) instead"));
      if (!is_temp) error_at(def.loc, "internal: returned tensor was not created in the kernel");
      if (std::find(done->returned.begin(), done->returned.end(), b->buffer) != done->returned.end())
        error_at(def.loc, rt::str("@tile_kernel '", name, "' returns '", b->buffer->name, "' twice"));
      done->returned.push_back(b->buffer);
      func.params.push_back({b->buffer, true});
    }
    if (def.returns) {
      Frame tmp;
      tmp.env = f.closure;
      frames_.push_back(&tmp);
      Value ann = eval(*def.returns);
      frames_.pop_back();
      if (const TensorTypeV* tt = ann.get_if<TensorTypeV>(); tt && tt->has_dtype && done->returned.size() == 1 && done->returned[0]->dtype != tt->dtype)
        error_at(def.returns->loc, rt::str("'", name, "' is declared to return ", rt::name(tt->dtype), " but returns '", done->returned[0]->name,
                                           "' of dtype ", rt::name(done->returned[0]->dtype)));
    }
    // Temporaries were hoisted as Allocates around the body; outputs are parameters instead.
    struct DropOutputAllocs {
      const std::vector<ir::Buffer>& outs;
      ir::Stmt operator()(const ir::Stmt& s) const {
        if (const auto* a = ir::as<ir::AllocateNode>(s)) {
          ir::Stmt inner = (*this)(a->body);
          if (std::find(outs.begin(), outs.end(), a->buffer) != outs.end()) return inner;
          return inner == a->body ? s : ir::make_allocate(a->buffer, inner, a->loc);
        }
        return s;
      }
    };
    body = DropOutputAllocs{done->returned}(body);
  } else {
    if (fr.returned && !fr.returned->is<NoneV>()) error_at(def.loc, "a @T.prim_func returns nothing; its outputs are tensor parameters");
  }
  check_loads_after_scheduled_loops(body);
  func.body = body;
  return func;
}

// ---------------------------------------------------------------- expressions

Value Elaborator::eval(const ast::Expr& e) {
  switch (e.kind) {
    case ExprKind::Name: {
      const std::string& id = e.as<ast::NameExpr>().id;
      const Value* v = frame().env->lookup(id);
      if (!v) v = globals_->lookup(id);
      if (!v) error_at(e.loc, rt::str("name '", id, "' is not defined"));
      return *v;
    }
    case ExprKind::Int: return e.as<ast::IntExpr>().value;
    case ExprKind::Float: return e.as<ast::FloatExpr>().value;
    case ExprKind::Str: return e.as<ast::StrExpr>().value;
    case ExprKind::Bool: return e.as<ast::BoolExpr>().value;
    case ExprKind::None: return NoneV{};
    case ExprKind::Tuple:
    case ExprKind::List: {
      TupleV t;
      t.is_list = e.kind == ExprKind::List;
      for (const auto& x : e.kind == ExprKind::Tuple ? e.as<ast::TupleExpr>().elts : e.as<ast::ListExpr>().elts) t.items.push_back(eval(*x));
      return t;
    }
    case ExprKind::Dict: {
      const auto& d = e.as<ast::DictExpr>();
      DictV out;
      for (size_t i = 0; i < d.keys.size(); ++i) out.items.push_back({eval(*d.keys[i]), eval(*d.values[i])});
      return out;
    }
    case ExprKind::Attribute: return eval_attribute(e.as<ast::AttributeExpr>());
    case ExprKind::Subscript: return eval_subscript(e.as<ast::SubscriptExpr>());
    case ExprKind::Slice: error_at(e.loc, "a slice is only allowed inside [ ]");
    case ExprKind::Call: return eval_call(e.as<ast::CallExpr>());
    case ExprKind::BinOp: {
      const auto& b = e.as<ast::BinOpExpr>();
      Value lhs = eval(*b.lhs);
      Value rhs = eval(*b.rhs);
      return binary_op(b.op, lhs, rhs, b.loc);
    }
    case ExprKind::UnaryOp: return eval_unary(e.as<ast::UnaryOpExpr>());
    case ExprKind::BoolOp: {
      const auto& b = e.as<ast::BoolOpExpr>();
      bool is_and = b.op == ast::BoolOpKind::And;
      Value acc = eval(*b.values[0]);
      for (size_t i = 1; i < b.values.size(); ++i) {
        if (!acc.is<ExprV>()) {
          // Python's short-circuit at compile time: `a and b` is a if a is falsy, else b.
          if (truthy(acc, b.values[i - 1]->loc) != is_and) return acc;
          acc = eval(*b.values[i]);
          continue;
        }
        Value next = eval(*b.values[i]);
        auto [lhs, rhs] = operands(acc, next, b.loc, "operand of 'and'/'or'");
        if (lhs->dtype == rt::DType::Bool && rhs->dtype == rt::DType::Bool) {
          acc = ExprV{is_and ? ir::logical_and(lhs, rhs, b.loc) : ir::logical_or(lhs, rhs, b.loc)};
        } else {
          // Python's value semantics: `a or b` is a when a is true, else b; `a and b` the reverse.
          // (Both sides are evaluated: kernel expressions have no side effects.)
          ir::Expr test = ir::compare(ir::BinaryOp::NE, lhs, ir::cast(lhs->dtype, ir::make_int(0)), b.loc);
          acc = ExprV{is_and ? ir::select(test, rhs, lhs, b.loc) : ir::select(test, lhs, rhs, b.loc)};
        }
      }
      return acc;
    }
    case ExprKind::Compare: return eval_compare(e.as<ast::CompareExpr>());
    case ExprKind::IfExp: {
      const auto& x = e.as<ast::IfExpExpr>();
      Value test = eval(*x.test);
      if (!test.is<ExprV>()) return truthy(test, x.test->loc) ? eval(*x.body) : eval(*x.orelse);
      auto [t, f] = operands(eval(*x.body), eval(*x.orelse), x.loc, "value of a conditional expression");
      return ExprV{ir::select(test.get<ExprV>().expr, t, f, x.loc)};
    }
  }
  RT_UNREACHABLE("expression kind");
}

Value Elaborator::eval_unary(const ast::UnaryOpExpr& u) {
  Value v = eval(*u.operand);
  switch (u.op) {
    case ast::UnaryOpKind::Pos: return v;
    case ast::UnaryOpKind::Not:
      if (auto e = try_expr(v); e && (v.is<ExprV>() || v.is<BufferV>())) return ExprV{ir::logical_not(*e, u.loc)};
      return !truthy(v, u.loc);
    case ast::UnaryOpKind::Neg:
      if (auto i = v.get_if<int64_t>()) return int_neg(*i, u.loc, "-");
      if (auto b = v.get_if<bool>()) return static_cast<int64_t>(-static_cast<int>(*b));
      if (auto d = v.get_if<double>()) return -*d;
      return ExprV{ir::neg(to_expr(v, u.operand->loc, "the operand of '-'"), u.loc)};
    case ast::UnaryOpKind::Invert:
      if (is_number(v) && !v.is<double>()) return ~as_int(v);
      {
        ir::Expr e = to_expr(v, u.operand->loc, "the operand of '~'");
        if (!rt::is_int(e->dtype)) error_at(u.loc, rt::str("'~' needs an integer, not ", rt::name(e->dtype)));
        return ExprV{ir::bit_not(e, u.loc)};
      }
  }
  RT_UNREACHABLE("unary op");
}

Value Elaborator::binary_op(ast::BinOpKind op, const Value& a, const Value& b, const SourceLoc& loc) {
  // Compile-time arithmetic follows Python.
  if (is_number(a) && is_number(b)) {
    bool floats = a.is<double>() || b.is<double>();
    if (op == ast::BinOpKind::Div || floats) {
      double x = as_double(a), y = as_double(b);
      switch (op) {
        case ast::BinOpKind::Add: return x + y;
        case ast::BinOpKind::Sub: return x - y;
        case ast::BinOpKind::Mul: return x * y;
        case ast::BinOpKind::Div:
          if (y == 0) error_at(loc, "division by zero");
          return x / y;
        case ast::BinOpKind::FloorDiv:
          if (y == 0) error_at(loc, "division by zero");
          return tl::floordiv(x, y);
        case ast::BinOpKind::Mod:
          if (y == 0) error_at(loc, "division by zero");
          return tl::floormod(x, y);
        case ast::BinOpKind::Pow: return std::pow(x, y);
        default: error_at(loc, rt::str("operator ", ast::symbol(op), " needs integers, not floats"));
      }
    }
    int64_t x = as_int(a), y = as_int(b);
    switch (op) {
      case ast::BinOpKind::Pow:
        if (y < 0) {
          if (x == 0) error_at(loc, "0 cannot be raised to a negative power");
          return std::pow(static_cast<double>(x), static_cast<double>(y));
        }
        return int_op(op, x, y, loc);
      case ast::BinOpKind::Add:
      case ast::BinOpKind::Sub:
      case ast::BinOpKind::Mul:
      case ast::BinOpKind::FloorDiv:
      case ast::BinOpKind::Mod:
      case ast::BinOpKind::LShift:
      case ast::BinOpKind::RShift:
      case ast::BinOpKind::BitOr:
      case ast::BinOpKind::BitXor:
      case ast::BinOpKind::BitAnd: return int_op(op, x, y, loc);
      default: break;
    }
  }
  if (op == ast::BinOpKind::Add && a.is<std::string>() && b.is<std::string>()) return a.get<std::string>() + b.get<std::string>();
  if (op == ast::BinOpKind::Add && a.is<TupleV>() && b.is<TupleV>()) {
    TupleV t = a.get<TupleV>();
    for (const Value& v : b.get<TupleV>().items) t.items.push_back(v);
    return t;
  }
  if (op == ast::BinOpKind::Mul && ((a.is<TupleV>() && b.is<int64_t>()) || (a.is<int64_t>() && b.is<TupleV>()))) {
    const TupleV& items = a.is<TupleV>() ? a.get<TupleV>() : b.get<TupleV>();
    const int64_t n = a.is<TupleV>() ? b.get<int64_t>() : a.get<int64_t>();
    TupleV t{{}, items.is_list};
    if (n > 0 && !items.items.empty() && n > kMaxInterpretedIterations / static_cast<int64_t>(items.items.size()))
      error_at(loc, rt::str("this ", items.is_list ? "list" : "tuple", " would have ", n, " x ", items.items.size(),
                            " items; compile-time tuples and lists hold at most 2^20"));
    for (int64_t i = 0; i < n; ++i)
      for (const Value& v : items.items) t.items.push_back(v);
    return t;
  }
  if (op == ast::BinOpKind::MatMul)
    error_at(loc, "'@' (matrix product) is not an operator of kernels; write the loops (they become a gemm) or call T.gemm");
  auto [ea, eb] = operands(a, b, loc, rt::str("operand of '", ast::symbol(op), "'"));
  ir::BinaryOp irop = to_ir_op(op);
  if ((irop == ir::BinaryOp::BitAnd || irop == ir::BinaryOp::BitOr || irop == ir::BinaryOp::BitXor || irop == ir::BinaryOp::Shl ||
       irop == ir::BinaryOp::Shr) &&
      (rt::is_float(ea->dtype) || rt::is_float(eb->dtype))) {
    error_at(loc, rt::str("operator ", ast::symbol(op), " needs integers, not ", rt::name(ea->dtype), " and ", rt::name(eb->dtype)));
  }
  return ExprV{ir::binary(irop, ea, eb, loc)};
}

Value Elaborator::eval_compare(const ast::CompareExpr& c) {
  Value left = eval(*c.left);
  Value result = true;
  for (size_t i = 0; i < c.ops.size(); ++i) {
    Value right = eval(*c.comparators[i]);
    ast::CmpOpKind op = c.ops[i];
    Value r;
    if (op == ast::CmpOpKind::Is || op == ast::CmpOpKind::IsNot) {
      bool same = (left.is<NoneV>() && right.is<NoneV>()) || (left.is<bool>() && right.is<bool>() && left.get<bool>() == right.get<bool>());
      if (!left.is<NoneV>() && !right.is<NoneV>() && !left.is<bool>()) error_at(c.loc, "'is' is only supported with None, True and False");
      r = (op == ast::CmpOpKind::Is) == same;
    } else if (op == ast::CmpOpKind::In || op == ast::CmpOpKind::NotIn) {
      const TupleV* t = right.get_if<TupleV>();
      if (!t) error_at(c.comparators[i]->loc, "'in' needs a compile-time tuple or list");
      bool found = false;
      for (const Value& item : t->items) {
        if (is_number(item) && is_number(left)) found |= as_double(item) == as_double(left);
        if (item.is<std::string>() && left.is<std::string>()) found |= item.get<std::string>() == left.get<std::string>();
        if (item.is<DTypeV>() && left.is<DTypeV>()) found |= item.get<DTypeV>().dtype == left.get<DTypeV>().dtype;
      }
      r = (op == ast::CmpOpKind::In) == found;
    } else if (is_number(left) && is_number(right)) {
      double x = as_double(left), y = as_double(right);
      bool ints = !left.is<double>() && !right.is<double>();
      int64_t ix = ints ? as_int(left) : 0, iy = ints ? as_int(right) : 0;
      switch (op) {
        case ast::CmpOpKind::Eq: r = ints ? ix == iy : x == y; break;
        case ast::CmpOpKind::NotEq: r = ints ? ix != iy : x != y; break;
        case ast::CmpOpKind::Lt: r = ints ? ix < iy : x < y; break;
        case ast::CmpOpKind::LtE: r = ints ? ix <= iy : x <= y; break;
        case ast::CmpOpKind::Gt: r = ints ? ix > iy : x > y; break;
        case ast::CmpOpKind::GtE: r = ints ? ix >= iy : x >= y; break;
        default: break;
      }
    } else if ((left.is<std::string>() || left.is<DTypeV>() || left.is<NoneV>()) && (op == ast::CmpOpKind::Eq || op == ast::CmpOpKind::NotEq)) {
      bool eq = false;
      auto dt = [](const Value& v) -> std::optional<rt::DType> {
        if (auto d = v.get_if<DTypeV>()) return d->dtype;
        if (auto s = v.get_if<std::string>()) return rt::parse_dtype(*s);
        return std::nullopt;
      };
      if (left.is<std::string>() && right.is<std::string>()) eq = left.get<std::string>() == right.get<std::string>();
      else if (dt(left) && dt(right)) eq = *dt(left) == *dt(right);
      else eq = left.is<NoneV>() && right.is<NoneV>();
      r = (op == ast::CmpOpKind::Eq) == eq;
    } else {
      auto [a, b] = operands(left, right, c.loc, "operand of the comparison");
      r = ExprV{ir::compare(to_ir_cmp(op), a, b, c.loc)};
    }
    // Chain: a < b < c is (a < b) and (b < c).
    if (i == 0) {
      result = r;
    } else if (result.is<ExprV>() || r.is<ExprV>()) {
      result = ExprV{ir::logical_and(to_expr(result, c.loc, "a comparison"), to_expr(r, c.loc, "a comparison"), c.loc)};
    } else {
      result = truthy(result, c.loc) && truthy(r, c.loc);
    }
    left = right;
  }
  return result;
}

Value Elaborator::eval_subscript(const ast::SubscriptExpr& s) {
  Value base = eval(*s.value);
  std::vector<Value> index;
  std::vector<SourceLoc> locs;
  for (const auto& i : s.indices) {
    locs.push_back(i->loc);
    if (i->kind == ExprKind::Slice) {
      const auto& sl = i->as<ast::SliceExpr>();
      TupleV slice{{sl.lower ? eval(*sl.lower) : Value(NoneV{}), sl.upper ? eval(*sl.upper) : Value(NoneV{}),
                    sl.step ? eval(*sl.step) : Value(NoneV{})},
                   false};
      // Marked as a slice by wrapping in a one-element list holding the triple.
      index.push_back(TupleV{{slice}, true});
    } else {
      index.push_back(eval(*i));
    }
  }
  // T.Tensor[(M, N), dtype] and Tensor[FP16]: annotations written with brackets.
  if (const BuiltinV* b = base.get_if<BuiltinV>()) {
    if (b->name == "Tensor" || b->name == "T.Tensor" || b->name == "T.Buffer") {
      Args args;
      if (b->name == "Tensor") {
        TensorTypeV t;
        if (index.size() != 1 || !index[0].is<DTypeV>()) error_at(s.loc, "write Tensor[dtype], e.g. Tensor[FP16]");
        t.has_dtype = true;
        t.dtype = index[0].get<DTypeV>().dtype;
        return t;
      }
      args.positional = index;
      args.positional_locs = locs;
      return call_builtin(b->name, args, s.loc);
    }
  }
  return index_value(base, index, locs, s.loc);
}

Value Elaborator::index_value(const Value& base, const std::vector<Value>& index, const std::vector<SourceLoc>& locs, const SourceLoc& loc) {
  auto is_slice = [](const Value& v) { return v.is<TupleV>() && v.get<TupleV>().is_list && v.get<TupleV>().items.size() == 1 && v.get<TupleV>().items[0].is<TupleV>(); };
  if (const TupleV* t = base.get_if<TupleV>()) {
    if (index.size() != 1) error_at(loc, "tuples take one index");
    if (is_slice(index[0])) {
      const auto& sl = index[0].get<TupleV>().items[0].get<TupleV>().items;
      int64_t n = static_cast<int64_t>(t->items.size());
      int64_t step = sl[2].is<NoneV>() ? 1 : to_int(sl[2], locs[0], "a slice step");
      if (step != 1) error_at(locs[0], "tuple slices with a step are not supported");
      int64_t lo = sl[0].is<NoneV>() ? 0 : to_int(sl[0], locs[0], "a slice bound");
      int64_t hi = sl[1].is<NoneV>() ? n : to_int(sl[1], locs[0], "a slice bound");
      if (lo < 0) lo += n;
      if (hi < 0) hi += n;
      TupleV out{{}, t->is_list};
      for (int64_t i = std::max<int64_t>(lo, 0); i < std::min(hi, n); ++i) out.items.push_back(t->items[i]);
      return out;
    }
    int64_t i = to_int(index[0], locs[0], "a tuple index");
    int64_t n = static_cast<int64_t>(t->items.size());
    if (i < -n || i >= n) error_at(locs[0], rt::str("tuple index ", i, " out of range for ", describe(base)));
    return t->items[i < 0 ? i + n : i];
  }
  if (const DictV* d = base.get_if<DictV>()) {
    for (const auto& [k, v] : d->items) {
      if (k.is<std::string>() && index[0].is<std::string>() && k.get<std::string>() == index[0].get<std::string>()) return v;
      if (is_number(k) && is_number(index[0]) && as_double(k) == as_double(index[0])) return v;
    }
    error_at(loc, rt::str("key ", describe(index[0]), " not found"));
  }
  const ir::Buffer* buf = nullptr;
  std::vector<ir::Range> base_ranges;
  if (const BufferV* b = base.get_if<BufferV>()) {
    buf = &b->buffer;
  } else if (const RegionV* r = base.get_if<RegionV>()) {
    // Indexing a slice: only full-rank element access, relative to the slice's origin.
    buf = &r->region.buffer;
    base_ranges = r->region.ranges;
  } else {
    error_at(loc, rt::str("cannot index ", type_name(base), " (", describe(base), ")"));
  }
  const ir::Buffer& buffer = *buf;
  size_t rank = buffer->shape.size();
  if (!base_ranges.empty()) {
    if (index.size() != rank) error_at(loc, rt::str("a slice of ", buffer->name, " takes ", rank, " indices"));
  }
  if (index.size() > rank || (rank == 0 && !index.empty() && !(index.size() == 1 && is_number(index[0]) && as_int(index[0]) == 0)))
    error_at(loc, rt::str("tensor '", buffer->name, "' has ", rank, " dimension", rank == 1 ? "" : "s", " (shape ", ir::shape_string(buffer->shape),
                          ") but is indexed with ", index.size()));
  if (rank == 0) return ExprV{ir::make_load(buffer, {}, loc)};  // x[0] on a scalar
  bool any_slice = index.size() < rank;
  std::vector<ir::Range> ranges;
  for (size_t d = 0; d < rank; ++d) {
    ir::Expr offset = base_ranges.empty() ? nullptr : base_ranges[d].min;
    if (d >= index.size()) {
      ranges.push_back({ir::make_int(0, buffer->shape[d]->dtype), buffer->shape[d]});
      continue;
    }
    if (is_slice(index[d])) {
      any_slice = true;
      const auto& sl = index[d].get<TupleV>().items[0].get<TupleV>().items;
      if (!sl[2].is<NoneV>() && !(is_number(sl[2]) && as_int(sl[2]) == 1)) error_at(locs[d], "tensor slices with a step are not supported");
      ir::Expr lo = sl[0].is<NoneV>() ? ir::make_int(0, buffer->shape[d]->dtype) : to_expr(sl[0], locs[d], "a slice bound");
      ir::Expr hi = sl[1].is<NoneV>() ? buffer->shape[d] : to_expr(sl[1], locs[d], "a slice bound");
      ranges.push_back({lo, analysis::canonical(ir::sub(hi, lo, locs[d]))});
      continue;
    }
    ir::Expr i = to_expr(index[d], locs[d], rt::str("index ", d, " of ", buffer->name));
    if (!rt::is_int(i->dtype) && i->dtype != rt::DType::Bool)
      error_at(locs[d], rt::str("index ", d, " of '", buffer->name, "' must be an integer, not ", rt::name(i->dtype)));
    if (offset) i = ir::add(offset, i, locs[d]);
    ranges.push_back({i, ir::make_int(1, i->dtype)});
  }
  if (!any_slice) {
    std::vector<ir::Expr> idx;
    for (const ir::Range& r : ranges) idx.push_back(r.min);
    return ExprV{ir::make_load(buffer, std::move(idx), loc)};
  }
  return RegionV{ir::Region{buffer, std::move(ranges), loc}};
}

Value Elaborator::eval_call(const ast::CallExpr& c) {
  Value callee = eval(*c.func);
  Args args;
  for (const auto& a : c.args) {
    args.positional.push_back(eval(*a));
    args.positional_locs.push_back(a->loc);
  }
  for (const ast::Keyword& k : c.keywords) {
    args.keywords.push_back({k.name, eval(*k.value)});
    args.keyword_locs.push_back(k.loc);
  }
  return call(callee, std::move(args), c.loc, ast::print(*c.func));
}

Value Elaborator::call(const Value& callee, Args args, const SourceLoc& loc, const std::string& callee_text) {
  if (const BuiltinV* b = callee.get_if<BuiltinV>()) return call_builtin(b->name, args, loc);
  if (const FunctionV* f = callee.get_if<FunctionV>()) return call_function(*f, std::move(args), loc);
  if (const DTypeV* d = callee.get_if<DTypeV>()) {
    // T.float32(x): a cast; T.float32() alone is not meaningful.
    if (args.positional.size() != 1) error_at(loc, rt::str(callee_text, "(x) converts one value to ", rt::name(d->dtype)));
    const Value& v = args.positional[0];
    if (is_number(v) && !staged()) {
      if (rt::is_float(d->dtype)) {
        // A number of that type, as the same call inside a kernel gives it (rounded once, by the
        // compiler's constant folding), held as a Python float.
        const ir::Expr literal =
            v.is<double>() ? ir::make_float(v.get<double>(), rt::DType::F64, loc) : ir::make_int(as_int(v), rt::DType::I64, loc);
        if (const auto* f = ir::as<ir::FloatImmNode>(ir::cast(d->dtype, literal, loc))) return f->value;
        return as_double(v);  // (a format the folding does not round: kept as given)
      }
      return v.is<double>() ? float_to_int(v.get<double>(), loc, callee_text) : as_int(v);
    }
    return ExprV{ir::convert(d->dtype, to_expr(v, args.positional_locs[0], "the value to convert"), loc)};
  }
  if (const ModuleV* m = callee.get_if<ModuleV>())
    error_at(loc, rt::str("'", callee_text, "' (from module ", m->name, ") is not supported: kernels cannot call into Python libraries"));
  error_at(loc, rt::str("'", callee_text, "' is not callable (it is ", type_name(callee), ")"));
}

bool Elaborator::truthy(const Value& v, const SourceLoc& loc) {
  if (auto b = v.get_if<bool>()) return *b;
  if (auto i = v.get_if<int64_t>()) return *i != 0;
  if (auto d = v.get_if<double>()) return *d != 0.0;
  if (auto s = v.get_if<std::string>()) return !s->empty();
  if (v.is<NoneV>()) return false;
  if (auto t = v.get_if<TupleV>()) return !t->items.empty();
  if (auto e = v.get_if<ExprV>()) {
    if (auto c = ir::as_const_int(e->expr)) return *c != 0;
    error_at(loc, "this condition is only known at run time; it can only be used inside a kernel");
  }
  return true;
}

// ---------------------------------------------------------------- conversions

std::pair<ir::Expr, ir::Expr> Elaborator::operands(const Value& a, const Value& b, const SourceLoc& loc, const std::string& what) {
  std::optional<ir::Expr> ea = try_expr(a), eb = try_expr(b);
  if (!ea) error_at(loc, rt::str("unsupported ", what, ": ", type_name(a), " (", describe(a), ")"));
  if (!eb) error_at(loc, rt::str("unsupported ", what, ": ", type_name(b), " (", describe(b), ")"));
  // A Python number next to a runtime value takes that value's type (weak typing), so `x * 2`
  // keeps x's dtype and `i + 0.5` is float32. An int that type cannot hold keeps its own type
  // (int32, or int64 past it), and the usual promotion follows: `x_i8 < 200` compares in int32
  // (as int8, 200 would be -56), `i * 2**40` multiplies in int64.
  auto weak = [&](const Value& v, ir::Expr& e, const ir::Expr& other) {
    if (!is_number(v) || !(other->kind != ir::NodeKind::IntImm && other->kind != ir::NodeKind::FloatImm)) return;
    if (v.is<double>()) e = ir::make_float(as_double(v), rt::is_float(other->dtype) ? other->dtype : rt::DType::F32, loc);
    else if (rt::is_float(other->dtype)) e = ir::make_float(as_double(v), other->dtype, loc);
    else if (rt::is_int(other->dtype) && ir::holds(other->dtype, as_int(v))) e = ir::make_int(as_int(v), other->dtype, loc);
  };
  weak(a, *ea, *eb);
  weak(b, *eb, *ea);
  return {*ea, *eb};
}

std::optional<ir::Expr> Elaborator::try_expr(const Value& value) {
  if (auto b = value.get_if<bool>()) return ir::make_bool(*b);
  if (auto i = value.get_if<int64_t>()) return ir::make_int(*i, (*i > INT32_MAX || *i < INT32_MIN) ? rt::DType::I64 : rt::DType::I32);
  if (auto d = value.get_if<double>()) return ir::make_float(*d, rt::DType::F32);
  if (auto e = value.get_if<ExprV>()) return e->expr;
  if (auto b = value.get_if<BufferV>(); b && b->buffer->shape.empty()) return ir::make_load(b->buffer, {});
  return std::nullopt;
}

ir::Expr Elaborator::to_expr(const Value& value, const SourceLoc& loc, const std::string& what) {
  if (auto e = try_expr(value)) return *e;
  if (const BufferV* b = value.get_if<BufferV>())
    error_at(loc, rt::str(what, " must be a scalar, but '", b->buffer->name, "' is a whole tensor of shape ", ir::shape_string(b->buffer->shape),
                          "; index it (", b->buffer->name, "[i, ...])"));
  error_at(loc, rt::str(what, " must be a number, not ", type_name(value), " (", describe(value), ")"));
}

int64_t Elaborator::to_int(const Value& value, const SourceLoc& loc, const std::string& what) {
  if (value.is<int64_t>() || value.is<bool>()) return as_int(value);
  if (const ExprV* e = value.get_if<ExprV>())
    if (auto c = ir::as_const_int(e->expr)) return *c;
  error_at(loc, rt::str(what, " must be an integer known at compile time, not ", type_name(value), " (", describe(value), ")"));
}

rt::DType Elaborator::to_dtype(const Value& value, const SourceLoc& loc, const std::string& what) {
  if (const DTypeV* d = value.get_if<DTypeV>()) return d->dtype;
  if (const std::string* s = value.get_if<std::string>()) {
    if (auto d = dtype_from_name(*s)) return *d;
    error_at(loc, rt::str(what, ": unknown dtype '", *s, "' (try float16, bfloat16, float32, float8_e4m3, int8, int32)"));
  }
  error_at(loc, rt::str(what, " must be a dtype such as \"float16\" or T.float32, not ", type_name(value)));
}

std::vector<ir::Expr> Elaborator::to_shape(const Value& value, const SourceLoc& loc, const std::string& what) {
  std::vector<ir::Expr> shape;
  if (const TupleV* t = value.get_if<TupleV>()) {
    for (const Value& d : t->items) shape.push_back(to_expr(d, loc, rt::str("a dimension of ", what)));
  } else {
    shape.push_back(to_expr(value, loc, rt::str("the shape of ", what)));
  }
  for (ir::Expr& d : shape) {
    if (!rt::is_int(d->dtype)) error_at(loc, rt::str("dimensions of ", what, " must be integers, not ", rt::name(d->dtype)));
    if (auto c = ir::as_const_int(d); c && *c < 0) error_at(loc, rt::str("dimensions of ", what, " must not be negative (got ", *c, ")"));
  }
  return shape;
}

ir::Region Elaborator::to_region(const Value& value, const SourceLoc& loc, const std::string& what, bool* is_point) {
  if (is_point) *is_point = false;
  if (const BufferV* b = value.get_if<BufferV>()) return ir::full_region(b->buffer, loc);
  if (const RegionV* r = value.get_if<RegionV>()) return r->region;
  if (const ExprV* e = value.get_if<ExprV>()) {
    if (const auto* load = ir::as<ir::BufferLoadNode>(e->expr)) {
      if (is_point) *is_point = true;
      ir::Region r{load->buffer, {}, loc};
      for (const ir::Expr& i : load->indices) r.ranges.push_back({i, ir::make_int(1, i->dtype)});
      return r;
    }
  }
  error_at(loc, rt::str(what, " must be a tensor or a slice of one, not ", type_name(value), " (", describe(value), ")"));
}

Value Elaborator::make_buffer(const std::string& fallback_name, rt::DType dtype, std::vector<ir::Expr> shape, ir::Scope scope, const SourceLoc& loc) {
  std::string name = name_hint_.empty() ? fallback_name : name_hint_;
  name_hint_.clear();
  ir::Buffer buf = ir::make_buffer(name, dtype, std::move(shape), scope, loc);
  if (scope == ir::Scope::Global) {
    // Whole-tensor temporaries of a @tile_kernel live for the whole function.
    kernel()->tensor_temps.push_back(buf);
    builder_.hoist_allocate(kernel()->depth, buf, loc);
  } else {
    builder_.emit_allocate(buf, loc);
  }
  return BufferV{buf};
}

void Elaborator::emit(ir::Stmt stmt) { builder_.emit(std::move(stmt)); }

LaunchScope* Elaborator::launch() {
  KernelScope* k = kernel();
  return k && !k->launches.empty() ? &k->launches.back() : nullptr;
}

void Elaborator::require_staged(const SourceLoc& loc, const std::string& what) {
  if (!staged() || !kernel()) error_at(loc, rt::str(what, " is only possible inside a kernel (@tile_kernel or @T.prim_func)"));
}

void Elaborator::require_inside_kernel_launch(const SourceLoc& loc, const std::string& what) {
  require_staged(loc, what);
  if (!launch()) error_at(loc, rt::str(what, " must be inside 'with T.Kernel(...)': it is about the threads and blocks of a launch"));
}

void Elaborator::require_launch(const SourceLoc& loc, const std::string& what) {
  require_staged(loc, what);
  if (kernel()->style == ir::FuncStyle::PrimFunc && !launch()) error_at(loc, rt::str(what, " must be inside 'with T.Kernel(...)'"));
}

}  // namespace tilelang::frontend
