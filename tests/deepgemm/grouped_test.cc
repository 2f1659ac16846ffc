// The grouped GEMMs: M-grouped contiguous (uneven and empty groups, padding rows) and masked, FP8
// and BF16; K-grouped FP8 for weight gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "deepgemm/deepgemm.h"
#include "dg_test_util.h"

namespace {

using dgtest::Ref;

using testutil::poisoned;

using dgtest::contiguous_layout;
using dgtest::ContiguousLayout;
using dgtest::rows_of;

TEST(MGroupedContiguous, Fp8UnevenEmptyGroupsAndPadding) {
  const std::vector<int64_t> ms = {37, 0, 128, 200, 1};  // uneven, an empty group, full and partial blocks
  const int64_t g = int64_t(ms.size()), n = 192, k = 384;
  const dgtest::ContiguousProblem p = dgtest::make_contiguous(ms, n, k);
  const ContiguousLayout& l = p.layout;
  const int64_t m = l.total;
  const rt::Tensor &qa = p.qa, &sfa = p.sfa, &qb = p.qb, &sfb = p.sfb;
  const std::vector<double>& deq_a = p.deq_a;
  const std::vector<std::vector<double>>& deq_b = p.deq_b;
  const rt::Tensor m_indices = dgtest::i32_tensor(l.m_indices);
  for (rt::DType out : {rt::DType::BF16, rt::DType::F32}) {
    rt::Tensor d = poisoned({m, n}, out);
    deepgemm::m_grouped_fp8_gemm_nt_contiguous(qa, sfa, qb, sfb, d, m_indices);
    const std::vector<double> dv = testutil::to_f64(d);
    for (int64_t gi = 0; gi < g; ++gi) {
      if (ms[size_t(gi)] == 0) continue;
      const std::vector<double> ag = rows_of(deq_a, k, l.start[size_t(gi)], ms[size_t(gi)]);
      const Ref ref = dgtest::ref_gemm(ag.data(), deq_b[size_t(gi)].data(), ms[size_t(gi)], n, k);
      dgtest::expect_matches_reference(rows_of(dv, n, l.start[size_t(gi)], ms[size_t(gi)]), ref, k,
                                       out == rt::DType::BF16, "group " + std::to_string(gi));
    }
    for (int64_t r = 0; r < m; ++r) {
      if (l.m_indices[size_t(r)] >= 0) continue;
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(dv[size_t(r * n + j)], 0.0) << "padding row " << r << " not zeroed";
    }
  }
}

TEST(MGroupedMasked, Fp8ValidRowsComputedTheRestUntouched) {
  const int64_t g = 4, max_m = 160, n = 128, k = 256;
  const std::vector<int32_t> masked = {77, 0, 160, 3};
  const rt::Tensor a = dgtest::normal({g * max_m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({g * n, k}, rt::DType::BF16, testutil::fresh_seed());
  auto [qa2, sfa2] = deepgemm::per_token_cast_to_fp8(a);  // per token: grouping rows does not change it
  auto [qb2, sfb2] = deepgemm::per_block_cast_to_fp8(b);  // n = 128: blocks never straddle groups
  const rt::Tensor qa = rt::Tensor::wrap(qa2.data(), {g, max_m, k}, rt::DType::F8E4M3, rt::Device::cpu(), {}, qa2.storage());
  const rt::Tensor sfa = rt::Tensor::wrap(sfa2.data(), {g, max_m, k / 128}, rt::DType::F32, rt::Device::cpu(), {}, sfa2.storage());
  const rt::Tensor qb = rt::Tensor::wrap(qb2.data(), {g, n, k}, rt::DType::F8E4M3, rt::Device::cpu(), {}, qb2.storage());
  const rt::Tensor sfb = rt::Tensor::wrap(sfb2.data(), {g, 1, k / 128}, rt::DType::F32, rt::Device::cpu(), {}, sfb2.storage());
  const std::vector<double> deq_a = dgtest::dequant(qa2, sfa2, 1, 128), deq_b = dgtest::dequant(qb2, sfb2, 128, 128);
  // The scales in the TMA-aligned MN-major form too.
  for (bool tma : {false, true}) {
    rt::Tensor d = poisoned({g, max_m, n}, rt::DType::BF16);
    deepgemm::m_grouped_fp8_gemm_nt_masked(qa, tma ? deepgemm::get_mn_major_tma_aligned_tensor(sfa) : sfa, qb, sfb, d,
                                           dgtest::i32_tensor(masked), 64);
    const std::vector<double> dv = testutil::to_f64(d);
    for (int64_t gi = 0; gi < g; ++gi) {
      const int64_t mg = masked[size_t(gi)];
      if (mg > 0) {
        const std::vector<double> ag = rows_of(deq_a, k, gi * max_m, mg), bg = rows_of(deq_b, k, gi * n, n);
        const Ref ref = dgtest::ref_gemm(ag.data(), bg.data(), mg, n, k);
        dgtest::expect_matches_reference(rows_of(dv, n, gi * max_m, mg), ref, k, true, "group " + std::to_string(gi));
      }
      for (int64_t r = mg; r < max_m; ++r)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_TRUE(std::isnan(dv[size_t((gi * max_m + r) * n + j)])) << "masked row " << r << " of group " << gi << " written";
    }
  }
}

TEST(MGroupedBf16, ContiguousAndMasked) {
  const std::vector<int64_t> ms = {130, 0, 5};
  const int64_t g = 3, n = 96, k = 200;
  const ContiguousLayout l = contiguous_layout(ms);
  const rt::Tensor a = dgtest::normal({l.total, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({g, n, k}, rt::DType::BF16, testutil::fresh_seed());
  const std::vector<double> av = testutil::to_f64(a), bv = testutil::to_f64(b);
  rt::Tensor d = poisoned({l.total, n}, rt::DType::BF16);
  deepgemm::m_grouped_bf16_gemm_nt_contiguous(a, b, d, dgtest::i32_tensor(l.m_indices));
  std::vector<double> dv = testutil::to_f64(d);
  for (int64_t gi = 0; gi < g; ++gi) {
    const int64_t mg = ms[size_t(gi)];
    if (mg == 0) continue;
    const std::vector<double> ag = rows_of(av, k, l.start[size_t(gi)], mg), bg = rows_of(bv, k, gi * n, n);
    const Ref ref = dgtest::ref_gemm(ag.data(), bg.data(), mg, n, k);
    dgtest::expect_matches_reference(rows_of(dv, n, l.start[size_t(gi)], mg), ref, k, true, "contiguous group " + std::to_string(gi));
  }
  for (int64_t r = 0; r < l.total; ++r)
    if (l.m_indices[size_t(r)] < 0) {
      ASSERT_EQ(dv[size_t(r * n)], 0.0) << "padding row " << r;
    }

  // Masked: the same A rows seen as [G, max_M = 256, K] batches.
  const int64_t max_m = 256;
  const std::vector<int32_t> masked = {200, 0, 256};
  const rt::Tensor am = dgtest::normal({g, max_m, k}, rt::DType::BF16, testutil::fresh_seed());
  const std::vector<double> amv = testutil::to_f64(am);
  rt::Tensor dm = poisoned({g, max_m, n}, rt::DType::F32);
  deepgemm::m_grouped_bf16_gemm_nt_masked(am, b, dm, dgtest::i32_tensor(masked), 128);
  dv = testutil::to_f64(dm);
  for (int64_t gi = 0; gi < g; ++gi) {
    const int64_t mg = masked[size_t(gi)];
    if (mg > 0) {
      const std::vector<double> ag = rows_of(amv, k, gi * max_m, mg), bg = rows_of(bv, k, gi * n, n);
      const Ref ref = dgtest::ref_gemm(ag.data(), bg.data(), mg, n, k);
      dgtest::expect_matches_reference(rows_of(dv, n, gi * max_m, mg), ref, k, false, "masked group " + std::to_string(gi));
    }
    if (mg < max_m) {
      ASSERT_TRUE(std::isnan(dv[size_t((gi * max_m + mg) * n)])) << "masked row written, group " << gi;
    }
  }
}

TEST(KGrouped, Fp8WeightGradient) {
  const dgtest::KGroupedProblem p = dgtest::make_k_grouped({128, 0, 384, 256}, 96, 144);  // an empty group
  const std::vector<int64_t>& ks = p.ks;
  const int64_t g = int64_t(ks.size()), m = p.m, n = p.n;
  EXPECT_EQ(p.sfa.shape(), (rt::Shape{768 / 128, m}));
  const std::vector<double> cv = testutil::to_f64(p.c);
  const rt::Tensor &qa = p.qa, &sfa = p.sfa, &qb = p.qb, &sfb = p.sfb, &c = p.c;
  const std::vector<Ref>& refs = p.refs;
  for (bool inplace : {false, true}) {
    rt::Tensor d = inplace ? dgtest::f32_tensor({g, m, n}, cv) : poisoned({g, m, n}, rt::DType::F32);
    deepgemm::k_grouped_fp8_gemm_tn_contiguous(qa, sfa, qb, sfb, d, ks, inplace ? d : c);
    const std::vector<double> dv = testutil::to_f64(d);
    for (int64_t gi = 0; gi < g; ++gi)
      dgtest::expect_matches_reference(rows_of(dv, n, gi * m, m), refs[size_t(gi)], std::max<int64_t>(ks[size_t(gi)], 1),
                                       false, std::string(inplace ? "in place, " : "") + "group " + std::to_string(gi));
  }
}

}  // namespace
