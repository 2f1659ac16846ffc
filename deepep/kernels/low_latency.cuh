// Device code of the low-latency (decoding) dispatch and combine on the cuda_ipc data plane
// (src/buffer/gpu_low_latency.cc). Unlike the normal mode's kernels, these signal each other
// through the windows instead of waiting for host barriers: a sender writes its rows into the
// receiver's window, then a flag word in the receiver's signal area (IpcWindow::signals) carrying
// the operation's sequence number; the receiving kernel polls its flags.
//
// No host step is needed between operations (they can run back to back on a stream, or replay in
// a CUDA graph). The sequence number is counted on the device: every rank runs the same operations
// in the same order, and the last block of each receive kernel records the number as completed
// (ll_receive_done), so the next operation's kernels take the one after it. Consecutive operations
// stage rows in alternating halves of the window (ll_stage): a rank can be at most one operation
// ahead of a peer -- its receive needs every peer's send of the same operation, which is ordered
// after that peer's previous receive -- so it never writes a half a peer still reads.
//
// Flags (flag_word, intranode.cuh): (sequence << 32) | (bad << 31) | count; bad: the sender's top-k
// indices were invalid (it sent nothing), so every receiver reports that rank's error.
#pragma once

#include "deepep/kernels/intranode.cuh"

namespace deepep::kernels {

// Signal words (u64) of a window: where each flag lives (words [0, 16384); the normal mode's
// follow, intranode.cuh's kNormalFlags).
constexpr i64 kLlMaxExperts = 4096, kLlMaxRanks = 1024;
// Flags come in two sets, used by operations of odd and even sequence numbers (ll_dispatch_flags,
// ll_combine_flags), for the reason the stagings alternate: a sender one operation ahead must not overwrite a flag its peer
// has not read yet (two dispatches, or two combines, in a row).
constexpr i64 kLlDispatchFlags = 0;        // [2][experts]: local expert le of the owner, from source s: le * ranks + s
constexpr i64 kLlCombineFlags = 8192;      // [2][ranks]: from owner rank r
constexpr i64 kLlCombineArrivals = 10240;  // blocks of this rank's combine send that have finished
constexpr i64 kLlSequence = 10241;         // the sequence number of this rank's last completed operation
constexpr i64 kLlRecvArrivals = 10242;     // blocks of this rank's running receive kernel that have finished
// (kLlSendCounters, below: per expert, rows of this rank's dispatch send written.)
// The receiving kernels' status words (signal_layout.h: kLlTimedOut, kLlBadSource, kLlTopkDiffers)
// are written only on an error (plain stores: any one such rank is reported) and kept until the
// host reads and clears them, so calls queued on a stream report at a later check.

// The sequence number of the operation now starting, from this rank's own signal words: 1..2^32-2
// (flags keep 32 bits of it, a fresh signal area holds 0, and an even period keeps the parity of
// consecutive operations alternating across the wrap).
__device__ __forceinline__ u64 ll_sequence(const u64* own_signals) {
  return *reinterpret_cast<const volatile u64*>(own_signals + kLlSequence) % 0xfffffffeull + 1;
}

// The first flag word of operation seq's set, dispatch (experts words) or combine (ranks words).
__device__ __forceinline__ i64 ll_dispatch_flags(u64 seq) { return kLlDispatchFlags + i64(seq & 1) * kLlMaxExperts; }
__device__ __forceinline__ i64 ll_combine_flags(u64 seq) { return kLlCombineFlags + i64(seq & 1) * kLlMaxRanks; }

// Where operation seq stages rows in a window whose signal words start at signal_offset: the lower
// or the upper half of the data area (DevicePlane::ll_stage_bytes computes the same half).
__device__ __forceinline__ i64 ll_stage(u64 seq, i64 signal_offset) {
  return (seq & 1) ? signal_offset / 2 / 256 * 256 : 0;
}

// The end of a receive kernel (every thread calls it): the last block to finish records seq as
// this rank's completed operation, which the next operation's kernels read (stream order). A
// receive launched overlapping its send kernel first waits for that kernel's end (a no-op
// otherwise): every block of the send has read the sequence word then, and what the stream runs
// after the receive follows the send too.
__device__ __forceinline__ void ll_receive_done(const u64* own_signals, u64 seq) {
  wait_previous_grid();
  u64* const signals = const_cast<u64*>(own_signals);
  if (last_block_arrives(signals + kLlRecvArrivals)) *reinterpret_cast<volatile u64*>(signals + kLlSequence) = seq;
}

// A send kernel starts with launch_dependents (intranode.cuh): the receive kernel queued right after
// it (launched overlapping, sm_90+) may start then, so its launch and first loads overlap this
// kernel. It orders itself after the sends by their flags, and after this kernel's end before it
// advances the sequence word (ll_receive_done).

// float -> e4m3, round to nearest even, saturating to +-448, NaN -> 0x7F: the CPU path's to_e4m3
// (low_latency.cc), the same operations, so both give the same bits. The product a * scale is
// exact (scale is a power of two), so contracting it into an FMA changes nothing.
__device__ __forceinline__ u32 to_e4m3(float x) {
  const u32 u = __float_as_uint(x);
  const u32 mag = u & 0x7fffffffu;
  const bool nan = mag > 0x7f800000u;
  const float a = fminf(__uint_as_float(mag), 448.0f);
  const u32 ua = __float_as_uint(a);
  const int e = max(int((ua >> 23) & 0xffu) - 127, -6);
  const float scale = __uint_as_float(u32(3 - e + 127) << 23);
  const float r = (a * scale + 8388608.0f) - 8388608.0f;
  const int code = min((e + 7) * 8 + int(r) - 8, 0x7e);
  return nan ? 0x7fu : (((u >> 24) & 0x80u) | u32(code));
}

__device__ __forceinline__ float bf16_low(u32 w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_high(u32 w) { return __uint_as_float(w & 0xffff0000u); }
// Four BF16 values (two words) scaled by `mul`, as four e4m3 bytes.
__device__ __forceinline__ u32 e4m3x4(u32 a, u32 b, float mul) {
  return to_e4m3(bf16_low(a) * mul) | to_e4m3(bf16_high(a) * mul) << 8 | to_e4m3(bf16_low(b) * mul) << 16 |
         to_e4m3(bf16_high(b) * mul) << 24;
}

// Sixteen channels of a BF16 row (a, then b) to e4m3, as the CPU path: scale = max(amax, 1e-4) /
// 448, value = e4m3(x * (448 / max(amax, 1e-4))), amax over the 128-channel block, which is 8
// consecutive lanes (every lane of the warp takes part in the shuffles). Returns the 16 bytes;
// *scale gets the block's scale.
__device__ __forceinline__ int4 quantize_16_of_128(int4 a, int4 b, float* scale) {
  const u32 w[8] = {u32(a.x), u32(a.y), u32(a.z), u32(a.w), u32(b.x), u32(b.y), u32(b.z), u32(b.w)};
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fmaxf(fabsf(bf16_low(w[i])), fabsf(bf16_high(w[i]))));
  for (int o = 4; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  amax = fmaxf(amax, 1e-4f);
  *scale = amax / 448.0f;
  const float mul = 448.0f / amax;
  return make_int4(int(e4m3x4(w[0], w[1], mul)), int(e4m3x4(w[2], w[3], mul)), int(e4m3x4(w[4], w[5], mul)),
                   int(e4m3x4(w[6], w[7], mul)));
}

constexpr int kLlMaxTopk = 32;
// Bytes of a row one warp copies at a time where the rows of an expert are spread over its warps:
// 16-byte vectors, eight per lane (warp_copy<8>).
constexpr i64 kLlPiece = 4096;

// Whether any top-k index is out of [-1, experts) or any token selects an expert twice (every block
// checks all of them, so every block of a sender knows). A thread per token, its row's loads all in
// flight and compared in registers; the comparisons stop at k (fully unrolled to kLlMaxTopk they
// cost more than the loads).
template <class Index>
__device__ __forceinline__ bool ll_topk_bad(const Index* topk, i64 tokens, int k, int experts) {
  bool bad = false;
  for (i64 t = threadIdx.x; t < tokens; t += blockDim.x) {
    i64 row[kLlMaxTopk];
#pragma unroll
    for (int j = 0; j < kLlMaxTopk; ++j) row[j] = j < k ? i64(topk[t * k + j]) : -1;
#pragma unroll
    for (int j = 0; j < kLlMaxTopk; ++j) {
      if (j >= k) break;
      bad |= row[j] < -1 || row[j] >= experts;
#pragma unroll
      for (int i = 0; i < j; ++i) bad |= row[j] >= 0 && row[j] == row[i];
    }
  }
  return __syncthreads_or(bad) != 0;
}

// A dispatch record in the receiver's staging: the row (e4m3, or BF16) and its scales (FP8), padded
// to 16 bytes, then the token index and its top-k position at the source in the last 16 bytes;
// rec_bytes apart.
struct LlTail {
  int token, k;
};

constexpr i64 kLlSendCounters = 12288;  // [experts] signal words: rows of this rank's send written per expert

// Sender, one block per token (grid = max(tokens, 1)): the token's row (quantized once for FP8)
// goes to the owner of each expert it selects, into staging[(le * ranks + me) * max_tokens + i]
// where i counts the earlier tokens selecting that expert; the block that writes an expert's last
// row raises its flag, and experts no token selects get theirs (count 0) from block e % grid.
// With invalid top-k indices nothing is written and block 0 raises every flag with the bad bit.
// Block 0 also keeps the routing (as int64) for the handle.
// The row moves in units a thread holds in registers: 16 channels for FP8 (32 bytes in, 16 out; a
// 128-channel block is 8 lanes of one warp), 8 for BF16 (16 bytes). The first kLlAhead units per
// thread are loaded before the routing passes, whose latency hides theirs, and every unit goes from
// registers straight to each destination: no staging in shared memory, no barrier in between.
constexpr int kLlAhead = 2;

template <class Index>
__device__ __forceinline__ void ll_dispatch_send_body(const unsigned short* x, i64 tokens, i64 hidden,
                                                      const Index* topk, int k, int experts, int ranks, int me, int fp8,
                                                      i64 max_tokens, i64 rec_bytes, const u64* windows,
                                                      i64 signal_offset, i64* topk_copy) {
  launch_dependents();
  const int local = experts / ranks;
  const u64 seq = ll_sequence(reinterpret_cast<const u64*>(windows[me] + signal_offset));
  const i64 stage = ll_stage(seq, signal_offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const i64 t = blockIdx.x;
  auto flag_of = [&](i64 e) {
    return reinterpret_cast<u64*>(windows[e / local] + signal_offset) + ll_dispatch_flags(seq) + (e % local) * ranks + me;
  };
  // Units of this token's row (none without a token, or for BF16 rows of an odd 8-byte length,
  // which go element by element below). Unit u is 16 bytes at 16 * u of the record.
  const i64 units = t >= tokens ? 0 : fp8 ? hidden / 16 : (hidden * 2) % 16 == 0 ? hidden / 8 : 0;
  const int4* const row4 = reinterpret_cast<const int4*>(x + t * hidden);
  auto load_unit = [&](i64 u, int4* a, int4* b) {
    *a = *b = make_int4(0, 0, 0, 0);
    if (u >= units) return;
    *a = row4[fp8 ? 2 * u : u];
    if (fp8) *b = row4[2 * u + 1];
  };
  int4 ahead[kLlAhead][2];
#pragma unroll
  for (int i = 0; i < kLlAhead; ++i) load_unit(i64(i) * blockDim.x + threadIdx.x, &ahead[i][0], &ahead[i][1]);

  // For each expert e_j of this token: where its records start at its owner, the tokens before
  // this one selecting it, and all of them (counted below). In the same pass: which of the experts
  // this block raises the flag of when unused (e = blockIdx.x + m * gridDim.x) some token selects
  // (bit m). Set up before the top-k check, whose barrier orders it before the counting.
  __shared__ i64 expert[kLlMaxTopk];
  __shared__ unsigned char* base[kLlMaxTopk];
  __shared__ int before[kLlMaxTopk], total[kLlMaxTopk];
  __shared__ u32 used[kLlMaxExperts / 32];
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const i64 e = t < tokens ? i64(topk[t * k + j]) : -1;
    expert[j] = e;
    if (e >= 0 && e < experts)  // an index out of range is found by the check, and nothing is written
      base[j] = reinterpret_cast<unsigned char*>(windows[e / local]) + stage +
                ((e % local) * ranks + me) * max_tokens * rec_bytes;
    before[j] = total[j] = 0;
  }
  for (int m = threadIdx.x; m < kLlMaxExperts / 32; m += blockDim.x) used[m] = 0;

  const bool bad = ll_topk_bad(topk, tokens, k, experts);
  if (blockIdx.x == 0)
    for (i64 i = threadIdx.x; i < tokens * k; i += blockDim.x) topk_copy[i] = i64(topk[i]);
  if (bad) {
    if (blockIdx.x == 0)
      for (i64 e = threadIdx.x; e < experts; e += blockDim.x) store_relaxed_sys(flag_of(e), flag_word(seq, true, 0));
    return;
  }
  constexpr int kBatch = 4;  // entries a thread loads before using any
  for (i64 i0 = threadIdx.x; i0 < tokens * k; i0 += i64(kBatch) * blockDim.x) {
    i64 entry[kBatch];
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      const i64 i = i0 + i64(q) * blockDim.x;
      entry[q] = i < tokens * k ? i64(topk[i]) : -1;
    }
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      if (entry[q] < 0) continue;
      const i64 i = i0 + i64(q) * blockDim.x;
      const u32 e = u32(entry[q]);
      if (e % gridDim.x == blockIdx.x) atomicOr(used + e / gridDim.x / 32, 1u << (e / gridDim.x % 32));
      for (int j = 0; j < k; ++j)
        if (entry[q] == expert[j]) {
          atomicAdd(total + j, 1);
          if (i / k < t) atomicAdd(before + j, 1);
        }
    }
  }
  __syncthreads();
  for (u32 m = threadIdx.x; i64(m) * gridDim.x + blockIdx.x < experts; m += blockDim.x)
    if (!(used[m / 32] >> (m % 32) & 1u))
      store_relaxed_sys(flag_of(i64(m) * gridDim.x + blockIdx.x), flag_word(seq, false, 0));
  if (t >= tokens) return;
  auto record = [&](int j) { return base[j] + before[j] * rec_bytes; };
  // The thread's unit u (lane + a multiple of 32: the whole warp calls it, for the shuffles) to
  // every destination; FP8 scales by the first lane of each 128-channel block.
  auto put_unit = [&](i64 u, int4 a, int4 b) {
    int4 v = a;
    float scale = 0.0f;
    if (fp8) v = quantize_16_of_128(a, b, &scale);
    if (u >= units) return;
    for (int j = 0; j < k; ++j) {
      if (expert[j] < 0) continue;
      unsigned char* const dst = record(j);
      *reinterpret_cast<int4*>(dst + 16 * u) = v;
      if (fp8 && lane % 8 == 0) reinterpret_cast<float*>(dst + hidden)[u / 8] = scale;
    }
  };
#pragma unroll
  for (int i = 0; i < kLlAhead; ++i) {
    const i64 first = i64(i) * blockDim.x + warp * 32;  // the warp's first unit
    if (first < units) put_unit(first + lane, ahead[i][0], ahead[i][1]);
  }
  for (i64 first = i64(kLlAhead) * blockDim.x + warp * 32; first < units; first += blockDim.x) {
    int4 a, b;
    load_unit(first + lane, &a, &b);
    put_unit(first + lane, a, b);
  }
  if (!fp8 && units == 0) {
    const unsigned short* row = x + t * hidden;
    for (i64 c = threadIdx.x; c < hidden; c += blockDim.x)
      for (int j = 0; j < k; ++j)
        if (expert[j] >= 0) reinterpret_cast<unsigned short*>(record(j))[c] = row[c];
  }
  for (int j = threadIdx.x; j < k; j += blockDim.x)
    if (expert[j] >= 0) *reinterpret_cast<LlTail*>(record(j) + rec_bytes - 16) = LlTail{int(t), j};
  // Publish: the block whose row of e_j completes the expert's count raises its flag. The barrier
  // orders the block's writes before the counting lanes' system fence, which publishes them all
  // (cumulativity); the lanes are warp 0's, so that is one fence instruction per block, one more
  // where rows complete, and relaxed flag stores after it (store_relaxed_sys).
  __syncthreads();
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const i64 e = expert[j];
    if (e < 0) continue;
    u64* const counter = reinterpret_cast<u64*>(windows[me] + signal_offset) + kLlSendCounters + e;
    __threadfence_system();
    if (atomicAdd(reinterpret_cast<unsigned long long*>(counter), 1ull) + 1 != u64(total[j])) continue;
    *counter = 0;  // the next operation's kernel starts after this one
    __threadfence_system();
    store_relaxed_sys(flag_of(e), flag_word(seq, false, total[j]));
  }
}

// Receiver, grid (local experts, blocks per expert): waits for every source's flag of local expert
// le, then packs the rows from 0 in (source rank, token) order into recv_x [local, ranks *
// max_tokens, ...], with the counts, (begin << 32) | count per source, each row's source token and
// its top-k slot at the source (token * k + position); -1 past the count.
__device__ __forceinline__ void ll_dispatch_recv_body(const unsigned char* window, const u64* signals, int ranks,
                                                      i64 max_tokens, i64 hidden, int fp8, i64 rec_bytes,
                                                      u64 timeout_ns, unsigned char* recv_x, float* recv_scales,
                                                      int* recv_count, i64* layout_range, int* src_info, int* src_slot,
                                                      int k, volatile int* status) {
  const int le = blockIdx.x, lane = threadIdx.x & 31;
  const u64 seq = ll_sequence(signals);
  const unsigned char* const staging =
      window + ll_stage(seq, reinterpret_cast<const unsigned char*>(signals) - window);
  const i64 M = i64(ranks) * max_tokens;
  const i64 row_bytes = fp8 ? hidden : hidden * 2, s_bytes = fp8 ? hidden / 128 * 4 : 0;
  __shared__ i64 begin[kLlMaxRanks + 1];
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) {
    const u64 v = wait_flag(signals + ll_dispatch_flags(seq) + i64(le) * ranks + r, seq, timeout_ns);
    if (v == 0) status[kLlTimedOut] = r + 1;
    if (v & kFlagBad) status[kLlBadSource] = r + 1;
    begin[r + 1] = i64(v & (kFlagBad - 1));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    begin[0] = 0;
    for (int r = 0; r < ranks; ++r) begin[r + 1] += begin[r];
  }
  __syncthreads();
  const i64 total = begin[ranks];
  if (blockIdx.y == 0) {
    if (threadIdx.x == 0) recv_count[le] = int(total);
    for (int r = threadIdx.x; r < ranks; r += blockDim.x)
      layout_range[i64(le) * ranks + r] = (begin[r] << 32) | (begin[r + 1] - begin[r]);
  }
  // Rows past the count, a thread each; the received rows in pieces of kLlPiece bytes over every
  // warp of the expert's blocks (a warp per row left most of them idle at a few rows per expert),
  // the first piece's warp also copying the scales and the tail.
  for (i64 j = total + i64(blockIdx.y) * blockDim.x + threadIdx.x; j < M; j += i64(gridDim.y) * blockDim.x)
    src_info[i64(le) * M + j] = src_slot[i64(le) * M + j] = -1;
  const i64 pieces = (row_bytes + kLlPiece - 1) / kLlPiece;
  const i64 warps = i64(gridDim.y) * (blockDim.x / 32);
  for (i64 i = i64(blockIdx.y) * (blockDim.x / 32) + threadIdx.x / 32; i < total * pieces; i += warps) {
    const i64 j = i / pieces, at = i % pieces * kLlPiece, row = i64(le) * M + j;
    int r = 0;
    while (begin[r + 1] <= j) ++r;
    const unsigned char* rec = staging + ((i64(le) * ranks + r) * max_tokens + (j - begin[r])) * rec_bytes;
    warp_copy<8>(recv_x + row * row_bytes + at, rec + at, row_bytes - at < kLlPiece ? row_bytes - at : kLlPiece, lane);
    if (at != 0) continue;
    if (fp8) warp_copy(reinterpret_cast<unsigned char*>(recv_scales) + row * s_bytes, rec + row_bytes, s_bytes, lane);
    if (lane == 0) {
      const LlTail tail = *reinterpret_cast<const LlTail*>(rec + rec_bytes - 16);
      src_info[row] = tail.token;
      src_slot[row] = tail.token * k + tail.k;
    }
  }
  ll_receive_done(signals, seq);
}

// Owner of the experts, grid (local experts, blocks per expert): expert le's received rows -- all
// sources' together, rows [0, total) of its packed layout -- go back into their sources' stagings at
// each row's top-k slot (rows of 2 * hidden bytes), in pieces of kLlPiece bytes spread over every
// warp of the expert's blocks (a warp per row, source by source, left most warps idle at a few rows
// per expert and copied a warp's rows one after another); the block that finishes last raises
// every source's flag.
__device__ __forceinline__ void ll_combine_send_body(const unsigned char* x, i64 hidden, int ranks, int me,
                                                     i64 max_tokens, const i64* layout_range, const int* src_slot,
                                                     const u64* windows, i64 signal_offset) {
  launch_dependents();
  const int le = blockIdx.x, lane = threadIdx.x & 31;
  const u64 seq = ll_sequence(reinterpret_cast<const u64*>(windows[me] + signal_offset));
  const i64 stage = ll_stage(seq, signal_offset);
  const i64 M = i64(ranks) * max_tokens, row_bytes = hidden * 2;
  const i64* const range = layout_range + i64(le) * ranks;  // (begin << 32) | count per source
  const i64 total = (range[ranks - 1] >> 32) + (range[ranks - 1] & 0xffffffffll);
  const i64 pieces = (row_bytes + kLlPiece - 1) / kLlPiece;
  const i64 warps = i64(gridDim.y) * (blockDim.x / 32);
  for (i64 i = i64(blockIdx.y) * (blockDim.x / 32) + threadIdx.x / 32; i < total * pieces; i += warps) {
    const i64 j = i / pieces, at = i % pieces * kLlPiece, row = i64(le) * M + j;
    // The row's source: the last rank whose rows begin at or before j (an empty source begins where
    // the next one does).
    int lo = 0, hi = ranks - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if ((range[mid] >> 32) <= j)
        lo = mid;
      else
        hi = mid - 1;
    }
    unsigned char* const dst = reinterpret_cast<unsigned char*>(windows[lo]) + stage + i64(src_slot[row]) * row_bytes;
    const i64 bytes = row_bytes - at < kLlPiece ? row_bytes - at : kLlPiece;
    warp_copy<8>(dst + at, x + row * row_bytes + at, bytes, lane);
  }
  if (!last_block_arrives(reinterpret_cast<u64*>(windows[me] + signal_offset) + kLlCombineArrivals)) return;
  for (int r = 0; r < ranks; ++r)  // after last_block_arrives' fence
    store_relaxed_sys(reinterpret_cast<u64*>(windows[r] + signal_offset) + ll_combine_flags(seq) + me,
                      flag_word(seq, false, 0));
}

// A combine's columns of one token from c on, eight (V = int4) or one (V = unsigned short):
// acc[q] += w[j] * stage[at[j] + c + q] over the token's selected slots j in top-k order (at[j] < 0
// for the others: the CPU path skips them, and adding a zero would turn -0 into +0), in f32 with
// separate multiply and add as the CPU path. The loads of eight slots go out before any is used:
// one memory latency per eight rows, not one per row.
template <class V>
__device__ __forceinline__ void ll_combine_columns(const unsigned short* stage, const i64* at, const float* w, int k,
                                                   i64 c, float* acc) {
  for (int j0 = 0; j0 < k; j0 += 8) {
    V v[8];
#pragma unroll
    for (int q = 0; q < 8; ++q)
      if (j0 + q < k && at[j0 + q] >= 0) v[q] = *reinterpret_cast<const V*>(stage + at[j0 + q] + c);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      if (j0 + q >= k || at[j0 + q] < 0) continue;
      const float wj = w[j0 + q];
      if constexpr (same_type<V, int4>::value) {
        const u32 words[4] = {u32(v[q].x), u32(v[q].y), u32(v[q].z), u32(v[q].w)};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc[2 * e] = __fadd_rn(acc[2 * e], __fmul_rn(wj, bf16_low(words[e])));
          acc[2 * e + 1] = __fadd_rn(acc[2 * e + 1], __fmul_rn(wj, bf16_high(words[e])));
        }
      } else {
        acc[0] = __fadd_rn(acc[0], __fmul_rn(wj, __uint_as_float(u32(v[q]) << 16)));
      }
    }
  }
}

// Source, blocks over tokens (x) and column ranges (y, so that a thread has few columns and their
// loads go out at once): waits for every owner's flag, then out[t] = sum over its top-k slots in
// order of weight * row, in f32 with separate multiply and add (the CPU path's arithmetic), one
// rounding to BF16. Block (0, 0) also compares topk_idx with the dispatch's copy.
template <class Index>
__device__ __forceinline__ void ll_combine_recv_body(const unsigned char* window, const u64* signals, int ranks,
                                                     i64 tokens, i64 hidden, int k, const i64* routing,
                                                     const Index* topk, const float* weights, unsigned short* out,
                                                     u64 timeout_ns, volatile int* status) {
  const u64 seq = ll_sequence(signals);
  const unsigned short* const stage = reinterpret_cast<const unsigned short*>(
      window + ll_stage(seq, reinterpret_cast<const unsigned char*>(signals) - window));
  for (int r = threadIdx.x; r < ranks; r += blockDim.x)
    if (wait_flag(signals + ll_combine_flags(seq) + r, seq, timeout_ns) == 0) status[kLlTimedOut] = r + 1;
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (i64 i = threadIdx.x; i < tokens * k; i += blockDim.x)
      if (i64(topk[i]) != routing[i]) status[kLlTopkDiffers] = 1;
  // Where the token's staged rows start (-1: slot not selected), and its weights, read once per token.
  __shared__ i64 at[kLlMaxTopk];
  __shared__ float w[kLlMaxTopk];
  // Eight columns (16 bytes) per thread when rows allow, else one.
  const int per = hidden % 8 == 0 ? 8 : 1;
  for (i64 t = blockIdx.x; t < tokens; t += gridDim.x) {
    __syncthreads();  // the flags waited for above, or the previous token's table read by every thread
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
      at[j] = routing[t * k + j] >= 0 ? (t * k + j) * hidden : -1;
      w[j] = weights[t * k + j];
    }
    __syncthreads();
    const i64 stride = i64(gridDim.y) * blockDim.x * per;
    for (i64 c = (i64(blockIdx.y) * blockDim.x + threadIdx.x) * per; c < hidden; c += stride) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      unsigned short h[8];
      if (per == 8) {
        ll_combine_columns<int4>(stage, at, w, k, c, acc);
        for (int q = 0; q < 8; ++q) asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h[q]) : "f"(acc[q]));
        *reinterpret_cast<int4*>(out + t * hidden + c) =
            make_int4(int(u32(h[0]) | u32(h[1]) << 16), int(u32(h[2]) | u32(h[3]) << 16),
                      int(u32(h[4]) | u32(h[5]) << 16), int(u32(h[6]) | u32(h[7]) << 16));
      } else {
        ll_combine_columns<unsigned short>(stage, at, w, k, c, acc);
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h[0]) : "f"(acc[0]));
        out[t * hidden + c] = h[0];
      }
    }
  }
  ll_receive_done(signals, seq);
}

}  // namespace deepep::kernels
