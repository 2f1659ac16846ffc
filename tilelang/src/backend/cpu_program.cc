#include "backend/cpu_program.h"

#include "rt/cpu_info.h"
#include "rt/error.h"
#include "rt/host_compiler.h"
#include "tilelang/codegen/codegen_cpu.h"
#include "tilelang/diagnostics.h"
#include "tl/device/cpu/kernel.h"

namespace tilelang::backend {
namespace {

class CpuProgram : public Program {
 public:
  explicit CpuProgram(const ir::PrimFunc& lowered) : kernel_(lowered.name), source_(codegen::generate_cpu(lowered)) {
    try {
      // -fwrapv: the language's integer + - * wrap in two's complement, as constant folding does;
      // C++ leaves signed overflow undefined, and -O3 made INT32_MAX + 1 > INT32_MAX true.
      library_ = rt::compile_cxx(source_.code, device_headers(), rt::HostCompileOptions{.extra_flags = {"-fwrapv"}});
    } catch (const rt::Error& e) {
      if (source_.user_code.empty()) throw;  // generated code compiles; the user's own may not
      report_user_code_failure(source_.user_code, e.what(), "C++ compiler");
    }
    entry_ = reinterpret_cast<Entry>(library_->symbol(source_.entry));
  }

  const std::vector<ir::Var>& dim_vars() const override { return source_.dim_vars; }

  void run(const std::vector<rt::Tensor>& params, const std::vector<int64_t>& dims) const override {
    std::vector<void*> buffers;
    for (const rt::Tensor& t : params) buffers.push_back(t.data());
    tl::cpu::Failure failure;
    entry_(buffers.data(), dims.data(), rt::cpu_info().cores, &failure);
    if (failure.failed()) error_at(source_.sites.at(failure.site()), rt::str("kernel '", kernel_, "': ", failure.message()));
  }

 private:
  using Entry = void (*)(void* const*, const int64_t*, int, tl::cpu::Failure*);
  std::string kernel_;
  codegen::CpuSource source_;
  std::shared_ptr<rt::SharedLibrary> library_;
  Entry entry_ = nullptr;
};

}  // namespace

std::unique_ptr<Program> build_cpu_program(const ir::PrimFunc& lowered) { return std::make_unique<CpuProgram>(lowered); }

}  // namespace tilelang::backend
