// Normal-mode dispatch and combine of CUDA tensors over the nccl data plane (CommOptions::
// device_transport = "nccl": GPUs of any hosts). The routing is the CPU path's, on the host
// (dispatch.cc copies topk_idx down, routes and agrees on the counts as for CPU tensors); what moves
// goes through NCCL as contiguous pieces, inside NcclPlane::run (bounded waits; a failure there
// aborts the NCCL communicator and breaks the engine):
//   dispatch: a gather kernel (kernels/nccl_normal.cuh) writes the rows for each destination -- x,
//             scales, the top-k remapped to its experts, weights, source index, as the cuda_ipc
//             scatter writes them -- into one staging area, destination after destination in slot
//             order; one NCCL group sends each destination its piece of every array and receives
//             each source's straight into the outputs (rows are grouped by source: one contiguous
//             slice each); the rank's own piece is copied on the stream.
//   combine:  one NCCL group returns to each source the rows received from it (a contiguous slice
//             of x, and of the weights) into the source's staging, destination after destination;
//             then a reduce kernel sums each token's rows in rank order in f32 (intranode.cuh's
//             reduce_token: the cuda_ipc and CPU paths' bits).
// Every call completes before it returns and its Event is complete: NCCL's waits are bounded on the
// host, so work left queued after the call could hang on a dead peer.
#include <algorithm>
#include <deque>
#include <tuple>

#include "buffer/dispatch_plan.h"
#include "buffer/internode.h"
#include "collectives/nccl_collectives.h"
#include "rt/cuda_device.h"
#include "rt/cuda_memory.h"
#include "rt/error.h"
#include "rt/jit_kernel.h"
#include "transport/cuda_ipc/device_plane.h"
#include "transport/nccl/nccl_plane.h"

namespace deepep::detail {
namespace {

constexpr unsigned kThreads = 256;

uint64_t address(const rt::Tensor& t) { return t.defined() ? reinterpret_cast<uint64_t>(t.data()) : 0; }

KernelText gather_text() {
  return {"deepep_nccl_dispatch_gather",
          "const unsigned char* x, const unsigned char* scales, const void* topk, int topk_i64, int k, "
          "const float* weights, const int* order, i64 tokens, const i64* sent, int ranks, ArrayAddresses to, "
          "RegionRows rows, int experts_per_rank, int keep_global, const int* src_of",
          "nccl_dispatch_gather_body(x, scales, topk, topk_i64, k, weights, order, tokens, sent, ranks, to, rows, "
          "experts_per_rank, keep_global, src_of);",
          "nccl_normal.cuh"};
}

KernelText forward_partial_text(rt::DType dtype) {
  const char* t = kernel_element_type(dtype);
  return {rt::str("deepep_nccl_forward_partial_", rt::name(dtype)),
          rt::str("unsigned char* partials, const i64* partial_off, float* partial_w, const ", t, "* fstage, ",
                  "const float* fstage_w, const i64* slot_row, const i64* slot_offset, i64 staged, i64 hidden, int k"),
          "nccl_forward_partial_body(partials, partial_off, partial_w, fstage, fstage_w, slot_row, slot_offset, staged, "
          "hidden, k);",
          "nccl_normal.cuh"};
}

KernelText hierarchical_reduce_text(rt::DType dtype) {
  const char* t = kernel_element_type(dtype);
  return {rt::str("deepep_nccl_hierarchical_reduce_", rt::name(dtype)),
          rt::str(t, "* out, float* out_w, const ", t, "* ostage, const float* ostage_w, const i64* own_offset, ",
                  "const i64* own_row, const unsigned char* pin, const float* pin_w, const i64* partial_at, ",
                  "const i64* partial_at_w, const unsigned char* single, i64 tokens, i64 hidden, int k, int nodes, ",
                  "int mine"),
          "nccl_hierarchical_reduce_body(out, out_w, ostage, ostage_w, own_offset, own_row, pin, pin_w, partial_at, "
          "partial_at_w, single, tokens, hidden, k, nodes, mine);",
          "nccl_normal.cuh"};
}

KernelText reduce_text(rt::DType dtype) {
  RT_ICHECK(dtype == rt::DType::F32 || dtype == rt::DType::BF16 || dtype == rt::DType::F16, "nccl combine of ",
            rt::name(dtype));
  const char* t = kernel_element_type(dtype);
  return {rt::str("deepep_nccl_combine_reduce_", rt::name(dtype)),
          rt::str(t, "* out, const ", t, "* stage, const float* stage_w, i64 hidden, const int* slot, ",
                  "const i64* sent, int ranks, i64 tokens, float* out_w, int k"),
          "nccl_combine_reduce_body(out, stage, stage_w, hidden, slot, sent, ranks, tokens, out_w, k);",
          "nccl_normal.cuh"};
}

rt::CudaKernel load(const NcclPlane& plane, const KernelText& text) {
  return rt::jit_kernel(text.source(), text.name, plane.device(), device_kernel_headers());
}

// Blocks for one warp per item, at most two per SM of the plane's budget (Buffer::set_num_sms; the
// kernels walk their items grid-stride, so any grid gives the same results).
unsigned warp_blocks(const NcclPlane& plane, int64_t items) {
  const int64_t per_block = kThreads / 32;
  const int64_t sms = plane.num_sms() > 0 ? plane.num_sms() : rt::cuda_device(plane.device()).sm_count;
  return unsigned(std::clamp<int64_t>((items + per_block - 1) / per_block, 1, 2 * sms));
}

// A host table copied into a tensor of the plane's pool.
rt::Tensor upload(NcclPlane& plane, const rt::Shape& shape, rt::DType dtype, const void* data) {
  rt::Tensor t = plane.pool().empty(shape, dtype);
  if (t.nbytes() > 0) rt::cuda_copy_to_device(plane.device(), address(t), data, size_t(t.nbytes()));
  return t;
}

// The routing's device tables, as the cuda_ipc routing leaves them: for the flat route's gather,
// and in the handle for combines (slots) and cached dispatches (order, counts). sent: the tokens
// going to each rank.
void upload_routing(NcclPlane& plane, DispatchPlan& p, const std::vector<int64_t>& sent) {
  const int R = plane.size();
  std::vector<int32_t> slots(size_t(p.T * R), -1), order(size_t(R * p.T), 0);
  for (int d = 0; d < R; ++d)
    for (size_t i = 0; i < p.send_lists[size_t(d)].size(); ++i) {
      const int32_t t = p.send_lists[size_t(d)][i];
      slots[size_t(t) * size_t(R) + size_t(d)] = int32_t(i);
      order[size_t(d) * size_t(p.T) + i] = t;
    }
  p.device_slots = upload(plane, {p.T, R}, rt::DType::I32, slots.data());
  p.device_order = upload(plane, {R, p.T}, rt::DType::I32, order.data());
  p.device_in_rank = upload(plane, {p.T, R}, rt::DType::Bool, p.in_rank.data());
  p.device_counts = upload(plane, {R}, rt::DType::I64, sent.data());
}

// Where each rank's rows start when `rows` are laid out rank after rank ([R + 1]).
std::vector<int64_t> starts(const std::vector<int64_t>& rows) {
  std::vector<int64_t> at(rows.size() + 1, 0);
  for (size_t r = 0; r < rows.size(); ++r) at[r + 1] = at[r] + rows[r];
  return at;
}

// Staging for n rows of the arrays `rows` has, in one tensor of the plane's pool (held in `holder`):
// the arrays' addresses (0: absent).
kernels::ArrayAddresses stage_rows(NcclPlane& plane, const kernels::RegionRows& rows, int64_t n, rt::Tensor& holder) {
  long long off[kernels::kRegionArrays];
  holder = plane.pool().empty({int64_t(kernels::region_offsets(rows, n, off))}, rt::DType::U8);
  kernels::ArrayAddresses to{};
  for (int i = 0; i < kernels::kRegionArrays; ++i) to.at[i] = off[i] >= 0 ? address(holder) + uint64_t(off[i]) : 0;
  return to;
}

// What a gather reads: a dispatch's inputs, or a forwarder's staged records (global top-k, int64,
// and each row's source index).
struct GatherFrom {
  uint64_t x = 0, scales = 0, topk = 0, weights = 0, src_of = 0;
  int topk_i64 = 1, k = 0;
};

// Queues the gather kernel: the rows `order` names ([groups, tokens] int32 on the device; group g's
// first sent[g] entries, sent: [groups] int64 on the device) of `from` into `to`, group after group.
void launch_gather(NcclPlane& plane, rt::CuStream stream, const GatherFrom& from, uint64_t order, int64_t tokens,
                   uint64_t sent, int groups, int64_t rows_total, const kernels::ArrayAddresses& to,
                   const kernels::RegionRows& rows, int experts_per_rank, bool keep_global) {
  if (rows_total == 0) return;
  load(plane, gather_text())
      .launch_with({warp_blocks(plane, rows_total), 1, 1}, {kThreads, 1, 1}, size_t(groups + 1) * 8, stream, from.x,
                   from.scales, from.topk, from.topk_i64, from.k, from.weights, order, tokens, sent, groups, to, rows,
                   experts_per_rank, keep_global ? 1 : 0, from.src_of);
}

// The gather of the rows lists[g] names (indices of `from`'s `tokens` rows) into `to`, group g after
// group g - 1 (the groups: ranks or nodes); the tables go into `hold` (kept until the stream ran).
void gather_rows(NcclPlane& plane, rt::CuStream stream, const GatherFrom& from, int64_t tokens,
                 const std::vector<std::vector<int32_t>>& lists, const kernels::ArrayAddresses& to,
                 const kernels::RegionRows& rows, int experts_per_rank, bool keep_global, std::deque<rt::Tensor>& hold) {
  const int groups = int(lists.size());
  std::vector<int32_t> order(size_t(groups) * size_t(tokens), 0);
  std::vector<int64_t> sent(size_t(groups), 0);
  int64_t total = 0;
  for (int g = 0; g < groups; ++g) {
    std::copy(lists[size_t(g)].begin(), lists[size_t(g)].end(), order.begin() + int64_t(g) * tokens);
    sent[size_t(g)] = int64_t(lists[size_t(g)].size());
    total += sent[size_t(g)];
  }
  if (total == 0) return;
  const uint64_t order_t = address(hold.emplace_back(upload(plane, {groups, tokens}, rt::DType::I32, order.data())));
  const uint64_t sent_t = address(hold.emplace_back(upload(plane, {groups}, rt::DType::I64, sent.data())));
  launch_gather(plane, stream, from, order_t, tokens, sent_t, groups, total, to, rows, experts_per_rank, keep_global);
}

// A dispatch's outputs (the source index into recv_src), and for a new routing the handle's device
// tables; the arrays' addresses as the gather writes them.
kernels::ArrayAddresses dispatch_outputs(NcclPlane& plane, const DispatchArgs& a, DispatchPlan& p, DispatchResult& out,
                                         rt::Tensor& recv_src, const std::vector<int64_t>& sent) {
  const int64_t received = p.prefix.back();
  out.recv_x = plane.pool().empty({received, p.H}, a.x.dtype());
  if (p.fp8) out.recv_x_scales = plane.pool().empty({received, p.S}, rt::DType::F32);
  if (!p.cached) {
    out.recv_topk_idx = plane.pool().empty({received, p.K}, rt::DType::I64);
    if (p.weights) out.recv_topk_weights = plane.pool().empty({received, p.K}, rt::DType::F32);
    recv_src = plane.pool().empty({received}, rt::DType::I32);
    upload_routing(plane, p, sent);
  }
  return {{address(out.recv_x), address(out.recv_x_scales), address(out.recv_topk_idx), address(out.recv_topk_weights),
           address(recv_src)}};
}

// The result's handle: a cached dispatch's own, else a new one (with the hierarchical route and,
// for its combine, the send lists).
DispatchResult finish_dispatch(DispatchResult&& out, const DispatchArgs& a, DispatchPlan&& p, rt::Tensor recv_src,
                               TensorPool& host_pool, std::shared_ptr<const InternodeRoute> route) {
  if (p.cached) {
    out.handle = a.handle;
    return std::move(out);
  }
  out.num_recv_tokens_per_expert = p.recv_per_expert;
  std::vector<std::vector<int32_t>> send_lists;
  if (route) send_lists = p.send_lists;
  const int R = int(p.recv_counts.size());
  std::shared_ptr<DispatchHandle> handle = make_dispatch_handle(std::move(p), R, std::move(recv_src), host_pool, "nccl");
  handle->send_lists = std::move(send_lists);
  handle->internode = std::move(route);
  out.handle = std::move(handle);
  return std::move(out);
}

}  // namespace

DispatchResult dispatch_over_nccl(NcclPlane& plane, TensorPool& host_pool, const DispatchArgs& a, DispatchPlan&& p) {
  const int R = plane.size(), me = plane.rank();
  const kernels::RegionRows rows = dispatch_rows(p.H * rt::bits(a.x.dtype()) / 8, p.S, p.K, p.cached, p.weights);
  const std::vector<int64_t> sent = sent_by(p.rank_prefix.data(), me, R), send_at = starts(sent);
  DispatchResult out;
  rt::Tensor recv_src, stage;  // held until run() has waited for the stream
  plane.run("dispatch", [&](nccl::Comm comm, rt::CuStream stream) {
    const kernels::ArrayAddresses outputs = dispatch_outputs(plane, a, p, out, recv_src, sent);
    const kernels::ArrayAddresses to = stage_rows(plane, rows, send_at[size_t(R)], stage);
    const GatherFrom inputs{address(a.x), address(a.x_scales), address(a.topk_idx), address(a.topk_weights), 0,
                            !p.cached && a.topk_idx.dtype() == rt::DType::I64 ? 1 : 0, int(p.K)};
    launch_gather(plane, stream, inputs, address(p.device_order), p.T, address(p.device_counts), R, send_at[size_t(R)],
                  to, rows, p.experts_per_rank, false);
    // Array i of destination d: its sent[d] staged rows; of source s: its rows in the outputs.
    std::vector<std::vector<DevicePiece>> sends, recvs;
    for (int i = 0; i < kernels::kRegionArrays; ++i) {
      const int64_t b = rows.bytes[i];
      if (b == 0) continue;
      std::vector<DevicePiece> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
      for (int r = 0; r < R; ++r) {
        send[size_t(r)] = {to.at[i] + uint64_t(send_at[size_t(r)] * b), sent[size_t(r)] * b};
        recv[size_t(r)] = {outputs.at[i] + uint64_t(p.prefix[size_t(r)] * b), p.recv_counts[size_t(r)] * b};
      }
      sends.push_back(std::move(send));
      recvs.push_back(std::move(recv));
    }
    enqueue_exchanges(plane, comm, stream, sends, recvs, "dispatch");
  });
  return finish_dispatch(std::move(out), a, std::move(p), std::move(recv_src), host_pool, nullptr);
}

CombineResult combine_over_nccl(NcclPlane& plane, const rt::Tensor& x, const DispatchHandle& h,
                                const rt::Tensor& topk_weights) {
  using rt::DType;
  const int R = plane.size(), me = plane.rank();
  const int64_t H = x.size(1), T = h.num_tokens;
  const int K = topk_weights.defined() ? int(topk_weights.size(1)) : 0;
  // This rank's staging: the rows it sent each rank come back, rank after rank in slot order. Its x
  // holds the rows it received, source after source.
  const std::vector<int64_t> sent = sent_by(h.rank_prefix_matrix.data_as<int32_t>(), me, R);
  const std::vector<int64_t> stage_at = starts(sent), x_at = starts(h.recv_counts);
  CombineResult out;
  rt::Tensor stage, stage_w;  // held until the reduce has run
  plane.run("combine", [&](nccl::Comm comm, rt::CuStream stream) {
    out.combined_x = plane.pool().empty({T, H}, x.dtype());
    stage = plane.pool().empty({stage_at[size_t(R)], H}, x.dtype());
    if (K) {
      out.combined_topk_weights = plane.pool().empty({T, K}, DType::F32);
      stage_w = plane.pool().empty({stage_at[size_t(R)], K}, DType::F32);
    }
    std::vector<std::vector<DevicePiece>> sends, recvs;
    for (const auto& [from, into, b] : {std::tuple{&x, &stage, H * rt::bits(x.dtype()) / 8},
                                        std::tuple{&topk_weights, &stage_w, int64_t(K) * 4}}) {
      if (b == 0) continue;
      std::vector<DevicePiece> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
      for (int r = 0; r < R; ++r) {
        send[size_t(r)] = {address(*from) + uint64_t(x_at[size_t(r)] * b), h.recv_counts[size_t(r)] * b};
        recv[size_t(r)] = {address(*into) + uint64_t(stage_at[size_t(r)] * b), sent[size_t(r)] * b};
      }
      sends.push_back(std::move(send));
      recvs.push_back(std::move(recv));
    }
    enqueue_exchanges(plane, comm, stream, sends, recvs, "combine");
  });
  // A nonblocking communicator may still be queueing the group's kernels on the stream when
  // ncclGroupEnd returns: the reduce is queued once run() has seen the exchange complete.
  if (T > 0)
    plane.run("combine", [&](nccl::Comm, rt::CuStream stream) {
      load(plane, reduce_text(x.dtype()))
          .launch_with({warp_blocks(plane, T), 1, 1}, {kThreads, 1, 1}, size_t(2 * R) * 8, stream,
                       address(out.combined_x), address(stage), address(stage_w), H, address(h.device_slots),
                       address(h.device_counts), R, T, address(out.combined_topk_weights), K);
    });
  return out;
}

// --- the hierarchical route (internode.h), for groups of several nodes ------------------------------

namespace {

// Where source s's rows start in each of this node's ranks' block of rows a forwarder exchanges
// with it (those blocks hold the sources it forwards for, in rank order): [R][R], by (r, s).
std::vector<std::vector<int64_t>> forwarded_offsets(const NodeMap& nodes, int me, const int32_t* rp) {
  const int R = int(nodes.node_of.size());
  std::vector<std::vector<int64_t>> at(size_t(R), std::vector<int64_t>(size_t(R), 0));
  for (int r : nodes.ranks[size_t(nodes.node_of[size_t(me)])]) {
    int64_t next = 0;
    for (int s = 0; s < R; ++s) {
      at[size_t(r)][size_t(s)] = next;
      if (nodes.forwards_for(me, s)) next += sent_between(rp, R, s, r);
    }
  }
  return at;
}

}  // namespace

// Two exchanges, as the CPU path's (dispatch.cc dispatch_hierarchical): (1) this node's ranks get
// their rows as on the flat route and each other node's forwarder the records of this rank's
// tokens for that node, once each, with the global top-k; the forwarder stages them. (2) The
// forwarder learns from the staged top-k which of its node's ranks each staged token goes to
// (route_forwards) and hands each rank its rows, remapped to its experts, source after source.
DispatchResult dispatch_over_nccl_hierarchical(NcclPlane& plane, TensorPool& host_pool, const DispatchArgs& a,
                                               DispatchPlan&& p, const NodeMap& nodes,
                                               const std::vector<std::vector<int64_t>>& node_count,
                                               InternodeRoute&& route, InternodeTraffic& traffic) {
  using rt::DType;
  const int R = plane.size(), me = plane.rank(), mine = nodes.node_of[size_t(me)], N = nodes.num_nodes();
  const std::vector<int>& node_ranks = nodes.ranks[size_t(mine)];
  const kernels::RegionRows rows = dispatch_rows(p.H * rt::bits(a.x.dtype()) / 8, p.S, p.K, p.cached, p.weights);
  int64_t record = 0;  // bytes of a row's arrays
  for (long long b : rows.bytes) record += b;
  const int32_t* rp = p.rank_prefix.data();
  // As a forwarder: the tokens staged for each source, source after source.
  std::vector<int64_t> staged_from(static_cast<size_t>(R), 0);
  for (int s = 0; s < R; ++s)
    if (nodes.forwards_for(me, s)) staged_from[size_t(s)] = node_count[size_t(s)][size_t(mine)];
  const std::vector<int64_t> stage_at = starts(staged_from);
  const int64_t staged = stage_at[size_t(R)];
  RT_ICHECK(!p.cached || route.stage_offset == stage_at, "the cached route stages other tokens");
  // (1)'s sends: this node's ranks' rows (rank after rank), and the records for each other node.
  std::vector<std::vector<int32_t>> direct(static_cast<size_t>(R));
  for (int r : node_ranks) direct[size_t(r)] = p.send_lists[size_t(r)];
  std::vector<int64_t> direct_n(static_cast<size_t>(R)), cross_n(static_cast<size_t>(N));
  for (int r = 0; r < R; ++r) direct_n[size_t(r)] = int64_t(direct[size_t(r)].size());
  for (int n = 0; n < N; ++n) cross_n[size_t(n)] = int64_t(route.node_lists[size_t(n)].size());
  const std::vector<int64_t> direct_at = starts(direct_n), cross_at = starts(cross_n);
  for (int n = 0; n < N; ++n) {
    traffic.dispatch_rows += n == mine ? 0 : cross_n[size_t(n)];
    traffic.bytes += n == mine ? 0 : cross_n[size_t(n)] * record;
  }
  const std::vector<int64_t> sent = sent_by(rp, me, R);
  DispatchResult out;
  rt::Tensor recv_src, direct_t, cross_t, fstage_t, forward_t;  // held until run() has waited for the stream
  std::deque<rt::Tensor> hold;  // tables the kernels read (a deque: references stay valid)
  kernels::ArrayAddresses outputs{}, fstage{};
  const GatherFrom inputs{address(a.x), address(a.x_scales), address(a.topk_idx), address(a.topk_weights), 0,
                          !p.cached && a.topk_idx.dtype() == DType::I64 ? 1 : 0, int(p.K)};
  plane.run("dispatch", [&](nccl::Comm comm, rt::CuStream stream) {
    outputs = dispatch_outputs(plane, a, p, out, recv_src, sent);
    const kernels::ArrayAddresses to_direct = stage_rows(plane, rows, direct_at[size_t(R)], direct_t);
    const kernels::ArrayAddresses to_cross = stage_rows(plane, rows, cross_at[size_t(N)], cross_t);
    fstage = stage_rows(plane, rows, staged, fstage_t);
    gather_rows(plane, stream, inputs, p.T, direct, to_direct, rows, p.experts_per_rank, false, hold);
    gather_rows(plane, stream, inputs, p.T, route.node_lists, to_cross, rows, p.experts_per_rank, true, hold);
    std::vector<std::vector<DevicePiece>> sends, recvs;
    for (int i = 0; i < kernels::kRegionArrays; ++i) {
      const int64_t b = rows.bytes[i];
      if (b == 0) continue;
      std::vector<DevicePiece> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
      for (int r : node_ranks) {
        send[size_t(r)] = {to_direct.at[i] + uint64_t(direct_at[size_t(r)] * b), direct_n[size_t(r)] * b};
        recv[size_t(r)] = {outputs.at[i] + uint64_t(p.prefix[size_t(r)] * b), p.recv_counts[size_t(r)] * b};
      }
      for (int n = 0; n < N; ++n)
        if (n != mine)
          send[size_t(nodes.forwarder(me, n))] = {to_cross.at[i] + uint64_t(cross_at[size_t(n)] * b),
                                                  cross_n[size_t(n)] * b};
      for (int s = 0; s < R; ++s)
        if (nodes.forwards_for(me, s))
          recv[size_t(s)] = {fstage.at[i] + uint64_t(stage_at[size_t(s)] * b), staged_from[size_t(s)] * b};
      sends.push_back(std::move(send));
      recvs.push_back(std::move(recv));
    }
    enqueue_exchanges(plane, comm, stream, sends, recvs, "dispatch");
  });
  if (!p.cached) {  // which of this node's ranks each staged token goes to, from its global top-k
    std::vector<int64_t> topk(size_t(staged * p.K));
    if (!topk.empty()) rt::cuda_copy_to_host(plane.device(), topk.data(), fstage.at[2], topk.size() * 8);
    const int64_t K = p.K, per_rank = p.experts_per_rank;
    route_forwards(route, nodes, me, staged_from, [&](int64_t j, int r) {
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = topk[size_t(j * K + k)];
        if (e >= 0 && e / per_rank == r) return true;
      }
      return false;
    });
    for (int r : node_ranks) {  // the staged records route as their sources counted them
      const std::vector<int32_t>& list = route.forward_lists[size_t(r)];
      size_t i = 0;
      for (int s = 0; s < R; ++s) {
        int64_t n = 0;
        for (; i < list.size() && list[i] < stage_at[size_t(s) + 1]; ++i) ++n;
        RT_ICHECK(!nodes.forwards_for(me, s) || n == sent_between(rp, R, s, r), "rank ", s,
                  "'s staged tokens for rank ", r, ": ", n, ", counted ", sent_between(rp, R, s, r));
      }
    }
  }
  // (2): each forwarder's rows for each rank of its node, rank after rank, each rank's source after source.
  std::vector<int64_t> forward_n(static_cast<size_t>(R), 0);
  for (int r : node_ranks) forward_n[size_t(r)] = int64_t(route.forward_lists[size_t(r)].size());
  const std::vector<int64_t> forward_at = starts(forward_n);
  const std::vector<std::vector<int64_t>> within = forwarded_offsets(nodes, me, rp);
  const GatherFrom staged_records{fstage.at[0], fstage.at[1], fstage.at[2], fstage.at[3], fstage.at[4], 1, int(p.K)};
  plane.run("dispatch", [&](nccl::Comm comm, rt::CuStream stream) {
    const kernels::ArrayAddresses to_forward = stage_rows(plane, rows, forward_at[size_t(R)], forward_t);
    gather_rows(plane, stream, staged_records, staged, route.forward_lists, to_forward, rows, p.experts_per_rank,
                false, hold);
    // One entry per array and source of another node: a rank receives each such source's rows from
    // that source's forwarder in this node, straight into the outputs.
    std::vector<std::vector<DevicePiece>> sends, recvs;
    for (int i = 0; i < kernels::kRegionArrays; ++i) {
      const int64_t b = rows.bytes[i];
      if (b == 0) continue;
      for (int s = 0; s < R; ++s) {
        if (nodes.node_of[size_t(s)] == mine) continue;
        std::vector<DevicePiece> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
        if (nodes.forwards_for(me, s))
          for (int r : node_ranks)
            send[size_t(r)] = {to_forward.at[i] + uint64_t((forward_at[size_t(r)] + within[size_t(r)][size_t(s)]) * b),
                               sent_between(rp, R, s, r) * b};
        recv[size_t(nodes.forwarder(s, mine))] = {outputs.at[i] + uint64_t(p.prefix[size_t(s)] * b),
                                                  p.recv_counts[size_t(s)] * b};
        sends.push_back(std::move(send));
        recvs.push_back(std::move(recv));
      }
    }
    enqueue_exchanges(plane, comm, stream, sends, recvs, "dispatch");
  });
  return finish_dispatch(std::move(out), a, std::move(p), std::move(recv_src), host_pool,
                         std::make_shared<const InternodeRoute>(std::move(route)));
}

// The route backwards, as the CPU path's (combine.cc combine_hierarchical, whose sums it repeats bit
// for bit): (1) every rank returns the rows of the tokens a forwarder handed it to that forwarder,
// which sums each staged token's rows in rank order (nccl_forward_partial_body: one row crosses as it
// is, several as their f32 sum); (2) the partials cross to their sources, one per token and node,
// and the rows of this node's sources go straight back; the source sums its own node's rows and the
// partials in node order and rounds once (nccl_hierarchical_reduce_body).
CombineResult combine_over_nccl_hierarchical(NcclPlane& plane, const rt::Tensor& x, const DispatchHandle& h,
                                             const rt::Tensor& topk_weights, const NodeMap& nodes,
                                             InternodeTraffic& traffic) {
  using rt::DType;
  const InternodeRoute& route = *h.internode;
  const int R = plane.size(), me = plane.rank(), mine = nodes.node_of[size_t(me)], N = nodes.num_nodes();
  const std::vector<int>& node_ranks = nodes.ranks[size_t(mine)];
  const DType dt = x.dtype();
  const int64_t H = x.size(1), T = h.num_tokens, es = rt::bits(dt) / 8, row = H * es;
  const int K = topk_weights.defined() ? int(topk_weights.size(1)) : 0;
  const int32_t* rp = h.rank_prefix_matrix.data_as<int32_t>();
  auto first_row_from = [&](int s) -> int64_t { return s ? rp[(s - 1) * R + me] : 0; };  // in x
  // (1)'s staging here: the rows from each rank of this node, rank after rank, each as the forwarder
  // handed them out (forward_lists); slot_row: each staged token's slots' rows there.
  std::vector<int64_t> fcount(static_cast<size_t>(R), 0);
  for (int r : node_ranks) fcount[size_t(r)] = int64_t(route.forward_lists[size_t(r)].size());
  const std::vector<int64_t> f_at = starts(fcount);
  const int64_t staged = route.stage_offset[size_t(R)], slots = route.slot_offset[size_t(staged)];
  std::vector<int64_t> slot_row(size_t(slots), 0);
  for (int r : node_ranks)
    for (size_t i = 0; i < route.forward_slots[size_t(r)].size(); ++i)
      slot_row[size_t(route.forward_slots[size_t(r)][i])] = f_at[size_t(r)] + int64_t(i);
  const std::vector<std::vector<int64_t>> within = forwarded_offsets(nodes, me, rp);
  // The partials: a row of x's dtype where one rank of the node had the token, else H floats; each
  // 16-byte aligned, staged token after staged token (so source after source).
  auto partial_bytes = [&](int64_t ranks_there) { return ((ranks_there == 1 ? row : H * 4) + 15) / 16 * 16; };
  std::vector<int64_t> partial_off(size_t(staged) + 1, 0);
  for (int64_t j = 0; j < staged; ++j)
    partial_off[size_t(j) + 1] =
        partial_off[size_t(j)] + partial_bytes(route.slot_offset[size_t(j) + 1] - route.slot_offset[size_t(j)]);
  CombineResult out;
  std::deque<rt::Tensor> hold;  // tables the kernels read (a deque: references stay valid)
  rt::Tensor fstage, fstage_w, partials, partial_w, ostage, ostage_w, pin, pin_w;
  auto weights_piece = [&](const rt::Tensor& t, int64_t first_row, int64_t n) -> DevicePiece {
    return {address(t) + uint64_t(first_row * K * 4), n * K * 4};
  };
  plane.run("combine", [&](nccl::Comm comm, rt::CuStream stream) {
    fstage = plane.pool().empty({f_at[size_t(R)], H}, dt);
    if (K) fstage_w = plane.pool().empty({f_at[size_t(R)], K}, DType::F32);
    std::vector<std::vector<DevicePiece>> sends, recvs;
    for (int s = 0; s < R; ++s) {
      if (nodes.node_of[size_t(s)] == mine) continue;
      for (int w = 0; w < (K ? 2 : 1); ++w) {
        std::vector<DevicePiece> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
        const int64_t n = h.recv_counts[size_t(s)];
        send[size_t(nodes.forwarder(s, mine))] =
            w ? weights_piece(topk_weights, first_row_from(s), n)
              : DevicePiece{address(x) + uint64_t(first_row_from(s) * row), n * row};
        if (nodes.forwards_for(me, s))
          for (int r : node_ranks) {
            const int64_t at = f_at[size_t(r)] + within[size_t(r)][size_t(s)], m = sent_between(rp, R, s, r);
            recv[size_t(r)] = w ? weights_piece(fstage_w, at, m) : DevicePiece{address(fstage) + uint64_t(at * row), m * row};
          }
        sends.push_back(std::move(send));
        recvs.push_back(std::move(recv));
      }
    }
    enqueue_exchanges(plane, comm, stream, sends, recvs, "combine");
  });
  // Per source this rank forwards for: its partials (bytes, and rows of weights).
  for (int s = 0; s < R; ++s)
    if (nodes.forwards_for(me, s)) {
      traffic.combine_rows += route.stage_offset[size_t(s) + 1] - route.stage_offset[size_t(s)];
      traffic.bytes += partial_off[size_t(route.stage_offset[size_t(s) + 1])] -
                       partial_off[size_t(route.stage_offset[size_t(s)])];
    }
  // (2)'s staging at the source: this node's ranks' rows, rank after rank in their send-list order,
  // and each other node's partials of this rank's tokens for it, in node_lists order.
  std::vector<uint8_t> in_rank(size_t(T * R), 0);
  for (int r = 0; r < R; ++r)
    for (int32_t t : h.send_lists[size_t(r)]) in_rank[size_t(t) * size_t(R) + size_t(r)] = 1;
  std::vector<int64_t> ocount(static_cast<size_t>(R), 0);
  for (int r : node_ranks) ocount[size_t(r)] = int64_t(h.send_lists[size_t(r)].size());
  const std::vector<int64_t> o_at = starts(ocount);
  std::vector<int64_t> own_row(size_t(route.own_offset[size_t(T)]), 0);
  for (int r : node_ranks)
    for (size_t i = 0; i < h.send_lists[size_t(r)].size(); ++i) {
      const int32_t t = h.send_lists[size_t(r)][i];
      int64_t before = 0;
      for (int q : node_ranks) before += q < r && in_rank[size_t(t) * size_t(R) + size_t(q)];
      own_row[size_t(route.own_offset[size_t(t)] + before)] = o_at[size_t(r)] + int64_t(i);
    }
  std::vector<int64_t> partial_at(size_t(T * N), -1), partial_at_w(size_t(T * N), -1);
  std::vector<uint8_t> single(size_t(T * N), 0);
  std::vector<int64_t> pin_at(size_t(N) + 1, 0), pin_w_at(size_t(N) + 1, 0);
  for (int n = 0; n < N; ++n) {
    int64_t bytes = pin_at[size_t(n)], w_row = pin_w_at[size_t(n)];
    for (int32_t t : route.node_lists[size_t(n)]) {
      int64_t there = 0;
      for (int r : nodes.ranks[size_t(n)]) there += in_rank[size_t(t) * size_t(R) + size_t(r)];
      partial_at[size_t(t) * size_t(N) + size_t(n)] = bytes;
      partial_at_w[size_t(t) * size_t(N) + size_t(n)] = w_row++;
      single[size_t(t) * size_t(N) + size_t(n)] = there == 1;
      bytes += partial_bytes(there);
    }
    pin_at[size_t(n) + 1] = bytes;
    pin_w_at[size_t(n) + 1] = w_row;
  }
  plane.run("combine", [&](nccl::Comm comm, rt::CuStream stream) {
    partials = plane.pool().empty({std::max<int64_t>(partial_off[size_t(staged)], 1)}, DType::U8);
    if (K) partial_w = plane.pool().empty({staged, K}, DType::F32);
    if (staged > 0) {
      const rt::Tensor& off_t = hold.emplace_back(upload(plane, {staged + 1}, DType::I64, partial_off.data()));
      const rt::Tensor& row_t = hold.emplace_back(upload(plane, {slots}, DType::I64, slot_row.data()));
      const rt::Tensor& slot_off_t =
          hold.emplace_back(upload(plane, {staged + 1}, DType::I64, route.slot_offset.data()));
      load(plane, forward_partial_text(dt))
          .launch_with({warp_blocks(plane, staged), 1, 1}, {kThreads, 1, 1}, 0, stream, address(partials),
                       address(off_t), address(partial_w), address(fstage), address(fstage_w), address(row_t),
                       address(slot_off_t), staged, H, K);
    }
    ostage = plane.pool().empty({o_at[size_t(R)], H}, dt);
    if (K) ostage_w = plane.pool().empty({o_at[size_t(R)], K}, DType::F32);
    pin = plane.pool().empty({std::max<int64_t>(pin_at[size_t(N)], 1)}, DType::U8);
    if (K) pin_w = plane.pool().empty({pin_w_at[size_t(N)], K}, DType::F32);
    std::vector<std::vector<DevicePiece>> sends, recvs;
    for (int w = 0; w < (K ? 2 : 1); ++w) {
      std::vector<DevicePiece> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
      for (int s : node_ranks) {
        const int64_t n = h.recv_counts[size_t(s)];
        send[size_t(s)] = w ? weights_piece(topk_weights, first_row_from(s), n)
                            : DevicePiece{address(x) + uint64_t(first_row_from(s) * row), n * row};
      }
      for (int s = 0; s < R; ++s)
        if (nodes.forwards_for(me, s)) {
          const int64_t j0 = route.stage_offset[size_t(s)], j1 = route.stage_offset[size_t(s) + 1];
          send[size_t(s)] = w ? weights_piece(partial_w, j0, j1 - j0)
                              : DevicePiece{address(partials) + uint64_t(partial_off[size_t(j0)]),
                                            partial_off[size_t(j1)] - partial_off[size_t(j0)]};
        }
      for (int r : node_ranks)
        recv[size_t(r)] = w ? weights_piece(ostage_w, o_at[size_t(r)], ocount[size_t(r)])
                            : DevicePiece{address(ostage) + uint64_t(o_at[size_t(r)] * row), ocount[size_t(r)] * row};
      for (int n = 0; n < N; ++n)
        if (n != mine)
          recv[size_t(nodes.forwarder(me, n))] =
              w ? weights_piece(pin_w, pin_w_at[size_t(n)], pin_w_at[size_t(n) + 1] - pin_w_at[size_t(n)])
                : DevicePiece{address(pin) + uint64_t(pin_at[size_t(n)]), pin_at[size_t(n) + 1] - pin_at[size_t(n)]};
      sends.push_back(std::move(send));
      recvs.push_back(std::move(recv));
    }
    enqueue_exchanges(plane, comm, stream, sends, recvs, "combine");
  });
  plane.run("combine", [&](nccl::Comm, rt::CuStream stream) {
    out.combined_x = plane.pool().empty({T, H}, dt);
    if (K) out.combined_topk_weights = plane.pool().empty({T, K}, DType::F32);
    if (T == 0) return;
    const rt::Tensor& own_off_t = hold.emplace_back(upload(plane, {T + 1}, DType::I64, route.own_offset.data()));
    const rt::Tensor& own_row_t =
        hold.emplace_back(upload(plane, {int64_t(own_row.size())}, DType::I64, own_row.data()));
    const rt::Tensor& at_t = hold.emplace_back(upload(plane, {T * N}, DType::I64, partial_at.data()));
    const rt::Tensor& at_w_t = hold.emplace_back(upload(plane, {T * N}, DType::I64, partial_at_w.data()));
    const rt::Tensor& single_t = hold.emplace_back(upload(plane, {T * N}, DType::U8, single.data()));
    load(plane, hierarchical_reduce_text(dt))
        .launch_with({warp_blocks(plane, T), 1, 1}, {kThreads, 1, 1}, 0, stream, address(out.combined_x),
                     address(out.combined_topk_weights), address(ostage), address(ostage_w), address(own_off_t),
                     address(own_row_t), address(pin), address(pin_w), address(at_t), address(at_w_t),
                     address(single_t), T, H, K, N, mine);
  });
  return out;
}

std::vector<std::pair<std::string, std::string>> nccl_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back(gather_text().name, gather_text().source());
  for (rt::DType d : {rt::DType::F32, rt::DType::BF16, rt::DType::F16})
    for (const KernelText& k : {reduce_text(d), forward_partial_text(d), hierarchical_reduce_text(d)})
      out.emplace_back(k.name, k.source());
  return out;
}

}  // namespace deepep::detail
