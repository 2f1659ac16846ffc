// Helpers for the numerical program tests: load a program of the repository, run it on fresh random
// inputs with poisoned outputs, compare with a float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testutil/tensors.h"
#include "tilelang/module.h"

namespace tltest {

inline std::string source_path(const std::string& rel) { return std::string(TL_SOURCE_DIR) + "/" + rel; }

inline std::string read_source(const std::string& rel) {
  std::ifstream in(source_path(rel));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline tilelang::Kernel cpu_kernel(const tilelang::Module& m, const std::string& name, std::map<std::string, std::string> params = {}) {
  tilelang::CompileOptions o;
  o.target = tilelang::Target::cpu();
  o.params = std::move(params);
  return m.kernel(name, o);
}

inline tilelang::Kernel load(const std::string& rel, const std::string& name, std::map<std::string, std::string> params = {}) {
  return cpu_kernel(tilelang::Module::load(source_path(rel)), name, std::move(params));
}

inline rt::Tensor random(const std::vector<int64_t>& shape, rt::DType dtype, double lo = -1.0, double hi = 1.0) {
  return testutil::random_tensor(shape, dtype, testutil::fresh_seed(), lo, hi);
}

inline rt::Tensor poisoned(const std::vector<int64_t>& shape, rt::DType dtype) {
  rt::Tensor t = rt::Tensor::empty(shape, dtype);
  testutil::poison(t);
  return t;
}

// Runs with every parameter given: inputs, then outputs poisoned beforehand.
inline std::vector<rt::Tensor> run(const tilelang::Kernel& k, const std::vector<rt::Tensor>& inputs,
                                   const std::vector<std::pair<std::vector<int64_t>, rt::DType>>& outputs) {
  std::vector<rt::Tensor> all = inputs, outs;
  for (const auto& [shape, dtype] : outputs) {
    outs.push_back(poisoned(shape, dtype));
    all.push_back(outs.back());
  }
  k.launch(all);
  return outs;
}

// Relative error bound for results stored in `dtype` (output rounding dominates).
inline double tolerance(rt::DType dtype) {
  switch (dtype) {
    case rt::DType::F32: return 2e-5;
    case rt::DType::F16: return 2e-3;
    case rt::DType::BF16: return 1.2e-2;
    default: return 1e-9;
  }
}

inline void expect_close(const rt::Tensor& out, const std::vector<double>& ref, const std::string& what) {
  double err = testutil::rel_error(testutil::to_f64(out), ref);
  EXPECT_LT(err, tolerance(out.dtype())) << what << " (" << rt::name(out.dtype()) << "): relative error " << err;
}

inline std::vector<double> f64(const rt::Tensor& t) { return testutil::to_f64(t); }

}  // namespace tltest
