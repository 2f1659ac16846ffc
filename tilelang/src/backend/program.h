// A kernel compiled for one target and ready to run: what module.cc holds per specialization.
// Each backend (cpu_program, cuda_program) builds one from lowered IR.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "rt/embedded_file.h"
#include "rt/tensor.h"
#include "tilelang/ir/ir.h"
#include "tilelang/target.h"

namespace tilelang::backend {

class Program {
 public:
  virtual ~Program() = default;
  // The symbolic dimensions run() expects values for, in order.
  virtual const std::vector<ir::Var>& dim_vars() const = 0;
  // Runs with one tensor per parameter (on the target's device), the dimensions' values in order.
  virtual void run(const std::vector<rt::Tensor>& params, const std::vector<int64_t>& dims) const = 0;
};

// Generates code for the target, compiles it (disk-cached) and loads it.
std::unique_ptr<Program> build_program(const ir::PrimFunc& lowered, const Target& target);

// The device headers compiled into this library, for JIT compilers (cmake/EmbedFiles.cmake).
std::vector<rt::EmbeddedFile> device_headers();

// Turns a compiler failure on code that holds the user's own code (T.call_extern, T.inline_code)
// into a user error at the first such place, quoting the compiler's first complaint.
[[noreturn]] void report_user_code_failure(const std::vector<SourceLoc>& user_code, const std::string& log, const char* compiler);

}  // namespace tilelang::backend
