// Normal-mode dispatch and combine of CUDA tensors over the cuda_ipc data plane, on its stream. A
// dispatch's routing is computed on the device (route_on_device: two kernels, only the counts come
// back for the agreement); the agreement is the CPU path's (dispatch.cc, combine.cc); then every
// rank's scatter kernel writes straight into the other ranks' device windows and raises its flag
// there, and each rank's receive kernel waits for its peers' flags and copies what it received out
// of its own window (kernels/intranode.cuh "normal-mode signalling": no host barrier in between,
// and the call may return before the kernels run, with an Event):
//   dispatch: one warp per (token, destination) writes the row, its scales, the top-k indices
//             remapped to the destination's experts, the weights and the source index at the row
//             the destination's output will have (source s's tokens after those of ranks < s);
//             the rows a rank sends itself go straight into its outputs;
//   combine:  one warp per received row writes it back into its source's staging area (rank r's
//             rows after those of ranks < r), and the source reduces each token's rows in rank order
//             in f32, as the CPU path does: both paths give the same bits.
#include <algorithm>
#include <iterator>

#include "buffer/dispatch_plan.h"
#include "rt/cuda_memory.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"

namespace deepep::detail {
namespace {

int64_t align256(int64_t v) { return (v + 255) / 256 * 256; }

uint64_t address(const rt::Tensor& t) { return t.defined() ? reinterpret_cast<uint64_t>(t.data()) : 0; }

// Byte offsets of a dispatch's arrays in a window receiving `rows` rows (-1 where the dispatch has
// none); *bytes: the space needed.
struct WindowArrays {
  int64_t x, scales, topk, weights, src;
};

WindowArrays window_arrays(const DispatchPlan& p, int64_t rows, int64_t x_row, int64_t* bytes) {
  WindowArrays g{};
  int64_t at = 0;
  auto take = [&](bool present, int64_t n) {
    if (!present) return int64_t(-1);
    const int64_t here = at;
    at = align256(at + n);
    return here;
  };
  g.x = take(true, rows * x_row);
  g.scales = take(p.fp8, rows * p.S * 4);
  g.topk = take(!p.cached, rows * p.K * 8);
  g.weights = take(p.weights, rows * p.K * 4);
  g.src = take(!p.cached, rows * 4);
  *bytes = at;
  return g;
}

[[noreturn]] void window_too_small(const char* op, const DevicePlane& plane, int rank, const std::string& what,
                                   int64_t need) {
  rt::throw_user_error(rt::str("deepep ", op, ": the device window (", plane.window().bytes(),
                               " bytes per rank, num_nvl_bytes + num_rdma_bytes) is too small: rank ", rank, " ", what,
                               ", which needs ", need, " bytes; create the Buffer with at least that"));
}

// Runs the launches of one numbered operation (from next_normal_op on). A rank failing there alone
// (a kernel that does not compile, a launch error) would fall behind its peers' numbering for good:
// it breaks the communicator instead, and the peers, whose kernels wait for it, learn why.
template <class F>
void launch_numbered(DevicePlane& plane, const char* what, F&& launches) {
  try {
    launches();
  } catch (const std::exception& e) {
    plane.fail(what, e.what());
  }
}

}  // namespace

DeviceRoute route_on_device(DevicePlane& plane, const rt::Tensor& topk_idx, int num_experts, bool want_host_in_rank,
                            const Event& previous_event) {
  using rt::DType;
  plane.wait_event(previous_event);
  const int R = plane.size();
  const int64_t T = topk_idx.size(0), K = topk_idx.size(1);
  DeviceRoute route;
  route.slots = plane.pool().empty({T, R}, DType::I32);
  route.in_rank_on_device = plane.pool().empty({T, R}, DType::Bool);
  const rt::Tensor summary = plane.pool().empty({R + 1 + int64_t(num_experts)}, DType::I64);
  const rt::Tensor chunk_counts = plane.pool().empty({R * plane.route_chunks(T)}, DType::I64);
  plane.dispatch_route(address(topk_idx), topk_idx.dtype() == DType::I64, T, int(K), num_experts, address(route.slots),
                       address(route.in_rank_on_device), address(summary), address(chunk_counts));
  std::vector<const rt::Tensor*> wanted = {&summary};
  if (want_host_in_rank) wanted.push_back(&route.in_rank_on_device);
  const auto got = plane.download(wanted);
  const int64_t* host = reinterpret_cast<const int64_t*>(got[0]);
  route.counts.assign(host, host + R);
  route.expert_pairs.assign(host + R + 1, host + R + 1 + num_experts);
  if (want_host_in_rank) route.in_rank.assign(got[1], got[1] + T * R);
  if (host[R] != 0) {  // the complement of the first bad entry's index: read its value
    route.bad_index = int64_t(~uint64_t(host[R]));
    const size_t bytes = size_t(rt::bits(topk_idx.dtype()) / 8);
    int64_t value = 0;
    int32_t value32 = 0;
    rt::cuda_copy_to_host(plane.device(), bytes == 8 ? static_cast<void*>(&value) : &value32,
                          address(topk_idx) + uint64_t(route.bad_index) * bytes, bytes);
    route.bad_value = bytes == 8 ? value : value32;
  }
  return route;
}

DispatchResult dispatch_on_device(DevicePlane& plane, TensorPool& pool, const DispatchArgs& a, DispatchPlan&& p) {
  using rt::DType;
  const int R = plane.size(), me = plane.rank();
  RT_USER_CHECK(R <= kernels::kNormalMaxRanks, "deepep dispatch: the GPU path takes at most ", kernels::kNormalMaxRanks,
                " ranks, this group has ", R);
  const int64_t x_row = p.H * rt::bits(a.x.dtype()) / 8;
  // This rank's outputs: the rows it sends itself go straight into them, the other ranks' rows
  // arrive in its window and are copied out once their flags are there.
  const int64_t N = p.prefix[size_t(R)];
  DispatchResult out;
  out.recv_x = plane.pool().empty({N, p.H}, a.x.dtype());
  if (p.fp8) out.recv_x_scales = plane.pool().empty({N, p.S}, DType::F32);
  rt::Tensor recv_src;
  if (!p.cached) {
    out.recv_topk_idx = plane.pool().empty({N, p.K}, DType::I64);
    if (p.weights) out.recv_topk_weights = plane.pool().empty({N, p.K}, DType::F32);
    recv_src = plane.pool().empty({N}, DType::I32);
  }
  const rt::Tensor* const outputs[] = {&out.recv_x, &out.recv_x_scales, &out.recv_topk_idx, &out.recv_topk_weights,
                                       &recv_src};
  // Every rank checks every destination's space the same way, so all raise the same error.
  std::vector<DispatchRegion> regions(static_cast<size_t>(R));
  WindowArrays mine{};
  for (int d = 0; d < R; ++d) {
    int64_t need = 0;
    const int64_t rows = p.rank_prefix[size_t((R - 1) * R + d)];
    const WindowArrays g = window_arrays(p, rows, x_row, &need);
    if (need > plane.window().bytes()) window_too_small("dispatch", plane, d, rt::str("receives ", rows, " tokens"), need);
    const int64_t first_row = me ? p.rank_prefix[size_t((me - 1) * R + d)] : 0;
    if (d == me) {
      mine = g;
      regions[size_t(d)] = {address(out.recv_x), address(out.recv_x_scales), address(out.recv_topk_idx),
                            address(out.recv_topk_weights), address(recv_src), first_row};
    } else {
      const uint64_t w = plane.window().window(d);
      auto at = [w](int64_t off) { return off < 0 ? uint64_t(0) : w + uint64_t(off); };
      regions[size_t(d)] = {at(g.x), at(g.scales), at(g.topk), at(g.weights), at(g.src), first_row};
    }
  }
  // The copy-out: the rows of the ranks before this one and of those after it, array by array.
  std::vector<CopyDesc> copies;
  const uint64_t window = plane.window().window(me);
  const int64_t offsets[] = {mine.x, mine.scales, mine.topk, mine.weights, mine.src};
  const int64_t own_first = p.prefix[size_t(me)], own_end = p.prefix[size_t(me) + 1];
  int64_t largest = 0;
  for (size_t i = 0; i < std::size(outputs); ++i) {
    const rt::Tensor& t = *outputs[i];
    if (!t.defined() || t.nbytes() == 0) continue;
    const int64_t row = t.nbytes() / N;
    for (auto [first, end] : {std::pair{int64_t(0), own_first}, std::pair{own_end, N}}) {
      const int64_t bytes = (end - first) * row;
      if (bytes == 0) continue;
      copies.push_back({address(t) + uint64_t(first * row), window + uint64_t(offsets[i] + first * row), bytes});
      largest = std::max(largest, bytes);
    }
  }
  DeviceTables tables;
  const int64_t at_regions = tables.add(regions), at_copies = tables.add(copies);
  const uint64_t base = plane.upload(tables);
  plane.mark("tables");

  if (p.cached) plane.wait_event(a.previous_event);  // else the routing waited for it
  launch_numbered(plane, "dispatch", [&] {
    const NormalSignals sig = plane.next_normal_op();
    plane.dispatch_scatter(address(a.x), x_row, p.fp8 ? address(a.x_scales) : 0, p.S * 4,
                           p.cached ? 0 : address(a.topk_idx), !p.cached && a.topk_idx.dtype() == DType::I64,
                           int(p.K), p.weights ? address(a.topk_weights) : 0, address(p.device_slots), p.T,
                           base + uint64_t(at_regions), p.experts_per_rank, sig);
    plane.mark("scatter");
    plane.dispatch_receive(base + uint64_t(at_copies), int(copies.size()), largest, sig);
    plane.mark("receive");
  });
  out.event = plane.finish(a.async_finish, {a.x, a.x_scales, a.topk_idx, a.topk_weights, p.device_slots}, "dispatch");
  if (p.cached) {
    plane.report("cached dispatch");
    out.handle = a.handle;
    return out;
  }
  out.num_recv_tokens_per_expert = p.recv_per_expert;
  out.handle = make_dispatch_handle(std::move(p), R, std::move(recv_src), pool);
  plane.mark("handle");
  plane.report("dispatch");
  return out;
}

CombineResult combine_on_device(DevicePlane& plane, const rt::Tensor& x, const DispatchHandle& h,
                                const rt::Tensor& topk_weights, const Event& previous_event, bool async_finish) {
  using rt::DType;
  const int R = plane.size(), me = plane.rank();
  RT_USER_CHECK(R <= 256, "deepep combine: the GPU path reduces over at most 256 ranks, this group has ", R);
  const int32_t* rp = h.rank_prefix_matrix.data_as<int32_t>();
  auto count = [&](int s, int j) { return int64_t(rp[s * R + j]) - (s ? rp[(s - 1) * R + j] : 0); };
  const int64_t H = x.size(1);
  const int64_t row_bytes = H * rt::bits(x.dtype()) / 8;
  const int K = topk_weights.defined() ? int(topk_weights.size(1)) : 0;
  // Source s stages one row per (token, rank it went to), grouped by rank.
  std::vector<CombineRegion> regions(static_cast<size_t>(R));
  for (int s = 0; s < R; ++s) {
    int64_t rows = 0, before_me = 0;
    for (int j = 0; j < R; ++j) {
      if (j == me) before_me = rows;
      rows += count(s, j);
    }
    const int64_t w_off = align256(rows * row_bytes), need = w_off + rows * K * 4;
    if (need > plane.window().bytes()) window_too_small("combine", plane, s, rt::str("gets back ", rows, " rows"), need);
    regions[size_t(s)] = {0, K ? w_off : -1, before_me};
  }
  std::vector<int64_t> recv_begin(size_t(R) + 1, 0), stage_first(static_cast<size_t>(R), 0);
  for (int s = 0; s < R; ++s) recv_begin[size_t(s) + 1] = rp[s * R + me];
  for (int r = 1; r < R; ++r) stage_first[size_t(r)] = stage_first[size_t(r) - 1] + count(me, r - 1);
  DeviceTables tables;
  const int64_t at_regions = tables.add(regions), at_begin = tables.add(recv_begin), at_first = tables.add(stage_first);
  const uint64_t base = plane.upload(tables);
  plane.mark("tables");
  plane.wait_event(previous_event);
  CombineResult out;  // allocated before the operation is numbered (launch_numbered)
  out.combined_x = plane.pool().empty({h.num_tokens, H}, x.dtype());
  if (K) out.combined_topk_weights = plane.pool().empty({h.num_tokens, K}, DType::F32);
  const uint64_t window = plane.window().window(me);
  launch_numbered(plane, "combine", [&] {
    const NormalSignals sig = plane.next_normal_op();
    plane.combine_scatter(address(x), row_bytes, address(topk_weights), K, base + uint64_t(at_begin),
                          base + uint64_t(at_regions), h.num_recv_tokens, sig);
    plane.mark("scatter");
    plane.combine_reduce(x.dtype(), address(out.combined_x), window, H, address(h.device_slots),
                         base + uint64_t(at_first), h.num_tokens, address(out.combined_topk_weights),
                         K ? window + uint64_t(regions[size_t(me)].weights) : 0, K, sig);
    plane.mark("reduce");
  });
  out.event = plane.finish(async_finish, {x, topk_weights, h.device_slots}, "combine");
  plane.report("combine");
  return out;
}

}  // namespace deepep::detail
