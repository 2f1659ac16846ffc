#include "tilelang/ir/fragment_layout.h"

#include <cstdlib>

#include "rt/error.h"
#include "tilelang/ir/op.h"

namespace tilelang::ir {
namespace {

Expr i32(int64_t v) { return make_int(v, DType::I32); }

}  // namespace

Expr FragmentLayout::row(const Expr& tx, const Expr& r) const {
  // mma:    warp_row_block * warp_rows + atom_row * 16 + lane / 4 + 8 * (c / 2)
  // wgmma:  warpgroup * warpgroup_rows + atom_row * 64 + 16 * (warp % 4) + lane / 4 + 8 * (c / 2)
  Expr warp = floor_div(tx, i32(32)), lane = floor_mod(tx, i32(32));
  // A row vector's slot s is the row of the tile's register 4 * atoms_n * (s / 2) + 2 * (s % 2).
  Expr atom = row_vector ? mul(floor_div(r, i32(2)), i32(atoms_n())) : floor_div(r, i32(4));
  Expr c = row_vector ? mul(floor_mod(r, i32(2)), i32(2)) : floor_mod(r, i32(4));
  Expr base = warpgroup ? add(add(mul(floor_div(warp, i32(4)), i32(4 * warp_rows())), mul(floor_div(atom, i32(atoms_n())), i32(64))),
                              mul(floor_mod(warp, i32(4)), i32(16)))
                        : add(mul(floor_div(warp, i32(warps_n)), i32(warp_rows())), mul(floor_div(atom, i32(atoms_n())), i32(16)));
  return add(add(base, floor_div(lane, i32(4))), mul(floor_div(c, i32(2)), i32(8)));
}

Expr FragmentLayout::slot(const Expr& r) const {
  RT_ICHECK(!row_vector && warps_n == 1, "row slots of a layout without whole rows per warp");
  return add(mul(floor_div(r, i32(4 * atoms_n())), i32(2)), floor_div(floor_mod(r, i32(4)), i32(2)));
}

FragmentLayout FragmentLayout::rows_vector() const {
  RT_ICHECK(!row_vector && warps_n == 1, "row vector of a layout without whole rows per warp");
  FragmentLayout l = *this;
  l.row_vector = true;
  return l;
}

Expr FragmentLayout::col(const Expr& tx, const Expr& r) const {
  RT_ICHECK(!row_vector, "column of a row vector");
  // warp_col_block * warp_cols + atom_col * 8 + 2 * (lane % 4) + c % 2
  Expr warp = floor_div(tx, i32(32)), lane = floor_mod(tx, i32(32));
  Expr atom = floor_div(r, i32(4)), c = floor_mod(r, i32(4));
  Expr base = add(mul(floor_mod(warp, i32(warps_n)), i32(warp_cols())), mul(floor_mod(atom, i32(atoms_n())), i32(8)));
  return add(add(base, mul(floor_mod(lane, i32(4)), i32(2))), floor_mod(c, i32(2)));
}

std::string FragmentLayout::to_string() const {
  if (row_vector) {
    FragmentLayout tile = *this;
    tile.row_vector = false;
    return "rows of " + tile.to_string();
  }
  if (warpgroup) return rt::str("wgmma ", rows, "x", cols, " over ", warps_m / 4, warps_m == 4 ? " warpgroup" : " warpgroups");
  return rt::str("mma ", rows, "x", cols, " over ", warps_m, "x", warps_n, " warps");
}

std::optional<FragmentLayout> FragmentLayout::accumulator(int64_t rows, int64_t cols, int64_t warps, bool whole_rows, int64_t max_per_thread) {
  if (warps <= 0 || rows * cols % (32 * warps) != 0 || rows * cols / (32 * warps) > max_per_thread) return std::nullopt;
  std::optional<FragmentLayout> best;
  for (int64_t wm = warps; wm >= 1; --wm) {  // ties go to more warps along the rows
    if (warps % wm != 0 || (whole_rows && wm != warps)) continue;
    FragmentLayout l{rows, cols, wm, warps / wm};
    if (rows % (16 * l.warps_m) != 0 || cols % (16 * l.warps_n) != 0) continue;
    auto skew = [](const FragmentLayout& x) { return std::llabs(x.warp_rows() - x.warp_cols()); };
    if (!best || skew(l) < skew(*best)) best = l;
  }
  return best;
}

std::optional<FragmentLayout> FragmentLayout::warpgroup_accumulator(int64_t rows, int64_t cols, int64_t warps, int64_t max_per_thread) {
  if (warps <= 0 || warps % 4 != 0 || rows % (16 * warps) != 0 || cols % 8 != 0 || rows * cols / (32 * warps) > max_per_thread) return std::nullopt;
  FragmentLayout l{rows, cols, warps, 1, true};
  return l;
}

}  // namespace tilelang::ir
