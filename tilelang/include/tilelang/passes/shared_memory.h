// Shared memory as the CUDA passes count it: what a tile takes, and what one block may use.
#pragma once

#include <cstdint>

#include "tilelang/ir/ir.h"

namespace tilelang::passes {

// Bytes of shared memory a tile takes (the code generator aligns tiles to at most 1 KiB); 0 for a
// tile whose shape is not known at compile time.
int64_t shared_tile_bytes(const ir::Buffer& b);

// Shared memory one block may use: 227 KiB on sm_90, 163 KiB on sm_80, 99 KiB on sm_86 / sm_89.
int64_t shared_memory_per_block(int sm);
// The blocks an SM runs of a warp-specialized kernel (sm_90a) with `consumers` threads beside its
// producer warpgroup and `smem_bytes` of shared memory: two where one consumer warpgroup's blocks
// fit twice in the SM's 228 KB (1 KB reserved a block), else one (the registers decide the rest).
int64_t specialized_blocks_per_sm(int64_t consumers, int64_t smem_bytes);

}  // namespace tilelang::passes
