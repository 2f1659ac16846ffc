#include "buffer/checks.h"

#include "rt/error.h"

namespace deepep::detail {

std::string dtype_list(std::initializer_list<rt::DType> dtypes) {
  std::string out;
  for (rt::DType d : dtypes) out += (out.empty() ? "" : ", ") + std::string(rt::name(d));
  return out;
}

std::string check_matrix(const rt::Tensor& t, const char* role, std::initializer_list<rt::DType> dtypes, int64_t rows,
                         int64_t cols) {
  if (!t.defined()) return rt::str(role, " is undefined");
  if (!t.device().is_cpu()) return rt::str(role, " is on ", t.device().to_string(), "; this transport moves CPU tensors");
  bool ok = false;
  for (rt::DType d : dtypes) ok |= t.dtype() == d;
  if (!ok) return rt::str(role, " has dtype ", rt::name(t.dtype()), "; expected ", dtype_list(dtypes));
  if (t.dim() != 2) return rt::str(role, " has shape ", t.shape_string(), "; expected a 2-d tensor");
  if (!t.is_contiguous()) return rt::str(role, " ", t.shape_string(), " is not contiguous");
  if (rows >= 0 && t.size(0) != rows)
    return rt::str(role, " has shape ", t.shape_string(), "; expected ", rows, " rows");
  if (cols >= 0 && t.size(1) != cols)
    return rt::str(role, " has shape ", t.shape_string(), "; expected ", cols, " columns");
  return "";
}

std::string check_experts(int num_experts, int num_ranks) {
  if (num_experts <= 0) return rt::str("num_experts=", num_experts, " must be positive");
  if (num_experts % num_ranks != 0)
    return rt::str("num_experts=", num_experts, " is not a multiple of the group size ", num_ranks,
                   " (wrong group size?)");
  return "";
}

std::string check_topk(const rt::Tensor& topk_idx, int64_t rows, int num_experts, bool distinct) {
  std::string err = check_matrix(topk_idx, "topk_idx", {rt::DType::I64, rt::DType::I32}, rows);
  if (!err.empty()) return err;
  const int64_t T = topk_idx.size(0), K = topk_idx.size(1);
  if (K <= 0) return rt::str("topk_idx has shape ", topk_idx.shape_string(), "; k must be at least 1");
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t v = topk_at(topk_idx, t * K + k);
      if (v < -1 || v >= num_experts)
        return rt::str("topk_idx[", t, ", ", k, "] = ", v, " is out of range [-1, ", num_experts, ")");
      if (distinct && v >= 0)
        for (int64_t j = 0; j < k; ++j)
          if (topk_at(topk_idx, t * K + j) == v)
            return rt::str("topk_idx[", t, "] selects expert ", v, " twice (at ", j, " and ", k, ")");
    }
  return "";
}

}  // namespace deepep::detail
