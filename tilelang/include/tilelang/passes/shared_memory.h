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

}  // namespace tilelang::passes
