// `tl run`, `tl compile` and `tl tune`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <variant>

#include "cli.h"
#include "rt/error.h"
#include "rt/npy.h"
#include "testutil/tensors.h"
#include "tilelang/autotune.h"

namespace tl_cli {

tilelang::CompileOptions compile_options(const Options& o) {
  tilelang::CompileOptions c;
  c.target = o.target.empty() ? tilelang::Target::best() : tilelang::Target::parse(o.target);
  c.params = o.params;
  return c;
}

namespace {

// "a.npy", or "a.npy:bfloat16" for files whose elements np.save left untyped (ml_dtypes arrays).
rt::Tensor read_input(const std::string& arg) {
  size_t colon = arg.rfind(':');
  if (colon != std::string::npos) {
    if (auto dtype = rt::parse_dtype(arg.substr(colon + 1))) return rt::read_npy(arg.substr(0, colon), *dtype);
  }
  return rt::read_npy(arg);
}

void need_file(const Options& o, const char* cmd) { RT_USER_CHECK(!o.file.empty(), "tl ", cmd, ": which file? (tl ", cmd, " FILE ...)"); }

// The file an --inout argument names ("s.npy:bfloat16" -> "s.npy").
std::string inout_path(const std::string& arg) {
  size_t colon = arg.rfind(':');
  return colon != std::string::npos && rt::parse_dtype(arg.substr(colon + 1)) ? arg.substr(0, colon) : arg;
}

// The files a run writes, as (flag, path).
std::vector<std::pair<std::string, std::string>> result_files(const Options& o) {
  std::vector<std::pair<std::string, std::string>> written;
  for (size_t i : o.inouts) written.emplace_back("--inout", inout_path(o.inputs[i]));
  for (const std::string& path : o.outputs) written.emplace_back("--out", path);
  return written;
}

// A result whose directory is missing could not be written after the run: say so before it.
void check_result_directories(const Options& o) {
  for (const auto& [flag, path] : result_files(o)) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (dir.empty() || std::filesystem::is_directory(dir, ec)) continue;
    rt::throw_user_error(rt::str(path, ": error: cannot write the ", flag, " file: ",
                                 std::filesystem::exists(dir, ec) ? "'" + dir.string() + "' is not a directory"
                                                                  : "there is no directory '" + dir.string() + "'"));
  }
}

// Two results written to one file would silently leave only the later; a device such as /dev/null
// can take any number.
void check_distinct_results(const Options& o) {
  const std::vector<std::pair<std::string, std::string>> written = result_files(o);
  auto key = [](const std::string& path) {
    std::error_code ec;
    const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
    return ec ? std::filesystem::path(path) : canonical;
  };
  for (size_t i = 0; i < written.size(); ++i) {
    std::error_code ec;
    if (std::filesystem::exists(written[i].second, ec) && !std::filesystem::is_regular_file(written[i].second, ec)) continue;
    for (size_t j = 0; j < i; ++j)
      RT_USER_CHECK(key(written[i].second) != key(written[j].second), written[j].first, " ", written[j].second, " and ", written[i].first, " ",
                    written[i].second, " name the same file: the second write would replace the first");
  }
}

}  // namespace

int run_command(const Options& o) {
  need_file(o, "run");
  RT_USER_CHECK(o.shapes.empty(), "tl run takes real inputs (--in X.npy), not --shape");
  check_distinct_results(o);
  check_result_directories(o);
  tilelang::Module module = tilelang::Module::load(o.file);
  tilelang::Kernel kernel = module.kernel(o.kernel, compile_options(o));
  std::vector<rt::Tensor> inputs;
  for (const std::string& arg : o.inputs) inputs.push_back(read_input(arg));
  // A kernel updates an --inout tensor in place (T.atomic_add targets, accumulators): it lives on
  // the target's device for the run (a host copy would take the update) and goes back to its file.
  const rt::Device device = kernel.target().kind == tilelang::Target::Kind::CPU ? rt::Device::cpu() : rt::Device::cuda(0);
  for (size_t i : o.inouts) inputs[i] = inputs[i].to(device);
  size_t n_out = kernel.output_count(inputs);
  RT_USER_CHECK(o.outputs.size() <= n_out, "kernel '", kernel.name(), "' has ", n_out, " output", n_out == 1 ? "" : "s", " but ", o.outputs.size(),
                " --out files were given");
  std::vector<rt::Tensor> outputs = kernel(inputs);
  if (o.repeat > 0) {
    std::vector<double> ms;
    for (int r = 0; r < o.repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      outputs = kernel(inputs);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s: median %.3f ms over %d runs (min %.3f ms)\n", kernel.name().c_str(), ms[ms.size() / 2], o.repeat, ms.front());
  }
  for (size_t i : o.inouts) {
    rt::write_npy(inout_path(o.inputs[i]), inputs[i].to(rt::Device::cpu()));
    std::printf("input %zu: %s %s updated -> %s\n", i + 1, rt::name(inputs[i].dtype()), inputs[i].shape_string().c_str(), inout_path(o.inputs[i]).c_str());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i < o.outputs.size()) {
      rt::write_npy(o.outputs[i], outputs[i].to(rt::Device::cpu()));
      std::printf("output %zu: %s %s -> %s\n", i + 1, rt::name(outputs[i].dtype()), outputs[i].shape_string().c_str(), o.outputs[i].c_str());
    } else {
      std::printf("output %zu: %s %s (not written: no --out for it)\n", i + 1, rt::name(outputs[i].dtype()), outputs[i].shape_string().c_str());
    }
  }
  return 0;
}

int compile_command(const Options& o) {
  need_file(o, "compile");
  RT_USER_CHECK(o.inouts.empty(), "tl compile runs nothing, so --inout has nothing to write back: use --in");
  RT_USER_CHECK(!o.emit.empty(), "tl compile needs --emit=ast|ir|lowered|cpp|cuda|ptx");
  tilelang::Stage stage = tilelang::parse_stage(o.emit);
  tilelang::Module module = tilelang::Module::load(o.file);
  if (stage == tilelang::Stage::Ast) {
    std::cout << module.ast_text();
    return 0;
  }
  tilelang::Kernel kernel = module.kernel(o.kernel, compile_options(o));
  std::vector<tilelang::frontend::TensorSpec> specs = o.shapes;
  for (const std::string& arg : o.inputs) specs.push_back(tilelang::spec_of(read_input(arg)));
  std::cout << kernel.emit(stage, specs);
  return 0;
}

}  // namespace tl_cli

namespace tl_cli {

int tune_command(const Options& o) {
  need_file(o, "tune");
  RT_USER_CHECK(o.inouts.empty(), "tl tune runs every candidate many times, so --inout has no one result to write back: use --in");
  RT_USER_CHECK(!o.space.empty(), "tl tune needs the parameters to try: --space NAME=V1,V2,...");
  tilelang::Module module = tilelang::Module::load(o.file);
  tilelang::CompileOptions options = compile_options(o);
  rt::Device device = options.target.kind == tilelang::Target::Kind::CUDA ? rt::Device::cuda(0) : rt::Device::cpu();
  // The inputs: files, or random values of the --shape specs (concrete sizes with a dtype).
  std::vector<rt::Tensor> inputs;
  for (const std::string& arg : o.inputs) inputs.push_back(read_input(arg).to(device));
  for (const tilelang::frontend::TensorSpec& spec : o.shapes) {
    std::vector<int64_t> shape;
    for (const tilelang::frontend::Dim& d : spec.shape) {
      const int64_t* n = std::get_if<int64_t>(&d);
      RT_USER_CHECK(n, "tl tune: --shape needs concrete sizes (inputs are generated), not a symbol");
      shape.push_back(*n);
    }
    const rt::DType dtype = spec.dtype.value_or(rt::DType::F32);
    const auto [lo, hi] = testutil::typical_range(dtype);
    inputs.push_back(testutil::random_tensor(shape, dtype, testutil::fresh_seed(), lo, hi).to(device));
  }
  tilelang::TuneResult r = tilelang::autotune(module, o.kernel, options, o.space, inputs);
  auto params = [](const std::map<std::string, std::string>& p) {
    std::string s;
    for (const auto& [name, value] : p) s += (s.empty() ? "" : " ") + name + "=" + value;
    return s;
  };
  if (r.from_cache) std::printf("from the tuning cache (delete it or change the space to tune again)\n");
  for (const tilelang::TuneTrial& t : r.trials) {
    if (t.ms >= 0) std::printf("%-48s %10.3f ms\n", params(t.params).c_str(), t.ms);
    else std::printf("%-48s     failed: %s\n", params(t.params).c_str(), t.error.substr(0, t.error.find('\n')).c_str());
  }
  std::printf("best: %s (%.3f ms) on %s\n", params(r.best).c_str(), r.best_ms, options.target.name().c_str());
  return 0;
}

}  // namespace tl_cli
