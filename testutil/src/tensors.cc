#include "testutil/tensors.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "rt/error.h"
#include "tl/device/numeric.h"

namespace testutil {
namespace {

double get(const rt::Tensor& t, int64_t i) {
  const void* p = t.data();
  switch (t.dtype()) {
    case rt::DType::Bool: return static_cast<const bool*>(p)[i];
    case rt::DType::I8: return static_cast<const int8_t*>(p)[i];
    case rt::DType::U8: return static_cast<const uint8_t*>(p)[i];
    case rt::DType::I32: return static_cast<const int32_t*>(p)[i];
    case rt::DType::I64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case rt::DType::F16: return static_cast<const tl::half_t*>(p)[i].to_float();
    case rt::DType::BF16: return static_cast<const tl::bfloat16_t*>(p)[i].to_float();
    case rt::DType::F32: return static_cast<const float*>(p)[i];
    case rt::DType::F64: return static_cast<const double*>(p)[i];
    case rt::DType::F8E4M3: return static_cast<const tl::float8_e4m3_t*>(p)[i].to_float();
    case rt::DType::F8E5M2: return static_cast<const tl::float8_e5m2_t*>(p)[i].to_float();
    case rt::DType::UE8M0: return static_cast<const tl::ue8m0_t*>(p)[i].to_float();
    case rt::DType::F4E2M1: {
      uint8_t byte = static_cast<const uint8_t*>(p)[i / 2];
      return tl::float4_e2m1_t::from_bits(static_cast<uint8_t>((byte >> ((i & 1) * 4)) & 0xF)).to_float();
    }
  }
  RT_UNREACHABLE("dtype");
}

void set(rt::Tensor& t, int64_t i, double v) {
  void* p = t.data();
  const float f = tl::to_float_odd(v);  // narrow formats round from it once (tl/device/numeric.h)
  switch (t.dtype()) {
    case rt::DType::Bool: static_cast<bool*>(p)[i] = v != 0.0; return;
    case rt::DType::I8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case rt::DType::U8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case rt::DType::I32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case rt::DType::I64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); return;
    case rt::DType::F16: static_cast<tl::half_t*>(p)[i] = tl::half_t::from_float(f); return;
    case rt::DType::BF16: static_cast<tl::bfloat16_t*>(p)[i] = tl::bfloat16_t::from_float(f); return;
    case rt::DType::F32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case rt::DType::F64: static_cast<double*>(p)[i] = v; return;
    case rt::DType::F8E4M3: static_cast<tl::float8_e4m3_t*>(p)[i] = tl::float8_e4m3_t::from_float(f); return;
    case rt::DType::F8E5M2: static_cast<tl::float8_e5m2_t*>(p)[i] = tl::float8_e5m2_t::from_float(f); return;
    case rt::DType::UE8M0: static_cast<tl::ue8m0_t*>(p)[i] = tl::ue8m0_t::from_float(f); return;
    case rt::DType::F4E2M1: {
      uint8_t& byte = static_cast<uint8_t*>(p)[i / 2];
      uint8_t nib = tl::float4_e2m1_t::from_float(f).bits & 0xF;
      byte = (i & 1) ? static_cast<uint8_t>((byte & 0x0F) | (nib << 4)) : static_cast<uint8_t>((byte & 0xF0) | nib);
      return;
    }
  }
}

void check_host(const rt::Tensor& t) {
  RT_USER_CHECK(t.defined() && t.device().is_cpu() && t.is_contiguous(), "testutil needs a defined, contiguous host tensor");
}

}  // namespace

rt::Tensor random_tensor(const std::vector<int64_t>& shape, rt::DType dtype, uint64_t seed, double lo, double hi) {
  rt::Tensor t = rt::Tensor::empty(shape, dtype);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, dist(gen));
  return t;
}

std::pair<double, double> typical_range(rt::DType dtype) {
  if (dtype == rt::DType::I8) return {-128, 128};
  if (dtype == rt::DType::U8) return {0, 256};
  if (dtype == rt::DType::Bool) return {0, 2};
  if (rt::is_int(dtype)) return {-1000, 1000};
  return {-1, 1};
}

uint64_t fresh_seed() {
  static std::atomic<uint64_t> counter{0};
  uint64_t now = static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  return now * 0x9E3779B97F4A7C15ull + counter.fetch_add(1);
}

std::vector<double> to_f64(const rt::Tensor& t) {
  check_host(t);
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = get(t, i);
  return out;
}

void from_f64(rt::Tensor& t, const std::vector<double>& values) {
  check_host(t);
  RT_USER_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "from_f64: ", values.size(), " values for ", t.numel(), " elements");
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, values[i]);
}

void poison(rt::Tensor& t) {
  check_host(t);
  double v = rt::is_float(t.dtype()) ? std::numeric_limits<double>::quiet_NaN() : -128.0;
  if (t.dtype() == rt::DType::F4E2M1) v = -6.0;  // float4 has no NaN
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, v);
}

rt::Tensor poisoned(const rt::Shape& shape, rt::DType dtype) {
  rt::Tensor t = rt::Tensor::empty(shape, dtype);
  poison(t);
  return t;
}

double rel_error(const std::vector<double>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i])) return std::numeric_limits<double>::infinity();
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

double calc_diff(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) return std::numeric_limits<double>::infinity();
  double xy = 0, xx_yy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return std::numeric_limits<double>::infinity();
    xy += x[i] * y[i];
    xx_yy += x[i] * x[i] + y[i] * y[i];
  }
  return xx_yy == 0 ? 0.0 : 1.0 - 2.0 * xy / xx_yy;
}

}  // namespace testutil
