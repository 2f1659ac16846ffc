// Helpers for the numerical program tests: load a program of the repository, run it on fresh random
// inputs with poisoned outputs, compare with a float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testutil/environment.h"
#include "testutil/tensors.h"
#include "tilelang/module.h"

namespace tltest {

using testutil::source_path;

inline std::string read_source(const std::string& rel) {
  std::ifstream in(source_path(rel));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The target the program tests run on: the CPU, or TL_TEST_TARGET (e.g. "cuda" on a GPU machine;
// scripts/gpu_check.sh runs the suite that way).
inline tilelang::Target test_target() {
  const char* t = std::getenv("TL_TEST_TARGET");
  return t && *t ? tilelang::Target::parse(t) : tilelang::Target::cpu();
}
inline bool on_gpu() { return test_target().kind == tilelang::Target::Kind::CUDA; }

// Runs `body` (a kernel's launches) whose tiling was sized for sm_90a's 227 KB of shared memory a
// block: on an older target (TL_TEST_TARGET=cuda:sm_80, 163 KB) the compiler may refuse the kernel
// with its located shared-memory error; then it returns false with the error's first line in `why`
// (the caller skips the test). On sm_90a and the CPU that error propagates, as every other does.
template <class Body>
bool runs_unless_too_big_for_target(Body body, std::string* why) {
  try {
    body();
    return true;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (!on_gpu() || test_target().sm() >= 90 || what.find("bytes of shared memory") == std::string::npos) throw;
    *why = what.substr(0, what.find('\n'));
    return false;
  }
}

inline tilelang::Kernel cpu_kernel(const tilelang::Module& m, const std::string& name, std::map<std::string, std::string> params = {}) {
  tilelang::CompileOptions o;
  o.target = test_target();
  o.params = std::move(params);
  return m.kernel(name, o);
}

inline tilelang::Kernel load(const std::string& rel, const std::string& name, std::map<std::string, std::string> params = {}) {
  return cpu_kernel(tilelang::Module::load(source_path(rel)), name, std::move(params));
}

inline rt::Tensor random(const std::vector<int64_t>& shape, rt::DType dtype, double lo = -1.0, double hi = 1.0) {
  return testutil::random_tensor(shape, dtype, testutil::fresh_seed(), lo, hi);
}

using testutil::poisoned;

// Runs with every parameter given (copied to the target's device and back): inputs, then outputs
// poisoned beforehand. Returns the outputs on the host.
inline std::vector<rt::Tensor> run(const tilelang::Kernel& k, const std::vector<rt::Tensor>& inputs,
                                   const std::vector<std::pair<std::vector<int64_t>, rt::DType>>& outputs) {
  rt::Device device = on_gpu() ? rt::Device::cuda(0) : rt::Device::cpu();
  std::vector<rt::Tensor> all, outs;
  for (const rt::Tensor& t : inputs) all.push_back(t.to(device));
  for (const auto& [shape, dtype] : outputs) all.push_back(poisoned(shape, dtype).to(device));
  k.launch(all);
  for (size_t i = inputs.size(); i < all.size(); ++i) outs.push_back(all[i].to(rt::Device::cpu()));
  return outs;
}

// A copy of `t` on `device` whose data starts one element past an aligned address, as an offset view
// (x[1:]) of a larger tensor does.
inline rt::Tensor unaligned_copy(const rt::Tensor& t, rt::Device device) {
  const int64_t elem = t.element_size_bits() / 8;
  rt::Tensor host = rt::Tensor::empty({t.numel() + 1}, t.dtype());
  std::memcpy(static_cast<char*>(host.data()) + elem, t.data(), static_cast<size_t>(t.nbytes()));
  rt::Tensor moved = host.to(device);
  return rt::Tensor::wrap(static_cast<char*>(moved.data()) + elem, t.shape(), t.dtype(), device, {}, moved.storage());
}

// Like run(), with every tensor at an unaligned address.
inline std::vector<rt::Tensor> run_unaligned(const tilelang::Kernel& k, const std::vector<rt::Tensor>& inputs,
                                             const std::vector<std::pair<std::vector<int64_t>, rt::DType>>& outputs) {
  rt::Device device = on_gpu() ? rt::Device::cuda(0) : rt::Device::cpu();
  std::vector<rt::Tensor> all, outs;
  for (const rt::Tensor& t : inputs) all.push_back(unaligned_copy(t, device));
  for (const auto& [shape, dtype] : outputs) all.push_back(unaligned_copy(poisoned(shape, dtype), device));
  k.launch(all);
  for (size_t i = inputs.size(); i < all.size(); ++i) outs.push_back(all[i].to(rt::Device::cpu()));
  return outs;
}

// Runs with every parameter given and updated in place (atomics), copied to the device and back.
inline void run_in_place(const tilelang::Kernel& k, std::vector<rt::Tensor>& tensors) {
  rt::Device device = on_gpu() ? rt::Device::cuda(0) : rt::Device::cpu();
  std::vector<rt::Tensor> all;
  for (const rt::Tensor& t : tensors) all.push_back(t.to(device));
  k.launch(all);
  for (size_t i = 0; i < all.size(); ++i) tensors[i] = all[i].to(rt::Device::cpu());
}

// Relative error bound for results stored in `dtype` (output rounding dominates).
inline double tolerance(rt::DType dtype) {
  switch (dtype) {
    case rt::DType::F32: return 2e-5;
    case rt::DType::F16: return 2e-3;
    case rt::DType::BF16: return 1.2e-2;
    // Outputs rounded to float8: half an ulp is 2^-4 (e4m3) or 2^-3 (e5m2) of a value, ~0.4 of
    // that norm-wise on random data.
    case rt::DType::F8E4M3: return 4e-2;
    case rt::DType::F8E5M2: return 8e-2;
    default: return 1e-9;
  }
}

inline std::vector<double> f64(const rt::Tensor& t) { return testutil::to_f64(t.to(rt::Device::cpu())); }

inline void expect_close(const rt::Tensor& out, const std::vector<double>& ref, const std::string& what) {
  double err = testutil::rel_error(f64(out), ref);
  EXPECT_LT(err, tolerance(out.dtype())) << what << " (" << rt::name(out.dtype()) << "): relative error " << err;
}


}  // namespace tltest
