#include "deepep/buffer.h"

#include <algorithm>
#include <cstring>

#include "bootstrap/setup_check.h"
#include "buffer/checks.h"
#include "buffer/peer_memory.h"
#include "buffer/shared_arena.h"
#include "deepep/error.h"
#include "deepep/group.h"
#include "engine/engine.h"
#include "rt/env.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"
#include "transport/nccl/nccl_plane.h"

namespace deepep {

Buffer::Buffer(std::shared_ptr<Group> group, int64_t num_nvl_bytes, int64_t num_rdma_bytes, bool low_latency_mode,
               CommOptions options)
    : group_(std::move(group)),
      num_nvl_bytes_(num_nvl_bytes),
      num_rdma_bytes_(num_rdma_bytes),
      low_latency_mode_(low_latency_mode) {
  RT_USER_CHECK(group_ != nullptr, "deepep Buffer: null group");
  std::string err;
  if (num_nvl_bytes < 0 || num_rdma_bytes < 0)
    err = rt::str("negative sizes (num_nvl_bytes=", num_nvl_bytes, ", num_rdma_bytes=", num_rdma_bytes, ")");
  // Without a device the sum becomes the rings' memory (CommOptions::inbound_bytes), which the shm
  // transport maps populated: more than the host has got the process killed by the OOM killer
  // (and its peers waited out the setup timeout) rather than an error.
  else if (options.cuda_device < 0 && num_nvl_bytes > detail::host_memory_bytes() - num_rdma_bytes)
    err = rt::str("num_nvl_bytes + num_rdma_bytes = ", rt::str(num_nvl_bytes, " + ", num_rdma_bytes),
                  " is more than this host's memory (", detail::host_memory_bytes(), " bytes)");
  else if (num_nvl_bytes + num_rdma_bytes <= 0)
    err = "num_nvl_bytes + num_rdma_bytes must be positive";
  else if (options.shared_arena_bytes < 0)
    err = rt::str("negative shared_arena_bytes (", options.shared_arena_bytes, ")");
  // Several nodes: the hierarchical route for CPU tensors and the nccl plane unless
  // DEEPEP_HIERARCHICAL_DISPATCH=0, which every rank must choose alike (it is part of what they
  // agree on).
  const bool several_nodes = group_->num_nodes() > 1;
  hierarchical_ = several_nodes && rt::env_int("DEEPEP_HIERARCHICAL_DISPATCH", 1) != 0;
  const std::vector<std::string> descs =
      gather_setup(*group_, err,
                   rt::str("Buffer(num_nvl_bytes=", num_nvl_bytes, ", num_rdma_bytes=", num_rdma_bytes,
                           ", low_latency_mode=", low_latency_mode,
                           several_nodes ? rt::str(", DEEPEP_HIERARCHICAL_DISPATCH=", int(hierarchical_)) : "", ")"),
                   "deepep Buffer: ", "Buffer creation");
  for (int r = 0; r < group_->size(); ++r)
    if (descs[size_t(r)] != descs[0])
      rt::throw_user_error(rt::str("deepep Buffer: the ranks disagree: rank 0 created ", descs[0], " but rank ", r,
                                   " created ", descs[size_t(r)]));
  // One host: with a CUDA device the windows carry the data (the shm rings keep options'
  // size for the control plane and CPU tensors); without, the shm rings carry everything.
  if (options.cuda_device >= 0)
    options.device_window_bytes = num_nvl_bytes + num_rdma_bytes;
  else
    options.inbound_bytes = num_nvl_bytes + num_rdma_bytes;
  comm_ = std::make_unique<Comm>(group_, options);
  // The single-copy path for CPU tensors, unless faults are injected into frames (drop, corrupt,
  // delay: the healing they test lives there) or it is off. Killing a rank is no frame fault. Not
  // across nodes: ranks of other hosts cannot read this one's memory, and on emulated nodes the
  // route across them must be the one real hosts take.
  const FaultConfig& f = comm_->options().faults;
  const bool frame_faults = f.drop > 0 || f.corrupt > 0 || f.delay_us > 0;
  const bool single_copy = !frame_faults && !several_nodes && rt::env_int("DEEPEP_SINGLE_COPY", 1) != 0;
  for (pid_t pid : detail::probe_peer_memory(*group_, single_copy)) peer_pids_.push_back(int(pid));
  arena_ = std::make_unique<detail::SharedArena>(*group_, options.shared_arena_bytes);
  copy_into_arena_ = rt::env_int("DEEPEP_COPY_INTO_ARENA", 1) != 0;
}

Buffer::~Buffer() { *alive_ = false; }

rt::Tensor Buffer::alloc_shared_tensor(const rt::Shape& shape, rt::DType dtype) { return arena_->alloc(shape, dtype); }

int Buffer::rank() const { return group_->rank(); }
int Buffer::size() const { return group_->size(); }
std::vector<LinkStats> Buffer::link_stats() const { return comm_->link_stats(); }

void Buffer::set_num_sms(int num_sms) {
  RT_USER_CHECK(num_sms >= 0, "deepep set_num_sms: num_sms=", num_sms, " must be >= 0 (0: every SM)");
  if (NcclPlane* const nccl = comm_->nccl_plane()) return nccl->set_num_sms(num_sms);
  DevicePlane* const plane = comm_->device_plane();
  RT_USER_CHECK(plane, "deepep set_num_sms: the communicator has no GPU data plane (CommOptions::cuda_device)");
  plane->set_num_sms(num_sms);
}

int64_t Buffer::low_latency_size_hint(int max_tokens_per_rank, int64_t hidden, int num_ranks, int num_experts) {
  RT_USER_CHECK(max_tokens_per_rank > 0 && hidden > 0 && num_ranks > 0 && num_experts > 0 &&
                    num_experts % num_ranks == 0,
                "deepep low_latency_size_hint: bad arguments (max_tokens_per_rank=", max_tokens_per_rank, ", hidden=",
                hidden, ", num_ranks=", num_ranks, ", num_experts=", num_experts, ")");
  // Worst case per inbound link: every token to every local expert of the receiver, as BF16 rows
  // (the larger of the dispatch and combine records), at most half a frame lost to rounding, plus
  // slack for frames still in flight.
  // Saturating: sizes past int64 (a huge hidden with an empty x, say) give INT64_MAX, which no
  // Buffer reaches, instead of wrapping to a negative need that every Buffer passes.
  constexpr int64_t kMax = INT64_MAX;
  auto mul = [](int64_t a, int64_t b) { int64_t r; return __builtin_mul_overflow(a, b, &r) ? kMax : r; };
  auto add = [](int64_t a, int64_t b) { int64_t r; return __builtin_add_overflow(a, b, &r) ? kMax : r; };
  const int64_t local = num_experts / num_ranks;
  const int64_t record = add(mul(hidden, 2), 8);
  const int64_t per_link = add(mul(mul(mul(2, max_tokens_per_rank), local), record), 4 * (256 << 10));
  // The GPU path stages one BF16 record (row rounded up to 16 bytes, plus 16) per (expert, source
  // rank, token) in each of two alternating halves of its window (gpu_low_latency.cc), each half
  // aligned to 256 bytes.
  const int64_t row16 = add(mul(add(mul(hidden, 2), 15) / 16, 16), 16);
  const int64_t device = mul(2, add(mul(mul(num_experts, max_tokens_per_rank), row16), 256));
  return std::max(mul(std::max<int64_t>(1, num_ranks - 1), per_link), device);
}

DispatchLayout Buffer::get_dispatch_layout(const rt::Tensor& topk_ids, int num_experts) const {
  const int R = size();
  // The layout is computed on the host (the CPU tensors it returns are what dispatch checks).
  const rt::Tensor topk_idx =
      topk_ids.defined() && topk_ids.device().is_cuda() ? topk_ids.to(rt::Device::cpu()) : topk_ids;
  std::string err = detail::check_experts(num_experts, R);
  if (err.empty()) err = detail::check_topk(topk_idx, -1, num_experts, false);
  RT_USER_CHECK(err.empty(), "deepep get_dispatch_layout (rank ", rank(), "): ", err);
  const int64_t T = topk_idx.size(0), K = topk_idx.size(1);
  const std::vector<int32_t> owner = detail::expert_owners(num_experts, R);
  const int nodes = group_->num_nodes();
  DispatchLayout l;
  l.num_tokens_per_rank = rt::Tensor::empty({R}, rt::DType::I32);
  l.num_tokens_per_rdma_rank = rt::Tensor::empty({nodes}, rt::DType::I32);
  l.num_tokens_per_expert = rt::Tensor::empty({num_experts}, rt::DType::I32);
  l.is_token_in_rank = rt::Tensor::empty({T, R}, rt::DType::Bool);
  for (const rt::Tensor* t : {&l.num_tokens_per_rank, &l.num_tokens_per_rdma_rank, &l.num_tokens_per_expert,
                              &l.is_token_in_rank})
    t->zero_();
  int32_t* per_rank_count = l.num_tokens_per_rank.data_as<int32_t>();
  int32_t* per_node = l.num_tokens_per_rdma_rank.data_as<int32_t>();
  int32_t* per_expert = l.num_tokens_per_expert.data_as<int32_t>();
  uint8_t* in_rank = static_cast<uint8_t*>(l.is_token_in_rank.data());
  std::vector<uint8_t> node_hit(static_cast<size_t>(nodes));
  const detail::TopkReader topk(topk_idx);
  for (int64_t t = 0; t < T; ++t) {
    std::fill(node_hit.begin(), node_hit.end(), 0);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = topk[t * K + k];
      if (e < 0) continue;
      ++per_expert[e];
      const int r = owner[size_t(e)];
      uint8_t& hit = in_rank[t * R + r];
      if (!hit) {
        hit = 1;
        ++per_rank_count[r];
      }
      uint8_t& nh = node_hit[size_t(group_->peer(r).node)];
      if (!nh) {
        nh = 1;
        ++per_node[group_->peer(r).node];
      }
    }
  }
  return l;
}

}  // namespace deepep
