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
// The barrier's two words (arrivals, generation) live in device memory that is zero when first
// used; every barrier leaves the arrivals at zero, so the next launch finds them so. The waiting
// relies on all CTAs of the grid being resident together, as split-K's pieces do (one CTA per SM,
// grid <= SMs; a GPU shared with other kernels gets there as they finish).
#pragma once

#include "tl/device/cuda/arch.h"

namespace tl::cuda {

// Every CTA of the grid calls this (one thread each) the same number of times; it returns once
// all `ctas` CTAs have called it for this barrier. words[0]: arrivals, words[1]: generation.
TL_DEVICE void grid_round_sync(uint32_t* words, uint32_t ctas) {
  uint32_t* arrivals = words;
  uint32_t* generation = words + 1;
  uint32_t gen;
  // Read before arriving (the generation cannot move before this CTA's arrival); the acquire keeps
  // the arrival after it.
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(generation) : "memory");
  uint32_t before;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(arrivals) : "memory");
  if (before == ctas - 1) {
    // The last to arrive resets the count for the next barrier, then lets everyone go (the release
    // orders the reset before the new generation that the others wait for).
    asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(arrivals) : "memory");
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(generation), "r"(gen + 1u) : "memory");
    return;
  }
#if defined(TL_CUDA_WAIT_TIMEOUT_NS)
  const uint64_t start = globaltimer_ns();
#endif
  for (;;) {
    uint32_t now;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(generation) : "memory");
    if (now != gen) break;
#if defined(TL_CUDA_WAIT_TIMEOUT_NS)
    if (globaltimer_ns() - start > uint64_t(TL_CUDA_WAIT_TIMEOUT_NS)) __trap();
#endif
  }
}

}  // namespace tl::cuda
