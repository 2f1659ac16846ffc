#include "tilelang/autotune.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "rt/cuda_device.h"
#include "rt/cuda_stream.h"
#include "rt/disk_cache.h"
#include "rt/error.h"
#include "rt/hash.h"

namespace tilelang {
namespace {

// What identifies a tuning decision: the program, the kernel, its fixed parameters, the space, the
// inputs' dtypes and shapes, and the device (by name: the same GPU model decides the same way).
std::string decision_key(const Module& module, const std::string& kernel, const CompileOptions& options, const TuneSpace& space,
                         const std::vector<rt::Tensor>& inputs) {
  rt::Hasher h;
  h.field("tilelang autotune 1").field(module.ast_text()).field(kernel).field(options.target.name());
  h.field(options.target.kind == Target::Kind::CUDA && rt::cuda_device_count() > 0 ? rt::cuda_device(0).name : "cpu");
  for (const auto& [name, value] : options.params) h.field(name).field(value);
  for (const auto& [name, values] : space) {
    h.field(name);
    for (const std::string& v : values) h.field(v);
  }
  for (const rt::Tensor& t : inputs) h.field(rt::name(t.dtype())).field(t.shape_string());
  return h.hex();
}

// The cache entry: "name=value" lines of the best parameters, then "ms=<time>".
std::string encode(const std::map<std::string, std::string>& best, double ms) {
  std::ostringstream out;
  for (const auto& [name, value] : best) out << name << '=' << value << '\n';
  out << "ms=" << ms << '\n';
  return out.str();
}
bool decode(const std::string& text, const TuneSpace& space, std::map<std::string, std::string>& best, double& ms) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) return false;
    std::string name = line.substr(0, eq), value = line.substr(eq + 1);
    if (name == "ms") ms = std::stod(value);
    else best[name] = value;
  }
  return best.size() == space.size();
}

// Every combination of the space's values, the last parameter varying fastest.
std::vector<std::map<std::string, std::string>> candidates(const TuneSpace& space) {
  std::vector<std::map<std::string, std::string>> out{{}};
  for (const auto& [name, values] : space) {
    std::vector<std::map<std::string, std::string>> next;
    for (const auto& partial : out)
      for (const std::string& v : values) {
        next.push_back(partial);
        next.back()[name] = v;
      }
    out = std::move(next);
  }
  return out;
}

double median_ms(const Kernel& k, const std::vector<rt::Tensor>& all, const TuneOptions& tune) {
  if (k.target().kind == Target::Kind::CUDA) {
    rt::CudaTimer timer(nullptr, all.empty() ? 0 : all[0].device().id, rt::CudaTimer::Options{tune.warmup, tune.repeat, false});
    return timer.median_ms([&](rt::CuStream) { k.launch(all); });
  }
  for (int i = 0; i < tune.warmup; ++i) k.launch(all);
  std::vector<double> ms;
  for (int i = 0; i < tune.repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    k.launch(all);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

TuneResult autotune(const Module& module, const std::string& kernel_name, const CompileOptions& options, const TuneSpace& space,
                    const std::vector<rt::Tensor>& inputs, const TuneOptions& tune) {
  // No name picks the file's only kernel (Module::kernel); messages name it.
  std::string kernel = kernel_name;
  if (kernel.empty())
    if (std::vector<frontend::KernelInfo> all = module.kernels(); all.size() == 1) kernel = all[0].name;
  RT_USER_CHECK(!space.empty(), "autotune of '", kernel, "': no free parameters to tune");
  RT_USER_CHECK(tune.repeat > 0 && tune.warmup >= 0, "autotune of '", kernel, "': repeat must be positive and warmup not negative");
  for (size_t i = 0; i < space.size(); ++i) {
    const auto& [name, values] = space[i];
    RT_USER_CHECK(!values.empty(), "autotune of '", kernel, "': parameter '", name, "' has no candidate values");
    RT_USER_CHECK(!options.params.count(name), "autotune of '", kernel, "': parameter '", name, "' is both fixed (", options.params.at(name),
                  ") and tuned");
    for (size_t j = 0; j < i; ++j) RT_USER_CHECK(space[j].first != name, "autotune of '", kernel, "': parameter '", name, "' is listed twice");
  }
  TuneResult result;
  result.options = options;
  const rt::DiskCache cache;
  const std::string path = cache.path_for(decision_key(module, kernel, options, space, inputs), ".tune");
  if (tune.use_cache)
    if (auto text = cache.read(path); text && decode(*text, space, result.best, result.best_ms)) {
      result.from_cache = true;
      for (const auto& [name, value] : result.best) result.options.params[name] = value;
      return result;
    }
  for (const auto& params : candidates(space)) {
    TuneTrial trial;
    trial.params = params;
    CompileOptions o = options;
    for (const auto& [name, value] : params) o.params[name] = value;
    try {
      Kernel k = module.kernel(kernel, o);
      std::vector<rt::Tensor> all = inputs;
      for (rt::Tensor& out : k(inputs)) all.push_back(std::move(out));  // compiles, runs once, and gives the outputs
      trial.ms = median_ms(k, all, tune);
      if (result.best.empty() || trial.ms < result.best_ms) result.best = params, result.best_ms = trial.ms;
    } catch (const rt::Error& e) {
      trial.error = e.what();
    }
    result.trials.push_back(std::move(trial));
  }
  if (result.best.empty()) {
    std::string why;
    for (const TuneTrial& t : result.trials)
      if (why.size() < 2000) why += "\n  " + t.error;
    rt::throw_user_error(rt::str("autotune of '", kernel, "': every one of the ", result.trials.size(), " candidates failed:", why));
  }
  for (const auto& [name, value] : result.best) result.options.params[name] = value;
  if (tune.use_cache) cache.write_atomic(path, encode(result.best, result.best_ms));
  return result;
}

}  // namespace tilelang
