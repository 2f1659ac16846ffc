// fp8_gemm_{nt,nn,tn,tt} on the CPU against a float64 reference computed from the de-quantized
// inputs (element-wise bound of float32 accumulation), and against the unquantized product.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "deepgemm/deepgemm.h"
#include "dg_test_util.h"
#include "rt/cpu_info.h"

namespace {

using dgtest::Ref;

using Fp8Fn = void (*)(const rt::Tensor&, const rt::Tensor&, const rt::Tensor&, const rt::Tensor&, const rt::Tensor&,
                       const rt::Tensor&);

struct Layout {
  const char* name;
  Fp8Fn fn;
  bool a_t, b_t;  // passed transposed
};
const Layout kLayouts[] = {{"nt", &deepgemm::fp8_gemm_nt, false, false},
                           {"nn", &deepgemm::fp8_gemm_nn, false, true},
                           {"tn", &deepgemm::fp8_gemm_tn, true, true},
                           {"tt", &deepgemm::fp8_gemm_tt, true, false}};

using dgtest::Fp8Problem;
using dgtest::make_problem;

using testutil::poisoned;

// The CPU kernels' ISA variants this CPU runs (DG_CPU_ISA values).
std::vector<const char*> cpu_isas() {
  [[maybe_unused]] const rt::CpuInfo& cpu = rt::cpu_info();
  std::vector<const char*> isas = {"generic"};
#if defined(__x86_64__)
  if (cpu.has_avx2 && cpu.has_fma && cpu.has_f16c) isas.push_back("avx2");
  if (cpu.has_avx512f) isas.push_back("avx512");
#endif
  return isas;
}

TEST(Fp8Gemm, AllLayoutsMatchDequantizedReference) {
  const int64_t m = 208, n = 320, k = 512;  // partial MR/NR tiles, a partial 128-block of N, 2 K passes
  const Fp8Problem p = make_problem(m, n, k, /*gains=*/true);
  const rt::Tensor c = dgtest::normal({m, n}, rt::DType::F32, testutil::fresh_seed(), 4.0);
  const std::vector<double> cv = testutil::to_f64(c);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  const Ref ref_c = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k, cv.data());
  for (const Layout& l : kLayouts) {
    const rt::Tensor a = l.a_t ? dgtest::transpose(p.qa) : p.qa, sfa = l.a_t ? dgtest::transpose(p.sfa) : p.sfa;
    const rt::Tensor b = l.b_t ? dgtest::transpose(p.qb) : p.qb, sfb = l.b_t ? dgtest::transpose(p.sfb) : p.sfb;
    for (rt::DType out : {rt::DType::BF16, rt::DType::F32}) {
      const std::string what = std::string("fp8_gemm_") + l.name + " -> " + rt::name(out);
      rt::Tensor d = poisoned({m, n}, out);
      l.fn(a, sfa, b, sfb, d, {});
      const double diff = dgtest::expect_matches_reference(testutil::to_f64(d), ref, k, out == rt::DType::BF16, what);
      EXPECT_LT(diff, 1e-3) << what;
      if (out == rt::DType::F32) {  // accumulate: D = C + A B^T, into a separate d and in place
        rt::Tensor d2 = poisoned({m, n}, out);
        l.fn(a, sfa, b, sfb, d2, c);
        dgtest::expect_matches_reference(testutil::to_f64(d2), ref_c, k, false, what + " + c");
        rt::Tensor inplace = dgtest::f32_tensor({m, n}, cv);
        l.fn(a, sfa, b, sfb, inplace, inplace);
        dgtest::expect_matches_reference(testutil::to_f64(inplace), ref_c, k, false, what + " + c in place");
      }
    }
  }
}

// The promotion: each 128-block's partial product is scaled by its own scales. Zeroing a's scales
// for one K block must remove exactly that block's contribution (and nothing else).
TEST(Fp8Gemm, EachKBlockUsesItsOwnScales) {
  const int64_t m = 64, n = 128, k = 384;
  const Fp8Problem p = make_problem(m, n, k, true);
  for (int64_t kb = 0; kb < k / 128; ++kb) {
    rt::Tensor sfa = dgtest::transpose(dgtest::transpose(p.sfa));  // a copy
    float* s = sfa.data_as<float>();
    for (int64_t i = 0; i < m; ++i) s[i * (k / 128) + kb] = 0.0f;
    std::vector<double> deq_a = dgtest::dequant(p.qa, sfa, 1, 128);
    const Ref ref = dgtest::ref_gemm(deq_a.data(), p.deq_b.data(), m, n, k);
    rt::Tensor d = poisoned({m, n}, rt::DType::F32);
    deepgemm::fp8_gemm_nt(p.qa, sfa, p.qb, p.sfb, d);
    dgtest::expect_matches_reference(testutil::to_f64(d), ref, k, false, "block " + std::to_string(kb) + " zeroed");
  }
}

// Scale layouts: the TMA-aligned MN-major form and ue8m0 scales give the same bits as the plain
// float32 form with the same (power-of-two) values.
TEST(Fp8Gemm, ScaleLayoutsAndUe8m0GiveIdenticalResults) {
  const int64_t m = 100, n = 256, k = 256;  // M not a multiple of 4: the aligned form is padded
  const Fp8Problem p = make_problem(m, n, k, true, /*ue8m0=*/true);
  rt::Tensor base = poisoned({m, n}, rt::DType::F32);
  deepgemm::fp8_gemm_nt(p.qa, p.sfa, p.qb, p.sfb, base);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  dgtest::expect_matches_reference(testutil::to_f64(base), ref, k, false, "ue8m0-valued float32 scales");
  const std::vector<double> expected = testutil::to_f64(base);

  const rt::Tensor sfa_tma = deepgemm::get_mn_major_tma_aligned_tensor(p.sfa);
  EXPECT_EQ(sfa_tma.stride(0), 1);
  EXPECT_EQ(sfa_tma.stride(1), 100);  // 100 is already a multiple of 4
  const rt::Tensor sfa_u = deepgemm::cast_scales_to_ue8m0(p.sfa), sfb_u = deepgemm::cast_scales_to_ue8m0(p.sfb);
  const rt::Tensor sfa_u_tma = deepgemm::get_mn_major_tma_aligned_tensor(sfa_u);
  EXPECT_EQ(sfa_u_tma.stride(1), 112);  // 100 ue8m0 bytes padded to a multiple of 16
  struct Variant {
    const char* name;
    rt::Tensor sfa, sfb;
  };
  const Variant variants[] = {{"tma-aligned a_scales", sfa_tma, p.sfb},
                              {"ue8m0 scales", sfa_u, sfb_u},
                              {"tma-aligned ue8m0 a_scales", sfa_u_tma, sfb_u},
                              {"mn-major b_scales", p.sfa, deepgemm::get_mn_major_tma_aligned_tensor(p.sfb)}};
  for (const Variant& v : variants) {
    rt::Tensor d = poisoned({m, n}, rt::DType::F32);
    deepgemm::fp8_gemm_nt(p.qa, v.sfa, p.qb, v.sfb, d);
    EXPECT_EQ(testutil::to_f64(d), expected) << v.name;
  }
}

// Strided operands: rows padded past K (16-byte multiples), the padding poisoned.
TEST(Fp8Gemm, PaddedRowStrides) {
  const int64_t m = 72, n = 144, k = 256;
  const Fp8Problem p = make_problem(m, n, k, false);
  const rt::Tensor a = dgtest::padded_view(p.qa, k + 64), b = dgtest::padded_view(p.qb, k + 16);
  rt::Tensor d_store = poisoned({m, n + 8}, rt::DType::BF16);
  const rt::Tensor d = rt::Tensor::wrap(d_store.data(), {m, n}, rt::DType::BF16, rt::Device::cpu(), {n + 8, 1},
                                        d_store.storage());
  deepgemm::fp8_gemm_nt(a, p.sfa, b, p.sfb, d);
  const std::vector<double> all = testutil::to_f64(d_store);
  std::vector<double> out;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) out.push_back(all[size_t(i * (n + 8) + j)]);
    for (int64_t j = n; j < n + 8; ++j) EXPECT_TRUE(std::isnan(all[size_t(i * (n + 8) + j)])) << "row padding written";
  }
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  dgtest::expect_matches_reference(out, ref, k, true, "padded strides");
}

// Edge shapes: one row, few columns, K = 0 (D = C).
TEST(Fp8Gemm, EdgeShapes) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 128}, {3, 16, 640}, {130, 40, 128}}) {
    const Fp8Problem p = make_problem(m, n, k, true);
    rt::Tensor d = poisoned({m, n}, rt::DType::BF16);
    deepgemm::fp8_gemm_nt(p.qa, p.sfa, p.qb, p.sfb, d);
    const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
    dgtest::expect_matches_reference(testutil::to_f64(d), ref, k, true,
                                     "shape " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
  }
  // K = 0: the product is empty, D = C.
  const rt::Tensor a = rt::Tensor::empty({16, 0}, rt::DType::F8E4M3), b = rt::Tensor::empty({32, 0}, rt::DType::F8E4M3);
  const rt::Tensor sfa = rt::Tensor::empty({16, 0}, rt::DType::F32), sfb = rt::Tensor::empty({1, 0}, rt::DType::F32);
  const rt::Tensor c = dgtest::normal({16, 32}, rt::DType::F32, testutil::fresh_seed());
  rt::Tensor d = poisoned({16, 32}, rt::DType::F32);
  deepgemm::fp8_gemm_nt(a, sfa, b, sfb, d, c);
  EXPECT_EQ(testutil::to_f64(d), testutil::to_f64(c));
}

// K not a multiple of 128: the last scale block of K is partial (DeepGEMM's (N, K) = (7168, 576)
// shape has one), in one pass and over several; both outputs, with C.
TEST(Fp8Gemm, PartialLastKBlock) {
  for (int64_t k : {208, 576}) {
    const int64_t m = 72, n = 136;
    const Fp8Problem p = make_problem(m, n, k, true);
    ASSERT_EQ(p.sfa.size(1), (k + 127) / 128);
    const rt::Tensor c = dgtest::normal({m, n}, rt::DType::F32, testutil::fresh_seed());
    const std::vector<double> cv = testutil::to_f64(c);
    const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k, cv.data());
    rt::Tensor d = poisoned({m, n}, rt::DType::F32);
    deepgemm::fp8_gemm_nt(p.qa, p.sfa, p.qb, p.sfb, d, c);
    dgtest::expect_matches_reference(testutil::to_f64(d), ref, k, false, "K = " + std::to_string(k));
  }
}

// Every ISA variant this CPU runs gives a result within the bound (DG_CPU_ISA).
TEST(Fp8Gemm, EveryCpuIsa) {
  const int64_t m = 96, n = 208, k = 384;  // tt: a is [K, M], M a multiple of 16 bytes
  const Fp8Problem p = make_problem(m, n, k, true);
  const Ref ref = dgtest::ref_gemm(p.deq_a.data(), p.deq_b.data(), m, n, k);
  for (const char* isa : cpu_isas()) {
    dgtest::ScopedEnv env("DG_CPU_ISA", isa);
    rt::Tensor d = poisoned({m, n}, rt::DType::F32);
    deepgemm::fp8_gemm_tt(dgtest::transpose(p.qa), dgtest::transpose(p.sfa), p.qb, p.sfb, d);
    EXPECT_NE(deepgemm::last_config().kernel.find(isa), std::string::npos) << deepgemm::last_config().to_string();
    dgtest::expect_matches_reference(testutil::to_f64(d), ref, k, false, std::string("isa ") + isa);
  }
}

// Every e4m3 code converts exactly, on every ISA, in both operands: A holds all 254 finite codes
// in a row and B is a permutation matrix (scales 1), so D[0, n] is exactly one code's value; then a
// NaN code makes its row NaN.
TEST(Fp8Gemm, EveryE4m3CodeConvertsExactly) {
  const int64_t k = 256, n = 256;
  rt::Tensor codes = rt::Tensor::empty({4, k}, rt::DType::F8E4M3);  // rows: the codes, reversed, again
  rt::Tensor perm = rt::Tensor::empty({n, k}, rt::DType::F8E4M3);
  auto* c = static_cast<uint8_t*>(codes.data());
  auto* p = static_cast<uint8_t*>(perm.data());
  for (int64_t i = 0; i < k; ++i) {
    auto finite = [](int64_t code) { return (code & 0x7F) == 0x7F ? uint8_t(0) : uint8_t(code); };
    c[i] = finite(i);
    c[k + i] = finite(255 - i);
    c[2 * k + i] = c[i];
    c[3 * k + i] = c[k + i];
  }
  for (int64_t i = 0; i < n * k; ++i) p[i] = 0;
  for (int64_t j = 0; j < n; ++j) p[j * k + (j * 37) % k] = 0x38;  // 1.0 at a permuted position
  const rt::Tensor ones_a = dgtest::f32_tensor({4, 2}, std::vector<double>(8, 1.0));
  const rt::Tensor ones_b = dgtest::f32_tensor({2, 2}, {1, 1, 1, 1});
  for (const char* isa : cpu_isas()) {
    dgtest::ScopedEnv env("DG_CPU_ISA", isa);
    rt::Tensor d = poisoned({4, n}, rt::DType::F32);
    deepgemm::fp8_gemm_nt(codes, ones_a, perm, ones_b, d);
    const std::vector<double> out = testutil::to_f64(d);
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t code = c[r * k + (j * 37) % k];
        ASSERT_EQ(out[size_t(r * n + j)], double(tl::float8_e4m3_t::from_bits(code).to_float()))
            << isa << ": code 0x" << std::hex << int(code);
      }
    // The same codes as B (rows of B, K-major), A the permutation.
    rt::Tensor d2 = poisoned({n, 4}, rt::DType::F32);
    deepgemm::fp8_gemm_nt(perm, dgtest::f32_tensor({n, 2}, std::vector<double>(size_t(2 * n), 1.0)), codes,
                          dgtest::f32_tensor({1, 2}, {1, 1}), d2);
    const std::vector<double> out2 = testutil::to_f64(d2);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t r = 0; r < 4; ++r)
        ASSERT_EQ(out2[size_t(j * 4 + r)], double(tl::float8_e4m3_t::from_bits(c[r * k + (j * 37) % k]).to_float()))
            << isa;
    c[5] = 0x7F;  // NaN
    deepgemm::fp8_gemm_nt(codes, ones_a, perm, ones_b, d);
    EXPECT_TRUE(std::isnan(testutil::to_f64(d)[0])) << isa << ": a NaN input must give NaN";
    c[5] = 5;
  }
}

// Against the unquantized product of N(0, 1) bfloat16 inputs: what FP8 with fine-grained scaling
// costs. e4m3 keeps 3 mantissa bits, so each input carries up to 2^-4 relative rounding error (about
// 2.3% RMS on normal data after block scaling); the product's relative error is about sqrt(2) times
// that. DeepGEMM's own criterion is calc_diff < 1e-3.
TEST(Fp8Gemm, CloseToUnquantizedProduct) {
  const int64_t m = 256, n = 256, k = 1024;
  for (bool ue8m0 : {false, true}) {
    const Fp8Problem p = make_problem(m, n, k, false, ue8m0);
    const std::vector<double> a = testutil::to_f64(p.a), b = testutil::to_f64(p.b);
    const Ref exact = dgtest::ref_gemm(a.data(), b.data(), m, n, k);
    rt::Tensor d = poisoned({m, n}, rt::DType::BF16);
    deepgemm::fp8_gemm_nt(p.qa, p.sfa, p.qb, p.sfb, d);
    const std::vector<double> out = testutil::to_f64(d);
    const double rel = testutil::rel_error(out, exact.val), diff = testutil::calc_diff(out, exact.val);
    std::printf("[ fp8 vs bf16 product, %s scales ] relative error %.4f%%, calc_diff %.3g\n", ue8m0 ? "ue8m0" : "fp32",
                rel * 100, diff);
    EXPECT_LT(diff, 1e-3);
    EXPECT_LT(rel, ue8m0 ? 0.045 : 0.04);
  }
}

}  // namespace
