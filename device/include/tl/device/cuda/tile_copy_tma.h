// Bulk tensor copies (TMA) of a tile program's software-pipelined loops (tilelang's
// pipeline_loads_cuda): each stage of the ring of shared tiles has an mbarrier; thread 0 of the block
// issues the stage's boxes and arrives once, every thread waits on the stage's phase before reading.
//
// A stage's barrier completes once per use: stage s serves iterations s, s + S, s + 2S, ..., so
// iteration k waits for parity (k / S) % 2 of barrier k % S. The arrival comes after the boxes'
// expect_tx, and the phase completes when it has come and every expected byte has landed (a box
// partly outside the tensor still delivers all its bytes, the outside as zeros).
//
// With free barriers (a loop whose copies are all bulk), a second ring of kStages barriers, after
// the first, takes one arrival per warp when the warp has finished reading a stage; thread 0 waits
// for the use before last of a stage to be released before it loads into it again (parity
// (k / S + 1) % 2 for iteration k), so the block needs no barrier for the ring.
//
// Warp-specialized (sm_90a): a producer warpgroup after the block's consumer threads issues the
// boxes from one of its threads (tile_copy_tma_issue, mbarrier_arrive / mbarrier_wait_parity); only
// the consumer warps release stages, so the free barriers count those.
#pragma once

#include "tl/device/cuda/mbarrier.h"
#include "tl/device/cuda/tma.h"

namespace tl::cuda {

// One thread sets up the kStages full barriers (one arrival each) and, with kFree, the kStages free
// barriers after them (one arrival per releasing warp: `free_arrivals`); the block synchronizes after.
template <int kStages, bool kFree>
TL_DEVICE void tile_copy_barriers_init(mbarrier_t* bars, uint32_t free_arrivals) {
  if (threadIdx.x != 0) return;
#pragma unroll
  for (int s = 0; s < kStages; ++s) {
    mbarrier_init(&bars[s], 1);
    if constexpr (kFree) mbarrier_init(&bars[kStages + s], free_arrivals);
  }
  fence_barrier_init();
}

// The calling thread loads the box at `coords` (innermost first) of the tensor behind `desc` into
// `dst`, completing `bytes` on `bar`.
template <class... Coords>
TL_DEVICE void tile_copy_tma_issue(void* dst, const TmaDescriptor& desc, mbarrier_t* bar, uint32_t bytes, Coords... coords) {
  static_assert(sizeof...(Coords) >= 1 && sizeof...(Coords) <= 5, "TMA boxes have 1 to 5 dimensions");
  mbarrier_expect_tx(bar, bytes);
  const int c[] = {int(coords)...};
  if constexpr (sizeof...(Coords) == 1) tma_load_1d(dst, &desc, bar, c[0]);
  else if constexpr (sizeof...(Coords) == 2) tma_load_2d(dst, &desc, bar, c[0], c[1]);
  else if constexpr (sizeof...(Coords) == 3) tma_load_3d(dst, &desc, bar, c[0], c[1], c[2]);
  else if constexpr (sizeof...(Coords) == 4) tma_load_4d(dst, &desc, bar, c[0], c[1], c[2], c[3]);
  else tma_load_5d(dst, &desc, bar, c[0], c[1], c[2], c[3], c[4]);
}

// Thread 0 issues the box.
template <class... Coords>
TL_DEVICE void tile_copy_tma(void* dst, const TmaDescriptor& desc, mbarrier_t* bar, uint32_t bytes, Coords... coords) {
  if (threadIdx.x == 0) tile_copy_tma_issue(dst, desc, bar, bytes, coords...);
}

// Epilogue stores (tilelang's lower_kernel_cuda, persistent kernels): thread 0 stores the box of the
// shared tile at `src` to the tensor behind `desc` at `coords` (innermost first; what lies outside
// the tensor is skipped). The tile's writers fenced the async proxy and met thread 0 at a barrier.
template <class... Coords>
TL_DEVICE void tile_store_tma(const void* src, const TmaDescriptor& desc, Coords... coords) {
  static_assert(sizeof...(Coords) >= 2 && sizeof...(Coords) <= 5, "TMA store boxes have 2 to 5 dimensions here");
  if (threadIdx.x != 0) return;
  const int c[] = {int(coords)...};
  if constexpr (sizeof...(Coords) == 2) tma_store_2d(&desc, src, c[0], c[1]);
  else if constexpr (sizeof...(Coords) == 3) tma_store_3d(&desc, src, c[0], c[1], c[2]);
  else if constexpr (sizeof...(Coords) == 4) tma_store_4d(&desc, src, c[0], c[1], c[2], c[3]);
  else tma_store_5d(&desc, src, c[0], c[1], c[2], c[3], c[4]);
}
// Thread 0 closes the boxes of one tile into a group.
TL_DEVICE void tile_store_commit() {
  if (threadIdx.x == 0) tma_store_commit();
}
// Thread 0 waits until its stores have read their tiles: before a barrier after which the tile is
// written again. The stores' writes to global memory may still be in flight.
TL_DEVICE void tile_store_wait_read() {
  if (threadIdx.x == 0) tma_store_wait_read<0>();
}
// Thread 0 waits until its stores are complete: before the block exits (the tiles must live until
// read, and the kernel's writes are then all done).
TL_DEVICE void tile_store_wait_all() {
  if (threadIdx.x == 0) tma_store_wait<0>();
}

// Closes a stage: thread 0 arrives (after issuing the stage's boxes, or none past the loop's end).
TL_DEVICE void tile_copy_arrive(mbarrier_t* bar) {
  if (threadIdx.x == 0) mbarrier_arrive(bar);
}

// Every thread waits until the stage's boxes of this use have landed.
TL_DEVICE void tile_copy_wait(mbarrier_t* bar, uint32_t parity) { mbarrier_wait_parity(bar, parity); }

// Every thread calls it when done reading a stage; one arrival per warp.
TL_DEVICE void tile_copy_release(mbarrier_t* free_bar) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0) mbarrier_arrive(free_bar);
}

// Thread 0 waits until every warp has released the stage's use before last.
TL_DEVICE void tile_copy_acquire(mbarrier_t* free_bar, uint32_t parity) {
  if (threadIdx.x == 0) mbarrier_wait_parity(free_bar, parity);
}

}  // namespace tl::cuda
