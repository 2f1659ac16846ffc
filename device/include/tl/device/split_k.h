// Split-K for persistent GEMM kernels: which output tiles have their K range cut into pieces, and
// the launch argument that tells the kernel so. Plain C++ (no CUDA): the host code that plans a
// launch and the device code that runs it share this one definition of the argument's layout.
//
// Why: a persistent kernel runs one CTA per SM over the output tiles. When the tiles are fewer
// than the SMs (M = 128 decoding shapes) or their count leaves a poor last wave (4096 x 2112 on
// 128 x 128 tiles: 544 tiles on 132 SMs = 4 waves + 16 tiles, so the fifth wave leaves 116 SMs
// idle), SMs sit idle for whole tile-lengths. Split-K cuts the K range of the tiles of that last
// wave into `splits` pieces, each a unit of work of its own: the first `dp_tiles` tiles run whole
// (a multiple of the grid, so every CTA gets the same share of them), the rest as pieces, at most
// one per CTA, all at once. Each piece writes its FP32 partial tile to a workspace and counts
// itself in on a per-tile counter; when all are in, each piece sums its share of the tile over
// all partials in a fixed order (results do not depend on timing) and writes that share of C.
// The pieces of a tile wait for each other, so they must be resident together: the plan keeps
// them to one wave of the grid, which is at most one CTA per SM (a GPU shared with other work
// still gets there as SMs free up; a partitioned one, with fewer SMs than the grid, would not).
#pragma once

#include "tl/device/numeric.h"  // fixed-width integers, also under NVRTC

namespace tl {

// The kernel argument (passed by value; host and device see the same layout).
struct SplitK {
  int dp_tiles = 0;           // tiles [0, dp_tiles) run whole; the rest are cut into pieces
  int splits = 1;             // pieces per remaining tile (1: no split-K, workspace unused)
  float* workspace = nullptr;  // [splits][tiles - dp_tiles][BLOCK_M * BLOCK_N] FP32 partial tiles
  int* counters = nullptr;     // [tiles - dp_tiles][consumers][2], zero; every launch leaves them zero
};

// One unit of work of the kernel: output tile `tile`, its K-blocks [kb0, kb1); piece < 0 when the
// unit is the whole tile, else which of the tile's `splits` pieces it is.
struct SplitKUnit {
  int tile, piece, kb0, kb1;
};

TL_HOST_DEVICE inline int split_k_units(const SplitK& sk, int tiles) {
  return sk.splits <= 1 ? tiles : sk.dp_tiles + (tiles - sk.dp_tiles) * sk.splits;
}

// Unit u in [0, split_k_units()). Pieces are numbered piece-major (all tiles' first pieces, then
// all second pieces, ...): units that run at the same time then read the same K-slices of A and B,
// which L2 serves once.
TL_HOST_DEVICE inline SplitKUnit split_k_unit(const SplitK& sk, int tiles, int k_blocks, int u) {
  if (sk.splits <= 1 || u < sk.dp_tiles) return SplitKUnit{u, -1, 0, k_blocks};
  const int tail = tiles - sk.dp_tiles, r = u - sk.dp_tiles;
  const int piece = r / tail;
  const int per = (k_blocks + sk.splits - 1) / sk.splits;
  const int kb0 = piece * per < k_blocks ? piece * per : k_blocks;
  const int kb1 = kb0 + per < k_blocks ? kb0 + per : k_blocks;
  return SplitKUnit{sk.dp_tiles + r % tail, piece, kb0, kb1};
}

// Whether a launch of `grid` CTAs over `units` units can run the plan: the pieces of a tile wait
// for each other, so they must all run at once, one per CTA, after the same number of whole tiles
// on every CTA (plan_split_k guarantees it; a kernel traps rather than hang when it does not hold).
TL_HOST_DEVICE inline bool split_k_fits(const SplitK& sk, int units, int grid) {
  return sk.splits <= 1 || (units - sk.dp_tiles <= grid && sk.dp_tiles % grid == 0);
}

// The fewest CTAs that run `units` units of work (one per CTA at a time) in as many rounds as
// `sms` CTAs would: 512 tiles on 132 SMs take 4 rounds, which 128 CTAs also do. The 4 CTAs fewer
// change nothing in the rounds but contend less for L2 and power while they run (DeepGEMM's
// 4096 x 4096 x 7168 on 128 CTAs: 194.1 -> 191.3 us kernel time on the H200, docs/perf.md stop 25).
TL_HOST_DEVICE inline int same_rounds_grid(int units, int sms) {
  if (units <= 0 || sms <= 0) return 0;
  const int rounds = (units + sms - 1) / sms;
  return (units + rounds - 1) / rounds;
}

// The launch plan of a persistent GEMM over `tiles` output tiles of `k_blocks` K-blocks each, on
// `sms` CTAs (one per SM).
struct SplitKPlan {
  int dp_tiles = 0;
  int splits = 1;
  int units = 0;  // units of work: dp_tiles + (tiles - dp_tiles) * splits
  int grid = 0;   // CTAs to launch: same_rounds_grid(tiles, sms), or min(units, sms) when split
  double cost = 0;  // the model's time: K-blocks of one tile on the busiest SM, fixup included
  int64_t workspace_floats(int tile_elems) const { return splits > 1 ? int64_t(units - dp_tiles) * tile_elems : 0; }
  int counters(int consumers) const { return splits > 1 ? (units - dp_tiles) / splits * consumers * 2 : 0; }
};

// Picks the split that minimizes a simple time model, in units of one K-block of one tile on one
// SM: whole waves of whole tiles, then one piece per CTA, plus the fixup (a piece writes its
// partial tile, waits for the others and reads a tile's worth of partials; with the CTAs' start
// skew this measured about 7 us, some kFixup K-blocks of a 128 x 128 tile at M = 128, whatever
// the number of pieces). Pieces must fit in one wave (the kernel's reduction needs it); after
// whole waves only a small tail (a quarter of the SMs at most) is split, as measured on the H200
// (docs/perf.md, split-K); a split must promise 5% over none. force_splits > 0 takes that many
// pieces instead (1: no split-K), or as many as fit in one wave; pieces may then be empty.
inline SplitKPlan plan_split_k(int tiles, int k_blocks, int sms, int force_splits = 0) {
  constexpr double kFixup = 20.0;
  constexpr int kMaxSplits = 16;
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  SplitKPlan plan;
  plan.units = tiles;
  plan.grid = same_rounds_grid(tiles, sms);
  if (sms > 0) plan.cost = double(ceil_div(tiles, sms)) * k_blocks;
  const int tail = tiles <= 0 || sms <= 0 || tiles % sms == 0 ? 0 : (tiles < sms ? tiles : tiles % sms);
  if (tail == 0 || force_splits == 1) return plan;  // whole waves: nothing to gain
  const int dp = tiles - tail;
  auto split_cost = [&](int s) { return double(dp / sms) * k_blocks + double(ceil_div(k_blocks, s)) + kFixup; };
  if (force_splits > 1) {
    const int fit = sms / tail;  // the pieces must fit in one wave
    const int s = force_splits < fit ? force_splits : fit;
    if (s < 2) return plan;
    plan.dp_tiles = dp;
    plan.splits = s;
    plan.cost = split_cost(s);
  } else if (dp == 0 || 4 * tail <= sms) {
    double best = 0.95 * plan.cost;
    for (int s = 2; s <= kMaxSplits && s <= k_blocks && int64_t(tail) * s <= sms; ++s) {
      if (ceil_div(k_blocks, ceil_div(k_blocks, s)) != s) continue;  // some piece would be empty
      if (split_cost(s) < best) {
        best = plan.cost = split_cost(s);
        plan.dp_tiles = dp;
        plan.splits = s;
      }
    }
  }
  if (plan.splits == 1) return plan;
  plan.units = plan.dp_tiles + (tiles - plan.dp_tiles) * plan.splits;
  // The pieces run in one wave after dp_tiles / sms whole rounds: every SM's CTA is needed.
  plan.grid = plan.units < sms ? plan.units : sms;
  return plan;
}

}  // namespace tl
