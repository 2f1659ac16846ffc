// `tl demo`: compiles the seed matmul (examples/matmul.py, the automatic path) and the TileLang-style
// blocked GEMM (examples/gemm.py), runs both on the best device present on random inputs, checks
// them against a float64 reference and prints a table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "cli.h"
#include "rt/cpu_info.h"
#include "rt/cuda_device.h"
#include "rt/embedded_file.h"
#include "rt/error.h"
#include "testutil/tensors.h"

// The examples compiled into this binary (tools/tl/CMakeLists.txt).
const rt::EmbeddedFile* tl_embedded_files(std::size_t* count);

namespace tl_cli {
namespace {

std::string example(const std::string& path) {
  size_t n = 0;
  const rt::EmbeddedFile* files = tl_embedded_files(&n);
  for (size_t i = 0; i < n; ++i)
    if (path == files[i].path) return files[i].contents;
  RT_UNREACHABLE("example ", path, " is not embedded");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// C = A * B in float64 from the (already rounded) inputs.
std::vector<double> reference_matmul(const rt::Tensor& a, const rt::Tensor& b) {
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  std::vector<double> x = testutil::to_f64(a), y = testutil::to_f64(b), c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      double av = x[i * k + p];
      const double* brow = &y[p * n];
      double* crow = &c[i * n];
      for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  return c;
}

struct Row {
  std::string kernel, shape, dtype, device;
  double compile_s, run_ms, gflops, error;
};

Row measure(const std::string& label, const tilelang::Kernel& kernel, int64_t m, int64_t n, int64_t k, rt::DType dtype) {
  rt::Tensor a = testutil::random_tensor({m, k}, dtype, testutil::fresh_seed());
  rt::Tensor b = testutil::random_tensor({k, n}, dtype, testutil::fresh_seed());
  rt::Device device = kernel.target().kind == tilelang::Target::Kind::CUDA ? rt::Device::cuda(0) : rt::Device::cpu();
  std::vector<rt::Tensor> in = {a.to(device), b.to(device)};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<rt::Tensor> out = kernel(in);  // the first call compiles (or loads from the disk cache)
  out.at(0).to(rt::Device::cpu());           // and waits for the device
  double compile_s = seconds_since(t0);
  std::vector<double> times;
  for (int r = 0; r < 5; ++r) {
    auto t1 = std::chrono::steady_clock::now();
    out = kernel(in);
    if (device.is_cuda()) out.at(0).to(rt::Device::cpu());  // a copy back waits for the kernel (and is counted)
    times.push_back(seconds_since(t1) * 1e3);
  }
  std::sort(times.begin(), times.end());
  double ms = times[times.size() / 2];
  double err = testutil::rel_error(testutil::to_f64(out.at(0).to(rt::Device::cpu())), reference_matmul(a, b));
  return {label, rt::str(m, "x", n, "x", k), rt::name(dtype), kernel.target().name(), compile_s, ms, 2.0 * m * n * k / (ms * 1e-3) / 1e9, err};
}

}  // namespace

int demo_command(const Options& o) {
  tilelang::CompileOptions copts = compile_options(o);
  const rt::CpuInfo& cpu = rt::cpu_info();
  if (copts.target.kind == tilelang::Target::Kind::CUDA)
    std::printf("TileLang demo on %s (%s)\n\n", copts.target.name().c_str(), rt::cuda_device(0).name.c_str());
  else
    std::printf("TileLang demo on %s (%s, %d cores)\n\n", copts.target.name().c_str(), cpu.model.c_str(), cpu.cores);
  std::vector<Row> rows;

  tilelang::Module seed = tilelang::Module::from_source(example("examples/matmul.py"), "examples/matmul.py");
  rows.push_back(measure("seed matmul (automatic)", seed.kernel("matmul", copts), 1024, 1024, 1024, rt::DType::F16));

  const int64_t size = 1024;
  tilelang::CompileOptions gemm_opts = copts;
  gemm_opts.params = {{"M", std::to_string(size)}, {"N", std::to_string(size)}, {"K", std::to_string(size)}};
  tilelang::Module gemm = tilelang::Module::from_source(example("examples/gemm.py"), "examples/gemm.py");
  rows.push_back(measure("blocked GEMM (T.gemm)", gemm.kernel("matmul", gemm_opts), size, size, size, rt::DType::F16));

  std::printf("%-26s %-16s %-8s %-8s %11s %10s %10s %10s\n", "kernel", "shape (MxNxK)", "dtype", "device", "compile (s)", "time (ms)", "GFLOP/s", "rel.error");
  bool ok = true;
  for (const Row& r : rows) {
    std::printf("%-26s %-16s %-8s %-8s %11.2f %10.3f %10.1f %10.2e\n", r.kernel.c_str(), r.shape.c_str(), r.dtype.c_str(), r.device.c_str(),
                r.compile_s, r.run_ms, r.gflops, r.error);
    ok &= r.error < 2e-3;  // f16 output rounding is about 3e-4 relative
  }
  std::printf("\n%s\n", ok ? "all results match the float64 reference" : "MISMATCH against the float64 reference");
  return ok ? 0 : 1;
}

}  // namespace tl_cli
