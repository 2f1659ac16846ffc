#include "transport/cuda_ipc/device_plane.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>

#include "deepep/group.h"
#include "engine/engine.h"
#include "rt/cuda_device.h"
#include "rt/cuda_memory.h"
#include "rt/env.h"
#include "rt/error.h"
#include "rt/jit_kernel.h"

const rt::EmbeddedFile* deepep_kernels_embedded_files(std::size_t* count);

namespace deepep {

static_assert(sizeof(CopyDesc) == 24 && sizeof(NormalSignals) == 64,
              "the mirrors of kernels/intranode.cuh's structures");

static_assert(kernels::kSignalWords * 8 <= IpcWindow::kSignalBytes, "the signal words fit the signal area");

const std::vector<rt::EmbeddedFile>& device_kernel_headers() {
  static const std::vector<rt::EmbeddedFile> headers = [] {
    size_t n = 0;
    const rt::EmbeddedFile* files = deepep_kernels_embedded_files(&n);
    return std::vector<rt::EmbeddedFile>(files, files + n);
  }();
  return headers;
}

const char* kernel_element_type(rt::DType dtype) {
  switch (dtype) {
    case rt::DType::F32: return "float";
    case rt::DType::BF16: return "bf16_t";
    case rt::DType::F16: return "f16_t";
    case rt::DType::F64: return "double";
    case rt::DType::I32: return "int";
    case rt::DType::I64: return "long long";
    default: return nullptr;
  }
}

namespace {

const char* accumulator_type(rt::DType dtype) {
  switch (dtype) {
    case rt::DType::F64: return "double";
    case rt::DType::I32: return "int";
    case rt::DType::I64: return "long long";
    default: return "float";
  }
}

constexpr unsigned kThreads = 256;

unsigned grid_for(int device, int64_t work_items, int64_t items_per_block) {
  const int64_t cap = int64_t(rt::cuda_device(device).sm_count) * 8;
  return unsigned(std::clamp<int64_t>((work_items + items_per_block - 1) / items_per_block, 1, cap));
}

KernelText multi_copy_text() {
  return {"deepep_multi_copy", "const CopyDesc* d, const u64* gave_up", "multi_copy_body(d, gave_up);"};
}

KernelText device_barrier_text() { return {"deepep_device_barrier", "NormalSignals sig", "device_barrier_body(sig);"}; }

KernelText dispatch_route_text(bool topk_i64) {
  const char* index = topk_i64 ? "i64" : "int";
  return {rt::str("deepep_dispatch_route_", topk_i64 ? "i64" : "i32"),
          rt::str("const ", index, "* topk, i64 tokens, int k, int experts, int experts_per_rank, int ranks, ",
                  "unsigned char* in_rank, int* slots, int* order, i64* summary, i64* host, u64* scratch, ",
                  "unsigned* host_mask"),
          "dispatch_route_body(topk, tokens, k, experts, experts_per_rank, ranks, in_rank, slots, order, summary, host, "
          "scratch, host_mask);"};
}

// The dispatch's scatter and receive read the same inputs (the receive moves the own rows).
constexpr const char* kDispatchInputs =
    "const unsigned char* x, const unsigned char* scales, const void* topk, int topk_i64, int k, "
    "const float* weights, const int* order, i64 tokens, ";

// The normal-mode scatters and the dispatch's receive take at most 80 registers (three blocks per
// SM; ptxas spills a few bytes in the dispatch's): the scatter's two blocks per SM and the
// receive's one fit beside each other (DevicePlane::dispatch_scatter).
KernelText dispatch_scatter_text() {
  return {"deepep_dispatch_scatter",
          rt::str(kDispatchInputs, "const i64* summary, RegionRows rows, i64 region, int experts_per_rank, ",
                  "NormalSignals sig"),
          "dispatch_scatter_body(x, scales, topk, topk_i64, k, weights, order, tokens, summary, rows, region, sig, "
          "experts_per_rank);",
          "intranode.cuh", 3};
}

KernelText dispatch_receive_text() {
  return {"deepep_dispatch_receive",
          rt::str(kDispatchInputs, "const unsigned char* window, i64* summary, ArrayAddresses out, RegionRows rows, ",
                  "i64 region, int experts_per_rank, i64 max_chunks, NormalSignals sig"),
          "dispatch_receive_body(x, scales, topk, topk_i64, k, weights, order, tokens, window, summary, out, rows, "
          "region, sig, experts_per_rank, max_chunks);\n  normal_recv_end(sig);",
          "intranode.cuh", 3};
}

KernelText combine_scatter_text() {
  return {"deepep_combine_scatter",
          "const unsigned char* x, const float* weights, int k, const i64* summary, RegionRows rows, i64 region, "
          "NormalSignals sig",
          "combine_scatter_body(x, weights, k, summary, rows, region, sig);", "intranode.cuh", 3};
}

KernelText combine_reduce_text(rt::DType dtype) {
  const char* t = kernel_element_type(dtype);
  RT_ICHECK(dtype == rt::DType::F32 || dtype == rt::DType::BF16 || dtype == rt::DType::F16, "combine_reduce of ",
            rt::name(dtype));
  return {rt::str("deepep_combine_reduce_", rt::name(dtype)),
          rt::str(t, "* out, const unsigned char* window, i64 hidden, const int* slot, const i64* summary, ",
                  "RegionRows rows, i64 region, i64 tokens, float* out_w, int k, NormalSignals sig"),
          "combine_reduce_body(out, window, hidden, slot, summary, rows, region, tokens, out_w, k, sig);\n"
          "  normal_recv_end(sig);",
          "intranode.cuh", 5};  // 48 registers (no spills): two blocks per SM beside the scatter's two
}

KernelText reduce_part_text(rt::DType dtype, int op) {
  const char* t = kernel_element_type(dtype);
  RT_ICHECK(t != nullptr && op >= 0 && op <= 2, "reduce_part of ", rt::name(dtype), " op ", op);
  return {rt::str("deepep_reduce_part_", rt::name(dtype), "_", op),
          rt::str("const u64* windows, const ", t, "* mine, ", t,
                  "* out, i64 count, i64 in_off, i64 in_stride, i64 out_off, int ranks, int me, const u64* gave_up"),
          rt::str("reduce_part_body<", t, ", ", accumulator_type(dtype), ", ", op,
                  ">(windows, mine, out, count, in_off, in_stride, out_off, ranks, me, gave_up);")};
}

KernelText all_reduce_text(rt::DType dtype, int op) {
  const char* t = kernel_element_type(dtype);
  RT_ICHECK(t != nullptr && op >= 0 && op <= 2, "all_reduce of ", rt::name(dtype), " op ", op);
  return {rt::str("deepep_all_reduce_", rt::name(dtype), "_", op),
          rt::str(t, "* data, i64 count, i64 part, i64 stride, i64 out_off, NormalSignals sig"),
          rt::str("all_reduce_body<", t, ", ", accumulator_type(dtype), ", ", op,
                  ">(data, count, part, stride, out_off, sig);"),
          "intranode.cuh", 2};  // two blocks per SM (DevicePlane::all_reduce)
}

const char* index_type(bool i64) { return i64 ? "i64" : "int"; }
const char* index_name(bool i64) { return i64 ? "i64" : "i32"; }

KernelText ll_dispatch_send_text(bool topk_i64) {
  return {rt::str("deepep_ll_dispatch_send_", index_name(topk_i64)),
          rt::str("const unsigned short* x, i64 tokens, i64 hidden, const ", index_type(topk_i64), "* topk, int k, ",
                  "int experts, int ranks, int me, int fp8, i64 max_tokens, i64 rec_bytes, const u64* windows, ",
                  "i64 signal_offset, i64* topk_copy"),
          "ll_dispatch_send_body(x, tokens, hidden, topk, k, experts, ranks, me, fp8, max_tokens, rec_bytes, windows, "
          "signal_offset, topk_copy);",
          "low_latency.cuh"};
}

KernelText ll_dispatch_recv_text() {
  return {"deepep_ll_dispatch_recv",
          "const unsigned char* window, const u64* signals, int ranks, i64 max_tokens, i64 hidden, int fp8, "
          "i64 rec_bytes, u64 timeout_ns, unsigned char* recv_x, float* recv_scales, int* recv_count, "
          "i64* layout_range, int* src_info, int* src_slot, int k, volatile int* status",
          "ll_dispatch_recv_body(window, signals, ranks, max_tokens, hidden, fp8, rec_bytes, timeout_ns, recv_x, "
          "recv_scales, recv_count, layout_range, src_info, src_slot, k, status);",
          "low_latency.cuh"};
}

KernelText ll_combine_send_text() {
  return {"deepep_ll_combine_send",
          "const unsigned char* x, i64 hidden, int ranks, int me, i64 max_tokens, const i64* layout_range, "
          "const int* src_slot, const u64* windows, i64 signal_offset",
          "ll_combine_send_body(x, hidden, ranks, me, max_tokens, layout_range, src_slot, windows, signal_offset);",
          "low_latency.cuh"};
}

KernelText ll_combine_recv_text(bool topk_i64) {
  return {rt::str("deepep_ll_combine_recv_", index_name(topk_i64)),
          rt::str("const unsigned char* window, const u64* signals, int ranks, i64 tokens, i64 hidden, int k, ",
                  "const i64* routing, const ", index_type(topk_i64), "* topk, const float* weights, ",
                  "unsigned short* out, u64 timeout_ns, volatile int* status"),
          "ll_combine_recv_body(window, signals, ranks, tokens, hidden, k, routing, topk, weights, out, timeout_ns, "
          "status);",
          "low_latency.cuh",
          4};  // its grid is about four blocks per SM (ll_combine_recv): one wave at 64 registers, not 65
}

constexpr rt::DType kReducible[] = {rt::DType::F32, rt::DType::BF16, rt::DType::F16,
                                    rt::DType::F64, rt::DType::I32,  rt::DType::I64};

}  // namespace

std::vector<std::pair<std::string, std::string>> device_kernel_sources() {
  std::vector<KernelText> all = {multi_copy_text(), device_barrier_text(), dispatch_route_text(false),
                                 dispatch_route_text(true),
                                 dispatch_scatter_text(), dispatch_receive_text(),
                                 combine_scatter_text()};
  for (rt::DType d : {rt::DType::F32, rt::DType::BF16, rt::DType::F16}) all.push_back(combine_reduce_text(d));
  for (bool i64 : {false, true}) {
    all.push_back(ll_dispatch_send_text(i64));
    all.push_back(ll_combine_recv_text(i64));
  }
  all.push_back(ll_dispatch_recv_text());
  all.push_back(ll_combine_send_text());
  for (rt::DType d : kReducible)
    for (int op = 0; op < 3; ++op) {
      all.push_back(reduce_part_text(d, op));
      all.push_back(all_reduce_text(d, op));
    }
  std::vector<std::pair<std::string, std::string>> out;
  for (const KernelText& k : all) out.emplace_back(k.name, k.source());
  return out;
}

int64_t DeviceTables::add(const void* data, size_t bytes) {
  const int64_t at = int64_t((bytes_.size() + 15) / 16 * 16);
  bytes_.resize(size_t(at) + bytes);
  if (bytes) std::copy_n(static_cast<const uint8_t*>(data), bytes, bytes_.begin() + at);
  return at;
}

DevicePlane::DevicePlane(Group& group, Engine& engine, int device, int64_t window_bytes)
    : engine_(engine), rank_(group.rank()), size_(group.size()), window_(group, device, window_bytes),
      stream_(device), up_(device), status_(device), routed_host_(device), uploaded_(device, false),
      routed_(device, false),
      pool_(rt::Device::cuda(device)), profile_(rt::env_int("DEEPEP_PROFILE", 0) != 0),
      overlap_receive_(rt::env_int("DEEPEP_OVERLAP_RECEIVE", 1) != 0),
      jit_flags_(rt::env_words("DEEPEP_JIT_FLAGS")) {}

DevicePlane::~DevicePlane() {
  // Async dispatches and combines may still run on the stream, and low-latency calls queued on a
  // user stream write into the windows and the status words. The user's stream may be destroyed
  // already (its queued work still runs): wait on the context.
  try {
    stream_.synchronize();
    if (ll_stream_) {
      rt::cuda_context(device());
      rt::cuda_driver().cuCtxSynchronize();
    }
  } catch (...) {  // a broken context: nothing is left to wait for
  }
  rt::cuda_free(device(), tables_);
  rt::cuda_free(device(), route_scratch_);
}

uint64_t DevicePlane::upload(const DeviceTables& tables) {
  const int64_t n = int64_t(tables.bytes().size());
  if (n > tables_capacity_) {
    sync();  // kernels queued before may still read the old tables
    rt::cuda_free(device(), tables_);
    tables_capacity_ = std::max<int64_t>(n, 1 << 16);
    tables_ = rt::cuda_malloc(device(), size_t(tables_capacity_), "deepep device tables");
  }
  if (n) {
    // The collectives that upload tables wait for the stream before they return: at most one
    // upload is in flight.
    uploaded_.synchronize();
    unsigned char* staged = up_.reserve(size_t(n), "deepep device tables");
    std::copy_n(tables.bytes().data(), n, staged);
    const rt::CudaDriver& d = rt::cuda_driver();
    rt::cuda_context(device());
    RT_CU_CHECK(d.cuMemcpyHtoDAsync(tables_, staged, size_t(n), stream()), "cuMemcpyHtoDAsync", n, " bytes of tables");
    uploaded_.record(stream());
  }
  return tables_;
}

void DevicePlane::sync() {
  stream_.synchronize();
  in_flight_.clear();
}

void DevicePlane::before_agreement() {
  if (ll_stream_) ll_sync();
  note_window_operation();
  windows_ordered_ = std::exchange(signalled_next_, false);
  if (!windows_ordered_) sync();
  check_signals("an earlier dispatch or combine on the GPU");
}

NormalSignals DevicePlane::normal_signals(uint64_t agreement) {
  // 1 .. 2^32 - 1: flags keep 32 bits of the number, and a fresh signal area holds 0.
  const uint64_t seq = (agreement - 1) % 0xffffffffull + 1;
  return {window_.window_table(), window_.signal_offset(), size_, rank_, seq, normal_seq_, agreement, timeout_ns(),
          reinterpret_cast<uint64_t>(status_words())};
}

void DevicePlane::wait_event(const Event& event) { event.stream_wait(stream()); }

Event DevicePlane::finish(bool async, std::vector<rt::Tensor> inputs, const char* what) {
  if (async) return track(std::move(inputs), what);
  sync();
  check_signals(what);
  return Event();
}

Event DevicePlane::track(std::vector<rt::Tensor> inputs, const char* what) {
  auto state = std::make_shared<detail::EventState>(device());
  state->event.record(stream());
  state->check = [alive = std::weak_ptr<int>(alive_), this, what = std::string(what)] {
    if (const auto plane_alive = alive.lock()) check_signals(what);
  };
  while (!in_flight_.empty() && in_flight_.front().first->event.query()) in_flight_.pop_front();
  in_flight_.emplace_back(state, std::move(inputs));
  return Event(std::move(state));
}

void DevicePlane::fail(const std::string& what, const std::string& error) {
  engine_.fail_peer_read(what, rt::str("deepep ", what, " (rank ", rank_, "): ", error));
}

void DevicePlane::check_signals(const std::string& what) {
  // Sticky: after a timeout every later kernel skips its work (kernels/intranode.cuh), so every
  // check from then on -- each event of work queued after it, every next call -- raises it.
  const int32_t late = take_status(kernels::kNormalTimedOut);
  if (late != 0 && device_failure_.empty())
    device_failure_ = rt::str("rank ", late - 1, "'s data did not arrive within the communicator's timeout (",
                              engine_.timeout().count(), " ms; dead or stuck?)");
  if (!device_failure_.empty()) engine_.fail_peer_read(what, rt::str(what, ": ", device_failure_));
}

// Names are unique per kernel text (dtype and op are in them), so launches look up a short name
// rather than building and comparing the generated source every time.
rt::CudaKernel DevicePlane::kernel(const KernelText& text) {
  auto it = kernels_.find(text.name);
  if (it == kernels_.end())
    it = kernels_.emplace(text.name, rt::jit_kernel(text.source(), text.name, device(), device_kernel_headers(),
                                                    jit_flags_)).first;
  return it->second;
}

int32_t* DevicePlane::status_words() {
  if (!status_words_) {
    status_words_ = reinterpret_cast<int32_t*>(status_.reserve(kernels::kStatusWords * 4, "deepep status words"));
    std::fill_n(status_words_, kernels::kStatusWords, 0);
  }
  return status_words_;
}

int32_t DevicePlane::take_status(int word) {
  int32_t* const w = status_words() + word;
  int32_t seen = __atomic_load_n(w, __ATOMIC_ACQUIRE);
  if (seen != 0) {
    const int32_t value = seen;
    __atomic_compare_exchange_n(w, &seen, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return value;
  }
  return 0;
}

void DevicePlane::ll_sync() {
  rt::cuda_context(device());
  RT_CU_CHECK(rt::cuda_driver().cuStreamSynchronize(ll_stream()), "cuStreamSynchronize", "deepep low-latency stream");
}

void DevicePlane::mark(const char* phase) {
  if (!profile_) return;
  if (std::string_view(phase) == "start") marks_.clear();  // an operation that failed left its marks
  marks_.emplace_back(phase, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch()).count());
  if (mark_events_.size() < marks_.size()) mark_events_.emplace_back(device());
  mark_events_[marks_.size() - 1].record(stream());
}

void DevicePlane::report(const char* operation) {
  if (!profile_ || marks_.empty()) return;
  std::string line = rt::str("deepep profile (rank ", rank_, ") ", operation, ":");
  mark_events_[marks_.size() - 1].synchronize();
  for (size_t i = 1; i < marks_.size(); ++i)
    line += rt::str(" ", marks_[i].first, " ", (marks_[i].second - marks_[i - 1].second) / 1000, " us [",
                    int64_t(rt::CudaEvent::elapsed_ms(mark_events_[i - 1], mark_events_[i]) * 1000), "]");
  std::fprintf(stderr, "%s (total %lld us)\n", line.c_str(),
               static_cast<long long>((marks_.back().second - marks_.front().second) / 1000));
  marks_.clear();
}

void DevicePlane::device_barrier() {
  if (size_ == 1) return;
  const uint64_t agreement = engine_.agreements();
  if (agreement != barrier_agreement_) {
    barrier_agreement_ = agreement;
    barriers_in_op_ = 0;
  }
  RT_ICHECK(++barriers_in_op_ < (uint64_t(1) << 24), "deepep: more than 2^24 device barriers in one operation");
  NormalSignals sig = normal_signals(agreement);
  sig.op = agreement << 24 | barriers_in_op_;  // grows from barrier to barrier (FlagMatch::kWholeOrLater)
  kernel(device_barrier_text()).launch_with({1, 1, 1}, {kThreads, 1, 1}, 0, stream(), sig);
}

uint64_t DevicePlane::gave_up_word() const {
  return window_.window(rank_) + uint64_t(window_.signal_offset() + kernels::kNormalGaveUp * 8);
}

void DevicePlane::multi_copy(uint64_t descs, int count, int64_t max_bytes) {
  if (count == 0 || max_bytes == 0) return;
  const rt::CudaKernel k = kernel(multi_copy_text());
  constexpr int64_t kPiece = 8 << 10;  // kernels::kCopyPiece
  const unsigned gx = grid_for(device(), (max_bytes + kPiece - 1) / kPiece, kThreads / 32);
  k.launch_with({gx, unsigned(count), 1}, {kThreads, 1, 1}, 0, stream(), descs, gave_up_word());
}

// One block per destination and chunk of kThreads tokens (at least one chunk: the last block writes
// the summary even when there are no tokens).
DevicePlane::HostRoute DevicePlane::dispatch_route(uint64_t topk, bool topk_i64, int64_t tokens, int k, int experts,
                                                   uint64_t slots, uint64_t order, uint64_t in_rank, uint64_t summary,
                                                   bool want_mask) {
  const int64_t chunks = std::max<int64_t>(1, (tokens + kThreads - 1) / kThreads);
  const int64_t words = size_ * chunks + experts + 2 + size_;  // dispatch_route_body's scratch
  if (route_scratch_words_ < words) {  // grown zeroed; the kernels leave it zeroed
    sync();  // a routing queued before may still use the old one
    rt::cuda_free(device(), route_scratch_);
    route_scratch_words_ = std::max<int64_t>(words, 4096);
    route_scratch_ = rt::cuda_malloc(device(), size_t(route_scratch_words_) * 8, "deepep routing scratch");
    rt::cuda_memset(device(), route_scratch_, 0, size_t(route_scratch_words_) * 8);
  }
  const int64_t summary_words = 2 * size_ + 1 + experts, mask_words = want_mask ? size_ * ((tokens + 31) / 32) : 0;
  int64_t* const host =
      reinterpret_cast<int64_t*>(routed_host_.reserve(size_t(summary_words * 8 + mask_words * 4), "deepep routing"));
  unsigned* const mask = want_mask ? reinterpret_cast<unsigned*>(host + summary_words) : nullptr;
  const int experts_per_rank = experts / size_;
  const rt::Dim3 grid{unsigned(chunks), unsigned(size_), 1};
  kernel(dispatch_route_text(topk_i64))
      .launch_with(grid, {kThreads, 1, 1}, 0, stream(), topk, tokens, k, experts, experts_per_rank, size_, in_rank,
                   slots, order, summary, reinterpret_cast<uint64_t>(host), route_scratch_,
                   reinterpret_cast<uint64_t>(mask));
  routed_.record(stream());
  return {host, mask};
}

// The scatter and the receive share the GPU (the receive overlaps the scatter, three blocks per SM
// at their registers; their shared memory is a few words per rank, so the SMs' shared memory size,
// set for the scatter, holds the receive too): two blocks per SM for the scatter, one wave whose
// blocks all start at once, and one for the receive beside them. A receive block past that would
// get room only as the scatter ends, and the chunks it was dealt would wait for it.
void DevicePlane::dispatch_scatter(uint64_t x, uint64_t scales, uint64_t topk, bool topk_i64, int k, uint64_t weights,
                                   uint64_t order, int64_t tokens, uint64_t summary, const kernels::RegionRows& rows,
                                   int experts_per_rank, const NormalSignals& sig) {
  const rt::CudaKernel kern = kernel(dispatch_scatter_text());
  const int topk_flag = topk_i64 ? 1 : 0;
  const int64_t region = region_bytes();
  const unsigned blocks = unsigned(normal_sms() * 2);
  kern.launch_with({blocks, 1, 1}, {kThreads, 1, 1}, 0, stream(), x, scales, topk, topk_flag, k, weights, order, tokens,
                   summary, rows, region, experts_per_rank, sig);
}

void DevicePlane::dispatch_receive(uint64_t x, uint64_t scales, uint64_t topk, bool topk_i64, int k, uint64_t weights,
                                   uint64_t order, int64_t tokens, uint64_t summary, const kernels::ArrayAddresses& out,
                                   const kernels::RegionRows& rows, int64_t max_chunks, int experts_per_rank,
                                   const NormalSignals& sig) {
  const rt::CudaKernel kern = kernel(dispatch_receive_text());
  const int topk_flag = topk_i64 ? 1 : 0;
  const uint64_t window = window_.window(rank_);
  const int64_t region = region_bytes();
  const unsigned blocks = unsigned(std::clamp<int64_t>(max_chunks * size_, 1, normal_sms()));
  const size_t shared = size_t(2 * size_) * 8;  // dispatch_receive_body's per-rank words
  if (overlap_receive_)
    kern.launch_overlapping_with({blocks, 1, 1}, {kThreads, 1, 1}, shared, stream(), x, scales, topk, topk_flag, k,
                                 weights, order, tokens, window, summary, out, rows, region, experts_per_rank,
                                 max_chunks, sig);
  else
    kern.launch_with({blocks, 1, 1}, {kThreads, 1, 1}, shared, stream(), x, scales, topk, topk_flag, k, weights, order,
                     tokens, window, summary, out, rows, region, experts_per_rank, max_chunks, sig);
}

void DevicePlane::combine_scatter(uint64_t x, uint64_t weights, int k, uint64_t summary,
                                  const kernels::RegionRows& rows, const NormalSignals& sig) {
  const rt::CudaKernel kern = kernel(combine_scatter_text());
  const int64_t region = region_bytes();
  const unsigned blocks = unsigned(normal_sms() * 2);  // as dispatch_scatter
  const size_t shared = size_t(size_ + 1) * 8;  // combine_scatter_body's per-rank words
  kern.launch_with({blocks, 1, 1}, {kThreads, 1, 1}, shared, stream(), x, weights, k, summary, rows, region, sig);
}

void DevicePlane::combine_reduce(rt::DType dtype, uint64_t out, int64_t hidden, uint64_t slots, uint64_t summary,
                                 const kernels::RegionRows& rows, int64_t tokens, uint64_t out_w, int k,
                                 const NormalSignals& sig) {
  const rt::CudaKernel kern = kernel(combine_reduce_text(dtype));
  // A warp per token, two blocks per SM beside the scatter's two (combine_reduce_text's
  // registers): a token's rows are a chain of dependent loads (flags, slots, rows), so the more
  // tokens in flight the better.
  const int64_t per_block = kThreads / 32;
  const unsigned blocks = unsigned(std::clamp<int64_t>((tokens + per_block - 1) / per_block, 1, normal_sms() * 2));
  const uint64_t window = window_.window(rank_);
  const int64_t region = region_bytes();
  const size_t shared = size_t(3 * size_) * 8;  // combine_reduce_body's per-rank words
  if (overlap_receive_)
    kern.launch_overlapping_with({blocks, 1, 1}, {kThreads, 1, 1}, shared, stream(), out, window, hidden, slots,
                                 summary, rows, region, tokens, out_w, k, sig);
  else
    kern.launch_with({blocks, 1, 1}, {kThreads, 1, 1}, shared, stream(), out, window, hidden, slots, summary, rows,
                     region, tokens, out_w, k, sig);
}

void DevicePlane::reduce_part(rt::DType dtype, int op, uint64_t mine, uint64_t out, int64_t count, int64_t in_off,
                              int64_t in_stride, int64_t out_off) {
  if (count <= 0) return;
  const rt::CudaKernel kern = kernel(reduce_part_text(dtype, op));
  const uint64_t windows = window_.window_table();
  kern.launch_with({grid_for(device(), count, kThreads * 4), 1, 1}, {kThreads, 1, 1}, 0, stream(), windows, mine, out,
                   count, in_off, in_stride, out_off, size_, rank_, gave_up_word());
}

// Two blocks per SM at most (its registers allow two; all_reduce_body's blocks wait for the same
// blocks of the other ranks, best all resident), as many as the flags allow, a block per 256
// elements of a part at least.
void DevicePlane::all_reduce(rt::DType dtype, int op, uint64_t data, int64_t count, int64_t part, int64_t stride,
                             int64_t out_off) {
  if (count <= 0) return;
  const rt::CudaKernel kern = kernel(all_reduce_text(dtype, op));
  const NormalSignals sig = normal_signals(engine_.agreements());  // the flags carry sig.op
  const int64_t resident = 2 * int64_t(rt::cuda_device(device()).sm_count);
  const int64_t blocks =
      std::clamp<int64_t>(std::min<int64_t>(resident, kernels::kReduceFlagWords / (2 * size_)), 1, (part + 255) / 256);
  kern.launch_with({unsigned(blocks), 1, 1}, {kThreads, 1, 1}, 0, stream(), data, count, part, stride, out_off, sig);
}

int64_t DevicePlane::normal_sms() const {
  const int64_t all = rt::cuda_device(device()).sm_count;
  return num_sms_ > 0 ? std::min<int64_t>(num_sms_, all) : all;
}

uint64_t DevicePlane::timeout_ns() const { return uint64_t(engine_.timeout().count()) * 1000000ull; }

// Blocks per local expert for the low-latency kernels that move rows: about two waves of the GPU.
unsigned DevicePlane::ll_blocks_per_expert(int local_experts) const {
  const int64_t want = int64_t(rt::cuda_device(device()).sm_count) * 2;
  return unsigned(std::clamp<int64_t>(want / std::max(local_experts, 1), 1, 64));
}

void DevicePlane::ll_dispatch_send(uint64_t x, int64_t tokens, int64_t hidden, uint64_t topk, bool topk_i64, int k,
                                   int experts, bool fp8, int64_t max_tokens, int64_t rec_bytes, uint64_t topk_copy) {
  const int fp8_flag = fp8 ? 1 : 0;
  kernel(ll_dispatch_send_text(topk_i64))
      .launch_with({unsigned(std::max<int64_t>(tokens, 1)), 1, 1}, {kThreads, 1, 1}, 0, ll_stream(), x, tokens, hidden,
                   topk, k, experts, size_, rank_, fp8_flag, max_tokens, rec_bytes, window_.window_table(),
                   window_.signal_offset(), topk_copy);
}

void DevicePlane::ll_dispatch_recv(int local_experts, int64_t max_tokens, int64_t hidden, bool fp8, int64_t rec_bytes,
                                   uint64_t recv_x, uint64_t recv_scales, uint64_t recv_count, uint64_t layout_range,
                                   uint64_t src_info, uint64_t src_slot, int k, bool after_send) {
  const uint64_t own = window_.window(rank_), signals = own + uint64_t(window_.signal_offset()),
                 timeout = timeout_ns(), status = reinterpret_cast<uint64_t>(status_words());
  const int fp8_flag = fp8 ? 1 : 0;
  const rt::CudaKernel kern = kernel(ll_dispatch_recv_text());
  const rt::Dim3 grid{unsigned(local_experts), ll_blocks_per_expert(local_experts), 1};
  if (after_send)
    kern.launch_overlapping_with(grid, {kThreads, 1, 1}, 0, ll_stream(), own, signals, size_, max_tokens, hidden,
                                 fp8_flag, rec_bytes, timeout, recv_x, recv_scales, recv_count, layout_range, src_info,
                                 src_slot, k, status);
  else
    kern.launch_with(grid, {kThreads, 1, 1}, 0, ll_stream(), own, signals, size_, max_tokens, hidden, fp8_flag,
                     rec_bytes, timeout, recv_x, recv_scales, recv_count, layout_range, src_info, src_slot, k, status);
}

void DevicePlane::ll_combine_send(uint64_t x, int64_t hidden, int local_experts, int64_t max_tokens,
                                  uint64_t layout_range, uint64_t src_slot) {
  kernel(ll_combine_send_text())
      .launch_with({unsigned(local_experts), ll_blocks_per_expert(local_experts), 1}, {kThreads, 1, 1}, 0, ll_stream(),
                   x, hidden, size_, rank_, max_tokens, layout_range, src_slot, window_.window_table(),
                   window_.signal_offset());
}

void DevicePlane::ll_combine_recv(int64_t tokens, int64_t hidden, int k, uint64_t routing, uint64_t topk,
                                  bool topk_i64, uint64_t weights, uint64_t out, bool after_send) {
  const uint64_t own = window_.window(rank_), signals = own + uint64_t(window_.signal_offset()),
                 timeout = timeout_ns(), status = reinterpret_cast<uint64_t>(status_words());
  // About four blocks per SM: tokens, then column ranges of kThreads * 8 columns (a thread's
  // columns need one round of loads then).
  const int64_t want = int64_t(rt::cuda_device(device()).sm_count) * 4;
  const int64_t gx = std::clamp<int64_t>(tokens, 1, want);
  const int64_t gy = std::clamp<int64_t>(want / gx, 1, (hidden + kThreads * 8 - 1) / (kThreads * 8));
  const rt::CudaKernel kern = kernel(ll_combine_recv_text(topk_i64));
  const rt::Dim3 grid{unsigned(gx), unsigned(gy), 1};
  if (after_send)
    kern.launch_overlapping_with(grid, {kThreads, 1, 1}, 0, ll_stream(), own, signals, size_, tokens, hidden, k,
                                 routing, topk, weights, out, timeout, status);
  else
    kern.launch_with(grid, {kThreads, 1, 1}, 0, ll_stream(), own, signals, size_, tokens, hidden, k, routing, topk,
                     weights, out, timeout, status);
}

}  // namespace deepep
