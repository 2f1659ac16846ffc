// How a fragment tile lives in registers across the threads of a GPU block: the accumulator layout
// of the tensor cores' mma.sync.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16").
//
// The rows x cols tile is cut into warps_m x warps_n warp tiles (warp w takes row block
// w / warps_n and column block w % warps_n); a warp tile into 16 x 8 atoms, numbered row-major
// (atom = am * atoms_n + an); in an atom, lane l holds rows l/4 and l/4 + 8 at columns 2(l%4) and
// 2(l%4) + 1. A thread's register r = 4 * atom + c holds the element of its atom at row
// l/4 + 8 * (c / 2), column 2(l%4) + c % 2. device/cuda/mma_sync.h's tile_gemm_mma_regs uses the
// same numbering.
//
// The warpgroup kind is the accumulator of Hopper's wgmma (device/cuda/tile_gemm_wgmma.h): the
// rows are split evenly over the warpgroups (4 consecutive warps), a warpgroup's rows into tiles of
// 64, and warp w % 4 of a warpgroup holds rows 16 (w % 4) .. + 15 of each 64-row tile, all columns.
// It is stored as warps_m = warps, warps_n = 1: a warp's atom row am lies 64 rows (not 16) after
// the one before, and the warp's first row is that of its warpgroup plus 16 (w % 4). A row lives in
// one warp, as in the whole-rows mma layout.
//
// A row vector (row_vector) is a 1-D fragment of `rows` elements beside such a tile whose layout
// has whole rows per warp (warps_n == 1): each thread holds the rows it holds of the tile, one
// register per row ("slot" s: atom row s / 2, upper or lower 8 rows s % 2), so the four lanes that
// share a row each have a copy. Row maxima and sums of an accumulator then stay in registers
// beside it.
#pragma once

#include <optional>
#include <string>

#include "tilelang/ir/ir.h"

namespace tilelang::ir {

struct FragmentLayout {
  int64_t rows, cols;        // the tile
  int64_t warps_m, warps_n;  // the warp grid over it
  bool warpgroup = false;    // wgmma's accumulator (above) rather than mma.sync's
  bool row_vector = false;   // the rows of such a tile (above), not the tile

  int64_t warp_rows() const { return rows / warps_m; }
  int64_t warp_cols() const { return cols / warps_n; }
  int64_t atoms_m() const { return warp_rows() / 16; }
  int64_t atoms_n() const { return warp_cols() / 8; }
  int64_t per_thread() const { return row_vector ? 2 * atoms_m() : atoms_m() * atoms_n() * 4; }

  // The tile coordinates register `r` of thread `tx` holds (int32 expressions); for a row vector,
  // the row of slot `r`.
  Expr row(const Expr& tx, const Expr& r) const;
  Expr col(const Expr& tx, const Expr& r) const;
  // Of a tile's layout: the row slot (the register of the row vector) of tile register `r`.
  Expr slot(const Expr& r) const;
  // The row vector of this tile layout (whole rows per warp), and whether two layouts, tile or row
  // vector, put every row in the same threads.
  FragmentLayout rows_vector() const;
  bool same_rows(const FragmentLayout& o) const {
    return rows == o.rows && warps_m == o.warps_m && warps_n == 1 && o.warps_n == 1 && warpgroup == o.warpgroup;
  }
  std::string to_string() const;  // "mma 128x128 over 2x2 warps", "wgmma 128x128 over 1 warpgroup"
  bool operator==(const FragmentLayout&) const = default;

  // The layout of a rows x cols accumulator over `warps` warps: warp tiles as square as the
  // tile allows (each loads the fewest operand bytes per multiply), or whole rows per warp when
  // `whole_rows` (a row then lives in one warp: its reductions are shuffles within the warp); in
  // whole 16 x 16 steps so that operands load with ldmatrix.x4. None when the tile does not split
  // so, or would take more than `max_per_thread` registers of each thread.
  static std::optional<FragmentLayout> accumulator(int64_t rows, int64_t cols, int64_t warps, bool whole_rows = false, int64_t max_per_thread = 128);
  // The warpgroup layout of a rows x cols accumulator over `warps` warps (a multiple of 4, each
  // warpgroup's rows a multiple of 64); none otherwise or above `max_per_thread` registers.
  static std::optional<FragmentLayout> warpgroup_accumulator(int64_t rows, int64_t cols, int64_t warps, int64_t max_per_thread = 128);
};

}  // namespace tilelang::ir
