// The GPU path (kernels/sm90_gemm.cuh) on a Hopper GPU against float64 references computed from the
// de-quantized inputs: plain, accumulating and in-place FP8 GEMMs at DeepGEMM's shapes and ragged
// ones, the four layouts, UE8M0 and MN-major scales, M-grouped contiguous (padding) and masked
// (untouched rows), BF16, FP4 B, the K-grouped GEMM; and the quantization casts
// (kernels/quant_cast.cuh) bit for bit against the CPU casts. Skipped without a Hopper GPU (the
// CPU suite covers the same API).
//
// The tolerance differs from the CPU suite's: the tensor cores accumulate FP8 products within one
// 128-deep block with about 14 bits of mantissa before the FP32 promotion, so an element may be off
// by about 2^-14 * 128 of its terms' magnitudes; the global check (DeepGEMM's calc_diff) stays tight.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "deepgemm/deepgemm.h"
#include "deepgemm/kernels/sm90_timeline.h"
#include "dg_test_util.h"
#include "gpu_kernels.h"
#include "rt/cuda_device.h"
#include "rt/error.h"
#include "rt/nvrtc.h"
#include "timeline.h"

namespace {

using dgtest::Fp8Problem;
using dgtest::make_problem;
using dgtest::Ref;
using testutil::poisoned;

const rt::Device kGpu = rt::Device::cuda(0);

#define REQUIRE_HOPPER()                                                                                  \
  do {                                                                                                    \
    if (rt::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << rt::cuda_unavailable_reason(); \
    if (rt::cuda_device(0).sm_major != 9) GTEST_SKIP() << "not a Hopper GPU: " << rt::cuda_device(0).name; \
  } while (0)

rt::Tensor gpu(const rt::Tensor& t) { return t.to(kGpu); }
std::vector<double> host(const rt::Tensor& t) { return testutil::to_f64(t.to(rt::Device::cpu())); }

// Element bound: tensor-core accumulation inside each 128-block plus FP32 promotion over K, plus
// the output's rounding; then calc_diff below 1e-5 (DeepGEMM's own check is 1e-3).
void expect_close(const std::vector<double>& out, const Ref& ref, int64_t k, bool bf16_out, const std::string& what) {
  ASSERT_EQ(out.size(), ref.val.size()) << what;
  int bad = 0;
  const double unit = 2.0 * (128.0 * std::ldexp(1.0, -14) + double(k + 16) * std::ldexp(1.0, -24));
  for (size_t i = 0; i < out.size(); ++i) {
    const double tol = unit * ref.abs[i] + (bf16_out ? std::ldexp(1.0, -8) * std::fabs(ref.val[i]) : 0.0) + 1e-30;
    if (!(std::fabs(out[i] - ref.val[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " = " << out[i] << ", reference " << ref.val[i] << " (tolerance "
                    << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements outside the bound";
  EXPECT_LT(testutil::calc_diff(out, ref.val), 1e-5) << what;
}

TEST(GpuFp8Gemm, ShapesOutputsAndAccumulation) {
  REQUIRE_HOPPER();
  // Ragged M and N (partial tiles, N not a multiple of any block), DeepGEMM-like N/K, small M; K of
  // 16 blocks for the TMA-store epilogue that stages box by box (shorter K stages whole slices).
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 16, 128}, {77, 200, 384}, {128, 2112, 1024},
                         {300, 576, 768}, {1024, 1536, 512}, {200, 384, 2048}}) {
    const Fp8Problem p = make_problem(m, n, k, /*gains=*/true);
    const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
    const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    const rt::Tensor qa = gpu(p.qa), sfa = gpu(p.sfa), qb = gpu(p.qb), sfb = gpu(p.sfb);
    for (rt::DType out : {rt::DType::BF16, rt::DType::F32}) {
      rt::Tensor d = gpu(poisoned({m, n}, out));
      deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d);
      EXPECT_EQ(deepgemm::last_config().backend, "cuda");
      expect_close(host(d), ref, k, out == rt::DType::BF16, shape + " -> " + rt::name(out));
    }
    // D = C + A B^T, into a separate D and in place.
    const rt::Tensor c = dgtest::normal({m, n}, rt::DType::F32, testutil::fresh_seed(), 4.0);
    const std::vector<double> cv = testutil::to_f64(c);
    const Ref ref_c = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k, cv.data());
    rt::Tensor d = gpu(poisoned({m, n}, rt::DType::F32));
    deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d, gpu(c));
    expect_close(host(d), ref_c, k, false, shape + " + c");
    rt::Tensor inplace = gpu(c);
    deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, inplace, inplace);
    expect_close(host(inplace), ref_c, k, false, shape + " + c in place");
  }
}

// A single row (M = 1; N = 1 with FP4 B) may have any row stride, odd ones included: validation
// accepts it, since only one row is addressed, and the TMA maps take a stride TMA accepts instead.
TEST(GpuFp8Gemm, SingleRowsWithAnyStride) {
  REQUIRE_HOPPER();
  const int64_t n = 256, k = 512;
  const Fp8Problem p = make_problem(1, n, k, true);
  const rt::Tensor qa_odd = rt::Tensor::wrap(p.qa.data(), {1, k}, p.qa.dtype(), rt::Device::cpu(), {k + 3, 1}, p.qa.storage());
  rt::Tensor d = gpu(poisoned({1, n}, rt::DType::BF16));
  deepgemm::fp8_gemm_nt(dgtest::to_device_view(qa_odd, kGpu), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d);
  expect_close(host(d), dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), 1, n, k), k, true, "m = 1, row stride k + 3");

  const int64_t m = 64;
  auto [qa, sfa] = deepgemm::per_token_cast_to_fp8(dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed()));
  auto [qb, sfb] = deepgemm::per_token_cast_to_fp4(dgtest::normal({1, k}, rt::DType::BF16, testutil::fresh_seed()), 32, false);
  const std::vector<double> deq_a = dgtest::dequant(qa, sfa, 1, 128), deq_b = dgtest::dequant(qb, sfb, 1, 32);
  const rt::Tensor qb_odd = rt::Tensor::wrap(qb.data(), {1, k}, qb.dtype(), rt::Device::cpu(), {k + 2, 1}, qb.storage());
  for (const char* form : {"registers", "shared"}) {
    dgtest::ScopedEnv env("DG_GPU_FP4", form);
    // (D's rows padded to 16 bytes, as TMA needs for any D of more than one row; read back whole.)
    const rt::Tensor d_store = gpu(poisoned({m, 4}, rt::DType::F32));
    const rt::Tensor d4 = rt::Tensor::wrap(d_store.data(), {m, 1}, rt::DType::F32, kGpu, {4, 1}, d_store.storage());
    deepgemm::fp8_fp4_gemm_nt(gpu(qa), gpu(sfa), dgtest::to_device_view(qb_odd, kGpu), gpu(sfb), d4);
    const std::vector<double> all = host(d_store);
    std::vector<double> out;
    for (int64_t i = 0; i < m; ++i) {
      out.push_back(all[size_t(i * 4)]);
      for (int64_t j = 1; j < 4; ++j) EXPECT_TRUE(std::isnan(all[size_t(i * 4 + j)])) << "row padding written, " << form;
    }
    expect_close(out, dgtest::ref_gemm(deq_a.data(), deq_b.data(), m, 1, k), k, false, std::string("n = 1, fp4 row stride k + 2, ") + form);
  }
}

// Every block shape the kernel takes (DG_GPU_CONFIG), not only the ones the heuristic picks here:
// one, two and three consumers, one and two m64 waves, overlapped promotion, direct and TMA-store
// epilogues, widths that are multiples of 8 only (56, 40: tiles starting at most of the 16 offsets
// into a 128-column block of B's scales that such widths reach).
TEST(GpuFp8Gemm, EveryBlockShape) {
  REQUIRE_HOPPER();
  // Partial tiles in M and N for every block shape, and tiles starting at every offset into the
  // 128-column blocks of B's scales that their width allows (BLOCK_N 160: 0, 32, 64 and 96).
  const int64_t m = 300, n = 656, k = 640;
  const Fp8Problem p = make_problem(m, n, k, true);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  const rt::Tensor qa = gpu(p.qa), sfa = gpu(p.sfa), qb = gpu(p.qb), sfb = gpu(p.sfb);
  for (const char* config :
       {"64x64x4", "64x192x4", "128x96x5", "128x128x5", "128x144x4", "128x160x4", "128x192x4", "192x128x4", "192x64x6",
        "256x128x3", "256x96x4", "64x56x8", "128x56x6", "128x40x6", "192x56x6", "256x56x4",
        // other widths that are multiples of 8 only (their wgmma wrappers exist since stop 43)
        "128x72x6", "64x88x6", "256x120x3", "128x136x4"}) {
    dgtest::ScopedEnv env("DG_GPU_CONFIG", config);
    for (rt::DType out : {rt::DType::BF16, rt::DType::F32}) {
      rt::Tensor d = gpu(poisoned({m, n}, out));
      deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d);
      expect_close(host(d), ref, k, out == rt::DType::BF16, std::string(config) + " -> " + rt::name(out));
    }
  }
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  const std::vector<double> av = testutil::to_f64(a), bv = testutil::to_f64(b);
  const Ref bref = dgtest::ref_gemm(av.data(), bv.data(), m, n, k);
  for (const char* config : {"64x256x4", "128x256x4", "256x128x4", "256x192x3", "128x56x6", "256x88x4", "128x176x4",
                             "128x248x4"}) {
    dgtest::ScopedEnv env("DG_GPU_CONFIG", config);
    rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
    deepgemm::bf16_gemm_nt(gpu(a), gpu(b), d);
    expect_close(host(d), bref, k, true, std::string("bf16 ") + config);
  }
}

// 64-row tiles, on one consumer at every width (two consumers taking alternate k-blocks were removed
// from the kernel: no faster on the H200): the heuristic's widths (32, 64, 96, 128), 56, 160 and 192
// (one partial set), c1 (the same kernel), k-block counts odd and even, one, a partial last one, C
// and split-K, several tiles per CTA, and clusters of 2 multicasting B. c2 is refused by name.
TEST(GpuFp8Gemm, SixtyFourRowTilesOnOneConsumer) {
  REQUIRE_HOPPER();
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 128}, {100, 200, 256}, {128, 320, 640},
                         {72, 136, 208}, {1000, 1104, 1152}}) {
    const Fp8Problem p = make_problem(m, n, k, true);
    const rt::Tensor c = dgtest::normal({m, n}, rt::DType::F32, testutil::fresh_seed());
    const std::vector<double> cv = testutil::to_f64(c);
    const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
    const Ref ref_c = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k, cv.data());
    const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    const rt::Tensor qa = gpu(p.qa), sfa = gpu(p.sfa), qb = gpu(p.qb), sfb = gpu(p.sfb);
    for (const char* config : {"64x32x12", "64x56x8", "64x64x8", "64x96x6", "64x128x7", "64x160x5", "64x192x4",
                               "64x64x6x2", "64x64x6c1"}) {
      const bool multicast = std::string(config).find("x2") != std::string::npos;
      if (multicast && (m + 63) / 64 % 2 != 0) continue;  // clusters of 2 need an even number of row blocks
      dgtest::ScopedEnv env("DG_GPU_CONFIG", config);
      const std::string what = shape + " " + config;
      rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
      deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d);
      EXPECT_EQ(deepgemm::last_config().block_m, 64) << deepgemm::last_config().to_string();
      EXPECT_EQ(deepgemm::last_config().kernel.find(".k_interleave"), std::string::npos)
          << deepgemm::last_config().to_string();
      expect_close(host(d), ref, k, true, what);
      rt::Tensor d32 = gpu(poisoned({m, n}, rt::DType::F32));
      deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d32, gpu(c));
      expect_close(host(d32), ref_c, k, false, what + " + c");
      if (k >= 3 * 128 && !multicast && m <= 128) {  // few tiles: the plan cuts each into 3
        dgtest::ScopedEnv split("DG_GPU_SPLIT_K", "3");
        rt::Tensor ds = gpu(poisoned({m, n}, rt::DType::F32));
        deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, ds, gpu(c));
        EXPECT_EQ(deepgemm::last_config().split_k, 3);
        expect_close(host(ds), ref_c, k, false, what + " + c, split-k 3");
      }
    }
    for (const char* config : {"64x32x8c2", "64x64x6c2"}) {
      dgtest::ScopedEnv env("DG_GPU_CONFIG", config);
      rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
      dgtest::expect_user_error([&] { deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d); },
                                {"fp8_gemm_nt", std::string("DG_GPU_CONFIG='") + config + "'", "c2", "was removed"});
    }
  }
}

// 140 k-blocks of K through each tiling in `configs`, whole and in three split-K pieces, into FP32
// (no rounding to hide a wrong scale); B's block scales vary along K (gains), so a scale read from
// the wrong k-block shows. n = 320: 96-wide tiles straddle 128-blocks of B's scales (the second one).
void expect_long_k(int64_t m, std::initializer_list<const char*> configs) {
  const int64_t n = 320, k = 140 * 128;
  const Fp8Problem p = make_problem(m, n, k, /*gains=*/true);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  const rt::Tensor qa = gpu(p.qa), sfa = gpu(p.sfa), qb = gpu(p.qb), sfb = gpu(p.sfb);
  for (const char* config : configs) {
    for (const char* split : {"1", "3"}) {
      dgtest::ScopedEnv env("DG_GPU_CONFIG", config), env_split("DG_GPU_SPLIT_K", split);
      rt::Tensor d = gpu(poisoned({m, n}, rt::DType::F32));
      deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d);
      EXPECT_EQ(deepgemm::last_config().split_k, std::atoi(split)) << deepgemm::last_config().to_string();
      expect_close(host(d), ref, k, false, rt::str(config, " split ", split));
    }
  }
}

// Long K through the two-partial-set loop (B's scale carried from k-block to k-block, one k-block
// ahead): two consumers (128 x 128) and one (64-row tiles 64, 96 and 32 wide).
TEST(GpuFp8Gemm, LongKTwoPartialSets) {
  REQUIRE_HOPPER();
  expect_long_k(128, {"128x128x5", "64x64x8", "64x96x6", "64x32x12"});
}

// Long K through the loop without a second partial set (256-, 192-row and wider tiles), which reads
// B's scales from a window of 32 k-blocks each consumer warp stages in shared memory: four windows
// and a partial fifth, split-K pieces starting inside a window.
TEST(GpuFp8Gemm, LongKStagedScales) {
  REQUIRE_HOPPER();
  expect_long_k(256, {"256x128x3", "192x128x4", "256x96x4", "128x192x4"});
}

// Clusters of 2 sharing B's tile by TMA multicast (forced: the heuristic does not pick it), FP8 and
// BF16, ragged N, BF16 out through TMA stores and FP32 out with C; and without multicast.
TEST(GpuFp8Gemm, Multicast) {
  REQUIRE_HOPPER();
  const int64_t m = 1024, n = 4200, k = 384;  // 8 blocks of 128 rows (4 of 256) x 33 of 128 columns
  const Fp8Problem p = make_problem(m, n, k, true);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  const rt::Tensor qa = gpu(p.qa), sfa = gpu(p.sfa), qb = gpu(p.qb), sfb = gpu(p.sfb);
  for (const char* config : {"128x128x5x2", "256x128x3x2", ""}) {
    dgtest::ScopedEnv env("DG_GPU_CONFIG", *config ? config : nullptr);
    for (rt::DType out : {rt::DType::BF16, rt::DType::F32}) {
      rt::Tensor d = gpu(poisoned({m, n}, out));
      deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d);
      if (*config) {
        EXPECT_EQ(deepgemm::last_config().num_multicast, 2) << config;
      }
      expect_close(host(d), ref, k, out == rt::DType::BF16,
                   std::string(*config ? config : "heuristic") + " -> " + rt::name(out) + " (" +
                       deepgemm::last_config().to_string() + ")");
    }
  }
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  const std::vector<double> av = testutil::to_f64(a), bv = testutil::to_f64(b);
  dgtest::ScopedEnv env("DG_GPU_CONFIG", "128x256x4x2");
  rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
  deepgemm::bf16_gemm_nt(gpu(a), gpu(b), d);
  EXPECT_EQ(deepgemm::last_config().num_multicast, 2);
  expect_close(host(d), dgtest::ref_gemm(av.data(), bv.data(), m, n, k), k, true, "bf16 multicast");
}

// K not a multiple of 128 (a partial last scale block; TMA zero-fills past K), and the issue's
// (N, K) = (7168, 576) shape; FP4 with per-32 scales at K = 320.
TEST(GpuFp8Gemm, PartialLastKBlock) {
  REQUIRE_HOPPER();
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{72, 136, 208}, {256, 7168, 576}}) {
    const Fp8Problem p = make_problem(m, n, k, true);
    const rt::Tensor c = dgtest::normal({m, n}, rt::DType::F32, testutil::fresh_seed());
    const std::vector<double> cv = testutil::to_f64(c);
    rt::Tensor d = gpu(poisoned({m, n}, rt::DType::F32));
    deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d, gpu(c));
    expect_close(host(d), dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k, cv.data()), k, false,
                 "K = " + std::to_string(k));
  }
  const int64_t m = 64, n = 96, k = 320;
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  auto [qa, sfa] = deepgemm::per_token_cast_to_fp8(a);
  for (int64_t gran : {32, 128}) {
    auto [qb, sfb] = deepgemm::per_token_cast_to_fp4(b, gran);
    const std::vector<double> deq_a = dgtest::dequant(qa, sfa, 1, 128), deq_b = dgtest::dequant(qb, sfb, 1, gran);
    rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
    deepgemm::fp8_fp4_gemm_nt(gpu(qa), gpu(sfa), gpu(qb), gpu(sfb), d);
    expect_close(host(d), dgtest::ref_gemm(deq_a.data(), deq_b.data(), m, n, k), k, true,
                 "fp4 K = 320, per-" + std::to_string(gran));
  }
}

// Split-K: forced on a ragged shape with uneven K ranges (8 k-blocks in 3), both outputs, C separate
// and in place; as the plan picks it by default for a few-tile shape (twice: the counters must be
// left zero); and where it cannot apply.
TEST(GpuFp8Gemm, SplitK) {
  REQUIRE_HOPPER();
  {
    const int64_t m = 200, n = 328, k = 1024;
    const Fp8Problem p = make_problem(m, n, k, true);
    const rt::Tensor c = dgtest::normal({m, n}, rt::DType::F32, testutil::fresh_seed());
    const std::vector<double> cv = testutil::to_f64(c);
    const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
    const Ref ref_c = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k, cv.data());
    dgtest::ScopedEnv env("DG_GPU_SPLIT_K", "3");
    rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
    deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d);
    EXPECT_EQ(deepgemm::last_config().split_k, 3);
    expect_close(host(d), ref, k, true, "split-k 3 -> bf16");
    rt::Tensor d32 = gpu(poisoned({m, n}, rt::DType::F32));
    deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d32, gpu(c));
    expect_close(host(d32), ref_c, k, false, "split-k 3 + c");
    rt::Tensor inplace = gpu(c);
    deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), inplace, inplace);
    expect_close(host(inplace), ref_c, k, false, "split-k 3 + c in place");
    // BF16 too.
    const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
    const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
    const std::vector<double> av = testutil::to_f64(a), bv = testutil::to_f64(b);
    rt::Tensor db = gpu(poisoned({m, n}, rt::DType::BF16));
    deepgemm::bf16_gemm_nt(gpu(a), gpu(b), db);
    EXPECT_EQ(deepgemm::last_config().split_k, 3);
    expect_close(host(db), dgtest::ref_gemm(av.data(), bv.data(), m, n, k), k, true, "bf16 split-k 3");
  }
  {
    // In 64 x 64 tiles the plan splits this one (the heuristic takes one wave of 64 x 32 tiles).
    const int64_t m = 128, n = 2112, k = 7168;
    const Fp8Problem p = make_problem(m, n, k, false);
    dgtest::ScopedEnv env("DG_GPU_CONFIG", "64x64x11");
    for (int rep = 0; rep < 2; ++rep) {
      rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
      deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d);
      EXPECT_GT(deepgemm::last_config().split_k, 1) << deepgemm::last_config().to_string();
      expect_close(host(d), dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k), k, true, "planned split-k");
    }
  }
  // Not for grouped GEMMs, and not more ranges than blocks of K.
  const dgtest::ContiguousProblem g = dgtest::make_contiguous({100, 28}, 64, 256);
  {
    dgtest::ScopedEnv env("DG_GPU_SPLIT_K", "2");
    rt::Tensor d = gpu(poisoned({g.layout.total, 64}, rt::DType::BF16));
    dgtest::expect_user_error(
        [&] {
          deepgemm::m_grouped_fp8_gemm_nt_contiguous(gpu(g.qa), gpu(g.sfa), gpu(g.qb), gpu(g.sfb), d,
                                                     gpu(dgtest::i32_tensor(g.layout.m_indices)));
        },
        {"DG_GPU_SPLIT_K=2", "plain GEMM"});
    const Fp8Problem p = make_problem(64, 64, 256, false);
    dgtest::ScopedEnv env3("DG_GPU_SPLIT_K", "3");
    rt::Tensor d2 = gpu(poisoned({64, 64}, rt::DType::BF16));
    dgtest::expect_user_error([&] { deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d2); },
                              {"DG_GPU_SPLIT_K=3", "(2 here)"});
  }
}

// Calls queued back to back on one stream, each launched overlapping the one before (DG_GPU_PDL,
// the default): the second reads the first's output as C. Its tiles leave most SMs free, so the
// second kernel starts while the first still runs; D1 starts poisoned (NaN), so a read of C before
// the kernel waits for the first one's end would show. And with DG_GPU_PDL=0, the same result.
TEST(GpuFp8Gemm, ChainedCallsOverlapSafely) {
  REQUIRE_HOPPER();
  const int64_t m = 128, n = 1024, k = 2048;
  const Fp8Problem p1 = make_problem(m, n, k, false), p2 = make_problem(m, n, k, false);
  const Ref r1 = dgtest::ref_gemm(p1.deq_a.data(), p1.deq_b.data(), m, n, k);
  for (const char* pdl : {"1", "0"}) {
    dgtest::ScopedEnv env("DG_GPU_PDL", pdl);
    for (int rep = 0; rep < 3; ++rep) {
      const rt::Tensor a1 = gpu(p1.qa), sfa1 = gpu(p1.sfa), b1 = gpu(p1.qb), sfb1 = gpu(p1.sfb);
      const rt::Tensor a2 = gpu(p2.qa), sfa2 = gpu(p2.sfa), b2 = gpu(p2.qb), sfb2 = gpu(p2.sfb);
      rt::Tensor d1 = gpu(poisoned({m, n}, rt::DType::F32)), d2 = gpu(poisoned({m, n}, rt::DType::F32));
      deepgemm::fp8_gemm_nt(a1, sfa1, b1, sfb1, d1);
      deepgemm::fp8_gemm_nt(a2, sfa2, b2, sfb2, d2, d1);
      const std::vector<double> first = host(d1);
      const std::string what = rt::str("DG_GPU_PDL=", pdl, " rep ", rep);
      expect_close(first, r1, k, false, what + ": the first call");
      expect_close(host(d2), dgtest::ref_gemm(p2.deq_a.data(), p2.deq_b.data(), m, n, k, first.data()), k, false,
                   what + ": the second, on the first's output");
    }
  }
}

// The grid barrier itself (tl/device/cuda/round_sync.h), in a kernel of its own: every CTA marks
// the barrier it has reached, and after passing barrier i checks that every CTA has reached i (a
// barrier that let a CTA through early counts an error). Three launches on the same two words, each
// of which must leave them zero. Then a launch told of one CTA more than it has: every CTA must give
// up at the first barrier after the timeout (and not wait at the later ones), the words still end
// zero, and the next launch is in step again.
constexpr const char* kRoundSyncProbe = R"(
#include "tl/device/cuda/round_sync.h"
extern "C" __global__ void round_sync_probe(unsigned* words, unsigned* reached, unsigned* errors, unsigned* waited,
                                            int barriers, unsigned ctas_told, unsigned long long timeout_ns) {
  if (threadIdx.x != 0) return;
  bool wait = true;
  for (int i = 0; i < barriers; ++i) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(reached + blockIdx.x), "r"(unsigned(i)) : "memory");
    wait = tl::cuda::grid_round_sync(words, unsigned(i), ctas_told, wait, timeout_ns);
    if (!wait) continue;
    for (unsigned c = 0; c < gridDim.x; ++c) {
      unsigned r;
      asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(r) : "l"(reached + c) : "memory");
      if (r < unsigned(i)) atomicAdd(errors, 1u);
    }
  }
  waited[blockIdx.x] = wait ? 1u : 0u;
  tl::cuda::grid_round_sync_finish(words, gridDim.x);
}
)";

TEST(GpuRoundSync, BarrierHoldsEveryCtaAndLeavesItsWordsZero) {
  // Compiled for sm_90a wherever NVRTC is (CI too), run on a Hopper GPU only.
  if (rt::nvrtc_available()) {
    const rt::NvrtcResult ptx = rt::compile_cuda(kRoundSyncProbe, "round_sync_probe.cu", deepgemm::detail::kernel_headers(),
                                                 deepgemm::detail::jit_options("sm_90a"));
    EXPECT_NE(ptx.ptx.find("red.release.gpu.global.add.u32"), std::string::npos);
  }
  REQUIRE_HOPPER();
  const rt::CudaKernel probe = deepgemm::detail::jit_kernel(kRoundSyncProbe, "round_sync_probe", 0);
  const unsigned ctas = unsigned(rt::cuda_device(0).sm_count);  // one CTA an SM: all resident
  auto zeros = [](int64_t n) {
    rt::Tensor t = rt::Tensor::empty({n}, rt::DType::I32, kGpu);
    t.zero_();
    return t;
  };
  const rt::Tensor words = zeros(2);
  auto run = [&](int barriers, unsigned ctas_told, uint64_t timeout_ns, const std::string& what) {
    const rt::Tensor reached = zeros(ctas), errors = zeros(1);
    const rt::Tensor waited = gpu(poisoned({int64_t(ctas)}, rt::DType::I32));
    probe.launch_with(rt::Dim3{ctas}, rt::Dim3{32}, 0, nullptr, words.data(), reached.data(), errors.data(),
                      waited.data(), barriers, ctas_told, static_cast<unsigned long long>(timeout_ns));
    EXPECT_EQ(host(errors)[0], 0.0) << what << ": CTAs passed a barrier before every CTA reached it";
    EXPECT_EQ(host(words), std::vector<double>(2, 0.0)) << what << ": the barrier's words not left zero";
    return host(waited);
  };
  for (int launch = 0; launch < 3; ++launch)
    EXPECT_EQ(run(200, ctas, 1'000'000'000, rt::str("launch ", launch)), std::vector<double>(ctas, 1.0));
  // 1 ms, 500 barriers: a CTA that waited at every one would take 500 ms.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run(500, ctas + 1, 1'000'000, "one CTA missing"), std::vector<double>(ctas, 0.0));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
  EXPECT_EQ(run(200, ctas, 1'000'000'000, "after the timeouts"), std::vector<double>(ctas, 1.0));
}

// The producers' barrier between rounds of tiles (tl/device/cuda/round_sync.h), forced (the rule
// keeps it for operands larger than L2): on 7 or 8 SMs a ragged shape takes many rounds and a
// partial last one; every tiling, multicast included, and BF16 give the reference and the same bits
// as without the barrier (the kernel's sums do not depend on timing). Three calls in a row on the
// same barrier words, a barrier every round and every third. (GpuRoundSync above checks the words
// end zero.)
TEST(GpuFp8Gemm, RoundSyncedTiles) {
  REQUIRE_HOPPER();
  const int64_t m = 1000, n = 1800, k = 640;
  const Fp8Problem p = make_problem(m, n, k, true);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  const rt::Tensor qa = gpu(p.qa), sfa = gpu(p.sfa), qb = gpu(p.qb), sfb = gpu(p.sfb);
  struct SmsGuard {
    ~SmsGuard() { deepgemm::set_num_sms(0); }
  } restore;
  dgtest::ScopedEnv no_split("DG_GPU_SPLIT_K", "1");
  for (auto [config, sms] : {std::pair<const char*, int>{"256x128x3", 7}, {"192x128x4", 7}, {"128x128x5", 7},
                             {"64x64x8", 7}, {"256x128x3x2", 8}}) {  // multicast: clusters of 2
    deepgemm::set_num_sms(sms);
    dgtest::ScopedEnv env("DG_GPU_CONFIG", config);
    std::vector<double> unsynced;
    {
      dgtest::ScopedEnv off("DG_GPU_ROUND_SYNC", "0");
      rt::Tensor d = gpu(poisoned({m, n}, rt::DType::F32));
      deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d);
      EXPECT_FALSE(deepgemm::last_config().round_sync) << config;
      unsynced = host(d);
    }
    for (int rep = 0; rep < 3; ++rep) {
      dgtest::ScopedEnv every("DG_GPU_ROUND_SYNC", rep == 2 ? "3" : "1");
      rt::Tensor d = gpu(poisoned({m, n}, rt::DType::F32));
      deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d);
      const std::string what = rt::str(config, " call ", rep, " (", deepgemm::last_config().to_string(), ")");
      EXPECT_TRUE(deepgemm::last_config().round_sync) << what;
      const std::vector<double> out = host(d);
      expect_close(out, ref, k, false, what);
      EXPECT_TRUE(out == unsynced) << what << ": not the bits of the call without the barrier";
    }
  }
  deepgemm::set_num_sms(7);
  dgtest::ScopedEnv every("DG_GPU_ROUND_SYNC", "1");
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  const std::vector<double> av = testutil::to_f64(a), bv = testutil::to_f64(b);
  rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
  deepgemm::bf16_gemm_nt(gpu(a), gpu(b), d);
  EXPECT_TRUE(deepgemm::last_config().round_sync) << deepgemm::last_config().to_string();
  expect_close(host(d), dgtest::ref_gemm(av.data(), bv.data(), m, n, k), k, true, "bf16");
}

TEST(GpuFp8Gemm, AllLayouts) {
  REQUIRE_HOPPER();
  const int64_t m = 208, n = 320, k = 512;
  const Fp8Problem p = make_problem(m, n, k, true);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  struct Layout {
    const char* name;
    void (*fn)(const rt::Tensor&, const rt::Tensor&, const rt::Tensor&, const rt::Tensor&, const rt::Tensor&,
               const rt::Tensor&);
    bool a_t, b_t;
  };
  const Layout layouts[] = {{"nt", &deepgemm::fp8_gemm_nt, false, false},
                            {"nn", &deepgemm::fp8_gemm_nn, false, true},
                            {"tn", &deepgemm::fp8_gemm_tn, true, true},
                            {"tt", &deepgemm::fp8_gemm_tt, true, false}};
  for (const Layout& l : layouts) {
    const rt::Tensor a = gpu(l.a_t ? dgtest::transpose(p.qa) : p.qa), sfa = gpu(l.a_t ? dgtest::transpose(p.sfa) : p.sfa);
    const rt::Tensor b = gpu(l.b_t ? dgtest::transpose(p.qb) : p.qb), sfb = gpu(l.b_t ? dgtest::transpose(p.sfb) : p.sfb);
    rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
    l.fn(a, sfa, b, sfb, d, {});
    expect_close(host(d), ref, k, true, std::string("fp8_gemm_") + l.name);
  }
}

TEST(GpuFp8Gemm, ScaleForms) {
  REQUIRE_HOPPER();
  const int64_t m = 100, n = 256, k = 384;
  const Fp8Problem p = make_problem(m, n, k, true, /*ue8m0=*/true);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  const rt::Tensor sfa_u = deepgemm::cast_scales_to_ue8m0(p.sfa), sfb_u = deepgemm::cast_scales_to_ue8m0(p.sfb);
  struct Variant {
    const char* name;
    rt::Tensor sfa, sfb;
  };
  // The MN-major forms are strided views: to_device_view keeps their strides.
  const Variant variants[] = {{"float32", p.sfa, p.sfb},
                              {"tma-aligned a_scales", deepgemm::get_mn_major_tma_aligned_tensor(p.sfa), p.sfb},
                              {"ue8m0", sfa_u, sfb_u},
                              {"tma-aligned ue8m0 a_scales", deepgemm::get_mn_major_tma_aligned_tensor(sfa_u), sfb_u}};
  for (const Variant& v : variants) {
    rt::Tensor d = gpu(poisoned({m, n}, rt::DType::F32));
    deepgemm::fp8_gemm_nt(gpu(p.qa), dgtest::to_device_view(v.sfa, kGpu), gpu(p.qb), gpu(v.sfb), d);
    expect_close(host(d), ref, k, false, v.name);
  }
}

TEST(GpuFp8Gemm, PaddedRowStrides) {
  REQUIRE_HOPPER();
  // D a column slice of a wider matrix: its row ends on a 16-byte boundary (n = 144) or inside a
  // 16-byte piece (n = 314), whose rest TMA stores used to overwrite with zeros (GpuFuzz).
  for (const int64_t n : {144, 314}) {
    const int64_t m = 72, k = 256, width = (n + 7) / 8 * 8 + 8;
    const Fp8Problem p = make_problem(m, n, k, false);
    const rt::Tensor a = dgtest::to_device_view(dgtest::padded_view(p.qa, k + 64), kGpu);
    const rt::Tensor b = dgtest::to_device_view(dgtest::padded_view(p.qb, k + 16), kGpu);
    const rt::Tensor d_store = gpu(poisoned({m, width}, rt::DType::BF16));
    const rt::Tensor d = rt::Tensor::wrap(d_store.data(), {m, n}, rt::DType::BF16, kGpu, {width, 1}, d_store.storage());
    deepgemm::fp8_gemm_nt(a, gpu(p.sfa), b, gpu(p.sfb), d);
    const std::vector<double> all = host(d_store);
    std::vector<double> out;
    int64_t written = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) out.push_back(all[size_t(i * width + j)]);
      for (int64_t j = n; j < width; ++j) written += !std::isnan(all[size_t(i * width + j)]);
    }
    EXPECT_EQ(written, 0) << "n = " << n << ": elements past the slice written";
    expect_close(out, dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k), k, true, "padded strides, n = " + std::to_string(n));
  }
}

TEST(GpuGrouped, Fp8ContiguousWithPadding) {
  REQUIRE_HOPPER();
  const std::vector<int64_t> ms = {37, 0, 128, 200, 1};
  const int64_t g = int64_t(ms.size()), n = 192, k = 384;
  const dgtest::ContiguousProblem p = dgtest::make_contiguous(ms, n, k);
  const dgtest::ContiguousLayout& l = p.layout;
  const int64_t m = l.total;
  const rt::Tensor &qa = p.qa, &sfa = p.sfa, &qb = p.qb, &sfb = p.sfb;
  const std::vector<double>& deq_a = p.deq_a;
  const std::vector<std::vector<double>>& deq_b = p.deq_b;
  for (rt::DType out : {rt::DType::BF16, rt::DType::F32}) {
    rt::Tensor d = gpu(poisoned({m, n}, out));
    deepgemm::m_grouped_fp8_gemm_nt_contiguous(gpu(qa), gpu(sfa), gpu(qb), gpu(sfb), d,
                                               gpu(dgtest::i32_tensor(l.m_indices)));
    const std::vector<double> dv = host(d);
    for (int64_t gi = 0; gi < g; ++gi) {
      const int64_t mg = ms[size_t(gi)];
      if (mg == 0) continue;
      const std::vector<double> ag = dgtest::rows_of(deq_a, k, l.start[size_t(gi)], mg);
      expect_close(dgtest::rows_of(dv, n, l.start[size_t(gi)], mg),
                   dgtest::ref_gemm(ag.data(), deq_b[size_t(gi)].data(), mg, n, k), k, out == rt::DType::BF16,
                   "group " + std::to_string(gi));
    }
    for (int64_t r = 0; r < m; ++r) {
      if (l.m_indices[size_t(r)] >= 0) continue;
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(dv[size_t(r * n + j)], 0.0) << "padding row " << r << " not zeroed";
    }
  }
}

// Groups that start at odd multiples of 128 rows, so 256-row tiles hold two experts (a second B
// tile in each stage), and groups ending in padding rows (which must come out as zeros) inside and
// across such tiles: FP8 and BF16, the heuristic's tiles and forced 256- and 128-row ones (the
// heuristic's pick of 256 rows for contiguous calls: GpuCompile.BlockingFitsTheDevice).
TEST(GpuGrouped, ContiguousGroupsOnOdd128RowBoundaries) {
  REQUIRE_HOPPER();
  // Starts at 0, 128, 512, 640, 1280, 1408, 3072; groups 2 and 6 end in padding.
  const std::vector<int64_t> ms = {128, 384, 37, 640, 128, 1664, 200};
  const int64_t n = 4096, k = 256;
  const dgtest::ContiguousProblem p = dgtest::make_contiguous(ms, n, k);
  const int64_t m = p.layout.total;
  const rt::Tensor idx = gpu(dgtest::i32_tensor(p.layout.m_indices));
  // BF16 operands of their own (b [G, N, K]).
  const rt::Tensor a16 = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b16 = dgtest::normal({int64_t(ms.size()), n, k}, rt::DType::BF16, testutil::fresh_seed());
  const std::vector<double> a16v = testutil::to_f64(a16), b16v = testutil::to_f64(b16);
  for (const char* config : {"", "256x128x3", "128x128x5"}) {
    dgtest::ScopedEnv env("DG_GPU_CONFIG", *config ? config : nullptr);
    for (bool fp8 : {true, false}) {
      rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
      if (fp8)
        deepgemm::m_grouped_fp8_gemm_nt_contiguous(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d, idx);
      else
        deepgemm::m_grouped_bf16_gemm_nt_contiguous(gpu(a16), gpu(b16), d, idx);
      const std::string cfg = deepgemm::last_config().to_string();
      if (*config) {
        EXPECT_EQ(deepgemm::last_config().block_m, std::atoi(config)) << cfg;
      }
      const std::vector<double> dv = host(d);
      for (size_t gi = 0; gi < ms.size(); ++gi) {
        const int64_t mg = ms[gi], start = p.layout.start[gi];
        const std::vector<double> ag = dgtest::rows_of(fp8 ? p.deq_a : a16v, k, start, mg);
        const std::vector<double> bg = fp8 ? p.deq_b[gi] : dgtest::rows_of(b16v, k, int64_t(gi) * n, n);
        expect_close(dgtest::rows_of(dv, n, start, mg), dgtest::ref_gemm(ag.data(), bg.data(), mg, n, k), k, true,
                     "group " + std::to_string(gi) + " (" + cfg + ")");
      }
      for (int64_t r = 0; r < m; ++r) {
        if (p.layout.m_indices[size_t(r)] >= 0) continue;
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(dv[size_t(r * n + j)], 0.0) << "padding row " << r << " not zeroed (" << cfg << ")";
      }
    }
  }
  // 192 rows could hold three experts' blocks: not a tiling grouped calls have.
  dgtest::ScopedEnv env("DG_GPU_CONFIG", "192x128x3");
  dgtest::expect_user_error(
      [&] {
        rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
        deepgemm::m_grouped_fp8_gemm_nt_contiguous(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d, idx);
      },
      {"DG_GPU_CONFIG='192x128x3'", "three consumers"});
}

TEST(GpuGrouped, Fp8MaskedLeavesTheRestUntouched) {
  REQUIRE_HOPPER();
  const int64_t g = 4, max_m = 256, n = 384, k = 512;
  const std::vector<int32_t> masked = {77, 0, 256, 130};
  const rt::Tensor a = dgtest::normal({g * max_m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({g * n, k}, rt::DType::BF16, testutil::fresh_seed());
  auto [qa2, sfa2] = deepgemm::per_token_cast_to_fp8(a);
  const auto [qb, sfb, deq_b] = dgtest::per_group_block_cast(b, g, n, k);
  const rt::Tensor qa = dgtest::reshaped(gpu(qa2), {g, max_m, k}), sfa = dgtest::reshaped(gpu(sfa2), {g, max_m, k / 128});
  const std::vector<double> deq_a = dgtest::dequant(qa2, sfa2, 1, 128);
  // The heuristic's tiles, and 64-row ones (one consumer).
  for (const char* config : {"", "64x64x6"}) {
    dgtest::ScopedEnv env("DG_GPU_CONFIG", *config ? config : nullptr);
    rt::Tensor d = gpu(poisoned({g, max_m, n}, rt::DType::BF16));
    deepgemm::m_grouped_fp8_gemm_nt_masked(qa, sfa, gpu(qb), gpu(sfb), d, gpu(dgtest::i32_tensor(masked)), 128);
    const std::string cfg = deepgemm::last_config().to_string();
    const std::vector<double> dv = host(d);
    for (int64_t gi = 0; gi < g; ++gi) {
      const int64_t mg = masked[size_t(gi)];
      if (mg > 0) {
        const std::vector<double> ag = dgtest::rows_of(deq_a, k, gi * max_m, mg);
        expect_close(dgtest::rows_of(dv, n, gi * max_m, mg),
                     dgtest::ref_gemm(ag.data(), deq_b[size_t(gi)].data(), mg, n, k), k, true,
                     "group " + std::to_string(gi) + " (" + cfg + ")");
      }
      for (int64_t r = mg; r < max_m; ++r)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_TRUE(std::isnan(dv[size_t((gi * max_m + r) * n + j)]))
              << "masked row " << r << " of group " << gi << " written (" << cfg << ")";
    }
  }
}

TEST(GpuBf16Gemm, LayoutsAndGrouped) {
  REQUIRE_HOPPER();
  const int64_t m = 264, n = 328, k = 520;  // K a multiple of 8 only: the last k-block is partial
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  const std::vector<double> av = testutil::to_f64(a), bv = testutil::to_f64(b);
  const Ref ref = dgtest::ref_gemm(av.data(), bv.data(), m, n, k);
  rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
  deepgemm::bf16_gemm_nt(gpu(a), gpu(b), d);
  expect_close(host(d), ref, k, true, "bf16_gemm_nt");
  rt::Tensor d2 = gpu(poisoned({m, n}, rt::DType::BF16));
  deepgemm::bf16_gemm_tn(gpu(dgtest::transpose(a)), gpu(dgtest::transpose(b)), d2);
  expect_close(host(d2), ref, k, true, "bf16_gemm_tn");
  const rt::Tensor c = dgtest::normal({m, n}, rt::DType::F32, testutil::fresh_seed());
  const std::vector<double> cv = testutil::to_f64(c);
  rt::Tensor d3 = gpu(c);
  deepgemm::bf16_gemm_nn(gpu(a), gpu(dgtest::transpose(b)), d3, d3);
  expect_close(host(d3), dgtest::ref_gemm(av.data(), bv.data(), m, n, k, cv.data()), k, false, "bf16_gemm_nn + c");

  // Masked, BF16: groups of A [2, 192, k] against B [2, n, k].
  const int64_t g = 2, max_m = 192;
  const std::vector<int32_t> masked = {192, 65};
  const rt::Tensor ga = dgtest::normal({g, max_m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor gb = dgtest::normal({g, n, k}, rt::DType::BF16, testutil::fresh_seed());
  const std::vector<double> gav = testutil::to_f64(ga), gbv = testutil::to_f64(gb);
  rt::Tensor gd = gpu(poisoned({g, max_m, n}, rt::DType::BF16));
  deepgemm::m_grouped_bf16_gemm_nt_masked(gpu(ga), gpu(gb), gd, gpu(dgtest::i32_tensor(masked)), 128);
  const std::vector<double> gdv = host(gd);
  for (int64_t gi = 0; gi < g; ++gi) {
    const int64_t mg = masked[size_t(gi)];
    const std::vector<double> ag = dgtest::rows_of(gav, k, gi * max_m, mg), bg = dgtest::rows_of(gbv, k, gi * n, n);
    expect_close(dgtest::rows_of(gdv, n, gi * max_m, mg), dgtest::ref_gemm(ag.data(), bg.data(), mg, n, k), k, true,
                 "masked bf16 group " + std::to_string(gi));
    for (int64_t r = mg; r < max_m; ++r) ASSERT_TRUE(std::isnan(gdv[size_t((gi * max_m + r) * n)])) << "row " << r;
  }
}

// Against the unquantized product: the quantization error DeepGEMM's users see, on N(0, 1) data.
TEST(GpuFp8Gemm, ErrorAgainstUnquantizedProduct) {
  REQUIRE_HOPPER();
  const int64_t m = 256, n = 512, k = 2048;
  const Fp8Problem p = make_problem(m, n, k, false);
  const std::vector<double> av = testutil::to_f64(p.a), bv = testutil::to_f64(p.b);
  const Ref exact = dgtest::ref_gemm(av.data(), bv.data(), m, n, k);
  rt::Tensor d = gpu(poisoned({m, n}, rt::DType::F32));
  deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d);
  const double diff = testutil::calc_diff(host(d), exact.val);
  EXPECT_LT(diff, 1e-3);  // DeepGEMM's test bound
  std::printf("calc_diff against the unquantized product: %.3g\n", diff);
}

// FP4 B, B's scales per row and per 32 or 128 of K, both kernels: expanded in registers
// (sm90_fp4_gemm.cuh, the default) and into shared memory (DG_GPU_FP4=shared; there UE8M0 per-32
// scales are folded into the values and promoted every 128).
TEST(GpuFp4, PlainAndGroupedContiguous) {
  REQUIRE_HOPPER();
  const int64_t m = 120, n = 176, k = 512;
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  auto [qa, sfa] = deepgemm::per_token_cast_to_fp8(a);
  const std::vector<double> deq_a = dgtest::dequant(qa, sfa, 1, 128);
  for (const char* form : {"registers", "shared"}) {
    dgtest::ScopedEnv env("DG_GPU_FP4", form);
    const bool registers = std::string(form) == "registers";
    for (int64_t gran : {32, 128}) {
      for (bool ue8m0 : {false, true}) {
        auto [qb, sfb] = deepgemm::per_token_cast_to_fp4(b, gran, ue8m0);
        const std::vector<double> deq_b = dgtest::dequant(qb, sfb, 1, gran);
        const std::string what = std::string(form) + " fp4 per-" + std::to_string(gran) + (ue8m0 ? " ue8m0" : " fp32");
        rt::Tensor d = gpu(poisoned({m, n}, rt::DType::F32));
        deepgemm::fp8_fp4_gemm_nt(gpu(qa), gpu(sfa), gpu(qb), gpu(ue8m0 ? deepgemm::cast_scales_to_ue8m0(sfb) : sfb), d);
        const std::string& kernel = deepgemm::last_config().kernel;
        EXPECT_EQ(kernel.find(".fp4_b_in_registers") != std::string::npos, registers) << what << ": " << kernel;
        const bool folded = !registers && gran == 32 && ue8m0 && deepgemm::last_config().block_n >= 128;
        EXPECT_EQ(deepgemm::last_config().promotion_k, folded ? 128 : gran) << what;
        EXPECT_EQ(kernel.find(".folded_scales") != std::string::npos, folded) << what;
        expect_close(host(d), dgtest::ref_gemm(deq_a.data(), deq_b.data(), m, n, k), k, false, what);
      }
    }
  }
  // Contiguous groups (per-32 scales): group 1's rows, then padding, then group 0's.
  const int64_t g = 2, mg = 256;
  std::vector<int32_t> idx;
  for (int r = 0; r < 128; ++r) idx.push_back(r < 100 ? 1 : -1);
  for (int r = 0; r < 128; ++r) idx.push_back(0);
  const rt::Tensor ga = dgtest::normal({mg, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor gb = dgtest::normal({g * n, k}, rt::DType::BF16, testutil::fresh_seed());
  auto [gqa, gsfa] = deepgemm::per_token_cast_to_fp8(ga);
  auto [gqb, gsfb] = deepgemm::per_token_cast_to_fp4(gb, 32);
  const std::vector<double> gdeq_a = dgtest::dequant(gqa, gsfa, 1, 128), gdeq_b = dgtest::dequant(gqb, gsfb, 1, 32);
  rt::Tensor d = gpu(poisoned({mg, n}, rt::DType::BF16));
  auto grouped = [&] {
    deepgemm::m_grouped_fp8_fp4_gemm_nt_contiguous(gpu(gqa), gpu(gsfa), dgtest::reshaped(gpu(gqb), {g, n, k}),
                                                   dgtest::reshaped(gpu(gsfb), {g, n, k / 32}), d,
                                                   gpu(dgtest::i32_tensor(idx)));
  };
  grouped();
  {  // 256-row tiles (two experts a tile) are for block-scaled B only.
    dgtest::ScopedEnv env("DG_GPU_CONFIG", "256x128x3");
    dgtest::expect_user_error(grouped, {"DG_GPU_CONFIG='256x128x3'", "128 rows this call allows"});
  }
  const std::vector<double> dv = host(d);
  for (int64_t r = 0; r < mg; ++r) {
    if (idx[size_t(r)] < 0) {
      ASSERT_EQ(dv[size_t(r * n)], 0.0) << "padding row " << r;
      continue;
    }
    expect_close(std::vector<double>(dv.begin() + r * n, dv.begin() + (r + 1) * n),
                 dgtest::ref_gemm(gdeq_a.data() + r * k, gdeq_b.data() + idx[size_t(r)] * n * k, 1, n, k), k, true,
                 "grouped fp4 row " + std::to_string(r));
  }
}

// FP4 B expanded in registers, every tile the kernel takes (DG_GPU_FP4=registers:BMxBN): partial
// tiles in M and N, both promotions, D = C + A B^T in FP32 and BF16 out; and the masked layout
// (rows past each group's count untouched) on the heuristic's tile and a forced one.
TEST(GpuFp4, RegistersEveryTileAndMasked) {
  REQUIRE_HOPPER();
  const int64_t m = 200, n = 200, k = 384;
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  auto [qa, sfa] = deepgemm::per_token_cast_to_fp8(a);
  const std::vector<double> deq_a = dgtest::dequant(qa, sfa, 1, 128);
  const rt::Tensor c = dgtest::normal({m, n}, rt::DType::F32, testutil::fresh_seed(), 4.0);
  const std::vector<double> cv = testutil::to_f64(c);
  for (int64_t gran : {32, 128}) {
    auto [qb, sfb] = deepgemm::per_token_cast_to_fp4(b, gran, false);
    const std::vector<double> deq_b = dgtest::dequant(qb, sfb, 1, gran);
    const Ref ref = dgtest::ref_gemm(deq_a.data(), deq_b.data(), m, n, k);
    const Ref ref_c = dgtest::ref_gemm(deq_a.data(), deq_b.data(), m, n, k, cv.data());
    const rt::Tensor ga = gpu(qa), gsfa = gpu(sfa), gb = gpu(qb), gsfb = gpu(sfb);
    for (const char* tile : {"16x64", "32x128", "48x64", "64x64", "64x128", "96x128", "128x64", "128x128", "32x64i",
                             "64x64i", "128x64i"}) {
      if (gran == 32 && std::atoi(tile) > 64) continue;
      const std::string form = std::string("registers:") + tile;
      dgtest::ScopedEnv env("DG_GPU_FP4", form.c_str());
      const std::string what = form + " per-" + std::to_string(gran);
      rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
      deepgemm::fp8_fp4_gemm_nt(ga, gsfa, gb, gsfb, d);
      const deepgemm::GemmConfig& used = deepgemm::last_config();
      EXPECT_EQ(std::to_string(used.block_m) + "x" + std::to_string(used.block_n) +
                    (used.kernel.find(".k_interleave") != std::string::npos ? "i" : ""),
                tile);
      expect_close(host(d), ref, k, true, what);
      rt::Tensor dc = gpu(poisoned({m, n}, rt::DType::F32));
      deepgemm::fp8_fp4_gemm_nt(ga, gsfa, gb, gsfb, dc, gpu(c));
      expect_close(host(dc), ref_c, k, false, what + " + c");
    }
  }
  {  // A tile the kernel cannot take is a clear error.
    dgtest::ScopedEnv env("DG_GPU_FP4", "registers:128x64");
    auto [qb, sfb] = deepgemm::per_token_cast_to_fp4(b, 32, false);
    dgtest::expect_user_error(
        [&] { deepgemm::fp8_fp4_gemm_nt(gpu(qa), gpu(sfa), gpu(qb), gpu(sfb), gpu(poisoned({m, n}, rt::DType::F32))); },
        {"DG_GPU_FP4='registers:128x64'", "at most 64 rows of A"});
  }

  const int64_t g = 3, max_m = 96, gn = 144, gk = 256;
  const std::vector<int32_t> masked = {50, 0, 96};
  const rt::Tensor ma = dgtest::normal({g * max_m, gk}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor mb = dgtest::normal({g * gn, gk}, rt::DType::BF16, testutil::fresh_seed());
  auto [mqa, msfa] = deepgemm::per_token_cast_to_fp8(ma);
  auto [mqb, msfb] = deepgemm::per_token_cast_to_fp4(mb, 128, false);
  const std::vector<double> mdeq_a = dgtest::dequant(mqa, msfa, 1, 128), mdeq_b = dgtest::dequant(mqb, msfb, 1, 128);
  for (const char* form : {"registers", "registers:32x64"}) {
    dgtest::ScopedEnv env("DG_GPU_FP4", form);
    rt::Tensor d = gpu(poisoned({g, max_m, gn}, rt::DType::BF16));
    deepgemm::m_grouped_fp8_fp4_gemm_nt_masked(
        dgtest::reshaped(gpu(mqa), {g, max_m, gk}), dgtest::reshaped(gpu(msfa), {g, max_m, gk / 128}),
        dgtest::reshaped(gpu(mqb), {g, gn, gk}), dgtest::reshaped(gpu(msfb), {g, gn, gk / 128}), d,
        gpu(dgtest::i32_tensor(masked)), 64);
    const std::string cfg = deepgemm::last_config().to_string();
    EXPECT_NE(deepgemm::last_config().kernel.find(".fp4_b_in_registers"), std::string::npos) << cfg;
    const std::vector<double> dv = host(d);
    for (int64_t gi = 0; gi < g; ++gi) {
      const int64_t mg = masked[size_t(gi)];
      if (mg > 0)
        expect_close(dgtest::rows_of(dv, gn, gi * max_m, mg),
                     dgtest::ref_gemm(mdeq_a.data() + gi * max_m * gk, mdeq_b.data() + gi * gn * gk, mg, gn, gk), gk,
                     true, "masked fp4 group " + std::to_string(gi) + " (" + cfg + ")");
      for (int64_t r = mg; r < max_m; ++r)
        for (int64_t j = 0; j < gn; ++j)
          ASSERT_TRUE(std::isnan(dv[size_t((gi * max_m + r) * gn + j)]))
              << "masked row " << r << " of group " << gi << " written (" << cfg << ")";
    }
  }
}

// Folded UE8M0 per-32 scales far apart inside a row's 128 of K: groups 2^-3 (exact), 2^-9 (at
// e4m3's subnormal step) and 2^-13 (below it) of the first; and a row whose first group is all
// zeros under a huge scale, which must not set the row's folding base. (128-column tiles: the
// kernel folds on those.)
TEST(GpuFp4, FoldedScalesFarApart) {
  REQUIRE_HOPPER();
  const int64_t m = 64, n = 72, k = 256;
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  std::vector<double> bv = testutil::to_f64(dgtest::normal({n, k}, rt::DType::F32, testutil::fresh_seed()));
  const int shift[4] = {0, -3, -9, -13};
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) bv[size_t(r * k + c)] *= std::ldexp(1.0, shift[(c / 32) % 4]);
  for (int64_t c = 0; c < 32; ++c) bv[size_t(c)] = 0.0;  // row 0, group 0
  auto [qa, sfa] = deepgemm::per_token_cast_to_fp8(a);
  auto [qb, sfb] = deepgemm::per_token_cast_to_fp4(dgtest::f32_tensor({n, k}, bv), 32, true);
  sfb.data_as<float>()[0] = std::ldexp(1.0f, 20);
  const std::vector<double> deq_a = dgtest::dequant(qa, sfa, 1, 128), deq_b = dgtest::dequant(qb, sfb, 1, 32);
  rt::Tensor d = gpu(poisoned({m, n}, rt::DType::F32));
  dgtest::ScopedEnv config("DG_GPU_CONFIG", "128x128x4");
  deepgemm::fp8_fp4_gemm_nt(gpu(qa), gpu(sfa), gpu(qb), gpu(deepgemm::cast_scales_to_ue8m0(sfb)), d);
  EXPECT_NE(deepgemm::last_config().kernel.find(".folded_scales"), std::string::npos) << deepgemm::last_config().kernel;
  expect_close(host(d), dgtest::ref_gemm(deq_a.data(), deq_b.data(), m, n, k), k, false, "folded scales far apart");
}

// K-grouped (MoE weight gradients): one launch per group, an empty group (D = C), C separate and
// in place.
TEST(GpuKGrouped, WeightGradient) {
  REQUIRE_HOPPER();
  const dgtest::KGroupedProblem p = dgtest::make_k_grouped({128, 0, 384, 256}, 96, 144);
  const std::vector<int64_t>& ks = p.ks;
  const int64_t g = int64_t(ks.size()), m = p.m, n = p.n;
  const std::vector<Ref>& refs = p.refs;
  const rt::Tensor &qa = p.qa, &sfa = p.sfa, &qb = p.qb, &sfb = p.sfb, &c = p.c;
  for (bool inplace : {false, true}) {
    rt::Tensor d = gpu(inplace ? c : poisoned({g, m, n}, rt::DType::F32));
    deepgemm::k_grouped_fp8_gemm_tn_contiguous(gpu(qa), gpu(sfa), gpu(qb), gpu(sfb), d, ks, inplace ? d : gpu(c));
    const std::vector<double> dv = host(d);
    for (int64_t gi = 0; gi < g; ++gi)
      expect_close(dgtest::rows_of(dv, n, gi * m, m), refs[size_t(gi)], std::max<int64_t>(ks[size_t(gi)], 1), false,
                   std::string(inplace ? "in place, " : "") + "group " + std::to_string(gi));
  }
}

// The cycle timeline (kernels/sm90_timeline.h; bench_gpu_deepgemm --timeline): the stamped kernel
// still computes D, and each recorded stream holds its k-blocks whole and in clock order -- one
// full wait and one release per k-block and consumer warp, one epilogue per consumer warp,
// one TMA issue per k-block of the producer (one tile per CTA here), every stream of a CTA on one SM.
TEST(GpuTimeline, StampsEveryKBlock) {
  REQUIRE_HOPPER();
  using E = deepgemm::kernels::TimelineEvent;
  const int64_t m = 256, n = 1024, k = 1024, k_blocks = k / 128;
  const Fp8Problem p = make_problem(m, n, k, true);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  const int64_t bytes = deepgemm::kernels::kTimelineBytes;
  rt::Tensor zeros = rt::Tensor::empty({bytes}, rt::DType::U8);
  std::memset(zeros.data(), 0, size_t(bytes));
  // Two partial sets (64 x 64, one consumer) and two m64 waves per consumer (256 x 128, two); no
  // split-K pieces.
  for (const char* config : {"64x64x8", "256x128x3"}) {
    const rt::Tensor stamps = gpu(zeros);
    dgtest::ScopedEnv flags("DG_JIT_FLAGS", deepgemm::detail::timeline_jit_flag(stamps.data()).c_str());
    dgtest::ScopedEnv forced("DG_GPU_CONFIG", config);
    dgtest::ScopedEnv whole("DG_GPU_SPLIT_K", "1");
    rt::Tensor d = gpu(poisoned({m, n}, rt::DType::BF16));
    deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d);
    expect_close(host(d), ref, k, true, config);
    const rt::Tensor h = stamps.to(rt::Device::cpu());
    std::vector<uint64_t> words(size_t(bytes / 8));
    std::memcpy(words.data(), h.data(), size_t(bytes));
    const auto streams = deepgemm::detail::parse_timeline(words);
    const int64_t ctas = std::min<int64_t>(deepgemm::last_config().num_tasks, deepgemm::kernels::kTimelineCtas);
    const int consumers = deepgemm::last_config().block_m == 64 ? 1 : 2;
    EXPECT_EQ(int64_t(streams.size()), ctas * (1 + 4 * consumers)) << config;
    for (const auto& s : streams) {
      const std::string what =
          std::string(config) + " CTA " + std::to_string(s.cta) + " stream " + std::to_string(s.stream);
      ASSERT_EQ(s.stamped, int64_t(s.events.size())) << what;
      EXPECT_EQ(s.events.front().first, int(E::Start)) << what;
      EXPECT_EQ(s.events.back().first, int(E::End)) << what;
      EXPECT_EQ(s.smid, streams[size_t(s.cta) * (1 + 4 * consumers)].smid) << what;
      EXPECT_LE(s.globaltimer_start, s.globaltimer_end) << what;
      std::vector<int64_t> count(size_t(E::Count));
      for (size_t i = 0; i < s.events.size(); ++i) {
        ++count[size_t(s.events[i].first)];
        if (i > 0) {
          EXPECT_LE(s.events[i - 1].second, s.events[i].second) << what << " event " << i;
        }
      }
      // Every stage fill once per stream (one tile per CTA, 8 k-blocks), none skipped.
      for (E e : s.stream == 0 ? std::vector<E>{E::EmptyWaitBegin, E::EmptyWaitEnd, E::TmaIssue}
                               : std::vector<E>{E::FullWaitBegin, E::FullWaitEnd, E::Release})
        EXPECT_EQ(count[size_t(e)], k_blocks) << what << " event " << int(e);
      EXPECT_EQ(count[size_t(E::Skip)], 0) << what;
      // One epilogue per consumer and tile.
      const int64_t stores = s.stream != 0 ? 1 : 0;
      EXPECT_EQ(count[size_t(E::StoreBegin)], stores) << what;
      EXPECT_EQ(count[size_t(E::StoreEnd)], stores) << what;
      if (s.stream > 0) {
        EXPECT_GT(deepgemm::detail::timeline_stats(s).cycles_per_k_block, 0) << what;
      }
    }
  }
}

TEST(GpuErrors, ForcedConfigurationsTheKernelCannotTake) {
  REQUIRE_HOPPER();
  const int64_t m = 64, n = 64, k = 256;
  const Fp8Problem p = make_problem(m, n, k, false);
  rt::Tensor d2 = gpu(poisoned({m, n}, rt::DType::BF16));
  for (const char* bad :
       {"128x100x4", "128x52x4", "64x56x4x2", "96x128x4", "128x128", "128x192x9", "128x128x4x3", "128x128x4x2", "192x192x4", "192x128x4x2",
        "128x128x4c2", "128x128x4c1", "64x192x4c2", "64x64x4c3", "64x64x4c0", "64x64x4c"}) {
    dgtest::ScopedEnv env("DG_GPU_CONFIG", bad);
    dgtest::expect_user_error([&] { deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d2); },
                              {"fp8_gemm_nt", "DG_GPU_CONFIG", bad});
  }
  for (const char* bad : {"-2", "often", "1.5"}) {
    dgtest::ScopedEnv env("DG_GPU_ROUND_SYNC", bad);
    dgtest::expect_user_error([&] { deepgemm::fp8_gemm_nt(gpu(p.qa), gpu(p.sfa), gpu(p.qb), gpu(p.sfb), d2); },
                              {"DG_GPU_ROUND_SYNC", bad});
  }
  // A K-grouped call (one launch per group) with a split that a later group cannot take is refused
  // before the first launch: D keeps every byte (the first groups' D used to be written).
  const dgtest::KGroupedProblem kg = dgtest::make_k_grouped({512, 384, 128}, 96, 144);
  const rt::Tensor poison = poisoned({int64_t(kg.ks.size()), kg.m, kg.n}, rt::DType::F32);
  rt::Tensor dk = gpu(poison);
  {
    dgtest::ScopedEnv env("DG_GPU_SPLIT_K", "2");
    dgtest::expect_user_error([&] { deepgemm::k_grouped_fp8_gemm_tn_contiguous(gpu(kg.qa), gpu(kg.sfa), gpu(kg.qb), gpu(kg.sfb), dk, kg.ks, gpu(kg.c)); },
                              {"DG_GPU_SPLIT_K=2", "group 2 has K = 128"});
  }
  const rt::Tensor back = dk.to(rt::Device::cpu());
  EXPECT_EQ(std::memcmp(back.data(), poison.data(), size_t(poison.nbytes())), 0) << "a refused call wrote D";
}

// The casts of CUDA tensors give the CPU casts' bits (the CPU casts are checked against the
// documented rule in quant_test.cc): every cast, dtype and scale kind, on ragged shapes (partial
// blocks), contiguous and transposed inputs, with an all-zero block.
TEST(GpuQuant, CastsLikeCpu) {
  REQUIRE_HOPPER();
  auto same = [](const rt::Tensor& cpu, const rt::Tensor& dev, const std::string& what) {
    ASSERT_TRUE(dev.device().is_cuda()) << what;
    ASSERT_EQ(cpu.shape(), dev.shape()) << what;
    ASSERT_EQ(cpu.dtype(), dev.dtype()) << what;
    const rt::Tensor back = dev.to(rt::Device::cpu());
    const auto* a = static_cast<const uint8_t*>(cpu.data());
    const auto* b = static_cast<const uint8_t*>(back.data());
    int64_t bad = 0;
    for (int64_t i = 0; i < cpu.nbytes(); ++i)
      if (a[i] != b[i] && bad++ < 3) ADD_FAILURE() << what << ": byte " << i << ": cpu " << int(a[i]) << ", gpu " << int(b[i]);
    EXPECT_EQ(bad, 0) << what;
  };
  for (auto [r, c] : {std::pair<int64_t, int64_t>{1, 2}, {37, 300}, {130, 258}, {256, 1024}})
    for (rt::DType dtype : {rt::DType::F32, rt::DType::BF16, rt::DType::F16})
      for (bool transposed : {false, true}) {
        rt::Tensor x = dgtest::normal({r, c}, dtype, testutil::fresh_seed(), 1.0,
                                      [](int64_t i, int64_t j) { return std::ldexp(1.0, int((i / 16 + j / 100) % 9) - 4); });
        if (r >= 128 && c >= 128)  // an all-zero block: the 1e-4 floor
          for (int64_t i = 0; i < 128; ++i)
            std::memset(static_cast<uint8_t*>(x.data()) + i * c * dgtest::elem_bytes(dtype), 0,
                        size_t(128 * dgtest::elem_bytes(dtype)));
        // The transposed case: x is the [c, r] view of a contiguous [r, c] tensor (strides 1, c).
        const rt::Tensor base = gpu(x);
        const rt::Tensor xc = transposed ? rt::Tensor::wrap(x.data(), {c, r}, dtype, rt::Device::cpu(), {1, c}, x.storage())
                                         : x;
        const rt::Tensor xg = transposed ? rt::Tensor::wrap(base.data(), {c, r}, dtype, kGpu, {1, c}, base.storage())
                                         : base;
        const std::string what = std::string(rt::name(dtype)) + " [" + std::to_string(xc.size(0)) + ", " +
                                 std::to_string(xc.size(1)) + "]" + (transposed ? " transposed" : "");
        for (bool ue8m0 : {false, true}) {
          const std::string w = what + (ue8m0 ? " ue8m0" : "");
          auto [q1, s1] = deepgemm::per_token_cast_to_fp8(xc, ue8m0);
          auto [g1, t1] = deepgemm::per_token_cast_to_fp8(xg, ue8m0);
          same(q1, g1, "per_token values " + w);
          same(s1, t1, "per_token scales " + w);
          auto [q2, s2] = deepgemm::per_block_cast_to_fp8(xc, ue8m0);
          auto [g2, t2] = deepgemm::per_block_cast_to_fp8(xg, ue8m0);
          same(q2, g2, "per_block values " + w);
          same(s2, t2, "per_block scales " + w);
          auto [q3, s3] = deepgemm::per_channel_cast_to_fp8(xc, ue8m0);
          auto [g3, t3] = deepgemm::per_channel_cast_to_fp8(xg, ue8m0);
          same(q3, g3, "per_channel values " + w);
          same(s3, t3, "per_channel scales " + w);
          if (xc.size(1) % 2 == 0)
            for (int64_t gran : {int64_t(32), int64_t(128)}) {
              auto [q4, s4] = deepgemm::per_token_cast_to_fp4(xc, gran, ue8m0);
              auto [g4, t4] = deepgemm::per_token_cast_to_fp4(xg, gran, ue8m0);
              same(q4, g4, "fp4 values " + w + " gran " + std::to_string(gran));
              same(s4, t4, "fp4 scales " + w + " gran " + std::to_string(gran));
            }
        }
      }
}

}  // namespace
