// Normal-mode combine: the reverse of a dispatch. Rank r returns to each source s the rows it
// received from s (in the same order), with their top-k weights; the source stages every returned
// row (one per (token, rank) pair) and reduces each token's rows in rank order, in f32. On the
// hierarchical route (buffer/internode.h) the forwarders reduce their node's rows first, and the
// source sums the node partials in node order.
#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <type_traits>

#include "buffer/checks.h"
#include "bootstrap/wire.h"
#include "buffer/dispatch_plan.h"
#include "buffer/internode.h"
#include "buffer/peer_memory.h"
#include "buffer/shared_arena.h"
#include "deepep/buffer.h"
#include "deepep/group.h"
#include "engine/engine.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"
#include "transport/nccl/nccl_plane.h"
#include "tl/device/numeric.h"

namespace deepep {
namespace {

size_t align8(size_t v) { return (v + 7) / 8 * 8; }

template <class T>
float widen(T v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, tl::bfloat16_t>)
    return std::bit_cast<float>(uint32_t(v.bits) << 16);
  else
    return v.to_float();
}

// acc[c] += row[c] for one staged row (vectorizes: bf16 and f16 widen to f32).
template <class T>
void accumulate(float* acc, const uint8_t* row, size_t n) {
  const T* r = reinterpret_cast<const T*>(row);
  for (size_t c = 0; c < n; ++c) acc[c] += widen(r[c]);
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

// The BF16 case, the one that matters (DeepEP combines BF16), with AVX-512 and AVX2 clones (the
// default x86-64 build has SSE2 only, and this loop is what a CPU combine spends its time on). A
// token is summed a chunk of columns at a time, so the f32 partial stays in L1 while every row's
// chunk is added to it (the same order of additions as row by row: the same bits).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void reduce_tokens_bf16(uint8_t* out, const uint8_t* stage, const uint8_t* const* rows, const int64_t* token_offset,
                        int64_t t0, int64_t t1, int64_t H) {
  constexpr size_t kChunk = 512;
  const size_t n = size_t(H);
  const int64_t first = token_offset[t0];  // slots are counted from this one on
  auto row = [&](int64_t s) {
    return reinterpret_cast<const uint16_t*>(rows ? rows[s] : stage + size_t(s) * n * 2);
  };
  alignas(64) float acc[kChunk];
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t s0 = token_offset[t] - first, s1 = token_offset[t + 1] - first;
    uint16_t* o = reinterpret_cast<uint16_t*>(out) + size_t(t) * n;
    if (s1 == s0) {
      std::memset(o, 0, n * 2);
      continue;
    }
    for (size_t c0 = 0; c0 < n; c0 += kChunk) {
      const size_t m = std::min(kChunk, n - c0);
      const uint16_t* r0 = row(s0) + c0;
      for (size_t c = 0; c < m; ++c) acc[c] = std::bit_cast<float>(uint32_t(r0[c]) << 16);
      for (int64_t s = s0 + 1; s < s1; ++s) {
        const uint16_t* r = row(s) + c0;
        for (size_t c = 0; c < m; ++c) acc[c] += std::bit_cast<float>(uint32_t(r[c]) << 16);
      }
      for (size_t c = 0; c < m; ++c) {  // round to nearest even (NaN kept quiet), as tl::bfloat16_t does
        const uint32_t u = std::bit_cast<uint32_t>(acc[c]);
        const uint16_t rounded = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        o[c0 + c] = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t((u >> 16) | 0x40u) : rounded;
      }
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
                  const std::vector<int64_t>& token_offset, int64_t t0, int64_t t1, int64_t H) {
  switch (dt) {
    case rt::DType::BF16: reduce_tokens_bf16(out, stage, rows, token_offset.data(), t0, t1, H); break;
    case rt::DType::F16: reduce_tokens<tl::half_t>(out, stage, rows, token_offset, t0, t1, H); break;
    default: reduce_tokens<float>(out, stage, rows, token_offset, t0, t1, H); break;
  }
}

// One step of a token's sum as the flat reduction folds it: its first row starts the f32
// accumulator -- as is for bf16 x, added to 0 for the other dtypes (reduce_tokens_bf16 and
// reduce_tokens) -- and later rows add to it. `from_zero`: x is not bf16.
template <class Row>
void fold_row(float* acc, const uint8_t* row, size_t n, bool first, bool from_zero) {
  if (first && !from_zero) {
    const Row* r = reinterpret_cast<const Row*>(row);
    for (size_t c = 0; c < n; ++c) acc[c] = widen(r[c]);
    return;
  }
  if (first) std::fill(acc, acc + n, 0.0f);
  accumulate<Row>(acc, row, n);
}

// The hierarchical route backwards (internode.h), rows of type Row. Sum order, for every token: the
// rows of each node's ranks in rank order, in f32 (at the node's forwarder; at the source for its
// own node), then those node partials in node order, in f32, rounded once to Row. A partial crosses
// nodes unrounded: as the row itself when the token went to one rank of that node, else as its f32
// sum spread over the row areas of 4 / sizeof(Row) records (weights in the first): never more
// records than the flat route sends for the token, and nothing rounded twice. A token whose ranks
// lie in one node gets the flat route's bits; otherwise the sum differs from the flat rank-order one
// only by f32 reassociation.
template <class Row>
void combine_hierarchical(Engine& e, const detail::NodeMap& nodes, const DispatchHandle& handle, const uint8_t* xp,
                          const float* wp, int64_t H, int64_t K, uint8_t* out_x, float* out_w,
                          InternodeTraffic& traffic, const std::string& what) {
  const detail::InternodeRoute& route = *handle.internode;
  const int me = e.rank(), R = e.size(), mine = nodes.node_of[size_t(me)], N = nodes.num_nodes();
  const std::vector<int>& node_ranks = nodes.ranks[size_t(mine)];
  const bool from_zero = !std::is_same_v<Row, tl::bfloat16_t>;
  const size_t row_bytes = size_t(H) * sizeof(Row), w_bytes = size_t(K) * 4;
  const size_t off_w = align8(row_bytes), rec = align8(off_w + w_bytes);  // a row and its weights
  const size_t sum_bytes = size_t(H) * 4;
  const int64_t multi = int64_t((sum_bytes + row_bytes - 1) / row_bytes);  // records of an f32 partial
  auto records_of = [multi](int64_t ranks_in_node) { return ranks_in_node == 1 ? int64_t(1) : multi; };
  e.check_record_fits(rec, what);
  const int32_t* prefix = handle.rank_prefix_matrix.data_as<int32_t>();
  auto first_row_from = [&](int s) -> int64_t { return s ? prefix[(s - 1) * R + me] : 0; };  // in x
  // Rows of x as records.
  auto send_rows = [&](int peer, std::shared_ptr<const std::vector<int64_t>> rows) -> SendSpec {
    return {peer, rec, rows->size(), [=](size_t first, size_t n, uint8_t* dst) {
              for (size_t i = 0; i < n; ++i, dst += rec) {
                const int64_t row = (*rows)[first + i];
                std::memcpy(dst, xp + size_t(row) * row_bytes, row_bytes);
                if (w_bytes) std::memcpy(dst + off_w, wp + row * K, w_bytes);
              }
            }};
  };
  // Records into slots of a stage (rows, weights).
  auto receive_slots = [&](int peer, const std::vector<int64_t>* slot, uint8_t* stage, float* stage_w) -> RecvSpec {
    return {peer, rec, slot->size(), [=](size_t first, size_t n, const uint8_t* src) {
              for (size_t i = 0; i < n; ++i, src += rec) {
                const int64_t at = (*slot)[first + i];
                std::memcpy(stage + size_t(at) * row_bytes, src, row_bytes);
                if (w_bytes) std::memcpy(stage_w + size_t(at) * size_t(K), src + off_w, w_bytes);
              }
            }};
  };
  // Records copied as they are, from or into consecutive memory.
  auto send_records = [rec](int peer, const uint8_t* from, int64_t n) -> SendSpec {
    return {peer, rec, size_t(n), [=](size_t first, size_t count, uint8_t* dst) {
              std::memcpy(dst, from + first * rec, count * rec);
            }};
  };
  auto receive_records = [rec](int peer, uint8_t* into, int64_t n) -> RecvSpec {
    return {peer, rec, size_t(n), [=](size_t first, size_t count, const uint8_t* src) {
              std::memcpy(into + first * rec, src, count * rec);
            }};
  };
  auto rows_from = [&](int s, std::vector<int64_t>& rows) {
    for (int64_t i = 0; i < handle.recv_counts[size_t(s)]; ++i) rows.push_back(first_row_from(s) + i);
  };

  // 1: every rank returns the rows of the tokens forwarded to it to their forwarder (in source
  // order, as the forwarder handed them out), which stages one per (staged token, rank).
  const int64_t staged = route.stage_offset[size_t(R)], forward_slots = route.slot_offset[size_t(staged)];
  const rt::Tensor fstage_t = e.pool().empty({forward_slots * int64_t(row_bytes)}, rt::DType::U8);
  const rt::Tensor fstage_w_t = e.pool().empty({forward_slots * K}, rt::DType::F32);
  uint8_t* const fstage = static_cast<uint8_t*>(fstage_t.data());
  float* const fstage_w = fstage_w_t.data_as<float>();
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  for (int f : node_ranks) {
    auto rows = std::make_shared<std::vector<int64_t>>();
    for (int s = 0; s < R; ++s)
      if (nodes.forwards_for(f, s)) rows_from(s, *rows);
    sends.push_back(send_rows(f, std::move(rows)));
    recvs.push_back(receive_slots(f, &route.forward_slots[size_t(f)], fstage, fstage_w));
  }
  e.exchange(std::move(sends), std::move(recvs), what);
  // The forwarder's partial of each staged token, as records.
  std::vector<int64_t> partial_record(size_t(staged) + 1, 0);  // per staged token: its first record
  for (int64_t j = 0; j < staged; ++j)
    partial_record[size_t(j) + 1] =
        partial_record[size_t(j)] + records_of(route.slot_offset[size_t(j) + 1] - route.slot_offset[size_t(j)]);
  const rt::Tensor partials_t = e.pool().empty({partial_record[size_t(staged)] * int64_t(rec)}, rt::DType::U8);
  uint8_t* const partials = static_cast<uint8_t*>(partials_t.data());
  std::vector<float> sum(static_cast<size_t>(H));
  for (int64_t j = 0; j < staged; ++j) {
    const int64_t s0 = route.slot_offset[size_t(j)], s1 = route.slot_offset[size_t(j) + 1];
    uint8_t* const out = partials + size_t(partial_record[size_t(j)]) * rec;
    float* const wsum = reinterpret_cast<float*>(out + off_w);
    if (s1 - s0 == 1) {
      std::memcpy(out, fstage + size_t(s0) * row_bytes, row_bytes);
      std::memcpy(wsum, fstage_w + size_t(s0) * size_t(K), w_bytes);
      continue;
    }
    std::fill(wsum, wsum + K, 0.0f);
    for (int64_t slot = s0; slot < s1; ++slot) {
      fold_row<Row>(sum.data(), fstage + size_t(slot) * row_bytes, size_t(H), slot == s0, from_zero);
      for (int64_t k = 0; k < K; ++k) wsum[k] += fstage_w[size_t(slot) * size_t(K) + size_t(k)];
    }
    for (size_t done = 0, i = 0; done < sum_bytes; done += row_bytes, ++i)
      std::memcpy(out + i * rec, reinterpret_cast<const uint8_t*>(sum.data()) + done, std::min(row_bytes, sum_bytes - done));
  }

  // 2: the partials cross to their sources, one per (token, node); the rows of this node's sources
  // go straight back. The source stages its own node's rows per (token, rank) and the partials per
  // (token, node).
  std::vector<std::vector<int64_t>> own_slot(static_cast<size_t>(R));  // per rank of this node: each returned row's slot
  const uint8_t* in_rank = static_cast<const uint8_t*>(handle.is_token_in_rank.data());
  for (int r : node_ranks)
    for (int32_t t : handle.send_lists[size_t(r)]) {
      int64_t before = 0;
      for (int q : node_ranks) before += q < r && in_rank[size_t(t) * size_t(R) + size_t(q)];
      own_slot[size_t(r)].push_back(route.own_offset[size_t(t)] + before);
    }
  const int64_t T = handle.num_tokens, own_slots = route.own_offset[size_t(T)];
  const rt::Tensor ostage_t = e.pool().empty({own_slots * int64_t(row_bytes)}, rt::DType::U8);
  const rt::Tensor ostage_w_t = e.pool().empty({own_slots * K}, rt::DType::F32);
  uint8_t* const ostage = static_cast<uint8_t*>(ostage_t.data());
  float* const ostage_w = ostage_w_t.data_as<float>();
  // Per (token, node): its partial's first record here, and the ranks of that node it went to.
  std::vector<int64_t> partial_at(size_t(T) * size_t(N), -1), ranks_there(size_t(T) * size_t(N), 0);
  std::vector<int64_t> node_first(size_t(N) + 1, 0);  // the first record of each node's partials
  for (int n = 0; n < N; ++n) {
    int64_t next = node_first[size_t(n)];
    for (int32_t t : route.node_lists[size_t(n)]) {
      int64_t k = 0;
      for (int r : nodes.ranks[size_t(n)]) k += in_rank[size_t(t) * size_t(R) + size_t(r)];
      partial_at[size_t(t) * size_t(N) + size_t(n)] = next;
      ranks_there[size_t(t) * size_t(N) + size_t(n)] = k;
      next += records_of(k);
    }
    node_first[size_t(n) + 1] = next;
  }
  const rt::Tensor pin_t = e.pool().empty({node_first[size_t(N)] * int64_t(rec)}, rt::DType::U8);
  uint8_t* const pin = static_cast<uint8_t*>(pin_t.data());
  sends.clear();
  recvs.clear();
  for (int s : node_ranks) {
    auto rows = std::make_shared<std::vector<int64_t>>();
    rows_from(s, *rows);
    sends.push_back(send_rows(s, std::move(rows)));
    recvs.push_back(receive_slots(s, &own_slot[size_t(s)], ostage, ostage_w));
  }
  for (int s = 0; s < R; ++s) {
    if (!nodes.forwards_for(me, s)) continue;
    const int64_t first = partial_record[size_t(route.stage_offset[size_t(s)])];
    const int64_t n = partial_record[size_t(route.stage_offset[size_t(s) + 1])] - first;
    sends.push_back(send_records(s, partials + size_t(first) * rec, n));
    traffic.combine_rows += route.stage_offset[size_t(s) + 1] - route.stage_offset[size_t(s)];
    traffic.bytes += n * int64_t(rec);
  }
  for (int n = 0; n < N; ++n)
    if (n != mine)
      recvs.push_back(receive_records(nodes.forwarder(me, n), pin + size_t(node_first[size_t(n)]) * rec,
                                      node_first[size_t(n) + 1] - node_first[size_t(n)]));
  e.exchange(std::move(sends), std::move(recvs), what);

  // The source's sum: node partials in node order, its own node's from the staged rows.
  std::vector<float> total(static_cast<size_t>(H)), own_w(static_cast<size_t>(K)), total_w(static_cast<size_t>(K));
  for (int64_t t = 0; t < T; ++t) {
    bool first = true;
    std::fill(total_w.begin(), total_w.end(), 0.0f);
    for (int n = 0; n < N; ++n) {
      const float* partial_w = nullptr;
      if (n == mine) {
        const int64_t s0 = route.own_offset[size_t(t)], s1 = route.own_offset[size_t(t) + 1];
        if (s0 == s1) continue;
        std::fill(own_w.begin(), own_w.end(), 0.0f);
        for (int64_t slot = s0; slot < s1; ++slot) {
          fold_row<Row>(sum.data(), ostage + size_t(slot) * row_bytes, size_t(H), slot == s0, from_zero);
          for (int64_t k = 0; k < K; ++k) own_w[size_t(k)] += ostage_w[size_t(slot) * size_t(K) + size_t(k)];
        }
        partial_w = own_w.data();
      } else {
        const int64_t at = partial_at[size_t(t) * size_t(N) + size_t(n)];
        if (at < 0) continue;
        const uint8_t* p = pin + size_t(at) * rec;
        if (ranks_there[size_t(t) * size_t(N) + size_t(n)] == 1)
          fold_row<Row>(sum.data(), p, size_t(H), true, from_zero);
        else
          for (size_t done = 0, i = 0; done < sum_bytes; done += row_bytes, ++i)
            std::memcpy(reinterpret_cast<uint8_t*>(sum.data()) + done, p + i * rec, std::min(row_bytes, sum_bytes - done));
        partial_w = reinterpret_cast<const float*>(p + off_w);
      }
      fold_row<float>(total.data(), reinterpret_cast<const uint8_t*>(sum.data()), size_t(H), first, from_zero);
      for (int64_t k = 0; k < K; ++k) total_w[size_t(k)] += partial_w[k];
      first = false;
    }
    uint8_t* o = out_x + size_t(t) * row_bytes;
    if (first)
      std::memset(o, 0, row_bytes);  // the token went nowhere
    else
      store<Row>(o, total.data(), size_t(H));
    if (out_w) std::copy(total_w.begin(), total_w.end(), out_w + t * K);
  }
}

}  // namespace

CombineResult Buffer::combine(const rt::Tensor& x, const DispatchHandle& handle, const rt::Tensor& topk_weights,
                              const Event& previous_event, bool async_finish) {
  Engine& e = comm_->engine();
  const std::string what = "combine";
  // CUDA tensors move on the communicator's device plane: the cuda_ipc windows or NCCL.
  DevicePlane* const plane = x.defined() && x.device().is_cuda() ? comm_->device_plane() : nullptr;
  NcclPlane* const nccl = x.defined() && x.device().is_cuda() ? comm_->nccl_plane() : nullptr;
  if (plane) plane->mark("start");
  e.begin_op(what);
  const int R = size();
  using rt::DType;
  rt::Device dev;
  std::string err = detail::data_device(x, "x", *comm_, &dev, detail::PlaneUse::Either);
  const bool gpu = dev.is_cuda();
  // CPU calls and the nccl plane's are synchronous (dispatch.cc); a cuda_ipc call's stream waits for
  // the event instead.
  if ((!gpu || nccl) && err.empty()) err = detail::wait_on_host(previous_event);
  if (err.empty() && handle.num_ranks != R)
    err = rt::str("the handle is from a group of ", handle.num_ranks, " ranks, this one has ", R);
  if (err.empty() && gpu != handle.device_slots.defined())
    err = gpu ? "x is on the GPU but the handle is from a dispatch of CPU tensors; combine with the handle of a GPU dispatch"
              : "x is on the CPU but the handle is from a dispatch of GPU tensors; combine with the handle of a CPU dispatch";
  if (err.empty() && gpu && handle.device_transport != detail::device_transport(*comm_))
    err = rt::str("the handle is from a dispatch on the ", handle.device_transport,
                  " device plane but this communicator's is ", detail::device_transport(*comm_),
                  "; combine with a handle of this Buffer's");
  // The handle is a plain struct that callers can copy and edit: x's rows are checked against its
  // num_recv_tokens but read by its recv_counts and rank_prefix_matrix, so those must agree, or an
  // edited (or default) handle reads past x.
  if (err.empty() && !gpu) {
    int64_t sum = 0;
    for (int64_t c : handle.recv_counts) sum += c < 0 ? INT64_MIN / 4 : c;
    const rt::Tensor& m = handle.rank_prefix_matrix;
    if (handle.recv_counts.size() != size_t(R) || sum != handle.num_recv_tokens || !m.defined() ||
        !m.device().is_cpu() || m.dtype() != DType::I32 || m.numel() != int64_t(R) * R || !m.is_contiguous())
      err = rt::str("the handle is not one a dispatch of this Buffer returned: its num_recv_tokens (",
                    handle.num_recv_tokens, "), recv_counts and rank_prefix_matrix disagree");
  }
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
  if (err.empty() && gpu && R > kernels::kMaxCombineRanks)
    err = rt::str("the GPU path reduces over at most ", kernels::kMaxCombineRanks, " ranks, this group has ", R);
  const int64_t H = err.empty() ? x.size(1) : 0;
  // The GPU path's scatter needs nothing from the agreement: when the windows' reuse is ordered by
  // the signals (DevicePlane::windows_ordered_by_signals) it goes now, beside the agreement.
  std::optional<NormalSignals> scattered;
  if (err.empty() && plane) {
    const kernels::RegionRows rows = detail::combine_rows(x, topk_weights);
    err = detail::check_combine_fits(*plane, handle, rows);
    if (err.empty() && plane->windows_ordered_by_signals()) {
      try {
        scattered = detail::combine_scatter_on_device(*plane, x, handle, topk_weights, rows, previous_event,
                                                      e.agreements() + 1);
      } catch (const rt::Error& ex) {  // shared through the agreement, so no rank waits for this one
        err = ex.what();
      }
    }
  }
  // The single-copy path (peer_memory.h): the token owners read the returned rows and weights
  // straight from this rank's x and topk_weights -- in place, from their mapping of this rank's
  // shared arena, where they lie there (shared_arena.h); where they are travels with the agreement.
  const bool single_copy = !gpu && !peer_pids_.empty();
  wire::Writer w;
  // Copies of x and the weights in this rank's arena, which the peers read instead (held past the
  // closing barrier).
  rt::Tensor x_in_arena = x, weights_in_arena = topk_weights;
  if (single_copy && err.empty() && copy_into_arena_) {
    x_in_arena = arena_->copy_in(x);
    weights_in_arena = arena_->copy_in(topk_weights);
  }
  if (single_copy && err.empty()) w.put(arena_->describe(x_in_arena)).put(arena_->describe(weights_in_arena));
  if (plane) plane->next_agreement_signalled();
  std::vector<std::string> all;
  try {
    all = e.agree(what,
                  rt::str("combine(handle ", handle.id, ", x=", x.defined() ? rt::name(x.dtype()) : "undefined", "[*, ",
                          H, "], weights=", weights ? rt::str("[*, ", K, "]") : std::string("no"),
                          gpu ? ", on the GPU" : "", handle.internode ? ", hierarchical" : "", ")"),
                  err, w.str());
  } catch (...) {
    // No receive follows the scatter (kernels/intranode.cuh "normal-mode signalling"), which still
    // reads its inputs.
    if (scattered) plane->track({x, topk_weights, handle.device_slots, handle.device_counts}, "combine");
    throw;
  }
  if (plane) plane->mark("agree");
  if (nccl && handle.internode)
    return detail::combine_over_nccl_hierarchical(*nccl, x, handle, topk_weights, detail::NodeMap(*group_),
                                                  internode_traffic_);
  if (nccl) {
    const detail::NodeMap nodes(*group_);
    for (int s = 0; s < R; ++s)
      if (nodes.node_of[size_t(s)] != nodes.node_of[size_t(rank())]) {  // the flat route: every row crosses
        internode_traffic_.combine_rows += handle.recv_counts[size_t(s)];
        internode_traffic_.bytes += handle.recv_counts[size_t(s)] * (H * rt::bits(x.dtype()) / 8 + K * 4);
      }
    return detail::combine_over_nccl(*nccl, x, handle, topk_weights);
  }
  if (gpu)
    return detail::combine_on_device(*plane, x, handle, topk_weights, previous_event, async_finish, e.agreements(),
                                     scattered ? &*scattered : nullptr);
  const DType dt = x.dtype();
  const size_t es = size_t(rt::bits(dt) / 8), row_bytes = size_t(H) * es, w_bytes = size_t(K) * 4;
  const size_t off_w = align8(row_bytes), rec = align8(off_w + w_bytes);
  const int64_t T = handle.num_tokens;
  const detail::NodeMap nodes(*group_);
  if (handle.internode) {
    CombineResult out;
    out.combined_x = e.pool().empty({T, H}, dt);
    if (weights) out.combined_topk_weights = e.pool().empty({T, K}, DType::F32);
    uint8_t* ox = static_cast<uint8_t*>(out.combined_x.data());
    float* ow = weights ? out.combined_topk_weights.data_as<float>() : nullptr;
    const uint8_t* xp = static_cast<const uint8_t*>(x.data());
    const float* wp = weights ? topk_weights.data_as<float>() : nullptr;
    switch (dt) {
      case DType::BF16:
        combine_hierarchical<tl::bfloat16_t>(e, nodes, handle, xp, wp, H, K, ox, ow, internode_traffic_, what);
        break;
      case DType::F16:
        combine_hierarchical<tl::half_t>(e, nodes, handle, xp, wp, H, K, ox, ow, internode_traffic_, what);
        break;
      default: combine_hierarchical<float>(e, nodes, handle, xp, wp, H, K, ox, ow, internode_traffic_, what); break;
    }
    return out;
  }
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
      reduce_block(dt, ox, stage, rows.data(), offset, t0, t1, H);
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
    if (nodes.node_of[size_t(s)] != nodes.node_of[size_t(me)]) {  // the flat route: every row crosses
      internode_traffic_.combine_rows += handle.recv_counts[size_t(s)];
      internode_traffic_.bytes += handle.recv_counts[size_t(s)] * int64_t(rec);
    }
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
    reduce_block(dt, ox, stage, nullptr, handle.token_offset, 0, T, H);
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
