// Persistent, warp-specialized GEMM for Hopper (sm_90a): C[M,N] = A[M,K] * B, FP32 accumulation.
//
//   A  [M, K] row-major (K-major), bfloat16_t or half_t, through a TMA descriptor
//   B  either [N, K] row-major (K-major, "NT")      -> kBNMajor = false
//      or     [K, N] row-major (N-major, the seed matmul c[i,j] += a[i,k] * b[k,j]) -> kBNMajor = true
//   C  [M, N] with row stride ldc, in TC (the input type, or float), written either through shared
//      memory + TMA stores (kTmaStore, the fast path) or with plain masked stores
//
// Design (why each piece is there):
// - One CTA per SM (grid = min(#SMs, #tiles)), looping over output tiles in grouped order
//   (tile_scheduler.h): no launch tail per tile, and the producer prefetches the next tile's first
//   stages while the consumers run the epilogue of the current one.
// - 3 warpgroups (2 for 64-row tiles). Warpgroup 0 is the producer: one elected thread issues TMA
//   loads of BLOCK_M x BLOCK_K (A) and BLOCK_N x BLOCK_K (B) tiles, 128-byte swizzled, into a
//   kStages-deep ring guarded by full/empty mbarriers (mbarrier.h). Warpgroups 1 and 2 are
//   consumers: each owns BLOCK_M/2 rows of the tile (one or two m64 wgmma rows) and all BLOCK_N
//   columns, so both read the same B tile and the tensor cores run m64nBLOCK_Nk16, the widest
//   shape. A 64-row tile has one consumer: at M <= 64 a 128-row tile would compute rows that are
//   not there and split K further to fill the SMs (the seed matmul takes 64 x 64 there; docs/perf.md,
//   stop 29).
// - setmaxnreg moves registers from the producer (40) to the consumers (232): the accumulators of
//   a 64 x 256 FP32 slice are 128 registers per thread.
// - Consumers keep one wgmma-group in flight across k-blocks (wait_group<1>) and free a stage as
//   soon as the group that read it has completed; one arrival per consumer warp.
// - Epilogue (kTmaStore): each consumer converts its slice to TC and writes it, 64 x 64 box by box,
//   into one of two 8 KB 128-byte-swizzled shared buffers (conflict-free 4-byte stores), and one
//   thread per consumer hands each box to a TMA store. The stores drain asynchronously while the
//   consumer moves on to the next box and the next tile's mainloop, so the tensor cores idle only
//   for the register -> shared copy, not for the global writes. Without kTmaStore, every thread
//   stores its fragment straight to global memory (masked; 2-output stores).
// - Ragged edges: TMA zero-fills loads outside [M, K] / [N, K] (so the extra products are 0); TMA
//   stores drop what falls outside [M, N]; the direct epilogue masks rows >= M and columns >= N.
//
// Requirements (TMA): A's and B's rows 16-byte aligned: K % 8 == 0, and for N-major B N % 8 == 0;
// base pointers 16-byte aligned. kTmaStore: C 16-byte aligned and ldc % 8 == 0 (16-bit TC).
// Without kTmaStore C needs no alignment (2-output stores where ldc and C allow, single otherwise).
//
// Host side: build the two tensor maps with cuTensorMapEncodeTiled, 2-D, 16-bit element type,
// CU_TENSOR_MAP_SWIZZLE_128B, OOB fill NONE (zeros), interleave NONE, element strides 1:
//   A: dims {K, M}, row stride K * 2 bytes, box {Cfg::kBoxAInner, Cfg::kBoxAOuter}
//   B: K-major dims {K, N}, stride K * 2; N-major dims {N, K}, stride N * 2;
//      box {Cfg::kBoxBInner, Cfg::kBoxBOuter}
//   C (kTmaStore only; otherwise pass any descriptor, it is not read): dims {N, M}, stride
//      ldc * sizeof(TC), box {Cfg::kBoxC, Cfg::kBoxC}
// then plan the launch with plan_split_k(Cfg::num_tiles(M, N), ceil(K / BLOCK_K), #SMs)
// (tl/device/split_k.h), raise the kernel's dynamic shared memory limit to Cfg::kSmemBytes and
// launch Cfg::kThreads threads x plan.grid blocks with Cfg::kSmemBytes dynamic shared memory and
// SplitK{plan.dp_tiles, plan.splits, workspace, counters}: with splits > 1 a workspace of
// plan.workspace_floats(BLOCK_M * BLOCK_N) floats and plan.counters(kNumConsumers) ints that are
// zero (every launch leaves them zero; one launch at a time per workspace). SplitK{} and
// min(#SMs, tiles) blocks run without split-K. Without split-K, the CTAs can be kept in step over the
// rounds of tiles (tl/device/round_sync_plan.h): RoundSync{words, round_sync_every(...)} with two
// zero words (every launch leaves them zero), where a barrier happens (round_sync_barriers > 0);
// RoundSync{} for none. tests/device/cuda/gemm_sm90_test.cu does exactly this.
//
// Measured on the lent H200 (tests/device/cuda/gemm_sm90_test.cu, same run as cuBLAS): 128x256/4
// stages, bf16, 4096^3 ~795 TFLOPS (cuBLAS ~800), 8192^3 745-777 (cuBLAS ~730); split-K for the
// shapes with few tiles: docs/perf.md.
//
// Hooks for later steps (not implemented yet):
// - Stream-K (pieces of unequal length spread over every SM) if split-K's waves prove too coarse.
// - Cluster of 2 along M with TMA multicast of the B tile: deepgemm/kernels/sm90_gemm.cuh does it
//   (kMulticast; tma_load_3d_multicast, remote mbarrier_arrive_cluster releases) and measured it no
//   faster on the H200 (docs/perf.md).
// - Ping-pong consumers (each owning a whole tile, epilogue of one under the mainloop of the other)
//   and stmatrix in the epilogue.
// - FP8 with fine-grained scaling (DeepGEMM): same ring and scheduler, wgmma k32 e4m3, promotion of
//   the accumulators into a second FP32 set per k-block.
#pragma once

#include "tl/device/cuda/arch.h"
#include "tl/device/cuda/convert.h"
#include "tl/device/cuda/mbarrier.h"
#include "tl/device/cuda/round_sync.h"
#include "tl/device/cuda/tile_scheduler.h"
#include "tl/device/cuda/tma.h"
#include "tl/device/cuda/wgmma.h"
#include "tl/device/round_sync_plan.h"
#include "tl/device/split_k.h"

namespace tl::cuda {

// Compile-time shape of one kernel instance.
template <class T_, class TC_, int kBlockM_, int kBlockN_, int kBlockK_, int kStages_, bool kBNMajor_,
          bool kTmaStore_ = !is_same_v<TC_, float>>
struct GemmSm90Config {
  using T = T_;    // A and B element type: bfloat16_t or half_t
  using TC = TC_;  // C element type: T or float
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kBlockK = kBlockK_;
  static constexpr int kStages = kStages_;
  static constexpr bool kBNMajor = kBNMajor_;
  static constexpr bool kTmaStore = kTmaStore_;

  static constexpr int kNumConsumers = kBlockM == 64 ? 1 : 2;  // consumer warpgroups
  static constexpr int kThreads = 128 * (1 + kNumConsumers);
  static constexpr int kConsumerRows = kBlockM / kNumConsumers;  // rows of the tile per consumer
  static constexpr int kMmaM = kConsumerRows / 64;               // m64 wgmma rows per consumer
  static constexpr int kRowBytes = kBlockK * int(sizeof(T));     // one swizzled smem row

  static constexpr int kStageBytesA = kBlockM * kBlockK * int(sizeof(T));
  static constexpr int kStageBytesB = kBlockN * kBlockK * int(sizeof(T));
  static constexpr int kStageBytes = kStageBytesA + kStageBytesB;
  // Epilogue staging (kTmaStore): per consumer two buffers of one kBoxC x kBoxC box of TC.
  static constexpr int kBoxC = 64;
  static constexpr int kBoxBytesC = kBoxC * kBoxC * int(sizeof(TC));
  static constexpr int kEpilogueBuffers = 2;
  static constexpr bool kEpilogueWholeSlice = false;  // gemm_sm90_store_tma; no gain measured here (stop 26)
  static constexpr int kEpilogueBytes = kTmaStore ? kNumConsumers * kEpilogueBuffers * kBoxBytesC : 0;
  static constexpr int kBarrierBytes = 2 * kStages * 8;
  // + 1024: the dynamic shared memory base is aligned up to 1024 bytes inside the kernel.
  static constexpr int kSmemBytes = kStages * kStageBytes + kEpilogueBytes + kBarrierBytes + 1024;

  // TMA boxes, innermost dimension first.
  static constexpr int kBoxAInner = kBlockK;
  static constexpr int kBoxAOuter = kBlockM;
  static constexpr int kBoxBInner = kBNMajor ? 64 : kBlockK;  // N-major: 64 N (128 bytes) per box
  static constexpr int kBoxBOuter = kBNMajor ? kBlockK : kBlockN;
  static constexpr int kBoxesB = kBNMajor ? kBlockN / 64 : 1;  // TMA loads of B per stage
  static constexpr int kBoxBytesB = kBoxBInner * kBoxBOuter * int(sizeof(T));

  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;

  static_assert(is_same_v<T, bfloat16_t> || is_same_v<T, half_t>, "inputs: bfloat16_t or half_t");
  static_assert(is_same_v<TC, T> || is_same_v<TC, float>, "output: the input type or float");
  static_assert(!kTmaStore || sizeof(TC) == 2, "the TMA-store epilogue writes 16-bit outputs (64 = one 128 B row)");
  static_assert(kRowBytes == 128, "BLOCK_K must fill one 128-byte swizzle row (64 for 16-bit types)");
  static_assert(kBlockM == 64 || kBlockM == 128 || kBlockM == 256,
                "BLOCK_M: 64 (one consumer), 128 (one m64 per consumer) or 256 (two)");
  static_assert(kBlockN % 64 == 0 && kBlockN >= 64 && kBlockN <= 256, "BLOCK_N: 64, 128, 192 or 256");
  static_assert(kMmaM * kBlockN / 2 <= 128, "at most 128 accumulator registers per consumer thread");
  static_assert(kStages >= 2, "at least two stages");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block is 227 KB on sm_90");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kNumConsumers <= 65536, "register file");

  TL_HOST_DEVICE static constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
  TL_HOST_DEVICE static constexpr int num_tiles(int m, int n) { return ceil_div(m, kBlockM) * ceil_div(n, kBlockN); }
};

namespace detail {

// Stores columns col and col + 1 of one row of C (p: the row's start), masking columns >= N; one
// 2-element store where the row start keeps the pair aligned (vec_ok).
template <class TC>
TL_DEVICE void gemm_sm90_store_pair(TC* p, int col, int N, bool vec_ok, float v0, float v1) {
  if (col + 1 < N && vec_ok) {
    if constexpr (is_same_v<TC, float>) {
      *reinterpret_cast<uint64_t*>(p + col) = (uint64_t(__float_as_uint(v1)) << 32) | uint64_t(__float_as_uint(v0));
    } else {
      *reinterpret_cast<uint32_t*>(p + col) = pack2<TC>(v0, v1);
    }
  } else {
    if (col < N) p[col] = convert1<TC>(v0);
    if (col + 1 < N) p[col + 1] = convert1<TC>(v1);
  }
}

// Writes one consumer's kMmaM x (64 x BLOCK_N) accumulator slice to C (row0/col0: this thread's
// first element, see the fragment layout in wgmma.h), masking rows >= M and columns >= N.
template <class Cfg>
TL_DEVICE void gemm_sm90_store_direct(float (&acc)[Cfg::kMmaM][Cfg::kBlockN / 2], typename Cfg::TC* c, int M, int N,
                                      int64_t ldc, int row0, int col0, bool full_tile, bool vec_ok) {
  using TC = typename Cfg::TC;
  if (full_tile && vec_ok) {
#pragma unroll
    for (int s = 0; s < Cfg::kMmaM; ++s) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        TC* p = c + int64_t(row0 + 64 * s + 8 * h) * ldc + col0;
#pragma unroll
        for (int j = 0; j < Cfg::kBlockN / 8; ++j) {
          const float v0 = acc[s][4 * j + 2 * h], v1 = acc[s][4 * j + 2 * h + 1];
          if constexpr (is_same_v<TC, float>) {
            *reinterpret_cast<uint64_t*>(p + 8 * j) =
                (uint64_t(__float_as_uint(v1)) << 32) | uint64_t(__float_as_uint(v0));
          } else {
            *reinterpret_cast<uint32_t*>(p + 8 * j) = pack2<TC>(v0, v1);
          }
        }
      }
    }
    return;
  }
#pragma unroll
  for (int s = 0; s < Cfg::kMmaM; ++s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 64 * s + 8 * h;
      if (row >= M) continue;
      TC* p = c + int64_t(row) * ldc;
#pragma unroll
      for (int j = 0; j < Cfg::kBlockN / 8; ++j)
        gemm_sm90_store_pair<TC>(p, col0 + 8 * j, N, vec_ok, acc[s][4 * j + 2 * h], acc[s][4 * j + 2 * h + 1]);
    }
  }
}

// One thread's share of staging box b (columns 64 b ..) of one m64 wave's accumulators `acc` as TC
// in a 128-byte-swizzled 64 x 64 shared buffer; `at`: the buffer's shared address plus this thread's
// row offset (gemm_sm90_store_tma).
template <class Cfg>
TL_DEVICE void gemm_sm90_stage_box(const float (&acc)[Cfg::kBlockN / 2], int b, uint32_t at, uint32_t xor_chunk) {
  using TC = typename Cfg::TC;
#pragma unroll
  for (int jj = 0; jj < Cfg::kBoxC / 8; ++jj) {
    const int j = b * (Cfg::kBoxC / 8) + jj;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t word = pack2<TC>(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      const uint32_t addr = at + uint32_t(h) * (8u * 128u) + ((uint32_t(jj) ^ xor_chunk) << 4);
      asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(word) : "memory");
    }
  }
}

// The TMA store of one staged box whose first element is (row, col) of C; nothing for a box wholly
// outside C (M x N).
TL_DEVICE void gemm_sm90_store_box(const TmaDescriptor* tma_c, const uint8_t* src, int row, int col, int M, int N,
                                   int group) {
  if (row < M && col < N) {
    if (group < 0)
      tma_store_2d(tma_c, src, col, row);
    else
      tma_store_3d(tma_c, src, col, row, group);
  }
}

// TMA-store epilogue of one consumer: its kMmaM x (64 x BLOCK_N) slice goes out as 64 x 64 boxes
// staged in the consumer's Cfg::kEpilogueBuffers 128-byte-swizzled shared buffers. `buf`: the
// buffers (kEpilogueBuffers x kBoxBytesC, 1024-byte aligned); (row0, col0): the slice's first
// element in C; `boxes_done`: boxes this consumer has staged so far (kept across tiles: it picks the
// buffer). Two ways (Cfg::kEpilogueWholeSlice):
//   - a buffer per box of the slice: the whole slice is staged at once -- one wait for the previous
//     tile's stores to have read the buffers (they had a whole mainloop to), one fence, two barriers
//     and one bulk group per tile. DeepGEMM's tiles of at most 12 k-blocks ran 2-6% faster so (the
//     per-box handshakes took ~540 cycles a box); longer ones 0.7-1.6% slower, not understood (its
//     heuristic takes it for short K only: docs/perf.md, stop 26);
//   - otherwise the boxes take the buffers (1 or 2) in turn, each waiting for the store that last
//     read its buffer (one buffer leaves room for another pipeline stage).
// The thread with thread_idx_in_warpgroup() == 0 issues and tracks the stores (bulk groups are per
// thread), so it must be the same thread on every tile; it waits for them before the kernel ends.
// `group` < 0: tma_c is a 2-D map {N, M}; otherwise a 3-D map {N, M, groups} and the boxes go to
// that group (batched outputs).
template <class Cfg>
TL_DEVICE void gemm_sm90_store_tma(float (&acc)[Cfg::kMmaM][Cfg::kBlockN / 2], const TmaDescriptor* tma_c,
                                   uint8_t* buf, int consumer, int M, int N, int row0, int col0,
                                   uint32_t& boxes_done, int group = -1) {
  constexpr int kBoxes = Cfg::kBlockN / Cfg::kBoxC;
  const int warp = warp_idx_in_warpgroup();
  const int lane = lane_idx();
  const bool leader = thread_idx_in_warpgroup() == 0;
  const int bar_id = 1 + consumer;  // named barrier of this consumer warpgroup (0 is __syncthreads)
  // Row of this thread inside a box: 16 * warp + lane / 4 (+ 8). In the 128-byte swizzle the
  // 16-byte chunk c of row r sits at chunk position c ^ (r % 8); r % 8 == lane / 4 here.
  const uint32_t base = smem_addr(buf);
  const uint32_t row_off = uint32_t(16 * warp + lane / 4) * 128u + uint32_t(lane % 4) * 4u;
  const uint32_t xor_chunk = uint32_t(lane / 4);
  if constexpr (Cfg::kEpilogueWholeSlice) {
    static_assert(Cfg::kEpilogueBuffers >= Cfg::kMmaM * kBoxes, "a whole slice needs a buffer per box");
    if (leader) tma_store_wait_read<0>();
    named_barrier_sync(bar_id, 128);
#pragma unroll
    for (int s = 0; s < Cfg::kMmaM; ++s) {
#pragma unroll
      for (int b = 0; b < kBoxes; ++b) {
        gemm_sm90_stage_box<Cfg>(acc[s], b, base + uint32_t((s * kBoxes + b) * Cfg::kBoxBytesC) + row_off, xor_chunk);
      }
    }
    fence_proxy_async_shared();  // make the generic-proxy writes visible to the TMA unit
    named_barrier_sync(bar_id, 128);
    if (leader) {
#pragma unroll
      for (int s = 0; s < Cfg::kMmaM; ++s) {
#pragma unroll
        for (int b = 0; b < kBoxes; ++b) {
          gemm_sm90_store_box(tma_c, buf + (s * kBoxes + b) * Cfg::kBoxBytesC, row0 + 64 * s,
                              col0 + Cfg::kBoxC * b, M, N, group);
        }
      }
      tma_store_commit();  // one bulk group for the slice
    }
    boxes_done += uint32_t(Cfg::kMmaM * kBoxes);
    return;
  }
#pragma unroll
  for (int s = 0; s < Cfg::kMmaM; ++s) {
#pragma unroll
    for (int b = 0; b < kBoxes; ++b) {
      const uint32_t slot_index = boxes_done++ % uint32_t(Cfg::kEpilogueBuffers);
      const uint32_t slot = base + slot_index * uint32_t(Cfg::kBoxBytesC);
      // The buffer was last used kEpilogueBuffers boxes ago: wait until its TMA store has read it.
      if (leader) tma_store_wait_read<Cfg::kEpilogueBuffers - 1>();
      named_barrier_sync(bar_id, 128);
      gemm_sm90_stage_box<Cfg>(acc[s], b, slot + row_off, xor_chunk);
      fence_proxy_async_shared();  // make the generic-proxy writes visible to the TMA unit
      named_barrier_sync(bar_id, 128);
      // One bulk group per box, empty when the box lies wholly outside C: the wait above counts on
      // "the group kEpilogueBuffers commits back is the one that last read this buffer", on every
      // tile.
      const int box_row = row0 + 64 * s, box_col = col0 + Cfg::kBoxC * b;
      if (leader) {
        gemm_sm90_store_box(tma_c, buf + slot_index * Cfg::kBoxBytesC, box_row, box_col, M, N, group);
        tma_store_commit();
      }
    }
  }
}

// Split-K reduction of one consumer's slice of a piece (split_k.h), shared among the tile's pieces,
// which all run at once (one wave: the plan guarantees it and the kernel checks it): every piece
// writes its FP32 partial to the workspace and counts itself in on the tile's counter; once all
// have, piece p sums the p-th of `splits` shares of the slice over all partials, in piece order
// (the result does not depend on timing), and stores it to C. Each piece thus reads one slice's
// worth of partials, however many pieces there are.
// Partials live as [float4 v][thread] per consumer slice (whole 512-byte lines per warp). Every
// thread of the consumer calls this. kPairsSwapped: each float4 holds its two column pairs swapped
// (acc[4j + 1], acc[4j], acc[4j + 3], acc[4j + 2]). A 128-bit store wants its four registers in
// order on an aligned quad, so the plain order pins acc[i] to a register of the same parity as a
// wgmma result element i (whose registers are one contiguous run); where acc is a separate FP32
// set that the results are added into (FP8 promotion), every such FFMA then reads its two
// non-constant sources from one register bank. The swapped order lets ptxas put them in
// different banks (DeepGEMM's FP8 kernel; docs/perf.md, stop 36).
template <class Cfg, bool kPairsSwapped = false>
TL_DEVICE void gemm_sm90_split_reduce(float (&acc)[Cfg::kMmaM][Cfg::kBlockN / 2], const SplitK& sk, int tiles,
                                      const SplitKUnit& unit, int consumer, typename Cfg::TC* c, int M, int N,
                                      int64_t ldc, int row0, int col0, bool vec_ok) {
  using TC = typename Cfg::TC;
  constexpr int kVecsPerRow = Cfg::kBlockN / 8;  // float4s of acc[s]
  constexpr int kVecs = Cfg::kMmaM * kVecsPerRow;  // float4s per thread
  constexpr int kSliceFloats = Cfg::kConsumerRows * Cfg::kBlockN;
  const int tail = tiles - sk.dp_tiles, t = unit.tile - sk.dp_tiles;
  const int thread = thread_idx_in_warpgroup();
  const int bar_id = 1 + consumer;
  auto slice = [&](int piece) {
    return reinterpret_cast<float4*>(sk.workspace + (int64_t(piece) * tail + t) * (Cfg::kBlockM * Cfg::kBlockN) +
                                     int64_t(consumer) * kSliceFloats) +
           thread;
  };
  float4* mine = slice(unit.piece);
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const float* a = &acc[v / kVecsPerRow][4 * (v % kVecsPerRow)];
    __stcg(mine + v * 128, kPairsSwapped ? make_float4(a[1], a[0], a[3], a[2]) : make_float4(a[0], a[1], a[2], a[3]));
  }
  __threadfence();  // this thread's partial is visible GPU-wide before the count below
  named_barrier_sync(bar_id, 128);
  if (thread == 0) {
    // Two counters per slice: arrivals, then departures; the last to depart, when nobody reads the
    // arrivals any more, zeroes both for the next launch.
    int* arrivals = sk.counters + 2 * (t * Cfg::kNumConsumers + consumer);
    int* departures = arrivals + 1;
    atomicAdd(arrivals, 1);
#if defined(TL_CUDA_WAIT_TIMEOUT_NS)
    const uint64_t start = globaltimer_ns();
#endif
    for (;;) {
      int now;
      asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(now) : "l"(arrivals) : "memory");
      if (now >= sk.splits) break;
#if defined(TL_CUDA_WAIT_TIMEOUT_NS)
      if (globaltimer_ns() - start > uint64_t(TL_CUDA_WAIT_TIMEOUT_NS)) __trap();
#endif
    }
    if (atomicAdd(departures, 1) == sk.splits - 1) {
      atomicExch(arrivals, 0);
      atomicExch(departures, 0);
    }
  }
  named_barrier_sync(bar_id, 128);
  __threadfence();  // the other pieces' partials are visible to every thread now
  // This piece's share: float4 columns [v0, v1) of the slice, every thread, each summed over the
  // pieces in piece order. (Loading a whole round of (v, piece) pairs before adding measured 15%
  // slower on the H200 than this plain loop, which the compiler pipelines itself.)
  const int v0 = unit.piece * kVecs / sk.splits, v1 = (unit.piece + 1) * kVecs / sk.splits;
  for (int v = v0; v < v1; ++v) {
    float4 sum = __ldcg(slice(0) + v * 128);
    for (int piece = 1; piece < sk.splits; ++piece) {
      const float4 x = __ldcg(slice(piece) + v * 128);
      sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
    }
    if constexpr (kPairsSwapped) sum = make_float4(sum.y, sum.x, sum.w, sum.z);
    // float4 v holds acc[s][4j .. 4j+3]: columns 8j, 8j+1 of rows r (x, y) and r + 8 (z, w).
    const int row = row0 + 64 * (v / kVecsPerRow), col = col0 + 8 * (v % kVecsPerRow);
    if (row < M) gemm_sm90_store_pair<TC>(c + int64_t(row) * ldc, col, N, vec_ok, sum.x, sum.y);
    if (row + 8 < M) gemm_sm90_store_pair<TC>(c + int64_t(row + 8) * ldc, col, N, vec_ok, sum.z, sum.w);
  }
}

}  // namespace detail

// The kernel's body, for kernels of their own: generated code wraps it in an extern "C" kernel
// whose TMA descriptors are __grid_constant__ parameters passed here by reference. raster_group:
// tile-columns per rasterization band (tile_scheduler.h), e.g. 8. tma_c is read only with
// kTmaStore; c without it, and for the tiles split-K cuts into pieces (their pieces store directly).
// sk: the split-K plan (split_k.h; SplitK{} for none). rs: the barrier between rounds
// (round_sync_plan.h; RoundSync{} for none; not with split-K).
template <class Cfg>
__device__ __forceinline__ void gemm_sm90_body(const TmaDescriptor& tma_a, const TmaDescriptor& tma_b, const TmaDescriptor& tma_c,
                                               typename Cfg::TC* __restrict__ c, int M, int N, int K, int64_t ldc,
                                               int raster_group, const SplitK& sk, const RoundSync& rs) {
#if defined(TL_CUDA_SM90A)
  using T = typename Cfg::T;
  constexpr int kStages = Cfg::kStages;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kBlockK = Cfg::kBlockK;

  extern __shared__ __align__(1024) uint8_t tl_dynamic_smem[];
  // Align to 1024 bytes: the 128-byte swizzle pattern repeats every 1024 bytes, and TMA and wgmma
  // agree on it only when each tile starts on such a boundary (descriptor base offset 0).
  const uint32_t raw = smem_addr(tl_dynamic_smem);
  uint8_t* smem = tl_dynamic_smem + ((1024u - (raw & 1023u)) & 1023u);
  T* smem_a = reinterpret_cast<T*>(smem);                                    // [kStages][BLOCK_M][BLOCK_K]
  T* smem_b = reinterpret_cast<T*>(smem + kStages * Cfg::kStageBytesA);     // [kStages][BLOCK_N x BLOCK_K]
  uint8_t* smem_c = smem + kStages * Cfg::kStageBytes;                         // [consumer][2][box]
  auto* bars = reinterpret_cast<mbarrier_t*>(smem_c + Cfg::kEpilogueBytes);
  const TmaPipeline<kStages> pipe{bars, bars + kStages};

  const int wg = warpgroup_idx();
  if (threadIdx.x == 0) {
    pipe.init(Cfg::kNumConsumers * 4);  // one release per consumer warp
    fence_barrier_init();
  } else if (threadIdx.x == 32) {
    tma_prefetch_descriptor(&tma_a);
    tma_prefetch_descriptor(&tma_b);
    if constexpr (Cfg::kTmaStore) tma_prefetch_descriptor(&tma_c);
  }
  __syncthreads();
  // Launched overlapping the kernel before it (a programmatic dependent launch): nothing above
  // touched global memory; from here on that kernel's writes are visible.
  griddep_launch_dependents();
  griddep_wait();

  const GroupedTileScheduler sched = GroupedTileScheduler::make(M, N, kBlockM, kBlockN, raster_group);
  const int num_tiles = sched.num_tiles();
  const int num_k_blocks = (K + kBlockK - 1) / kBlockK;
  const int num_units = split_k_units(sk, num_tiles);
  if (!split_k_fits(sk, num_units, int(gridDim.x))) __trap();  // the pieces could not all run at once

  if (wg == 0) {
    // ---------------------------------------------------------------- producer warpgroup
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (warp_idx_in_warpgroup() == 0 && elect_one_sync()) {
      PipelineState<kStages> st;
      // rs: every rs.every-th round (of those every CTA has a unit in) starts once every CTA's
      // producer has issued the rounds before it, so the CTAs that share panels of A and B read them
      // together and L2 serves them from one DRAM read (round_sync.h).
      const int synced_end = rs.words != nullptr ? num_units / int(gridDim.x) * int(gridDim.x) : 0;
      bool sync_wait = true;
      for (int u = int(blockIdx.x); u < num_units; u += int(gridDim.x)) {
        // Barrier i before round (i + 1) * rs.every; none before the first round.
        if (const int round = u / int(gridDim.x); round > 0 && u < synced_end && round % rs.every == 0)
          sync_wait = grid_round_sync(rs.words, uint32_t(round / rs.every - 1), gridDim.x, sync_wait);
        const SplitKUnit unit = split_k_unit(sk, num_tiles, num_k_blocks, u);
        int m_block, n_block;
        sched.get(unit.tile, m_block, n_block);
        for (int kb = unit.kb0; kb < unit.kb1; ++kb) {
          pipe.producer_acquire(st);
          mbarrier_t* full = pipe.full_barrier(st);
          mbarrier_arrive_expect_tx(full, uint32_t(Cfg::kStageBytes));
          T* sa = smem_a + st.index * (kBlockM * kBlockK);
          T* sb = smem_b + st.index * (kBlockN * kBlockK);
          tma_load_2d(sa, &tma_a, full, kb * kBlockK, m_block * kBlockM);
          if constexpr (Cfg::kBNMajor) {
#pragma unroll
            for (int j = 0; j < Cfg::kBoxesB; ++j)
              tma_load_2d(sb + j * (64 * kBlockK), &tma_b, full, n_block * kBlockN + 64 * j, kb * kBlockK);
          } else {
            tma_load_2d(sb, &tma_b, full, kb * kBlockK, n_block * kBlockN);
          }
          st.advance();
        }
      }
      if (rs.words != nullptr) grid_round_sync_finish(rs.words, gridDim.x);
    }
  } else {
    // ---------------------------------------------------------------- consumer warpgroups
    setmaxnreg_inc<Cfg::kConsumerRegs>();
    const int consumer = wg - 1;
    const int warp = warp_idx_in_warpgroup();
    const int lane = lane_idx();

    // Stage-0 descriptors of this consumer's A rows and of B; other stages and k-steps are constant
    // byte offsets from them.
    const uint64_t desc_a0 = make_smem_desc_kmajor_sw128(smem_a + consumer * Cfg::kConsumerRows * kBlockK);
    uint64_t desc_b0;
    if constexpr (Cfg::kBNMajor)
      desc_b0 = make_smem_desc_mnmajor_sw128(smem_b, uint32_t(Cfg::kBoxBytesB));
    else
      desc_b0 = make_smem_desc_kmajor_sw128(smem_b);
    // B's k16 step: 32 bytes along a K-major row, or 16 rows of 128 bytes in the N-major boxes.
    constexpr uint32_t kStepB = Cfg::kBNMajor ? 16u * Cfg::kRowBytes : 32u;

    // Two adjacent outputs in one store when every row start keeps the pair aligned.
    const bool vec_ok = ldc % 2 == 0 && reinterpret_cast<uint64_t>(c) % (2 * sizeof(typename Cfg::TC)) == 0;

    float acc[Cfg::kMmaM][kBlockN / 2];
    PipelineState<kStages> st;
    uint32_t boxes_done = 0;  // epilogue buffer rotation (kTmaStore)
    for (int u = int(blockIdx.x); u < num_units; u += int(gridDim.x)) {
      const SplitKUnit unit = split_k_unit(sk, num_tiles, num_k_blocks, u);
      int m_block, n_block;
      sched.get(unit.tile, m_block, n_block);

#pragma unroll
      for (int s = 0; s < Cfg::kMmaM; ++s) {
#pragma unroll
        for (int i = 0; i < kBlockN / 2; ++i) acc[s][i] = 0.0f;
        fence_accumulators(acc[s]);
      }

      uint32_t prev_stage = 0;
      for (int kb = unit.kb0; kb < unit.kb1; ++kb) {
        pipe.consumer_wait(st);
        const uint64_t da = smem_desc_add(desc_a0, st.index * uint32_t(Cfg::kStageBytesA));
        const uint64_t db = smem_desc_add(desc_b0, st.index * uint32_t(Cfg::kStageBytesB));
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < kBlockK / 16; ++k) {
#pragma unroll
          for (int s = 0; s < Cfg::kMmaM; ++s) {
            wgmma_m64k16_ss<T, kBlockN, Cfg::kBNMajor>(smem_desc_add(da, uint32_t(s * 64 * Cfg::kRowBytes + k * 32)),
                                                       smem_desc_add(db, uint32_t(k) * kStepB), acc[s]);
          }
        }
        wgmma_commit_group();
        // The group of the previous k-block has completed: its stage can be refilled.
        wgmma_wait_group<1>();
        if (kb > unit.kb0 && lane == 0) pipe.consumer_release(prev_stage);
        prev_stage = st.index;
        st.advance();
      }
      wgmma_wait_group<0>();
#pragma unroll
      for (int s = 0; s < Cfg::kMmaM; ++s) fence_accumulators(acc[s]);
      if (unit.kb1 > unit.kb0 && lane == 0) pipe.consumer_release(prev_stage);
      // Epilogue: this thread's first element is row 16 * warp + lane / 4, column 2 * (lane % 4) of
      // its consumer's slice. The pieces of a split tile write it together.
      if (unit.piece >= 0) {
        detail::gemm_sm90_split_reduce<Cfg>(acc, sk, num_tiles, unit, consumer, c, M, N, ldc,
                                            m_block * kBlockM + consumer * Cfg::kConsumerRows + 16 * warp + lane / 4,
                                            n_block * kBlockN + 2 * (lane % 4), vec_ok);
        continue;
      }

      if constexpr (Cfg::kTmaStore) {
        detail::gemm_sm90_store_tma<Cfg>(acc, &tma_c, smem_c + consumer * Cfg::kEpilogueBuffers * Cfg::kBoxBytesC,
                                         consumer, M, N, m_block * kBlockM + consumer * Cfg::kConsumerRows,
                                         n_block * kBlockN, boxes_done);
      } else {
        const int row0 = m_block * kBlockM + consumer * Cfg::kConsumerRows + 16 * warp + lane / 4;
        const int col0 = n_block * kBlockN + 2 * (lane % 4);
        const bool full_tile = (m_block + 1) * kBlockM <= M && (n_block + 1) * kBlockN <= N;
        detail::gemm_sm90_store_direct<Cfg>(acc, c, M, N, ldc, row0, col0, full_tile, vec_ok);
      }
    }
    // Shared memory must outlive the TMA stores that read it.
    if constexpr (Cfg::kTmaStore) {
      if (thread_idx_in_warpgroup() == 0) tma_store_wait<0>();
    }
  }
#else
  // Not sm_90a: the host pass sees an empty body; a device build for another target traps, loudly.
#if defined(__CUDA_ARCH__)
  __trap();
#endif
  (void)tma_a;
  (void)tma_b;
  (void)tma_c;
  (void)c;
  (void)M;
  (void)N;
  (void)K;
  (void)ldc;
  (void)raster_group;
  (void)sk;
#endif
}

// The kernel. Launch: Cfg::kThreads threads, Cfg::kSmemBytes dynamic shared memory, any grid size
// (one block per SM is the intent; blocks loop over tiles).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_sm90_kernel(const __grid_constant__ TmaDescriptor tma_a, const __grid_constant__ TmaDescriptor tma_b,
                     const __grid_constant__ TmaDescriptor tma_c, typename Cfg::TC* __restrict__ c, int M, int N,
                     int K, int64_t ldc, int raster_group, SplitK sk, RoundSync rs) {
  gemm_sm90_body<Cfg>(tma_a, tma_b, tma_c, c, M, N, K, ldc, raster_group, sk, rs);
}

}  // namespace tl::cuda
