// Swizzled shared-memory tiles: the 16-byte chunks of each row are permuted so that the eight row
// addresses of an ldmatrix (the same logical chunk of eight consecutive rows) fall in eight
// distinct groups of four banks, and so that the tile is one of the canonical layouts wgmma reads
// through a matrix descriptor (PTX ISA, "Shared Memory Matrix Layout": 32-, 64- and 128-byte
// swizzle, which XOR the chunk bits 4.. of the byte address with bits 7..).
//
// Rows of 32, 64 or 128 bytes are stored one after another, and chunk c of row r is stored at chunk
// c ^ ((r / kRowsPerLine) % kRowChunks), kRowsPerLine = 8 / kRowChunks rows sharing a 128-byte line:
// exactly the 32/64/128-byte swizzle of a tile whose base is 1024-byte aligned. Longer rows (a
// multiple of 128 bytes) are cut into 128-byte column panels: panel p of every row, for all kRows
// rows of the tile, is one 128-byte-swizzled block of kRows x 128 bytes, the blocks one after
// another. wgmma walks such a tile with its descriptor's strides (tile_gemm_wgmma.h).
//
// The layout is linear in the row for rows that start at a multiple of 8: the address of row r0 + r
// is the address of row r0 plus that of row r, so a sub-tile starting at such a row is addressed
// from its own origin. The code generator addresses every element of a swizzled tile through
// swizzled_offset and the tensor-core gemms their operands through it too, so all agree.
#pragma once

#include "tl/device/cuda/arch.h"

namespace tl::cuda {

// The element offset of (row, col) in a swizzled tile of kRows rows (the leading dimensions
// flattened) of kRowElems elements of kElemBytes each; rows of 32, 64 or a multiple of 128 bytes.
// row and col are an element's, so non-negative, and a tile fits shared memory: the arithmetic is
// unsigned 32-bit, where dividing by the powers of two is a shift and the remainders are masks
// (signed 64-bit arithmetic cost about twice the instructions per address).
template <int kRowElems, int kElemBytes, int kRows>
__device__ __forceinline__ int64_t swizzled_offset(int64_t row, int64_t col) {
  constexpr unsigned kChunkElems = 16 / kElemBytes;
  constexpr unsigned kRowChunks = kRowElems / kChunkElems;
  static_assert(kRowChunks == 2 || kRowChunks == 4 || kRowChunks % 8 == 0, "rows of 32, 64 or a multiple of 128 bytes");
  const unsigned r = unsigned(row), c = unsigned(col);
  const unsigned chunk = c / kChunkElems;
  if constexpr (kRowChunks <= 8) {
    constexpr unsigned kRowsPerLine = 8 / kRowChunks;
    return int64_t(r * unsigned(kRowElems) + (chunk ^ ((r / kRowsPerLine) % kRowChunks)) * kChunkElems + c % kChunkElems);
  } else {
    constexpr unsigned kPanelElems = 8 * kChunkElems;  // 128 bytes
    return int64_t((chunk / 8) * unsigned(kRows) * kPanelElems + r * kPanelElems + ((chunk % 8) ^ (r % 8)) * kChunkElems +
                   c % kChunkElems);
  }
}

}  // namespace tl::cuda
