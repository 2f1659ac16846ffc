// Output-tile order for persistent kernels: grouped ("swizzled") rasterization.
//
// Why: a persistent grid of one CTA per SM walks the output tiles t = blockIdx.x, blockIdx.x +
// gridDim.x, ...; at any moment the ~132 tiles in flight share rows of A and columns of B through
// L2 only if they are close together. Walking bands of `group` tile-columns (n fastest inside the
// band, then m, then the next band) keeps a wave inside a (132/group) x group block of tiles, so A
// and B panels are read from DRAM about once per band instead of once per tile. group ~ sqrt(SMs *
// BLOCK_M / BLOCK_N) balances the two (8 for 128x256 tiles on 132 SMs); group >= the number of
// tile-columns gives plain row-major order. Producer and consumers of a CTA call the same function
// and so see the same sequence.
#pragma once

#include "tl/device/cuda/arch.h"

namespace tl::cuda {

struct GroupedTileScheduler {
  int num_m_blocks;
  int num_n_blocks;
  int group;  // tile-columns per band, >= 1

  TL_HOST_DEVICE static GroupedTileScheduler make(int m, int n, int block_m, int block_n, int group) {
    GroupedTileScheduler s;
    s.num_m_blocks = (m + block_m - 1) / block_m;
    s.num_n_blocks = (n + block_n - 1) / block_n;
    s.group = group < 1 ? 1 : (group > s.num_n_blocks ? (s.num_n_blocks > 0 ? s.num_n_blocks : 1) : group);
    return s;
  }
  TL_HOST_DEVICE int num_tiles() const { return num_m_blocks * num_n_blocks; }

  // Tile t in [0, num_tiles()) -> (m block, n block).
  TL_HOST_DEVICE void get(int t, int& m_block, int& n_block) const {
    const int per_band = num_m_blocks * group;
    const int band = t / per_band;
    const int first_n = band * group;
    const int rest = num_n_blocks - first_n;
    const int width = rest < group ? rest : group;  // the last band may be narrower
    const int in_band = t - band * per_band;
    m_block = in_band / width;
    n_block = first_n + (in_band - m_block * width);
  }
};

// The blocks of a T.Kernel that a persistent grid runs (tilelang's pipeline_loads_cuda): block c of
// the launch runs the kernel's blocks c, c + gridDim.x, ... in order; block t of a grid_x x grid_y x
// grid_z kernel is (x, y, z) with x fastest, or in the grouped order above within each z-plane when
// the kernel asked for T.use_swizzle (panel > 0), as a launch of the whole grid would run them. The
// producer and the consumers of a block compute the same sequence.
struct PersistentBlocks {
  int grid_x, grid_y, grid_z;
  GroupedTileScheduler raster;  // within a z-plane; a band as wide as the grid is plain row order

  // panel: T.use_swizzle's panel size, 0 for row order.
  TL_HOST_DEVICE static PersistentBlocks make(int grid_x, int grid_y, int grid_z, int panel) {
    return PersistentBlocks{grid_x, grid_y, grid_z, GroupedTileScheduler::make(grid_y, grid_x, 1, 1, panel > 0 ? panel : grid_x)};
  }
  // The launch checked that the kernel's blocks fit an int.
  TL_DEVICE int rounds() const {
    const int total = grid_x * grid_y * grid_z, first = int(blockIdx.x), stride = int(gridDim.x);
    return first < total ? (total - first + stride - 1) / stride : 0;
  }
  // Coordinate `dim` (0: x, 1: y, 2: z) of this block's round `r`.
  TL_DEVICE int block(int r, int dim) const {
    const int t = int(blockIdx.x) + r * int(gridDim.x), plane = grid_x * grid_y;
    const int z = t / plane;
    if (dim == 2) return z;
    int x, y;
    raster.get(t - z * plane, y, x);
    return dim == 0 ? x : y;
  }
};

}  // namespace tl::cuda
