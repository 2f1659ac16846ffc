// Device code of the cuda_ipc data plane (src/transport/cuda_ipc/): kernels that move tokens and
// reduce tensors through the device windows every rank of the host maps (IpcWindow). The
// collectives' kernels run between device barriers (device_barrier_body): each only reads or
// writes memory the protocol gave it for that phase (the one-kernel all_reduce_body signals block
// by block instead). Normal-mode dispatch and combine signal each other through the windows'
// signal areas ("Signals between ranks", below).
// JIT-compiled by NVRTC (device_plane.cc) with no toolkit headers: conversions are PTX.
//
// Launch shapes: every kernel loops grid-stride, so any grid works; device_plane.cc picks them.
#pragma once

#include "deepep/kernels/normal_layout.h"
#include "deepep/kernels/signal_layout.h"
#include "deepep/kernels/timeline.h"

namespace deepep::kernels {

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

template <class A, class B>
struct same_type {
  static constexpr bool value = false;
};
template <class A>
struct same_type<A, A> {
  static constexpr bool value = true;
};

// --- signals between ranks -----------------------------------------------------------------------

// A flag word: (sequence << 32) | (bad << 31) | count. The sequence numbers an operation, so a flag
// left by an earlier one is never taken for this one's; a fresh signal area holds 0.
constexpr u64 kFlagBad = 1ull << 31;
__device__ __forceinline__ u64 flag_word(u64 seq, bool bad, i64 count) {
  return (seq << 32) | (bad ? kFlagBad : 0ull) | u64(count);
}
// Peer memory is another GPU's (over NVLink or PCIe): its flags are published and read at system scope.
__device__ __forceinline__ void store_release_sys(u64* p, u64 v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// A flag after a system fence (a fence and then relaxed stores publish as a release does), or one
// that publishes no data. A release store fences by itself (MEMBAR.SYS), which waits for every
// earlier store of the thread -- the previous flag to a peer included: a round trip per flag.
__device__ __forceinline__ void store_relaxed_sys(u64* p, u64 v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ u64 load_acquire_sys(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// Between the blocks of one kernel (the routing's chunk flags): GPU scope is enough.
__device__ __forceinline__ void store_release_gpu(u64* p, u64 v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ u64 load_acquire_gpu(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ u64 global_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread 0 of a block appends a record to the timeline (timeline.h) when the kernels are built with
// DEEPEP_TIMELINE; otherwise nothing.
__device__ __forceinline__ void timeline_stamp(unsigned event, i64 peer, i64 chunk) {
#ifdef DEEPEP_TIMELINE
  if (threadIdx.x != 0) return;
  u64* const stamps = reinterpret_cast<u64*>(DEEPEP_TIMELINE);
  const u64 i = atomicAdd(reinterpret_cast<unsigned long long*>(stamps), 1ull);
  if (i < kTimelineRecords) {
    stamps[1 + 2 * i] = global_ns();
    stamps[2 + 2 * i] = timeline_tag(event, u64(peer), blockIdx.x, u64(chunk));
  }
#endif
}

// What a flag must carry: the sequence `seq` in its upper 32 bits (a flag_word), that or a later
// one (op_reached), the whole word equal to `seq` (the normal-mode chunk flags, which carry the
// full 64-bit operation number and no count), or that or a larger one (the device barriers).
enum class FlagMatch { kSeq, kSeqOrLater, kWhole, kWholeOrLater };

// Polls *flag until it carries `seq` as `match` says and returns it, or until timeout_ns pass
// (returns 0).
__device__ __forceinline__ u64 wait_flag(const u64* flag, u64 seq, u64 timeout_ns, FlagMatch match = FlagMatch::kSeq) {
  const u64 start = global_ns();
  for (;;) {
    const u64 v = load_acquire_sys(flag);
    const bool ok = match == FlagMatch::kWhole          ? v == seq
                    : match == FlagMatch::kWholeOrLater ? v >= seq
                    : match == FlagMatch::kSeqOrLater   ? op_reached(v >> 32, seq)
                                                        : (v >> 32) == seq;
    if (ok) return v;
    if (global_ns() - start > timeout_ns) return 0;
  }
}

// Programmatic dependent launch (sm_90+; no-ops before, and in a kernel not launched that way):
// launch_dependents lets the kernel queued after this one on the stream start once every block of
// this one has called it (rt::CudaKernel::launch_overlapping); there, wait_previous_grid waits for
// this one's end, after which its writes are visible and what the stream runs next follows it too.
__device__ __forceinline__ void launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_previous_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The block's dynamic shared memory as i64 words, sized at launch (device_plane.cc): the
// normal-mode kernels keep their per-rank values there, so that a block needs only what its ranks
// take and fits beside the kernel it overlaps on an SM even where the driver set the SM up with a
// small shared memory size for that kernel (a static array for the most ranks took 8-16 KiB a block).
__device__ __forceinline__ i64* shared_words() {
  extern __shared__ __align__(16) i64 words[];
  return words;
}

// Every thread of the grid calls it once its writes are done: true in thread 0 of the block that
// gets here last, whose later stores (a release) then publish every block's writes. The counter
// is reset for the next kernel using it, which starts after this one (stream order).
// One fence per block, by thread 0 after the barrier: the barrier orders the block's writes before
// it and the system-scope fence is cumulative, so it publishes them all (a fence in every thread
// costs as many system-scope fences as the grid has threads).
__device__ __forceinline__ bool last_block_arrives(u64* arrivals) {
  __syncthreads();
  if (threadIdx.x != 0) return false;
  __threadfence_system();
  const u64 blocks = u64(gridDim.x) * gridDim.y;
  if (atomicAdd(reinterpret_cast<unsigned long long*>(arrivals), 1ull) != blocks - 1) return false;
  *arrivals = 0;
  __threadfence_system();
  return true;
}

// --- copies ---------------------------------------------------------------------------------------

// One warp copies `bytes` from src to dst in units U (int4, u32 or bytes), kInFlight per lane at a
// time so that a peer's link (NVLink) or HBM sees enough outstanding requests; the bytes before
// dst's first U boundary and after the last whole U go one per lane.
template <class U, int kInFlight>
__device__ __forceinline__ void warp_copy_as(unsigned char* dst, const unsigned char* src, i64 bytes, int lane) {
  constexpr i64 kSize = sizeof(U);
  i64 head = i64((kSize - (u64(dst) & (kSize - 1))) & (kSize - 1));
  head = head < bytes ? head : bytes;
  if (lane < head) dst[lane] = src[lane];
  U* d = reinterpret_cast<U*>(dst + head);
  const U* s = reinterpret_cast<const U*>(src + head);
  const i64 n = (bytes - head) / kSize;
  // kInFlight loads before their stores, the last round too (fewer than kInFlight per lane left).
  for (i64 i = lane; i < n; i += 32 * kInFlight) {
    U v[kInFlight];
#pragma unroll
    for (int q = 0; q < kInFlight; ++q)
      if (i + 32 * q < n) v[q] = s[i + 32 * q];
#pragma unroll
    for (int q = 0; q < kInFlight; ++q)
      if (i + 32 * q < n) d[i + 32 * q] = v[q];
  }
  const i64 done = head + n * kSize;
  if (lane < bytes - done) dst[done + lane] = src[done + lane];
}

// The widest unit both ends share an alignment for: 16-byte vectors whenever dst and src are equally
// aligned modulo 16 (row copies at any row offset of arrays with 16-byte aligned bases). Four units
// in flight per lane; the low-latency kernels' 4 KiB pieces take eight (a piece in one round).
template <int kInFlight = 4>
__device__ __forceinline__ void warp_copy(unsigned char* dst, const unsigned char* src, i64 bytes, int lane) {
  const u64 skew = u64(dst) ^ u64(src);
  if ((skew & 15) == 0)
    warp_copy_as<int4, kInFlight>(dst, src, bytes, lane);
  else if ((skew & 3) == 0)
    warp_copy_as<u32, kInFlight>(dst, src, bytes, lane);
  else
    warp_copy_as<unsigned char, kInFlight>(dst, src, bytes, lane);
}

// A list of independent copies: descriptor j = {dst, src, bytes}; blockIdx.y picks the descriptor
// and the warps of blockIdx.x split it into 8 KiB pieces (kCopyPiece).
constexpr i64 kCopyPiece = 8 << 10;

struct CopyDesc {
  u64 dst, src;
  i64 bytes;
};

// Whether a wait of this rank has timed out (its signal area's kNormalGaveUp word, `gave_up`):
// then the collectives' kernels queued behind a device barrier that gave up do nothing.
__device__ __forceinline__ bool rank_gave_up(const u64* gave_up) {
  return *reinterpret_cast<const volatile u64*>(gave_up) != 0;
}

// One copy cut into kCopyPiece pieces over the warps of blockIdx.x.
__device__ __forceinline__ void copy_pieces(const CopyDesc& c) {
  const int lane = threadIdx.x & 31;
  const i64 piece = kCopyPiece;
  const i64 warps = i64(gridDim.x) * (blockDim.x / 32);
  for (i64 p = i64(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; p * piece < c.bytes; p += warps) {
    const i64 at = p * piece, n = c.bytes - at < piece ? c.bytes - at : piece;
    warp_copy(reinterpret_cast<unsigned char*>(c.dst) + at, reinterpret_cast<const unsigned char*>(c.src) + at, n,
              lane);
  }
}

__device__ __forceinline__ void multi_copy_body(const CopyDesc* descs, const u64* gave_up) {
  if (!rank_gave_up(gave_up)) copy_pieces(descs[blockIdx.y]);
}

// --- dispatch -------------------------------------------------------------------------------------

// The routing of a dispatch, one kernel over chunks of blockDim.x tokens (one token per thread) for
// each destination rank d (blockIdx.y; gridDim.x chunks): whether each token goes to d (one of its
// top-k experts is d's) into in_rank [tokens, ranks]; its position among those going to d, in token
// order, into slots [tokens, ranks] (-1 where it does not go); the tokens going to d in that order
// into order [ranks, tokens] (its first summary[d] entries: what the scatter walks). A chunk's
// first slot is the count of the chunks before it, found by a single-pass scan: each block
// publishes its own count, then walks back over the flags of the chunks before it until one carries
// its whole prefix, and publishes its own prefix. A block's chunk is the ticket it draws on start
// (per destination), not its index, so every chunk it waits for belongs to a block that is already
// running, in whatever order the GPU starts blocks. The block that finishes last writes the
// summary, on the device and into `host` (page-locked memory the host reads once the kernel is
// done: no copy on the stream):
// [0, ranks) tokens per destination; [ranks, 2 ranks) zeros, left for the tokens received from each
// source (dispatch_receive_body); [2 ranks] the complement of the first out-of-range flat index t *
// k + j (0: none; the complement lets atomicMax over zeroed memory find the first); [2 ranks + 1, 2
// ranks + 1 + experts) (token, k) pairs per expert.
// host_mask (page-locked, or null): in_rank a bit per token, [ranks][ceil(tokens / 32)] words, bit
// t % 32 of word t / 32 (a warp's ballot): what the host checks a given layout against, without a
// copy queued between the routing and the scatter (one cost a 2-GPU dispatch 6-10%, stop 25).
// scratch (route_scratch_words; zero before the first call, and left zero by every call's last
// block, so no memset is queued): the chunks' flags [ranks, chunks], the pair counters [experts],
// the first bad entry, the blocks arrived, the tickets drawn [ranks].
constexpr u64 kRoutePrefix = 1ull << 63;     // a chunk's flag: its count and every chunk's before it
constexpr u64 kRouteAggregate = 1ull << 62;  // its own count only
constexpr u64 kRouteCount = kRouteAggregate - 1;

template <class Index>
__device__ __forceinline__ void dispatch_route_body(const Index* topk, i64 tokens, int k, int experts,
                                                    int experts_per_rank, int ranks, unsigned char* in_rank,
                                                    int* slots, int* order, i64* summary, i64* host, u64* scratch,
                                                    unsigned* host_mask) {
  const int d = blockIdx.y, chunks = gridDim.x;
  u64* const flags = scratch;
  u64* const pairs = flags + i64(ranks) * chunks;
  u64* const bad = pairs + experts;
  u64* const arrivals = bad + 1;
  u64* const tickets = arrivals + 1;
  __shared__ int drawn;
  if (threadIdx.x == 0) drawn = int(atomicAdd(reinterpret_cast<unsigned long long*>(tickets + d), 1ull));
  __syncthreads();
  const int chunk = drawn;
  const i64 lo = i64(d) * experts_per_rank, hi = lo + experts_per_rank;
  const i64 t = i64(chunk) * blockDim.x + threadIdx.x;
  bool hit = false;
  if (t < tokens) {
    constexpr int kLoads = 8;  // entries loaded before any is used, so that their latencies overlap
    for (int c0 = 0; c0 < k; c0 += kLoads) {
      i64 e[kLoads];
#pragma unroll
      for (int j = 0; j < kLoads; ++j) e[j] = c0 + j < k ? i64(topk[t * k + c0 + j]) : -1;
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        if (e[j] >= lo && e[j] < hi) {
          hit = true;
          atomicAdd(reinterpret_cast<unsigned long long*>(pairs + e[j]), 1ull);
        } else if (d == 0 && (e[j] < -1 || e[j] >= experts)) {
          atomicMax(reinterpret_cast<unsigned long long*>(bad), ~u64(t * k + c0 + j));
        }
      }
    }
    in_rank[t * ranks + d] = hit ? 1 : 0;
  }
  // The block's count, and each thread's place among its hits.
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  __shared__ int warp_hits[32];
  __shared__ i64 first_slot;
  const unsigned ballot = __ballot_sync(0xffffffffu, hit);
  if (lane == 0) warp_hits[warp] = __popc(ballot);
  if (host_mask && lane == 0 && t < tokens) host_mask[i64(d) * ((tokens + 31) / 32) + t / 32] = ballot;
  __syncthreads();
  int earlier_warps = 0, count = 0;
  for (int w = 0; w < int(blockDim.x / 32); ++w) {
    earlier_warps += w < warp ? warp_hits[w] : 0;
    count += warp_hits[w];
  }
  if (warp == 0) {  // the look-back, 32 chunks at a time (a lane each, their loads in flight together)
    u64* const mine = flags + i64(d) * chunks;
    if (lane == 0 && chunk > 0) store_release_gpu(mine + chunk, kRouteAggregate | u64(count));
    i64 before = 0;
    for (int top = chunk - 1; top >= 0; top -= 32) {
      const int j = top - lane;
      u64 v = 0;
      if (j >= 0) {
        do v = load_acquire_gpu(mine + j);
        while (v == 0);
      }
      // The nearest chunk with its whole prefix ends the walk; the chunks after it add their counts.
      const unsigned prefixes = __ballot_sync(0xffffffffu, (v & kRoutePrefix) != 0);
      const int stop = prefixes ? __ffs(prefixes) - 1 : 31;
      i64 sum = lane <= stop ? i64(v & kRouteCount) : 0;
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      before += sum;
      if (prefixes) break;
    }
    if (lane == 0) {
      store_release_gpu(mine + chunk, kRoutePrefix | u64(before + count));
      first_slot = before;
    }
  }
  __syncthreads();
  const i64 slot = first_slot + earlier_warps + __popc(ballot & ((1u << lane) - 1));
  if (t < tokens) slots[t * ranks + d] = hit ? int(slot) : -1;
  if (hit) order[i64(d) * tokens + slot] = int(t);

  // The last block: the summary, then the scratch back to zero (every block has read its flags).
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(reinterpret_cast<unsigned long long*>(arrivals), 1ull) == u64(chunks) * ranks - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) {
    const i64 all = i64(load_acquire_gpu(flags + i64(r) * chunks + chunks - 1) & kRouteCount);
    summary[r] = host[r] = all;
    summary[ranks + r] = host[ranks + r] = 0;
  }
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    const i64 n = i64(atomicExch(reinterpret_cast<unsigned long long*>(pairs + e), 0ull));
    summary[2 * ranks + 1 + e] = host[2 * ranks + 1 + e] = n;
  }
  __syncthreads();  // every block's flags read (the totals above) before they are cleared
  for (i64 i = threadIdx.x; i < i64(ranks) * chunks; i += blockDim.x) flags[i] = 0;
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) tickets[r] = 0;
  if (threadIdx.x == 0) {
    const i64 b = i64(atomicExch(reinterpret_cast<unsigned long long*>(bad), 0ull));
    summary[2 * ranks] = host[2 * ranks] = b;
    *arrivals = 0;
  }
}

// One warp writes token t's row for destination d at row `row` of the arrays at `to` (0: an array
// the dispatch does not have): the row and its scales, the top-k indices remapped to d's local
// experts (-1 elsewhere, weight 0 there) and the token's index here.
__device__ __forceinline__ void dispatch_row(const ArrayAddresses& to, i64 row, i64 t, int d, const unsigned char* x,
                                             const unsigned char* scales, const void* topk, int topk_i64, int k,
                                             const float* weights, const RegionRows& rows, int experts_per_rank,
                                             int lane) {
  const i64 x_row = rows.bytes[0], s_row = rows.bytes[1];
  warp_copy(reinterpret_cast<unsigned char*>(to.at[0]) + row * x_row, x + t * x_row, x_row, lane);
  if (to.at[1]) warp_copy(reinterpret_cast<unsigned char*>(to.at[1]) + row * s_row, scales + t * s_row, s_row, lane);
  for (int q = lane; to.at[2] && q < k; q += 32) {
    const i64 e = topk_i64 ? static_cast<const i64*>(topk)[t * k + q] : static_cast<const int*>(topk)[t * k + q];
    const i64 lo = i64(d) * experts_per_rank;
    const bool local = e >= lo && e < lo + experts_per_rank;
    reinterpret_cast<i64*>(to.at[2])[row * k + q] = local ? e - lo : -1;
    if (to.at[3]) reinterpret_cast<float*>(to.at[3])[row * k + q] = local ? weights[t * k + q] : 0.0f;
  }
  if (to.at[4] && lane == 0) reinterpret_cast<int*>(to.at[4])[row] = int(t);
}

// Whether this rank's dispatch may write (block-uniform): its top-k was valid (summary[2 ranks],
// dispatch_route_body) and its rows fit its region in every other rank's window. Else it writes
// nothing; the host found the same in the counts the routing left it and raises it through the
// agreement.
__device__ __forceinline__ bool dispatch_sends_valid(const i64* summary, const RegionRows& rows, i64 region, int ranks,
                                                     int me) {
  bool bad = threadIdx.x == 0 && summary[2 * ranks] != 0;
  for (int d = threadIdx.x; d < ranks; d += blockDim.x) {
    if (d == me) continue;
    i64 off[kRegionArrays];
    bad |= region_offsets(rows, summary[d], off) > region;
  }
  return !__syncthreads_or(bad);
}

// --- normal-mode signalling -----------------------------------------------------------------------
//
// A normal-mode dispatch or combine is a scatter kernel, which writes into the peers' windows, then
// a receive kernel, which reads what arrived in this rank's window (the dispatch's copy-out, the
// combine's reduction), on the rank's communication stream; an operation's number is that of its
// agreement (the engine counts them alike on every rank), so every attempt has its own:
//   scatter: every block, before its first write, waits until every peer has read its window's data
//            of the previous operation (the peer's consumed word carries `prev` or a later number:
//            normal_send_begin); then it raises a flag (`seq`) in the receiver's signal area after
//            each chunk of rows it wrote there ("dispatch and combine in chunks", below);
//   receive: every block waits for a chunk's flag of `seq` before it reads the chunk; the block
//            that finishes last records `seq` in this rank's consumed word.
// So a sender never overwrites data or a flag its receiver has not read yet, and no host step sits
// between the kernels or between operations. A dispatch's scatter may run before its agreement;
// when that agreement fails no receive follows, and `prev` stays the last operation that had one
// (the rows, where no receive reads them, are overwritten by the next operation's). Waits are
// bounded by timeout_ns; a rank that does not come is reported in the status word, and later
// blocks then do not wait again.

// Signal words and status words: signal_layout.h.

struct NormalSignals {
  const u64* windows;  // every rank's window, [ranks]
  i64 signal_offset;
  int ranks, me;
  u64 seq, prev;  // this operation's number and the previous received one's (0: none), 32 bits kept
  u64 op;         // this operation's number whole (its agreement's; the chunk flags carry it)
  u64 timeout_ns;
  volatile int* status;
};

__device__ __forceinline__ u64* signals_of(const NormalSignals& g, int r) {
  return reinterpret_cast<u64*>(g.windows[r] + g.signal_offset);
}

// Polls rank r's `word` for operation `seq` unless a wait of this rank has timed out already (so
// blocks of later waves do not each wait the timeout again). The mark lives in the own window: every
// block reading the status word in page-locked host memory instead (a PCIe read each, thousands per
// kernel) made a normal-mode dispatch take 3.7 ms instead of 0.2 on the H200 x2.
__device__ __forceinline__ void wait_rank(const NormalSignals& g, const u64* word, u64 seq, int r,
                                          FlagMatch match = FlagMatch::kSeq) {
  volatile u64* const gave_up = signals_of(g, g.me) + kNormalGaveUp;
  if (*gave_up != 0 || wait_flag(word, seq, g.timeout_ns, match) != 0) return;
  g.status[kNormalTimedOut] = r + 1;
  *gave_up = 1;
}

// Whether a wait of this rank has timed out (in this kernel or an earlier one): the communicator
// is broken then, and the kernels only run to their end without touching any window.
__device__ __forceinline__ bool normal_gave_up(const NormalSignals& g) {
  return rank_gave_up(signals_of(g, g.me) + kNormalGaveUp);
}

// Before a scatter's writes: true (the same in every thread of the block) when every peer has read
// its window's data of the previous operation: its consumed word carries `prev` or a later number.
// Later: a peer that gets nothing from this rank in this operation (a combine returning no rows to
// it, or a block of this scatter with no chunk for it) waits for nothing of this rank's and may have
// read all of this operation already, before this block looks; it is then at this operation, not
// beyond (its next scatter waits for this rank's receive, which follows this scatter). After a
// timeout nothing is written, so a slow peer still reading is never overwritten.
__device__ __forceinline__ bool normal_send_begin(const NormalSignals& g) {
  if (g.prev != 0)
    for (int r = threadIdx.x; r < g.ranks; r += blockDim.x)
      if (r != g.me) wait_rank(g, signals_of(g, r) + kNormalConsumed, g.prev, r, FlagMatch::kSeqOrLater);
  return !__syncthreads_or(normal_gave_up(g));
}

// A receive that gave up does not record the operation as read: no peer may write again. A receive
// launched overlapping its scatter ends after it (what the stream runs next follows both).
__device__ __forceinline__ void normal_recv_end(const NormalSignals& g) {
  wait_previous_grid();
  u64* const own = signals_of(g, g.me);
  if (last_block_arrives(own + kNormalRecvArrivals) && !normal_gave_up(g))
    store_release_sys(own + kNormalConsumed, flag_word(g.seq, false, 0));
}

// --- dispatch and combine in chunks --------------------------------------------------------------
//
// Both move what a rank sends another in chunks of chunk_rows rows in slot order (normal_layout.h),
// a flag per chunk raised in the receiver once the chunk's rows are written; a dispatch's scatter
// first raises its flag in every peer, carrying its count (it publishes no rows: the receiver learns
// every source's chunks and first output row from it). The receive (the dispatch's copy-out, the
// combine's reduction) is launched overlapping the scatter (sm_90+; the scatter lets it start once
// all its blocks run, so it never holds SMs the scatter waits for) and reads each chunk as soon as
// its flag is there: it runs while rows still arrive, not after the last one. Before sm_90 it runs
// after the scatter, as any kernel.

__device__ __forceinline__ u64* chunk_flags(const NormalSignals& g, int r, int s) {
  return signals_of(g, r) + kNormalChunkFlags + i64(s) * (kNormalChunkWords / g.ranks);
}

// The scatters' chunks, dealt round the blocks chunk-major over the destinations (every
// destination's first chunks go out first): rows(d) rows go to rank d (not to this rank itself
// with skip_me) in chunks of chunk_rows(.., least); for each chunk that falls to this block,
// write(d, n, first, end) writes rows [first, end) of d's n with the block's warps, then the block
// publishes them and raises the chunk's flag in d.
template <class Rows, class Write>
__device__ __forceinline__ void scatter_chunks(const NormalSignals& g, bool skip_me, i64 least, Rows rows,
                                               Write write) {
  __shared__ unsigned long long most;  // chunks of the destination that has the most
  if (threadIdx.x == 0) most = 0;
  __syncthreads();
  for (int d = threadIdx.x; d < g.ranks; d += blockDim.x)
    if (!skip_me || d != g.me) atomicMax(&most, u64(chunk_count(rows(d), g.ranks, least)));
  __syncthreads();
  const int dests = skip_me ? g.ranks - 1 : g.ranks;
  timeline_stamp(kScatterStart, 0, 0);
  for (i64 u = blockIdx.x; u < i64(most) * dests; u += gridDim.x) {
    const i64 j = u / dests;
    const int p = int(u - j * dests), d = skip_me && p >= g.me ? p + 1 : p;
    const i64 n = rows(d), per = chunk_rows(n, g.ranks, least), first = j * per;
    if (first >= n) continue;
    timeline_stamp(kChunkBegin, d, j);
    write(d, n, first, first + per < n ? first + per : n);
    __syncthreads();
    if (threadIdx.x == 0) {  // the fence is cumulative: it publishes the block's rows (last_block_arrives)
      __threadfence_system();
      store_relaxed_sys(chunk_flags(g, d, g.me) + j, g.op);
      timeline_stamp(kChunkFlagged, d, j);
    }
  }
  timeline_stamp(kScatterEnd, 0, 0);
}

// order: [ranks, tokens], the tokens going to each rank in slot order (dispatch_route_body);
// sent[d]: the tokens going to d. Chunk-major over the destinations, so that every destination's
// first chunks go out first. Needs no other rank's counts, so it may run before the agreement.
__device__ __forceinline__ void dispatch_scatter_body(const unsigned char* x, const unsigned char* scales,
                                                      const void* topk, int topk_i64, int k, const float* weights,
                                                      const int* order, i64 tokens, const i64* sent,
                                                      const RegionRows& rows, i64 region, const NormalSignals& g,
                                                      int experts_per_rank) {
  launch_dependents();
  if (!normal_send_begin(g)) return;  // no flags: the peers' waits time out
  if (blockIdx.x == 0)
    for (int r = threadIdx.x; r < g.ranks; r += blockDim.x)
      if (r != g.me) store_relaxed_sys(signals_of(g, r) + kNormalFlags + g.me, flag_word(g.seq, false, sent[r]));
  if (!dispatch_sends_valid(sent, rows, region, g.ranks, g.me)) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  // The other ranks only (this rank's own rows: dispatch_receive_body).
  scatter_chunks(g, true, kDispatchChunkRows, [&](int d) { return sent[d]; }, [&](int d, i64 n, i64 first, i64 end) {
    i64 off[kRegionArrays];
    region_offsets(rows, n, off);
    const u64 base = g.windows[d] + u64(i64(g.me) * region);
    ArrayAddresses to;
    for (int i = 0; i < kRegionArrays; ++i) to.at[i] = off[i] >= 0 ? base + u64(off[i]) : 0;
    for (i64 row = first + warp; row < end; row += warps)
      dispatch_row(to, row, order[i64(d) * tokens + row], d, x, scales, topk, topk_i64, k, weights, rows,
                   experts_per_rank, lane);
  });
}

// Every source's rows into the outputs `out`, source s's after those of the sources before it, in
// chunks dealt round the blocks (receive_unit): this rank's own first, straight from x (they touch
// no window and wait for nothing), then every other source's chunk-major over the sources (the
// order the scatters send them), out of its region of this rank's window once the chunk's flag is
// there. The counts go into summary[ranks + s], for combine. Dynamic shared memory: 2 ranks words.
constexpr i64 kChunkPiece = 4 << 10;
__device__ __forceinline__ void dispatch_receive_body(const unsigned char* x, const unsigned char* scales,
                                                      const void* topk, int topk_i64, int k, const float* weights,
                                                      const int* order, i64 tokens, const unsigned char* window,
                                                      i64* summary, const ArrayAddresses& out, const RegionRows& rows,
                                                      i64 region, const NormalSignals& g, int experts_per_rank,
                                                      i64 max_chunks) {
  const u64* const own = signals_of(g, g.me);
  for (int r = threadIdx.x; r < g.ranks; r += blockDim.x)
    if (r != g.me) wait_rank(g, own + kNormalFlags + r, g.seq, r);
  if (__syncthreads_or(normal_gave_up(g))) return;
  i64* const count = shared_words();        // [ranks] per source: its rows,
  i64* const first_out = count + g.ranks;  // and its first output row
  for (int r = threadIdx.x; r < g.ranks; r += blockDim.x) {
    count[r] = r == g.me ? summary[g.me] : i64(load_acquire_sys(own + kNormalFlags + r) & 0x7fffffffull);
    if (blockIdx.x == 0) summary[g.ranks + r] = count[r];
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (i64 r = 0, at = 0; r < g.ranks; at += count[r++]) first_out[r] = at;
  __syncthreads();
  timeline_stamp(kReceiveStart, 0, 0);
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const i64 own_chunks = chunk_count(count[g.me], g.ranks, kDispatchChunkRows);
  for (i64 u = blockIdx.x; u < own_chunks + max_chunks * (g.ranks - 1); u += gridDim.x) {
    const ReceiveUnit unit = receive_unit(u, own_chunks, g.ranks, g.me);
    const int s = unit.source;
    const i64 j = unit.chunk, n = count[s], per = chunk_rows(n, g.ranks, kDispatchChunkRows), first = j * per;
    if (first >= n) continue;
    const i64 end = first + per < n ? first + per : n;
    if (s == g.me) {
      for (i64 row = first + warp; row < end; row += warps)
        dispatch_row(out, first_out[s] + row, order[i64(s) * tokens + row], s, x, scales, topk, topk_i64, k, weights,
                     rows, experts_per_rank, lane);
      continue;
    }
    if (threadIdx.x == 0) wait_rank(g, chunk_flags(g, g.me, s) + j, g.op, s, FlagMatch::kWhole);
    timeline_stamp(kChunkArrived, s, j);
    if (__syncthreads_or(threadIdx.x == 0 && normal_gave_up(g))) return;
    i64 off[kRegionArrays];
    region_offsets(rows, n, off);
    int piece = 0;  // the chunk's pieces of every array, dealt round the block's warps
    for (int i = 0; i < kRegionArrays; ++i) {
      if (!out.at[i]) continue;
      const i64 bytes = (end - first) * rows.bytes[i];
      unsigned char* const dst = reinterpret_cast<unsigned char*>(out.at[i]) + (first_out[s] + first) * rows.bytes[i];
      const unsigned char* const src = window + i64(s) * region + off[i] + first * rows.bytes[i];
      for (i64 at = 0; at < bytes; at += kChunkPiece, ++piece)
        if (piece % warps == warp)
          warp_copy(dst + at, src + at, bytes - at < kChunkPiece ? bytes - at : kChunkPiece, lane);
    }
  }
  timeline_stamp(kReceiveEnd, 0, 0);
}

// One warp per received row, back into this rank's region of its source's window (normal_layout.h:
// x, then the weights), with its weights; counts[ranks + s]: the rows this rank received from s, in
// s's slot order. Chunk-major over the sources, as a dispatch's scatter; the rows a rank returns
// itself go through its own window and chunk flags like any other (its reduce reads them there).
// Dynamic shared memory: ranks + 1 words.
__device__ __forceinline__ void combine_scatter_body(const unsigned char* x, const float* weights, int k,
                                                     const i64* counts, const RegionRows& rows, i64 region,
                                                     const NormalSignals& g) {
  launch_dependents();
  if (!normal_send_begin(g)) return;  // no flags: the sources' waits time out
  i64* const begin = shared_words();  // [ranks + 1]: the first row received from each source
  if (threadIdx.x == 0) {
    begin[0] = 0;
    for (int s = 0; s < g.ranks; ++s) begin[s + 1] = begin[s] + counts[g.ranks + s];
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const i64 x_row = rows.bytes[0];
  scatter_chunks(g, false, kCombineChunkRows, [&](int s) { return counts[g.ranks + s]; },
                 [&](int s, i64 n, i64 first, i64 end) {
                   i64 off[kRegionArrays];
                   region_offsets(rows, n, off);
                   unsigned char* const base = reinterpret_cast<unsigned char*>(g.windows[s]) + i64(g.me) * region;
                   for (i64 row = first + warp; row < end; row += warps) {
                     const i64 i = begin[s] + row;
                     warp_copy(base + off[0] + row * x_row, x + i * x_row, x_row, lane);
                     for (int q = lane; off[3] >= 0 && q < k; q += 32)
                       reinterpret_cast<float*>(base + off[3])[row * k + q] = weights[i * k + q];
                   }
                 });
}

// --- combine's reduction -------------------------------------------------------------------------

// Element conversions (PTX, round to nearest even as the CPU path does).
template <class T>
struct Elem;
template <>
struct Elem<float> {
  static __device__ __forceinline__ float load(const float* p, i64 i) { return p[i]; }
  static __device__ __forceinline__ void store(float* p, i64 i, float v) { p[i] = v; }
};
struct bf16_t {
  unsigned short bits;
};
struct f16_t {
  unsigned short bits;
};
template <>
struct Elem<bf16_t> {
  static __device__ __forceinline__ float load(const bf16_t* p, i64 i) { return __int_as_float(int(u32(p[i].bits) << 16)); }
  static __device__ __forceinline__ void store(bf16_t* p, i64 i, float v) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    p[i].bits = h;
  }
};
template <>
struct Elem<f16_t> {
  static __device__ __forceinline__ float load(const f16_t* p, i64 i) {
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(p[i].bits));
    return v;
  }
  static __device__ __forceinline__ void store(f16_t* p, i64 i, float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    p[i].bits = h;
  }
};

// At the source: out[t] = the token's staged rows summed in rank order in f32 (rank r's row of
// token t is row slot[t * ranks + r] of region r of this rank's window, -1 when t did not go to r;
// sent[r], the tokens this rank sent r, sizes the region's arrays and r's chunks); 0 for a token
// that went nowhere. Each row is read once its chunk's flag is there (the reduce overlaps the
// scatters: "dispatch and combine in chunks", above). bf16 starts from the first row and the others
// from 0, as the CPU path does, so both give the same bits. With weights, out_w[t] sums the staged
// weights the same way. Dynamic shared memory: 3 ranks words.
//
// One warp per token, so that a token whose rows are late holds only its warp: with a block per
// token (a barrier between the flags, the rows and the next token) the reduce fell ~60 us behind
// the last chunk on the H200 x2 (docs/perf.md, stop 20).
// V elements of one 16-byte vector.
template <class T>
union Vec16 {
  int4 q;
  T e[16 / sizeof(T)];
};

// The staged rows of a token for ranks [base, base + 32): lane i's is rank base + i's row (its first
// element in the window), -1 where the token did not go; `present` has a bit per row there.
struct TokenRows {
  i64 row;
  unsigned present;
};
__device__ __forceinline__ TokenRows token_rows(const int* slot, const i64* x_at, i64 t, int ranks, int base,
                                                i64 hidden, int lane) {
  const int r = base + lane;
  const int s = r < ranks ? slot[t * ranks + r] : -1;
  const i64 row = s >= 0 ? x_at[r] + i64(s) * hidden : -1;
  return {row, __ballot_sync(0xffffffffu, s >= 0)};
}

// acc[u][*] (+)= the token's rows' units u, in rank order: `load(row, u, q)` loads unit u of the
// row starting at element `row` into q (nothing past the row's end). Rows go two at a time, both
// loads in flight before either is added (the sums keep the rank order, so the bits do not change).
template <class T, int U, int V, class Load>
__device__ __forceinline__ void sum_rows(float (&acc)[U][V], const int* slot, const i64* x_at, i64 t, int ranks,
                                         i64 hidden, const TokenRows& first_group, int lane, Load load) {
  constexpr bool kFromFirst = same_type<T, bf16_t>::value;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int j = 0; j < V; ++j) acc[u][j] = 0.0f;
  bool first = true;
  auto add = [&](const Vec16<T> (&q)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float x = Elem<T>::load(q[u].e, j);
        acc[u][j] = kFromFirst && first ? x : acc[u][j] + x;
      }
    first = false;
  };
  for (int base = 0; base < ranks; base += 32) {
    const TokenRows g = base == 0 ? first_group : token_rows(slot, x_at, t, ranks, base, hidden, lane);
    unsigned left = g.present;
    while (left != 0) {
      const int a = __ffs(left) - 1;
      left &= left - 1;
      const int b = left != 0 ? __ffs(left) - 1 : -1;
      if (b >= 0) left &= left - 1;
      const i64 row_a = __shfl_sync(0xffffffffu, g.row, a);
      const i64 row_b = __shfl_sync(0xffffffffu, g.row, b < 0 ? a : b);
      Vec16<T> qa[U], qb[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        load(row_a, u, qa[u]);
        if (b >= 0) load(row_b, u, qb[u]);
      }
      add(qa);
      if (b >= 0) add(qb);
    }
  }
}

// Token t's rows summed in rank order into out[t] (sum_rows; 0 for a token that went nowhere) and,
// with out_w, its weights into out_w[t] (from 0, in rank order): rank r's row of the token starts at
// element x_at[r] + slot * hidden of stage, its weights at w_at[r] + slot * k of stage_w. One warp;
// `vec`: out, stage and the rows are 16-byte aligned. Shared by the cuda_ipc reduce (below) and the
// nccl plane's (nccl_normal.cuh), so both give the CPU path's bits.
template <class T>
__device__ __forceinline__ void reduce_token(T* out, const T* stage, const float* stage_w, const i64* x_at,
                                             const i64* w_at, const int* slot, i64 t, int ranks, i64 hidden,
                                             float* out_w, int k, bool vec, int lane) {
  constexpr int V = 16 / sizeof(T);
  constexpr int U = 1;  // 16-byte units per lane and row in flight (x2 rows): 48 registers, no spills
  const TokenRows first_group = token_rows(slot, x_at, t, ranks, 0, hidden, lane);
  T* const dst = out + t * hidden;
  if (vec) {
    const i64 units = hidden / V;
    for (i64 c0 = 0; c0 < units; c0 += 32 * U) {  // bounds the same for the whole warp (shuffles)
      const i64 c = c0 + lane;
      float acc[U][V];
      sum_rows<T, U, V>(acc, slot, x_at, t, ranks, hidden, first_group, lane,
                        [&](i64 row, int u, Vec16<T>& q) {
                          if (c + 32 * u < units) q.q = reinterpret_cast<const int4*>(stage + row)[c + 32 * u];
                        });
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (c + 32 * u >= units) continue;
        Vec16<T> o;
#pragma unroll
        for (int j = 0; j < V; ++j) Elem<T>::store(o.e, j, acc[u][j]);
        reinterpret_cast<int4*>(dst)[c + 32 * u] = o.q;
      }
    }
  } else {
    for (i64 c0 = 0; c0 < hidden; c0 += 32) {
      const i64 c = c0 + lane;
      float acc[1][1];
      sum_rows<T, 1, 1>(acc, slot, x_at, t, ranks, hidden, first_group, lane, [&](i64 row, int, Vec16<T>& q) {
        if (c < hidden) q.e[0] = stage[row + c];
      });
      if (c < hidden) Elem<T>::store(dst, c, acc[0][0]);
    }
  }
  for (int q = lane; out_w != nullptr && q < k; q += 32) {
    float sum = 0.0f;
    for (int r = 0; r < ranks; ++r) {
      const int s = slot[t * ranks + r];
      if (s >= 0) sum += stage_w[w_at[r] + s * k + q];
    }
    out_w[t * k + q] = sum;
  }
}

template <class T>
__device__ __forceinline__ void combine_reduce_body(T* out, const unsigned char* window, i64 hidden, const int* slot,
                                                    const i64* sent, const RegionRows& layout, i64 region,
                                                    i64 tokens, float* out_w, int k, const NormalSignals& g) {
  const int ranks = g.ranks;
  // Each rank's region: where its rows and its weights start, in elements of the window.
  i64* const x_at = shared_words();  // [ranks] each
  i64* const w_at = x_at + ranks;
  i64* const per = w_at + ranks;
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) {
    i64 off[kRegionArrays];
    region_offsets(layout, sent[r], off);
    x_at[r] = (i64(r) * region + off[0]) / i64(sizeof(T));
    w_at[r] = (i64(r) * region + off[3]) / 4;
    per[r] = chunk_rows(sent[r], ranks, kCombineChunkRows);
  }
  __syncthreads();
  const T* const stage = reinterpret_cast<const T*>(window);
  const float* const stage_w = reinterpret_cast<const float*>(window);
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  // Rows of whole 16-byte vectors are read and written as such (the usual case), else by element.
  const bool vec = ((u64(out) | u64(stage) | u64(hidden * i64(sizeof(T)))) & 15) == 0;
  timeline_stamp(kReceiveStart, 0, 0);
  for (i64 t = i64(blockIdx.x) * warps + threadIdx.x / 32; t < tokens; t += i64(gridDim.x) * warps) {
    bool late = false;  // a chunk of this token's that did not come (then nothing more is read)
    for (int r = lane; r < ranks; r += 32) {
      const int s = slot[t * ranks + r];
      if (s >= 0) {
        wait_rank(g, chunk_flags(g, g.me, r) + s / per[r], g.op, r, FlagMatch::kWhole);
        late |= normal_gave_up(g);
      }
    }
    if (__any_sync(0xffffffffu, late)) break;
    __syncwarp();  // the rows the flags published, to every lane
    reduce_token(out, stage, stage_w, x_at, w_at, slot, t, ranks, hidden, out_w, k, vec, lane);
  }
  timeline_stamp(kReceiveEnd, 0, 0);
}

// --- all-reduce -----------------------------------------------------------------------------------

enum ReduceOp { kSum = 0, kMax = 1, kMin = 2 };

template <class Acc, int kOp>
__device__ __forceinline__ Acc combine_op(Acc acc, Acc v) {
  if (kOp == kSum) return acc + v;
  if (kOp == kMax) return v > acc ? v : acc;
  return v < acc ? v : acc;
}

template <class T, class Acc>
__device__ __forceinline__ Acc load_elem(const T* p, i64 i) {
  if constexpr (same_type<T, bf16_t>::value || same_type<T, f16_t>::value)
    return Elem<T>::load(p, i);
  else
    return Acc(p[i]);
}

template <class T, class Acc>
__device__ __forceinline__ T round_elem(Acc v) {
  if constexpr (same_type<T, bf16_t>::value || same_type<T, f16_t>::value) {
    T out;
    Elem<T>::store(&out, 0, v);
    return out;
  } else {
    return T(v);
  }
}

// Elements [0, count) of this rank's part: every rank's copy reduced in rank order in f32 (f64 for
// double, exactly for integers), rounded once, written to `out` and, when out_off >= 0, pushed into
// every other rank's window at out_off. Rank r's copy is `mine` for r = me, else at in_off + r *
// in_stride of this rank's window. Thread `tid` of `threads` takes every threads-th 16-byte vector
// (where every address allows: windows are 256-byte aligned), then every threads-th element left.
template <class T, class Acc, int kOp>
__device__ __forceinline__ void reduce_range(const u64* windows, const T* mine, T* out, i64 count, i64 in_off,
                                             i64 in_stride, i64 out_off, int ranks, int me, i64 tid, i64 threads) {
  constexpr int V = 16 / sizeof(T);
  const unsigned char* own = reinterpret_cast<const unsigned char*>(windows[me]);
  auto source = [&](int r) { return r == me ? mine : reinterpret_cast<const T*>(own + in_off + r * in_stride); };
  const bool push = out_off >= 0;
  const bool vec = ((u64(mine) | u64(out) | u64(in_off) | u64(in_stride) | u64(push ? out_off : 0)) & 15) == 0;
  const i64 vectors = vec ? count / V : 0;
  for (i64 v = tid; v < vectors; v += threads) {
    Acc acc[V];
    for (int r = 0; r < ranks; ++r) {
      Vec16<T> in;
      in.q = reinterpret_cast<const int4*>(source(r))[v];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const Acc x = load_elem<T, Acc>(in.e, j);
        acc[j] = r == 0 ? x : combine_op<Acc, kOp>(acc[j], x);
      }
    }
    Vec16<T> result;
#pragma unroll
    for (int j = 0; j < V; ++j) result.e[j] = round_elem<T, Acc>(acc[j]);
    reinterpret_cast<int4*>(out)[v] = result.q;
    for (int r = 0; push && r < ranks; ++r)
      if (r != me) reinterpret_cast<int4*>(windows[r] + out_off)[v] = result.q;
  }
  for (i64 i = vectors * V + tid; i < count; i += threads) {
    Acc acc = Acc(0);
    for (int r = 0; r < ranks; ++r) {
      const Acc x = load_elem<T, Acc>(source(r), i);
      acc = r == 0 ? x : combine_op<Acc, kOp>(acc, x);
    }
    const T result = round_elem<T, Acc>(acc);
    out[i] = result;
    for (int r = 0; push && r < ranks; ++r)
      if (r != me) reinterpret_cast<T*>(windows[r] + out_off)[i] = result;
  }
}

// The reduction step of the phased collectives (all_reduce in several chunks, reduce_scatter):
// reduce_range over the grid, nothing after a device barrier that gave up.
template <class T, class Acc, int kOp>
__device__ __forceinline__ void reduce_part_body(const u64* windows, const T* mine, T* out, i64 count, i64 in_off,
                                                 i64 in_stride, i64 out_off, int ranks, int me, const u64* gave_up) {
  if (rank_gave_up(gave_up)) return;
  reduce_range<T, Acc, kOp>(windows, mine, out, count, in_off, in_stride, out_off, ranks, me,
                            i64(blockIdx.x) * blockDim.x + threadIdx.x, i64(gridDim.x) * blockDim.x);
}

// `bytes` from src to dst by the block's warps, each a contiguous share.
__device__ __forceinline__ void block_copy(unsigned char* dst, const unsigned char* src, i64 bytes) {
  const i64 warps = blockDim.x / 32, share = (bytes + warps * 16 - 1) / (warps * 16) * 16;
  const i64 at = i64(threadIdx.x / 32) * share;
  if (at < bytes) warp_copy(dst + at, src + at, bytes - at < share ? bytes - at : share, threadIdx.x & 31);
}

// All-reduce of this rank's tensor (`count` elements at `data`, reduced in place) through the
// windows in one kernel, for a tensor that fits them at once (gpu_collectives.cc: one chunk). It is
// cut into one part per rank (parts of `part` elements, a multiple of 16 bytes; rank p reduces part
// p), and every part into one piece per block: block b takes piece b of every part through three
// steps by itself, signalling only block b of the other ranks (flags per source and block:
// signal_layout.h kReduceFlags):
//   push:    its pieces of the other ranks' parts into their windows (source region `me`, `stride`
//            bytes a source), then flag A in each;
//   reduce:  once every peer's A is there, its piece of this rank's part summed in rank order (its
//            own copy from `data`, the others from its window), rounded once, into `data` and into
//            every peer's result region (at `out_off`, where the part sits in the tensor), then
//            flag B in each;
//   collect: once every peer's B is there, the peers' parts' pieces from its result region into
//            `data`.
// So no step waits for the whole grid: one launch, no barrier kernels. The flags carry g.op (the
// operation's agreement number, growing: FlagMatch::kWholeOrLater); the windows' reuse by the next
// operation is ordered by its agreement, as for the other collectives. After a timeout the block
// stops (gave_up; the host raises it). A block waits only for the same block of the other ranks,
// and blocks start in index order, so the lowest unfinished block runs on every rank even when
// other work holds SMs (the grid is at most two blocks an SM, so it is usually resident whole).
template <class T, class Acc, int kOp>
__device__ __forceinline__ void all_reduce_body(T* data, i64 count, i64 part, i64 stride, i64 out_off,
                                                const NormalSignals& g) {
  if (normal_gave_up(g)) return;
  const int ranks = g.ranks, me = g.me;
  const i64 blocks = gridDim.x, b = blockIdx.x, es = sizeof(T), unit = 16 / es;
  const i64 piece = (part + blocks * unit - 1) / (blocks * unit) * unit;  // elements of a part a block takes
  const i64 p0 = b * piece;
  auto flag = [&](int owner, int source, int which) {
    return signals_of(g, owner) + kReduceFlags + 2 * (i64(source) * blocks + b) + which;
  };
  // Raises flag `which` in every peer, after this block's writes (the fence is cumulative).
  auto raise = [&](int which) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      for (int r = 0; r < ranks; ++r)
        if (r != me) store_relaxed_sys(flag(r, me, which), g.op);
    }
  };
  // Waits for every peer's flag `which`; false after a timeout.
  auto await = [&](int which) {
    for (int r = threadIdx.x; r < ranks; r += blockDim.x)
      if (r != me) wait_rank(g, flag(me, r, which), g.op, r, FlagMatch::kWholeOrLater);
    return !__syncthreads_or(normal_gave_up(g));
  };
  // Part q: elements [q * part, min((q + 1) * part, count)); this block's piece of it.
  auto piece_of = [&](int q, i64& first, i64& n) {
    const i64 len = count - q * part < part ? (count - q * part > 0 ? count - q * part : 0) : part;
    first = q * part + p0;
    n = len - p0 < piece ? (len - p0 > 0 ? len - p0 : 0) : piece;
  };
  i64 first, n;
  // The peers in an order rotated by rank and block: at any moment every rank's links take an even
  // share of the writes (all starting at one peer gave it every rank's writes at once; stop 24).
  for (int i = 0; i < ranks - 1; ++i) {
    const int p = (me + 1 + int((i + b) % (ranks - 1))) % ranks;
    piece_of(p, first, n);
    if (n > 0)
      block_copy(reinterpret_cast<unsigned char*>(g.windows[p]) + i64(me) * stride + p0 * es,
                 reinterpret_cast<const unsigned char*>(data + first), n * es);
  }
  raise(0);
  if (!await(0)) return;
  piece_of(me, first, n);
  if (n > 0)
    reduce_range<T, Acc, kOp>(g.windows, data + first, data + first, n, p0 * es, stride, out_off + first * es, ranks,
                              me, threadIdx.x, blockDim.x);
  raise(1);
  if (!await(1)) return;
  for (int s = 0; s < ranks; ++s) {
    if (s == me) continue;
    piece_of(s, first, n);
    if (n > 0)
      block_copy(reinterpret_cast<unsigned char*>(data + first),
                 reinterpret_cast<const unsigned char*>(g.windows[me]) + out_off + first * es, n * es);
  }
}

// A barrier between the ranks' streams, between the collectives' phases: this rank's work queued
// before it is complete (stream order) and published (the fence) before it raises g.op in every
// peer; it ends once every peer has raised g.op or a later number (FlagMatch::kWholeOrLater). A
// timeout marks the rank as given up (wait_rank): the collectives' kernels queued after it then do
// nothing, and the host raises the error when it next looks (DevicePlane::check_signals). One block.
__device__ __forceinline__ void device_barrier_body(const NormalSignals& g) {
  if (normal_gave_up(g)) return;
  __threadfence_system();
  for (int r = threadIdx.x; r < g.ranks; r += blockDim.x)
    if (r != g.me) store_relaxed_sys(signals_of(g, r) + kBarrierFlags + g.me, g.op);
  for (int r = threadIdx.x; r < g.ranks; r += blockDim.x)
    if (r != g.me) wait_rank(g, signals_of(g, g.me) + kBarrierFlags + r, g.op, r, FlagMatch::kWholeOrLater);
}

}  // namespace deepep::kernels
