// The compiler's public C++ API: compile a file or a string of DSL source for a target, pick a
// kernel, call it on DLPack-compatible tensors. Kernels are specialized per input shapes and dtypes
// when called, and cached in memory and (as compiled code) on disk.
//
//   auto module = tilelang::Module::load("examples/matmul.py");
//   tilelang::Kernel matmul = module.kernel("matmul");
//   std::vector<rt::Tensor> out = matmul({a, b});  // c
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rt/tensor.h"
#include "tilelang/frontend/elaborate.h"
#include "tilelang/target.h"

namespace tilelang {

// What `tl compile --emit=` prints.
enum class Stage { Ast, IR, Lowered, Cpp, Cuda, Ptx };
Stage parse_stage(const std::string& text);  // user error for unknown names

struct CompileOptions {
  Target target = Target::best();
  std::map<std::string, std::string> params;  // factory arguments (--param NAME=VALUE)
  bool wgmma_register_a = true;               // passes::PassOptions::wgmma_register_a
};

class Kernel {
 public:
  const std::string& name() const;
  const Target& target() const;
  // Runs the kernel: `inputs` bind to the tensor parameters in order; the parameters left over are
  // outputs, allocated on the target's device and returned in order.
  std::vector<rt::Tensor> operator()(const std::vector<rt::Tensor>& inputs) const;
  // Runs with every parameter given (outputs written in place).
  void launch(const std::vector<rt::Tensor>& all_params) const;
  // How many outputs a call with these inputs returns (compiles to the IR only, not to code).
  size_t output_count(const std::vector<rt::Tensor>& inputs) const;
  // The text of a stage for inputs of these dtypes and shapes (needed by @tile_kernel functions,
  // whose shapes come from their inputs; @T.prim_func kernels ignore them).
  std::string emit(Stage stage, const std::vector<frontend::TensorSpec>& inputs = {}) const;

 private:
  friend class Module;
  struct State;
  std::shared_ptr<State> state_;
};

class Module {
 public:
  static Module load(const std::string& path);
  static Module from_source(const std::string& source, const std::string& name = "<string>");

  std::vector<frontend::KernelInfo> kernels() const;
  // The kernel (or factory) of that name; an empty name picks the file's only kernel.
  Kernel kernel(const std::string& name = "", const CompileOptions& options = {}) const;
  std::string ast_text() const;  // the --emit=ast stage

 private:
  std::shared_ptr<const ast::Module> ast_;
};

// A spec of a tensor: dtype and concrete shape.
frontend::TensorSpec spec_of(const rt::Tensor& tensor);

}  // namespace tilelang
