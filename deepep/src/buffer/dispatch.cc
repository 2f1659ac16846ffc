// Normal-mode dispatch: each token goes once to every rank holding one of its experts.
//
// Protocol: the agreement step carries every rank's per-destination token counts, so each rank
// knows how many tokens it receives from each source; then one exchange moves one record per
// (token, destination rank): the row (and its FP8 scales), the global top-k indices, the weights
// and the source index. Receivers place source s's tokens at rows [prefix(s), prefix(s) + count),
// in the source's token order, remapping indices to local experts. On a group of several nodes the
// records take the hierarchical route (buffer/internode.h): two exchanges, the same records.
#include <algorithm>
#include <cstring>
#include <optional>

#include "bootstrap/wire.h"
#include "buffer/checks.h"
#include "buffer/dispatch_plan.h"
#include "buffer/internode.h"
#include "buffer/peer_memory.h"
#include "buffer/shared_arena.h"
#include "deepep/buffer.h"
#include "deepep/group.h"
#include "engine/engine.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"
#include "transport/nccl/nccl_plane.h"

namespace deepep {
namespace {

size_t align8(size_t v) { return (v + 7) / 8 * 8; }

// A layout given with the top-k must be the one get_dispatch_layout computes from it.
std::string check_layout(const DispatchLayout& layout, const std::vector<uint8_t>& in_rank,
                         const std::vector<int64_t>& counts, const detail::NodeMap& nodes, int64_t T, int R,
                         int num_experts) {
  using rt::DType;
  const rt::Tensor& m = layout.is_token_in_rank;
  const rt::Tensor& n = layout.num_tokens_per_rank;
  const rt::Tensor& per_node = layout.num_tokens_per_rdma_rank;
  const int N = nodes.num_nodes();
  std::string err = detail::check_matrix(m, "layout.is_token_in_rank", {DType::Bool}, T, R);
  if (err.empty() && T > 0 && std::memcmp(m.data(), in_rank.data(), in_rank.size()) != 0)
    err = "layout.is_token_in_rank does not match topk_idx (a layout of other tokens?)";
  auto check_counts = [&](const rt::Tensor& c, const char* name, int size, const char* what_size) {
    if (err.empty() && (!c.defined() || !c.device().is_cpu() || c.dtype() != DType::I32 || c.dim() != 1 ||
                        c.size(0) != size || !c.is_contiguous()))
      err = rt::str("layout.", name, " must be a CPU int32 tensor of ", size, " elements (", what_size, ")",
                    c.defined() ? rt::str(", not ", rt::name(c.dtype()), c.shape_string()) : std::string());
  };
  check_counts(n, "num_tokens_per_rank", R, "the group size");
  for (int r = 0; err.empty() && r < R; ++r)
    if (n.data_as<int32_t>()[r] != counts[size_t(r)])
      err = rt::str("layout.num_tokens_per_rank[", r, "] = ", n.data_as<int32_t>()[r], " but topk_idx sends ",
                    counts[size_t(r)], " tokens there");
  check_counts(per_node, "num_tokens_per_rdma_rank", N, "the group's nodes");
  // Not read by the dispatch, but its size tells a layout made for another num_experts, which the
  // other fields miss when this rank's tokens happen to stay on the ranks both would give them.
  check_counts(layout.num_tokens_per_expert, "num_tokens_per_expert", num_experts, "num_experts");
  // A token's scan of a node's ranks ends at its first destination there: with DeepEP's routing most
  // tokens reach a node's first rank (8 ranks, 4096 tokens, on a 2-core machine: 6 us against ~26,
  // the old scan's share of 47 us for unpack, compare and scan). This runs between the routing and
  // the agreement: GPU idle time.
  for (int node = 0; err.empty() && node < N; ++node) {
    int64_t want = 0;
    for (int64_t t = 0; t < T; ++t) {
      for (int r : nodes.ranks[size_t(node)]) {
        if (in_rank[size_t(t * R + r)]) {
          ++want;
          break;
        }
      }
    }
    if (per_node.data_as<int32_t>()[node] != want)
      err = rt::str("layout.num_tokens_per_rdma_rank[", node, "] = ", per_node.data_as<int32_t>()[node],
                    " but topk_idx sends ", want, " tokens to node ", node);
  }
  return err;
}

// One record per (token, destination): the row, its FP8 scales and, unless cached, the global
// top-k indices, the weights and the token's index at its source. Both routes move these records.
struct Records {
  size_t x_bytes = 0, s_bytes = 0, off_idx = 0, off_w = 0, off_src = 0, size = 0;
  bool cached = false, weights = false;
  int64_t K = 0, lo = 0, hi = 0;  // top-k; this rank's experts [lo, hi)
  const uint8_t *x = nullptr, *xs = nullptr;
  const float* w = nullptr;
  const int64_t* topk64 = nullptr;  // raw pointers: the per-record loops must not go through Tensor accessors
  const int32_t* topk32 = nullptr;
  uint8_t *rx = nullptr, *rxs = nullptr;
  int64_t* ridx = nullptr;
  float* rw = nullptr;
  int32_t* rsrc = nullptr;

  // Source token t's record into dst.
  void fill(int64_t t, uint8_t* dst) const {
    std::memcpy(dst, x + size_t(t) * x_bytes, x_bytes);
    if (s_bytes) std::memcpy(dst + x_bytes, xs + size_t(t) * s_bytes, s_bytes);
    if (cached) return;
    int64_t* idx = reinterpret_cast<int64_t*>(dst + off_idx);
    for (int64_t k = 0; k < K; ++k) idx[k] = topk64 ? topk64[t * K + k] : topk32[t * K + k];
    if (weights) std::memcpy(dst + off_w, w + t * K, size_t(K) * 4);
    std::memcpy(dst + off_src, &t, 4);  // little-endian: the low 32 bits
  }
  // A received record into output row `row`, the top-k remapped to this rank's experts.
  void place(int64_t row, const uint8_t* src) const {
    std::memcpy(rx + size_t(row) * x_bytes, src, x_bytes);
    if (s_bytes) std::memcpy(rxs + size_t(row) * s_bytes, src + x_bytes, s_bytes);
    if (cached) return;
    const int64_t* idx = reinterpret_cast<const int64_t*>(src + off_idx);
    const float* wt = reinterpret_cast<const float*>(src + off_w);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t v = idx[k];
      const bool local = v >= lo && v < hi;
      ridx[row * K + k] = local ? v - lo : -1;
      if (weights) rw[row * K + k] = local ? wt[k] : 0.0f;
    }
    std::memcpy(rsrc + row, src + off_src, 4);
  }
  // The k-th global expert of a record (not cached).
  int64_t expert(const uint8_t* rec, int64_t k) const {
    int64_t v;
    std::memcpy(&v, rec + off_idx + size_t(k) * 8, 8);
    return v;
  }
};

// Sends `list`'s tokens to `peer` as records.
SendSpec send_tokens(int peer, const Records& rec, const std::vector<int32_t>* list) {
  return {peer, rec.size, list->size(), [rec, list](size_t first, size_t n, uint8_t* dst) {
            for (size_t i = 0; i < n; ++i, dst += rec.size) rec.fill((*list)[first + i], dst);
          }};
}

// Receives `units` records from `peer` into output rows base, base + 1, ...
RecvSpec receive_rows(int peer, const Records& rec, int64_t base, int64_t units) {
  return {peer, rec.size, size_t(units), [rec, base](size_t first, size_t n, const uint8_t* src) {
            for (size_t i = 0; i < n; ++i, src += rec.size) rec.place(base + int64_t(first + i), src);
          }};
}

// The hierarchical route after the agreement (internode.h). count[s][d]: tokens rank s sends to
// rank d; node_count[s][n]: tokens rank s sends to node n. The route's source side is set; its
// forwarder side too in cached mode, else it is built here from the staged records' top-k.
void dispatch_hierarchical(Engine& e, const detail::NodeMap& nodes, const Records& rec, const detail::DispatchPlan& p,
                           const std::vector<std::vector<int64_t>>& count,
                           const std::vector<std::vector<int64_t>>& node_count, detail::InternodeRoute& route,
                           InternodeTraffic& traffic, const std::string& what) {
  const int me = e.rank(), R = e.size(), mine = nodes.node_of[size_t(me)];
  const std::vector<int>& node_ranks = nodes.ranks[size_t(mine)];
  std::vector<int64_t> staged_from(size_t(R), 0), stage_at(size_t(R) + 1, 0);
  for (int s = 0; s < R; ++s) {
    if (nodes.forwards_for(me, s)) staged_from[size_t(s)] = node_count[size_t(s)][size_t(mine)];
    stage_at[size_t(s) + 1] = stage_at[size_t(s)] + staged_from[size_t(s)];
  }
  RT_ICHECK(!rec.cached || route.stage_offset == stage_at, "the cached route stages other tokens");
  const rt::Tensor stage_t = e.pool().empty({stage_at[size_t(R)] * int64_t(rec.size)}, rt::DType::U8);
  uint8_t* const stage = static_cast<uint8_t*>(stage_t.data());
  // 1: straight to the ranks of this node; once to each other node's forwarder, which stages.
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (int r : node_ranks) {
    sends.push_back(send_tokens(r, rec, &p.send_lists[size_t(r)]));
    recvs.push_back(receive_rows(r, rec, p.prefix[size_t(r)], count[size_t(r)][size_t(me)]));
  }
  for (int n = 0; n < nodes.num_nodes(); ++n) {
    if (n == mine) continue;
    const std::vector<int32_t>& list = route.node_lists[size_t(n)];
    sends.push_back(send_tokens(nodes.forwarder(me, n), rec, &list));
    traffic.dispatch_rows += int64_t(list.size());
    traffic.bytes += int64_t(list.size() * rec.size);
  }
  for (int s = 0; s < R; ++s) {
    if (!nodes.forwards_for(me, s)) continue;
    uint8_t* const into = stage + size_t(stage_at[size_t(s)]) * rec.size;
    const size_t bytes = rec.size;
    recvs.push_back({s, bytes, size_t(staged_from[size_t(s)]), [into, bytes](size_t first, size_t n, const uint8_t* src) {
                       std::memcpy(into + first * bytes, src, n * bytes);
                     }});
  }
  e.exchange(std::move(sends), std::move(recvs), what);
  if (!rec.cached) {
    const int64_t experts_per_rank = p.experts_per_rank;
    detail::route_forwards(route, nodes, me, staged_from, [&](int64_t j, int r) {
      const uint8_t* record = stage + size_t(j) * rec.size;
      for (int64_t k = 0; k < rec.K; ++k) {
        const int64_t ex = rec.expert(record, k);
        if (ex >= 0 && ex / experts_per_rank == r) return true;
      }
      return false;
    });
    // The staged records must route as their sources counted them in the agreement.
    for (int r : node_ranks) {
      const std::vector<int32_t>& list = route.forward_lists[size_t(r)];
      size_t i = 0;
      for (int s = 0; s < R; ++s) {
        int64_t n = 0;
        for (; i < list.size() && list[i] < stage_at[size_t(s) + 1]; ++i) ++n;
        RT_ICHECK(!nodes.forwards_for(me, s) || n == count[size_t(s)][size_t(r)], "rank ", s, "'s staged tokens for rank ",
                  r, ": ", n, ", counted ", count[size_t(s)][size_t(r)]);
      }
    }
  }
  // 2: each forwarder hands the staged records to the ranks of its node that need them; a rank
  // receives from forwarder f the tokens of every source f forwards for, in source order.
  sends.clear();
  recvs.clear();
  for (int r : node_ranks) {
    const std::vector<int32_t>* list = &route.forward_lists[size_t(r)];
    const size_t bytes = rec.size;
    sends.push_back({r, bytes, list->size(), [stage, bytes, list](size_t first, size_t n, uint8_t* dst) {
                       for (size_t i = 0; i < n; ++i, dst += bytes)
                         std::memcpy(dst, stage + size_t((*list)[first + i]) * bytes, bytes);
                     }});
    auto rows = std::make_shared<std::vector<int64_t>>();
    for (int s = 0; s < R; ++s)
      if (nodes.forwards_for(r, s))
        for (int64_t i = 0; i < count[size_t(s)][size_t(me)]; ++i) rows->push_back(p.prefix[size_t(s)] + i);
    recvs.push_back({r, rec.size, rows->size(), [rec, rows](size_t first, size_t n, const uint8_t* src) {
                       for (size_t i = 0; i < n; ++i, src += rec.size) rec.place((*rows)[first + i], src);
                     }});
  }
  e.exchange(std::move(sends), std::move(recvs), what);
}

}  // namespace

DispatchResult Buffer::dispatch(const DispatchArgs& a) {
  Engine& e = comm_->engine();
  const std::string what = "dispatch";
  // CUDA tensors move on the communicator's device plane: the cuda_ipc windows or NCCL.
  DevicePlane* const plane = a.x.defined() && a.x.device().is_cuda() ? comm_->device_plane() : nullptr;
  NcclPlane* const nccl = a.x.defined() && a.x.device().is_cuda() ? comm_->nccl_plane() : nullptr;
  if (plane) plane->mark("start");
  e.begin_op(what);
  const int R = size(), me = rank();
  const bool cached = a.handle != nullptr;
  using rt::DType;
  rt::Device dev;
  std::string err = detail::data_device(a.x, "x", *comm_, &dev, detail::PlaneUse::Either);
  if (err.empty()) err = detail::check_matrix(a.x, "x", {DType::BF16, DType::F16, DType::F32, DType::F8E4M3}, -1, -1, dev);
  const bool gpu = dev.is_cuda();
  // CPU calls and the nccl plane's are synchronous (the host routes the latter, and its waits on
  // NCCL are bounded by the timeout, which must not count the caller's work); a cuda_ipc call's
  // stream waits for the event instead.
  if ((!gpu || nccl) && err.empty()) err = detail::wait_on_host(a.previous_event);
  const bool fp8 = err.empty() && a.x.dtype() == DType::F8E4M3;
  const int64_t T = err.empty() ? a.x.size(0) : 0, H = err.empty() ? a.x.size(1) : 0;
  int64_t S = 0, K = 0;
  if (err.empty() && fp8) {
    if (H % 128 != 0) err = rt::str("FP8 x has hidden size ", H, "; it must be a multiple of 128");
    if (err.empty())
      err = detail::check_matrix(a.x_scales, "x_scales (FP8 x needs them)", {DType::F32}, T, H / 128, dev);
    S = H / 128;
  } else if (err.empty() && a.x_scales.defined()) {
    err = rt::str("x_scales were given for ", rt::name(a.x.dtype()), " x; scales go with f8e4m3 x only");
  }
  if (err.empty() && a.expert_alignment < 1) err = rt::str("expert_alignment=", a.expert_alignment, " must be >= 1");
  if (err.empty() && plane && R > kernels::kNormalMaxRanks)
    err = rt::str("the GPU path takes at most ", kernels::kNormalMaxRanks, " ranks, this group has ", R);
  const DispatchHandle* h = a.handle.get();
  if (err.empty() && cached) {
    if (a.topk_idx.defined() || a.topk_weights.defined() || a.layout)
      err = "a cached dispatch (with a handle) takes no topk_idx, topk_weights or layout";
    else if (h->num_ranks != R)
      err = rt::str("the handle is from a group of ", h->num_ranks, " ranks, this one has ", R);
    else if (h->num_tokens != T)
      err = rt::str("x has ", T, " tokens but the handle's dispatch had ", h->num_tokens);
  }
  if (err.empty() && cached && gpu != h->device_slots.defined())
    err = gpu ? "x is on the GPU but the handle is from a dispatch of CPU tensors; use the handle of a GPU dispatch"
              : "x is on the CPU but the handle is from a dispatch of GPU tensors; use the handle of a CPU dispatch";
  if (err.empty() && cached && gpu && h->device_transport != detail::device_transport(*comm_))
    err = rt::str("the handle is from a dispatch on the ", h->device_transport, " device plane but this communicator's is ",
                  detail::device_transport(*comm_), "; use a handle of this Buffer's");
  if (err.empty() && !cached) {
    err = detail::check_experts(a.num_experts, R);
    if (err.empty()) err = detail::check_topk_shape(a.topk_idx, T, dev);  // the values: in the routing below
    if (err.empty()) K = a.topk_idx.size(1);
    if (err.empty() && a.topk_weights.defined())
      err = detail::check_matrix(a.topk_weights, "topk_weights", {DType::F32}, T, K, dev);
  }
  // Routing: tokens per destination, in token order; a GPU dispatch's on the device.
  std::vector<std::vector<int32_t>> send_lists(static_cast<size_t>(R));
  std::vector<uint8_t> in_rank;
  std::vector<int64_t> counts(size_t(R), 0);
  std::vector<int64_t> expert_counts;  // (token, k) pairs per expert: what each receiver counts per local expert
  const bool weights = !cached && a.topk_weights.defined();
  const int64_t x_row = err.empty() ? H * rt::bits(a.x.dtype()) / 8 : 0;
  const kernels::RegionRows rows = detail::dispatch_rows(x_row, S, K, cached, weights);
  detail::DeviceRoute route;
  std::optional<NormalSignals> scattered;  // the scatter, when queued before the agreement
  // The nccl plane routes on the host, as the CPU path does, from a copy of topk_idx.
  rt::Tensor topk_on_host = nccl ? rt::Tensor() : a.topk_idx;
  if (err.empty() && !cached && nccl) {
    try {
      topk_on_host = a.topk_idx.to(rt::Device::cpu());
    } catch (const rt::Error& ex) {  // shared through the agreement, so no rank waits for this one
      err = rt::str("copying topk_idx to the host: ", ex.what());
    }
  }
  if (err.empty() && !cached && plane) {
    try {
      plane->mark("checks");
      route = detail::route_on_device(*plane, a.topk_idx, a.num_experts, a.layout != nullptr, a.previous_event);
      plane->mark("routing");
      // The scatter needs only this rank's counts, on the device: when the windows' reuse is ordered
      // by the signals (DevicePlane::windows_ordered_by_signals) the rows go out now, while the host
      // waits for the counts and agrees on them.
      if (plane->windows_ordered_by_signals())
        scattered = detail::scatter_on_device(*plane, a, route.order, route.summary, rows, K, a.num_experts / R,
                                              e.agreements() + 1);
      detail::read_route(*plane, route, a.topk_idx, a.num_experts);
      plane->mark("counts");
    } catch (const rt::Error& ex) {  // shared through the agreement, so no rank waits for this one
      err = ex.what();
    }
    if (err.empty() && route.bad_index >= 0)
      err = detail::topk_range_error(route.bad_index / K, route.bad_index % K, route.bad_value, a.num_experts);
    counts = route.counts;
    expert_counts = std::move(route.expert_pairs);
    in_rank = std::move(route.in_rank);
  } else if (err.empty() && !cached) {
    expert_counts.assign(size_t(a.num_experts), 0);
    const std::vector<int32_t> owner = detail::expert_owners(a.num_experts, R);
    const detail::TopkReader ids(topk_on_host);
    in_rank.assign(size_t(T * R), 0);
    for (int64_t t = 0; t < T && err.empty(); ++t)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t ex = ids[t * K + k];
        if (ex >= 0 && ex < a.num_experts) {
          in_rank[size_t(t * R + owner[size_t(ex)])] = 1;
          ++expert_counts[size_t(ex)];
        } else if (ex != -1) {
          err = detail::topk_range_error(t, k, ex, a.num_experts);
          break;
        }
      }
    for (int64_t t = 0; err.empty() && t < T; ++t)
      for (int r = 0; r < R; ++r)
        if (in_rank[size_t(t * R + r)]) send_lists[size_t(r)].push_back(int32_t(t));
    for (int r = 0; r < R; ++r) counts[size_t(r)] = int64_t(send_lists[size_t(r)].size());
  }
  const detail::NodeMap nodes(*group_);
  if (err.empty() && !cached && a.layout) err = check_layout(*a.layout, in_rank, counts, nodes, T, R, a.num_experts);
  // The hierarchical route (internode.h) for CPU tensors and the nccl plane's on a group of several
  // nodes (the cuda_ipc plane serves one host); a cached dispatch takes its handle's route.
  const bool internode = (!gpu || nccl) && (cached ? err.empty() && h->internode != nullptr : hierarchical_);
  detail::InternodeRoute internode_route;
  if (internode && err.empty()) {
    if (cached)
      internode_route = *h->internode;
    else
      detail::route_sources(internode_route, nodes, me, in_rank, T);
  }
  for (const auto& [t, role] : {std::pair{&a.x, "x"}, {&a.x_scales, "x_scales"}, {&a.topk_idx, "topk_idx"},
                                {&a.topk_weights, "topk_weights"}})
    if (err.empty()) err = arena_->check_not_foreign(*t, role);
  if (err.empty() && cached) counts = detail::sent_by(h->rank_prefix_matrix.data_as<int32_t>(), me, R);
  if (err.empty() && plane) err = detail::check_dispatch_fits(*plane, rows, counts);
  if (err.empty() && plane && cached && plane->windows_ordered_by_signals()) {  // as above, from the handle's routing
    try {
      plane->wait_event(a.previous_event);
      scattered = detail::scatter_on_device(*plane, a, h->device_order, h->device_counts, rows, 0, 0, e.agreements() + 1);
    } catch (const rt::Error& ex) {
      err = ex.what();
    }
  }
  const std::string desc =
      rt::str("dispatch(x=", a.x.defined() ? rt::name(a.x.dtype()) : "undefined", "[*, ", H, "], scales=", S,
              cached ? rt::str(", cached handle ", h->id) : rt::str(", topk=", K, ", experts=", a.num_experts),
              ", weights=", weights ? "yes" : "no", ", alignment=", a.expert_alignment, gpu ? ", on the GPU" : "",
              internode ? ", hierarchical" : "", ")");
  // The single-copy path (peer_memory.h): receivers read rows, scales, top-k and weights straight
  // from this rank's tensors -- from their mapping of its shared arena where they lie there
  // (shared_arena.h) -- the tokens it sends them from its send lists; where they are travels with
  // the counts.
  const bool single_copy = !gpu && !peer_pids_.empty();
  if (cached && err.empty()) send_lists = h->send_lists;  // the lists the receivers will read
  wire::Writer w;
  w.put_vec(counts).put_vec(expert_counts);
  if (internode && err.empty()) {  // the tokens for each node: what each forwarder stages
    std::vector<int64_t> node_counts;
    for (const std::vector<int32_t>& list : internode_route.node_lists) node_counts.push_back(int64_t(list.size()));
    w.put_vec(node_counts);
  }
  // Copies of the inputs in this rank's arena, which the peers read instead (held past the closing
  // barrier: the readers are done by then).
  std::vector<rt::Tensor> in_arena;
  if (single_copy && err.empty()) {
    w.put<uint64_t>(uint64_t(T)).put<uint64_t>(!cached && a.topk_idx.dtype() == DType::I32 ? 4 : 8);
    for (const rt::Tensor* t : {&a.x, &a.x_scales, &a.topk_idx, &a.topk_weights})  // empty ones in cached mode
      w.put(arena_->describe(copy_into_arena_ ? in_arena.emplace_back(arena_->copy_in(*t)) : *t));
    for (int r = 0; r < R; ++r) w.put<uint64_t>(reinterpret_cast<uint64_t>(send_lists[size_t(r)].data()));
  }
  if (plane) plane->next_agreement_signalled();
  std::vector<std::string> all;
  try {
    all = e.agree(what, desc, err, err.empty() ? w.str() : std::string());
  } catch (...) {
    // The routing and a scatter queued before the agreement may still read the inputs (no receive
    // follows the scatter: kernels/intranode.cuh "normal-mode signalling").
    if (route.summary.defined() || scattered)
      plane->track({a.x, a.x_scales, a.topk_idx, a.topk_weights, route.slots, cached ? h->device_order : route.order,
                    cached ? h->device_counts : route.summary},
                   "dispatch");
    throw;
  }
  if (plane) plane->mark("agree");
  // Single copy: where each source's tensors and its send list for this rank are.
  struct Remote {
    uint64_t T = 0, topk_bytes = 8, tokens = 0;
    detail::PeerTensor x, scales, topk, weights;
  };
  std::vector<Remote> remote(single_copy ? size_t(R) : 0);
  std::vector<std::vector<int64_t>> count(static_cast<size_t>(R)), node_count(static_cast<size_t>(R));  // every rank's, for the hierarchical route
  detail::DispatchPlan p;
  p.id = next_id_++;
  p.T = T, p.H = H, p.S = S, p.K = K;
  p.fp8 = fp8, p.cached = cached, p.weights = weights;
  p.experts_per_rank = cached ? 0 : a.num_experts / R;
  p.recv_counts.assign(size_t(R), 0);
  p.prefix.assign(size_t(R) + 1, 0);
  p.rank_prefix.assign(size_t(R * R), 0);
  p.recv_per_expert.assign(size_t(p.experts_per_rank), 0);
  for (int s = 0; s < R; ++s) {
    wire::Reader rd(all[size_t(s)]);
    const std::vector<int64_t> c = rd.get_vec<int64_t>(), ec = rd.get_vec<int64_t>();
    RT_ICHECK(c.size() == size_t(R) && (cached || ec.size() == size_t(a.num_experts)), "counts from rank ", s);
    if (internode) {
      count[size_t(s)] = c;
      node_count[size_t(s)] = rd.get_vec<int64_t>();
      RT_ICHECK(node_count[size_t(s)].size() == size_t(nodes.num_nodes()), "node counts from rank ", s);
    }
    p.recv_counts[size_t(s)] = c[size_t(me)];
    p.prefix[size_t(s) + 1] = p.prefix[size_t(s)] + c[size_t(me)];
    for (int j = 0; j < R; ++j)
      p.rank_prefix[size_t(s * R + j)] = int32_t((s ? p.rank_prefix[size_t((s - 1) * R + j)] : 0) + c[size_t(j)]);
    for (int j = 0; j < p.experts_per_rank; ++j)
      p.recv_per_expert[size_t(j)] += int(ec[size_t(me * p.experts_per_rank + j)]);
    if (single_copy) {
      Remote& q = remote[size_t(s)];
      q.T = rd.get<uint64_t>(), q.topk_bytes = rd.get<uint64_t>();
      for (detail::PeerTensor* t : {&q.x, &q.scales, &q.topk, &q.weights}) *t = rd.get<detail::PeerTensor>();
      for (int r = 0; r < R; ++r) {
        const uint64_t list = rd.get<uint64_t>();
        if (r == me) q.tokens = list;
      }
    }
  }
  for (int& c : p.recv_per_expert) c = (c + a.expert_alignment - 1) / a.expert_alignment * a.expert_alignment;
  p.send_lists = std::move(send_lists);
  p.in_rank = std::move(in_rank);
  p.device_slots = cached ? h->device_slots : std::move(route.slots);
  p.device_order = cached ? h->device_order : std::move(route.order);
  p.device_in_rank = std::move(route.in_rank_on_device);
  p.device_counts = cached ? h->device_counts : std::move(route.summary);
  if (nccl && internode)
    return detail::dispatch_over_nccl_hierarchical(*nccl, e.pool(), a, std::move(p), nodes, node_count,
                                                   std::move(internode_route), internode_traffic_);
  if (nccl) {
    int64_t record = 0;  // the bytes NCCL moves per row
    for (long long b : rows.bytes) record += b;
    for (int d = 0; d < R; ++d)
      if (nodes.node_of[size_t(d)] != nodes.node_of[size_t(me)]) {  // the flat route crosses once per rank
        internode_traffic_.dispatch_rows += counts[size_t(d)];
        internode_traffic_.bytes += counts[size_t(d)] * record;
      }
    return detail::dispatch_over_nccl(*nccl, e.pool(), a, std::move(p));
  }
  if (gpu)
    return detail::dispatch_on_device(*plane, e.pool(), a, std::move(p), e.agreements(), scattered ? &*scattered : nullptr);
  const int64_t N = p.prefix[size_t(R)];
  const std::vector<int64_t>& recv_counts = p.recv_counts;
  const std::vector<int64_t>& prefix = p.prefix;

  // Record layout.
  const size_t es = size_t(rt::bits(a.x.dtype()) / 8);
  const size_t x_bytes = size_t(H) * es, s_bytes = size_t(S) * 4;
  const size_t off_idx = align8(x_bytes + s_bytes), off_w = off_idx + size_t(K) * 8;
  const size_t off_src = off_w + (weights ? size_t(K) * 4 : 0);
  const size_t rec = cached ? align8(x_bytes + s_bytes) : align8(off_src + 4);

  DispatchResult out;
  out.recv_x = e.pool().empty({N, H}, a.x.dtype());
  if (fp8) out.recv_x_scales = e.pool().empty({N, S}, DType::F32);
  rt::Tensor recv_src = e.pool().empty({N}, DType::I32);
  if (!cached) {
    out.recv_topk_idx = e.pool().empty({N, K}, DType::I64);
    if (weights) out.recv_topk_weights = e.pool().empty({N, K}, DType::F32);
  }
  const int64_t lo = int64_t(me) * p.experts_per_rank, hi = lo + p.experts_per_rank;
  Records records;
  records.x_bytes = x_bytes, records.s_bytes = s_bytes, records.size = rec;
  records.off_idx = off_idx, records.off_w = off_w, records.off_src = off_src;
  records.cached = cached, records.weights = weights;
  records.K = K, records.lo = lo, records.hi = hi;
  records.x = static_cast<const uint8_t*>(a.x.data());
  records.xs = fp8 ? static_cast<const uint8_t*>(a.x_scales.data()) : nullptr;
  records.w = weights ? a.topk_weights.data_as<float>() : nullptr;
  records.topk64 = !cached && a.topk_idx.dtype() == DType::I64 ? a.topk_idx.data_as<int64_t>() : nullptr;
  records.topk32 = !cached && a.topk_idx.dtype() == DType::I32 ? a.topk_idx.data_as<int32_t>() : nullptr;
  records.rx = static_cast<uint8_t*>(out.recv_x.data());
  records.rxs = fp8 ? static_cast<uint8_t*>(out.recv_x_scales.data()) : nullptr;
  records.ridx = cached ? nullptr : out.recv_topk_idx.data_as<int64_t>();
  records.rw = weights ? out.recv_topk_weights.data_as<float>() : nullptr;
  records.rsrc = recv_src.data_as<int32_t>();
  uint8_t* const rx = records.rx;
  uint8_t* const rxs = records.rxs;
  int64_t* const ridx = records.ridx;
  float* const rw = records.rw;
  int32_t* const rsrc = records.rsrc;

  if (single_copy) {
    // Read each source's rows for this rank; then wait until every rank has read this one's. The
    // rows one by one; the source's small per-token arrays (scales, top-k, weights) whole, in one
    // read each, and gathered here (a read per row of a few dozen bytes costs more than the bytes).
    // What lies in the source's arena is read in place from this rank's mapping of it.
    e.check_record_fits(rec, what);
    std::vector<int32_t> tokens;
    std::vector<uint8_t> scales_in, topk_in, topk_w_in;
    for (int s = 0; s < R; ++s) {
      const int64_t n = recv_counts[size_t(s)], base = prefix[size_t(s)];
      if (n == 0) continue;
      const Remote& q = remote[size_t(s)];
      detail::PeerReads reads(pid_t(peer_pids_[size_t(s)]), s, what,
                              [&](const std::string& error) { e.fail_peer_read(what, error); });
      tokens.resize(size_t(n));
      reads.add(q.tokens, tokens.data(), size_t(n) * 4);
      const size_t idx_bytes = cached ? 0 : size_t(K) * q.topk_bytes, w_row = weights ? size_t(K) * 4 : 0;
      // The source's whole array: mapped, or read into `local`.
      auto whole = [&](const detail::PeerTensor& t, size_t row_bytes, std::vector<uint8_t>& local) -> const uint8_t* {
        const size_t bytes = size_t(q.T) * row_bytes;
        if (const uint8_t* m = row_bytes ? arena_->mapped(s, t, bytes) : nullptr) {
          shared_bytes_read_ += n * int64_t(row_bytes);
          return m;
        }
        local.resize(bytes);
        reads.add(t.address, local.data(), bytes);
        return local.data();
      };
      const uint8_t* scales = whole(q.scales, s_bytes, scales_in);
      const uint8_t* topk = whole(q.topk, idx_bytes, topk_in);
      const uint8_t* topk_w = whole(q.weights, w_row, topk_w_in);
      const uint8_t* x_mapped = arena_->mapped(s, q.x, q.T * x_bytes);
      if (x_mapped) shared_bytes_read_ += n * int64_t(x_bytes);
      reads.run();
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t t = uint64_t(tokens[size_t(i)]);
        // A source that failed and freed its arrays mid-read leaves anything here: bound the index
        // before it addresses anything (the others' abort then names the cause).
        if (t >= uint64_t(q.T))
          e.fail_peer_read(what, rt::str(what, ": rank ", s, " sent token index ", int64_t(t), " of ", q.T,
                                         " tokens: its memory changed while being read"));
        const int64_t row = base + i;
        if (x_mapped)
          std::memcpy(rx + size_t(row) * x_bytes, x_mapped + t * x_bytes, x_bytes);
        else
          reads.add(q.x.address + t * x_bytes, rx + size_t(row) * x_bytes, x_bytes);
        if (s_bytes) std::memcpy(rxs + size_t(row) * s_bytes, scales + t * s_bytes, s_bytes);
        rsrc[row] = int32_t(t);
        for (int64_t k = 0; !cached && k < K; ++k) {
          int64_t v;
          if (q.topk_bytes == 8) {
            std::memcpy(&v, topk + t * idx_bytes + size_t(k) * 8, 8);
          } else {
            int32_t v32;
            std::memcpy(&v32, topk + t * idx_bytes + size_t(k) * 4, 4);
            v = v32;
          }
          const bool local = v >= lo && v < hi;
          ridx[row * K + k] = local ? v - lo : -1;
          if (weights) {
            float wt;
            std::memcpy(&wt, topk_w + t * w_row + size_t(k) * 4, 4);
            rw[row * K + k] = local ? wt : 0.0f;
          }
        }
      }
      reads.run();
    }
    e.barrier(what);
  }
  if (internode) {
    dispatch_hierarchical(e, nodes, records, p, count, node_count, internode_route, internode_traffic_, what);
  } else if (!single_copy) {
    std::vector<SendSpec> sends;
    std::vector<RecvSpec> recvs;
    for (int d = 0; d < R; ++d) {
      sends.push_back(send_tokens(d, records, &p.send_lists[size_t(d)]));
      recvs.push_back(receive_rows(d, records, prefix[size_t(d)], recv_counts[size_t(d)]));
      if (nodes.node_of[size_t(d)] != nodes.node_of[size_t(me)]) {  // the flat route crosses once per rank
        internode_traffic_.dispatch_rows += counts[size_t(d)];
        internode_traffic_.bytes += counts[size_t(d)] * int64_t(rec);
      }
    }
    e.exchange(std::move(sends), std::move(recvs), what);
  }

  if (cached) {
    // Positions are those of the cached dispatch: the source indices come from the handle.
    out.handle = a.handle;
    return out;
  }
  out.num_recv_tokens_per_expert = p.recv_per_expert;
  std::shared_ptr<DispatchHandle> handle = detail::make_dispatch_handle(std::move(p), R, std::move(recv_src), e.pool());
  if (internode) handle->internode = std::make_shared<const detail::InternodeRoute>(std::move(internode_route));
  out.handle = std::move(handle);
  return out;
}

namespace detail {

int64_t sent_between(const int32_t* rp, int R, int s, int r) { return rp[s * R + r] - (s ? rp[(s - 1) * R + r] : 0); }

std::vector<int64_t> sent_by(const int32_t* rp, int me, int R) {
  std::vector<int64_t> sent(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) sent[size_t(r)] = sent_between(rp, R, me, r);
  return sent;
}

std::shared_ptr<DispatchHandle> make_dispatch_handle(DispatchPlan&& p, int R, rt::Tensor recv_src_idx, TensorPool& pool,
                                                     std::string device_transport) {
  using rt::DType;
  auto handle = std::make_shared<DispatchHandle>();
  handle->device_transport = std::move(device_transport);
  handle->id = p.id;
  handle->num_ranks = R;
  handle->num_tokens = p.T;
  handle->num_recv_tokens = p.prefix[size_t(R)];
  handle->hidden = p.H;
  handle->num_topk = int(p.K);
  handle->rank_prefix_matrix = pool.empty({R, R}, DType::I32);
  std::memcpy(handle->rank_prefix_matrix.data(), p.rank_prefix.data(), p.rank_prefix.size() * 4);
  handle->recv_src_idx = std::move(recv_src_idx);
  handle->recv_counts = p.recv_counts;
  if (p.device_slots.defined()) {  // a GPU dispatch: its routing stays on the device
    handle->is_token_in_rank = std::move(p.device_in_rank);
    handle->device_slots = std::move(p.device_slots);
    handle->device_order = std::move(p.device_order);
    handle->device_counts = std::move(p.device_counts);
    return handle;
  }
  handle->is_token_in_rank = pool.empty({p.T, R}, DType::Bool);
  if (p.T) std::memcpy(handle->is_token_in_rank.data(), p.in_rank.data(), p.in_rank.size());
  handle->send_lists = std::move(p.send_lists);
  handle->token_offset.assign(size_t(p.T) + 1, 0);
  for (int64_t t = 0; t < p.T; ++t) {
    int64_t n = 0;
    for (int r = 0; r < R; ++r) n += p.in_rank[size_t(t * R + r)];
    handle->token_offset[size_t(t) + 1] = handle->token_offset[size_t(t)] + n;
  }
  return handle;
}

}  // namespace detail
}  // namespace deepep
