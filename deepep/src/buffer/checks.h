// Input checks shared by the Buffer operations. Each returns "" when fine, else a message (the
// operations share it through the agreement step, so every rank raises it).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "deepep/comm.h"
#include "deepep/event.h"
#include "rt/tensor.h"

namespace deepep::detail {

// A contiguous 2-d tensor of one of `dtypes` on `device` (rows, cols: -1 for any).
std::string check_matrix(const rt::Tensor& t, const char* role, std::initializer_list<rt::DType> dtypes,
                         int64_t rows = -1, int64_t cols = -1, rt::Device device = rt::Device::cpu());
// What an operation needs of a device plane: the low-latency calls write into the cuda_ipc windows;
// the collectives and normal-mode dispatch and combine run on either plane (cuda_ipc, nccl).
enum class PlaneUse { Windows, Either };
// Where an operation's data lives, from its main tensor `x` (named `role` in errors): the CPU, or the CUDA device of the
// communicator's device plane. Sets *device; returns an error when x is on a device the
// communicator cannot move (no device plane, another GPU, a plane that cannot serve `use`).
std::string data_device(const rt::Tensor& x, const char* role, const Comm& comm, rt::Device* device, PlaneUse use);
// The device plane this communicator moves CUDA tensors with ("cuda_ipc" or "nccl"; "" for none).
std::string device_transport(const Comm& comm);
// topk_idx: [rows, k] int64/int32 with entries in [-1, num_experts); with `distinct`, no expert twice
// in a row.
std::string check_topk(const rt::Tensor& topk_idx, int64_t rows, int num_experts, bool distinct);
// check_topk's checks of the tensor alone (dtype, shape, k >= 1), for callers that check the
// values in their own pass over them; topk_range_error is the message for a value out of range.
std::string check_topk_shape(const rt::Tensor& topk_idx, int64_t rows, rt::Device device = rt::Device::cpu());
std::string topk_range_error(int64_t t, int64_t k, int64_t value, int num_experts);
std::string check_experts(int num_experts, int num_ranks);
// A CPU call's previous_event, waited for on the host; a failure of the wait is this rank's error
// for the agreement (so the peers raise it too instead of waiting out the timeout). A CommError
// (the event's own work reported a broken communicator) propagates: the peers learn it already.
std::string wait_on_host(const Event& previous_event);
// The rank holding each expert (e / (num_experts / num_ranks)): a table, so the per-(token, k)
// loops do not divide.
std::vector<int32_t> expert_owners(int num_experts, int num_ranks);
// Top-k indices of int64 or int32 storage by flat position, with the tensor's accessors called once
// (the per-element loops over them are on every dispatch's critical path).
class TopkReader {
 public:
  explicit TopkReader(const rt::Tensor& t)
      : i64_(t.dtype() == rt::DType::I64 ? static_cast<const int64_t*>(t.data()) : nullptr),
        i32_(i64_ ? nullptr : static_cast<const int32_t*>(t.data())) {}
  int64_t operator[](int64_t i) const { return i64_ ? i64_[i] : i32_[i]; }

 private:
  const int64_t* i64_;
  const int32_t* i32_;
};
std::string dtype_list(std::initializer_list<rt::DType> dtypes);

}  // namespace deepep::detail
