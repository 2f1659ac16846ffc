// FP8 x FP4 GEMMs (B packed e2m1 with per-32 or per-128 scales along K) and the FP4 cast.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "deepgemm/deepgemm.h"
#include "dg_test_util.h"

namespace {

using dgtest::Ref;

using testutil::poisoned;

TEST(Fp4Cast, RoundTripAndScales) {
  const int64_t n = 40, k = 320;  // K not a multiple of 128: a partial last block
  for (int64_t gran : {32, 128}) {
    for (bool ue8m0 : {false, true}) {
      const rt::Tensor x = dgtest::normal({n, k}, rt::DType::F32, testutil::fresh_seed(), 1.0,
                                          [](int64_t r, int64_t c) { return std::ldexp(1.0, int((r + c / 32) % 7) - 3); });
      auto [q, sf] = deepgemm::per_token_cast_to_fp4(x, gran, ue8m0);
      ASSERT_EQ(q.dtype(), rt::DType::F4E2M1);
      ASSERT_EQ(sf.shape(), (rt::Shape{n, (k + gran - 1) / gran}));
      const std::vector<double> xv = testutil::to_f64(x), qv = testutil::to_f64(q), sv = testutil::to_f64(sf);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t b = 0; b < sf.size(1); ++b) {
          double amax = 0;
          for (int64_t j = b * gran; j < std::min(k, (b + 1) * gran); ++j) amax = std::max(amax, std::fabs(xv[size_t(i * k + j)]));
          const double s = sv[size_t(i * sf.size(1) + b)];
          if (ue8m0) {
            EXPECT_EQ(std::exp2(std::round(std::log2(s))), s) << "ue8m0 scale not a power of two";
            EXPECT_GE(s, amax / 6.0);
            EXPECT_LT(s, 2.0 * amax / 6.0);
          } else {
            EXPECT_FLOAT_EQ(float(s), float(amax) / 6.0f);
          }
          for (int64_t j = b * gran; j < std::min(k, (b + 1) * gran); ++j) {
            const double xs = xv[size_t(i * k + j)] / s, qq = qv[size_t(i * k + j)];
            ASSERT_LE(std::fabs(qq), 6.0);
            // e2m1 steps: 0.5 below 2, 1 in [2, 4), 2 in [4, 6]: the error is at most half a step.
            const double step = std::fabs(xs) < 2 ? 0.5 : std::fabs(xs) < 4 ? 1.0 : 2.0;
            ASSERT_LE(std::fabs(qq - xs), step / 2 * (1 + 1e-6) + 1e-6) << "x/s = " << xs << " -> " << qq;
          }
        }
    }
  }
}

TEST(Fp8Fp4Gemm, MatchesDequantizedReference) {
  const int64_t m = 120, n = 176, k = 512;
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  // N(0, 1): the per-32 and per-128 amax of normal data differ enough that a scale from the wrong
  // block breaks the element-wise bound (the cast test covers strongly varying magnitudes).
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  auto [qa, sfa] = deepgemm::per_token_cast_to_fp8(a);
  const std::vector<double> deq_a = dgtest::dequant(qa, sfa, 1, 128);
  const std::vector<double> av = testutil::to_f64(a), bv = testutil::to_f64(b);
  const Ref exact = dgtest::ref_gemm(av.data(), bv.data(), m, n, k);
  for (int64_t gran : {32, 128}) {
    for (bool ue8m0 : {false, true}) {
      auto [qb, sfb] = deepgemm::per_token_cast_to_fp4(b, gran, ue8m0);
      const std::vector<double> deq_b = dgtest::dequant(qb, sfb, 1, gran);
      const Ref ref = dgtest::ref_gemm(deq_a.data(), deq_b.data(), m, n, k);
      const std::string what = "per-" + std::to_string(gran) + (ue8m0 ? " ue8m0" : " fp32");
      rt::Tensor d = poisoned({m, n}, rt::DType::F32);
      deepgemm::fp8_fp4_gemm_nt(qa, sfa, qb, ue8m0 ? deepgemm::cast_scales_to_ue8m0(sfb) : sfb, d);
      const std::vector<double> out = testutil::to_f64(d);
      dgtest::expect_matches_reference(out, ref, k, false, what);
      EXPECT_EQ(deepgemm::last_config().promotion_k, gran) << what;
      // Against the unquantized product: e2m1 keeps one mantissa bit (values 0, 0.5, 1, 1.5, 2, 3, 4, 6).
      const double rel = testutil::rel_error(out, exact.val);
      std::printf("[ fp8 x fp4 (%s) vs bf16 product ] relative error %.2f%%, calc_diff %.3g\n", what.c_str(),
                  rel * 100, testutil::calc_diff(out, exact.val));
      EXPECT_LT(rel, 0.15) << what;
    }
  }
}

TEST(Fp8Fp4Gemm, GroupedContiguousAndMasked) {
  const int64_t g = 3, n = 64, k = 256;
  const std::vector<int32_t> idx = [] {
    std::vector<int32_t> v;
    for (int r = 0; r < 128; ++r) v.push_back(r < 100 ? 2 : -1);  // group 2 first, then padding
    for (int r = 0; r < 128; ++r) v.push_back(0);
    return v;
  }();
  const int64_t m = int64_t(idx.size());
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({g * n, k}, rt::DType::BF16, testutil::fresh_seed());
  auto [qa, sfa] = deepgemm::per_token_cast_to_fp8(a);
  auto [qb2, sfb2] = deepgemm::per_token_cast_to_fp4(b, 32);
  const rt::Tensor qb = rt::Tensor::wrap(qb2.data(), {g, n, k}, rt::DType::F4E2M1, rt::Device::cpu(), {}, qb2.storage());
  const rt::Tensor sfb = rt::Tensor::wrap(sfb2.data(), {g, n, k / 32}, rt::DType::F32, rt::Device::cpu(), {}, sfb2.storage());
  const std::vector<double> deq_a = dgtest::dequant(qa, sfa, 1, 128), deq_b = dgtest::dequant(qb2, sfb2, 1, 32);
  rt::Tensor d = poisoned({m, n}, rt::DType::BF16);
  deepgemm::m_grouped_fp8_fp4_gemm_nt_contiguous(qa, sfa, qb, sfb, d, dgtest::i32_tensor(idx));
  const std::vector<double> dv = testutil::to_f64(d);
  for (int64_t r = 0; r < m; ++r) {
    if (idx[size_t(r)] < 0) {
      ASSERT_EQ(dv[size_t(r * n)], 0.0);
      continue;
    }
    const Ref ref = dgtest::ref_gemm(deq_a.data() + r * k, deq_b.data() + idx[size_t(r)] * n * k, 1, n, k);
    dgtest::expect_matches_reference(std::vector<double>(dv.begin() + r * n, dv.begin() + (r + 1) * n), ref, k, true,
                                     "row " + std::to_string(r));
  }

  // Masked: rows of a as [G, 64, K] with counts 64, 0, 10.
  const int64_t max_m = 64;
  const std::vector<int32_t> masked = {64, 0, 10};
  const rt::Tensor am = rt::Tensor::wrap(qa.data(), {g, max_m, k}, rt::DType::F8E4M3, rt::Device::cpu(), {}, qa.storage());
  const rt::Tensor sm = rt::Tensor::wrap(sfa.data(), {g, max_m, k / 128}, rt::DType::F32, rt::Device::cpu(), {}, sfa.storage());
  rt::Tensor dm = poisoned({g, max_m, n}, rt::DType::F32);
  deepgemm::m_grouped_fp8_fp4_gemm_nt_masked(am, sm, qb, sfb, dm, dgtest::i32_tensor(masked), 32);
  const std::vector<double> dmv = testutil::to_f64(dm);
  for (int64_t gi = 0; gi < g; ++gi)
    for (int64_t r = 0; r < max_m; ++r) {
      const size_t o = size_t((gi * max_m + r) * n);
      if (r >= masked[size_t(gi)]) {
        ASSERT_TRUE(std::isnan(dmv[o]));
        continue;
      }
      const Ref ref = dgtest::ref_gemm(deq_a.data() + (gi * max_m + r) * k, deq_b.data() + gi * n * k, 1, n, k);
      dgtest::expect_matches_reference(std::vector<double>(dmv.begin() + long(o), dmv.begin() + long(o) + n), ref, k,
                                       false, "masked group " + std::to_string(gi));
    }
}

}  // namespace
