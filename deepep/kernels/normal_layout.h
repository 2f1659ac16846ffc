// Where normal-mode dispatch and combine of CUDA tensors put their rows in the device windows,
// shared by the kernels (NVRTC: intranode.cuh) and the host code that checks the window's size
// (src/buffer/gpu_dispatch.cc), so the two cannot drift apart.
//
// A window's data is cut into one region per rank (region r of rank d's window: what rank r sends
// to d), so that a sender places its rows knowing only its own counts: a dispatch's rows go out
// before the ranks have exchanged theirs. A region holds arrays of `rows` rows one after another,
// each 256-byte aligned: dispatch x, scales, top-k, weights, source index; combine x, weights.
#pragma once

#include "deepep/kernels/signal_layout.h"

#if defined(__CUDACC__)
#define DEEPEP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DEEPEP_HOST_DEVICE inline
#endif

namespace deepep::kernels {

constexpr int kRegionArrays = 5;
// Ranks a combine runs over at most. Its kernels keep a few words per rank in shared memory, sized
// at launch (combine_reduce_body: 3 a rank, 6 KiB a block here); the limit dates from static arrays
// of this size, and more ranks would fit, but none past 4 has run on a GPU.
constexpr int kMaxCombineRanks = 256;

// Bytes per row of each array of a region (0: the operation has no such array).
struct RegionRows {
  long long bytes[kRegionArrays];
};

// Device addresses of an operation's arrays (a dispatch's outputs), in the order of RegionRows (0: none).
struct ArrayAddresses {
  unsigned long long at[kRegionArrays];
};

// Bytes of one region of a window of `window_bytes` shared by `ranks` ranks.
DEEPEP_HOST_DEVICE long long region_bytes(long long window_bytes, int ranks) { return window_bytes / ranks / 256 * 256; }

// Offsets of the arrays for `rows` rows into `offset` (-1 for an absent array); returns the bytes used.
DEEPEP_HOST_DEVICE long long region_offsets(const RegionRows& r, long long rows, long long* offset) {
  long long at = 0;
  for (int i = 0; i < kRegionArrays; ++i) {
    offset[i] = r.bytes[i] ? at : -1;
    if (r.bytes[i]) at = (at + rows * r.bytes[i] + 255) / 256 * 256;
  }
  return at;
}

// A dispatch or a combine moves source s's rows for rank d in chunks of this many rows, in slot
// order, each announced by a flag of its own (signal_layout.h: kNormalChunkFlags) so that the
// receiver copies (or reduces) it while later chunks still arrive. `rows`: what s sends d; `least`:
// the operation's rows per chunk (below), unless that many chunks would not fit s's share of the
// flags. A chunk ends with a fence (its rows written before its flag): a dispatch's rows (FP8 at
// hidden 7168: 7 KiB) go 32 a chunk, four a warp (8 and 16 measured 5-8% slower on the H200 x2);
// a combine's 4, a row a warp of half the block's warps (with the reduce a warp per token, 4 rows
// measured 6% faster than 8, 2 rows 4%, 16 2% slower: docs/perf.md, stop 20).
constexpr long long kDispatchChunkRows = 32;
constexpr long long kCombineChunkRows = 4;
DEEPEP_HOST_DEVICE long long chunk_rows(long long rows, int ranks, long long least) {
  const long long share = kNormalChunkWords / ranks, need = (rows + share - 1) / share;
  return need > least ? need : least;
}
DEEPEP_HOST_DEVICE long long chunk_count(long long rows, int ranks, long long least) {
  const long long per = chunk_rows(rows, ranks, least);
  return (rows + per - 1) / per;
}

// The dispatch receive's units (intranode.cuh: dispatch_receive_body), dealt round its blocks: unit
// u < own_chunks + max_chunks * (ranks - 1) is chunk `chunk` of source `source`'s rows, or nothing
// when that source has fewer chunks. This rank's own chunks come first: they wait for nothing, so
// the blocks copy them while the first chunks of the peers are still on their way, and every block
// then takes the peers' chunks in the order they are sent. (Chunk-major over all ranks, a grid that
// is a multiple of the ranks gave each block one source's chunks only: at 2 ranks half the blocks
// copied the own rows and then idled, and the other half took every chunk of the peer's.)
struct ReceiveUnit {
  int source;
  long long chunk;
};
DEEPEP_HOST_DEVICE ReceiveUnit receive_unit(long long u, long long own_chunks, int ranks, int me) {
  if (u < own_chunks) return {me, u};
  const long long v = u - own_chunks, chunk = v / (ranks - 1);
  const int p = int(v - chunk * (ranks - 1));
  return {p < me ? p : p + 1, chunk};
}

// Whether a normal-mode operation number `have` (a flag's or a consumed word's) is `want` or a later
// one. Numbers run 1 .. 2^32 - 1 and wrap past 0 (DevicePlane::normal_signals); 0 is a fresh signal
// area's word. A peer's word is at most one normal-mode operation ahead of or behind what a rank
// waits for (far fewer than 2^31 agreements apart), so `have` counts as later when it is less than
// half the number space ahead.
DEEPEP_HOST_DEVICE bool op_reached(unsigned long long have, unsigned long long want) {
  return have != 0 && ((have - want) & 0xffffffffull) < 0x80000000ull;
}

}  // namespace deepep::kernels
