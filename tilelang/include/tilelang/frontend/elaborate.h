// From a parsed file to the IR of one kernel. The elaborator runs the Python around the kernel at
// compile time (imports, constants, factory functions with their arguments, helpers) and stages the
// kernel body into IR: compile-time values fold into constants, everything else becomes IR.
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "rt/dtype.h"
#include "tilelang/frontend/ast.h"
#include "tilelang/ir/ir.h"

namespace tilelang::frontend {

// A tensor argument as the kernel will be called with it. A dimension is a size, or the name of a
// size left symbolic (known only at run time). Without a dtype, the parameter's annotation gives it.
using Dim = std::variant<int64_t, std::string>;
struct TensorSpec {
  std::optional<rt::DType> dtype;
  std::vector<Dim> shape;
};

struct KernelInfo {
  enum class Kind { TileKernel, PrimFunc, Factory };
  std::string name;
  Kind kind;
  std::vector<std::string> params;       // factory arguments or tensor parameters
  std::vector<bool> param_has_default;   // factories: which arguments have defaults
  SourceLoc loc;
};

struct ElaborateRequest {
  std::string kernel;                         // empty: the file's only kernel
  std::map<std::string, std::string> params;  // factory arguments as Python literals ("1024", "'float16'", "bfloat16")
  std::vector<TensorSpec> inputs;             // @tile_kernel: one per tensor parameter, in order
};

// The kernels a file defines: functions decorated @tile_kernel or @T.prim_func at the top level, and
// factories (top-level functions that define a @T.prim_func inside and return it).
std::vector<KernelInfo> find_kernels(const ast::Module& module);

// Picks the kernel (a user error lists the choices when the name is missing or ambiguous).
const KernelInfo& select_kernel(const std::vector<KernelInfo>& kernels, const std::string& name, const ast::Module& module);

ir::PrimFunc elaborate(std::shared_ptr<const ast::Module> module, const ElaborateRequest& request);

}  // namespace tilelang::frontend
