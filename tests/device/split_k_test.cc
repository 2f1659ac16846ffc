// The split-K plan and unit walk of tl/device/split_k.h (host side; the GPU kernel walks the same
// functions, tested on the H200 by tests/device/cuda/gemm_sm90_test.cu).
#include "tl/device/split_k.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

// Every (tile, k-block) is summed by exactly one unit, each split tile's pieces are numbered 0 ..
// splits-1 once each, and the kernel's counters and workspace (as the plan sizes them) cover
// every split tile and piece.
void expect_exact_cover(const tl::SplitKPlan& plan, int tiles, int k_blocks, int tile_elems) {
  const tl::SplitK sk{plan.dp_tiles, plan.splits, nullptr, nullptr};
  ASSERT_EQ(tl::split_k_units(sk, tiles), plan.units);
  std::vector<int> covered(size_t(tiles) * k_blocks, 0);
  std::vector<int> pieces(size_t(tiles), 0);
  for (int u = 0; u < plan.units; ++u) {
    const tl::SplitKUnit unit = tl::split_k_unit(sk, tiles, k_blocks, u);
    ASSERT_GE(unit.tile, 0);
    ASSERT_LT(unit.tile, tiles);
    ASSERT_LE(unit.kb0, unit.kb1);
    ASSERT_GE(unit.kb0, 0);
    ASSERT_LE(unit.kb1, k_blocks);
    for (int kb = unit.kb0; kb < unit.kb1; ++kb) ++covered[size_t(unit.tile) * k_blocks + kb];
    if (unit.piece < 0) {
      if (plan.splits > 1) {
        EXPECT_LT(unit.tile, plan.dp_tiles) << "a whole tile among the split ones";
      }
      EXPECT_EQ(unit.kb0, 0);
      EXPECT_EQ(unit.kb1, k_blocks);
    } else {
      EXPECT_GE(unit.tile, plan.dp_tiles);
      EXPECT_LT(unit.piece, plan.splits);
      pieces[size_t(unit.tile)] |= 1 << unit.piece;
      // The workspace slot (piece, tile - dp) lies inside the planned workspace.
      const int64_t slot_end = (int64_t(unit.piece) * (tiles - plan.dp_tiles) + unit.tile - plan.dp_tiles + 1) * tile_elems;
      EXPECT_LE(slot_end, plan.workspace_floats(tile_elems));
    }
  }
  for (int t = 0; t < tiles; ++t)
    for (int kb = 0; kb < k_blocks; ++kb) ASSERT_EQ(covered[size_t(t) * k_blocks + kb], 1) << "tile " << t << " k-block " << kb;
  if (plan.splits > 1) {
    for (int t = plan.dp_tiles; t < tiles; ++t) EXPECT_EQ(pieces[size_t(t)], (1 << plan.splits) - 1) << "tile " << t;
    EXPECT_EQ(plan.counters(2), (tiles - plan.dp_tiles) * 2 * 2);
    EXPECT_LE(plan.units - plan.dp_tiles, plan.grid) << "the pieces run in one wave";
    EXPECT_EQ(plan.dp_tiles % plan.grid, 0);
  } else {
    EXPECT_EQ(plan.workspace_floats(tile_elems), 0);
    EXPECT_EQ(plan.counters(2), 0);
  }
}

TEST(SplitK, SeedShapesOnTheH200) {
  const int sms = 132;
  // 128 x 2112 x 7168 on 128 x 128 tiles: 17 tiles of 112 k-blocks leave 115 SMs idle.
  tl::SplitKPlan p = tl::plan_split_k(17, 112, sms);
  EXPECT_EQ(p.dp_tiles, 0);
  EXPECT_GT(p.splits, 4);
  EXPECT_LE(p.units, sms);
  EXPECT_EQ(p.grid, p.units);
  expect_exact_cover(p, 17, 112, 128 * 128);
  // 4096 x 2112 x 7168 on 128 x 256 tiles: 288 tiles = 2 whole waves + 24; only those 24 split.
  p = tl::plan_split_k(288, 112, sms);
  EXPECT_EQ(p.dp_tiles, 264);
  EXPECT_GT(p.splits, 1);
  EXPECT_EQ(p.grid, sms);
  expect_exact_cover(p, 288, 112, 128 * 256);
  // Whole waves, and tails that cost little (4096^3: 512 tiles = 3.9 waves; 8192^3: 15.5) stay unsplit.
  EXPECT_EQ(tl::plan_split_k(264, 64, sms).splits, 1);
  EXPECT_EQ(tl::plan_split_k(512, 64, sms).splits, 1);
  EXPECT_EQ(tl::plan_split_k(2048, 128, sms).splits, 1);
  // Unsplit, they launch the fewest CTAs that keep the rounds: 512 tiles in 4 rounds of 128, 2048 in
  // 16 of 128; whole waves keep one CTA per SM.
  EXPECT_EQ(tl::plan_split_k(512, 64, sms).grid, 128);
  EXPECT_EQ(tl::plan_split_k(2048, 128, sms).grid, 128);
  EXPECT_EQ(tl::plan_split_k(264, 64, sms).grid, sms);
  // One k-block cannot be split; neither can zero tiles.
  EXPECT_EQ(tl::plan_split_k(3, 1, sms).splits, 1);
  EXPECT_EQ(tl::plan_split_k(0, 100, sms).grid, 0);
}

TEST(SplitK, ForcedSplitsCoverEvenWithEmptyPieces) {
  // K of 3 k-blocks in 8 pieces: five pieces are empty and still count in (the kernel writes zeros).
  tl::SplitKPlan p = tl::plan_split_k(5, 3, 132, 8);
  EXPECT_EQ(p.splits, 8);
  EXPECT_EQ(p.units, 40);
  expect_exact_cover(p, 5, 3, 64);
  EXPECT_EQ(tl::plan_split_k(5, 3, 132, 1).splits, 1);  // 1: split-K off
}

TEST(SplitK, RandomPlansCoverExactly) {
  std::mt19937 rng(20261129);
  for (int i = 0; i < 300; ++i) {
    const int tiles = int(rng() % 600) + 1, k_blocks = int(rng() % 300) + 1, sms = int(rng() % 140) + 1;
    const int force = i % 3 == 0 ? int(rng() % 9) : 0;
    SCOPED_TRACE(testing::Message() << tiles << " tiles, " << k_blocks << " k-blocks, " << sms << " SMs, force " << force);
    const tl::SplitKPlan p = tl::plan_split_k(tiles, k_blocks, sms, force);
    EXPECT_GE(p.grid, 1);
    EXPECT_LE(p.grid, sms);
    EXPECT_EQ(p.dp_tiles % p.grid, 0) << "whole tiles come in whole waves";
    if (p.splits == 1) {
      // As many rounds as one CTA per SM, and no CTA fewer would do.
      const int rounds = (tiles + sms - 1) / sms;
      EXPECT_EQ((tiles + p.grid - 1) / p.grid, rounds);
      if (p.grid > 1) {
        EXPECT_GT((tiles + p.grid - 2) / (p.grid - 1), rounds);
      }
    }
    if (force == 0 && p.splits > 1) {
      // The model never picks empty pieces.
      const int per = (k_blocks + p.splits - 1) / p.splits;
      EXPECT_GT(k_blocks - (p.splits - 1) * per, 0);
    }
    expect_exact_cover(p, tiles, k_blocks, 16);
  }
}

}  // namespace
