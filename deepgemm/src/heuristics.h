// Configuration choices, kept apart from the kernels (DESIGN: "heuristics kept apart from kernels").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cpu_kernels.h"
#include "deepgemm/kernels/sm90_params.h"

namespace deepgemm::detail {

// The CPU scaled kernel's blocking for these sub-GEMMs: block_k a multiple of promotion_k sized for
// the L2 cache with block_n, tiles large enough to amortize packing yet numerous enough (about 2 per
// thread) to keep `threads` threads busy; threads capped by the work (about 4 MFLOP each).
cpu::Blocking choose_cpu_blocking(const std::vector<cpu::SubGemm>& gemms, int mr, int nr, int promotion_k,
                                  int threads);

// The Hopper kernel's configuration (kernels/sm90_gemm.cuh) for one call.
struct GpuBlocking {
  int block_m = 0, block_n = 0, block_k = 0, stages = 0;
  bool tma_store = false;    // epilogue through shared memory and TMA stores
  int epilogue_buffers = 2;  // its 64 x 64 staging buffers per consumer (1 when that buys a stage)
  bool epilogue_whole_slice = false;  // a buffer per box of a consumer's slice, staged at once
  bool fp4_b = false;        // B read packed (e2m1) and expanded in shared memory: a staging buffer per stage
  // fp4_b expanded in registers instead (kernels/sm90_fp4_gemm.cuh, choose_fp4_register_blocking):
  // block_m rows of A by block_n rows of B a tile, block_n / 64 consumers; no split-K, no TMA store.
  bool fp4_registers = false;
  int multicast = 1;       // CTAs per cluster sharing B's tile by TMA multicast (1 or 2)
  // fp4_registers: 64-row tiles of B on two consumers taking alternate k-blocks (sm90_fp4_gemm.cuh's
  // kKInterleave; the sm90_gemm.cuh kernel has no such form: always false there).
  bool k_interleave = false;
  bool dual_b = false;       // contiguous grouped 256-row tiles: a second B tile per stage (sm90_dual_b)
  int splits = 1;          // split-K pieces per split tile (plan_sm90: tl::plan_split_k; 1 for none)
  int grid = 0;            // persistent CTAs (a multiple of `multicast`)
  int raster_group = 8;    // tile-columns per rasterization band
  int64_t smem_bytes = 0;  // dynamic shared memory of one CTA
};

// The shape the kernel sees: `m` rows per group (M-masked: expected_m, the rows it will usually
// get), `tile_groups` groups whose tiles are scheduled (1, or G for the masked layout), N, K.
// `tma_store_ok`: a bfloat16 D that TMA can store (aligned). The cost model: rounds of one tile per
// SM (a persistent grid), each as long as one tile's FLOPs over the block shape's measured
// efficiency, and as many pipeline stages as fit in `smem_limit`.
// `sfb_rows`: rows of per-row B scales each stage holds (128 / promotion K), 0 for block scales.
// `max_block_m`: the tallest tile allowed. No multicast: measured no faster than without on the
// H200 (docs/perf.md), so only DG_GPU_CONFIG asks for it.
// `plain_fp8`: an ungrouped FP8 GEMM with block scales, the only kind that takes 192-row tiles
// (three consumers). `contiguous`: the M-grouped contiguous layout (its 256-row tiles take a second
// B tile per stage: sm90_dual_b).
// DG_GPU_CONFIG=<block_m>x<block_n>x<stages>[x<multicast>][c1]: that blocking, checked
// against the kernel's rules for this call (a user error naming `fn` and the text where it breaks
// one). tma_store_ok, multicast_ok and max_block_m: what the call allows (plan_sm90); grouped: an
// M-grouped call (no three-consumer tiles).
GpuBlocking forced_blocking(const std::string& fn, const std::string& text, bool fp8, bool sfb_per_row, int64_t m,
                            int64_t n, int64_t tile_groups, int out_bytes, bool tma_store_ok, int sms,
                            int64_t smem_limit, int sfb_rows, bool multicast_ok, int max_block_m, bool fp4_b,
                            bool contiguous, bool grouped);
GpuBlocking choose_gpu_blocking(bool fp8, int64_t m, int64_t n, int64_t k, int64_t tile_groups, int out_bytes,
                                bool tma_store_ok, int sms, int64_t smem_limit, int sfb_rows = 0,
                                int max_block_m = 256, bool fp4_b = false, bool plain_fp8 = false,
                                bool contiguous = false);
// Multicast and grid for a block shape: clusters of 2 when `multicast_ok` and M holds an even
// number of blocks; otherwise 1. Sets b.multicast and b.grid: the fewest CTAs that take the tiles
// in as many rounds as one CTA per SM would (tl::same_rounds_grid, counted in clusters).
void choose_multicast(GpuBlocking& b, int64_t m, int64_t n, int64_t tile_groups, int sms, bool multicast_ok);

// Consumer warpgroups of the kernel for a block M (Sm90GemmConfig::kNumConsumers): 1 for 64, 3 for
// 192, else 2.
inline int sm90_consumers(int block_m) { return block_m == 64 ? 1 : block_m == 192 ? 3 : 2; }
// 64 x 64 boxes in one consumer's slice of a tile (the TMA-store epilogue's unit): its m64 waves
// (2 for 256-row tiles, else 1) times BLOCK_N / 64.
inline int sm90_slice_boxes(int block_m, int block_n) { return (block_m == 256 ? 2 : 1) * (block_n / 64); }
// The TMA-store epilogue staging a consumer's whole slice at once (a buffer per box; one handshake a
// tile instead of one a box) where K is short enough that the epilogue weighs (at most
// kWholeSliceMaxKBlocks blocks of K: on the H200 4096 x 32768 x 512 and 4096 x 7168 x 576 ran 5-6%
// faster, 4096 x 24576 x 1536 2%, while 16-56 k-blocks ran 0.7-1.6% slower; docs/perf.md, stop 26) and
// the buffers fit beside the chosen stages; FP8 with e4m3 B only (measured there; BF16 and FP4 B
// keep the box-by-box epilogue). Sets b.epilogue_buffers, b.epilogue_whole_slice and b.smem_bytes.
inline constexpr int64_t kWholeSliceMaxKBlocks = 12;
void choose_whole_slice_epilogue(GpuBlocking& b, bool fp8, int64_t k, int out_bytes, int sfb_rows,
                                 int64_t smem_limit);
// Whether the kernel's FP8 loop stages B's block scales per consumer warp (Sm90GemmConfig::kStagedSfb):
// block scales of B (`sfb_rows` 0; FP4 B always has per-row ones), on tiles without a second partial
// set (256- and 192-row tiles, and tiles wider than 128).
inline bool sm90_staged_sfb(bool fp8, int block_m, int block_n, int sfb_rows) {
  return fp8 && sfb_rows == 0 && !kernels::sm90_two_partial_sets(block_m, block_n);
}
// Output tiles of a block shape over `m` x `n` in `tile_groups` groups (the persistent grid's work).
int64_t sm90_tiles(const GpuBlocking& b, int64_t m, int64_t n, int64_t tile_groups);
// Whether the staged-scale loop runs whole ring rounds unrolled (Sm90GemmConfig::kRingRounds): with
// at least three rounds of k-blocks a tile and more tiles than CTAs. On the H200 the rounds ran
// 1.2-2.9% faster at 12-128 k-blocks on multi-tile grids, 1.4-2.2% slower at 4-5 k-blocks and 5%
// slower at 12 k-blocks with one tile a CTA (128 x 24576 x 1536) -- more code to fetch once
// (docs/perf.md, stop 30). The tiles as sm90_tiles counts them, b.grid the CTAs.
bool sm90_ring_rounds(const GpuBlocking& b, bool fp8, int64_t m, int64_t n, int64_t k, int64_t tile_groups,
                      int sfb_rows);
// Whether the producers can meet at a barrier between rounds of tiles (Sm90GemmParams::round_sync,
// tl/device/cuda/round_sync.h): plain GEMMs (every CTA has a tile in each full round) without
// split-K (b.splits 1), with two or more full rounds (sm90_full_rounds).
bool sm90_round_sync_ok(const GpuBlocking& b, bool plain, int64_t m, int64_t n);
// The rounds in which every CTA (cluster, with multicast) has a tile, as the kernel counts them: the
// barriers go between these, so a launch has (full rounds - 1) / R of them for a period of R.
int64_t sm90_full_rounds(const GpuBlocking& b, int64_t m, int64_t n);
// Every how many rounds they meet (0: never), where they can: tl::round_sync_every's rule
// (tl/device/round_sync_plan.h, shared with TileLang's Hopper GEMM).
int sm90_round_sync_every(const GpuBlocking& b, bool plain, int64_t m, int64_t n, int64_t k, int64_t operand_bytes,
                          int64_t l2_bytes);
// Whether a tile holds room for two B tiles a stage (Sm90GemmConfig::kDualB): the M-grouped
// contiguous layout's 256-row tiles, whose two 128-row blocks may belong to two experts (each
// segment starts on a 128-row boundary). The kernel takes them with block scales of B (FP8 with e4m3
// B) or BF16; per-row B scales (FP4 B among them) keep 128-row tiles.
inline bool sm90_dual_b(bool contiguous, int block_m) { return contiguous && block_m == 256; }

// Dynamic shared memory of the kernel for a configuration (the formula of Sm90GemmConfig::kSmemBytes;
// the generated source asserts the two agree). `epilogue_buffers`: staging buffers per consumer of
// the TMA-store epilogue, 0 without it. fp4_b: B packed, with its staging buffer and barriers.
// dual_b: two B tiles a stage (sm90_dual_b).
int64_t sm90_smem_bytes(bool fp8, int block_m, int block_n, int stages, int epilogue_buffers, int out_bytes,
                        int sfb_rows = 0, bool fp4_b = false, bool dual_b = false);

// The deepest pipeline the heuristic builds: the small tiles of the M <= 128 shapes stream K with
// little compute per stage, so the bytes in flight set their speed (64 x 64 tiles: 8 -> 12 stages
// gained 3-9% at M = 128 on the H200, docs/perf.md).
inline constexpr int kMaxSm90Stages = 12;

// The pipeline depth of b's block shape within `smem_limit`: `stages` of them when > 0 (false when
// they do not fit), else as many as fit up to kMaxSm90Stages. With b.tma_store, two epilogue
// buffers per consumer unless one buffer is what lets the stages fit (a forced depth), or buys a
// third stage. (On the H200, 256 x 128 FP8 tiles ran as fast with 4 stages and one buffer as with 3
// and two, and 1.5% slower at 4096 x 24576 x 1536: docs/perf.md.) Sets b.stages,
// b.epilogue_buffers and b.smem_bytes (for b.fp4_b's and b.dual_b's layout).
bool choose_sm90_stages(GpuBlocking& b, bool fp8, int out_bytes, int sfb_rows, int64_t smem_limit, int stages = 0);

// Whether FP4 B is expanded in registers (kernels/sm90_fp4_gemm.cuh) rather than into shared memory
// (kernels/sm90_gemm.cuh) for `m` rows of A per group: on the H200 (N = 4096-7168; docs/perf.md,
// stop 39) the registers kernel ran 6-45% faster at M = 64 / 128, +12% / -5% at 256 (per-32 /
// per-128 scales), +7% / +22% at 512; the shared-memory one 2-5% faster at 1024 and 5-40% at 4096
// (256 x 128 tiles; folded UE8M0 scales).
inline constexpr int64_t kFp4RegistersMaxRows = 512;
inline bool sm90_fp4_in_registers(int64_t m) { return m <= kFp4RegistersMaxRows; }

// FP8 x FP4 with B expanded in registers (kernels/sm90_fp4_gemm.cuh, Sm90Fp4RegConfig::kSmemBytes;
// the generated source asserts the two agree): `sfb_rows` rows of B's scales a stage (128 / promotion K).
// k_interleave: two consumers on alternate k-blocks of a 64-row tile of B, and their hand-over buffer.
int64_t sm90_fp4_register_smem_bytes(int block_m, int block_n, int stages, int sfb_rows, bool k_interleave = false);
// Its configuration for `m` rows of A per group (`tile_groups` groups scheduled), N, B's scales every
// `promotion_k` (32 or 128) of K; `contiguous`: the M-grouped contiguous layout (tiles inside one
// 128-row block). The cost model, fitted to the H200 at M = 64 / 128 (docs/perf.md, stop 39): rounds
// of one tile per SM, a round as long as 70 + BLOCK_M units for 64 rows of B on two k-interleaved
// consumers (a k-block is a chain of latencies more than of work: 16-row tiles take half as long as
// 128-row ones) and 1.5 times that for 128 rows of B on two consumers; as many stages as fit, up to
// kMaxSm90Stages. `block_m` and `block_n` > 0 force the tile and `k_interleave` (the caller checked them).
GpuBlocking choose_fp4_register_blocking(int64_t m, int64_t n, int64_t tile_groups, int sms, int64_t smem_limit,
                                         int promotion_k, bool contiguous, int block_m = 0, int block_n = 0,
                                         bool k_interleave = false);
// Why the registers kernel cannot take a block_m x block_n tile ("" when it can).
std::string fp4_register_tile_error(int block_m, int block_n, int promotion_k, bool contiguous, bool k_interleave);
// Consumer warpgroups of the registers kernel: one per 64 rows of B, two with k_interleave.
inline int fp4_register_consumers(int block_n, bool k_interleave) { return block_n / 64 * (k_interleave ? 2 : 1); }

// Threads for the BF16 path (tl::cpu::gemm trims further for small problems itself).
int choose_cpu_threads(int max_threads);

}  // namespace deepgemm::detail
