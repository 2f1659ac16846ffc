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
// Each barrier of a launch has its own slot of two words (arrivals, departures) in device memory
// that is zero before the launch; the last CTA to leave a slot zeroes it, so every launch leaves
// them zero for the next. The barrier orders time only (no data passes through it), so relaxed
// atomics do. A wait is bounded: a CTA that waits longer than `timeout_ns` (some CTA of the grid
// is not resident -- a GPU shared with kernels that hold SMs until this one's output appears) stops
// waiting for the rest of the launch but still counts itself in and out of every slot, so nothing
// hangs and the slots still end zero. The default, 10 ms, is thousands of times a real wait (a
// round's spread, microseconds): a wait cut short by it would leave the CTA unsynced for the rest
// of the launch, so it must not fire in normal runs. TL_ROUND_SYNC_TIMEOUT_NS overrides it at
// compile time (DeepGEMM: DG_JIT_FLAGS=-DTL_ROUND_SYNC_TIMEOUT_NS=..., for A/B runs).
#pragma once

#include "tl/device/cuda/arch.h"

#if !defined(TL_ROUND_SYNC_TIMEOUT_NS)
#define TL_ROUND_SYNC_TIMEOUT_NS 10000000
#endif

namespace tl::cuda {

// Every CTA of the grid calls this (one thread each) once per slot, slots in the same order.
// Returns once all `ctas` CTAs have arrived at `slot`, or at once when `wait` is false, or after
// `timeout_ns`; returns whether this CTA should still wait at the next slots.
TL_DEVICE bool grid_round_sync(uint32_t* slot, uint32_t ctas, bool wait,
                                uint64_t timeout_ns = uint64_t(TL_ROUND_SYNC_TIMEOUT_NS)) {
  uint32_t* arrivals = slot;
  uint32_t* departures = slot + 1;
  atomicAdd(arrivals, 1u);
  if (wait) {
    const uint64_t start = globaltimer_ns();
    for (;;) {
      uint32_t now;
      asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(arrivals) : "memory");
      if (now >= ctas) break;
      if (globaltimer_ns() - start > timeout_ns) {
        wait = false;
        break;
      }
    }
  }
  // The last to leave, when nobody reads the arrivals any more, zeroes the slot.
  if (atomicAdd(departures, 1u) == ctas - 1) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(arrivals) : "memory");
    asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(departures) : "memory");
  }
  return wait;
}

}  // namespace tl::cuda
