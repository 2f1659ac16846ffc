// Low-latency dispatch and combine (decoding): each token goes once per selected expert into the
// fixed [local_experts, size * max_tokens, hidden] layout.
//
// Protocol: the agreement step carries every rank's per-expert token counts, so every receiver
// knows where each source's rows go: expert e's rows are packed from 0 in (source rank, token) order.
// One exchange then moves one record per (token, expert): the row (BF16, or FP8 quantized by the
// sender with one scale per 128 channels) and the source token index. With a receive hook, the
// exchange is started (everything the rings hold is sent at once) and completed by the hook.
// Combine sends every row back to its source, which weights and sums them in top-k order in f32.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "bootstrap/wire.h"
#include "buffer/checks.h"
#include "buffer/gpu_low_latency.h"
#include "deepep/buffer.h"
#include "engine/engine.h"
#include "rt/error.h"
#include "rt/hash.h"
#include "tl/device/numeric.h"
#include "transport/cuda_ipc/device_plane.h"

namespace deepep {
namespace {

size_t align8(size_t v) { return (v + 7) / 8 * 8; }

// Completes the receives of a started exchange (when it is still the pending one) and runs `post`
// once. Its sends are acknowledged in the background of the next operation (or the Buffer's end).
std::function<void()> make_hook(std::weak_ptr<bool> alive, Engine* engine, uint64_t epoch,
                                std::function<void()> post, const char* what) {
  auto done = std::make_shared<bool>(false);
  return [alive, engine, epoch, post = std::move(post), done, what] {
    if (*done) return;
    auto a = alive.lock();
    RT_USER_CHECK(a && *a, "deepep ", what, " hook: the Buffer was destroyed before the hook was called");
    if (engine->pending_epoch() == epoch) engine->complete_receives();
    if (post) post();
    *done = true;
  };
}

// float -> e4m3 (round to nearest even, saturating to +-448, NaN -> 0x7F): bit for bit what
// tl::float8_e4m3_t::from_float gives, branch-free so the loop vectorizes. The e4m3 codes are
// contiguous and monotonic in the magnitude, so code = (exponent + 7) * 8 + mantissa, where the
// mantissa (with its leading 1, in [8, 16]) is the magnitude scaled by a power of two and rounded
// by the 2^23 trick; a carry to 16 lands on the next exponent's code by itself.
inline uint8_t to_e4m3(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t mag = u & 0x7fffffffu;
  const bool nan = mag > 0x7f800000u;
  const float a = std::min(std::bit_cast<float>(mag), 448.0f);
  const uint32_t ua = std::bit_cast<uint32_t>(a);
  const int e = std::max(int((ua >> 23) & 0xffu) - 127, -6);
  const float scale = std::bit_cast<float>(uint32_t(3 - e + 127) << 23);
  const float r = (a * scale + 8388608.0f) - 8388608.0f;
  const int code = std::min((e + 7) * 8 + int(r) - 8, 0x7e);
  return nan ? uint8_t(0x7f) : uint8_t(((u >> 24) & 0x80u) | uint32_t(code));
}

// Per-128-channel e4m3 quantization of one BF16 row: scale = max(amax, 1e-4) / 448.
void quantize_row(const tl::bfloat16_t* x, int64_t H, uint8_t* q, float* scales) {
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(x);
  for (int64_t b = 0; b < H / 128; ++b) {
    float v[128];
    float amax = 0;
    for (int c = 0; c < 128; ++c) {
      v[c] = std::bit_cast<float>(uint32_t(bits[b * 128 + c]) << 16);
      amax = std::max(amax, std::fabs(v[c]));
    }
    amax = std::max(amax, 1e-4f);
    const float mul = 448.0f / amax;
    for (int c = 0; c < 128; ++c) q[b * 128 + c] = to_e4m3(v[c] * mul);
    scales[b] = amax / 448.0f;
  }
}

// Before a call queued on a user stream (Buffer::set_low_latency_stream). Such calls take no host
// step with the other ranks, and each rank numbers them on its device, so a rank that raises before
// queueing its kernels falls behind its peers for good. After another operation on the windows the
// call agrees with the others first (a peer may still be reading its window there), and then an
// input error is every rank's, raised before anyone queues anything. Otherwise an input error this
// rank sees alone is its own: it breaks the Buffer's low-latency path (every later call raises at
// once; the peers time out waiting for this call). The errors of earlier queued calls are raised
// after this call's kernels are queued (gpu_low_latency.cc).
void before_queued_call(Engine& e, DevicePlane& plane, const char* what, const std::string& desc, int rank,
                        const std::string& err) {
  RT_USER_CHECK(plane.ll_broken().empty(), "deepep ", what, " (rank ", rank, "): ", plane.ll_broken());
  if (plane.take_window_operation()) {
    e.agree(what, desc, err);
    plane.take_window_operation();  // this agreement's own mark
    return;
  }
  if (err.empty()) return;
  plane.set_ll_broken(rt::str("the low-latency calls queued on the stream are broken: an earlier ", what,
                              " raised before its kernels were queued (", err,
                              "), so this rank's calls no longer match its peers'; create a new Buffer"));
  rt::throw_user_error(rt::str("deepep ", what, " (rank ", rank, "): ", err));
}


// The handle is a plain struct a caller can copy and edit; the combine reads x, its routing and the
// exchange sizes through it. "" when it is one a low_latency_dispatch of this group could have
// returned on this rank (for CPU dispatches down to its counts and layout, which must agree with
// each other and with the routing; that the ranks hold the same counts is checked by the
// agreement), else what is wrong with it.
std::string check_ll_handle(const LowLatencyHandle& h, int R, int me, bool gpu) {
  using rt::DType;
  const auto bad = [](const std::string& why) {
    return rt::str("the handle is not one a low_latency_dispatch of this Buffer returned: ", why);
  };
  if (h.num_experts <= 0 || h.num_experts % R != 0)
    return bad(rt::str("num_experts ", h.num_experts, " is not a positive multiple of the group's ", R, " ranks"));
  if (h.max_tokens_per_rank <= 0 || h.num_topk <= 0 || h.hidden <= 0)
    return bad(rt::str("max_tokens_per_rank ", h.max_tokens_per_rank, ", num_topk ", h.num_topk, " and hidden ",
                       h.hidden, " must be positive"));
  if (h.num_tokens < 0 || h.num_tokens > h.max_tokens_per_rank)
    return bad(rt::str("num_tokens ", h.num_tokens, " is outside [0, max_tokens_per_rank = ", h.max_tokens_per_rank, "]"));
  const int64_t Le = h.num_experts / R, M = int64_t(R) * h.max_tokens_per_rank;
  const auto tensor_is = [](const rt::Tensor& t, DType dtype, std::initializer_list<int64_t> shape) {
    return t.defined() && t.dtype() == dtype && t.is_contiguous() && t.shape() == rt::Shape(shape);
  };
  if (!tensor_is(h.topk_idx, DType::I64, {h.num_tokens, h.num_topk}))
    return bad(rt::str("topk_idx is not an int64 [num_tokens = ", h.num_tokens, ", num_topk = ", h.num_topk, "] tensor"));
  if (!tensor_is(h.recv_layout_range, DType::I64, {Le, R}))
    return bad(rt::str("recv_layout_range is not an int64 [", Le, ", ", R, "] tensor"));
  if (!tensor_is(h.recv_src_info, DType::I32, {Le, M}))
    return bad(rt::str("recv_src_info is not an int32 [", Le, ", ", M, "] tensor"));
  if (gpu) {
    if (!tensor_is(h.recv_src_slot, DType::I32, {Le, M}))
      return bad(rt::str("recv_src_slot is not an int32 [", Le, ", ", M, "] tensor"));
    return "";  // the rest lives on the GPU, where the receive kernel checks the routing
  }
  const int E = h.num_experts;
  if (h.counts.size() != size_t(R) * size_t(E))
    return bad(rt::str("counts has ", h.counts.size(), " entries, not ranks x num_experts = ", int64_t(R) * E));
  for (size_t i = 0; i < h.counts.size(); ++i)
    if (h.counts[i] < 0 || h.counts[i] > h.max_tokens_per_rank)
      return bad(rt::str("counts[", i / size_t(E), "][", i % size_t(E), "] = ", h.counts[i],
                         " is outside [0, max_tokens_per_rank = ", h.max_tokens_per_rank, "]"));
  // This rank's row of counts is its routing's tally.
  std::vector<int32_t> mine(static_cast<size_t>(E), 0);
  const int64_t* idx = h.topk_idx.data_as<int64_t>();
  for (int64_t i = 0; i < h.num_tokens * h.num_topk; ++i) {
    if (idx[i] < -1 || idx[i] >= E) return bad(rt::str("topk_idx holds expert ", idx[i], " of ", E));
    if (idx[i] >= 0) ++mine[size_t(idx[i])];
  }
  for (int e = 0; e < E; ++e)
    if (h.counts[size_t(me) * size_t(E) + size_t(e)] != mine[size_t(e)])
      return bad(rt::str("counts[", me, "][", e, "] = ", h.counts[size_t(me) * size_t(E) + size_t(e)], " but its topk_idx sends ",
                         mine[size_t(e)], " tokens to expert ", e));
  // Each local expert's rows: source after source from row 0, as counted.
  const int64_t* layout = h.recv_layout_range.data_as<int64_t>();
  for (int64_t le = 0; le < Le; ++le) {
    int64_t begin = 0;
    for (int s = 0; s < R; ++s) {
      const int64_t v = layout[le * R + s], n = h.counts[size_t(s) * size_t(E) + size_t(int64_t(me) * Le + le)];
      if (v != ((begin << 32) | n))
        return bad(rt::str("recv_layout_range[", le, "][", s, "] = ", v, " is not (", begin, " << 32) | ", n,
                           ", its counts' place"));
      begin += n;
    }
  }
  return "";
}

}  // namespace

LowLatencyDispatchResult Buffer::low_latency_dispatch(const rt::Tensor& x, const rt::Tensor& topk_idx,
                                                      int max_tokens_per_rank, int num_experts, bool use_fp8,
                                                      bool return_recv_hook) {
  Engine& e = comm_->engine();
  const char* what = "low_latency_dispatch";
  DevicePlane* const plane = x.defined() && x.device().is_cuda() ? comm_->device_plane() : nullptr;
  if (plane) plane->mark("start");
  e.begin_op(what);
  const int R = size(), me = rank();
  using rt::DType;
  std::string err;
  if (!low_latency_mode_) err = "the Buffer was created with low_latency_mode = false";
  if (err.empty() && max_tokens_per_rank <= 0) err = rt::str("max_tokens_per_rank=", max_tokens_per_rank, " must be positive");
  rt::Device dev;
  if (err.empty()) err = detail::data_device(x, "x", *comm_, &dev, detail::PlaneUse::Windows);
  const bool gpu = dev.is_cuda();
  if (err.empty()) err = detail::check_matrix(x, "x", {DType::BF16}, -1, -1, dev);
  const int64_t T = err.empty() ? x.size(0) : 0, H = err.empty() ? x.size(1) : 0;
  if (err.empty() && T > max_tokens_per_rank)
    err = rt::str("x has ", T, " tokens, more than max_tokens_per_rank=", max_tokens_per_rank);
  if (err.empty()) err = detail::check_experts(num_experts, R);
  // On the GPU the kernels check the values (and every rank reports a rank's invalid ones).
  if (err.empty()) err = gpu ? detail::check_topk_shape(topk_idx, T, dev) : detail::check_topk(topk_idx, T, num_experts, true);
  if (err.empty() && use_fp8 && H % 128 != 0) err = rt::str("FP8 needs hidden (", H, ") to be a multiple of 128");
  if (err.empty() && gpu && reinterpret_cast<uintptr_t>(x.data()) % 16 != 0)
    err = "x must be 16-byte aligned on the GPU";
  if (err.empty() && gpu) {
    err = detail::ll_window_error(*plane, R, num_experts, max_tokens_per_rank, H,
                                  topk_idx.size(1), use_fp8);
  } else if (err.empty()) {
    const int64_t need = low_latency_size_hint(max_tokens_per_rank, H, R, num_experts);
    if (num_nvl_bytes_ + num_rdma_bytes_ < need)
      err = rt::str("buffer too small: low_latency_dispatch(max_tokens_per_rank=", max_tokens_per_rank, ", hidden=", H,
                    ", num_experts=", num_experts, ") on ", R, " ranks needs num_nvl_bytes + num_rdma_bytes >= ", need,
                    " (Buffer::low_latency_size_hint); this Buffer has ", num_nvl_bytes_ + num_rdma_bytes_);
  }
  const int64_t K = err.empty() ? topk_idx.size(1) : 0;
  const int Le = err.empty() ? num_experts / R : 0;
  std::vector<int32_t> mine(size_t(std::max(num_experts, 0)), 0);
  if (err.empty() && !gpu) {
    const detail::TopkReader topk(topk_idx);
    for (int64_t i = 0; i < T * K; ++i)
      if (topk[i] >= 0) ++mine[size_t(topk[i])];
  }
  wire::Writer w;
  w.put_vec(mine);
  std::vector<std::string> all;
  const std::string desc = rt::str("low_latency_dispatch(hidden=", H, ", topk=", K, ", experts=", num_experts,
                                   ", max_tokens_per_rank=", max_tokens_per_rank, ", fp8=", use_fp8,
                                   gpu ? ", on the GPU" : "", ")");
  if (plane && plane->ll_on_user_stream())
    before_queued_call(e, *plane, what, desc, me, err);
  else
    all = e.agree(what, desc, err, err.empty() ? w.str() : std::string());
  auto handle = std::make_shared<LowLatencyHandle>();
  handle->id = next_id_++;
  handle->num_ranks = R;
  handle->num_experts = num_experts;
  handle->max_tokens_per_rank = max_tokens_per_rank;
  handle->hidden = H;
  handle->num_tokens = T;
  handle->num_topk = int(K);
  if (gpu) {
    plane->mark("agree");
    return detail::ll_dispatch_on_device({plane, &e, alive_, return_recv_hook}, x, topk_idx, std::move(handle), use_fp8);
  }
  handle->counts.resize(size_t(R) * size_t(num_experts));
  for (int s = 0; s < R; ++s) {
    wire::Reader rd(all[size_t(s)]);
    const auto c = rd.get_vec<int32_t>();
    RT_ICHECK(c.size() == size_t(num_experts), "counts of rank ", s);
    std::copy(c.begin(), c.end(), handle->counts.begin() + int64_t(s) * num_experts);
  }
  handle->topk_idx = e.pool().empty({T, K}, DType::I64);
  const detail::TopkReader topk(topk_idx);
  int64_t* const kept = handle->topk_idx.data_as<int64_t>();
  for (int64_t i = 0; i < T * K; ++i) kept[i] = topk[i];
  const int64_t M = int64_t(R) * max_tokens_per_rank;  // rows per expert
  const int64_t S = use_fp8 ? H / 128 : 0;
  auto count = [h = handle.get()](int s, int64_t ex) { return h->counts[size_t(s) * size_t(h->num_experts) + size_t(ex)]; };

  LowLatencyDispatchResult out;
  out.recv_x = e.pool().empty({Le, M, H}, use_fp8 ? DType::F8E4M3 : DType::BF16);
  if (use_fp8) out.recv_x_scales = e.pool().empty({Le, M, S}, DType::F32);
  out.recv_count = e.pool().empty({Le}, DType::I32);
  handle->recv_src_info = e.pool().empty({Le, M}, DType::I32);
  handle->recv_layout_range = e.pool().empty({Le, R}, DType::I64);
  std::fill_n(handle->recv_src_info.data_as<int32_t>(), Le * M, -1);
  std::vector<int64_t> begin(size_t(Le) * size_t(R));  // [le][s]
  for (int le = 0; le < Le; ++le) {
    int64_t at = 0;
    for (int s = 0; s < R; ++s) {
      const int64_t c = count(s, int64_t(me) * Le + le);
      begin[size_t(le) * size_t(R) + size_t(s)] = at;
      handle->recv_layout_range.data_as<int64_t>()[le * R + s] = (at << 32) | c;
      at += c;
    }
    out.recv_count.data_as<int32_t>()[le] = int32_t(at);
  }

  // Sender side: FP8 rows are quantized once per token.
  const size_t row_bytes = use_fp8 ? size_t(H) : size_t(H) * 2, s_bytes = size_t(S) * 4;
  const size_t off_src = align8(row_bytes + s_bytes), rec = off_src + 8;
  rt::Tensor q, qs;
  if (use_fp8) {
    q = e.pool().empty({T, H}, DType::F8E4M3);
    qs = e.pool().empty({T, S}, DType::F32);
    const auto* xb = static_cast<const tl::bfloat16_t*>(x.data());
    for (int64_t t = 0; t < T; ++t)
      quantize_row(xb + t * H, H, static_cast<uint8_t*>(q.data()) + t * H, qs.data_as<float>() + t * S);
  }
  // Records to rank d: its local experts in order, each expert's tokens in order.
  auto orders = std::make_shared<std::vector<std::vector<int32_t>>>(static_cast<size_t>(R));
  {
    std::vector<std::vector<std::vector<int32_t>>> by_expert(size_t(R), std::vector<std::vector<int32_t>>(static_cast<size_t>(Le)));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t ex = handle->topk_idx.data_as<int64_t>()[t * K + k];
        if (ex >= 0) by_expert[size_t(ex / Le)][size_t(ex % Le)].push_back(int32_t(t));
      }
    for (int d = 0; d < R; ++d)
      for (int le = 0; le < Le; ++le)
        (*orders)[size_t(d)].insert((*orders)[size_t(d)].end(), by_expert[size_t(d)][size_t(le)].begin(),
                                    by_expert[size_t(d)][size_t(le)].end());
  }
  const rt::Tensor xk = x;
  const uint8_t* src_rows = static_cast<const uint8_t*>(use_fp8 ? q.data() : x.data());
  const float* src_scales = use_fp8 ? qs.data_as<float>() : nullptr;
  uint8_t* rx = static_cast<uint8_t*>(out.recv_x.data());
  float* rxs = use_fp8 ? out.recv_x_scales.data_as<float>() : nullptr;
  int32_t* rsrc = handle->recv_src_info.data_as<int32_t>();
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (int d = 0; d < R; ++d) {
    const std::vector<int32_t>* order = &(*orders)[size_t(d)];
    auto read = [=](size_t first, size_t n, uint8_t* dst) {
      (void)xk, (void)orders, (void)q, (void)qs;  // keep the sources alive while the exchange may be pending
      for (size_t i = 0; i < n; ++i, dst += rec) {
        const int64_t t = (*order)[first + i];
        std::memcpy(dst, src_rows + size_t(t) * row_bytes, row_bytes);
        if (s_bytes) std::memcpy(dst + row_bytes, src_scales + t * S, s_bytes);
        const int64_t t64 = t;
        std::memcpy(dst + off_src, &t64, 8);
      }
    };
    sends.push_back({d, rec, order->size(), read});
    // Records from source d: grouped by this rank's local experts.
    std::vector<int64_t> starts(size_t(Le) + 1, 0);
    for (int le = 0; le < Le; ++le) starts[size_t(le) + 1] = starts[size_t(le)] + count(d, int64_t(me) * Le + le);
    std::vector<int64_t> rows0(static_cast<size_t>(Le));
    for (int le = 0; le < Le; ++le) rows0[size_t(le)] = begin[size_t(le) * size_t(R) + size_t(d)];
    const rt::Tensor keep_x = out.recv_x, keep_s = out.recv_x_scales, keep_i = handle->recv_src_info;
    auto write = [=](size_t first, size_t n, const uint8_t* src) {
      (void)keep_x, (void)keep_s, (void)keep_i;
      for (size_t i = 0; i < n; ++i, src += rec) {
        const int64_t j = int64_t(first + i);
        const int64_t le = int64_t(std::upper_bound(starts.begin(), starts.end(), j) - starts.begin()) - 1;
        const int64_t row = le * M + rows0[size_t(le)] + (j - starts[size_t(le)]);
        std::memcpy(rx + size_t(row) * row_bytes, src, row_bytes);
        if (s_bytes) std::memcpy(rxs + row * S, src + row_bytes, s_bytes);
        int64_t t = 0;
        std::memcpy(&t, src + off_src, 8);
        rsrc[row] = int32_t(t);
      }
    };
    recvs.push_back({d, rec, size_t(starts[size_t(Le)]), write});
  }
  out.handle = handle;
  if (return_recv_hook) {
    e.start_exchange(std::move(sends), std::move(recvs), what);
    out.hook = make_hook(alive_, &e, e.pending_epoch(), nullptr, what);
  } else {
    e.exchange(std::move(sends), std::move(recvs), what);
  }
  return out;
}

LowLatencyCombineResult Buffer::low_latency_combine(const rt::Tensor& x, const rt::Tensor& topk_idx,
                                                    const rt::Tensor& topk_weights, const LowLatencyHandle& handle,
                                                    bool return_recv_hook) {
  Engine& e = comm_->engine();
  const char* what = "low_latency_combine";
  DevicePlane* const plane = x.defined() && x.device().is_cuda() ? comm_->device_plane() : nullptr;
  if (plane) plane->mark("start");
  e.begin_op(what);
  const int R = size(), me = rank();
  using rt::DType;
  const int64_t T = handle.num_tokens, K = handle.num_topk, H = handle.hidden;
  const int Le = handle.num_experts / std::max(1, handle.num_ranks);
  const int64_t M = int64_t(R) * handle.max_tokens_per_rank;
  std::string err;
  if (!low_latency_mode_) err = "the Buffer was created with low_latency_mode = false";
  if (err.empty() && handle.num_ranks != R)
    err = rt::str("the handle is from a group of ", handle.num_ranks, " ranks, this one has ", R);
  rt::Device dev;
  if (err.empty()) err = detail::data_device(x, "x", *comm_, &dev, detail::PlaneUse::Windows);
  const bool gpu = dev.is_cuda();
  if (err.empty() && gpu != handle.recv_src_slot.defined())
    err = gpu ? "x is on the GPU but the handle is from a dispatch of CPU tensors"
              : "x is on the CPU but the handle is from a dispatch of GPU tensors";
  if (err.empty()) err = check_ll_handle(handle, R, me, gpu);
  if (err.empty()) {
    if (!x.defined() || x.device() != dev || x.dtype() != DType::BF16 || x.dim() != 3 || !x.is_contiguous() ||
        x.size(0) != Le || x.size(1) != M || x.size(2) != H)
      err = rt::str("x must be a contiguous ", dev.to_string(), " bfloat16 tensor [", Le, ", ", M, ", ", H,
                    "] (the dispatch's layout)",
                    x.defined() ? rt::str(", not ", rt::name(x.dtype()), x.shape_string(), " on ", x.device().to_string())
                                : std::string());
  }
  // On the GPU the receive kernel compares the values with the dispatch's routing.
  if (err.empty())
    err = gpu ? detail::check_topk_shape(topk_idx, T, dev) : detail::check_topk(topk_idx, T, handle.num_experts, true);
  if (err.empty() && topk_idx.size(1) != K) err = rt::str("topk_idx has ", topk_idx.size(1), " columns; the dispatch had ", K);
  if (err.empty() && !gpu) {
    const detail::TopkReader topk(topk_idx);
    const int64_t* const kept = handle.topk_idx.data_as<int64_t>();
    for (int64_t i = 0; i < T * K && err.empty(); ++i)
      if (topk[i] != kept[i])
        err = rt::str("topk_idx differs from the one given to the dispatch (at flat index ", i, ")");
  }
  if (err.empty()) err = detail::check_matrix(topk_weights, "topk_weights", {DType::F32}, T, K, dev);
  // CPU handles: every rank must hold the same counts (each checked its own row above).
  const std::string counts_digest =
      gpu || !err.empty() ? std::string()
                          : rt::str(", the handle's counts ",
                                    rt::Hasher()
                                        .update(std::string_view(reinterpret_cast<const char*>(handle.counts.data()),
                                                                 handle.counts.size() * sizeof(int32_t)))
                                        .hex()
                                        .substr(0, 16));
  const std::string desc = rt::str("low_latency_combine(handle ", handle.id, ", hidden=", H, gpu ? ", on the GPU" : "",
                                   counts_digest, ")");
  if (plane && plane->ll_on_user_stream())
    before_queued_call(e, *plane, what, desc, me, err);
  else
    e.agree(what, desc, err);
  if (gpu) {
    plane->mark("agree");
    return detail::ll_combine_on_device({plane, &e, alive_, return_recv_hook}, x, topk_idx, topk_weights, handle);
  }

  const size_t row_bytes = size_t(H) * 2;
  auto count = [&handle](int s, int64_t ex) {
    return handle.counts[size_t(s) * size_t(handle.num_experts) + size_t(ex)];
  };
  const rt::Tensor stage_t = e.pool().empty({int64_t(size_t(T) * size_t(K) * row_bytes)}, DType::U8);
  uint8_t* const stage = static_cast<uint8_t*>(stage_t.data());
  const uint8_t* xp = static_cast<const uint8_t*>(x.data());
  const int64_t* idx = handle.topk_idx.data_as<int64_t>();
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (int s = 0; s < R; ++s) {
    // Back to source s: for each local expert, the rows [begin, begin + count) that came from s.
    std::vector<int64_t> starts(size_t(Le) + 1, 0), rows0(static_cast<size_t>(Le));
    for (int le = 0; le < Le; ++le) {
      starts[size_t(le) + 1] = starts[size_t(le)] + count(s, int64_t(me) * Le + le);
      rows0[size_t(le)] = handle.recv_layout_range.data_as<int64_t>()[le * R + s] >> 32;
    }
    const rt::Tensor keep = x;
    auto read = [=](size_t first, size_t n, uint8_t* dst) {
      (void)keep;
      for (size_t i = 0; i < n; ++i, dst += row_bytes) {
        const int64_t j = int64_t(first + i);
        const int64_t le = int64_t(std::upper_bound(starts.begin(), starts.end(), j) - starts.begin()) - 1;
        const int64_t row = le * M + rows0[size_t(le)] + (j - starts[size_t(le)]);
        std::memcpy(dst, xp + size_t(row) * row_bytes, row_bytes);
      }
    };
    sends.push_back({s, row_bytes, size_t(starts[size_t(Le)]), read});
    // From rank s: the rows of this rank's tokens for s's experts, in the dispatch's order.
    auto slots = std::make_shared<std::vector<int64_t>>();
    for (int le = 0; le < Le; ++le) {
      const int64_t ex = int64_t(s) * Le + le;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k)
          if (idx[t * K + k] == ex) slots->push_back(t * K + k);
    }
    auto write = [slots, stage_t, stage, row_bytes](size_t first, size_t n, const uint8_t* src) {
      for (size_t i = 0; i < n; ++i, src += row_bytes)
        std::memcpy(stage + size_t((*slots)[first + i]) * row_bytes, src, row_bytes);
    };
    recvs.push_back({s, row_bytes, slots->size(), write});
  }
  LowLatencyCombineResult out;
  out.combined_x = e.pool().empty({T, H}, DType::BF16);
  const rt::Tensor result = out.combined_x, weights = topk_weights;
  const rt::Tensor idx_keep = handle.topk_idx;
  auto post = [result, weights, idx_keep, stage_t, stage, T, K, H, row_bytes] {
    const int64_t* ix = idx_keep.data_as<int64_t>();
    const float* wt = weights.data_as<float>();
    auto* o = result.data_as<tl::bfloat16_t>();
    std::vector<float> acc(static_cast<size_t>(H));
    for (int64_t t = 0; t < T; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k = 0; k < K; ++k) {
        if (ix[t * K + k] < 0) continue;
        const float wk = wt[t * K + k];
        const auto* row = reinterpret_cast<const tl::bfloat16_t*>(stage + size_t(t * K + k) * row_bytes);
        for (int64_t c = 0; c < H; ++c) acc[size_t(c)] += wk * row[c].to_float();
      }
      for (int64_t c = 0; c < H; ++c) o[t * H + c] = tl::bfloat16_t::from_float(acc[size_t(c)]);
    }
  };
  if (return_recv_hook) {
    e.start_exchange(std::move(sends), std::move(recvs), what);
    out.hook = make_hook(alive_, &e, e.pending_epoch(), post, what);
  } else {
    e.exchange(std::move(sends), std::move(recvs), what);
    post();
  }
  return out;
}

void Buffer::set_low_latency_stream(rt::CuStream stream) {
  DevicePlane* const plane = comm_->device_plane();
  RT_USER_CHECK(plane, "deepep set_low_latency_stream: the communicator has no GPU data plane (CommOptions::cuda_device)");
  RT_USER_CHECK(low_latency_mode_, "deepep set_low_latency_stream: the Buffer was created with low_latency_mode = false");
  synchronize_low_latency();
  plane->set_ll_stream(stream);
}

void Buffer::reset_low_latency_stream() {
  DevicePlane* const plane = comm_->device_plane();
  if (!plane || !plane->ll_on_user_stream()) return;
  synchronize_low_latency();
  plane->reset_ll_stream();
}

void Buffer::synchronize_low_latency() {
  DevicePlane* const plane = comm_->device_plane();
  if (!plane) return;
  plane->ll_sync();
  detail::ll_check_status(*plane, "low-latency calls queued on the stream");
}

}  // namespace deepep
