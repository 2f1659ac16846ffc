// DeepGEMM's FP8 x FP4 kernel for Hopper (sm_90a) with FP4 B expanded in registers: it computes
// D^T = B A^T, so that B -- packed e2m1, which Hopper's tensor cores cannot read -- is wgmma's A
// operand, which may come from registers, and A (e4m3) is its B operand in shared memory.
//
//   A  [M, K] (masked: [G, max_M, K]), K-major e4m3, scales per row and 128 of K (TMA, MN-major)
//   B  [N, K] (grouped: [G, N, K]), K-major packed e2m1 (two a byte, the lower K in the low
//      nibble), scales per row and kPromotionK (32 or 128) of K (TMA, MN-major)
//   D  [M, N] (masked: [G, max_M, N]), bfloat16 or float, optionally D = C + A B^T (float)
//
// Why (sm90_gemm.cuh's kFp4B expands B into a shared-memory e4m3 tile instead): there the
// expansion is extra shared-memory traffic (a write, then wgmma's read) and a third barrier per
// stage that the consumers wait on, and at M = 128 it bounds the kernel (0.36-0.52x of FP8 x FP8 at
// the same shape on the H200, docs/perf.md). Here each consumer thread expands exactly its own
// fragment of B, 32 bytes per k-block, straight from the packed stage into the registers wgmma
// reads, while the previous k-block's wgmmas run; no other thread waits for it. On the H200 it is
// the faster form up to ~512 rows of A (gpu.cc picks; docs/perf.md, stop 39); above, the
// shared-memory form's 256-row tiles amortize the expansion better.
//
// Layout of the work: a tile is kBlockN rows of B (64 a consumer warpgroup: wgmma's M) by kBlockM
// rows of A (wgmma's N, 16-128). Per k-block a consumer issues four m64nBMk32 wgmmas with its four
// expanded fragments, and promotes the FP32 partial sums into the accumulators with the product of
// A's scale (per column of the fragment) and B's (per row): once per k-block with per-128 scales;
// with per-32 scales each k32 step has its own partial set, two alternating, summed with B's scale
// before A's is applied once. The tile scheduler, groupings (none, M-contiguous, M-masked) and the
// producer are sm90_gemm.cuh's (Sm90Tiles); the epilogue stores each thread's transposed fragment
// directly (no split-K, no TMA store). Measured: a k-block is a chain of latencies more than of
// work (16-row tiles take half as long as 128-row ones), which k-interleaved consumers overlap.
#pragma once

#include "deepgemm/kernels/layout_copy.cuh"
#include "deepgemm/kernels/sm90_gemm.cuh"

namespace deepgemm::kernels {

// kKInterleave_ (BLOCK_N 64): two consumers on the tile's 64 rows of B, taking alternate k-blocks
// (each expands only its own), the second handing its sum to the first through shared memory: one
// consumer's k-block is a chain of latencies (data, expansion, wgmma, promotion) that a second
// one's overlaps.
template <class TD_, int kBlockM_, int kBlockN_, int kStages_, int kGrouping_, bool kHasC_, int kPromotionK_,
          bool kKInterleave_ = false>
struct Sm90Fp4RegConfig {
  using TC = TD_;
  static constexpr int kBlockM = kBlockM_;  // rows of A and D a tile: wgmma's N
  static constexpr int kBlockN = kBlockN_;  // rows of B (columns of D) a tile: 64 per consumer
  static constexpr int kBlockK = 128;
  static constexpr int kStages = kStages_;
  static constexpr int kGrouping = kGrouping_;
  static constexpr bool kHasC = kHasC_;
  static constexpr int kPromotionK = kPromotionK_;
  static constexpr int kSubBlocks = 128 / kPromotionK;  // B's scales (and promotions) per k-block
  // Sm90Tiles' view of the schedule: no clusters, one B tile a stage.
  static constexpr int kMulticast = 1;
  static constexpr bool kDualB = false;

  // Per-128 scales: two partial sets where registers allow (3 x BLOCK_M / 2 accumulators and 32
  // fragment registers a thread), the next k-block's wgmmas then running during a promotion. (Per-32
  // steps always alternate between two.)
  static constexpr bool kOverlapPromotion = kPromotionK == 128 && kBlockM <= 96;
  static constexpr bool kKInterleave = kKInterleave_;
  static constexpr int kRowConsumers = kBlockN / 64;  // consumers owning rows of B (and storing them)
  static constexpr int kNumConsumers = kRowConsumers * (kKInterleave ? 2 : 1);
  static constexpr int kThreads = 128 * (1 + kNumConsumers);
  static constexpr int kStageBytesA = kBlockM * 128;                       // e4m3, 128-byte swizzle
  static constexpr int kStageBytesB = kBlockN * 64;                        // packed, as TMA loads it
  static constexpr int kStageBytesSfa = (kBlockM * 4 + 127) / 128 * 128;   // A's scales, padded
  static constexpr int kStageBytesSfb = (kBlockN * 4 * kSubBlocks + 127) / 128 * 128;
  static constexpr int kStageBytes = kStageBytesA + kStageBytesB + kStageBytesSfa + kStageBytesSfb;
  static constexpr int kExchangeBytes = kKInterleave ? 64 * kBlockM * 4 : 0;  // the second consumer's sum
  static constexpr int kBarrierBytes = 2 * kStages * 8;
  static constexpr int kSmemBytes = kStages * kStageBytes + kExchangeBytes + kBarrierBytes + 1024;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = kNumConsumers == 2 ? 232 : 240;

  static_assert(is_same_v<TC, bfloat16_t> || is_same_v<TC, float>, "output: bfloat16 or float");
  static_assert(kBlockN == 64 || kBlockN == 128, "BLOCK_N (rows of B): 64 or 128, one consumer per 64");
  static_assert(kBlockM % 16 == 0 && kBlockM >= 16 && kBlockM <= 128, "BLOCK_M (rows of A): 16 to 128 by 16");
  static_assert(kPromotionK == 128 || (kPromotionK == 32 && kBlockM <= 64),
                "promotion every 128 of K, or every 32 with BLOCK_M <= 64 (two partial sets and their sum)");
  static_assert(kGrouping != kGroupMContiguous || 128 % kBlockM == 0,
                "M-contiguous: a tile inside one 128-row block (each group starts on one)");
  static_assert(!kKInterleave || kBlockN == 64, "k-interleaved consumers: BLOCK_N 64");
  static_assert(kStages >= 2, "at least two stages");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block is 227 KB on sm_90");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kNumConsumers <= 65536, "register file");
};

namespace detail {

// Moves a ring cursor n stages on.
template <int kStages>
__device__ __forceinline__ void advance_ring(tl::cuda::PipelineState<kStages>& st, uint32_t n) {
  const uint32_t at = st.index + n;
  st.index = at % uint32_t(kStages);
  st.phase ^= (at / uint32_t(kStages)) & 1u;
}

// A compile-time flag passed to generic lambdas (decltype(flag)::value).
template <bool kValue>
struct Flag {
  static constexpr bool value = kValue;
};

// Keeps a wgmma A fragment's registers as they are until here (after the wait that retires the
// wgmmas reading them): the compiler does not know wgmma reads them asynchronously.
__device__ __forceinline__ void fence_fragment(tl::uint32_t (&a)[4]) {
  asm volatile("" : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3])::"memory");
}

}  // namespace detail

template <class Cfg>
__device__ __forceinline__ void sm90_fp4_reg_gemm_body(const tl::cuda::TmaDescriptor& tma_a,
                                                       const tl::cuda::TmaDescriptor& tma_b,
                                                       const tl::cuda::TmaDescriptor& tma_sfa,
                                                       const tl::cuda::TmaDescriptor& tma_sfb,
                                                       const Sm90GemmParams& p) {
#if defined(TL_CUDA_SM90A)
  using namespace tl::cuda;
  using TC = typename Cfg::TC;
  constexpr int kStages = Cfg::kStages, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN;
  constexpr int kSubBlocks = Cfg::kSubBlocks;

  extern __shared__ __align__(1024) uint8_t dg_dynamic_smem[];
  const uint32_t raw = smem_addr(dg_dynamic_smem);
  uint8_t* smem = dg_dynamic_smem + ((1024u - (raw & 1023u)) & 1023u);  // the swizzle repeats every 1024 B
  uint8_t* smem_a = smem;                                                // [kStages][BLOCK_M][128 B]
  uint8_t* smem_b = smem_a + kStages * Cfg::kStageBytesA;                // [kStages][BLOCK_N][64 B]
  float* smem_sfa = reinterpret_cast<float*>(smem_b + kStages * Cfg::kStageBytesB);
  float* smem_sfb = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(smem_sfa) + kStages * Cfg::kStageBytesSfa);
  // kKInterleave: [kBlockM / 8][128 threads] float4s of the second consumer's sum.
  [[maybe_unused]] auto* smem_x = reinterpret_cast<float4*>(reinterpret_cast<uint8_t*>(smem_sfb) + kStages * Cfg::kStageBytesSfb);
  auto* bars = reinterpret_cast<mbarrier_t*>(reinterpret_cast<uint8_t*>(smem_x) + Cfg::kExchangeBytes);
  const TmaPipeline<kStages> pipe{bars, bars + kStages};
  constexpr int kSfaStride = Cfg::kStageBytesSfa / 4, kSfbStride = Cfg::kStageBytesSfb / 4;

  const int wg = warpgroup_idx();
  if (threadIdx.x == 0) {
    pipe.init(Cfg::kRowConsumers * 4);  // one release per warp of the consumer that read the stage
    fence_barrier_init();
  } else if (threadIdx.x == 32) {
    tma_prefetch_descriptor(&tma_a);
    tma_prefetch_descriptor(&tma_b);
    tma_prefetch_descriptor(&tma_sfa);
    tma_prefetch_descriptor(&tma_sfb);
  }
  __syncthreads();
  // Launched overlapping the kernel before it (gpu.cc): from here on its writes are visible.
  griddep_launch_dependents();
  griddep_wait();

  const Sm90Tiles<Cfg> tiles = Sm90Tiles<Cfg>::make(p);
  if (p.split_k.splits > 1) __trap();  // no split-K here: gpu.cc never asks for it

  if (wg == 0) {
    // ---------------------------------------------------------------- producer warpgroup
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (warp_idx_in_warpgroup() == 0 && elect_one_sync()) {
      DG_TIMELINE_OPEN(0, true);
      PipelineState<kStages> st;
      for (int t = int(blockIdx.x); t < tiles.total; t += int(gridDim.x)) {
        Sm90Tile tile;
        if (!tiles.get(p, t, tile) || !tile.compute) continue;
        DG_STAMP(Tile);
        for (int kb = tile.unit.kb0; kb < tile.unit.kb1; ++kb) {
          DG_STAMP(EmptyWaitBegin);
          pipe.producer_acquire(st);
          DG_STAMP(EmptyWaitEnd);
          mbarrier_t* full = pipe.full_barrier(st);
          mbarrier_arrive_expect_tx(full, uint32_t(Cfg::kStageBytesA + Cfg::kStageBytesB + kBlockM * 4 +
                                                   kBlockN * 4 * kSubBlocks));
          tma_load_3d(smem_a + st.index * Cfg::kStageBytesA, &tma_a, full, kb * 128, tile.m0, tile.group);
          // Packed: 64 bytes of a row per k-block (B's map counts bytes along K).
          tma_load_3d(smem_b + st.index * Cfg::kStageBytesB, &tma_b, full, kb * 64, tile.n0, tile.b_group);
          tma_load_3d(smem_sfa + st.index * kSfaStride, &tma_sfa, full, tile.m0, kb, tile.group);
          tma_load_3d(smem_sfb + st.index * kSfbStride, &tma_sfb, full, tile.n0, kb * kSubBlocks, tile.b_group);
          DG_STAMP(TmaIssue);
          st.advance();
        }
      }
      DG_TIMELINE_CLOSE();
    }
  } else {
    // ---------------------------------------------------------------- consumer warpgroups
    setmaxnreg_inc<Cfg::kConsumerRegs>();
    const int consumer = wg - 1;
    // k-interleaved: both consumers own the tile's rows; `parity` says whose k-blocks are whose.
    const int row_consumer = Cfg::kKInterleave ? 0 : consumer;
    const int parity = Cfg::kKInterleave ? consumer : 0;
    const int warp = warp_idx_in_warpgroup(), lane = lane_idx();
    DG_TIMELINE_OPEN(1 + 4 * consumer + warp, lane == 0);
    const int quad = lane % 4;
    // The thread's rows of B in the tile (the fragment's rows r0 and r0 + 8) and first column of A.
    const int r0 = row_consumer * 64 + 16 * warp + lane / 4;
    const int c0 = 2 * quad;
    // wgmma's A fragment of a k32 step holds, for rows r0 and r0 + 8, K values 4q .. 4q + 3 and
    // 16 + 4q .. 16 + 4q + 3 (q = quad): packed, groups q and q + 4 of the step's 16 bytes, the
    // halves q % 2 of words q / 2 and 2 + q / 2. This byte permute puts them side by side.
    const uint32_t pair_selector = (quad & 1) ? 0x7632u : 0x5410u;
    const bool high_words = (quad & 2) != 0;

    // The fragments of one k-block (four k32 steps) from stage `stage`'s packed B, as the values / 64
    // (e2m1x8_to_e4m3x8_over64): B's scales carry the 64 back (exact: a power of two; a scale
    // past 2^121 would overflow, which no quantization makes).
    constexpr float kFragmentScale = 64.0f;
    auto expand = [&](uint32_t stage, uint32_t (&a)[4][4]) {
      const uint32_t packed = smem_addr(smem_b + stage * Cfg::kStageBytesB);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t v0, v1, v2, v3;
          asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3)
                       : "r"(packed + uint32_t((r0 + 8 * h) * 64 + s * 16)));
          const uint32_t lo = high_words ? v1 : v0, hi = high_words ? v3 : v2;
          uint32_t pair;
          asm("prmt.b32 %0, %1, %2, %3;" : "=r"(pair) : "r"(lo), "r"(hi), "r"(pair_selector));
          e2m1x8_to_e4m3x8_over64(pair, a[s][h], a[s][2 + h]);
        }
      }
    };
    const uint64_t desc_a0 = make_smem_desc_kmajor_sw128(smem_a);
    // Queues wgmmas of k32 steps [s0, s1) of stage `stage` into `dst` (the first overwrites it), one group.
    auto issue = [&](uint32_t stage, const uint32_t (&a)[4][4], auto& dst, int s0, int s1) {
      const uint64_t desc = smem_desc_add(desc_a0, stage * uint32_t(Cfg::kStageBytesA));
      wgmma_fence();
#pragma unroll
      for (int s = s0; s < s1; ++s)
        wgmma_m64k32_rs_fp8<kBlockM>(a[s], smem_desc_add(desc, uint32_t(s * 32)), dst, s > s0);
      wgmma_commit_group();
      DG_STAMP(Issue);
    };
    // acc += src * sa[column] * sb (B's scale of the thread's rows r0, r0 + 8).
    auto promote = [&](const float* sfa, const float (&sb)[2], const auto& src, auto& acc) {
      DG_STAMP(PromoteBegin);
#pragma unroll
      for (int j = 0; j < kBlockM / 8; ++j) {
        const float2 sa = *reinterpret_cast<const float2*>(sfa + 8 * j + c0);
        acc[4 * j + 0] = fmaf(src[4 * j + 0], sa.x * sb[0], acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(src[4 * j + 1], sa.y * sb[0], acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(src[4 * j + 2], sa.x * sb[1], acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(src[4 * j + 3], sa.y * sb[1], acc[4 * j + 3]);
      }
      DG_STAMP_AFTER(PromoteEnd, acc);
    };
    // sum (+)= src * sb (per-32 scales: the k32 steps of a k-block summed with B's scales first).
    auto scale_rows = [&](const float (&sb)[2], const auto& src, auto& sum, bool first) {
      DG_STAMP(PromoteBegin);
#pragma unroll
      for (int i = 0; i < kBlockM / 2; ++i) {
        const float b = sb[(i / 2) % 2];
        sum[i] = first ? src[i] * b : fmaf(src[i], b, sum[i]);
      }
      DG_STAMP_AFTER(PromoteEnd, sum);
    };

    float acc[kBlockM / 2];
    float part[kBlockM / 2];
    [[maybe_unused]] float part1[kBlockM / 2];  // the second partial set (per-32, kOverlapPromotion)
    [[maybe_unused]] float sum[kSubBlocks > 1 ? kBlockM / 2 : 1];
    uint32_t frag0[4][4], frag1[4][4];
    PipelineState<kStages> st;

    for (int t = int(blockIdx.x); t < tiles.total; t += int(gridDim.x)) {
      Sm90Tile tile;
      if (!tiles.get(p, t, tile)) continue;
      DG_STAMP(Tile);
      // This thread's elements of D: columns n = n0 + r0 + 8 (i / 2 % 2), rows m = m0 + 8 (i / 4) + c0 + i % 2.
#pragma unroll
      for (int i = 0; i < kBlockM / 2; ++i) {
        const int m = tile.m0 + 8 * (i / 4) + c0 + i % 2, n = tile.n0 + r0 + 8 * ((i / 2) % 2);
        acc[i] = 0.0f;
        if constexpr (Cfg::kHasC)
          if (parity == 0 && m < tile.row_limit && n < p.n) acc[i] = p.c[tile.group * p.c_sg + int64_t(m) * p.c_sr + n];
      }
      fence_accumulators(acc);

      if (tile.compute) {
        const int tile_k_blocks = tile.unit.kb1 - tile.unit.kb0;
        // This consumer's k-blocks (k-interleaved: every second one, from its parity on); the ring
        // cursor moves past the other consumer's (kKStep), and ends the tile where its k-blocks end.
        constexpr uint32_t kKStep = Cfg::kKInterleave ? 2 : 1;
        const int num_k_blocks = Cfg::kKInterleave ? (tile_k_blocks + 1 - parity) / 2 : tile_k_blocks;
        const PipelineState<kStages> tile_start = st;
        // The timeline counts stage fills per stream: a k-interleaved consumer stamps Skip for each of
        // the other's that its cursor passes (before its first k-block, and after each of its own
        // that another follows). my_kb: this consumer's k-blocks of the tile so far.
        [[maybe_unused]] int my_kb = 0;
        if (parity == 1) {
          detail::advance_ring(st, 1);
          DG_STAMP(Skip);
        }
        // The k-block loops below are straight-line code between the tile's first and last k-block:
        // whether a k-block has a successor is a compile-time fact of each call (`Next`), so ptxas
        // sees which partial set every wgmma wait retires and keeps the wgmmas in flight (with a run-
        // time condition it serialized every one of them, C7514).
        // The end of a k-block (stage `cur`, its wgmmas retired): its fragments `f` may change again
        // once the stage's reads are done, which the release announces.
        auto finish = [&](uint32_t (&f)[4][4], uint32_t cur) {
#pragma unroll
          for (int s = 0; s < 4; ++s) detail::fence_fragment(f[s]);
          __syncwarp();  // every lane's reads of the stage (fragments, scales) come before the release
          if (lane == 0) pipe.consumer_release(cur);
          DG_STAMP(Release);
        };
        // Moves to the next k-block's stage and expands its fragments into `fn` (whose wgmmas, those
        // of the k-block before this one, have retired).
        auto next_stage = [&](uint32_t (&fn)[4][4]) {
          DG_STAMP(FullWaitBegin);
          pipe.consumer_wait(st);
          DG_STAMP(FullWaitEnd);
          expand(st.index, fn);
#if defined(DG_TIMELINE)  // the stamp after the fragments exist (their arithmetic could sink past it)
#pragma unroll
          for (int s = 0; s < 4; ++s) detail::fence_fragment(fn[s]);
#endif
          DG_STAMP(ExpandEnd);
        };
        // The start of each k-block: its stage `cur` (returned), the cursor moved past it (and past
        // the other consumer's next one, k-interleaved), the next k-block's fragments expanded into
        // `fn` where there is one (`next`: a compile-time flag).
        auto begin_k_block = [&](auto next, uint32_t (&fn)[4][4]) {
          const uint32_t cur = st.index;
          detail::advance_ring(st, kKStep);
          if (Cfg::kKInterleave && 2 * my_kb++ + parity + 1 < tile_k_blocks) DG_STAMP(Skip);
          if constexpr (decltype(next)::value) next_stage(fn);
          return cur;
        };
        // Waits until all but the last queued wgmma group (`keep_one`) or all have completed. The
        // argument must fold at compile time where it is called (see the note above).
        auto retire = [&](bool keep_one) {
          DG_STAMP(WgmmaWaitBegin);
          if (keep_one) {
            wgmma_wait_group<1>();
          } else {
            wgmma_wait_group<0>();
          }
          DG_STAMP(WgmmaWaitEnd);
        };
        // Runs the tile's k-blocks as k_block(Next, f, fn, p, pn): pairs with fragments and partial
        // sets swapped, then the last one or two.
        auto run = [&](auto& k_block, auto& p0, auto& p1) {
          int kb = 0;
          for (; kb + 2 < num_k_blocks; kb += 2) {
            k_block(detail::Flag<true>{}, frag0, frag1, p0, p1);
            k_block(detail::Flag<true>{}, frag1, frag0, p1, p0);
          }
          if (kb + 1 < num_k_blocks) {
            k_block(detail::Flag<true>{}, frag0, frag1, p0, p1);
            k_block(detail::Flag<false>{}, frag1, frag0, p1, p0);
          } else {
            k_block(detail::Flag<false>{}, frag0, frag1, p0, p1);
          }
        };
        if constexpr (kSubBlocks > 1) {
          // Per-32 scales: the k32 steps stream through the two partial sets (step s into part or
          // part1 by its parity), each step's wgmma running while the one before is scaled by B's
          // scale into `sum`; the next k-block's first two steps are queued during this one's last
          // two, so the tensor cores never wait for a k-block's end. A's scale is applied once a k-block.
          auto k_block = [&](auto next, uint32_t (&f)[4][4], uint32_t (&fn)[4][4], auto&, auto&) {
            constexpr bool kNext = decltype(next)::value;
            const uint32_t cur = begin_k_block(next, fn);
            const float* sfb = smem_sfb + cur * kSfbStride;
#pragma unroll
            for (int s = 0; s < 4; ++s) {
              const float sb[2] = {sfb[s * kBlockN + r0] * kFragmentScale, sfb[s * kBlockN + r0 + 8] * kFragmentScale};
              retire(s < 3 || kNext);
              // Step s's set, then the step two on (this k-block's, or the next one's) into it.
              auto step = [&](auto& src) {
                fence_accumulators(src);
                scale_rows(sb, src, sum, s == 0);
                if (s < 2) {
                  issue(cur, f, src, s + 2, s + 3);
                } else if (kNext) {
                  issue(st.index, fn, src, s - 2, s - 1);
                }
              };
              if (s % 2 == 0) {
                step(part);
              } else {
                step(part1);
              }
            }
            const float one[2] = {1.0f, 1.0f};
            promote(smem_sfa + cur * kSfaStride, one, sum, acc);
            finish(f, cur);
          };
          if (num_k_blocks > 0) {
            next_stage(frag0);
            issue(st.index, frag0, part, 0, 1);
            issue(st.index, frag0, part1, 1, 2);
            run(k_block, part, part1);
          }
        } else {
          // Per-128 scales: k-block kb's wgmmas into `p`; with two partial sets (kOverlapPromotion)
          // the next k-block's are queued into `pn` before kb's promotion, so the tensor cores run
          // during it; with one (`pn` is `p`), they are queued after it (the expansion still
          // overlaps the wgmmas).
          auto k_block = [&](auto next, uint32_t (&f)[4][4], uint32_t (&fn)[4][4], auto& p, auto& pn) {
            constexpr bool kNext = decltype(next)::value;
            const uint32_t cur = begin_k_block(next, fn);
            if constexpr (Cfg::kOverlapPromotion && kNext) {
              issue(st.index, fn, pn, 0, 4);
              retire(true);
            } else {
              retire(false);
            }
            fence_accumulators(p);
            const float* sfb = smem_sfb + cur * kSfbStride;
            const float sb[2] = {sfb[r0] * kFragmentScale, sfb[r0 + 8] * kFragmentScale};
            promote(smem_sfa + cur * kSfaStride, sb, p, acc);
            finish(f, cur);
            if constexpr (!Cfg::kOverlapPromotion && kNext) issue(st.index, fn, pn, 0, 4);
          };
          if (num_k_blocks > 0) {
            next_stage(frag0);
            issue(st.index, frag0, part, 0, 4);
            if constexpr (Cfg::kOverlapPromotion) {
              run(k_block, part, part1);
            } else {
              run(k_block, part, part);  // one partial set: the k-blocks take turns
            }
          }
        }
        if constexpr (Cfg::kKInterleave) {
          st = tile_start;
          detail::advance_ring(st, uint32_t(tile_k_blocks));
          // The second consumer's sum joins the first's: it writes, both sync (the data is there),
          // the first adds, both sync again (the buffer is free for the next tile's hand-over).
          constexpr int kVecs = kBlockM / 8;
          const int thread = thread_idx_in_warpgroup();
          if (consumer == 1) {
#pragma unroll
            for (int v = 0; v < kVecs; ++v)
              smem_x[v * 128 + thread] = make_float4(acc[4 * v], acc[4 * v + 1], acc[4 * v + 2], acc[4 * v + 3]);
          }
          named_barrier_sync(1, 256);
          if (consumer == 0) {
#pragma unroll
            for (int v = 0; v < kVecs; ++v) {
              const float4 x = smem_x[v * 128 + thread];
              acc[4 * v] += x.x, acc[4 * v + 1] += x.y, acc[4 * v + 2] += x.z, acc[4 * v + 3] += x.w;
            }
          }
          named_barrier_sync(1, 256);
        }
      }
      fence_accumulators(acc);
      if (parity == 1) continue;  // the first consumer stores the tile

      // Epilogue: the transposed fragment, element by element (padding rows of a contiguous grouped
      // GEMM as zeros; rows past a masked group's count untouched).
      DG_STAMP(StoreBegin);
      TC* d = static_cast<TC*>(p.d) + tile.group * p.d_sg;
#pragma unroll
      for (int i = 0; i < kBlockM / 2; ++i) {
        const int m = tile.m0 + 8 * (i / 4) + c0 + i % 2, n = tile.n0 + r0 + 8 * ((i / 2) % 2);
        if (m >= tile.row_limit || n >= p.n) continue;
        float v = acc[i];
        if constexpr (Cfg::kGrouping == kGroupMContiguous)
          if (__ldg(p.m_indices + m) < 0) v = 0.0f;
        d[int64_t(m) * p.d_sr + n] = convert1<TC>(v);
      }
      DG_STAMP(StoreEnd);
    }
    DG_TIMELINE_CLOSE();
  }
#else
#if defined(__CUDA_ARCH__)
  __trap();  // the kernels need sm_90a; gpu.cc compiles them for nothing else
#endif
  (void)tma_a;
  (void)tma_b;
  (void)tma_sfa;
  (void)tma_sfb;
  (void)p;
#endif
}

}  // namespace deepgemm::kernels
