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
#include <tuple>

#include "buffer/dispatch_plan.h"
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
          "RegionRows rows, int experts_per_rank",
          "nccl_dispatch_gather_body(x, scales, topk, topk_i64, k, weights, order, tokens, sent, ranks, to, rows, "
          "experts_per_rank);",
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

// Where each rank's rows start when `rows` are laid out rank after rank ([R + 1]).
std::vector<int64_t> starts(const std::vector<int64_t>& rows) {
  std::vector<int64_t> at(rows.size() + 1, 0);
  for (size_t r = 0; r < rows.size(); ++r) at[r + 1] = at[r] + rows[r];
  return at;
}

}  // namespace

DispatchResult dispatch_over_nccl(NcclPlane& plane, TensorPool& host_pool, const DispatchArgs& a, DispatchPlan&& p) {
  using rt::DType;
  const int R = plane.size(), me = plane.rank();
  const kernels::RegionRows rows = dispatch_rows(p.H * rt::bits(a.x.dtype()) / 8, p.S, p.K, p.cached, p.weights);
  const std::vector<int64_t> sent = sent_by(p.rank_prefix.data(), me, R), send_at = starts(sent);
  DispatchResult out;
  rt::Tensor recv_src, stage;  // held until run() has waited for the stream
  plane.run("dispatch", [&](nccl::Comm comm, rt::CuStream stream) {
    const int64_t N = p.prefix[size_t(R)];
    out.recv_x = plane.pool().empty({N, p.H}, a.x.dtype());
    if (p.fp8) out.recv_x_scales = plane.pool().empty({N, p.S}, DType::F32);
    if (!p.cached) {
      out.recv_topk_idx = plane.pool().empty({N, p.K}, DType::I64);
      if (p.weights) out.recv_topk_weights = plane.pool().empty({N, p.K}, DType::F32);
      recv_src = plane.pool().empty({N}, DType::I32);
      // The routing's device tables, as the cuda_ipc routing leaves them: for this gather, and in the
      // handle for combines (slots) and cached dispatches (order, counts).
      std::vector<int32_t> slots(size_t(p.T * R), -1), order(size_t(R * p.T), 0);
      for (int d = 0; d < R; ++d)
        for (size_t i = 0; i < p.send_lists[size_t(d)].size(); ++i) {
          const int32_t t = p.send_lists[size_t(d)][i];
          slots[size_t(t) * size_t(R) + size_t(d)] = int32_t(i);
          order[size_t(d) * size_t(p.T) + i] = t;
        }
      p.device_slots = upload(plane, {p.T, R}, DType::I32, slots.data());
      p.device_order = upload(plane, {R, p.T}, DType::I32, order.data());
      p.device_in_rank = upload(plane, {p.T, R}, DType::Bool, p.in_rank.data());
      p.device_counts = upload(plane, {R}, DType::I64, sent.data());
    }
    long long off[kernels::kRegionArrays];
    const int64_t staged = send_at[size_t(R)];
    stage = plane.pool().empty({int64_t(kernels::region_offsets(rows, staged, off))}, DType::U8);
    kernels::ArrayAddresses to{};
    for (int i = 0; i < kernels::kRegionArrays; ++i) to.at[i] = off[i] >= 0 ? address(stage) + uint64_t(off[i]) : 0;
    if (staged > 0) {
      const int topk_i64 = !p.cached && a.topk_idx.dtype() == DType::I64 ? 1 : 0;
      load(plane, gather_text())
          .launch_with({warp_blocks(plane, staged), 1, 1}, {kThreads, 1, 1}, size_t(R + 1) * 8, stream,
                       address(a.x), address(a.x_scales), address(a.topk_idx), topk_i64, int(p.K),
                       address(a.topk_weights), address(p.device_order), p.T, address(p.device_counts), R, to, rows,
                       p.experts_per_rank);
    }
    // Array i of destination d: its sent[d] staged rows; of source s: its rows in the outputs.
    const kernels::ArrayAddresses outputs = {{address(out.recv_x), address(out.recv_x_scales),
                                              address(out.recv_topk_idx), address(out.recv_topk_weights),
                                              address(recv_src)}};
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
  if (p.cached) {
    out.handle = a.handle;
    return out;
  }
  out.num_recv_tokens_per_expert = p.recv_per_expert;
  out.handle = make_dispatch_handle(std::move(p), R, std::move(recv_src), host_pool, "nccl");
  return out;
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

std::vector<std::pair<std::string, std::string>> nccl_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const KernelText& k : {gather_text(), reduce_text(rt::DType::F32), reduce_text(rt::DType::BF16),
                              reduce_text(rt::DType::F16)})
    out.emplace_back(k.name, k.source());
  return out;
}

}  // namespace deepep::detail
