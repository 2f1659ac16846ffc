// What a normal dispatch decided before any data moved (dispatch.cc: inputs checked, routing
// computed, counts agreed by every rank), shared by its CPU path (the engine's exchange) and its
// GPU paths (gpu_dispatch.cc: kernels through the cuda_ipc windows; nccl_dispatch.cc: NCCL).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deepep/buffer.h"
#include "deepep/kernels/normal_layout.h"
#include "engine/tensor_pool.h"

namespace deepep {

class DevicePlane;
class NcclPlane;
struct NormalSignals;

namespace detail {

struct NodeMap;
struct InternodeRoute;

struct DispatchPlan {
  uint64_t id = 0;  // the handle's id
  int64_t T = 0, H = 0, S = 0, K = 0;  // tokens, hidden, scale columns (FP8), top-k
  bool fp8 = false, cached = false, weights = false;
  int experts_per_rank = 0;  // 0 in cached mode
  // The routing. CPU dispatches: on the host (send_lists; in_rank not in cached mode). GPU
  // dispatches: on the device (device_slots; device_in_rank not in cached mode), the host lists empty
  // -- except on the nccl plane, whose routing is on the host and goes to the device after the agreement.
  std::vector<std::vector<int32_t>> send_lists;  // per destination rank: token indices, in order
  std::vector<uint8_t> in_rank;                  // [T, size]: token t goes to rank r
  rt::Tensor device_slots;                       // [T, size] int32: t's position in rank r's list, -1: none
  rt::Tensor device_order;                       // [size, T] int32: rank r's list (its first counts[r] entries)
  rt::Tensor device_in_rank;                     // [T, size] bool
  rt::Tensor device_counts;                      // DeviceRoute::summary (a handle's device_counts)
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
  rt::Tensor order;                       // [size, T] int32: the tokens going to each rank, in order
  // [2 size + 1 + experts] int64 (DevicePlane::dispatch_route): [0, size) tokens to each rank,
  // [size, 2 size) tokens received from each (written by the dispatch's receive), then the routing's.
  rt::Tensor summary;
  const int64_t* host_summary = nullptr;  // its host copy, once read_route has waited,
  const uint32_t* host_mask = nullptr;    // and in_rank's bits when asked for (DevicePlane::dispatch_route)
};
// Queues the routing kernel (after previous_event: it reads topk_idx), which leaves the counts and,
// when asked for, in_rank's bits in page-locked memory; read_route waits for that kernel alone and
// fills the host fields.
DeviceRoute route_on_device(DevicePlane& plane, const rt::Tensor& topk_idx, int num_experts, bool want_host_in_rank,
                            const Event& previous_event);
void read_route(DevicePlane& plane, DeviceRoute& route, const rt::Tensor& topk_idx, int num_experts);
// in_rank [tokens, ranks] as bytes from the routing kernel's bits (kernels/intranode.cuh host_mask:
// [ranks][ceil(tokens / 32)] words, bit t % 32 of word t / 32).
std::vector<uint8_t> unpack_in_rank(const uint32_t* bits, int64_t tokens, int ranks);

// Where a GPU dispatch's arrays go in the window regions: x (x_row bytes), scales (S floats), and,
// unless cached, the top-k (K int64), weights (K floats) and source index.
kernels::RegionRows dispatch_rows(int64_t x_row, int64_t S, int64_t K, bool cached, bool weights);
// A local error when this rank's rows for some destination (counts) do not fit its region there.
std::string check_dispatch_fits(const DevicePlane& plane, const kernels::RegionRows& rows,
                                const std::vector<int64_t>& counts);
// Queues a GPU dispatch's scatter (the operation of the engine's agreement number `agreement`),
// reading the counts and the tokens per destination (order) from the device; returns its signalling.
NormalSignals scatter_on_device(DevicePlane& plane, const DispatchArgs& args, const rt::Tensor& order,
                                const rt::Tensor& summary, const kernels::RegionRows& rows, int64_t K,
                                int experts_per_rank, uint64_t agreement);

// Rows per rank: what rank `me` sent each of the R ranks in the dispatch whose rank prefix matrix
// ([R, R] int32, DispatchHandle::rank_prefix_matrix) is `rp`.
std::vector<int64_t> sent_by(const int32_t* rp, int me, int R);
// One entry of that: the rows rank s sent rank r.
int64_t sent_between(const int32_t* rp, int R, int s, int r);

// The handle of a (non-cached) dispatch; recv_src_idx is the per-row source index (CPU or device);
// device_transport: the GPU plane that moved it ("cuda_ipc", "nccl"; "" for CPU tensors).
std::shared_ptr<DispatchHandle> make_dispatch_handle(DispatchPlan&& plan, int num_ranks, rt::Tensor recv_src_idx,
                                                     TensorPool& pool, std::string device_transport = "");

// The GPU paths (gpu_dispatch.cc), after the agreement numbered `agreement`. `scattered`: the
// scatter queued before the agreement (null: none yet).
DispatchResult dispatch_on_device(DevicePlane& plane, TensorPool& pool, const DispatchArgs& args, DispatchPlan&& plan,
                                  uint64_t agreement, const NormalSignals* scattered);
// A combine's rows in the window regions (normal_layout.h): x, then the weights.
kernels::RegionRows combine_rows(const rt::Tensor& x, const rt::Tensor& topk_weights);
// An error when some rank's rows for another do not fit its region there (the same on every rank).
std::string check_combine_fits(const DevicePlane& plane, const DispatchHandle& handle, const kernels::RegionRows& rows);
// Queues a combine's scatter (after previous_event), the operation of agreement number `agreement`.
NormalSignals combine_scatter_on_device(DevicePlane& plane, const rt::Tensor& x, const DispatchHandle& handle,
                                        const rt::Tensor& topk_weights, const kernels::RegionRows& rows,
                                        const Event& previous_event, uint64_t agreement);
CombineResult combine_on_device(DevicePlane& plane, const rt::Tensor& x, const DispatchHandle& handle,
                                const rt::Tensor& topk_weights, const Event& previous_event, bool async_finish,
                                uint64_t agreement, const NormalSignals* scattered);

// The nccl plane's paths (nccl_dispatch.cc), after the agreement: complete when they return (the
// results' events are complete); the routing's device tables go into the handle, the rank prefix
// matrix into `host_pool`.
DispatchResult dispatch_over_nccl(NcclPlane& plane, TensorPool& host_pool, const DispatchArgs& args, DispatchPlan&& plan);
CombineResult combine_over_nccl(NcclPlane& plane, const rt::Tensor& x, const DispatchHandle& handle,
                                const rt::Tensor& topk_weights);
// The hierarchical route (internode.h) on the nccl plane, for a group of several nodes: node_count[s]
// is what rank s counted for each node in the agreement; the route's source side is set (its
// forwarder side too for a cached dispatch) and goes into the handle.
DispatchResult dispatch_over_nccl_hierarchical(NcclPlane& plane, TensorPool& host_pool, const DispatchArgs& args,
                                               DispatchPlan&& plan, const NodeMap& nodes,
                                               const std::vector<std::vector<int64_t>>& node_count,
                                               InternodeRoute&& route, InternodeTraffic& traffic);
CombineResult combine_over_nccl_hierarchical(NcclPlane& plane, const rt::Tensor& x, const DispatchHandle& handle,
                                             const rt::Tensor& topk_weights, const NodeMap& nodes,
                                             InternodeTraffic& traffic);
// Every kernel those compile, as (name, NVRTC source; headers: device_kernel_headers()): what the
// CPU-only tests compile for sm_90a.
std::vector<std::pair<std::string, std::string>> nccl_kernel_sources();

}  // namespace detail
}  // namespace deepep
