// Normal-mode dispatch and combine of CUDA tensors over the cuda_ipc data plane, on its stream. A
// dispatch's routing is computed on the device (route_on_device: one kernel; only the counts come
// back, for the agreement and to size the outputs); every rank's scatter kernel writes straight into
// its region of the other ranks' device windows (kernels/normal_layout.h) and raises its flag
// there, and each rank's receive kernel waits for its peers' flags and copies what it received out
// of its own window (kernels/intranode.cuh "normal-mode signalling": no host barrier in between,
// and the call may return before the kernels run, with an Event; the receive overlaps the scatter,
// copying each chunk of rows out as it lands). The kernels find where rows go
// from the counts on the device (the routing's, the flags'), so no table is built on the host or
// uploaded, and a dispatch's scatter needs no other rank's counts: it may go before the agreement.
//   dispatch: one warp per (token, destination) writes the row, its scales, the top-k indices
//             remapped to the destination's experts, the weights and the source index at the row
//             of its slot in this rank's region of the destination's window, a chunk of slots per
//             block; the receive copies source s's region to the rows after those of ranks < s
//             (its own rows straight from x);
//   combine:  one warp per received row writes it back into this rank's region of its source's
//             window, and the source reduces each token's rows in rank order in f32, as the CPU
//             path does: both paths give the same bits.
#include <algorithm>

#include "buffer/dispatch_plan.h"
#include "rt/cuda_memory.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"

namespace deepep::detail {
namespace {

uint64_t address(const rt::Tensor& t) { return t.defined() ? reinterpret_cast<uint64_t>(t.data()) : 0; }

std::string window_too_small_text(const DevicePlane& plane, const std::string& what, int64_t need) {
  return rt::str("the device window (", plane.window().bytes(), " bytes per rank, num_nvl_bytes + num_rdma_bytes) is ",
                 "too small: ", what, ", which needs ", need, " bytes of its region for each rank; create the Buffer ",
                 "with at least ", need * plane.size(), " bytes");
}

// Runs the launches of one numbered operation after its agreement. A rank failing there alone (a
// kernel that does not compile, a launch error) would fall behind its peers for good (they wait for
// its flags): it breaks the communicator instead, and the peers, whose kernels wait for it, learn why.
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
  route.order = plane.pool().empty({R, T}, DType::I32);
  route.in_rank_on_device = plane.pool().empty({T, R}, DType::Bool);
  route.summary = plane.pool().empty({2 * R + 1 + int64_t(num_experts)}, DType::I64);
  const DevicePlane::HostRoute host =
      plane.dispatch_route(address(topk_idx), topk_idx.dtype() == DType::I64, T, int(K), num_experts,
                           address(route.slots), address(route.order), address(route.in_rank_on_device),
                           address(route.summary), want_host_in_rank);
  route.host_summary = host.summary;
  route.host_mask = host.mask;
  plane.mark("kernels");
  return route;
}

void read_route(DevicePlane& plane, DeviceRoute& route, const rt::Tensor& topk_idx, int num_experts) {
  plane.wait_route();
  const int R = plane.size();
  const int64_t T = topk_idx.size(0);
  const int64_t* host = route.host_summary;
  route.counts.assign(host, host + R);
  route.expert_pairs.assign(host + 2 * R + 1, host + 2 * R + 1 + num_experts);
  if (route.host_mask) route.in_rank = unpack_in_rank(route.host_mask, T, R);
  if (host[2 * R] != 0) {  // the complement of the first bad entry's index: read its value
    route.bad_index = int64_t(~uint64_t(host[2 * R]));
    const size_t bytes = size_t(rt::bits(topk_idx.dtype()) / 8);
    int64_t value = 0;
    int32_t value32 = 0;
    rt::cuda_copy_to_host(plane.device(), bytes == 8 ? static_cast<void*>(&value) : &value32,
                          address(topk_idx) + uint64_t(route.bad_index) * bytes, bytes);
    route.bad_value = bytes == 8 ? value : value32;
  }
}

// Token by token, so each token's row is written in order (twice as fast at 8 ranks as destination
// by destination: 19 against 39 us for 4096 tokens on a 2-core machine; it is on the dispatch's path).
std::vector<uint8_t> unpack_in_rank(const uint32_t* bits, int64_t tokens, int ranks) {
  const int64_t words = (tokens + 31) / 32;
  std::vector<uint8_t> in_rank(size_t(tokens * ranks));
  for (int64_t t = 0; t < tokens; ++t) {
    const uint32_t* block = bits + t / 32;
    uint8_t* row = in_rank.data() + t * ranks;
    for (int d = 0; d < ranks; ++d) row[d] = uint8_t(block[d * words] >> (t % 32) & 1u);
  }
  return in_rank;
}

kernels::RegionRows dispatch_rows(int64_t x_row, int64_t S, int64_t K, bool cached, bool weights) {
  return {{x_row, S * 4, cached ? 0 : K * 8, !cached && weights ? K * 4 : 0, cached ? 0 : 4}};
}

std::string check_dispatch_fits(const DevicePlane& plane, const kernels::RegionRows& rows,
                                const std::vector<int64_t>& counts) {
  for (size_t d = 0; d < counts.size(); ++d) {
    if (int(d) == plane.rank()) continue;  // its own rows go straight into its outputs
    long long off[kernels::kRegionArrays];
    const int64_t need = kernels::region_offsets(rows, counts[d], off);
    if (need > plane.region_bytes())
      return window_too_small_text(plane, rt::str("rank ", plane.rank(), " sends ", counts[d], " tokens to rank ", d),
                                   need);
  }
  return "";
}

NormalSignals scatter_on_device(DevicePlane& plane, const DispatchArgs& a, const rt::Tensor& order,
                                const rt::Tensor& summary, const kernels::RegionRows& rows, int64_t K,
                                int experts_per_rank, uint64_t agreement) {
  const NormalSignals sig = plane.normal_signals(agreement);
  plane.dispatch_scatter(address(a.x), address(a.x_scales), address(a.topk_idx),
                         a.topk_idx.defined() && a.topk_idx.dtype() == rt::DType::I64, int(K), address(a.topk_weights),
                         address(order), a.x.size(0), address(summary), rows, experts_per_rank, sig);
  plane.mark("scatter");
  return sig;
}

DispatchResult dispatch_on_device(DevicePlane& plane, TensorPool& pool, const DispatchArgs& a, DispatchPlan&& p,
                                  uint64_t agreement, const NormalSignals* scattered) {
  using rt::DType;
  const int R = plane.size();
  const int64_t x_row = p.H * rt::bits(a.x.dtype()) / 8;
  const kernels::RegionRows rows = dispatch_rows(x_row, p.S, p.K, p.cached, p.weights);
  // This rank's outputs: its own rows straight from x, the other ranks' copied out of their regions
  // of its window, both by the receive.
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
  const kernels::ArrayAddresses outputs = {{address(out.recv_x), address(out.recv_x_scales),
                                            address(out.recv_topk_idx), address(out.recv_topk_weights),
                                            address(recv_src)}};
  int64_t max_chunks = 0;
  for (int64_t n : p.recv_counts)
    max_chunks = std::max<int64_t>(max_chunks, kernels::chunk_count(n, R, kernels::kDispatchChunkRows));
  if (!scattered && p.cached) plane.wait_event(a.previous_event);  // else the routing waited for it
  launch_numbered(plane, "dispatch", [&] {
    const NormalSignals sig =
        scattered ? *scattered
                  : scatter_on_device(plane, a, p.device_order, p.device_counts, rows, p.K, p.experts_per_rank, agreement);
    plane.dispatch_receive(address(a.x), address(a.x_scales), address(a.topk_idx),
                           a.topk_idx.defined() && a.topk_idx.dtype() == DType::I64, int(p.K), address(a.topk_weights),
                           address(p.device_order), p.T, address(p.device_counts), outputs, rows, max_chunks,
                           p.experts_per_rank, sig);
    plane.normal_op_received(sig);
    plane.mark("receive");
  });
  out.event = plane.finish(a.async_finish,
                           {a.x, a.x_scales, a.topk_idx, a.topk_weights, p.device_order, p.device_counts}, "dispatch");
  if (p.cached) {
    plane.report("cached dispatch");
    out.handle = a.handle;
    return out;
  }
  out.num_recv_tokens_per_expert = p.recv_per_expert;
  out.handle = make_dispatch_handle(std::move(p), R, std::move(recv_src), pool, "cuda_ipc");
  plane.mark("handle");
  plane.report("dispatch");
  return out;
}

kernels::RegionRows combine_rows(const rt::Tensor& x, const rt::Tensor& topk_weights) {
  return {{x.size(1) * rt::bits(x.dtype()) / 8, 0, 0, topk_weights.defined() ? topk_weights.size(1) * 4 : 0, 0}};
}

std::string check_combine_fits(const DevicePlane& plane, const DispatchHandle& h, const kernels::RegionRows& rows) {
  const int R = plane.size();
  const int32_t* rp = h.rank_prefix_matrix.data_as<int32_t>();
  for (int s = 0; s < R; ++s)
    for (int r = 0; r < R; ++r) {
      const int64_t n = int64_t(rp[s * R + r]) - (s ? rp[(s - 1) * R + r] : 0);
      long long off[kernels::kRegionArrays];
      const int64_t need = kernels::region_offsets(rows, n, off);
      if (need > plane.region_bytes())
        return window_too_small_text(plane, rt::str("rank ", s, " gets back ", n, " rows from rank ", r), need);
    }
  return "";
}

NormalSignals combine_scatter_on_device(DevicePlane& plane, const rt::Tensor& x, const DispatchHandle& h,
                                        const rt::Tensor& topk_weights, const kernels::RegionRows& rows,
                                        const Event& previous_event, uint64_t agreement) {
  plane.wait_event(previous_event);
  const NormalSignals sig = plane.normal_signals(agreement);
  const int K = topk_weights.defined() ? int(topk_weights.size(1)) : 0;
  plane.combine_scatter(address(x), address(topk_weights), K, address(h.device_counts), rows, sig);
  plane.mark("scatter");
  return sig;
}

CombineResult combine_on_device(DevicePlane& plane, const rt::Tensor& x, const DispatchHandle& h,
                                const rt::Tensor& topk_weights, const Event& previous_event, bool async_finish,
                                uint64_t agreement, const NormalSignals* scattered) {
  using rt::DType;
  const int64_t H = x.size(1);
  const int K = topk_weights.defined() ? int(topk_weights.size(1)) : 0;
  const kernels::RegionRows rows = combine_rows(x, topk_weights);
  CombineResult out;  // allocated before the operation's launches (launch_numbered)
  out.combined_x = plane.pool().empty({h.num_tokens, H}, x.dtype());
  if (K) out.combined_topk_weights = plane.pool().empty({h.num_tokens, K}, DType::F32);
  launch_numbered(plane, "combine", [&] {
    const NormalSignals sig =
        scattered ? *scattered : combine_scatter_on_device(plane, x, h, topk_weights, rows, previous_event, agreement);
    plane.combine_reduce(x.dtype(), address(out.combined_x), H, address(h.device_slots), address(h.device_counts), rows,
                         h.num_tokens, address(out.combined_topk_weights), K, sig);
    plane.normal_op_received(sig);
    plane.mark("reduce");
  });
  out.event = plane.finish(async_finish, {x, topk_weights, h.device_slots, h.device_counts}, "combine");
  plane.report("combine");
  return out;
}

}  // namespace deepep::detail
