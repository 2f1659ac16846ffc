#include "buffer/gpu_low_latency.h"

#include <algorithm>
#include <functional>

#include "deepep/error.h"
#include "engine/engine.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"

namespace deepep::detail {
namespace {

// kernels/low_latency.cuh's limits.
constexpr int kMaxExperts = 4096, kMaxRanks = 1024, kMaxTopk = 32;

uint64_t address(const rt::Tensor& t) { return t.defined() ? reinterpret_cast<uint64_t>(t.data()) : 0; }

// A dispatch record in the receiver's staging (kernels/low_latency.cuh): the row and its scales
// (FP8) padded to 16 bytes, then 16 bytes for the token and its top-k position.
int64_t record_bytes(int64_t hidden, bool fp8) {
  const int64_t data = fp8 ? hidden + hidden / 128 * 4 : hidden * 2;
  return (data + 15) / 16 * 16 + 16;
}

}  // namespace

void ll_check_status(DevicePlane& plane, const char* what) {
  using kernels::kLlBadSource, kernels::kLlTimedOut, kernels::kLlTopkDiffers;
  int32_t s[3];
  for (int i : {kLlTimedOut, kLlBadSource, kLlTopkDiffers}) s[i] = plane.take_status(i);  // reported once
  if (s[kLlTimedOut])
    throw_comm_error(rt::str("deepep (rank ", plane.rank(), "): ", what, ": rank ", s[kLlTimedOut] - 1,
                             "'s data did not arrive within the communicator's timeout (dead or stuck?)"));
  if (s[kLlBadSource])
    rt::throw_user_error(rt::str("deepep ", what, ": rank ", s[kLlBadSource] - 1,
                                 " passed an invalid topk_idx (an index outside [-1, num_experts) or an expert "
                                 "twice for one token); nothing of that call was delivered"));
  if (s[kLlTopkDiffers])
    rt::throw_user_error(rt::str("deepep ", what, " (rank ", plane.rank(),
                                 "): topk_idx differs from the one given to the dispatch"));
}

namespace {

// After a receive kernel: waits for it and raises its status as errors. On a user stream it does
// not wait: it raises what the calls the stream has run so far met (this one's kernels are queued
// already, so every rank's calls stay numbered alike), and synchronize_low_latency() the rest.
void finish_receive(DevicePlane& plane, const char* what) {
  plane.mark("receive");
  plane.report(what);
  if (plane.ll_on_user_stream()) {
    ll_check_status(plane, "a low-latency call queued earlier on the stream");
  } else {
    plane.ll_sync();
    ll_check_status(plane, what);
  }
}

// Runs `receive` now, right after its send kernel (receive(true): it may overlap the send), or
// returns it as the hook (and leaves it to the engine, whose next operation runs it first when the
// hook has not been called).
std::function<void()> receive_now_or_later(const LowLatencyCall& call, std::function<void(bool)> receive,
                                           const char* what) {
  if (!call.return_recv_hook) {
    receive(true);
    return nullptr;
  }
  auto done = std::make_shared<bool>(false);
  auto complete = [done, receive = std::move(receive)] {
    if (*done) return;
    *done = true;
    receive(false);
  };
  call.engine->defer_device_receive(complete);
  return [alive = call.alive, complete, what] {
    auto a = alive.lock();
    RT_USER_CHECK(a && *a, "deepep ", what, " hook: the Buffer was destroyed before the hook was called");
    complete();
  };
}

}  // namespace

std::string ll_window_error(const DevicePlane& plane, int ranks, int num_experts, int max_tokens, int64_t hidden, int64_t k,
                            bool fp8) {
  if (num_experts > kMaxExperts || ranks > kMaxRanks || k > kMaxTopk)
    return rt::str("the GPU low-latency path takes at most ", kMaxExperts, " experts, ", kMaxRanks, " ranks and top-",
                   kMaxTopk, " (got ", num_experts, ", ", ranks, " and top-", k, ")");
  const int64_t dispatch = int64_t(num_experts) * max_tokens * record_bytes(hidden, fp8);
  const int64_t combine = int64_t(max_tokens) * k * hidden * 2;
  const int64_t need = std::max(dispatch, combine);
  if (need <= plane.ll_stage_bytes()) return "";
  return rt::str("the device window (", plane.window().bytes(), " bytes per rank, num_nvl_bytes + num_rdma_bytes) is ",
                 "too small: low-latency calls with max_tokens_per_rank=", max_tokens, ", hidden=", hidden, ", ",
                 num_experts, " experts and top-", k, " stage ", need, " bytes in each of two alternating halves, and ",
                 "a half holds ", plane.ll_stage_bytes(), " (Buffer::low_latency_size_hint gives the size)");
}

LowLatencyDispatchResult ll_dispatch_on_device(const LowLatencyCall& call, const rt::Tensor& x, const rt::Tensor& topk_idx,
                                               std::shared_ptr<LowLatencyHandle> handle, bool use_fp8) {
  using rt::DType;
  DevicePlane& plane = *call.plane;
  const int R = plane.size(), num_experts = handle->num_experts, Le = num_experts / R;
  const int max_tokens_per_rank = handle->max_tokens_per_rank;
  const int64_t T = handle->num_tokens, H = handle->hidden, K = handle->num_topk, M = int64_t(R) * max_tokens_per_rank;
  handle->topk_idx = plane.pool().empty({T, K}, DType::I64);
  handle->recv_src_info = plane.pool().empty({Le, M}, DType::I32);
  handle->recv_src_slot = plane.pool().empty({Le, M}, DType::I32);
  handle->recv_layout_range = plane.pool().empty({Le, R}, DType::I64);
  LowLatencyDispatchResult out;
  out.recv_x = plane.pool().empty({Le, M, H}, use_fp8 ? DType::F8E4M3 : DType::BF16);
  if (use_fp8) out.recv_x_scales = plane.pool().empty({Le, M, H / 128}, DType::F32);
  out.recv_count = plane.pool().empty({Le}, DType::I32);
  out.handle = handle;

  const int64_t rec = record_bytes(H, use_fp8);
  plane.ll_dispatch_send(address(x), T, H, address(topk_idx), topk_idx.dtype() == DType::I64, int(K), num_experts,
                         use_fp8, max_tokens_per_rank, rec, address(handle->topk_idx));
  plane.mark("send");
  // The sources stay referenced until the receive has run (the hook may run it much later).
  auto receive = [&plane, x, topk_idx, handle, recv_x = out.recv_x, recv_s = out.recv_x_scales,
                  recv_count = out.recv_count, Le, H, K, rec, use_fp8, max_tokens_per_rank](bool after_send) {
    plane.ll_dispatch_recv(Le, max_tokens_per_rank, H, use_fp8, rec, address(recv_x), address(recv_s),
                           address(recv_count), address(handle->recv_layout_range), address(handle->recv_src_info),
                           address(handle->recv_src_slot), int(K), after_send);
    finish_receive(plane, "low_latency_dispatch");
  };
  out.hook = receive_now_or_later(call, std::move(receive), "low_latency_dispatch");
  return out;
}

LowLatencyCombineResult ll_combine_on_device(const LowLatencyCall& call, const rt::Tensor& x, const rt::Tensor& topk_idx,
                                             const rt::Tensor& topk_weights, const LowLatencyHandle& handle) {
  using rt::DType;
  DevicePlane& plane = *call.plane;
  const int R = plane.size(), Le = handle.num_experts / R;
  const int64_t T = handle.num_tokens, H = handle.hidden, K = handle.num_topk;
  LowLatencyCombineResult out;
  out.combined_x = plane.pool().empty({T, H}, DType::BF16);
  plane.ll_combine_send(address(x), H, Le, handle.max_tokens_per_rank, address(handle.recv_layout_range),
                        address(handle.recv_src_slot));
  plane.mark("send");
  auto receive = [&plane, x, topk_idx, topk_weights, routing = handle.topk_idx, result = out.combined_x, T, H,
                  K](bool after_send) {
    plane.ll_combine_recv(T, H, int(K), address(routing), address(topk_idx), topk_idx.dtype() == DType::I64,
                          address(topk_weights), address(result), after_send);
    finish_receive(plane, "low_latency_combine");
  };
  out.hook = receive_now_or_later(call, std::move(receive), "low_latency_combine");
  return out;
}

}  // namespace deepep::detail
