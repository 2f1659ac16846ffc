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
// this rank's completed operation, which the next operation's kernels read (stream order).
__device__ __forceinline__ void ll_receive_done(const u64* own_signals, u64 seq) {
  u64* const signals = const_cast<u64*>(own_signals);
  if (last_block_arrives(signals + kLlRecvArrivals)) *reinterpret_cast<volatile u64*>(signals + kLlSequence) = seq;
}

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

// One warp quantizes 128 channels of a BF16 row (lane l holds channels 4l..4l+3 in `raw`) to e4m3,
// as the CPU path: scale = max(amax, 1e-4) / 448, value = e4m3(x * (448 / max(amax, 1e-4))).
// Returns the lane's four bytes; *scale gets the block's scale.
__device__ __forceinline__ u32 warp_quantize_128(uint2 raw, float* scale) {
  float amax = fmaxf(fmaxf(fabsf(bf16_low(raw.x)), fabsf(bf16_high(raw.x))),
                     fmaxf(fabsf(bf16_low(raw.y)), fabsf(bf16_high(raw.y))));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  amax = fmaxf(amax, 1e-4f);
  *scale = amax / 448.0f;
  return e4m3x4(raw.x, raw.y, 448.0f / amax);
}

constexpr int kLlMaxTopk = 32;

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
template <class Index>
__device__ __forceinline__ void ll_dispatch_send_body(const unsigned short* x, i64 tokens, i64 hidden,
                                                      const Index* topk, int k, int experts, int ranks, int me, int fp8,
                                                      i64 max_tokens, i64 rec_bytes, const u64* windows,
                                                      i64 signal_offset, i64* topk_copy) {
  const int local = experts / ranks;
  const u64 seq = ll_sequence(reinterpret_cast<const u64*>(windows[me] + signal_offset));
  const i64 stage = ll_stage(seq, signal_offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const i64 t = blockIdx.x;
  auto flag_of = [&](i64 e) {
    return reinterpret_cast<u64*>(windows[e / local] + signal_offset) + ll_dispatch_flags(seq) + (e % local) * ranks + me;
  };
  const bool bad = ll_topk_bad(topk, tokens, k, experts);
  if (blockIdx.x == 0)
    for (i64 i = threadIdx.x; i < tokens * k; i += blockDim.x) topk_copy[i] = i64(topk[i]);
  if (bad) {
    if (blockIdx.x == 0)
      for (i64 e = threadIdx.x; e < experts; e += blockDim.x) store_release_sys(flag_of(e), flag_word(seq, true, 0));
    return;
  }
  // Experts no token selects: their owners still get a flag.
  for (i64 e = blockIdx.x; e < experts; e += gridDim.x) {
    bool used = false;
    for (i64 i = threadIdx.x; i < tokens * k && !used; i += blockDim.x) used = i64(topk[i]) == e;
    if (!__syncthreads_or(used) && threadIdx.x == 0) store_release_sys(flag_of(e), flag_word(seq, false, 0));
  }
  if (t >= tokens) return;
  // For each expert e_j of this token: the tokens before it selecting e_j, and all of them.
  __shared__ i64 expert[kLlMaxTopk];
  __shared__ int before[kLlMaxTopk], total[kLlMaxTopk];
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    expert[j] = i64(topk[t * k + j]);
    before[j] = total[j] = 0;
  }
  __syncthreads();
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
      for (int j = 0; j < k; ++j)
        if (entry[q] == expert[j]) {
          atomicAdd(total + j, 1);
          if (i / k < t) atomicAdd(before + j, 1);
        }
    }
  }
  __syncthreads();
  // The row, once, to every destination. FP8: quantized into shared memory (a 128-channel block
  // per warp, eight in flight per lane), then 16-byte vectors out; BF16: 16-byte vectors (or bytes).
  auto record = [&](int j) {
    const i64 e = expert[j];
    return reinterpret_cast<unsigned char*>(windows[e / local]) + stage +
           (((e % local) * ranks + me) * max_tokens + before[j]) * rec_bytes;
  };
  const unsigned short* row = x + t * hidden;
  extern __shared__ int4 staged[];  // FP8: the quantized row and its scales (rec_bytes - 16 bytes)
  unsigned char* const staged_bytes = reinterpret_cast<unsigned char*>(staged);
  if (fp8) {
    const i64 blocks = hidden / 128;
    for (i64 b0 = warp; b0 < blocks; b0 += 8 * warps) {
      uint2 raw[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const i64 b = b0 + i64(i) * warps;
        raw[i] = b < blocks ? *reinterpret_cast<const uint2*>(row + b * 128 + lane * 4) : make_uint2(0, 0);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const i64 b = b0 + i64(i) * warps;
        if (b >= blocks) break;
        float scale;
        *reinterpret_cast<u32*>(staged_bytes + b * 128 + lane * 4) = warp_quantize_128(raw[i], &scale);
        if (lane == 0) reinterpret_cast<float*>(staged_bytes + hidden)[b] = scale;
      }
    }
    __syncthreads();
    const i64 vectors = (rec_bytes - 16) / 16;  // the row and scales, padding included
    for (int j = 0; j < k; ++j) {
      if (expert[j] < 0) continue;
      int4* const dst = reinterpret_cast<int4*>(record(j));
      for (i64 v = threadIdx.x; v < vectors; v += blockDim.x) dst[v] = staged[v];
    }
  } else if ((hidden * 2) % 16 == 0) {
    for (i64 v = threadIdx.x; v < hidden / 8; v += blockDim.x) {
      const int4 val = reinterpret_cast<const int4*>(row)[v];
      for (int j = 0; j < k; ++j)
        if (expert[j] >= 0) reinterpret_cast<int4*>(record(j))[v] = val;
    }
  } else {
    for (i64 c = threadIdx.x; c < hidden; c += blockDim.x)
      for (int j = 0; j < k; ++j)
        if (expert[j] >= 0) reinterpret_cast<unsigned short*>(record(j))[c] = row[c];
  }
  for (int j = threadIdx.x; j < k; j += blockDim.x)
    if (expert[j] >= 0) *reinterpret_cast<LlTail*>(record(j) + rec_bytes - 16) = LlTail{int(t), j};
  // Publish: the block whose row of e_j completes the expert's count raises its flag. The barrier
  // orders the block's writes before the counting threads' fences, which publish them all
  // (cumulativity): a fence per counting thread, not per thread (last_block_arrives says why).
  __syncthreads();
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const i64 e = expert[j];
    if (e < 0) continue;
    u64* const counter = reinterpret_cast<u64*>(windows[me] + signal_offset) + kLlSendCounters + e;
    __threadfence_system();
    if (atomicAdd(reinterpret_cast<unsigned long long*>(counter), 1ull) + 1 != u64(total[j])) continue;
    *counter = 0;  // the next operation's kernel starts after this one
    __threadfence_system();
    store_release_sys(flag_of(e), flag_word(seq, false, total[j]));
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
  const i64 warps = i64(gridDim.y) * (blockDim.x / 32);
  for (i64 j = i64(blockIdx.y) * (blockDim.x / 32) + threadIdx.x / 32; j < M; j += warps) {
    const i64 row = i64(le) * M + j;
    if (j >= total) {
      if (lane == 0) src_info[row] = src_slot[row] = -1;
      continue;
    }
    int r = 0;
    while (begin[r + 1] <= j) ++r;
    const unsigned char* rec = staging + ((i64(le) * ranks + r) * max_tokens + (j - begin[r])) * rec_bytes;
    warp_copy(recv_x + row * row_bytes, rec, row_bytes, lane);
    if (fp8) warp_copy(reinterpret_cast<unsigned char*>(recv_scales) + row * s_bytes, rec + row_bytes, s_bytes, lane);
    if (lane == 0) {
      const LlTail tail = *reinterpret_cast<const LlTail*>(rec + rec_bytes - 16);
      src_info[row] = tail.token;
      src_slot[row] = tail.token * k + tail.k;
    }
  }
  ll_receive_done(signals, seq);
}

// Owner of the experts, grid (local experts, blocks per expert): every received row of expert le
// goes back into its source's staging at the row's top-k slot (rows of 2 * hidden bytes); the block
// that finishes last raises every source's flag.
__device__ __forceinline__ void ll_combine_send_body(const unsigned char* x, i64 hidden, int ranks, int me,
                                                     i64 max_tokens, const i64* layout_range, const int* src_slot,
                                                     const u64* windows, i64 signal_offset) {
  const int le = blockIdx.x, lane = threadIdx.x & 31;
  const u64 seq = ll_sequence(reinterpret_cast<const u64*>(windows[me] + signal_offset));
  const i64 M = i64(ranks) * max_tokens, row_bytes = hidden * 2;
  const i64 warps = i64(gridDim.y) * (blockDim.x / 32);
  for (int r = 0; r < ranks; ++r) {
    const i64 range = layout_range[i64(le) * ranks + r], first = range >> 32, count = range & 0xffffffffll;
    unsigned char* const stage = reinterpret_cast<unsigned char*>(windows[r]) + ll_stage(seq, signal_offset);
    for (i64 j = i64(blockIdx.y) * (blockDim.x / 32) + threadIdx.x / 32; j < count; j += warps) {
      const i64 row = i64(le) * M + first + j;
      warp_copy(stage + i64(src_slot[row]) * row_bytes, x + row * row_bytes, row_bytes, lane);
    }
  }
  if (!last_block_arrives(reinterpret_cast<u64*>(windows[me] + signal_offset) + kLlCombineArrivals)) return;
  for (int r = 0; r < ranks; ++r)
    store_release_sys(reinterpret_cast<u64*>(windows[r] + signal_offset) + ll_combine_flags(seq) + me,
                      flag_word(seq, false, 0));
}

// Source, blocks over tokens: waits for every owner's flag, then out[t] = sum over its top-k slots
// in order of weight * row, in f32 with separate multiply and add (the CPU path's arithmetic), one
// rounding to BF16. Block 0 also compares topk_idx with the dispatch's copy.
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
  if (blockIdx.x == 0)
    for (i64 i = threadIdx.x; i < tokens * k; i += blockDim.x)
      if (i64(topk[i]) != routing[i]) status[kLlTopkDiffers] = 1;
  __syncthreads();
  // Eight columns (16 bytes) per thread when rows allow, else one.
  const int per = hidden % 8 == 0 ? 8 : 1;
  for (i64 t = blockIdx.x; t < tokens; t += gridDim.x)
    for (i64 c = i64(threadIdx.x) * per; c < hidden; c += i64(blockDim.x) * per) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int j = 0; j < k; ++j) {
        if (routing[t * k + j] < 0) continue;
        const float w = weights[t * k + j];
        const unsigned short* row = stage + (t * k + j) * hidden + c;
        if (per == 8) {
          const int4 v = *reinterpret_cast<const int4*>(row);
          const u32 words[4] = {u32(v.x), u32(v.y), u32(v.z), u32(v.w)};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            acc[2 * q] = __fadd_rn(acc[2 * q], __fmul_rn(w, bf16_low(words[q])));
            acc[2 * q + 1] = __fadd_rn(acc[2 * q + 1], __fmul_rn(w, bf16_high(words[q])));
          }
        } else {
          acc[0] = __fadd_rn(acc[0], __fmul_rn(w, __uint_as_float(u32(row[0]) << 16)));
        }
      }
      unsigned short h[8];
      for (int q = 0; q < per; ++q) asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h[q]) : "f"(acc[q]));
      if (per == 8)
        *reinterpret_cast<int4*>(out + t * hidden + c) =
            make_int4(int(u32(h[0]) | u32(h[1]) << 16), int(u32(h[2]) | u32(h[3]) << 16),
                      int(u32(h[4]) | u32(h[5]) << 16), int(u32(h[6]) | u32(h[7]) << 16));
      else
        out[t * hidden + c] = h[0];
    }
  ll_receive_done(signals, seq);
}

}  // namespace deepep::kernels
