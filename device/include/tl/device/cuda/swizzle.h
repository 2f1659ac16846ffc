// Swizzled shared-memory tiles: the 16-byte chunks of each row are permuted so that the eight row
// addresses of an ldmatrix (the same logical chunk of eight consecutive rows) fall in eight
// distinct groups of four banks. Rows are kRowChunks chunks long (a power of two, at least 2);
// a 128-byte line holds kRowsPerLine = max(1, 8 / kRowChunks) rows, and chunk c of row r is
// stored at chunk c ^ ((r / kRowsPerLine) % min(8, kRowChunks)).
//
// The code generator addresses every element of a swizzled tile through swizzled_offset and the
// tensor-core gemm its ldmatrix rows through swizzle_chunk, so both agree on the layout.
#pragma once

#include "tl/device/cuda/arch.h"

namespace tl::cuda {

template <int kRowChunks>
__device__ __forceinline__ int swizzle_chunk(int row, int chunk) {
  static_assert(kRowChunks >= 2 && (kRowChunks & (kRowChunks - 1)) == 0, "rows of a power of two of 16-byte chunks");
  constexpr int kRowsPerLine = kRowChunks >= 8 ? 1 : 8 / kRowChunks;
  constexpr int kXor = kRowChunks >= 8 ? 8 : kRowChunks;
  return chunk ^ ((row / kRowsPerLine) % kXor);
}

// The element offset of (row, col) in a swizzled tile of kRowElems elements of kElemBytes per row.
template <int kRowElems, int kElemBytes>
__device__ __forceinline__ int64_t swizzled_offset(int64_t row, int64_t col) {
  constexpr int kChunkElems = 16 / kElemBytes;
  const int chunk = swizzle_chunk<kRowElems / kChunkElems>(int(row), int(col / kChunkElems));
  return row * kRowElems + chunk * kChunkElems + col % kChunkElems;
}

}  // namespace tl::cuda
