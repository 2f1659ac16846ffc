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
#include <tuple>
#include <vector>

#include "deepgemm/deepgemm.h"
#include "rt/error.h"
#include "rt/tensor.h"
#include "testutil/environment.h"
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

// A quantized problem: A per token (1x128), B per block (128x128), in the K-major layout.
struct Fp8Problem {
  int64_t m, n, k;
  rt::Tensor a, b;        // the unquantized inputs (bfloat16)
  rt::Tensor qa, sfa, qb, sfb;
  std::vector<double> deq_a, deq_b;
};

// Magnitudes that change by powers of two from one 128-block to the next, so that every scale
// differs from its neighbours and a scale taken from the wrong block shows.
inline double gain_a(int64_t r, int64_t c) { return std::ldexp(1.0, int((c / 128) % 4) * 3 - 4 + int(r % 3)); }
inline double gain_b(int64_t r, int64_t c) { return std::ldexp(1.0, int((r / 128 + 2 * (c / 128)) % 5) - 2); }

inline Fp8Problem make_problem(int64_t m, int64_t n, int64_t k, bool gains, bool ue8m0 = false) {
  Fp8Problem p{m, n, k, {}, {}, {}, {}, {}, {}, {}, {}};
  p.a = normal({m, k}, rt::DType::BF16, testutil::fresh_seed(), 1.0, gains ? gain_a : nullptr);
  p.b = normal({n, k}, rt::DType::BF16, testutil::fresh_seed(), 1.0, gains ? gain_b : nullptr);
  std::tie(p.qa, p.sfa) = deepgemm::per_token_cast_to_fp8(p.a, ue8m0);
  std::tie(p.qb, p.sfb) = deepgemm::per_block_cast_to_fp8(p.b, ue8m0);
  p.deq_a = dequant(p.qa, p.sfa, 1, 128);
  p.deq_b = dequant(p.qb, p.sfb, 128, 128);
  return p;
}

// Rows [r0, r0 + rows) of a row-major [*, cols] float64 array.
inline std::vector<double> rows_of(const std::vector<double>& v, int64_t cols, int64_t r0, int64_t rows) {
  return std::vector<double>(v.begin() + r0 * cols, v.begin() + (r0 + rows) * cols);
}

// The contiguous layout: each group's rows, then padding (-1) up to a multiple of 128.
struct ContiguousLayout {
  std::vector<int32_t> m_indices;
  std::vector<int64_t> start;  // first row of each group
  int64_t total = 0;
};
inline ContiguousLayout contiguous_layout(const std::vector<int64_t>& ms) {
  ContiguousLayout l;
  for (size_t g = 0; g < ms.size(); ++g) {
    l.start.push_back(l.total);
    const int64_t aligned = (ms[g] + 127) / 128 * 128;
    for (int64_t r = 0; r < aligned; ++r) l.m_indices.push_back(r < ms[g] ? int32_t(g) : -1);
    l.total += aligned;
  }
  return l;
}

// B of an M-grouped GEMM, [g * n, k] bfloat16, quantized per group (per-block scales of each [n, k]
// slice): qb [g, n, k], sfb [g, ceil(n / 128), k / 128], and each group's de-quantized values.
inline std::tuple<rt::Tensor, rt::Tensor, std::vector<std::vector<double>>> per_group_block_cast(const rt::Tensor& b,
                                                                                                  int64_t g, int64_t n,
                                                                                                  int64_t k) {
  rt::Tensor qb = rt::Tensor::empty({g, n, k}, rt::DType::F8E4M3);
  rt::Tensor sfb = rt::Tensor::empty({g, (n + 127) / 128, k / 128}, rt::DType::F32);
  std::vector<std::vector<double>> deq_b;
  for (int64_t gi = 0; gi < g; ++gi) {
    const rt::Tensor slice = rt::Tensor::wrap(static_cast<char*>(b.data()) + gi * n * k * 2, {n, k}, rt::DType::BF16,
                                              rt::Device::cpu(), {}, b.storage());
    auto [q, s] = deepgemm::per_block_cast_to_fp8(slice);
    std::memcpy(static_cast<char*>(qb.data()) + gi * n * k, q.data(), size_t(n * k));
    std::memcpy(sfb.data_as<float>() + gi * s.numel(), s.data(), size_t(s.numel()) * 4);
    deq_b.push_back(dequant(q, s, 128, 128));
  }
  return {qb, sfb, deq_b};
}

// The same elements under another shape (t contiguous, same element count).
inline rt::Tensor reshaped(const rt::Tensor& t, const rt::Shape& shape) {
  return rt::Tensor::wrap(t.data(), shape, t.dtype(), t.device(), {}, t.storage());
}

// A copy of the strided view t on `device` with the same strides: the span from its first to its
// last element is copied (padding included), and the view rebuilt over the copy.
inline rt::Tensor to_device_view(const rt::Tensor& t, rt::Device device) {
  int64_t span = 1;
  for (int64_t i = 0; i < t.dim(); ++i) span += (t.size(i) - 1) * t.stride(i);
  const rt::Tensor flat = rt::Tensor::wrap(t.data(), {span}, t.dtype(), t.device(), {}, t.storage()).to(device);
  return rt::Tensor::wrap(flat.data(), t.shape(), t.dtype(), device, t.strides(), flat.storage());
}

// An M-grouped contiguous FP8 problem: groups of ms[g] rows, each padded to 128 (padding rows -1),
// A quantized per token, B [G, n, k] per block; the de-quantized values for the reference.
struct ContiguousProblem {
  ContiguousLayout layout;
  rt::Tensor qa, sfa, qb, sfb;
  std::vector<double> deq_a;
  std::vector<std::vector<double>> deq_b;
};
inline ContiguousProblem make_contiguous(const std::vector<int64_t>& ms, int64_t n, int64_t k) {
  ContiguousProblem p;
  p.layout = contiguous_layout(ms);
  const int64_t g = int64_t(ms.size()), m = p.layout.total;
  const rt::Tensor a = normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = normal({g * n, k}, rt::DType::BF16, testutil::fresh_seed());
  std::tie(p.qa, p.sfa) = deepgemm::per_token_cast_to_fp8(a);
  std::tie(p.qb, p.sfb, p.deq_b) = per_group_block_cast(b, g, n, k);
  p.deq_a = dequant(p.qa, p.sfa, 1, 128);
  return p;
}

// A K-grouped problem (MoE weight gradients): the tokens of every group concatenated along K, a
// [sum(ks), M] and b [sum(ks), N] quantized per channel (1x128 along K), c [G, M, N], and each
// group's float64 reference D[g] = C[g] + A_g^T B_g from the de-quantized inputs.
struct KGroupedProblem {
  std::vector<int64_t> ks;
  int64_t m = 0, n = 0;
  rt::Tensor qa, sfa, qb, sfb, c;
  std::vector<Ref> refs;
};
inline KGroupedProblem make_k_grouped(const std::vector<int64_t>& ks, int64_t m, int64_t n) {
  KGroupedProblem p;
  p.ks = ks;
  p.m = m;
  p.n = n;
  const int64_t g = int64_t(ks.size());
  int64_t sum_k = 0;
  for (int64_t x : ks) sum_k += x;
  const rt::Tensor a = normal({sum_k, m}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = normal({sum_k, n}, rt::DType::BF16, testutil::fresh_seed());
  std::tie(p.qa, p.sfa) = deepgemm::per_channel_cast_to_fp8(a);
  std::tie(p.qb, p.sfb) = deepgemm::per_channel_cast_to_fp8(b);
  const std::vector<double> da = dequant(p.qa, p.sfa, 128, 1), db = dequant(p.qb, p.sfb, 128, 1);
  p.c = normal({g, m, n}, rt::DType::F32, testutil::fresh_seed(), 8.0);
  const std::vector<double> cv = testutil::to_f64(p.c);
  int64_t k0 = 0;
  for (int64_t gi = 0; gi < g; ++gi) {
    const int64_t kg = ks[size_t(gi)];
    std::vector<double> ag(size_t(m * kg)), bg(size_t(n * kg));  // transposed to [M, kg] and [N, kg]
    for (int64_t x = 0; x < kg; ++x) {
      for (int64_t i = 0; i < m; ++i) ag[size_t(i * kg + x)] = da[size_t((k0 + x) * m + i)];
      for (int64_t j = 0; j < n; ++j) bg[size_t(j * kg + x)] = db[size_t((k0 + x) * n + j)];
    }
    p.refs.push_back(ref_gemm(ag.data(), bg.data(), m, n, kg, cv.data() + gi * m * n));
    k0 += kg;
  }
  return p;
}

using testutil::ScopedEnv;

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
