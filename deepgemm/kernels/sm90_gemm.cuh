// DeepGEMM's Hopper kernel (sm_90a): D = [C +] A B^T for FP8 with fine-grained scaling and for BF16,
// one GEMM or M-grouped (contiguous or masked), compiled at run time by deepgemm/src/gpu.cc for one
// configuration (Sm90GemmConfig) and launched with the run-time arguments of Sm90GemmParams.
//
//   A  [M, K] (masked: [G, max_M, K]), K-major, e4m3 or bfloat16, through a 3-D TMA map {K, rows, G}
//   B  [N, K] (grouped: [G, N, K]),    K-major, same type,         through a 3-D TMA map {K, N, G}
//   D  [M, N] (masked: [G, max_M, N]), bfloat16 (TMA store when BLOCK_N % 64 == 0) or float
//   FP8 scales: sfa one per row of A and 128 of K (3-D TMA map {M, K/128, G}), sfb one per 128 x 128
//   block of B (FP32)
//
// Design (the same skeleton as tl/device/cuda/gemm_sm90.h, whose epilogues it reuses):
// - Persistent: one CTA per SM walks the output tiles in grouped raster order; a masked GEMM walks
//   group after group and skips the tiles past each group's valid rows (read on the device, so
//   the launch needs no host sync and can sit in a CUDA graph).
// - Warpgroup 0 produces: one thread issues the TMA loads of the A and B tiles (128-byte swizzle,
//   BLOCK_K = one 128-byte row: 128 FP8 or 64 BF16 elements) and, for FP8, of the stage's BLOCK_M
//   scales of A (MN-major, TMA-aligned: gpu.cc copies other forms into it) into a kStages ring.
//   B's scales (two per k-block) are read by the consumers themselves: one k-block ahead from global
//   memory in the two-partial-set loop, from a per-warp window in shared memory in the other.
// - One, two or three consumer warpgroups (BLOCK_M = 64, 128, 192 or 256), each owning 64 or 128
//   rows x BLOCK_N columns, computed as one or two m64 waves per k-block (256-row tiles read less B
//   per FLOP; with 192-row tiles a consumer's promotion runs under the other two's wgmmas).
//   (Two consumers taking alternate k-blocks of a 64-row tile, kKInterleave, measured no faster than
//   one on the H200 and were removed: docs/deepgemm.md. sm90_fp4_gemm.cuh keeps its own.)
//   FP8: per k-block the wgmma k32 results go to a fresh FP32 partial set, which is then promoted
//   into the accumulators with the scales, acc += partial * sa[row] * sb[col block]: the tensor
//   cores' FP8 accumulation keeps only about 14 bits of mantissa, so it never spans more than one
//   128-deep scale block. With BLOCK_N <= 128 two partial sets alternate, so the next k-block's
//   wgmmas are in flight during a promotion. BF16: wgmma k16 accumulates in place, one group in
//   flight across k-blocks.
// - FP4 B (kFp4B): TMA loads B packed (64 bytes per row and k-block: half the traffic) into a
//   staging buffer; the producer warpgroup's three idle warps (ahead of use) and, with promotion
//   every 128, the consumer warps (the next k-block's share, while their wgmmas of the current one
//   run) expand it to e4m3 in the swizzled B tile (layout_copy.cuh's fp4_expand_tile), each warp
//   arriving on a third barrier per stage, which the consumers wait on after the full barrier.
// - Per-row B scales (FP4 B, the K-grouped GEMM): B's scales of the
//   tile's columns come by TMA with the stage, and the promotion runs every kPromotionK (128 or 32)
//   of K with a scale per column.
// - Epilogue: C (FP32 accumulate) is read into the accumulators before the mainloop (FP8) or added after
//   it (BF16, whose wgmmas accumulate in place: see the tile loop); padding rows
//   of a contiguous grouped GEMM (m_indices -1) are written as zeros; rows past a masked group's
//   count are not written.
// - Split-K (plain GEMMs, p.split_k; tl/device/split_k.h): when the tiles leave SMs idle, the last
//   wave's tiles are cut into pieces of K, one per CTA; the pieces sum their FP32 partials in the
//   kernel, in piece order (gemm_sm90.h's gemm_sm90_split_reduce), piece 0 carrying C.
#pragma once

#include "deepgemm/kernels/layout_copy.cuh"
#include "deepgemm/kernels/sm90_params.h"
#include "deepgemm/kernels/sm90_timeline.h"
#include "tl/device/cuda/arch.h"
#include "tl/device/cuda/convert.h"
#include "tl/device/cuda/gemm_sm90.h"
#include "tl/device/cuda/mbarrier.h"
#include "tl/device/cuda/round_sync.h"
#include "tl/device/cuda/tile_scheduler.h"
#include "tl/device/cuda/tma.h"
#include "tl/device/cuda/wgmma.h"

namespace deepgemm::kernels {

using tl::bfloat16_t;
using tl::cuda::is_same_v;

enum Sm90Grouping : int { kGroupNone = 0, kGroupMContiguous = 1, kGroupMMasked = 2 };

// kTmaStore_: the epilogue goes through shared memory and TMA stores (bfloat16 D, BLOCK_N a multiple
// of 64, D 16-byte aligned with 16-byte row and group strides); otherwise every thread stores its
// fragment directly. kSfbPerRow_: B's scales are per row of B (per output column) and per
// kPromotionK_ (128, or 32) of K, loaded by TMA like A's (FP4 B, the K-grouped GEMM); otherwise one
// per 128 x 128 block of B, read directly.
// kMulticast_ 2: CTAs run in clusters of 2 on vertically adjacent tiles (same columns), each loading
// half of the shared B tile and multicasting it to both (half the L2 traffic of B).
// kEpilogueBuffers_: 64 x 64 staging buffers per consumer for the TMA-store epilogue, 2 (a box is
// staged while the previous one is stored), 1 (room for one more stage) or, with
// kEpilogueWholeSlice_, one per box of the consumer's slice (staged at once); heuristics.cc decides.
// kFp4B_: B is packed e2m1, expanded to e4m3 in shared memory (per-row B scales).
// kFoldScales_ (kFp4B, B's scales powers of two per 32 of K): the expansion folds each row's four
// scales of a k-block into the values against the largest, and the promotion runs every 128 of K.
template <bool kFp8_, class TD_, int kBlockM_, int kBlockN_, int kStages_, int kGrouping_, bool kHasC_,
          bool kTmaStore_, bool kSfbPerRow_ = false, int kPromotionK_ = 128, int kMulticast_ = 1,
          int kEpilogueBuffers_ = 2, bool kFp4B_ = false, bool kFoldScales_ = false, bool kEpilogueWholeSlice_ = false,
          bool kRingRounds_ = false>
struct Sm90GemmConfig {
  static constexpr bool kFp8 = kFp8_;
  using TC = TD_;  // the output type (the name tl/device/cuda/gemm_sm90.h's epilogues expect)
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr int kGrouping = kGrouping_;
  static constexpr bool kHasC = kHasC_;
  static constexpr bool kSfbPerRow = kSfbPerRow_;
  static constexpr int kScaleRows = 128 / kPromotionK_;  // rows of per-row B scales per k-block
  static constexpr bool kFoldScales = kFoldScales_;
  static constexpr int kPromotionK = kFoldScales ? 128 : kPromotionK_;  // K between promotions
  static constexpr int kSubBlocks = 128 / kPromotionK;                  // promotions per k-block
  static constexpr int kMulticast = kMulticast_;
  static constexpr bool kFp4B = kFp4B_;

  static constexpr int kBlockK = kFp8 ? 128 : 64;  // one 128-byte swizzle row
  // 192-row tiles: three consumers of one m64 wave each, so a consumer's promotion hides under the
  // other two's wgmmas (FP8 plain GEMMs).
  static constexpr int kNumConsumers = kBlockM == 64 ? 1 : kBlockM == 192 ? 3 : 2;
  static constexpr int kMmaM = kBlockM / (64 * kNumConsumers);  // m64 waves per consumer and k-block
  static constexpr int kConsumerRows = 64 * kMmaM;
  static constexpr int kThreads = 128 * (1 + kNumConsumers);
  // kFp4B: the warps that expand each stage -- the producer warpgroup's warps 1-3, ahead of use,
  // and with promotion every 128 of K every consumer warp, for the next k-block while its wgmmas of
  // the current one run (with promotion every 32 a sub-block's single wgmma is shorter than that
  // share: on the H200 it cost 5%, and gained 7-9% with 128).
  static constexpr bool kConsumersExpand = kPromotionK == 128;
  static constexpr int kProducerExpanders = 96;  // expander indices 0-95: the producer warpgroup's warps 1-3
  static constexpr int kExpanderWarps = kProducerExpanders / 32 + (kConsumersExpand ? 4 * kNumConsumers : 0);
  static constexpr bool kTmaStore = kTmaStore_;
  // FP8 with one wave and BLOCK_N <= 128 has registers for a second partial set (3 x 64
  // accumulators per thread), which lets the next k-block's wgmmas run during a promotion.
  static constexpr bool kOverlapPromotion = kFp8 && !kSfbPerRow && sm90_two_partial_sets(kBlockM, kBlockN);
  // FP8 block scales without a second partial set (256-row, 192-row and wider-than-128 tiles): each
  // consumer warp stages B's scales of kSm90SfbWindow k-blocks at a time in shared memory (a float2
  // per k-block, one lane each), so the loop reads them with a shared load. The guarded global load
  // one k-block ahead it replaces put a wait for that load into every k-block (ptxas moved the value
  // into a uniform register right after loading it); staged, and each k-block's pair read at the end
  // of the one before, the H200 ran 1.8-3.8% faster on four shapes and even at K = 512, where each
  // tile stages its window with nothing to hide it (docs/perf.md, stop 29).
  static constexpr bool kStagedSfb = kFp8 && !kSfbPerRow && !kOverlapPromotion;
  static constexpr int kStagedSfbBytes = kStagedSfb ? kNumConsumers * 4 * kSm90SfbWindow * 8 : 0;
  // kRingRounds_ (the staged-scale loop): where the ring is at stage 0, whole rounds of kStages
  // k-blocks run unrolled, each stage's barrier, descriptors and scales at compile-time offsets (no
  // cursor to advance: its uniform integer work sat between the data wait and the first wgmma, 8-16%
  // of the consumers' ncu samples, docs/perf.md stop 29). The ring stays continuous across tiles, so
  // the producer runs ahead as before; k-blocks before the ring's wrap and after the last whole
  // round take the cursor. On the H200 1.2-2.9% faster on five M = 4096 shapes of 12-128 k-blocks,
  // but 1.4-5% slower with 4-5 k-blocks a tile or one tile a CTA (more code to fetch, a loop split
  // in two): heuristics.h's sm90_ring_rounds decides (perf.md stop 30).
  static constexpr bool kRingRounds = kRingRounds_;
  static_assert(!kRingRounds || kStagedSfb, "whole ring rounds are a form of the staged-scale loop");

  static constexpr int kStageBytesA = kBlockM * 128;
  static constexpr int kStageBytesB = kBlockN * 128;
  // A contiguous grouped GEMM's 256-row tile spans two 128-row blocks, which may belong to two
  // groups (each segment starts on a 128-row boundary): each consumer owns one block, and a stage
  // has room for a second B tile, loaded only when the blocks' experts differ.
  static constexpr bool kDualB = kGrouping == kGroupMContiguous && kBlockM == 256;
  static constexpr int kStageStrideB = kStageBytesB * (kDualB ? 2 : 1);
  // A's scales of one stage: BLOCK_M floats (a multiple of 128 bytes, as TMA destinations need).
  static constexpr int kStageBytesSf = kFp8 ? kBlockM * 4 : 0;
  // Per-row B scales of one stage: kScaleRows rows of BLOCK_N floats, padded to 128 bytes.
  static constexpr int kStageBytesSfb = kSfbPerRow ? (kBlockN * 4 * kScaleRows + 127) / 128 * 128 : 0;
  // FP4 B as loaded: BLOCK_N rows of 64 bytes (a multiple of 128 bytes: BLOCK_N is even).
  static constexpr int kStageBytesBPacked = kFp4B ? kBlockN * 64 : 0;
  static constexpr int kBoxC = 64;
  static constexpr int kBoxBytesC = kBoxC * kBoxC * int(sizeof(TC));
  static constexpr int kEpilogueBuffers = kEpilogueBuffers_;
  static constexpr bool kEpilogueWholeSlice = kEpilogueWholeSlice_;
  static constexpr int kEpilogueBytes = kTmaStore ? kNumConsumers * kEpilogueBuffers * kBoxBytesC : 0;
  static constexpr int kBarrierBytes = (kFp4B ? 3 : 2) * kStages * 8;  // full, empty (and expanded) per stage
  static constexpr int kSmemBytes =
      kStages * (kStageBytesA + kStageStrideB + kStageBytesSf + kStageBytesSfb + kStageBytesBPacked) + kEpilogueBytes +
      kBarrierBytes + kStagedSfbBytes + 1024;

  // Register file: 128 x (producer + consumers x consumer) <= 65536.
  static constexpr int kProducerRegs = kNumConsumers == 3 ? 24 : 40;
  static constexpr int kConsumerRegs = kNumConsumers == 3 ? 160 : kNumConsumers == 2 ? 232 : 240;

  static_assert(is_same_v<TC, bfloat16_t> || is_same_v<TC, float>, "output: bfloat16 or float");
  static_assert(kBlockM == 64 || kBlockM == 128 || kBlockM == 256 || kBlockM == 192,
                "BLOCK_M: 64 (one consumer), 128 (two), 192 (three) or 256 (two, two m64 waves each)");
  static_assert(kBlockM != 192 || (kFp8 && !kSfbPerRow && kGrouping == kGroupNone && kMulticast == 1 && kBlockN <= 128),
                "192-row tiles: plain FP8 GEMMs with block scales, no multicast, BLOCK_N <= 128");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kNumConsumers <= 65536, "register file");
  static_assert(!kDualB || (!kSfbPerRow && kMulticast == 1),
                "contiguous grouped 256-row tiles: block scales of B (not per row: no FP4 B) or BF16, no multicast");
  // Multiples of 8 (56: 128 tiles across N = 7168 where 64 leaves 20 of 132 SMs idle) are wgmma sizes
  // for FP8 and BF16 inputs; the B tile is BLOCK_N whole 8-row swizzle atoms.
  static_assert(kBlockN % 8 == 0 && kBlockN >= 16 && kBlockN <= 256, "BLOCK_N: a multiple of 8 from 16 up to 256");
  // Accumulator registers per consumer thread: the promoted sets plus FP8's partial set(s).
  static_assert((kMmaM + (kFp8 ? 1 + int(kOverlapPromotion) : 0)) * kBlockN / 2 <= 192,
                "too many accumulators per thread: lower BLOCK_N (or BLOCK_M)");
  // Tiles start at multiples of BLOCK_N, so n0 % 128 reaches 128 - gcd(BLOCK_N, 128).
  static constexpr int gcd128(int a) {
    return a % 128 == 0 ? 128 : a % 64 == 0 ? 64 : a % 32 == 0 ? 32 : a % 16 == 0 ? 16 : 8;
  }
  static_assert(!kFp8 || kSfbPerRow || kBlockN + 128 - gcd128(kBlockN) <= 256,
                "a tile's columns must span at most two 128-row blocks of B's scales");
  static_assert(!kSfbPerRow || kFp8, "per-row B scales belong to the FP8 kernel");
  static_assert(!kFoldScales || (kFp4B && kPromotionK_ == 32), "folded scales: FP4 B with scales per 32 of K");
  static_assert(kPromotionK == 128 || (kPromotionK == 32 && kSfbPerRow), "promotion every 128 of K, or 32 "
                "with per-row B scales");
  static_assert(!kTmaStore || (is_same_v<TC, bfloat16_t> && kBlockN % 64 == 0),
                "the TMA-store epilogue writes 64 x 64 boxes of bfloat16");
  static_assert(kStages >= 2, "at least two stages");
  static_assert(kEpilogueWholeSlice ? kEpilogueBuffers == kMmaM * (kBlockN / kBoxC)
                                    : kEpilogueBuffers == 1 || kEpilogueBuffers == 2,
                "one or two epilogue buffers per consumer, or one per box of its slice");
  static_assert(!kFp4B || (kFp8 && kSfbPerRow && kMulticast == 1),
                "packed FP4 B: FP8 A, per-row B scales, no multicast");
  static_assert(kMulticast == 1 || (kMulticast == 2 && kGrouping == 0 && !kSfbPerRow && kBlockN % 16 == 0),
                "multicast: clusters of 2, plain GEMMs with block scales, BLOCK_N / 2 whole 8-row swizzle atoms");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block is 227 KB on sm_90");
};

// The scales a thread needs to promote one k-block: A's of rows r0 + 64 w and r0 + 64 w + 8 for
// each wave w, B's of the 128-block holding the tile's first column (sb0) and of the next (sb1).
template <int kWaves>
struct Sm90Scales {
  float sa[kWaves][2];
  float sb0, sb1;
};

// Where one output tile lies. `group`: of A, D and A's scales (masked: the tile's group, else 0);
// `b_group`: of B (grouped: the tile's expert); `row_limit`: rows of A/D at or past it are not valid
// (masked: the group's count; otherwise M); `compute`: false for the padding blocks of a contiguous
// grouped GEMM (written as zeros without a mainloop). Cfg::kDualB (contiguous, 256 rows): the
// second 128-row block's expert is `b_group_hi` (-1: padding), and `dual_b` when it differs from the
// first's, whose B then goes into the stage's second slot; `b_group` is the first valid one's.
struct Sm90Tile {
  int group, b_group, b_group_hi, m0, n0, row_limit;
  bool compute, dual_b;
  tl::SplitKUnit unit;  // the tile's index, and the k-blocks it sums: all, or its piece's (split-K)
};

template <class Cfg>
struct Sm90Tiles {
  tl::cuda::GroupedTileScheduler sched;
  int per_group;  // tiles of one group
  int tiles;      // of all groups
  int total;      // units of work: the tiles, or with split-K the whole tiles and the pieces

  TL_DEVICE static Sm90Tiles make(const Sm90GemmParams& p) {
    Sm90Tiles t;
    // With multicast a cluster takes Cfg::kMulticast vertically adjacent tiles: schedule their union.
    t.sched = tl::cuda::GroupedTileScheduler::make(p.m, p.n, Cfg::kBlockM * Cfg::kMulticast, Cfg::kBlockN,
                                                   p.raster_group);
    t.per_group = t.sched.num_tiles();
    t.tiles = Cfg::kGrouping == kGroupMMasked ? t.per_group * p.num_groups : t.per_group;
    t.total = tl::split_k_units(p.split_k, t.tiles);
    return t;
  }

  // Unit `index` in [0, total); false when it has nothing to write (past a masked group's rows).
  TL_DEVICE bool get(const Sm90GemmParams& p, int index, Sm90Tile& tile) const {
    tile.unit = tl::split_k_unit(p.split_k, tiles, (p.k + Cfg::kBlockK - 1) / Cfg::kBlockK, index);
    index = tile.unit.tile;
    const int g = Cfg::kGrouping == kGroupMMasked ? index / per_group : 0;
    int m_block, n_block;
    sched.get(index - g * per_group, m_block, n_block);
    tile.m0 = m_block * Cfg::kBlockM * Cfg::kMulticast;
    if constexpr (Cfg::kMulticast > 1) tile.m0 += int(tl::cuda::cluster_ctarank()) * Cfg::kBlockM;
    tile.n0 = n_block * Cfg::kBlockN;
    tile.group = g;
    tile.b_group = g;
    tile.b_group_hi = g;
    tile.row_limit = p.m;
    tile.compute = true;
    tile.dual_b = false;
    if constexpr (Cfg::kGrouping == kGroupMMasked) {
      const int valid = __ldg(p.masked_m + g);
      tile.row_limit = valid < p.m ? valid : p.m;
      return tile.m0 < tile.row_limit;
    } else if constexpr (Cfg::kGrouping == kGroupMContiguous) {
      // Each group's segment starts on a 128-row boundary, so the block's first row names its group.
      const int lo = __ldg(p.m_indices + tile.m0);
      const int hi = Cfg::kDualB && tile.m0 + 128 < p.m ? __ldg(p.m_indices + tile.m0 + 128) : (Cfg::kDualB ? -1 : lo);
      tile.b_group = lo >= 0 ? lo : hi;
      tile.b_group_hi = hi;
      tile.compute = tile.b_group >= 0;
      tile.dual_b = Cfg::kDualB && lo >= 0 && hi >= 0 && hi != lo;
    }
    return true;
  }
};

template <class Cfg>
__device__ __forceinline__ void sm90_gemm_body(const tl::cuda::TmaDescriptor& tma_a,
                                               const tl::cuda::TmaDescriptor& tma_b,
                                               const tl::cuda::TmaDescriptor& tma_sfa,
                                               const tl::cuda::TmaDescriptor& tma_sfb,
                                               const tl::cuda::TmaDescriptor& tma_d, const Sm90GemmParams& p) {
#if defined(TL_CUDA_SM90A)
  using namespace tl::cuda;
  using TC = typename Cfg::TC;
  constexpr int kStages = Cfg::kStages;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kBlockK = Cfg::kBlockK;

  extern __shared__ __align__(1024) uint8_t dg_dynamic_smem[];
  // 1024-byte alignment: the 128-byte swizzle pattern of TMA and wgmma repeats every 1024 bytes.
  const uint32_t raw = smem_addr(dg_dynamic_smem);
  uint8_t* smem = dg_dynamic_smem + ((1024u - (raw & 1023u)) & 1023u);
  uint8_t* smem_a = smem;                                      // [kStages][BLOCK_M][128 B]
  uint8_t* smem_b = smem + kStages * Cfg::kStageBytesA;        // [kStages][1 or 2 (kDualB)][BLOCK_N][128 B]
  uint8_t* smem_c = smem + kStages * (Cfg::kStageBytesA + Cfg::kStageStrideB);  // [consumer][2][box]
  float* smem_sf = reinterpret_cast<float*>(smem_c + Cfg::kEpilogueBytes);   // [kStages][BLOCK_M]
  float* smem_sfb = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(smem_sf) + kStages * Cfg::kStageBytesSf);
  uint8_t* smem_bp = reinterpret_cast<uint8_t*>(smem_sfb) + kStages * Cfg::kStageBytesSfb;  // [kStages][packed B]
  auto* bars = reinterpret_cast<mbarrier_t*>(smem_bp + kStages * Cfg::kStageBytesBPacked);
  const TmaPipeline<kStages> pipe{bars, bars + kStages};
  [[maybe_unused]] mbarrier_t* expanded = bars + 2 * kStages;  // kFp4B: stage s's B tile is e4m3 now
  // kStagedSfb: [consumer][warp][kSm90SfbWindow] of B's two scales per k-block
  [[maybe_unused]] auto* sfb_windows = reinterpret_cast<float2*>(reinterpret_cast<uint8_t*>(bars) + Cfg::kBarrierBytes);
  constexpr int kSfStride = Cfg::kStageBytesSf / 4;
  constexpr int kSfbStride = Cfg::kStageBytesSfb / 4;

  const int wg = warpgroup_idx();
  if (threadIdx.x == 0) {
    // With multicast a stage is free once the consumers of both CTAs (each writes into both) let go.
    pipe.init(Cfg::kNumConsumers * 4 * Cfg::kMulticast);
    if constexpr (Cfg::kFp4B)
      for (int s = 0; s < kStages; ++s) mbarrier_init(&expanded[s], Cfg::kExpanderWarps);
    fence_barrier_init();
  } else if (threadIdx.x == 32) {
    tma_prefetch_descriptor(&tma_a);
    tma_prefetch_descriptor(&tma_b);
    if constexpr (Cfg::kFp8) tma_prefetch_descriptor(&tma_sfa);
    if constexpr (Cfg::kSfbPerRow) tma_prefetch_descriptor(&tma_sfb);
    if constexpr (Cfg::kTmaStore) tma_prefetch_descriptor(&tma_d);
  }
  // The peer's barriers must be initialized before any multicast or remote arrival reaches them.
  if constexpr (Cfg::kMulticast > 1)
    cluster_sync();
  else
    __syncthreads();
  // Launched overlapping the kernel before it (gpu.cc, DG_GPU_PDL): the setup above touched no
  // global memory, so it ran beside that kernel's tail; from here on its writes are visible. The
  // next kernel may be scheduled as soon as SMs free up (it waits for this one the same way).
  griddep_launch_dependents();
  griddep_wait();

  const Sm90Tiles<Cfg> tiles = Sm90Tiles<Cfg>::make(p);
  // The pieces of a split tile wait for each other: a launch that cannot run them at once would hang.
  if (!tl::split_k_fits(p.split_k, tiles.total, int(gridDim.x))) __trap();
  // Clusters walk the tiles together: cluster c takes tiles c, c + clusters, ...
  const int first_tile = int(blockIdx.x) / Cfg::kMulticast, tile_step = int(gridDim.x) / Cfg::kMulticast;
  [[maybe_unused]] const uint32_t cta_rank = Cfg::kMulticast > 1 ? cluster_ctarank() : 0u;
  // kFp4B: expander `tid` (of 32 * kExpanderWarps) expands its share of stage st's packed B once it
  // has landed, and its warp arrives on the stage's `expanded` barrier.
  [[maybe_unused]] auto expand_share = [&](const PipelineState<kStages>& st, int tid) {
    pipe.consumer_wait(st);
    fp4_expand_tile<kBlockN, Cfg::kFoldScales>(smem_addr(smem_bp + st.index * Cfg::kStageBytesBPacked),
                                               smem_addr(smem_b + st.index * Cfg::kStageStrideB),
                                               smem_sfb + st.index * kSfbStride, tid, 32 * Cfg::kExpanderWarps);
    fence_proxy_async_shared();  // the generic-proxy writes, visible to wgmma (async proxy)
    __syncwarp();
    if (lane_idx() == 0) mbarrier_arrive(&expanded[st.index]);
  };

  if (wg == 0) {
    // ---------------------------------------------------------------- producer warpgroup
    setmaxnreg_dec<Cfg::kProducerRegs>();
    const int warp = warp_idx_in_warpgroup();
    if (warp == 0 && elect_one_sync()) {
      DG_TIMELINE_OPEN(0, true);
      PipelineState<kStages> st;
      // p.round_sync: every p.round_sync_every-th round (of those every CTA has a tile in) starts
      // once every CTA's producer has issued the rounds before it, so the CTAs that share panels of
      // A and B stay in step and L2 serves them from one DRAM read (heuristics.h: only where A and
      // B outgrow L2).
      const int synced_end = p.round_sync != nullptr ? tiles.total / tile_step * tile_step : 0;
      bool sync_wait = true;
      for (int t = first_tile; t < tiles.total; t += tile_step) {
        Sm90Tile tile;
        if (!tiles.get(p, t, tile) || !tile.compute) continue;
        if (const int round = (t - first_tile) / tile_step; t < synced_end && round % p.round_sync_every == 0) {
          if (round > 0)  // none before the first round
            sync_wait = grid_round_sync(p.round_sync, round / p.round_sync_every - 1, gridDim.x, sync_wait);
        }
        DG_STAMP(Tile);
        for (int kb = tile.unit.kb0; kb < tile.unit.kb1; ++kb) {
          DG_STAMP(EmptyWaitBegin);
          pipe.producer_acquire(st);
          DG_STAMP(EmptyWaitEnd);
          mbarrier_t* full = pipe.full_barrier(st);
          constexpr int kBytesB = Cfg::kFp4B ? Cfg::kStageBytesBPacked : Cfg::kStageBytesB;
          mbarrier_arrive_expect_tx(full, uint32_t(Cfg::kStageBytesA + kBytesB * (tile.dual_b ? 2 : 1) +
                                                   Cfg::kStageBytesSf +
                                                   (Cfg::kSfbPerRow ? kBlockN * 4 * Cfg::kScaleRows : 0)));
          tma_load_3d(smem_a + st.index * Cfg::kStageBytesA, &tma_a, full, kb * kBlockK, tile.m0, tile.group);
          if constexpr (Cfg::kFp4B) {
            // Packed: 64 bytes of a row per k-block (B's map counts bytes along K).
            tma_load_3d(smem_bp + st.index * Cfg::kStageBytesBPacked, &tma_b, full, kb * (kBlockK / 2), tile.n0,
                        tile.b_group);
          } else if constexpr (Cfg::kMulticast > 1) {
            // This CTA's half of B's rows, into the same place in both CTAs.
            constexpr int kHalf = kBlockN / 2;
            tma_load_3d_multicast(smem_b + st.index * Cfg::kStageStrideB + cta_rank * (kHalf * 128), &tma_b, full,
                                  kb * kBlockK, tile.n0 + int(cta_rank) * kHalf, tile.b_group, tl::uint16_t(0x3));
          } else {
            tma_load_3d(smem_b + st.index * Cfg::kStageStrideB, &tma_b, full, kb * kBlockK, tile.n0, tile.b_group);
            if (Cfg::kDualB && tile.dual_b)  // the second block's expert, into the stage's second B slot
              tma_load_3d(smem_b + st.index * Cfg::kStageStrideB + Cfg::kStageBytesB, &tma_b, full, kb * kBlockK,
                          tile.n0, tile.b_group_hi);
          }
          if constexpr (Cfg::kFp8) tma_load_3d(smem_sf + st.index * kSfStride, &tma_sfa, full, tile.m0, kb, tile.group);
          if constexpr (Cfg::kSfbPerRow)
            tma_load_3d(smem_sfb + st.index * kSfbStride, &tma_sfb, full, tile.n0, kb * Cfg::kScaleRows, tile.b_group);
          DG_STAMP(TmaIssue);
          st.advance();
        }
      }
      if (p.round_sync != nullptr) grid_round_sync_finish(p.round_sync, gridDim.x);
      DG_TIMELINE_CLOSE();
    } else if (Cfg::kFp4B && warp >= 1) {
      // Expanders 0 .. kProducerExpanders - 1: every stage's share, as soon as it lands. The stage's
      // previous readers are done (the producer refilled it only after they released it).
      PipelineState<kStages> st;
      for (int t = first_tile; t < tiles.total; t += tile_step) {
        Sm90Tile tile;
        if (!tiles.get(p, t, tile) || !tile.compute) continue;
        for (int kb = tile.unit.kb0; kb < tile.unit.kb1; ++kb) {
          expand_share(st, int(threadIdx.x) - 32);
          st.advance();
        }
      }
    }
  } else {
    // ---------------------------------------------------------------- consumer warpgroups
    setmaxnreg_inc<Cfg::kConsumerRegs>();
    const int consumer = wg - 1;
    const int warp = warp_idx_in_warpgroup();
    const int lane = lane_idx();
    DG_TIMELINE_OPEN(1 + 4 * consumer + warp, lane == 0);
    constexpr int kMmaM = Cfg::kMmaM;
    const uint64_t desc_a0 = make_smem_desc_kmajor_sw128(smem_a + consumer * Cfg::kConsumerRows * 128);
    const uint64_t desc_b0 = make_smem_desc_kmajor_sw128(smem_b);
    // This thread's rows inside the tile (r0 + 64 w and r0 + 64 w + 8 for wave w) and first column
    // (fragment layout in wgmma.h).
    const int r0 = consumer * Cfg::kConsumerRows + 16 * warp + lane / 4;
    const int c0 = 2 * (lane % 4);
    const bool vec_ok = p.d_sr % 2 == 0 && reinterpret_cast<uint64_t>(p.d) % (2 * sizeof(TC)) == 0;

    float acc[kMmaM][kBlockN / 2];
    [[maybe_unused]] float part[kBlockN / 2];
    [[maybe_unused]] float part1[Cfg::kOverlapPromotion ? kBlockN / 2 : 1];
    // The consumers' place in the ring, with the stage's full barrier and wgmma descriptors carried
    // along and advanced with it: recomputed from the shared-memory base at every use, ptxas
    // re-derived that base from SR_CgaCtaId in every iteration (ncu's stall samples, stop 23).
    struct StageRef {
      uint32_t index, full;  // the stage and its full barrier's shared-memory address
      uint64_t da, db;       // its descriptors: A (this consumer's rows) and B
    };
    struct Cursor {
      PipelineState<kStages> st;
      StageRef at;
      // One stage on.
      void advance() {
        constexpr uint64_t kStepA = Cfg::kStageBytesA >> 4, kStepB = Cfg::kStageStrideB >> 4;  // descriptor units
        const bool wrap = st.index + 1u >= uint32_t(kStages);
        const uint32_t back = wrap ? uint32_t(kStages) : 0u;
        st.index = st.index + 1u - back;
        st.phase ^= wrap ? 1u : 0u;
        at.index = st.index;
        at.full += 8u * (1u - back);
        at.da += kStepA - kStepA * back;
        at.db += kStepB - kStepB * back;
      }
    };
    Cursor st{{}, {0u, smem_addr(pipe.full), desc_a0, desc_b0}};
    uint32_t boxes_done = 0;
    using Scales = Sm90Scales<kMmaM>;

    // FP8 steps. wait_fp8: waits for stage st, reads its scales, moves st on, returns the stage.
    // issue_fp8: queues wave w's wgmmas of a stage into `dst`, one group. retire_fp8 (after that
    // group completed): promotes `src` into wave w's accumulators, acc += src * sa[row] * sb[column
    // block]; `split`: the tile's columns inside the 128-block of B's scales holding its first one.
    // B's two scales per k-block come straight from global memory (all lanes read the same two
    // values: broadcast loads), one k-block ahead so their latency hides behind the current one.
    // In the two-partial-set loop (kOverlapPromotion) the loads are unconditional (past the
    // tile's last k-block they read that one again): a load under `if` must leave the old value
    // where it is not taken, which ptxas did there by copying the loaded register right after the
    // load -- a wait for the load's full latency every k-block, the top stall of the 64 x 32
    // kernel under ncu; unconditional, M = 128 calls ran 2-7% faster (docs/perf.md, stop 23). The
    // loop without a second partial set reads them from a staged window instead (kStagedSfb).
    // The next scale's address is carried and advanced (a 64-bit multiply of kernel parameters per
    // k-block before).
    struct SfbPrefetch {
      const float* first;  // the tile's first k-block's scale in the 128-block holding its first column
      const float* next;  // the next k-block's scale in the 128-block holding the tile's first column
      const float* last;  // `next` at the tile's last k-block
      int64_t gap;        // floats to the next 128-block's scale (0 past the last block)
      int64_t stride;     // floats between consecutive k-blocks' scales (p.sfb_sc)
      float v0, v1;       // the values loaded last
    } sfb{};  // (zeroed: NVRTC cannot see that each tile sets it before its first read)
    // Cfg::kDualB: added to the stage's B descriptor where this consumer's block reads the second B
    // slot (the tile's two 128-row blocks belong to different experts).
    [[maybe_unused]] uint64_t db_slot = 0;
    [[maybe_unused]] auto wait_fp8 = [&](Cursor& s, Scales& sc) {
      if constexpr (!Cfg::kSfbPerRow && !Cfg::kStagedSfb) {
        sc.sb0 = sfb.v0;
        sc.sb1 = sfb.v1;
        if constexpr (Cfg::kOverlapPromotion) {
          const float* at = sfb.next <= sfb.last ? sfb.next : sfb.last;
          sfb.v0 = __ldg(at);
          sfb.v1 = __ldg(at + sfb.gap);
          sfb.next += sfb.stride;
        } else if (sfb.next <= sfb.last) {
          sfb.v0 = __ldg(sfb.next);
          sfb.v1 = __ldg(sfb.next + sfb.gap);
          sfb.next += sfb.stride;
        }
      }
      DG_STAMP(FullWaitBegin);
      mbarrier_wait_parity(s.at.full, s.st.phase);
      if constexpr (Cfg::kFp4B) mbarrier_wait_parity(&expanded[s.st.index], s.st.phase);
      DG_STAMP(FullWaitEnd);
      const float* sf = smem_sf + s.st.index * kSfStride;
#pragma unroll
      for (int w = 0; w < kMmaM; ++w) {
        sc.sa[w][0] = sf[r0 + 64 * w];
        sc.sa[w][1] = sf[r0 + 64 * w + 8];
      }
      const StageRef stage = s.at;
      s.advance();
      return stage;
    };
    [[maybe_unused]] auto issue_fp8 = [&](const StageRef& stage, int w, auto& dst, int q = 0) {
      constexpr int kSteps = Cfg::kPromotionK / 32;  // k32 steps per promotion
      const uint64_t da = smem_desc_add(stage.da, uint32_t(w * 64 * 128));
      const uint64_t db = stage.db + db_slot;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        const uint32_t k_bytes = uint32_t((q * kSteps + kk) * 32);
        wgmma_m64k32_ss_fp8<kBlockN>(smem_desc_add(da, k_bytes), smem_desc_add(db, k_bytes), dst, kk > 0);
      }
      wgmma_commit_group();
      DG_STAMP(Issue);
    };
    // Per-row B scales (sub-block q of the stage's k-block): each column has its own.
    [[maybe_unused]] auto retire_fp8_per_row = [&](auto& src, const Scales& sc, int w, uint32_t stage, int q,
                                                   auto& dst) {
      DG_STAMP(PromoteBegin);
      fence_accumulators(src);
      const float* sb = smem_sfb + stage * kSfbStride + q * kBlockN + c0;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        const float2 b = *reinterpret_cast<const float2*>(sb + 8 * j);
        dst[4 * j + 0] = fmaf(src[4 * j + 0], sc.sa[w][0] * b.x, dst[4 * j + 0]);
        dst[4 * j + 1] = fmaf(src[4 * j + 1], sc.sa[w][0] * b.y, dst[4 * j + 1]);
        dst[4 * j + 2] = fmaf(src[4 * j + 2], sc.sa[w][1] * b.x, dst[4 * j + 2]);
        dst[4 * j + 3] = fmaf(src[4 * j + 3], sc.sa[w][1] * b.y, dst[4 * j + 3]);
      }
      DG_STAMP_AFTER(PromoteEnd, dst);
    };
    [[maybe_unused]] auto retire_fp8 = [&](auto& src, const Scales& sc, int w, int split, auto& dst) {
      DG_STAMP(PromoteBegin);
      fence_accumulators(src);
      const float s00 = sc.sa[w][0] * sc.sb0, s01 = sc.sa[w][0] * sc.sb1;
      const float s10 = sc.sa[w][1] * sc.sb0, s11 = sc.sa[w][1] * sc.sb1;
      auto promote = [&](int columns_first) {
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) {
          const bool first = 8 * j < columns_first;
          const float lo = first ? s00 : s01, hi = first ? s10 : s11;
          dst[4 * j + 0] = fmaf(src[4 * j + 0], lo, dst[4 * j + 0]);
          dst[4 * j + 1] = fmaf(src[4 * j + 1], lo, dst[4 * j + 1]);
          dst[4 * j + 2] = fmaf(src[4 * j + 2], hi, dst[4 * j + 2]);
          dst[4 * j + 3] = fmaf(src[4 * j + 3], hi, dst[4 * j + 3]);
        }
      };
      // `split` takes 128 / gcd(BLOCK_N, 128) values. With at most four and one wave a consumer, one
      // loop per value, chosen by a branch uniform over the tile, so no column selects its scale at
      // run time: those selects cost 48 FMULs, 24 FSELs and predicate work a wave at 128 x 192 and
      // spilled 14 registers around the ring-rounds loop; without them, kernel time at M = 4096
      // -14 to -15% (128 x 192), -5 to -8% (128 x 160, 128 x 96). With two waves (256 x 96) the
      // loops per value ran 2x slower (docs/perf.md, stop 37), so those keep the selects.
      constexpr int kStep = Cfg::gcd128(kBlockN);
      if constexpr (kBlockN <= kStep) {
        promote(kBlockN);  // never straddles
      } else if constexpr (128 / kStep <= 4 && kMmaM == 1) {  // 1, 2 or 4 values: 128 - i * kStep
        constexpr int kSplits = 128 / kStep;
        if (kSplits == 1 || split == 128) promote(128);
        else if (kSplits == 2 || split == 128 - kStep) promote(128 - kStep);
        else if (split == 128 - 2 * kStep) promote(128 - 2 * kStep);
        else promote(128 - 3 * kStep);
      } else {
        promote(split);
      }
      DG_STAMP_AFTER(PromoteEnd, dst);
    };
    // kStagedSfb: this warp's window of B's scales from the tile's k-block kb on (a lane a k-block;
    // past the tile's last one, that one again). The first __syncwarp keeps the window until every
    // lane has read its last entry. (Storing it only after the stage's data wait, so that the wait
    // hides the loads, measured slower: docs/perf.md, stop 28.)
    [[maybe_unused]] float2* sfb_window = sfb_windows + (consumer * 4 + warp) * kSm90SfbWindow;
    [[maybe_unused]] auto stage_sfb_window = [&](int kb, int num_k_blocks) {
      const int64_t at = int64_t(min(kb + lane, num_k_blocks - 1)) * p.sfb_sc;
      const float2 v = make_float2(__ldg(sfb.first + at), __ldg(sfb.first + at + sfb.gap));
      __syncwarp();
      sfb_window[lane] = v;
      __syncwarp();
    };
    // Every lane's reads of the stage (the folded FP4 path's scales included) come before the
    // arrive that lets the producer refill it: lanes of a warp need not run in step.
    [[maybe_unused]] auto release = [&](const StageRef& stage) {
      __syncwarp();
      if (lane == 0) {
        mbarrier_arrive(stage.full + 8u * kStages);  // the stage's empty barrier (pipe.empty follows pipe.full)
        if constexpr (Cfg::kMulticast > 1) mbarrier_arrive_cluster(&pipe.empty[stage.index], cta_rank ^ 1u);
      }
      DG_STAMP(Release);
    };

    for (int t = first_tile; t < tiles.total; t += tile_step) {
      Sm90Tile tile;
      if (!tiles.get(p, t, tile)) continue;
      DG_STAMP(Tile);
      [[maybe_unused]] const int split = 128 - (tile.n0 & 127);

      // C enters a split tile's sum once, with piece 0.
      const bool takes_c = Cfg::kHasC && tile.unit.piece <= 0;
      // acc[w] (+)= this thread's elements of C (0 past the tile's rows and D's columns).
      auto read_c = [&](int w, bool add) {
        const float* cg = p.c + tile.group * p.c_sg;
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int row = tile.m0 + r0 + 64 * w + 8 * (q / 2), col = tile.n0 + 8 * j + c0 + q % 2;
            const float c = row < tile.row_limit && col < p.n ? cg[int64_t(row) * p.c_sr + col] : 0.0f;
            acc[w][4 * j + q] = add ? acc[w][4 * j + q] + c : c;
          }
        }
      };
      // FP8 reads C into the accumulators up front (its wgmmas write the partial sets). BF16's wgmmas
      // accumulate into them, and loaded values there made ptxas serialize every wgmma (C7515), so
      // BF16 starts from zeros and adds C after the mainloop.
#pragma unroll
      for (int w = 0; w < kMmaM; ++w) {
        if (Cfg::kFp8 && takes_c) {
          read_c(w, false);
        } else {
#pragma unroll
          for (int i = 0; i < kBlockN / 2; ++i) acc[w][i] = 0.0f;
        }
        fence_accumulators(acc[w]);
      }

      if (tile.compute) {
        const int kb0 = tile.unit.kb0, kb1 = tile.unit.kb1;
        // The tile's k-blocks (its piece's range with split-K).
        const int num_k_blocks = kb1 - kb0;
        // This consumer's expert (kDualB: the second 128-row block's for consumer 1, unless that is
        // padding, whose rows come out as zeros whatever B they were multiplied with).
        const bool second_block = Cfg::kDualB && consumer == 1 && tile.b_group_hi >= 0;
        [[maybe_unused]] const int b_group = second_block ? tile.b_group_hi : tile.b_group;
        if constexpr (Cfg::kDualB) db_slot = second_block && tile.dual_b ? uint64_t(Cfg::kStageBytesB >> 4) : 0;
        if constexpr (Cfg::kFp8 && !Cfg::kSfbPerRow) {
          const int block = tile.n0 / 128;
          const float* row0 = p.sfb + b_group * p.sfb_sg + block * p.sfb_sr;
          sfb.gap = block + 1 < p.sfb_rows ? p.sfb_sr : 0;
          sfb.stride = p.sfb_sc;
          sfb.first = row0 + kb0 * p.sfb_sc;
          if constexpr (!Cfg::kStagedSfb) {
            sfb.v0 = kb0 < kb1 ? __ldg(row0 + kb0 * p.sfb_sc) : 0.0f;
            sfb.v1 = kb0 < kb1 ? __ldg(row0 + kb0 * p.sfb_sc + sfb.gap) : 0.0f;
          }
          sfb.next = row0 + (kb0 + 1) * p.sfb_sc;
          sfb.last = row0 + int64_t(kb1 - 1) * p.sfb_sc;
        }
        if constexpr (Cfg::kOverlapPromotion) {
          // Two partial sets: k-block kb + 1's wgmmas are queued before kb's promotion, so the tensor
          // cores never wait for this warpgroup's CUDA-core work. Straight-line pairs (part and
          // part1 alternate at compile time), so ptxas can see which set each wait retires.
          Scales sc0, sc1;
          if (num_k_blocks > 0) {
            StageRef stage0 = wait_fp8(st, sc0), stage1{};
            issue_fp8(stage0, 0, part);
            int kb = 1;
            for (; kb + 1 < num_k_blocks; kb += 2) {
              stage1 = wait_fp8(st, sc1);
              issue_fp8(stage1, 0, part1);
              DG_STAMP(WgmmaWaitBegin);
              wgmma_wait_group<1>();
              DG_STAMP(WgmmaWaitEnd);
              release(stage0);
              retire_fp8(part, sc0, 0, split, acc[0]);
              stage0 = wait_fp8(st, sc0);
              issue_fp8(stage0, 0, part);
              DG_STAMP(WgmmaWaitBegin);
              wgmma_wait_group<1>();
              DG_STAMP(WgmmaWaitEnd);
              release(stage1);
              retire_fp8(part1, sc1, 0, split, acc[0]);
            }
            if (kb < num_k_blocks) {
              stage1 = wait_fp8(st, sc1);
              issue_fp8(stage1, 0, part1);
              DG_STAMP(WgmmaWaitBegin);
              wgmma_wait_group<1>();
              DG_STAMP(WgmmaWaitEnd);
              release(stage0);
              retire_fp8(part, sc0, 0, split, acc[0]);
              DG_STAMP(WgmmaWaitBegin);
              wgmma_wait_group<0>();
              DG_STAMP(WgmmaWaitEnd);
              release(stage1);
              retire_fp8(part1, sc1, 0, split, acc[0]);
            } else {
              DG_STAMP(WgmmaWaitBegin);
              wgmma_wait_group<0>();
              DG_STAMP(WgmmaWaitEnd);
              release(stage0);
              retire_fp8(part, sc0, 0, split, acc[0]);
            }
          }
        } else if constexpr (Cfg::kSfbPerRow) {
          // Promotion per sub-block of kPromotionK; the stage is freed after its last promotion,
          // which still reads B's scales from it. FP4 (kConsumersExpand): this thread's share of the
          // tile's first k-block is expanded here, of each next one while the current one's wgmmas run.
          [[maybe_unused]] const int expander =
              Cfg::kProducerExpanders + consumer * 128 + thread_idx_in_warpgroup();
          if constexpr (Cfg::kFp4B && Cfg::kConsumersExpand)
            if (num_k_blocks > 0) expand_share(st.st, expander);
          for (int kb = 0; kb < num_k_blocks; ++kb) {
            Scales sc;
            const StageRef stage = wait_fp8(st, sc);  // st moves on to the next k-block
#pragma unroll
            for (int q = 0; q < Cfg::kSubBlocks; ++q) {
#pragma unroll
              for (int w = 0; w < kMmaM; ++w) {
                issue_fp8(stage, w, part, q);
                if constexpr (Cfg::kFp4B && Cfg::kConsumersExpand)
                  if (q == 0 && w == 0 && kb + 1 < num_k_blocks) expand_share(st.st, expander);
                DG_STAMP(WgmmaWaitBegin);
                wgmma_wait_group<0>();
                DG_STAMP(WgmmaWaitEnd);
                retire_fp8_per_row(part, sc, w, stage.index, q, acc[w]);
              }
            }
            release(stage);
          }
        } else if constexpr (Cfg::kFp8) {
          static_assert(Cfg::kStagedSfb, "this loop reads B's scales from the staged window");
          // B's scales of a k-block are read at the end of the one before, so their shared load has
          // the data wait to complete in; a window is staged after its predecessor's last read.
          if (num_k_blocks > 0) stage_sfb_window(0, num_k_blocks);
          float2 sb = sfb_window[0];
          // One k-block of stage `stage`, whose data has landed: wave by wave, issue, wait, (release
          // after the last) and promote.
          auto k_block = [&](const StageRef& stage, Scales& sc, int kb) {
            sc.sb0 = sb.x;
            sc.sb1 = sb.y;
#pragma unroll
            for (int w = 0; w < kMmaM; ++w) {
              issue_fp8(stage, w, part);
              DG_STAMP(WgmmaWaitBegin);
              wgmma_wait_group<0>();
              DG_STAMP(WgmmaWaitEnd);
              if (w == kMmaM - 1) release(stage);
              retire_fp8(part, sc, w, split, acc[w]);
            }
            if ((kb + 1) % kSm90SfbWindow == 0 && kb + 1 < num_k_blocks) stage_sfb_window(kb + 1, num_k_blocks);
            sb = sfb_window[(kb + 1) % kSm90SfbWindow];  // past the tile's last k-block: unused
          };
          auto any_stage = [&](int kb) {
            Scales sc;
            const StageRef stage = wait_fp8(st, sc);
            k_block(stage, sc, kb);
          };
          if constexpr (Cfg::kRingRounds) {
            int kb = 0;
            for (; kb < num_k_blocks && st.st.index != 0; ++kb) any_stage(kb);
            for (; kb + kStages <= num_k_blocks; kb += kStages) {
#pragma unroll
              for (int s = 0; s < kStages; ++s) {
                const StageRef stage{uint32_t(s), st.at.full + 8u * uint32_t(s),
                                     st.at.da + (Cfg::kStageBytesA >> 4) * uint32_t(s),
                                     st.at.db + (Cfg::kStageStrideB >> 4) * uint32_t(s)};
                DG_STAMP(FullWaitBegin);
                mbarrier_wait_parity(stage.full, st.st.phase);
                DG_STAMP(FullWaitEnd);
                Scales sc;
                const float* sf = smem_sf + s * kSfStride;
#pragma unroll
                for (int w = 0; w < kMmaM; ++w) {
                  sc.sa[w][0] = sf[r0 + 64 * w];
                  sc.sa[w][1] = sf[r0 + 64 * w + 8];
                }
                k_block(stage, sc, kb + s);
              }
              st.st.phase ^= 1u;  // a whole round: the cursor is back at stage 0
            }
            for (; kb < num_k_blocks; ++kb) any_stage(kb);
          } else {
            for (int kb = 0; kb < num_k_blocks; ++kb) any_stage(kb);
          }
        } else {
          StageRef prev_stage{};
          for (int kb = 0; kb < num_k_blocks; ++kb) {
            mbarrier_wait_parity(st.at.full, st.st.phase);
            const uint64_t da = st.at.da, db = st.at.db + db_slot;
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < 4; ++k) {
#pragma unroll
              for (int w = 0; w < kMmaM; ++w)
                wgmma_m64k16_ss<bfloat16_t, kBlockN, false>(
                    smem_desc_add(da, uint32_t(w * 64 * 128 + k * 32)), smem_desc_add(db, uint32_t(k * 32)), acc[w]);
            }
            wgmma_commit_group();
            // The group of the previous k-block has completed: its stage can be refilled.
            wgmma_wait_group<1>();
            if (kb > 0) release(prev_stage);
            prev_stage = st.at;
            st.advance();
          }
          wgmma_wait_group<0>();
          if (num_k_blocks > 0) release(prev_stage);
        }
#pragma unroll
        for (int w = 0; w < kMmaM; ++w) fence_accumulators(acc[w]);
      }
      if (!Cfg::kFp8 && takes_c) {
#pragma unroll
        for (int w = 0; w < kMmaM; ++w) read_c(w, true);
      }

      DG_STAMP(StoreBegin);
      if (tile.unit.piece >= 0) {  // a piece of a split tile (plain GEMMs): its share of the tile's sum
        tl::cuda::detail::gemm_sm90_split_reduce<Cfg, Cfg::kFp8>(acc, p.split_k, tiles.tiles, tile.unit, consumer,
                                                      static_cast<TC*>(p.d), p.m, p.n, p.d_sr, tile.m0 + r0,
                                                      tile.n0 + c0, vec_ok);
        DG_STAMP(StoreEnd);
        continue;
      }

      if constexpr (Cfg::kGrouping == kGroupMContiguous) {
        // Padding rows (index -1) inside a group's last block come out as zeros.
#pragma unroll
        for (int w = 0; w < kMmaM; ++w) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = tile.m0 + r0 + 64 * w + 8 * h;
            if (row < p.m && __ldg(p.m_indices + row) < 0) {
#pragma unroll
              for (int j = 0; j < kBlockN / 8; ++j) acc[w][4 * j + 2 * h] = acc[w][4 * j + 2 * h + 1] = 0.0f;
            }
          }
        }
      }

      // A masked group's last block may end inside the tile: those rows must stay untouched, which
      // the TMA store (it clips only at max_M) cannot promise, so such tiles store directly.
      bool via_tma = Cfg::kTmaStore && (Cfg::kGrouping != kGroupMMasked || tile.m0 + kBlockM <= tile.row_limit);
      if constexpr (Cfg::kTmaStore) {
        if (via_tma)
          tl::cuda::detail::gemm_sm90_store_tma<Cfg>(
              acc, &tma_d, smem_c + consumer * Cfg::kEpilogueBuffers * Cfg::kBoxBytesC, consumer, tile.row_limit, p.n,
              tile.m0 + consumer * Cfg::kConsumerRows, tile.n0, boxes_done, tile.group);
      }
      if (!via_tma) {
        TC* d = static_cast<TC*>(p.d) + tile.group * p.d_sg;
        const bool full_tile = tile.m0 + kBlockM <= tile.row_limit && tile.n0 + kBlockN <= p.n;
        tl::cuda::detail::gemm_sm90_store_direct<Cfg>(acc, d, tile.row_limit, p.n, p.d_sr, tile.m0 + r0,
                                                      tile.n0 + c0, full_tile, vec_ok);
      }
      DG_STAMP(StoreEnd);
    }
    DG_TIMELINE_CLOSE();
    // Shared memory must outlive the TMA stores that read it.
    if constexpr (Cfg::kTmaStore) {
      if (thread_idx_in_warpgroup() == 0) tma_store_wait<0>();
    }
  }
  // Neither CTA of a cluster may leave while the other can still arrive on its barriers.
  if constexpr (Cfg::kMulticast > 1) {
    __syncwarp();
    cluster_sync();
  }
#else
#if defined(__CUDA_ARCH__)
  __trap();  // the kernels need sm_90a; gpu.cc compiles them for nothing else
#endif
  (void)tma_a;
  (void)tma_b;
  (void)tma_d;
  (void)p;
#endif
}

}  // namespace deepgemm::kernels
