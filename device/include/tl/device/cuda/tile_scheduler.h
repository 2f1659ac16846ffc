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

}  // namespace tl::cuda
