// Normal-mode combine: the reverse of a dispatch. Rank r returns to each source s the rows it
// received from s (in the same order), with their top-k weights; the source stages every returned
// row (one per (token, rank) pair) and reduces each token's rows in rank order, in f32.
#include <algorithm>
#include <bit>
#include <type_traits>
#include <cstring>

#include "buffer/checks.h"
#include "bootstrap/wire.h"
#include "buffer/dispatch_plan.h"
#include "buffer/peer_memory.h"
#include "buffer/shared_arena.h"
#include "deepep/buffer.h"
#include "engine/engine.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"
#include "tl/device/numeric.h"

namespace deepep {
namespace {

size_t align8(size_t v) { return (v + 7) / 8 * 8; }

// acc[c] += row[c] for one staged row (vectorizes: bf16 and f16 widen to f32).
template <class T>
void accumulate(float* acc, const uint8_t* row, size_t n) {
  const T* r = reinterpret_cast<const T*>(row);
  for (size_t c = 0; c < n; ++c) {
    if constexpr (std::is_same_v<T, float>)
      acc[c] += r[c];
    else if constexpr (std::is_same_v<T, tl::bfloat16_t>)
      acc[c] += std::bit_cast<float>(uint32_t(r[c].bits) << 16);
    else
      acc[c] += r[c].to_float();
  }
}

template <class T>
void store(uint8_t* out, const float* acc, size_t n) {
  T* o = reinterpret_cast<T*>(out);
  for (size_t c = 0; c < n; ++c) {
    if constexpr (std::is_same_v<T, float>)
      o[c] = acc[c];
    else
      o[c] = T::from_float(acc[c]);
  }
}

// The BF16 case, the one that matters (DeepEP combines BF16), with an AVX-512 clone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "default")))
#endif
void reduce_tokens_bf16(uint8_t* out, const uint8_t* stage, const uint8_t* const* rows, const int64_t* token_offset,
                        int64_t t0, int64_t t1, int64_t H, float* acc) {
  const size_t n = size_t(H);
  const int64_t first = token_offset[t0];  // slots are counted from this one on
  auto row = [&](int64_t s) {
    return reinterpret_cast<const uint16_t*>(rows ? rows[s] : stage + size_t(s) * n * 2);
  };
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t s0 = token_offset[t] - first, s1 = token_offset[t + 1] - first;
    uint16_t* o = reinterpret_cast<uint16_t*>(out) + size_t(t) * n;
    if (s1 == s0) {
      std::memset(o, 0, n * 2);
      continue;
    }
    const uint16_t* r0 = row(s0);
    for (size_t c = 0; c < n; ++c) acc[c] = std::bit_cast<float>(uint32_t(r0[c]) << 16);
    for (int64_t s = s0 + 1; s < s1; ++s) {
      const uint16_t* r = row(s);
      for (size_t c = 0; c < n; ++c) acc[c] += std::bit_cast<float>(uint32_t(r[c]) << 16);
    }
    for (size_t c = 0; c < n; ++c) {  // round to nearest even (NaN kept quiet), as tl::bfloat16_t does
      const uint32_t u = std::bit_cast<uint32_t>(acc[c]);
      const uint16_t rounded = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
      o[c] = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t((u >> 16) | 0x40u) : rounded;
    }
  }
}

// out[t] = sum of the token's rows (rank order), in f32, for tokens [t0, t1); slot s (counted from
// token_offset[t0]) is the row rows[s] points to, or row s of the stage without `rows`.
template <class T>
void reduce_tokens(uint8_t* out, const uint8_t* stage, const uint8_t* const* rows,
                   const std::vector<int64_t>& token_offset, int64_t t0, int64_t t1, int64_t H) {
  const size_t row_bytes = size_t(H) * sizeof(T);
  const int64_t first = token_offset[size_t(t0)];
  std::vector<float> acc(static_cast<size_t>(H));
  for (int64_t t = t0; t < t1; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t s = token_offset[size_t(t)] - first; s < token_offset[size_t(t) + 1] - first; ++s)
      accumulate<T>(acc.data(), rows ? rows[s] : stage + size_t(s) * row_bytes, size_t(H));
    store<T>(out + size_t(t) * row_bytes, acc.data(), size_t(H));
  }
}

// The reduction of tokens [t0, t1) from their slots' rows (`rows`: as reduce_tokens), by dtype.
void reduce_block(rt::DType dt, uint8_t* out, const uint8_t* stage, const uint8_t* const* rows,
                  const std::vector<int64_t>& token_offset, int64_t t0, int64_t t1, int64_t H, std::vector<float>& acc) {
  switch (dt) {
    case rt::DType::BF16: reduce_tokens_bf16(out, stage, rows, token_offset.data(), t0, t1, H, acc.data()); break;
    case rt::DType::F16: reduce_tokens<tl::half_t>(out, stage, rows, token_offset, t0, t1, H); break;
    default: reduce_tokens<float>(out, stage, rows, token_offset, t0, t1, H); break;
  }
}

}  // namespace

CombineResult Buffer::combine(const rt::Tensor& x, const DispatchHandle& handle, const rt::Tensor& topk_weights,
                              const Event& previous_event, bool async_finish) {
  Engine& e = comm_->engine();
  const std::string what = "combine";
  DevicePlane* const plane = x.defined() && x.device().is_cuda() ? comm_->device_plane() : nullptr;
  if (plane) plane->mark("start");
  e.begin_op(what);
  const int R = size();
  using rt::DType;
  rt::Device dev;
  std::string err = detail::data_device(x, "x", *comm_, &dev);
  const bool gpu = dev.is_cuda();
  if (!gpu) previous_event.wait();  // CPU calls are synchronous; a GPU one's stream waits for it
  if (err.empty() && handle.num_ranks != R)
    err = rt::str("the handle is from a group of ", handle.num_ranks, " ranks, this one has ", R);
  if (err.empty() && gpu != handle.device_slots.defined())
    err = gpu ? "x is on the GPU but the handle is from a dispatch of CPU tensors; combine with the handle of a GPU dispatch"
              : "x is on the CPU but the handle is from a dispatch of GPU tensors; combine with the handle of a CPU dispatch";
  if (err.empty())
    err = detail::check_matrix(x, "x", {DType::BF16, DType::F16, DType::F32}, handle.num_recv_tokens, -1, dev);
  const bool weights = topk_weights.defined();
  int64_t K = 0;
  if (err.empty() && weights) {
    err = detail::check_matrix(topk_weights, "topk_weights", {DType::F32}, handle.num_recv_tokens, -1, dev);
    if (err.empty()) K = topk_weights.size(1);
  }
  if (err.empty()) err = arena_->check_not_foreign(x, "x");
  if (err.empty()) err = arena_->check_not_foreign(topk_weights, "topk_weights");
  const int64_t H = err.empty() ? x.size(1) : 0;
  // The single-copy path (peer_memory.h): the token owners read the returned rows and weights
  // straight from this rank's x and topk_weights -- in place, from their mapping of this rank's
  // shared arena, where they lie there (shared_arena.h); where they are travels with the agreement.
  const bool single_copy = !gpu && !peer_pids_.empty();
  wire::Writer w;
  if (single_copy && err.empty()) w.put(arena_->describe(x)).put(arena_->describe(topk_weights));
  if (plane) plane->next_agreement_signalled();
  const auto all = e.agree(what,
          rt::str("combine(handle ", handle.id, ", x=", x.defined() ? rt::name(x.dtype()) : "undefined", "[*, ", H,
                  "], weights=", weights ? rt::str("[*, ", K, "]") : std::string("no"), gpu ? ", on the GPU" : "", ")"),
          err, w.str());
  if (plane) plane->mark("agree");
  if (gpu) return detail::combine_on_device(*plane, x, handle, topk_weights, previous_event, async_finish);
  const DType dt = x.dtype();
  const size_t es = size_t(rt::bits(dt) / 8), row_bytes = size_t(H) * es, w_bytes = size_t(K) * 4;
  const size_t off_w = align8(row_bytes), rec = align8(off_w + w_bytes);
  const int64_t T = handle.num_tokens;
  const int64_t slots = handle.token_offset.back();
  // Staging: one row per (token, rank it went to), in rank order within a token. The single copy
  // stages a block of tokens at a time (about 1 MiB: the rows are reduced while in cache); the
  // frames arrive in any order, so their path stages all.
  const int64_t block_slots = single_copy ? std::min(slots, std::max<int64_t>(R, (1 << 20) / int64_t(row_bytes))) : slots;
  const rt::Tensor stage_t = e.pool().empty({int64_t(size_t(block_slots) * row_bytes)}, DType::U8);
  const rt::Tensor stage_w_t = e.pool().empty({slots * K}, DType::F32);
  uint8_t* const stage = static_cast<uint8_t*>(stage_t.data());
  float* const stage_w = stage_w_t.data_as<float>();
  const uint8_t* in_rank = static_cast<const uint8_t*>(handle.is_token_in_rank.data());
  std::vector<std::vector<int64_t>> slot_of(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) {
    const auto& list = handle.send_lists[size_t(r)];
    slot_of[size_t(r)].resize(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const int64_t t = list[i];
      int64_t before = 0;
      for (int q = 0; q < r; ++q) before += in_rank[size_t(t * R + q)];
      slot_of[size_t(r)][i] = handle.token_offset[size_t(t)] + before;
    }
  }
  const uint8_t* xp = static_cast<const uint8_t*>(x.data());
  const float* wp = weights ? topk_weights.data_as<float>() : nullptr;
  const int32_t* prefix = handle.rank_prefix_matrix.data_as<int32_t>();
  const int me = rank();
  CombineResult out;
  out.combined_x = e.pool().empty({T, H}, dt);
  uint8_t* ox = static_cast<uint8_t*>(out.combined_x.data());
  std::vector<float> acc(static_cast<size_t>(H));
  if (single_copy) {
    // Rank r holds the rows this rank sent it, from row (rows r received from ranks 0..me-1) on, in
    // token order: a block of tokens takes the next rows of each rank.
    e.check_record_fits(rec, what);
    std::vector<detail::PeerTensor> remote_x(static_cast<size_t>(R)), remote_w(static_cast<size_t>(R));
    // Where rank r's x and weights lie in this rank's mapping of r's shared arena (else nullptr):
    // those rows are reduced in place and those weights copied, with no read into the stage.
    std::vector<const uint8_t*> mapped_x(static_cast<size_t>(R)), mapped_w(static_cast<size_t>(R));
    std::vector<size_t> next(static_cast<size_t>(R), 0);
    // Per rank, rows and weights in separate batches: consecutive rows of a rank land in
    // consecutive stage rows (rank-major in the block; `rows` points each token-major slot at its
    // row), so PeerReads merges each rank's run into one read.
    std::vector<detail::PeerReads> row_reads, weight_reads;
    for (int r = 0; r < R; ++r) {
      wire::Reader rd(all[size_t(r)]);
      remote_x[size_t(r)] = rd.get<detail::PeerTensor>(), remote_w[size_t(r)] = rd.get<detail::PeerTensor>();
      const size_t n = handle.send_lists[size_t(r)].size();
      const uint64_t rows_read = uint64_t(me ? prefix[(me - 1) * R + r] : 0) + n;  // from the start of r's x
      mapped_x[size_t(r)] = n ? arena_->mapped(r, remote_x[size_t(r)], rows_read * row_bytes) : nullptr;
      mapped_w[size_t(r)] = n && w_bytes ? arena_->mapped(r, remote_w[size_t(r)], rows_read * w_bytes) : nullptr;
      shared_bytes_read_ += int64_t(n * ((mapped_x[size_t(r)] ? row_bytes : 0) + (mapped_w[size_t(r)] ? w_bytes : 0)));
      for (auto* reads : {&row_reads, &weight_reads})
        reads->emplace_back(pid_t(peer_pids_[size_t(r)]), r, what,
                            [&](const std::string& error) { e.fail_peer_read(what, error); });
    }
    std::vector<const uint8_t*> rows(static_cast<size_t>(block_slots));
    std::vector<int32_t> slot_at(static_cast<size_t>(block_slots));
    std::vector<float> weights_in(w_bytes ? size_t(block_slots) * size_t(K) : 0);
    const std::vector<int64_t>& offset = handle.token_offset;
    for (int64_t t0 = 0, t1 = 0; t0 < T; t0 = t1) {
      for (t1 = t0 + 1; t1 < T && offset[size_t(t1) + 1] - offset[size_t(t0)] <= block_slots;) ++t1;
      int32_t pos = 0, weights_read = 0;  // the next stage row, the next entry of weights_in
      for (int r = 0; r < R; ++r) {
        const std::vector<int32_t>& list = handle.send_lists[size_t(r)];
        const int64_t base = me ? prefix[(me - 1) * R + r] : 0;
        const uint8_t *const xr = mapped_x[size_t(r)], *const wr = mapped_w[size_t(r)];
        size_t& i = next[size_t(r)];
        for (; i < list.size() && list[i] < t1; ++i) {
          const int64_t at = slot_of[size_t(r)][i];
          const uint64_t row = uint64_t(base) + i;
          const uint8_t*& slot_row = rows[size_t(at - offset[size_t(t0)])];
          if (xr) {
            slot_row = xr + row * row_bytes;
          } else {
            slot_row = stage + size_t(pos) * row_bytes;
            row_reads[size_t(r)].add(remote_x[size_t(r)].address + row * row_bytes, stage + size_t(pos++) * row_bytes,
                                     row_bytes);
          }
          if (wr) {
            std::memcpy(stage_w + size_t(at) * size_t(K), wr + row * w_bytes, w_bytes);
          } else if (w_bytes) {
            slot_at[size_t(weights_read)] = int32_t(at);
            weight_reads[size_t(r)].add(remote_w[size_t(r)].address + row * w_bytes,
                                        weights_in.data() + size_t(weights_read++) * size_t(K), w_bytes);
          }
        }
        row_reads[size_t(r)].run();
        weight_reads[size_t(r)].run();
      }
      for (int32_t p = 0; p < weights_read; ++p)
        std::memcpy(stage_w + size_t(slot_at[size_t(p)]) * size_t(K), weights_in.data() + size_t(p) * size_t(K), w_bytes);
      reduce_block(dt, ox, stage, rows.data(), offset, t0, t1, H, acc);
    }
    e.barrier(what);
  }
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (int s = 0; s < R && !single_copy; ++s) {
    // Rows this rank received from s start after those of ranks 0..s-1.
    const int64_t base = s ? prefix[(s - 1) * R + me] : 0;
    auto read = [=](size_t first, size_t n, uint8_t* dst) {
      for (size_t i = 0; i < n; ++i, dst += rec) {
        const int64_t row = base + int64_t(first + i);
        std::memcpy(dst, xp + size_t(row) * row_bytes, row_bytes);
        if (w_bytes) std::memcpy(dst + off_w, wp + row * K, w_bytes);
      }
    };
    sends.push_back({s, rec, size_t(handle.recv_counts[size_t(s)]), read});
    const std::vector<int64_t>* slot = &slot_of[size_t(s)];
    uint8_t* st = stage;
    float* sw = stage_w;
    auto write = [=](size_t first, size_t n, const uint8_t* src) {
      for (size_t i = 0; i < n; ++i, src += rec) {
        const int64_t at = (*slot)[first + i];
        std::memcpy(st + size_t(at) * row_bytes, src, row_bytes);
        if (w_bytes) std::memcpy(sw + size_t(at) * size_t(K), src + off_w, w_bytes);
      }
    };
    recvs.push_back({s, rec, handle.send_lists[size_t(s)].size(), write});
  }
  if (!single_copy) {
    e.exchange(std::move(sends), std::move(recvs), what);
    reduce_block(dt, ox, stage, nullptr, handle.token_offset, 0, T, H, acc);
  }
  if (weights) {
    out.combined_topk_weights = e.pool().empty({T, K}, DType::F32);
    float* ow = out.combined_topk_weights.data_as<float>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k) {
        float sum = 0;
        for (int64_t sidx = handle.token_offset[size_t(t)]; sidx < handle.token_offset[size_t(t) + 1]; ++sidx)
          sum += stage_w[size_t(sidx) * size_t(K) + size_t(k)];
        ow[t * K + k] = sum;
      }
  }
  return out;
}

}  // namespace deepep
