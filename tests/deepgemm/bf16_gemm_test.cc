// bf16_gemm_{nt,nn,tn,tt} on the CPU against the float64 product of the bfloat16 inputs.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "deepgemm/deepgemm.h"
#include "dg_test_util.h"

namespace {

using Bf16Fn = void (*)(const rt::Tensor&, const rt::Tensor&, const rt::Tensor&, const rt::Tensor&);

struct Layout {
  const char* name;
  Bf16Fn fn;
  bool a_t, b_t;
};
const Layout kLayouts[] = {{"nt", &deepgemm::bf16_gemm_nt, false, false},
                           {"nn", &deepgemm::bf16_gemm_nn, false, true},
                           {"tn", &deepgemm::bf16_gemm_tn, true, true},
                           {"tt", &deepgemm::bf16_gemm_tt, true, false}};

using testutil::poisoned;

TEST(Bf16Gemm, AllLayoutsMatchReference) {
  const int64_t m = 152, n = 136, k = 328;  // none a multiple of the micro-tile; K not of 128
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor c = dgtest::normal({m, n}, rt::DType::F32, testutil::fresh_seed(), 3.0);
  const std::vector<double> av = testutil::to_f64(a), bv = testutil::to_f64(b), cv = testutil::to_f64(c);
  const dgtest::Ref ref = dgtest::ref_gemm(av.data(), bv.data(), m, n, k);
  const dgtest::Ref ref_c = dgtest::ref_gemm(av.data(), bv.data(), m, n, k, cv.data());
  for (const Layout& l : kLayouts) {
    const rt::Tensor ai = l.a_t ? dgtest::transpose(a) : a, bi = l.b_t ? dgtest::transpose(b) : b;
    for (rt::DType out : {rt::DType::BF16, rt::DType::F32}) {
      const std::string what = std::string("bf16_gemm_") + l.name + " -> " + rt::name(out);
      rt::Tensor d = poisoned({m, n}, out);
      l.fn(ai, bi, d, {});
      const std::vector<double> o = testutil::to_f64(d);
      const double diff = dgtest::expect_matches_reference(o, ref, k, out == rt::DType::BF16, what);
      EXPECT_LT(diff, 1e-5) << what;
      EXPECT_LT(testutil::rel_error(o, ref.val), 3e-3) << what;
      if (out == rt::DType::F32) {
        rt::Tensor d2 = poisoned({m, n}, out);
        l.fn(ai, bi, d2, c);
        dgtest::expect_matches_reference(testutil::to_f64(d2), ref_c, k, false, what + " + c");
        rt::Tensor inplace = dgtest::f32_tensor({m, n}, cv);
        l.fn(ai, bi, inplace, inplace);
        dgtest::expect_matches_reference(testutil::to_f64(inplace), ref_c, k, false, what + " + c in place");
      }
    }
  }
}

TEST(Bf16Gemm, RelativeErrorOnNormalData) {
  const int64_t m = 256, n = 256, k = 1024;
  const rt::Tensor a = dgtest::normal({m, k}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({n, k}, rt::DType::BF16, testutil::fresh_seed());
  const std::vector<double> av = testutil::to_f64(a), bv = testutil::to_f64(b);
  const dgtest::Ref ref = dgtest::ref_gemm(av.data(), bv.data(), m, n, k);
  rt::Tensor d = poisoned({m, n}, rt::DType::BF16);
  deepgemm::bf16_gemm_nt(a, b, d);
  const std::vector<double> out = testutil::to_f64(d);
  const double rel = testutil::rel_error(out, ref.val), diff = testutil::calc_diff(out, ref.val);
  std::printf("[ bf16 gemm, bf16 out ] relative error %.4f%%, calc_diff %.3g\n", rel * 100, diff);
  EXPECT_LT(rel, 3e-3);
  EXPECT_LT(diff, 1e-5);
}

}  // namespace
