// Device code of the low-latency (decoding) dispatch and combine on the cuda_ipc data plane
// (src/buffer/gpu_low_latency.cc). Unlike the normal mode's kernels, these signal each other
// through the windows instead of waiting for host barriers: a sender writes its rows into the
// receiver's window, then a flag word in the receiver's signal area (IpcWindow::signals) carrying
// the operation's sequence number; the receiving kernel polls its flags. The host's agreement at
// the start of every operation orders operations, so the staging a kernel writes is free and a
// flag from an earlier operation is told apart by its sequence number.
//
// Flags: (sequence << 32) | (bad << 31) | count; bad: the sender's top-k indices were invalid (it
// sent nothing), so every receiver reports that rank's error.
#pragma once

#include "deepep/kernels/intranode.cuh"

namespace deepep::kernels {

// Signal words (u64) of a window: where each flag lives.
constexpr i64 kLlDispatchFlags = 0;       // [experts]: local expert le of the owner, from source s: le * ranks + s
constexpr i64 kLlCombineFlags = 4096;     // [ranks]: from owner rank r
constexpr i64 kLlCombineArrivals = 8192;  // blocks of this rank's combine send that have finished
constexpr i64 kLlMaxExperts = 4096, kLlMaxRanks = 1024;
constexpr u64 kLlBad = 1ull << 31;

// Status words of one receiving kernel (zeroed before it): [0] 1 + a rank whose flag never came,
// [1] 1 + a rank whose top-k indices were invalid, [2] 1 when combine's topk_idx differs from the
// dispatch's.
constexpr int kLlTimedOut = 0, kLlBadSource = 1, kLlTopkDiffers = 2;

__device__ __forceinline__ u64 ll_flag(u64 seq, bool bad, i64 count) {
  return (seq << 32) | (bad ? kLlBad : 0ull) | u64(count);
}
__device__ __forceinline__ void store_release_sys(u64* p, u64 v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ u64 load_acquire_sys(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ u64 global_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Polls *flag until it carries `seq` (returns it) or timeout_ns pass (returns 0).
__device__ __forceinline__ u64 ll_wait(const u64* flag, u64 seq, u64 timeout_ns) {
  const u64 start = global_ns();
  for (;;) {
    const u64 v = load_acquire_sys(flag);
    if ((v >> 32) == seq) return v;
    if (global_ns() - start > timeout_ns) return 0;
  }
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

// One thread quantizes one 128-channel block of a BF16 row (16-byte aligned) to e4m3, as the CPU
// path: scale = max(amax, 1e-4) / 448, value = e4m3(x * (448 / max(amax, 1e-4))). Its sixteen
// loads are in flight at once.
__device__ __forceinline__ void quantize_block(const unsigned short* x, unsigned char* q, float* scale) {
  const int4* src = reinterpret_cast<const int4*>(x);
  int4 v[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = src[i];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const u32 w[4] = {u32(v[i].x), u32(v[i].y), u32(v[i].z), u32(v[i].w)};
#pragma unroll
    for (int j = 0; j < 4; ++j) amax = fmaxf(amax, fmaxf(fabsf(bf16_low(w[j])), fabsf(bf16_high(w[j]))));
  }
  amax = fmaxf(amax, 1e-4f);
  const float mul = 448.0f / amax;
  int4* dst = reinterpret_cast<int4*>(q);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int4 a = v[2 * i], b = v[2 * i + 1];
    dst[i] = make_int4(int(e4m3x4(u32(a.x), u32(a.y), mul)), int(e4m3x4(u32(a.z), u32(a.w), mul)),
                       int(e4m3x4(u32(b.x), u32(b.y), mul)), int(e4m3x4(u32(b.z), u32(b.w), mul)));
  }
  *scale = amax / 448.0f;
}

// Whether any top-k index is out of [-1, experts) or any token selects an expert twice (every block
// checks all of them, so every block of a sender knows).
template <class Index>
__device__ __forceinline__ bool ll_topk_bad(const Index* topk, i64 tokens, int k, int experts) {
  bool bad = false;
  for (i64 i = threadIdx.x; i < tokens * k; i += blockDim.x) {
    const i64 e = i64(topk[i]);
    bad |= e < -1 || e >= experts;
    for (i64 j = i - i % k; j < i && e >= 0; ++j) bad |= i64(topk[j]) == e;
  }
  return __syncthreads_or(bad) != 0;
}

// A dispatch record in the receiver's staging: the row (e4m3, or BF16), its scales (FP8), the
// token index and its top-k position at the source; rec_bytes apart.
struct LlTail {
  int token, k;
};

// Sender, one block per global expert e (grid = experts): the tokens selecting e, in token order,
// go to e's owner d into staging[(le * ranks + me) * max_tokens + i], then the flag. Block 0 also
// keeps the routing (as int64) for the handle.
template <class Index>
__device__ __forceinline__ void ll_dispatch_send_body(const unsigned short* x, i64 tokens, i64 hidden,
                                                      const Index* topk, int k, int experts, int ranks, int me, int fp8,
                                                      i64 max_tokens, i64 rec_bytes, const u64* windows,
                                                      i64 signal_offset, u64 seq, i64* topk_copy) {
  const int e = blockIdx.x, local = experts / ranks, d = e / local, le = e % local;
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const bool bad = ll_topk_bad(topk, tokens, k, experts);
  if (blockIdx.x == 0)
    for (i64 i = threadIdx.x; i < tokens * k; i += blockDim.x) topk_copy[i] = i64(topk[i]);
  unsigned char* const stage =
      reinterpret_cast<unsigned char*>(windows[d]) + (i64(le) * ranks + me) * max_tokens * rec_bytes;
  const i64 row_bytes = fp8 ? hidden : hidden * 2;
  __shared__ int hit_token[1024], hit_k[1024], warp_hits[32];
  i64 sent = 0;
  for (i64 t0 = 0; t0 < tokens && !bad; t0 += blockDim.x) {
    // This chunk's tokens selecting e, compacted in token order.
    const i64 t = t0 + threadIdx.x;
    int kk = -1;
    if (t < tokens)
      for (int j = 0; j < k; ++j) kk = i64(topk[t * k + j]) == e ? j : kk;
    const unsigned ballot = __ballot_sync(0xffffffffu, kk >= 0);
    if (lane == 0) warp_hits[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, n = 0;
    for (int w = 0; w < warps; ++w) {
      before += w < warp ? warp_hits[w] : 0;
      n += warp_hits[w];
    }
    if (kk >= 0) {
      const int at = before + __popc(ballot & ((1u << lane) - 1));
      hit_token[at] = int(t);
      hit_k[at] = kk;
    }
    __syncthreads();
    if (fp8) {  // one thread per 128-channel block of every row
      const i64 blocks = hidden / 128;
      for (i64 item = threadIdx.x; item < n * blocks; item += blockDim.x) {
        const i64 i = item / blocks, b = item - i * blocks;
        unsigned char* rec = stage + (sent + i) * rec_bytes;
        quantize_block(x + i64(hit_token[i]) * hidden + b * 128, rec + b * 128,
                       reinterpret_cast<float*>(rec + row_bytes) + b);
      }
    } else {
      for (int i = warp; i < n; i += warps)
        warp_copy(stage + (sent + i) * rec_bytes, reinterpret_cast<const unsigned char*>(x + i64(hit_token[i]) * hidden),
                  row_bytes, lane);
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x)
      *reinterpret_cast<LlTail*>(stage + (sent + i) * rec_bytes + rec_bytes - 8) = LlTail{hit_token[i], hit_k[i]};
    sent += n;
    __syncthreads();  // hit_token and warp_hits are rewritten by the next chunk
  }
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0)
    store_release_sys(reinterpret_cast<u64*>(windows[d] + signal_offset) + kLlDispatchFlags + i64(le) * ranks + me,
                      ll_flag(seq, bad, sent));
}

// Receiver, grid (local experts, blocks per expert): waits for every source's flag of local expert
// le, then packs the rows from 0 in (source rank, token) order into recv_x [local, ranks *
// max_tokens, ...], with the counts, (begin << 32) | count per source, each row's source token and
// its top-k slot at the source (token * k + position); -1 past the count.
__device__ __forceinline__ void ll_dispatch_recv_body(const unsigned char* window, const u64* signals, int ranks,
                                                      i64 max_tokens, i64 hidden, int fp8, i64 rec_bytes, u64 seq,
                                                      u64 timeout_ns, unsigned char* recv_x, float* recv_scales,
                                                      int* recv_count, i64* layout_range, int* src_info, int* src_slot,
                                                      int k, int* status) {
  const int le = blockIdx.x, lane = threadIdx.x & 31;
  const i64 M = i64(ranks) * max_tokens;
  const i64 row_bytes = fp8 ? hidden : hidden * 2, s_bytes = fp8 ? hidden / 128 * 4 : 0;
  __shared__ i64 begin[kLlMaxRanks + 1];
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) {
    const u64 v = ll_wait(signals + kLlDispatchFlags + i64(le) * ranks + r, seq, timeout_ns);
    if (v == 0) atomicMax(status + kLlTimedOut, r + 1);
    if (v & kLlBad) atomicMax(status + kLlBadSource, r + 1);
    begin[r + 1] = i64(v & (kLlBad - 1));
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
    const unsigned char* rec = window + ((i64(le) * ranks + r) * max_tokens + (j - begin[r])) * rec_bytes;
    warp_copy(recv_x + row * row_bytes, rec, row_bytes, lane);
    if (fp8) warp_copy(reinterpret_cast<unsigned char*>(recv_scales) + row * s_bytes, rec + row_bytes, s_bytes, lane);
    if (lane == 0) {
      const LlTail tail = *reinterpret_cast<const LlTail*>(rec + rec_bytes - 8);
      src_info[row] = tail.token;
      src_slot[row] = tail.token * k + tail.k;
    }
  }
}

// Owner of the experts, grid (local experts, blocks per expert): every received row of expert le
// goes back into its source's staging at the row's top-k slot (rows of 2 * hidden bytes); the block
// that finishes last raises every source's flag.
__device__ __forceinline__ void ll_combine_send_body(const unsigned char* x, i64 hidden, int ranks, int me,
                                                     i64 max_tokens, const i64* layout_range, const int* src_slot,
                                                     const u64* windows, i64 signal_offset, u64 seq) {
  const int le = blockIdx.x, lane = threadIdx.x & 31;
  const i64 M = i64(ranks) * max_tokens, row_bytes = hidden * 2;
  const i64 warps = i64(gridDim.y) * (blockDim.x / 32);
  for (int r = 0; r < ranks; ++r) {
    const i64 range = layout_range[i64(le) * ranks + r], first = range >> 32, count = range & 0xffffffffll;
    unsigned char* const stage = reinterpret_cast<unsigned char*>(windows[r]);
    for (i64 j = i64(blockIdx.y) * (blockDim.x / 32) + threadIdx.x / 32; j < count; j += warps) {
      const i64 row = i64(le) * M + first + j;
      warp_copy(stage + i64(src_slot[row]) * row_bytes, x + row * row_bytes, row_bytes, lane);
    }
  }
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x != 0) return;
  u64* const arrivals = reinterpret_cast<u64*>(windows[me] + signal_offset) + kLlCombineArrivals;
  const u64 blocks = u64(gridDim.x) * gridDim.y;
  if (atomicAdd(reinterpret_cast<unsigned long long*>(arrivals), 1ull) != blocks - 1) return;
  *arrivals = 0;  // the next combine's blocks start after this kernel
  __threadfence_system();
  for (int r = 0; r < ranks; ++r)
    store_release_sys(reinterpret_cast<u64*>(windows[r] + signal_offset) + kLlCombineFlags + me, ll_flag(seq, false, 0));
}

// Source, blocks over tokens: waits for every owner's flag, then out[t] = sum over its top-k slots
// in order of weight * row, in f32 with separate multiply and add (the CPU path's arithmetic), one
// rounding to BF16. Block 0 also compares topk_idx with the dispatch's copy.
template <class Index>
__device__ __forceinline__ void ll_combine_recv_body(const unsigned short* stage, const u64* signals, int ranks,
                                                     i64 tokens, i64 hidden, int k, const i64* routing,
                                                     const Index* topk, const float* weights, unsigned short* out,
                                                     u64 seq, u64 timeout_ns, int* status) {
  for (int r = threadIdx.x; r < ranks; r += blockDim.x)
    if (ll_wait(signals + kLlCombineFlags + r, seq, timeout_ns) == 0) atomicMax(status + kLlTimedOut, r + 1);
  if (blockIdx.x == 0)
    for (i64 i = threadIdx.x; i < tokens * k; i += blockDim.x)
      if (i64(topk[i]) != routing[i]) atomicMax(status + kLlTopkDiffers, 1);
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
}

}  // namespace deepep::kernels
