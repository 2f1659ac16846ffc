// Helpers of the deepgemm suite: normal inputs, layout variants (transposed copies, padded strided
// views), de-quantization and the float64 reference with its error bound.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rt/error.h"
#include "rt/tensor.h"
#include "testutil/tensors.h"
#include "tl/device/numeric.h"

namespace dgtest {

// N(0, stddev^2) values rounded to dtype; `row_gain(r, c)` (if given) multiplies element (r, c) of
// the 2-d logical matrix first (to give blocks of K very different magnitudes).
inline rt::Tensor normal(const rt::Shape& shape, rt::DType dtype, uint64_t seed, double stddev = 1.0,
                         const std::function<double(int64_t, int64_t)>& gain = {}) {
  rt::Tensor t = rt::Tensor::empty(shape, dtype);
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  std::vector<double> v(size_t(t.numel()));
  const int64_t cols = shape.empty() ? 1 : shape.back();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = dist(gen);
    if (gain) v[i] *= gain(int64_t(i) / cols, int64_t(i) % cols);
  }
  testutil::from_f64(t, v);
  return t;
}

inline rt::Tensor f32_tensor(const rt::Shape& shape, const std::vector<double>& values) {
  rt::Tensor t = rt::Tensor::empty(shape, rt::DType::F32);
  testutil::from_f64(t, values);
  return t;
}

inline rt::Tensor i32_tensor(const std::vector<int32_t>& values) {
  rt::Tensor t = rt::Tensor::empty({int64_t(values.size())}, rt::DType::I32);
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

// Bytes of one element (1 for the sub-byte float4, whose tensors we never transpose here).
inline int64_t elem_bytes(rt::DType d) { return std::max(1, rt::bits(d) / 8); }

// A contiguous copy of t with its last two dimensions swapped (t: 2-d or 3-d, any strides, not fp4).
inline rt::Tensor transpose(const rt::Tensor& t) {
  const int64_t nd = t.dim();
  rt::Shape shape = t.shape();
  std::swap(shape[nd - 1], shape[nd - 2]);
  rt::Tensor out = rt::Tensor::empty(shape, t.dtype());
  const int64_t es = elem_bytes(t.dtype());
  const int64_t g = nd == 3 ? t.size(0) : 1, r = t.size(nd - 2), c = t.size(nd - 1);
  const int64_t sg = nd == 3 ? t.stride(0) : 0, sr = t.stride(nd - 2), sc = t.stride(nd - 1);
  const char* src = static_cast<const char*>(t.data());
  char* dst = static_cast<char*>(out.data());
  for (int64_t gi = 0; gi < g; ++gi)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        std::memcpy(dst + ((gi * c + j) * r + i) * es, src + (gi * sg + i * sr + j * sc) * es, size_t(es));
  return out;
}

// A view of the 2-d contiguous tensor t with a padded row stride (ld >= cols), the padding poisoned
// with 0xFF bytes (NaN in every float format), the storage kept alive by the view.
inline rt::Tensor padded_view(const rt::Tensor& t, int64_t ld) {
  const int64_t rows = t.size(0), cols = t.size(1), es = elem_bytes(t.dtype());
  rt::Tensor storage = rt::Tensor::empty({rows, ld}, t.dtype());
  std::memset(storage.data(), 0xFF, size_t(rows * ld * es));
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(static_cast<char*>(storage.data()) + i * ld * es, static_cast<const char*>(t.data()) + i * cols * es,
                size_t(cols * es));
  return rt::Tensor::wrap(storage.data(), {rows, cols}, t.dtype(), rt::Device::cpu(), {ld, 1}, storage.storage());
}

// Values of the logical [R, C] matrix q (contiguous, any dtype) times its scales sf (contiguous
// [ceil(R/gr), ceil(C/gc)]), in float64.
inline std::vector<double> dequant(const rt::Tensor& q, const rt::Tensor& sf, int64_t gr, int64_t gc) {
  const std::vector<double> v = testutil::to_f64(q), s = testutil::to_f64(sf);
  const int64_t r = q.size(-2), c = q.size(-1), sc = sf.size(-1);
  const int64_t groups = q.dim() == 3 ? q.size(0) : 1, sr = sf.size(-2);
  std::vector<double> out(v.size());
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        out[size_t((g * r + i) * c + j)] = v[size_t((g * r + i) * c + j)] * s[size_t((g * sr + i / gr) * sc + j / gc)];
  return out;
}

// D = C + A B^T in float64 with A [m, k] (row stride lda) and B [n, k]; abs: sum |a b| per element.
struct Ref {
  std::vector<double> val, abs;
};
inline Ref ref_gemm(const double* a, const double* b, int64_t m, int64_t n, int64_t k, const double* c = nullptr) {
  Ref r;
  r.val.assign(size_t(m * n), 0.0);
  r.abs.assign(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = c ? c[i * n + j] : 0.0, sa = c ? std::fabs(c[i * n + j]) : 0.0;
      const double* ai = a + i * k;
      const double* bj = b + j * k;
      for (int64_t x = 0; x < k; ++x) {
        s += ai[x] * bj[x];
        sa += std::fabs(ai[x] * bj[x]);
      }
      r.val[size_t(i * n + j)] = s;
      r.abs[size_t(i * n + j)] = sa;
    }
  return r;
}

// Checks out against the float64 reference element by element with the bound of float32
// accumulation and promotion, (k + 16) * 2^-24 * sum|terms|, plus the output's rounding (2^-8 |ref|
// for bfloat16), and returns calc_diff(out, ref).
inline double expect_matches_reference(const std::vector<double>& out, const Ref& ref, int64_t k, bool bf16_out,
                                       const std::string& what) {
  EXPECT_EQ(out.size(), ref.val.size()) << what;
  if (out.size() != ref.val.size()) return 1.0;
  int bad = 0;
  const double u = std::ldexp(1.0, -24);
  for (size_t i = 0; i < out.size(); ++i) {
    const double tol = 2.0 * (double(k) + 16.0) * u * ref.abs[i] + (bf16_out ? std::ldexp(1.0, -8) * std::fabs(ref.val[i]) : 0.0) + 1e-30;
    if (!(std::fabs(out[i] - ref.val[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " = " << out[i] << ", reference " << ref.val[i] << " (tolerance "
                    << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements outside the bound";
  const double diff = testutil::calc_diff(out, ref.val);
  EXPECT_LT(diff, bf16_out ? 1e-5 : 1e-9) << what;
  return diff;
}

// Fetches an environment variable's value and restores it when it goes out of scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// Runs f, expecting an rt::Error of kind User whose message contains every one of `parts`.
template <class F>
void expect_user_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), rt::ErrorKind::User) << e.what();
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected an rt::Error, got: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected a user error containing '" << (parts.empty() ? "" : parts[0]) << "'";
}

}  // namespace dgtest
