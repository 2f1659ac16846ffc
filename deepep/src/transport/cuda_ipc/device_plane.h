// The cuda_ipc data plane of a communicator: the device windows (IpcWindow), a private stream (the
// communication stream) and the kernels of kernels/intranode.cuh, JIT-compiled per device. The
// collectives of CUDA tensors (collectives/gpu_collectives.cc) run as phases: kernels on the stream
// with a device_barrier() between them, so every rank's writes into the windows are complete before
// anyone reads, and no host step sits between the phases. Normal-mode dispatch and combine
// (buffer/gpu_dispatch.cc) signal each other through the windows too and may return before their
// kernels have run (an Event). The stream synchronizes with the legacy default stream, where
// rt::Tensor's copies run.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "deepep/event.h"
#include "deepep/kernels/normal_layout.h"
#include "deepep/kernels/signal_layout.h"
#include "deepep/transport.h"
#include "engine/tensor_pool.h"
#include "rt/cuda_memory.h"
#include "rt/cuda_module.h"
#include "rt/cuda_stream.h"
#include "rt/dtype.h"
#include "rt/embedded_file.h"
#include "rt/error.h"
#include "transport/cuda_ipc/ipc_window.h"

namespace deepep {

class Engine;
// One kernel of kernels/<header>: extern "C" name(params) { body }, compiled with
// device_kernel_headers() (below). The nccl plane's dispatch and combine build theirs the same way.
struct KernelText {
  std::string name, params, body;
  std::string header = "intranode.cuh";
  int min_blocks = 1;  // blocks per SM the registers must allow (__launch_bounds__)
  std::string source() const {
    return rt::str("#include \"deepep/kernels/", header, "\"\nusing namespace deepep::kernels;\n",
                   "extern \"C\" __global__ void __launch_bounds__(256, ", min_blocks, ") ", name, "(", params,
                   ") {\n  ", body, "\n}\n");
  }
};

// The kernels' name of a dtype's element type (intranode.cuh: float, bf16_t, f16_t, double, int,
// long long); null for the others.
const char* kernel_element_type(rt::DType dtype);

// Mirrors of the kernels' structures (kernels/intranode.cuh), laid out identically.
struct CopyDesc {
  uint64_t dst, src;
  int64_t bytes;
};
// One normal-mode operation's signalling (kernels/intranode.cuh "normal-mode signalling"), for at
// most kernels::kNormalMaxRanks ranks.
struct NormalSignals {
  uint64_t windows;  // the window table
  int64_t signal_offset;
  int32_t ranks, me;
  uint64_t seq, prev;
  uint64_t op;
  uint64_t timeout_ns;
  uint64_t status;  // the status words (page-locked host memory)
};

namespace detail {
// What an Event of device work holds (deepep/event.h).
struct EventState {
  explicit EventState(int device) : event(device, false) {}
  rt::CudaEvent event;
  std::function<void()> check;  // after completion: raises the errors the work's kernels reported
};
}  // namespace detail

// Small per-operation tables (send lists, regions, offsets) gathered on the host and uploaded in
// one copy before the kernels that read them.
class DeviceTables {
 public:
  // Appends `bytes` of `data` (16-byte aligned); returns its offset.
  int64_t add(const void* data, size_t bytes);
  template <class T>
  int64_t add(const std::vector<T>& v) {
    return add(v.data(), v.size() * sizeof(T));
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class DevicePlane {
 public:
  // Collective over the group.
  DevicePlane(Group& group, Engine& engine, int device, int64_t window_bytes);
  ~DevicePlane();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return window_.device(); }
  const IpcWindow& window() const { return window_; }
  rt::CuStream stream() const { return stream_.handle(); }

  // Uploads `tables` in stream order (kernels queued before still read the previous ones); returns
  // the device address of offset 0.
  uint64_t upload(const DeviceTables& tables);
  // Queues a barrier of every rank's stream (kernels/intranode.cuh: device_barrier_body): the work
  // queued after it on any rank starts once every rank's work queued before it is done. A rank that
  // does not come within the communicator's timeout gives the others the device timeout (the
  // kernels after it do nothing; finish() or check_signals() raises it). Numbered within the
  // operation of the engine's current agreement, so every rank of a collective calls it equally often.
  void device_barrier();
  void sync();
  // Runs before every agreement of the communicator (Comm sets the engine's hook): waits for the
  // low-latency calls queued on a user stream and notes the window operation; unless the coming
  // operation is a normal-mode dispatch or combine of CUDA tensors (next_agreement_signalled), which
  // orders itself after the earlier ones on the device, waits for this rank's stream: the others
  // assume no kernel of any rank still uses the windows when their agreement is reached. Then
  // raises what the finished normal-mode kernels reported.
  void before_agreement();
  void next_agreement_signalled() { signalled_next_ = true; }

  // Normal-mode dispatch and combine (kernels/intranode.cuh "normal-mode signalling"). The
  // signalling of the operation whose agreement is the engine's `agreement`-th (the same number on
  // every rank); normal_op_received(sig) once its receive is queued (the next operation's `prev`).
  NormalSignals normal_signals(uint64_t agreement);
  void normal_op_received(const NormalSignals& sig) { normal_seq_ = sig.seq; }
  // Whether every rank's earlier work on the windows is done or ordered by the normal-mode signals,
  // so that a dispatch's scatter may go before its own agreement: after a normal-mode dispatch's or
  // combine's agreement, or a barrier (Comm::barrier: every rank drained its stream before it, and
  // it queues nothing). After any other operation (a collective, low latency: their kernels may
  // still run on a peer after it returns) only the next agreement orders window reuse.
  bool windows_ordered_by_signals() const { return windows_ordered_; }
  void note_barrier() { windows_ordered_ = true; }
  // Bytes of each rank's region of a window (kernels/normal_layout.h).
  int64_t region_bytes() const { return kernels::region_bytes(window_.bytes(), size_); }
  // The stream waits for `event` (nothing for a complete one) before the work queued next.
  void wait_event(const Event& event);
  // The end of an operation whose kernels are queued: with `async`, an Event recorded on the stream
  // (`inputs` are kept alive until the stream has run it); else waits for the stream, raises what
  // the kernels reported and returns a complete Event.
  Event finish(bool async, std::vector<rt::Tensor> inputs, const char* what);
  // An Event recorded on the stream now; `inputs` are kept alive until the stream has run it.
  Event track(std::vector<rt::Tensor> inputs, const char* what);
  // Raises (a CommError, breaking the communicator) a rank whose flag did not come, if a finished
  // normal-mode kernel reported one -- and from then on at every call.
  void check_signals(const std::string& what);
  // A local failure after an operation was numbered: breaks the communicator (its cause published,
  // or a peer's earlier one raised) -- the ranks' numbering would no longer agree.
  [[noreturn]] void fail(const std::string& what, const std::string& error);
  // Outputs of the device operations (a caching pool on this device).
  TensorPool& pool() { return pool_; }

  // DEEPEP_PROFILE=1: an operation marks "start", then the end of each phase; report() prints the host time of
  // every phase on stderr (one line per operation and rank), and in brackets the time between the
  // events recorded on the stream at the marks (the device's share), and starts over.
  void mark(const char* phase);
  void report(const char* operation);

  // The kernels. Pointers are device addresses; tables are at upload()'s address plus offsets.
  void multi_copy(uint64_t descs, int count, int64_t max_bytes);
  // kernels/intranode.cuh's dispatch_route_body: slots [tokens, size] int32, order [size, tokens]
  // int32, in_rank [tokens, size] bool, summary [2 size + 1 + experts] int64. Returns where the
  // kernel leaves the summary's host copy and, with want_mask, in_rank a bit per token (host_mask),
  // to be read once wait_route() returns (valid until the next routing).
  struct HostRoute {
    const int64_t* summary;
    const uint32_t* mask;  // [size][ceil(tokens / 32)] words; null unless asked for
  };
  HostRoute dispatch_route(uint64_t topk, bool topk_i64, int64_t tokens, int k, int experts, uint64_t slots,
                           uint64_t order, uint64_t in_rank, uint64_t summary, bool want_mask);
  void wait_route() { routed_.synchronize(); }
  // The normal-mode kernels (intranode.cuh): each signals as `sig` says (every rank launches all
  // four, with or without rows, so that every flag is raised). `summary`: the dispatch's counts
  // (dispatch_route; a handle's device_counts), `order` its tokens per destination in slot order,
  // rows placed in the window regions as `rows` says.
  void dispatch_scatter(uint64_t x, uint64_t scales, uint64_t topk, bool topk_i64, int k, uint64_t weights,
                        uint64_t order, int64_t tokens, uint64_t summary, const kernels::RegionRows& rows,
                        int experts_per_rank, const NormalSignals& sig);
  // Every source's rows into `out` (this rank's own from x), chunk by chunk as they arrive: queued
  // right after the scatter, it overlaps it (sm_90+; not under DEEPEP_PROFILE, whose events come
  // between them, nor with DEEPEP_OVERLAP_RECEIVE=0). max_chunks: the most chunks of a source.
  void dispatch_receive(uint64_t x, uint64_t scales, uint64_t topk, bool topk_i64, int k, uint64_t weights,
                        uint64_t order, int64_t tokens, uint64_t summary, const kernels::ArrayAddresses& out,
                        const kernels::RegionRows& rows, int64_t max_chunks, int experts_per_rank,
                        const NormalSignals& sig);
  void combine_scatter(uint64_t x, uint64_t weights, int k, uint64_t summary, const kernels::RegionRows& rows,
                       const NormalSignals& sig);
  // Queued right after the combine's scatter, it overlaps it as dispatch_receive does, reducing each
  // token once its rows' chunks are there.
  void combine_reduce(rt::DType dtype, uint64_t out, int64_t hidden, uint64_t slots, uint64_t summary,
                      const kernels::RegionRows& rows, int64_t tokens, uint64_t out_w, int k, const NormalSignals& sig);
  // The low-latency kernels (kernels/low_latency.cuh), which signal each other through the
  // windows' signal areas instead of host barriers and number the operations on the device, so
  // they need no host step between them. They run on ll_stream(): the plane's stream, or the one
  // set by set_ll_stream (Buffer::set_low_latency_stream: calls queued there without waiting).
  void set_ll_stream(rt::CuStream stream) { ll_stream_ = stream; }
  // Buffer::set_num_sms: the SMs the normal-mode kernels are sized for (0: every SM).
  void set_num_sms(int num_sms) { num_sms_ = num_sms; }
  void reset_ll_stream() { ll_stream_.reset(); }
  bool ll_on_user_stream() const { return ll_stream_.has_value(); }
  rt::CuStream ll_stream() const { return ll_stream_ ? *ll_stream_ : stream(); }
  void ll_sync();  // waits for ll_stream()
  // Why the calls queued on a user stream can no longer run ("" while they can): a rank's call that
  // raised before queueing its kernels left its device-counted sequence behind its peers'.
  const std::string& ll_broken() const { return ll_broken_; }
  void set_ll_broken(std::string why) { ll_broken_ = std::move(why); }
  // Another operation used the windows since the last call of take_window_operation (the engine
  // marks every agreement): the next queued low-latency call agrees with its peers first.
  void note_window_operation() { window_operation_ = true; }
  bool take_window_operation() { return std::exchange(window_operation_, false); }
  // Bytes of one of the two alternating stagings in the window (ll_stage in the kernels).
  int64_t ll_stage_bytes() const { return window_.signal_offset() / 2 / 256 * 256; }
  // The receive kernels' status words: page-locked host memory the kernels write on an error
  // ([0, 3) the low-latency ones, kernels/low_latency.cuh; [3] the normal mode's, intranode.cuh).
  int32_t* status_words();
  // Status word `word`'s value, cleared unless a kernel queued on a stream wrote it since it was read.
  int32_t take_status(int word);
  void ll_dispatch_send(uint64_t x, int64_t tokens, int64_t hidden, uint64_t topk, bool topk_i64, int k, int experts,
                        bool fp8, int64_t max_tokens, int64_t rec_bytes, uint64_t topk_copy);
  // The receives with `after_send` (queued right after their send kernel, no hook in between) start
  // while the send still runs (rt::CudaKernel::launch_overlapping): they wait for its flags anyway.
  void ll_dispatch_recv(int local_experts, int64_t max_tokens, int64_t hidden, bool fp8, int64_t rec_bytes,
                        uint64_t recv_x, uint64_t recv_scales, uint64_t recv_count, uint64_t layout_range,
                        uint64_t src_info, uint64_t src_slot, int k, bool after_send);
  void ll_combine_send(uint64_t x, int64_t hidden, int local_experts, int64_t max_tokens, uint64_t layout_range,
                       uint64_t src_slot);
  void ll_combine_recv(int64_t tokens, int64_t hidden, int k, uint64_t routing, uint64_t topk, bool topk_i64,
                       uint64_t weights, uint64_t out, bool after_send);
  // kernels/intranode.cuh's reduce_part_body (the phased collectives' reduction); op: 0 sum, 1 max,
  // 2 min; out_off < 0: no push.
  void reduce_part(rt::DType dtype, int op, uint64_t mine, uint64_t out, int64_t count, int64_t in_off,
                   int64_t in_stride, int64_t out_off);
  // kernels/intranode.cuh's all_reduce_body: the whole all-reduce of `count` elements at `data` in
  // one kernel, for a tensor the windows hold at once (parts of `part` elements, source regions
  // `stride` bytes apart, the results at `out_off` of every window).
  void all_reduce(rt::DType dtype, int op, uint64_t data, int64_t count, int64_t part, int64_t stride,
                  int64_t out_off);

 private:
  rt::CudaKernel kernel(const KernelText& text);  // compiled and loaded once per plane
  uint64_t timeout_ns() const;                     // the communicator's bound on waiting for a peer
  uint64_t gave_up_word() const;                   // this rank's kNormalGaveUp word (device address)
  unsigned ll_blocks_per_expert(int local_experts) const;

  Engine& engine_;
  int rank_ = 0;
  int size_ = 0;
  IpcWindow window_;
  rt::CudaStream stream_;
  rt::CuDevicePtr tables_ = 0;
  int64_t tables_capacity_ = 0;
  // Page-locked staging of the small copies (the collectives' tables up):
  // pageable copies go through the driver's own staging and cost more than the kernels around them.
  rt::PinnedBuffer up_, status_;
  rt::PinnedBuffer routed_host_;        // the routing's summary, written by its kernel
  rt::CuDevicePtr route_scratch_ = 0;   // the routing's flags and counters (zero between calls)
  int64_t route_scratch_words_ = 0;
  rt::CudaEvent uploaded_;    // after the last upload's copy out of up_
  rt::CudaEvent routed_;      // after the last routing kernel
  TensorPool pool_;
  std::string device_failure_;  // the first normal-mode wait that timed out ("": none)
  bool profile_ = false;
  bool overlap_receive_ = true;  // DEEPEP_OVERLAP_RECEIVE=0: a receive waits for its scatter's end
  std::vector<std::string> jit_flags_;  // DEEPEP_JIT_FLAGS: more NVRTC options for the kernels (experiments)
  int num_sms_ = 0;                     // set_num_sms
  int64_t normal_sms() const;           // the SMs the normal-mode kernels are sized for
  std::optional<rt::CuStream> ll_stream_;
  int32_t* status_words_ = nullptr;  // in status_, zeroed once
  uint64_t normal_seq_ = 0;          // the last normal-mode operation with a receive queued
  uint64_t barrier_agreement_ = 0;   // device_barrier: the operation its count is of,
  uint64_t barriers_in_op_ = 0;      // and the barriers queued in it so far
  bool signalled_next_ = false;
  bool windows_ordered_ = false;
  // Async normal-mode operations the stream may not have run yet, oldest first, with their inputs.
  std::deque<std::pair<std::shared_ptr<const detail::EventState>, std::vector<rt::Tensor>>> in_flight_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // Events' checks see the plane still exists
  std::string ll_broken_;
  bool window_operation_ = true;  // a new plane: its windows' first queued call agrees first
  std::vector<std::pair<const char*, int64_t>> marks_;  // phase, steady-clock ns
  std::vector<rt::CudaEvent> mark_events_;               // one per mark, reused
  std::map<std::string, rt::CudaKernel> kernels_;        // by kernel name
};

// Every kernel the plane compiles, as (name, NVRTC source), and the headers they include: what the
// CPU-only tests compile for sm_90a.
std::vector<std::pair<std::string, std::string>> device_kernel_sources();
const std::vector<rt::EmbeddedFile>& device_kernel_headers();

}  // namespace deepep
