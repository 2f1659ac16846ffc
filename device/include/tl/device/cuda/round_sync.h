// A grid-wide barrier between the rounds of a persistent kernel's tiles, for keeping the CTAs that
// read the same operand panels in step.
//
// Why: a persistent GEMM launches one CTA per SM and hands out tiles in rounds (CTA c takes tiles
// c, c + grid, ...) in a banded raster order, so the tiles of one round share rows of A and columns
// of B, and L2 serves each k-slice of them from one DRAM read -- while the CTAs that share it read
// it at about the same time. Nothing else keeps them in step: per-tile differences add up over the
// rounds, and once the sharers drift apart by more k-slices than L2 holds, every CTA reads its
// panels from DRAM alone. On the H200 a 16384 x 16384 x 65536 FP8 GEMM on 192 x 128 tiles read 122
// GB from DRAM (2 GB of operands; the banded raster in step needs ~23) and ran DRAM-bound at 3.6
// TB/s, 0.70x cuBLASLt; 100,000^3 ran at 0.57x (docs/perf.md, stop 31). Waiting at the start of
// a round for every CTA to have finished the rounds before bounds the drift; each wait costs the
// round's spread (~1-1.4 us there), so the caller picks how many rounds apart the barriers are.
//
// The barriers of a launch share two words in device memory, zero before the launch: a count of
// arrivals over the whole launch (barrier i is passed once it reaches ctas * (i + 1)), and a count
// of CTAs done with the barriers; the last CTA done zeroes both, so every launch leaves them zero
// for the next. An arrival is a release and the polls acquire, as in a data barrier, though no data
// passes through it: with relaxed atomics the same barrier ran 1.5-3.5% slower at 16384^2 x 65536
// (docs/perf.md, stop 32 -- measured, not explained; a guess: the release holds the arrival until
// the producer's earlier memory operations are done, so the barrier waits on the CTAs' real
// progress). A wait is bounded: a CTA that waits longer than `timeout_ns` (some CTA of the grid is
// not resident -- a GPU shared with kernels that hold SMs until this one's output appears) stops
// waiting for the rest of the launch but still counts its arrivals, so nothing hangs and the words
// still end zero. The default, 10 ms, is thousands of times a real wait (a round's spread,
// microseconds): a wait cut short by it would leave the CTA unsynced for the rest of the launch, so
// it must not fire in normal runs (a 1 s timeout ran no faster, stop 32). TL_ROUND_SYNC_TIMEOUT_NS
// overrides it at compile time (DeepGEMM: DG_JIT_FLAGS=-DTL_ROUND_SYNC_TIMEOUT_NS=..., for A/B runs).
#pragma once

#include "tl/device/cuda/arch.h"

#if !defined(TL_ROUND_SYNC_TIMEOUT_NS)
#define TL_ROUND_SYNC_TIMEOUT_NS 10000000
#endif

namespace tl::cuda {

// Barrier `index` (0, 1, ... in order) of a launch of `ctas` CTAs, one thread of each CTA calling
// it. Returns once every CTA has arrived at it, or at once when `wait` is false, or after
// `timeout_ns`; returns whether this CTA should still wait at the next barriers.
TL_DEVICE bool grid_round_sync(uint32_t* words, uint32_t index, uint32_t ctas, bool wait,
                                uint64_t timeout_ns = uint64_t(TL_ROUND_SYNC_TIMEOUT_NS)) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(words) : "memory");
  if (!wait) return false;
  const uint32_t target = ctas * (index + 1);
  const uint64_t start = globaltimer_ns();
  for (;;) {
    uint32_t arrived;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(arrived) : "l"(words) : "memory");
    if (arrived >= target) return true;
    if (globaltimer_ns() - start > timeout_ns) return false;
  }
}

// After its last barrier, the same thread of every CTA calls this once; the last CTA zeroes the
// words. The release orders this CTA's arrivals before its count, the last one's acquire orders
// every CTA's arrivals before the zeroing.
TL_DEVICE void grid_round_sync_finish(uint32_t* words, uint32_t ctas) {
  uint32_t done;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(done) : "l"(words + 1) : "memory");
  if (done == ctas - 1) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(words) : "memory");
    asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(words + 1) : "memory");
  }
}

}  // namespace tl::cuda
