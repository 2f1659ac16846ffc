#include "heuristics.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "deepgemm/kernels/sm90_params.h"
#include "rt/cpu_info.h"
#include "rt/error.h"
#include "tl/device/round_sync_plan.h"
#include "tl/device/split_k.h"

namespace deepgemm::detail {
namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

int64_t count_tiles(const std::vector<cpu::SubGemm>& gemms, int64_t bm, int64_t bn) {
  int64_t n = 0;
  for (const cpu::SubGemm& g : gemms) n += ceil_div(g.m, bm) * ceil_div(g.n, bn);
  return n;
}

}  // namespace

cpu::Blocking choose_cpu_blocking(const std::vector<cpu::SubGemm>& gemms, int mr, int nr, int promotion_k,
                                  int threads) {
  cpu::Blocking b;
  b.promotion_k = promotion_k;
  // block_k: 256 of K per pass (2 promotions of 128, 8 of 32): the packed A chunk (8 MR rows) stays
  // in L2 and one A micro-panel (MR x 256 floats, 14 KiB with AVX-512) in L1.
  b.block_k = std::max<int64_t>(256 / promotion_k, 1) * promotion_k;
  // block_n: the packed B panel (block_k x block_n floats) takes about half of L2.
  int64_t l2 = rt::cpu_info().l2_bytes;
  if (l2 < 256 * 1024 || l2 > 64 * 1024 * 1024) l2 = 1024 * 1024;
  const int64_t nc_cache = std::max<int64_t>(nr, l2 / 2 / (b.block_k * int64_t(sizeof(float))) / nr * nr);
  int64_t max_m = 0, max_n = 0;
  double flops = 0;
  for (const cpu::SubGemm& g : gemms) {
    max_m = std::max(max_m, g.m);
    max_n = std::max(max_n, g.n);
    flops += 2.0 * double(g.m) * double(g.n) * double(g.k);
  }
  // Tiles: at most nc_cache columns and 72 micro-rows (about 1000 rows: each packed B panel serves
  // that many rows); then more, evenly sized tiles until every thread has about two (down to 8
  // micro-rows and 4 micro-columns), and a multiple of the thread count when the tiles are few.
  // Capped in double: the FLOP count of a large problem overflows int.
  threads = int(std::clamp(flops / 4.0e6, 1.0, double(std::max(threads, 1))));
  max_m = std::max<int64_t>(max_m, 1);
  max_n = std::max<int64_t>(max_n, 1);
  int64_t tm = ceil_div(max_m, 72 * int64_t(mr)), tn = ceil_div(max_n, nc_cache);
  auto sizes = [&] {
    b.block_m = round_up(ceil_div(max_m, tm), mr);
    b.block_n = round_up(ceil_div(max_n, tn), nr);
  };
  // One more tile along the longer side of the current tiles (each tile packs its own A and B
  // panels: the packing work is proportional to rows + columns per tile).
  auto split = [&] {
    const int64_t rows = ceil_div(max_m, tm), cols = ceil_div(max_n, tn);
    const bool can_m = rows > 8 * int64_t(mr), can_n = cols > 4 * int64_t(nr);
    if (can_m && (!can_n || rows >= cols)) {
      ++tm;
    } else if (can_n) {
      ++tn;
    } else {
      return false;
    }
    sizes();
    return true;
  };
  sizes();
  while (count_tiles(gemms, b.block_m, b.block_n) < 2 * int64_t(threads) && split()) {
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t tiles = count_tiles(gemms, b.block_m, b.block_n);
    if (tiles % threads == 0 || tiles >= 8 * int64_t(threads) || !split()) break;
  }
  b.threads = int(std::max<int64_t>(1, std::min<int64_t>(threads, count_tiles(gemms, b.block_m, b.block_n))));
  return b;
}

int choose_cpu_threads(int max_threads) { return std::max(1, max_threads); }

int64_t sm90_smem_bytes(bool fp8, int block_m, int block_n, int stages, int epilogue_buffers, int out_bytes,
                        int sfb_rows, bool fp4_b, bool dual_b) {
  const int64_t sfb = (int64_t(block_n) * 4 * sfb_rows + 127) / 128 * 128;
  const int64_t stage = int64_t(block_m) * 128 + int64_t(block_n) * 128 * (dual_b ? 2 : 1) +
                        (fp8 ? block_m * 4 : 0) + sfb +
                        (fp4_b ? int64_t(block_n) * 64 : 0);
  const int consumers = sm90_consumers(block_m);
  const int64_t epilogue = int64_t(consumers) * epilogue_buffers * 64 * 64 * out_bytes;
  const int64_t staged =
      sm90_staged_sfb(fp8, block_m, block_n, sfb_rows) ? int64_t(consumers) * 4 * kernels::kSm90SfbWindow * 8 : 0;
  return stages * stage + epilogue + (fp4_b ? 3 : 2) * stages * 8 + staged + 1024;
}

bool choose_sm90_stages(GpuBlocking& b, bool fp8, int out_bytes, int sfb_rows, int64_t smem_limit, int stages) {
  auto fits = [&](int s, int buffers) {
    return sm90_smem_bytes(fp8, b.block_m, b.block_n, s, b.tma_store ? buffers : 0, out_bytes, sfb_rows, b.fp4_b,
                           b.dual_b) <= smem_limit;
  };
  auto deepest = [&](int buffers) {
    int best = 0;
    for (int s = 2; s <= kMaxSm90Stages; ++s)
      if (fits(s, buffers)) best = s;
    return best;
  };
  if (stages > 0) {
    b.stages = stages;
    b.epilogue_buffers = fits(stages, 2) ? 2 : 1;
  } else {
    const int with_two = deepest(2), with_one = deepest(1);
    const bool one = b.tma_store && with_one > with_two && with_two < 3;
    b.epilogue_buffers = one ? 1 : 2;
    b.stages = std::max(2, one ? with_one : with_two);
  }
  b.smem_bytes = sm90_smem_bytes(fp8, b.block_m, b.block_n, b.stages, b.tma_store ? b.epilogue_buffers : 0, out_bytes,
                                 sfb_rows, b.fp4_b, b.dual_b);
  return b.smem_bytes <= smem_limit;
}

void choose_whole_slice_epilogue(GpuBlocking& b, bool fp8, int64_t k, int out_bytes, int sfb_rows,
                                 int64_t smem_limit) {
  const int64_t k_blocks = ceil_div(std::max<int64_t>(k, 1), b.block_k);
  if (!fp8 || b.fp4_b || !b.tma_store || b.epilogue_buffers != 2 || k_blocks > kWholeSliceMaxKBlocks) return;
  const int boxes = sm90_slice_boxes(b.block_m, b.block_n);
  const int64_t smem =
      sm90_smem_bytes(fp8, b.block_m, b.block_n, b.stages, boxes, out_bytes, sfb_rows, b.fp4_b, b.dual_b);
  if (smem > smem_limit) return;
  b.epilogue_buffers = boxes;
  b.epilogue_whole_slice = true;
  b.smem_bytes = smem;
}

int64_t sm90_tiles(const GpuBlocking& b, int64_t m, int64_t n, int64_t tile_groups) {
  return ceil_div(std::max<int64_t>(m, 1), b.block_m) * ceil_div(std::max<int64_t>(n, 1), b.block_n) * tile_groups;
}

bool sm90_ring_rounds(const GpuBlocking& b, bool fp8, int64_t m, int64_t n, int64_t k, int64_t tile_groups,
                      int sfb_rows) {
  const int64_t k_blocks = ceil_div(std::max<int64_t>(k, 1), b.block_k);
  return sm90_staged_sfb(fp8, b.block_m, b.block_n, sfb_rows) && k_blocks >= 3 * int64_t(b.stages) &&
         sm90_tiles(b, m, n, tile_groups) > b.grid;
}

int64_t sm90_full_rounds(const GpuBlocking& b, int64_t m, int64_t n) {
  // As the kernel counts them: multicast clusters walk tile pairs, grid / multicast at a time.
  const int mc = std::max(b.multicast, 1);
  return b.grid < mc ? 0 : sm90_tiles(b, m, n, 1) / mc / (b.grid / mc);
}

bool sm90_round_sync_ok(const GpuBlocking& b, bool plain, int64_t m, int64_t n) {
  return plain && b.splits <= 1 && sm90_full_rounds(b, m, n) >= 2;
}

int sm90_round_sync_every(const GpuBlocking& b, bool plain, int64_t m, int64_t n, int64_t k, int64_t operand_bytes,
                          int64_t l2_bytes) {
  if (!sm90_round_sync_ok(b, plain, m, n)) return 0;
  return tl::round_sync_every(sm90_full_rounds(b, m, n), ceil_div(std::max<int64_t>(k, 1), b.block_k), operand_bytes,
                              l2_bytes);
}

void choose_multicast(GpuBlocking& b, int64_t m, int64_t n, int64_t tile_groups, int sms, bool multicast_ok) {
  const int64_t m_blocks = ceil_div(std::max<int64_t>(m, 1), b.block_m);
  const int64_t tiles = sm90_tiles(b, m, n, tile_groups);
  b.multicast = multicast_ok && m_blocks % 2 == 0 && sms >= 2 ? 2 : 1;
  // The fewest clusters that take the tiles in as many rounds as one per SM would.
  b.grid = tl::same_rounds_grid(int(tiles / b.multicast), sms / b.multicast) * b.multicast;
}

int64_t sm90_fp4_register_smem_bytes(int block_m, int block_n, int stages, int sfb_rows, bool k_interleave) {
  auto round128 = [](int64_t bytes) { return (bytes + 127) / 128 * 128; };
  const int64_t stage = int64_t(block_m) * 128 + int64_t(block_n) * 64 + round128(int64_t(block_m) * 4) +
                        round128(int64_t(block_n) * 4 * sfb_rows);
  return stages * stage + (k_interleave ? 64 * int64_t(block_m) * 4 : 0) + 2 * stages * 8 + 1024;
}

std::string fp4_register_tile_error(int block_m, int block_n, int promotion_k, bool contiguous, bool k_interleave) {
  if (block_n != 64 && block_n != 128) return "rows of B a tile: 64 or 128 (one consumer per 64)";
  if (block_m < 16 || block_m > 128 || block_m % 16 != 0) return "rows of A a tile: 16 to 128 by 16";
  if (promotion_k == 32 && block_m > 64) return "per-32 scales of B take at most 64 rows of A a tile";
  if (contiguous && 128 % block_m != 0) return "the contiguous layout's tiles must divide its 128-row blocks";
  if (k_interleave && block_n != 64) return "k-interleaved consumers take 64 rows of B a tile";
  return "";
}

GpuBlocking choose_fp4_register_blocking(int64_t m, int64_t n, int64_t tile_groups, int sms, int64_t smem_limit,
                                         int promotion_k, bool contiguous, int block_m, int block_n,
                                         bool k_interleave) {
  const int sfb_rows = 128 / promotion_k;
  sms = std::max(sms, 1);
  GpuBlocking best;
  double best_cost = 0;
  // The heuristic's candidates, or the one tile forced (DG_GPU_FP4=registers:BMxBN, any tile the
  // kernel takes: an 80-row one forced used to match no candidate and leave no tile at all).
  const std::vector<int> bns = block_m > 0 ? std::vector<int>{block_n} : std::vector<int>{128, 64};
  const std::vector<int> bms = block_m > 0 ? std::vector<int>{block_m} : std::vector<int>{128, 96, 64, 48, 32, 16};
  for (int bn : bns) {
    for (int bm : bms) {
      const bool ki = block_m > 0 ? k_interleave : bn == 64;
      if (!fp4_register_tile_error(bm, bn, promotion_k, contiguous, ki).empty()) continue;
      GpuBlocking tile;
      tile.block_m = bm;
      tile.block_n = bn;
      const double round = (70.0 + bm) * (bn == 128 ? 1.5 : 1.0);
      const double cost = double(ceil_div(sm90_tiles(tile, m, n, tile_groups), sms)) * round;
      // Ties (within 2%) go to the larger tile (fewer L2 reads per FLOP); candidates come larger first.
      if (best.block_m != 0 && cost >= best_cost * 0.98) continue;
      best.block_m = bm;
      best.block_n = bn;
      best.k_interleave = ki;
      best_cost = cost;
    }
  }
  RT_ICHECK(best.block_m != 0, "no FP4 register tile for m=", m, ", n=", n, " (forced ", block_m, "x", block_n, ")");
  best.block_k = 128;
  best.fp4_b = true;
  best.fp4_registers = true;
  best.tma_store = false;
  best.splits = 1;
  best.multicast = 1;
  best.grid = tl::same_rounds_grid(int(sm90_tiles(best, m, n, tile_groups)), sms);
  best.stages = 2;
  for (int s = 2; s <= kMaxSm90Stages; ++s)
    if (sm90_fp4_register_smem_bytes(best.block_m, best.block_n, s, sfb_rows, best.k_interleave) <= smem_limit)
      best.stages = s;
  best.smem_bytes = sm90_fp4_register_smem_bytes(best.block_m, best.block_n, best.stages, sfb_rows, best.k_interleave);
  best.raster_group = int(std::clamp<int64_t>(ceil_div(std::max<int64_t>(n, 1), best.block_n), 1, 8));
  return best;
}

// DG_GPU_CONFIG=<block_m>x<block_n>x<stages>[x<multicast>][c1] (tuning): the heuristic's choice
// replaced, after the kernel's own rules are checked. c1 (one consumer) is what 64-row tiles always
// run on, accepted so that older configurations still parse; c2 (two k-interleaved consumers on a
// 64-row tile) was removed from the kernel, and is refused by name.
GpuBlocking forced_blocking(const std::string& fn, const std::string& text, bool fp8, bool sfb_per_row, int64_t m,
                            int64_t n, int64_t tile_groups, int out_bytes, bool tma_store_ok, int sms,
                            int64_t smem_limit, int sfb_rows, bool multicast_ok, int max_block_m, bool fp4_b,
                            bool contiguous, bool grouped) {
  int bm = 0, bn = 0, stages = 0, multicast = 0, consumers = 0, used = 0;
  const int fields = std::sscanf(text.c_str(), "%dx%dx%d%n", &bm, &bn, &stages, &used);
  if (fields == 3 && text[size_t(used)] == 'x') {
    int more = 0;
    if (std::sscanf(text.c_str() + used, "x%d%n", &multicast, &more) == 1) used += more;
  }
  const bool consumers_given = fields == 3 && text[size_t(used)] == 'c';
  if (consumers_given) {
    int more = 0;
    if (std::sscanf(text.c_str() + used, "c%d%n", &consumers, &more) == 1) used += more;
  }
  RT_USER_CHECK(fields == 3 && size_t(used) == text.size() && (multicast == 0 || multicast == 1 || multicast == 2) &&
                    (!consumers_given || consumers == 1 || consumers == 2),
                "deepgemm::", fn, ": DG_GPU_CONFIG='", text,
                "' is not <block_m>x<block_n>x<stages>[x<multicast 1|2>][c1], e.g. 128x128x5, 256x128x3x2 or ",
                "64x64x8");
  RT_USER_CHECK(consumers != 2, "deepgemm::", fn, ": DG_GPU_CONFIG='", text,
                "': c2 (two consumers taking alternate k-blocks of a 64-row tile) was removed: it ran no faster ",
                "than one consumer on the H200; 64-row tiles run on one (c1, or no suffix)");
  RT_USER_CHECK(consumers != 1 || bm == 64, "deepgemm::", fn, ": DG_GPU_CONFIG='", text,
                "': c1 (one consumer) is for 64-row tiles; taller ones have one consumer per 64 or 128 rows");
  const int gcd128 = bn % 128 == 0 ? 128 : bn % 64 == 0 ? 64 : bn % 32 == 0 ? 32 : bn % 16 == 0 ? 16 : 8;
  // The kernel's register rule: (waves + FP8's partial sets) x block_n / 2 accumulators <= 192.
  const int waves = bm == 256 ? 2 : 1;
  const bool three_consumers = bm == 192;  // FP8 with block scales only, no second partial set
  const int partials = fp8 ? (!sfb_per_row && waves == 1 && bn <= 128 && !three_consumers ? 2 : 1) : 0;
  RT_USER_CHECK(!three_consumers || (fp8 && !sfb_per_row && bn <= 128 && multicast <= 1), "deepgemm::", fn,
                ": DG_GPU_CONFIG='", text, "': block_m 192 (three consumers) takes FP8 with block scales, block_n <= ",
                "128 and no multicast");
  // block_n a multiple of 8 (wgmma's float sizes); of 16 where half of B's tile is multicast (each
  // half whole 8-row swizzle atoms) or B is packed FP4 (other widths not built or tested there).
  const int bn_step = fp4_b || multicast == 2 ? 16 : 8;
  RT_USER_CHECK((bm == 64 || bm == 128 || bm == 192 || bm == 256) && bn >= 16 && bn % bn_step == 0 && bn <= 256 &&
                    (waves + partials) * bn / 2 <= 192 && (!fp8 || sfb_per_row || bn + 128 - gcd128 <= 256) &&
                    stages >= 2,
                "deepgemm::", fn, ": DG_GPU_CONFIG='", text, "': block_m must be 64, 128, 192 or 256, block_n a multiple ",
                "of 8 (of 16 with multicast or FP4 B) from 16 with (waves + partial sets) * block_n / 2 <= 192 accumulators (",
                fp8 ? "FP8: block_n <= 192 for block_m 64/128, <= 128 for 256; a tile may touch at most two 128-blocks "
                      "of B's scales"
                    : "BF16: block_n <= 256, <= 192 for block_m 256",
                "), stages >= 2");
  RT_USER_CHECK(!three_consumers || !grouped, "deepgemm::", fn, ": DG_GPU_CONFIG='", text,
                "': block_m 192 (three consumers) is for plain GEMMs, not grouped ones");
  RT_USER_CHECK(bm <= max_block_m, "deepgemm::", fn, ": DG_GPU_CONFIG='", text, "': block_m ", bm,
                " is taller than the ", max_block_m, " rows this call allows (the contiguous layout's groups start ",
                "on 128-row boundaries; its 256-row tiles take block-scaled FP8 or BF16 only)");
  GpuBlocking b;
  b.block_m = bm;
  b.block_n = bn;
  b.block_k = fp8 ? 128 : 64;
  b.tma_store = tma_store_ok && bn % 64 == 0;
  b.fp4_b = fp4_b;
  b.dual_b = sm90_dual_b(contiguous, bm);
  RT_USER_CHECK(choose_sm90_stages(b, fp8, out_bytes, sfb_rows, smem_limit, stages), "deepgemm::", fn,
                ": DG_GPU_CONFIG='", text, "' needs ", b.smem_bytes, " bytes of shared memory; the device allows ",
                smem_limit);
  choose_multicast(b, m, n, tile_groups, sms, multicast_ok && multicast == 2);
  RT_USER_CHECK(multicast != 2 || b.multicast == 2, "deepgemm::", fn, ": DG_GPU_CONFIG='", text,
                "' asks for multicast, which needs a plain GEMM with block scales of B, an even number of ",
                "BLOCK_M blocks in M");
  b.raster_group = int(std::clamp<int64_t>(ceil_div(n, bn), 1, 8));
  return b;
}

GpuBlocking choose_gpu_blocking(bool fp8, int64_t m, int64_t n, int64_t k, int64_t tile_groups, int out_bytes,
                                bool tma_store_ok, int sms, int64_t smem_limit, int sfb_rows, int max_block_m,
                                bool fp4_b, bool plain_fp8, bool contiguous) {
  // Block shapes and the throughput of one full wave of each, relative to the best, as measured on
  // the H200 (FP8: bench_gpu_deepgemm --sweep at 4096 x 4096 x 7168, docs/perf.md; BF16 "~":
  // interpolated from bench_gpu_deepgemm's BF16 rows, not swept). What they
  // fold in: the L2 -> shared-memory traffic per FLOP ((bm + bn) / (bm bn)), FP8's promotion
  // overlapped with the next k-block's wgmmas (BLOCK_N <= 128 with 128-row tiles), the single
  // consumer warpgroup of 64-row tiles, and the stages that fit next to each tile.
  struct Candidate {
    int bm, bn;
    double efficiency;
  };
  // 128 x 64 at 0.75, not its 0.71 at M = 4096: at M = 128 it beat 64 x 128 (same tile count) by
  // 1-7%, and the 2% tie rule below then prefers it (docs/perf.md, 2026-11-30).
  // 64 x 32 (plain FP8 only, where it was measured): a guess at its full-wave rate that makes it win
  // only where 64 x 64 tiles fill at most half the SMs; there one wave of whole tiles beat 64 x 64
  // split in K (stop 22, kernel times: 128 x 2112 x 7168 14.2 -> 12.0 us, 64 x 4096 x 7168 15.6 ->
  // 12.7, 64 x 2112 x 7168 12.2 -> 11.3).
  // 192 x 128 (three consumers, each promotion under the other two's wgmmas) runs a full wave 3-5%
  // faster per tile than 256 x 128 (A/B on three shapes, docs/perf.md stop 14), but its tile count
  // often leaves a partial wave: the cost below decides.
  // 128 x 192 and 128 x 160 from kernel times at M = 4096 after their promotion lost its per-column
  // scale selects (stop 37): 128 x 192 0.98-1.03 at 4096 x 4096 x 7168 and 4096 x 24576 x 1536,
  // 128 x 160 0.85 at K = 7168 and 16384 (0.67 at K = 1536).
  static const Candidate kFp8[] = {{192, 128, 1.04}, {256, 128, 1.00}, {128, 192, 0.98}, {128, 128, 0.92}, {128, 160, 0.80},
                                   {64, 128, 0.76},  {128, 112, 0.75}, {128, 64, 0.75},  {128, 96, 0.70},
                                   {256, 96, 0.68},  {64, 64, 0.58},   {64, 96, 0.55},  {64, 32, 0.35}};
  static const Candidate kBf16[] = {{128, 256, 1.00}, {128, 192, 0.95}, {256, 128, 0.90} /*~*/, {128, 128, 0.80},
                                    {128, 160, 0.80} /*~*/, {64, 256, 0.75} /*~*/, {128, 96, 0.70} /*~*/,
                                    {64, 128, 0.60} /*~*/, {64, 64, 0.40} /*~*/};
  const Candidate* candidates = fp8 ? kFp8 : kBf16;
  const int num_candidates = fp8 ? int(std::size(kFp8)) : int(std::size(kBf16));
  sms = std::max(sms, 1);
  GpuBlocking best;
  double best_cost = 0;
  for (int i = 0; i < num_candidates; ++i) {
    const Candidate& c = candidates[i];
    if (c.bm > max_block_m || ((c.bm == 192 || c.bn == 32) && !plain_fp8)) continue;
    // The fewest stages worth running: smaller tiles fit more.
    if (sm90_smem_bytes(fp8, c.bm, c.bn, 3, tma_store_ok && c.bn % 64 == 0 ? 1 : 0, out_bytes, sfb_rows, fp4_b,
                        sm90_dual_b(contiguous, c.bm)) > smem_limit)
      continue;
    GpuBlocking tile;
    tile.block_m = c.bm;
    tile.block_n = c.bn;
    const int64_t tiles = sm90_tiles(tile, m, n, tile_groups);
    // A persistent grid runs ceil(tiles / SMs) rounds of one tile per SM, each as long as one tile
    // at the shape's efficiency (the rows and columns a partial tile wastes cost as much as others).
    const double cost = double(ceil_div(tiles, sms)) * double(c.bm) * c.bn / c.efficiency;
    // Ties (within 2%) go to two consumer warpgroups, then to the more efficient shape (listed first).
    const bool better = best.block_m == 0 || cost < best_cost * 0.98 ||
                        (cost <= best_cost * 1.02 && c.bm > 64 && best.block_m == 64);
    if (!better) continue;
    best.block_m = c.bm;
    best.block_n = c.bn;
    best_cost = cost;
  }
  choose_multicast(best, m, n, tile_groups, sms, false);
  best.block_k = fp8 ? 128 : 64;
  best.splits = 1;
  best.tma_store = tma_store_ok && best.block_n % 64 == 0;
  best.fp4_b = fp4_b;
  best.dual_b = sm90_dual_b(contiguous, best.block_m);
  // As many stages as fit, up to kMaxSm90Stages (the ring also prefetches the next tile across tiles);
  // 64-row FP8 tiles from 64 columns up at most 8 (H200 kernel times, stop 42: 64 x 64 with 8 stages
  // 1-3.5% faster than with 11; 64 x 32 keeps as many as fit, 12, as measured in stop 43).
  choose_sm90_stages(best, fp8, out_bytes, sfb_rows, smem_limit);
  const bool at_most_8_stages = fp8 && best.block_m == 64 && best.block_n >= 64;
  if (at_most_8_stages && best.stages > 8) choose_sm90_stages(best, fp8, out_bytes, sfb_rows, smem_limit, 8);
  // Bands about as wide as a wave is tall keep the wave's A and B panels in L2.
  const int64_t n_blocks = ceil_div(std::max<int64_t>(n, 1), best.block_n);
  best.raster_group = int(std::clamp<int64_t>(n_blocks, 1, 8));
  return best;
}

}  // namespace deepgemm::detail
