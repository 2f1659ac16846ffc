// The elaborator's internals, shared by elaborator.cc (statements, expressions, kernels) and
// builtins.cc (the functions of `T.`, the seed builtins and Python's own). See elaborate.h.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tilelang/frontend/elaborate.h"
#include "tilelang/frontend/stmt_builder.h"
#include "tilelang/frontend/value.h"

namespace tilelang::frontend {

// One T.Kernel launch being built.
struct LaunchScope {
  std::vector<ir::Var> block_vars;
  ir::Var thread_var;
  std::vector<int64_t> thread_dims;
  int swizzle_panel = 0;
  size_t depth = 0;  // builder depth of the launch body
};

// One kernel function being built.
struct KernelScope {
  ir::FuncStyle style;
  std::vector<ir::Param> params;
  size_t depth = 0;                         // builder depth of the function body
  std::vector<ir::Buffer> tensor_temps;     // @tile_kernel: zeros()/empty() buffers, allocated at the top
  std::vector<ir::Buffer> returned;         // @tile_kernel: buffers given back, in order
  std::vector<LaunchScope> launches;        // nested T.Kernel scopes (at most one deep)
};

// A function activation: its names and whether its statements become IR.
struct Frame {
  std::shared_ptr<Env> env;
  const ast::FunctionDef* def = nullptr;
  bool staged = false;              // statements become IR (kernel bodies and helpers called from them)
  std::set<std::string> reassigned; // names assigned more than once: mutable scalars when staged
  size_t staged_control_depth = 0;  // runtime if/for nesting, where `return` is not allowed
  std::optional<Value> returned;
};

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  std::vector<SourceLoc> positional_locs;
  std::vector<SourceLoc> keyword_locs;
};

class Elaborator {
 public:
  explicit Elaborator(std::shared_ptr<const ast::Module> module);
  ir::PrimFunc build(const ElaborateRequest& request);

  // ---- used by builtins.cc
  Value call(const Value& callee, Args args, const SourceLoc& loc, const std::string& callee_text);
  Value call_builtin(const std::string& name, Args& args, const SourceLoc& loc);
  ir::Expr to_expr(const Value& value, const SourceLoc& loc, const std::string& what);
  std::optional<ir::Expr> try_expr(const Value& value);
  // Both operands of a binary operation as IR, with Python numbers typed like the other side.
  std::pair<ir::Expr, ir::Expr> operands(const Value& a, const Value& b, const SourceLoc& loc, const std::string& what);
  int64_t to_int(const Value& value, const SourceLoc& loc, const std::string& what);
  rt::DType to_dtype(const Value& value, const SourceLoc& loc, const std::string& what);
  ir::Region to_region(const Value& value, const SourceLoc& loc, const std::string& what, bool* is_point = nullptr);
  std::vector<ir::Expr> to_shape(const Value& value, const SourceLoc& loc, const std::string& what);
  // Allocates a buffer named after the assignment being evaluated (else fallback_name).
  Value make_buffer(const std::string& fallback_name, rt::DType dtype, std::vector<ir::Expr> shape, ir::Scope scope, const SourceLoc& loc);
  void emit(ir::Stmt stmt);
  bool staged() const { return !frames_.empty() && frames_.back()->staged; }
  KernelScope* kernel() { return kernels_.empty() ? nullptr : kernels_.back().get(); }
  LaunchScope* launch();
  void require_staged(const SourceLoc& loc, const std::string& what);
  void require_launch(const SourceLoc& loc, const std::string& what);  // in a launch, or anywhere in a @tile_kernel
  void require_inside_kernel_launch(const SourceLoc& loc, const std::string& what);
  Value binary_op(ast::BinOpKind op, const Value& a, const Value& b, const SourceLoc& loc);

 private:
  enum class Flow { Normal, Return, Break, Continue };

  void run_module();
  Flow exec_block(const ast::Body& body);
  Flow exec(const ast::Stmt& stmt);
  void exec_assign(const ast::Expr& target, const Value& value, const SourceLoc& loc);
  void exec_for(const ast::ForStmt& s);
  Flow exec_if(const ast::IfStmt& s);
  void exec_with(const ast::WithStmt& s);
  void exec_return(const ast::ReturnStmt& s);
  Value eval(const ast::Expr& expr);
  Value eval_attribute(const ast::AttributeExpr& e);
  Value eval_subscript(const ast::SubscriptExpr& e);
  Value eval_call(const ast::CallExpr& e);
  Value eval_compare(const ast::CompareExpr& e);
  Value eval_unary(const ast::UnaryOpExpr& e);
  Value index_value(const Value& base, const std::vector<Value>& index, const std::vector<SourceLoc>& locs, const SourceLoc& loc);
  bool truthy(const Value& v, const SourceLoc& loc);
  Value define_function(std::shared_ptr<const ast::FunctionDef> def);
  Value call_function(const FunctionV& f, Args args, const SourceLoc& loc);
  ir::PrimFunc stage_kernel(const FunctionV& f, const std::string& name, const std::vector<TensorSpec>* specs, const SourceLoc& call_loc);
  Value parse_param(const std::string& name, const std::string& text, const SourceLoc& loc);
  Value stage_loop(const ast::ForStmt& s, const LoopV& loop);
  void bind_loop_target(const ast::Expr& target, const std::vector<ir::Expr>& values);
  void assign_scalar_name(const std::string& name, const Value& value, const SourceLoc& loc);
  void store(const ir::Region& target, bool point, const Value& value, const SourceLoc& loc);

  std::shared_ptr<const ast::Module> module_;
  std::shared_ptr<Env> globals_;
  std::vector<Frame*> frames_;
  std::vector<std::unique_ptr<KernelScope>> kernels_;
  StmtBuilder builder_;
  int call_depth_ = 0;
  std::string name_hint_;  // the plain name being assigned, for buffers the value creates

  Frame& frame() { return *frames_.back(); }
};

// Compile-time integer arithmetic as in Python (floor division, modulo with the divisor's sign),
// within the 64 bits kernel integers have: a result that does not fit, a negative shift count and a
// division by zero are errors at loc. op is one of + - * // % ** << >> | ^ &.
int64_t int_op(ast::BinOpKind op, int64_t x, int64_t y, const SourceLoc& loc);
// A Python float converted to an integer by fn ("int", "T.int32", ...), truncating as Python does;
// NaN, infinities and values beyond 64 bits are errors at loc.
int64_t float_to_int(double d, const SourceLoc& loc, const std::string& fn);
// -x, or abs(x) of a negative x (fn: "-" or "abs"), with the same check.
int64_t int_neg(int64_t x, const SourceLoc& loc, const char* fn);

// Binds every member of `T.` by its bare name (for `from tilelang.language import *`).
void bind_language_names(Env& env);

// "rt::DType of a dtype spelling": the names users write for dtypes in both dialects (FP16, "float16", T.float16).
std::optional<rt::DType> dtype_from_name(const std::string& name);

}  // namespace tilelang::frontend
