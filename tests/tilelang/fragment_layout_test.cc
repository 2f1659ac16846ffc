// The register layouts of accumulator fragments (ir/fragment_layout.h), evaluated for every thread
// and register: each covers the tile exactly once, and the warpgroup layout is wgmma's m64nNk16
// accumulator fragment (PTX ISA; device/cuda/wgmma.h) repeated over 64-row tiles and warpgroups.
#include "tilelang/ir/fragment_layout.h"

#include <gtest/gtest.h>

#include <set>

#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/passes/simplify.h"

namespace {

using tilelang::ir::FragmentLayout;

namespace ir = tilelang::ir;

// (row, col) of register r of thread tx: the layout's expressions with both bound, folded.
std::pair<int64_t, int64_t> element(const FragmentLayout& l, int64_t tx, int64_t r) {
  ir::Var t = ir::make_var("tx", ir::DType::I32), reg = ir::make_var("r", ir::DType::I32);
  ir::VarMap at{{t.get(), ir::make_int(tx, ir::DType::I32)}, {reg.get(), ir::make_int(r, ir::DType::I32)}};
  auto row = ir::as_const_int(tilelang::passes::simplify_expr(ir::substitute(l.row(t, reg), at)));
  auto col = ir::as_const_int(tilelang::passes::simplify_expr(ir::substitute(l.col(t, reg), at)));
  EXPECT_TRUE(row && col) << "the layout's expressions do not fold to constants";
  return {row.value_or(-1), col.value_or(-1)};
}

// Every element of the tile is held by exactly one (thread, register).
void expect_covers_once(const FragmentLayout& l, int64_t threads) {
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int64_t tx = 0; tx < threads; ++tx)
    for (int64_t r = 0; r < l.per_thread(); ++r) {
      auto e = element(l, tx, r);
      EXPECT_TRUE(e.first >= 0 && e.first < l.rows && e.second >= 0 && e.second < l.cols) << l.to_string() << " tx " << tx << " r " << r;
      EXPECT_TRUE(seen.insert(e).second) << l.to_string() << ": element held twice, tx " << tx << " r " << r;
    }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), l.rows * l.cols) << l.to_string();
}

TEST(FragmentLayout, WarpgroupLayoutIsWgmmasAccumulator) {
  struct Case {
    int64_t rows, cols, warps;
  };
  for (Case c : {Case{64, 64, 4}, Case{128, 128, 4}, Case{128, 256, 8}, Case{256, 64, 8}}) {
    auto l = FragmentLayout::warpgroup_accumulator(c.rows, c.cols, c.warps);
    ASSERT_TRUE(l) << c.rows << "x" << c.cols;
    EXPECT_EQ(l->warps_n, 1);  // whole rows per warp: row reductions stay within a warp
    expect_covers_once(*l, 32 * c.warps);
    const int64_t per_group_rows = c.rows / (c.warps / 4), tiles = per_group_rows / 64, regs_per_tile = c.cols / 2;
    for (int64_t tx = 0; tx < 32 * c.warps; tx += 37)
      for (int64_t r = 0; r < l->per_thread(); ++r) {
        // Register i of the m64nNk16 instruction that covers 64-row tile `tile` of the thread's warpgroup.
        const int64_t group = tx / 128, w = (tx % 128) / 32, lane = tx % 32, tile = r / regs_per_tile, i = r % regs_per_tile;
        const int64_t row = group * per_group_rows + tile * 64 + 16 * w + lane / 4 + 8 * ((i / 2) % 2);
        const int64_t col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        EXPECT_EQ(element(*l, tx, r), std::make_pair(row, col)) << l->to_string() << " tx " << tx << " r " << r << " (" << tiles << " tiles)";
      }
  }
}

TEST(FragmentLayout, WarpgroupLayoutNeedsWholeWarpgroupsAnd64RowTiles) {
  EXPECT_FALSE(FragmentLayout::warpgroup_accumulator(64, 64, 2));    // not a warpgroup
  EXPECT_FALSE(FragmentLayout::warpgroup_accumulator(64, 64, 8));    // 32 rows per warpgroup
  EXPECT_FALSE(FragmentLayout::warpgroup_accumulator(64, 60, 4));    // columns in 8s
  EXPECT_FALSE(FragmentLayout::warpgroup_accumulator(128, 256, 4));  // 256 registers a thread
  EXPECT_TRUE(FragmentLayout::warpgroup_accumulator(128, 256, 4, 256));
}

TEST(FragmentLayout, MmaLayoutsCoverTheTile) {
  for (bool whole_rows : {false, true}) {
    auto l = FragmentLayout::accumulator(128, 128, 4, whole_rows);
    ASSERT_TRUE(l);
    expect_covers_once(*l, 128);
  }
}

}  // namespace
