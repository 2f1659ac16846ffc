// What a name or an expression denotes while the elaborator runs a file: a compile-time Python
// value (number, string, tuple, function, module, dtype), or a piece of the kernel being built
// (a runtime scalar expression, a buffer, a region of a buffer). Python code around kernels
// (factories, constants, helper functions) runs at compile time on these values; kernel bodies
// turn them into IR.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "rt/dtype.h"
#include "tilelang/frontend/ast.h"
#include "tilelang/ir/ir.h"

namespace tilelang::frontend {

struct Env;
struct Value;

struct NoneV {};
struct TupleV {
  std::vector<Value> items;
  bool is_list = false;
};
struct DictV {
  std::vector<std::pair<Value, Value>> items;
};
struct DTypeV {
  rt::DType dtype;
};
struct ExprV {  // a scalar of the kernel: a runtime expression or a symbolic dimension
  ir::Expr expr;
};
struct BufferV {
  ir::Buffer buffer;
};
struct RegionV {  // a sliced buffer: A[0:64, k*32:(k+1)*32]
  ir::Region region;
};
struct FunctionV {  // a user-defined function and the scope it was defined in
  std::shared_ptr<const ast::FunctionDef> def;
  std::shared_ptr<Env> closure;
  std::vector<std::shared_ptr<Value>> defaults;  // evaluated at definition time, one per arg (null: none)
  enum class Decoration { None, TileKernel, PrimFunc, Macro } decoration = Decoration::None;
};
struct BuiltinV {  // a function or decorator of ours: "range", "T.copy", "zeros_like", ...
  std::string name;
};
struct ModuleV {  // "T", "tilelang", "math", or a module we only know by name ("torch")
  std::string name;
};
struct TensorTypeV {  // Tensor[FP16] or T.Tensor((M, N), "float16"): a parameter annotation
  bool has_dtype = false;
  rt::DType dtype = rt::DType::F32;
  bool has_shape = false;
  std::vector<Value> shape;  // ints or symbolic ExprV
};
struct PrimFuncV {  // an elaborated kernel, the result of calling a factory
  std::shared_ptr<const ir::PrimFunc> func;
};
enum class LoopKind { Range, Serial, Parallel, Pipelined, Unrolled, Vectorized, Grid };
struct LoopDim {
  ir::Expr min, extent;  // the loop runs `extent` times
  int64_t step = 1;      // the loop variable is min + k * step for k in [0, extent)
};
// T.Pipelined(order=..., stage=..., group=...): one entry of order and stage per group of the
// body's statements (frontend/pipeline_schedule.h); each list's location for messages.
struct PipelineSchedule {
  std::vector<int64_t> order, stage;
  std::vector<std::vector<int64_t>> group;
  SourceLoc order_loc, stage_loc, group_loc;
};
struct LoopV {  // what `for` iterates over: range(...), T.Parallel(...), T.Pipelined(...), ...
  LoopKind kind;
  std::vector<LoopDim> dims;  // one per nested loop, outermost first
  int num_stages = 0;
  std::optional<bool> warp_specialize;  // T.Pipelined(warp_specialize=...), None: unset
  std::optional<PipelineSchedule> schedule;  // T.Pipelined(order=, stage=, group=)
};
struct KernelV {  // the value of T.Kernel(...) inside `with`
  std::vector<ir::Expr> grid;
  int64_t threads = 128;
  std::vector<int64_t> thread_dims;  // threads=(x, y, z)
};

struct Value {
  using Variant = std::variant<NoneV, bool, int64_t, double, std::string, TupleV, DictV, DTypeV, ExprV, BufferV, RegionV,
                               FunctionV, BuiltinV, ModuleV, TensorTypeV, PrimFuncV, LoopV, KernelV>;
  Variant v;

  Value() = default;
  template <class T>
  Value(T x) : v(std::move(x)) {}  // NOLINT: values convert implicitly, as in Python

  template <class T> bool is() const { return std::holds_alternative<T>(v); }
  template <class T> const T& get() const { return std::get<T>(v); }
  template <class T> const T* get_if() const { return std::get_if<T>(&v); }
};

// The Python type name for messages: "int", "tuple", "tensor", "runtime float32 value", ...
std::string type_name(const Value& value);
// A short rendering for messages: 3, 'float16', (64, 32), tensor c, ...
std::string describe(const Value& value);

// Names visible at one level: a module's globals or a function's locals, with a link outwards.
struct Env {
  std::map<std::string, Value> names;
  std::shared_ptr<Env> parent;

  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value value) { names[name] = std::move(value); }
};

}  // namespace tilelang::frontend
