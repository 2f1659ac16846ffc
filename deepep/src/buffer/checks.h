// Input checks shared by the Buffer operations. Each returns "" when fine, else a message (the
// operations share it through the agreement step, so every rank raises it).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "rt/tensor.h"

namespace deepep::detail {

std::string check_matrix(const rt::Tensor& t, const char* role, std::initializer_list<rt::DType> dtypes,
                         int64_t rows = -1, int64_t cols = -1);
// topk_idx: [rows, k] int64/int32 with entries in [-1, num_experts); with `distinct`, no expert twice
// in a row.
std::string check_topk(const rt::Tensor& topk_idx, int64_t rows, int num_experts, bool distinct);
std::string check_experts(int num_experts, int num_ranks);
// The top-k index at flat position i (int64 or int32 storage).
inline int64_t topk_at(const rt::Tensor& t, int64_t i) {
  return t.dtype() == rt::DType::I64 ? static_cast<const int64_t*>(t.data())[i]
                                     : static_cast<const int32_t*>(t.data())[i];
}
std::string dtype_list(std::initializer_list<rt::DType> dtypes);

}  // namespace deepep::detail
