// Normal-mode dispatch and combine of CUDA tensors over the cuda_ipc data plane. The routing and
// the agreement are the CPU path's (dispatch.cc, combine.cc); then every rank's kernel writes
// straight into the other ranks' device windows, and after a barrier each rank copies what it
// received out of its own window:
//   dispatch: one warp per (token, destination) writes the row, its scales, the top-k indices
//             remapped to the destination's experts, the weights and the source index at the row
//             the destination's output will have (source s's tokens after those of ranks < s);
//   combine:  one warp per received row writes it back into its source's staging area (rank r's
//             rows after those of ranks < r), and the source reduces each token's rows in rank order
//             in f32, as the CPU path does: both paths give the same bits.
#include <algorithm>
#include <cstring>

#include "buffer/dispatch_plan.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"

namespace deepep::detail {
namespace {

int64_t align256(int64_t v) { return (v + 255) / 256 * 256; }

uint64_t address(const rt::Tensor& t) { return t.defined() ? reinterpret_cast<uint64_t>(t.data()) : 0; }

// Where a destination receiving `rows` rows keeps them in its window; *bytes: the space needed.
DispatchRegion dispatch_region(const DispatchPlan& p, int64_t rows, int64_t x_row, int64_t* bytes) {
  DispatchRegion g{};
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

}  // namespace

DispatchResult dispatch_on_device(DevicePlane& plane, TensorPool& pool, const DispatchArgs& a, DispatchPlan&& p) {
  using rt::DType;
  const int R = plane.size(), me = plane.rank();
  const int64_t x_row = p.H * rt::bits(a.x.dtype()) / 8;
  // Every rank checks every destination's space the same way, so all raise the same error.
  DeviceTables tables;
  std::vector<int32_t> send_tokens;
  std::vector<int64_t> send_begin(size_t(R) + 1, 0);
  std::vector<DispatchRegion> regions(static_cast<size_t>(R));
  for (int d = 0; d < R; ++d) {
    int64_t need = 0;
    const int64_t rows = p.rank_prefix[size_t((R - 1) * R + d)];
    regions[size_t(d)] = dispatch_region(p, rows, x_row, &need);
    if (need > plane.window().bytes()) window_too_small("dispatch", plane, d, rt::str("receives ", rows, " tokens"), need);
    regions[size_t(d)].first_row = me ? p.rank_prefix[size_t((me - 1) * R + d)] : 0;
    const auto& list = p.send_lists[size_t(d)];
    send_tokens.insert(send_tokens.end(), list.begin(), list.end());
    send_begin[size_t(d) + 1] = int64_t(send_tokens.size());
  }
  const int64_t at_tokens = tables.add(send_tokens), at_begin = tables.add(send_begin), at_regions = tables.add(regions);

  // This rank's outputs and where they arrive in its window.
  const int64_t N = p.prefix[size_t(R)];
  int64_t unused = 0;
  const DispatchRegion mine = dispatch_region(p, N, x_row, &unused);
  DispatchResult out;
  out.recv_x = plane.pool().empty({N, p.H}, a.x.dtype());
  if (p.fp8) out.recv_x_scales = plane.pool().empty({N, p.S}, DType::F32);
  rt::Tensor recv_src;
  if (!p.cached) {
    out.recv_topk_idx = plane.pool().empty({N, p.K}, DType::I64);
    if (p.weights) out.recv_topk_weights = plane.pool().empty({N, p.K}, DType::F32);
    recv_src = plane.pool().empty({N}, DType::I32);
  }
  std::vector<CopyDesc> copies;
  const uint64_t window = plane.window().window(me);
  int64_t largest = 0;
  for (auto [t, off] : {std::pair{&out.recv_x, mine.x}, std::pair{&out.recv_x_scales, mine.scales},
                        std::pair{&out.recv_topk_idx, mine.topk}, std::pair{&out.recv_topk_weights, mine.weights},
                        std::pair{&recv_src, mine.src}})
    if (t->defined() && t->nbytes() > 0) {
      copies.push_back({address(*t), window + uint64_t(off), t->nbytes()});
      largest = std::max(largest, t->nbytes());
    }
  const int64_t at_copies = tables.add(copies);
  const uint64_t base = plane.upload(tables);
  plane.mark("tables");

  plane.dispatch_scatter(address(a.x), x_row, p.fp8 ? address(a.x_scales) : 0, p.S * 4,
                         p.cached ? 0 : address(a.topk_idx), !p.cached && a.topk_idx.dtype() == DType::I64, int(p.K),
                         p.weights ? address(a.topk_weights) : 0, base + uint64_t(at_tokens), base + uint64_t(at_begin),
                         base + uint64_t(at_regions), send_begin.back(), p.experts_per_rank);
  plane.sync();
  plane.mark("scatter");
  plane.sync_and_barrier("dispatch");
  plane.mark("barrier");
  plane.multi_copy(base + uint64_t(at_copies), int(copies.size()), largest);

  if (p.cached) {
    plane.sync();
    plane.mark("copy-out");
    plane.report("cached dispatch");
    out.handle = a.handle;
    return out;
  }
  // Where each token sits in each destination's list: what the device combine reduces by.
  std::vector<int32_t> slots(size_t(p.T * R), -1);
  for (int r = 0; r < R; ++r)
    for (size_t i = 0; i < p.send_lists[size_t(r)].size(); ++i) slots[size_t(p.send_lists[size_t(r)][i]) * R + r] = int32_t(i);
  rt::Tensor device_slots = plane.pool().empty({p.T, R}, DType::I32);
  plane.copy_to_device(device_slots, slots.data());
  plane.mark("copy-out");
  plane.sync();
  plane.mark("sync");
  out.num_recv_tokens_per_expert = p.recv_per_expert;
  auto handle = make_dispatch_handle(std::move(p), R, std::move(recv_src), pool);
  handle->device_slots = std::move(device_slots);
  out.handle = std::move(handle);
  plane.mark("handle");
  plane.report("dispatch");
  return out;
}

CombineResult combine_on_device(DevicePlane& plane, const rt::Tensor& x, const DispatchHandle& h,
                                const rt::Tensor& topk_weights) {
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
  plane.combine_scatter(address(x), row_bytes, address(topk_weights), K, base + uint64_t(at_begin),
                        base + uint64_t(at_regions), h.num_recv_tokens);
  plane.sync();
  plane.mark("scatter");
  plane.sync_and_barrier("combine");
  plane.mark("barrier");

  CombineResult out;
  out.combined_x = plane.pool().empty({h.num_tokens, H}, x.dtype());
  if (K) out.combined_topk_weights = plane.pool().empty({h.num_tokens, K}, DType::F32);
  const uint64_t window = plane.window().window(me);
  plane.combine_reduce(x.dtype(), address(out.combined_x), window, H, address(h.device_slots), base + uint64_t(at_first),
                       h.num_tokens, address(out.combined_topk_weights),
                       K ? window + uint64_t(regions[size_t(me)].weights) : 0, K);
  plane.sync();
  plane.mark("reduce");
  plane.report("combine");
  return out;
}

}  // namespace deepep::detail
