// The rule of tl/device/round_sync_plan.h: where the barrier between rounds of tiles goes (host
// side; the kernels that run it are tested on the H200 by tests/device/cuda/gemm_sm90_test.cu,
// deepgemm's GpuRoundSync and RoundSyncedTiles, and tilelang's SeedMatmul.RoundSyncedRoundsGiveTheSameBits).
#include "tl/device/round_sync_plan.h"

#include <gtest/gtest.h>

namespace {

constexpr int64_t kL2 = int64_t(50) << 20;  // the H200's L2

TEST(RoundSyncPlan, OnlyWhereTheOperandsOutgrowL2) {
  EXPECT_EQ(tl::round_sync_every(8, 64, kL2, kL2), 0);      // A and B fit
  EXPECT_EQ(tl::round_sync_every(8, 64, kL2 + 1, kL2), 4);  // just past it: every 256 k-blocks
  EXPECT_EQ(tl::round_sync_every(1, 64, 4 * kL2, kL2), 0);  // one round: nothing to keep in step
  EXPECT_EQ(tl::round_sync_every(0, 64, 4 * kL2, kL2), 0);  // no full round (split-K)
}

TEST(RoundSyncPlan, RoundsApartByKBlocks) {
  for (auto [k_blocks, every] : {std::pair<int64_t, int>{512, 1}, {256, 1}, {255, 2}, {128, 2}, {64, 4}, {12, 22},
                                 {1, 256}, {0, 256}})
    EXPECT_EQ(tl::round_sync_every(100, k_blocks, 4 * kL2, kL2), every) << k_blocks << " k-blocks";
}

TEST(RoundSyncPlan, BarriersALaunchHas) {
  EXPECT_EQ(tl::round_sync_barriers(4, 1), 3);  // before rounds 1, 2, 3
  EXPECT_EQ(tl::round_sync_barriers(4, 3), 1);  // before round 3
  EXPECT_EQ(tl::round_sync_barriers(4, 4), 0);  // round 4 does not exist
  EXPECT_EQ(tl::round_sync_barriers(1, 1), 0);
  EXPECT_EQ(tl::round_sync_barriers(9, 0), 0);  // no period: none
}

}  // namespace
