// Argument checks of every public GEMM: each builder checks its tensors (dtypes, shapes, layouts,
// alignment, devices, index contents on the CPU) and returns the Problem, or throws a user error
// "deepgemm::<function>: <argument> ..." naming what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "problem.h"
#include "rt/tensor.h"

namespace deepgemm::detail {

// Storage of an operand: K-major (the logical [MN, K] is row-major) or MN-major (passed transposed).
enum class Major { K, MN };

// fp8_gemm_xx (fp4 = false) and fp8_fp4_gemm_nt (fp4 = true).
Problem make_fp8_gemm(const std::string& function, bool fp4, const rt::Tensor& a, const rt::Tensor& sfa,
                      const rt::Tensor& b, const rt::Tensor& sfb, const rt::Tensor& d, const rt::Tensor& c,
                      Major major_a, Major major_b);
Problem make_bf16_gemm(const std::string& function, const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d,
                       const rt::Tensor& c, Major major_a, Major major_b);
// M-grouped, contiguous (m_indices) or masked (masked_m, expected_m). kind: Fp8, Fp8Fp4 or Bf16
// (sfa/sfb undefined for Bf16).
Problem make_m_grouped_contiguous(const std::string& function, Kind kind, const rt::Tensor& a, const rt::Tensor& sfa,
                                  const rt::Tensor& b, const rt::Tensor& sfb, const rt::Tensor& d,
                                  const rt::Tensor& m_indices);
Problem make_m_grouped_masked(const std::string& function, Kind kind, const rt::Tensor& a, const rt::Tensor& sfa,
                              const rt::Tensor& b, const rt::Tensor& sfb, const rt::Tensor& d,
                              const rt::Tensor& masked_m, int64_t expected_m);
Problem make_k_grouped(const std::string& function, const rt::Tensor& a, const rt::Tensor& sfa, const rt::Tensor& b,
                       const rt::Tensor& sfb, const rt::Tensor& d, const std::vector<int64_t>& ks,
                       const rt::Tensor& c);

// [lo, hi) byte addresses the elements of `t` occupy (lo == hi for an empty tensor).
void byte_range(const rt::Tensor& t, uintptr_t* lo, uintptr_t* hi);

}  // namespace deepgemm::detail
