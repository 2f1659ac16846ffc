// What a normal dispatch decided before any data moved (dispatch.cc: inputs checked, routing
// computed, counts agreed by every rank), shared by its CPU path (the engine's exchange) and its
// GPU path (gpu_dispatch.cc: kernels through the device windows).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "deepep/buffer.h"
#include "engine/tensor_pool.h"

namespace deepep {

class DevicePlane;

namespace detail {

struct DispatchPlan {
  uint64_t id = 0;  // the handle's id
  int64_t T = 0, H = 0, S = 0, K = 0;  // tokens, hidden, scale columns (FP8), top-k
  bool fp8 = false, cached = false, weights = false;
  int experts_per_rank = 0;  // 0 in cached mode
  // The routing. CPU dispatches: on the host (send_lists; in_rank not in cached mode). GPU
  // dispatches: on the device (device_slots; device_in_rank not in cached mode), the host lists empty.
  std::vector<std::vector<int32_t>> send_lists;  // per destination rank: token indices, in order
  std::vector<uint8_t> in_rank;                  // [T, size]: token t goes to rank r
  rt::Tensor device_slots;                       // [T, size] int32: t's position in rank r's list, -1: none
  rt::Tensor device_in_rank;                     // [T, size] bool
  std::vector<int64_t> recv_counts;              // tokens received from each rank
  std::vector<int64_t> prefix;                   // [size + 1]: first row of each source's tokens here
  std::vector<int32_t> rank_prefix;              // [size, size]: tokens ranks 0..i send to rank j
  std::vector<int> recv_per_expert;              // per local expert, rounded up to the alignment
};

// The routing of a GPU dispatch, computed on the device (gpu_dispatch.cc): what the agreement needs
// comes back to the host, the per-token tables stay on the device.
struct DeviceRoute {
  std::vector<int64_t> counts;            // tokens to each destination rank
  std::vector<int64_t> expert_pairs;      // (token, k) pairs per expert
  int64_t bad_index = -1, bad_value = 0;  // the first top-k entry out of range (flat index), -1: none
  std::vector<uint8_t> in_rank;           // [T, size] on the host, only when asked for (a layout to check)
  rt::Tensor slots, in_rank_on_device;    // [T, size] int32 / bool
};
// The routing kernels wait for previous_event first (they read topk_idx).
DeviceRoute route_on_device(DevicePlane& plane, const rt::Tensor& topk_idx, int num_experts, bool want_host_in_rank,
                            const Event& previous_event);

// The handle of a (non-cached) dispatch; recv_src_idx is the per-row source index (CPU or device).
std::shared_ptr<DispatchHandle> make_dispatch_handle(DispatchPlan&& plan, int num_ranks, rt::Tensor recv_src_idx,
                                                     TensorPool& pool);

// The GPU paths (gpu_dispatch.cc), after the agreement.
DispatchResult dispatch_on_device(DevicePlane& plane, TensorPool& pool, const DispatchArgs& args, DispatchPlan&& plan);
CombineResult combine_on_device(DevicePlane& plane, const rt::Tensor& x, const DispatchHandle& handle,
                                const rt::Tensor& topk_weights, const Event& previous_event, bool async_finish);

}  // namespace detail
}  // namespace deepep
