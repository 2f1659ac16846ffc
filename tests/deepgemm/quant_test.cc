// The FP8 casts (per token, per block, per channel), the scale layouts and the alignment helpers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "deepgemm/deepgemm.h"
#include "dg_test_util.h"

namespace {

// Checks one block: the scale is amax/448 (or the next power of two), the block's largest value
// maps to at most 448 (and close to it), and every value round-trips within e4m3's half step.
void check_block(const std::vector<double>& x, const std::vector<double>& q, const std::vector<size_t>& idx, double s,
                 bool ue8m0, const std::string& what) {
  double amax = 0;
  for (size_t i : idx) amax = std::max(amax, std::fabs(x[i]));
  if (ue8m0) {
    ASSERT_EQ(std::exp2(std::round(std::log2(s))), s) << what << ": scale " << s << " is not a power of two";
    ASSERT_GE(s * 448.0, amax) << what;
    ASSERT_LT(s * 448.0, 2.0 * std::max(amax, 1e-4)) << what;
  } else {
    ASSERT_FLOAT_EQ(float(s), float(std::max(amax, 1e-4)) / 448.0f) << what;
  }
  double qmax = 0;
  for (size_t i : idx) {
    ASSERT_LE(std::fabs(q[i]), 448.0) << what;
    qmax = std::max(qmax, std::fabs(q[i]));
    const double xs = x[i] / s;
    // e4m3: 3 mantissa bits, so a relative half step of 2^-4 for normals; subnormals (below 2^-6)
    // have an absolute step of 2^-9.
    const double tol = std::max(std::fabs(xs) * std::ldexp(1.0, -4), std::ldexp(1.0, -10)) * (1 + 1e-6);
    ASSERT_LE(std::fabs(q[i] - xs), tol) << what << ": x/s = " << xs << " -> " << q[i];
  }
  if (!ue8m0 && amax > 1e-4) {
    EXPECT_GE(qmax, 416.0) << what << ": the block's amax should map near 448";
  }
}

rt::Tensor test_input(int64_t r, int64_t c, rt::DType dtype) {
  return dgtest::normal({r, c}, dtype, testutil::fresh_seed(), 1.0,
                        [](int64_t i, int64_t j) { return std::ldexp(1.0, int((i / 16 + j / 100) % 9) - 4); });
}

TEST(Quant, PerTokenCast) {
  const int64_t m = 37, k = 300;  // a partial last K block
  for (rt::DType dtype : {rt::DType::BF16, rt::DType::F32, rt::DType::F16}) {
    for (bool ue8m0 : {false, true}) {
      const rt::Tensor x = test_input(m, k, dtype);
      auto [q, sf] = deepgemm::per_token_cast_to_fp8(x, ue8m0);
      ASSERT_EQ(q.dtype(), rt::DType::F8E4M3);
      ASSERT_EQ(sf.shape(), (rt::Shape{m, 3}));
      const std::vector<double> xv = testutil::to_f64(x), qv = testutil::to_f64(q), sv = testutil::to_f64(sf);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t b = 0; b < 3; ++b) {
          std::vector<size_t> idx;
          for (int64_t j = b * 128; j < std::min(k, b * 128 + 128); ++j) idx.push_back(size_t(i * k + j));
          check_block(xv, qv, idx, sv[size_t(i * 3 + b)], ue8m0,
                      std::string(rt::name(dtype)) + " row " + std::to_string(i) + " block " + std::to_string(b));
        }
    }
  }
}

TEST(Quant, PerBlockCast) {
  const int64_t n = 200, k = 384;
  for (bool ue8m0 : {false, true}) {
    const rt::Tensor x = test_input(n, k, rt::DType::BF16);
    auto [q, sf] = deepgemm::per_block_cast_to_fp8(x, ue8m0);
    ASSERT_EQ(sf.shape(), (rt::Shape{2, 3}));
    const std::vector<double> xv = testutil::to_f64(x), qv = testutil::to_f64(q), sv = testutil::to_f64(sf);
    for (int64_t bi = 0; bi < 2; ++bi)
      for (int64_t bj = 0; bj < 3; ++bj) {
        std::vector<size_t> idx;
        for (int64_t i = bi * 128; i < std::min(n, bi * 128 + 128); ++i)
          for (int64_t j = bj * 128; j < bj * 128 + 128; ++j) idx.push_back(size_t(i * k + j));
        check_block(xv, qv, idx, sv[size_t(bi * 3 + bj)], ue8m0, "block " + std::to_string(bi) + "," + std::to_string(bj));
      }
  }
}

TEST(Quant, PerChannelCast) {
  const int64_t k = 256 + 64, n = 48;
  const rt::Tensor x = test_input(k, n, rt::DType::F32);
  auto [q, sf] = deepgemm::per_channel_cast_to_fp8(x, true);
  ASSERT_EQ(sf.shape(), (rt::Shape{3, n}));
  const std::vector<double> xv = testutil::to_f64(x), qv = testutil::to_f64(q), sv = testutil::to_f64(sf);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t j = 0; j < n; ++j) {
      std::vector<size_t> idx;
      for (int64_t i = b * 128; i < std::min(k, b * 128 + 128); ++i) idx.push_back(size_t(i * n + j));
      check_block(xv, qv, idx, sv[size_t(b * n + j)], true, "channel " + std::to_string(j));
    }
}

TEST(Quant, StridedInputAndZeros) {
  // A transposed view as input, and an all-zero block (scale from the 1e-4 floor, values zero).
  const rt::Tensor base = test_input(128, 256, rt::DType::F32);
  float* p = base.data_as<float>();
  for (int64_t i = 0; i < 128; ++i)
    for (int64_t j = 0; j < 128; ++j) p[i * 256 + j] = 0.0f;
  const rt::Tensor view = rt::Tensor::wrap(base.data(), {256, 128}, rt::DType::F32, rt::Device::cpu(), {1, 256},
                                           base.storage());
  auto [q, sf] = deepgemm::per_token_cast_to_fp8(view);
  const std::vector<double> qv = testutil::to_f64(q), sv = testutil::to_f64(sf);
  const rt::Tensor contiguous = dgtest::transpose(base);
  auto [q2, sf2] = deepgemm::per_token_cast_to_fp8(contiguous);
  EXPECT_EQ(qv, testutil::to_f64(q2));
  EXPECT_EQ(sv, testutil::to_f64(sf2));
  EXPECT_FLOAT_EQ(float(sv[0]), 1e-4f / 448.0f);
  EXPECT_EQ(qv[0], 0.0);
}

// NaN and infinite inputs, as docs/deepgemm.md states: a NaN stays out of its block's amax, an
// infinity takes the block's scale to infinity (2^127 with UE8M0) and its finite values to zero.
TEST(Quant, NonFiniteInputs) {
  for (const bool ue8m0 : {false, true}) {
    rt::Tensor x = dgtest::f32_tensor({2, 128}, std::vector<double>(256, -3.0));
    x.data_as<float>()[5] = NAN;
    x.data_as<float>()[128 + 5] = INFINITY;
    const auto [q8, s8] = deepgemm::per_token_cast_to_fp8(x, ue8m0);
    const auto [q4, s4] = deepgemm::per_token_cast_to_fp4(x, 128, ue8m0);
    const std::vector<double> v8 = testutil::to_f64(q8), f8 = testutil::to_f64(s8);
    const std::vector<double> v4 = testutil::to_f64(q4), f4 = testutil::to_f64(s4);
    // Row 0: the NaN's block is scaled by its finite values.
    EXPECT_FLOAT_EQ(float(f8[0]), ue8m0 ? 0.0078125f : 3.0f / 448.0f);
    EXPECT_EQ(v8[0], ue8m0 ? -384.0 : -448.0);
    EXPECT_TRUE(std::isnan(v8[5]));
    EXPECT_EQ(f4[0], 0.5);  // 3 / 6, a power of two
    EXPECT_EQ(v4[0], -6.0);
    EXPECT_EQ(v4[5], 6.0);
    // Row 1: the infinity's block.
    EXPECT_EQ(f8[1], ue8m0 ? std::ldexp(1.0, 127) : INFINITY);
    EXPECT_EQ(f4[1], f8[1]);
    EXPECT_EQ(v8[128], 0.0);
    EXPECT_EQ(v4[128], 0.0);
    if (ue8m0) {
      EXPECT_EQ(v8[128 + 5], 448.0);
    } else {
      EXPECT_TRUE(std::isnan(v8[128 + 5]));
    }
    EXPECT_EQ(v4[128 + 5], 6.0);
  }
}

TEST(Quant, TmaAlignedScaleLayout) {
  EXPECT_EQ(deepgemm::get_tma_aligned_size(5, 4), 8);
  EXPECT_EQ(deepgemm::get_tma_aligned_size(8, 4), 8);
  EXPECT_EQ(deepgemm::get_tma_aligned_size(5, 1), 16);
  EXPECT_EQ(deepgemm::get_tma_aligned_size(INT64_MAX / 16 * 16, 1), INT64_MAX / 16 * 16);
  dgtest::expect_user_error([] { deepgemm::get_tma_aligned_size(INT64_MAX, 1); },
                            {"get_tma_aligned_size", "does not fit in int64"});
  EXPECT_EQ(deepgemm::get_mk_alignment_for_contiguous_layout(), 128);
  const rt::Tensor sf = dgtest::normal({3, 7, 5}, rt::DType::F32, testutil::fresh_seed());
  const rt::Tensor t = deepgemm::get_mn_major_tma_aligned_tensor(sf);
  EXPECT_EQ(t.shape(), sf.shape());
  EXPECT_EQ(t.strides(), (rt::Shape{5 * 8, 1, 8}));
  EXPECT_EQ(testutil::to_f64(dgtest::transpose(dgtest::transpose(t))), testutil::to_f64(sf));
  const float* raw = t.data_as<float>();
  EXPECT_EQ(raw[7], 0.0f) << "padding is zero";
  const rt::Tensor t2 = deepgemm::get_mn_major_tma_aligned_tensor(dgtest::normal({6, 2}, rt::DType::F32, 1));
  EXPECT_EQ(t2.strides(), (rt::Shape{1, 8}));
}

TEST(Quant, CastScalesToUe8m0) {
  const rt::Tensor pow2 = dgtest::f32_tensor({2, 2}, {1.0, 0.25, 1024.0, std::ldexp(1.0, -100)});
  const rt::Tensor u = deepgemm::cast_scales_to_ue8m0(pow2);
  EXPECT_EQ(u.dtype(), rt::DType::UE8M0);
  EXPECT_EQ(testutil::to_f64(u), testutil::to_f64(pow2));
  dgtest::expect_user_error([] { deepgemm::cast_scales_to_ue8m0(dgtest::f32_tensor({2}, {1.0, 3.0})); },
                            {"cast_scales_to_ue8m0", "scales[1] = 3", "power of two"});
  dgtest::expect_user_error([] { deepgemm::cast_scales_to_ue8m0(dgtest::f32_tensor({1}, {-2.0})); }, {"scales[0]"});
}

TEST(Quant, BadInput) {
  dgtest::expect_user_error([] { deepgemm::per_token_cast_to_fp8(rt::Tensor::empty({4}, rt::DType::F32)); },
                            {"per_token_cast_to_fp8", "2-d"});
  dgtest::expect_user_error([] { deepgemm::per_block_cast_to_fp8(rt::Tensor::empty({4, 4}, rt::DType::I32)); },
                            {"per_block_cast_to_fp8", "x must be float32, bfloat16 or float16"});
  dgtest::expect_user_error([] { deepgemm::per_token_cast_to_fp4(rt::Tensor::empty({4, 64}, rt::DType::F32), 48); },
                            {"gran_k = 48"});
  dgtest::expect_user_error([] { deepgemm::per_token_cast_to_fp4(rt::Tensor::empty({4, 63}, rt::DType::F32)); },
                            {"K = 63", "even"});
  alignas(64) static float dummy[64];
  const rt::Tensor gpu = rt::Tensor::wrap(dummy, {4, 4}, rt::DType::F32, rt::Device::cuda(0));
  dgtest::expect_user_error([&] { deepgemm::get_mn_major_tma_aligned_tensor(gpu); }, {"CPU tensors only"});
}

}  // namespace
