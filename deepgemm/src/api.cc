// The public GEMM entry points: each builds its Problem (validate.cc) and hands it to the one
// dispatch point (dispatch.cc).
#include "deepgemm/gemm.h"

#include "backend.h"
#include "validate.h"

namespace deepgemm {

using detail::Kind;
using detail::Major;

void fp8_gemm_nt(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                 const rt::Tensor& d, const rt::Tensor& c) {
  detail::run(detail::make_fp8_gemm("fp8_gemm_nt", false, a, a_scales, b, b_scales, d, c, Major::K, Major::K));
}
void fp8_gemm_nn(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                 const rt::Tensor& d, const rt::Tensor& c) {
  detail::run(detail::make_fp8_gemm("fp8_gemm_nn", false, a, a_scales, b, b_scales, d, c, Major::K, Major::MN));
}
void fp8_gemm_tn(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                 const rt::Tensor& d, const rt::Tensor& c) {
  detail::run(detail::make_fp8_gemm("fp8_gemm_tn", false, a, a_scales, b, b_scales, d, c, Major::MN, Major::MN));
}
void fp8_gemm_tt(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                 const rt::Tensor& d, const rt::Tensor& c) {
  detail::run(detail::make_fp8_gemm("fp8_gemm_tt", false, a, a_scales, b, b_scales, d, c, Major::MN, Major::K));
}

void bf16_gemm_nt(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d, const rt::Tensor& c) {
  detail::run(detail::make_bf16_gemm("bf16_gemm_nt", a, b, d, c, Major::K, Major::K));
}
void bf16_gemm_nn(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d, const rt::Tensor& c) {
  detail::run(detail::make_bf16_gemm("bf16_gemm_nn", a, b, d, c, Major::K, Major::MN));
}
void bf16_gemm_tn(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d, const rt::Tensor& c) {
  detail::run(detail::make_bf16_gemm("bf16_gemm_tn", a, b, d, c, Major::MN, Major::MN));
}
void bf16_gemm_tt(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d, const rt::Tensor& c) {
  detail::run(detail::make_bf16_gemm("bf16_gemm_tt", a, b, d, c, Major::MN, Major::K));
}

void fp8_fp4_gemm_nt(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                     const rt::Tensor& d, const rt::Tensor& c) {
  detail::run(detail::make_fp8_gemm("fp8_fp4_gemm_nt", true, a, a_scales, b, b_scales, d, c, Major::K, Major::K));
}

void m_grouped_fp8_gemm_nt_contiguous(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                      const rt::Tensor& b_scales, const rt::Tensor& d, const rt::Tensor& m_indices) {
  detail::run(detail::make_m_grouped_contiguous("m_grouped_fp8_gemm_nt_contiguous", Kind::Fp8, a, a_scales, b,
                                                b_scales, d, m_indices));
}
void m_grouped_fp8_gemm_nt_masked(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                  const rt::Tensor& b_scales, const rt::Tensor& d, const rt::Tensor& masked_m,
                                  int64_t expected_m) {
  detail::run(detail::make_m_grouped_masked("m_grouped_fp8_gemm_nt_masked", Kind::Fp8, a, a_scales, b, b_scales, d,
                                            masked_m, expected_m));
}
void m_grouped_fp8_fp4_gemm_nt_contiguous(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                          const rt::Tensor& b_scales, const rt::Tensor& d,
                                          const rt::Tensor& m_indices) {
  detail::run(detail::make_m_grouped_contiguous("m_grouped_fp8_fp4_gemm_nt_contiguous", Kind::Fp8Fp4, a, a_scales, b,
                                                b_scales, d, m_indices));
}
void m_grouped_fp8_fp4_gemm_nt_masked(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                      const rt::Tensor& b_scales, const rt::Tensor& d, const rt::Tensor& masked_m,
                                      int64_t expected_m) {
  detail::run(detail::make_m_grouped_masked("m_grouped_fp8_fp4_gemm_nt_masked", Kind::Fp8Fp4, a, a_scales, b,
                                            b_scales, d, masked_m, expected_m));
}
void m_grouped_bf16_gemm_nt_contiguous(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d,
                                       const rt::Tensor& m_indices) {
  detail::run(
      detail::make_m_grouped_contiguous("m_grouped_bf16_gemm_nt_contiguous", Kind::Bf16, a, {}, b, {}, d, m_indices));
}
void m_grouped_bf16_gemm_nt_masked(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d,
                                   const rt::Tensor& masked_m, int64_t expected_m) {
  detail::run(detail::make_m_grouped_masked("m_grouped_bf16_gemm_nt_masked", Kind::Bf16, a, {}, b, {}, d, masked_m,
                                            expected_m));
}

void k_grouped_fp8_gemm_tn_contiguous(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                      const rt::Tensor& b_scales, const rt::Tensor& d, const std::vector<int64_t>& ks,
                                      const rt::Tensor& c) {
  detail::run(detail::make_k_grouped("k_grouped_fp8_gemm_tn_contiguous", a, a_scales, b, b_scales, d, ks, c));
}

}  // namespace deepgemm
