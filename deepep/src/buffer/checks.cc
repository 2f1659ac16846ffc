#include "buffer/checks.h"

#include "deepep/error.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"
#include "transport/nccl/nccl_plane.h"

namespace deepep::detail {

std::string dtype_list(std::initializer_list<rt::DType> dtypes) {
  std::string out;
  for (rt::DType d : dtypes) out += (out.empty() ? "" : ", ") + std::string(rt::name(d));
  return out;
}

std::string check_matrix(const rt::Tensor& t, const char* role, std::initializer_list<rt::DType> dtypes, int64_t rows,
                         int64_t cols, rt::Device device) {
  if (!t.defined()) return rt::str(role, " is undefined");
  if (t.device() != device && device.is_cpu())
    return rt::str(role, " is on ", t.device().to_string(),
                   "; this communicator moves CPU tensors (give it a CUDA device: CommOptions::cuda_device)");
  if (t.device() != device) return rt::str(role, " is on ", t.device().to_string(), "; expected ", device.to_string());
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

std::string data_device(const rt::Tensor& x, const char* role, const Comm& comm, rt::Device* device, PlaneUse use) {
  *device = rt::Device::cpu();
  if (!x.defined() || x.device().is_cpu()) return "";
  if (comm.nccl_plane() != nullptr && use == PlaneUse::Windows)
    return rt::str(role, " is on ", x.device().to_string(),
                   ": this communicator's device transport is nccl, which has no device windows; low-latency calls "
                   "of CUDA tensors need CommOptions::device_transport \"cuda_ipc\"");
  const int plane_device = comm.nccl_plane()    ? comm.nccl_plane()->device()
                           : comm.device_plane() ? comm.device_plane()->device()
                                                 : -1;
  if (plane_device < 0)
    return rt::str(role, " is on ", x.device().to_string(),
                   "; this communicator moves CPU tensors (give it a CUDA device: CommOptions::cuda_device)");
  if (x.device() != rt::Device::cuda(plane_device))
    return rt::str(role, " is on ", x.device().to_string(), " but this rank's communicator uses cuda:", plane_device);
  *device = x.device();
  return "";
}

std::string device_transport(const Comm& comm) {
  return comm.nccl_plane() ? "nccl" : comm.device_plane() ? "cuda_ipc" : "";
}

std::string check_experts(int num_experts, int num_ranks) {
  if (num_experts <= 0) return rt::str("num_experts=", num_experts, " must be positive");
  if (num_experts % num_ranks != 0)
    return rt::str("num_experts=", num_experts, " is not a multiple of the group size ", num_ranks,
                   " (wrong group size?)");
  return "";
}

std::vector<int32_t> expert_owners(int num_experts, int num_ranks) {
  std::vector<int32_t> owner(static_cast<size_t>(num_experts));
  const int per_rank = num_experts / num_ranks;
  for (int e = 0; e < num_experts; ++e) owner[size_t(e)] = e / per_rank;
  return owner;
}

std::string check_topk_shape(const rt::Tensor& topk_idx, int64_t rows, rt::Device device) {
  std::string err = check_matrix(topk_idx, "topk_idx", {rt::DType::I64, rt::DType::I32}, rows, -1, device);
  if (err.empty() && topk_idx.size(1) <= 0)
    err = rt::str("topk_idx has shape ", topk_idx.shape_string(), "; k must be at least 1");
  return err;
}

std::string topk_range_error(int64_t t, int64_t k, int64_t value, int num_experts) {
  return rt::str("topk_idx[", t, ", ", k, "] = ", value, " is out of range [-1, ", num_experts, ")");
}

std::string check_topk(const rt::Tensor& topk_idx, int64_t rows, int num_experts, bool distinct) {
  std::string err = check_topk_shape(topk_idx, rows);
  if (!err.empty()) return err;
  const int64_t T = topk_idx.size(0), K = topk_idx.size(1);
  const TopkReader topk(topk_idx);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t v = topk[t * K + k];
      if (v < -1 || v >= num_experts) return topk_range_error(t, k, v, num_experts);
      if (distinct && v >= 0)
        for (int64_t j = 0; j < k; ++j)
          if (topk[t * K + j] == v)
            return rt::str("topk_idx[", t, "] selects expert ", v, " twice (at ", j, " and ", k, ")");
    }
  return "";
}

std::string wait_on_host(const Event& previous_event) {
  try {
    previous_event.wait();
    return "";
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    return rt::str("waiting for previous_event: ", e.what());
  }
}

}  // namespace deepep::detail
