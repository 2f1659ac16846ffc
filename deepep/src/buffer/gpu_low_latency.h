// Low-latency dispatch and combine of CUDA tensors on the cuda_ipc data plane, after the
// agreement (low_latency.cc checks the inputs and agrees on the call; the values of topk_idx are
// checked by the kernels). No host barrier: the kernels signal each other through the windows
// (kernels/low_latency.cuh), so a call is the send kernel, then the receive kernel and a wait for
// it, now or when the hook is called. On a user stream (Buffer::set_low_latency_stream) there is
// neither the agreement nor the wait: the kernels are queued and the call returns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "deepep/buffer.h"

namespace deepep {

class DevicePlane;
class Engine;

namespace detail {

// "" when a half of the plane's window (DevicePlane::ll_stage_bytes) holds the staging a low-latency
// call on the device needs (of the dispatch, then of the combine), else the error.
std::string ll_window_error(const DevicePlane& plane, int ranks, int num_experts, int max_tokens, int64_t hidden, int64_t k,
                            bool fp8);

// Raises the errors the receive kernels recorded (a rank whose data never came, invalid top-k
// indices, a combine's topk_idx differing from its dispatch's) and clears them. After a
// synchronous call they are its own; on a user stream, those of the calls the stream has run.
void ll_check_status(DevicePlane& plane, const char* what);

struct LowLatencyCall {
  DevicePlane* plane = nullptr;
  Engine* engine = nullptr;
  std::weak_ptr<bool> alive;  // the Buffer still exists (for hooks)
  bool return_recv_hook = false;
};

// `handle` comes with the call's fields set (id, sizes); the device tensors are added here.
LowLatencyDispatchResult ll_dispatch_on_device(const LowLatencyCall& call, const rt::Tensor& x, const rt::Tensor& topk_idx,
                                               std::shared_ptr<LowLatencyHandle> handle, bool use_fp8);
LowLatencyCombineResult ll_combine_on_device(const LowLatencyCall& call, const rt::Tensor& x, const rt::Tensor& topk_idx,
                                             const rt::Tensor& topk_weights, const LowLatencyHandle& handle);

}  // namespace detail
}  // namespace deepep
