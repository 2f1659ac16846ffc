// The grid barrier between the rounds of a persistent GEMM's tiles (tl/device/cuda/round_sync.h):
// the rule for where it goes, and the launch argument. Plain C++ (no CUDA): the host code that
// plans a launch (DeepGEMM's heuristics, TileLang's Hopper GEMM launch) and the kernels that run it
// share this one rule and this one layout.
#pragma once

#include "tl/device/numeric.h"  // fixed-width integers, also under NVRTC

namespace tl {

// The kernel argument (passed by value). With `words` set, the producer of every CTA meets the
// others before every `every`-th round after the first (a round: one unit of work per CTA; only the
// rounds in which every CTA has one).
struct RoundSync {
  uint32_t* words = nullptr;  // two words, zero; every launch leaves them zero. nullptr: no barrier
  int every = 1;
};

// Every how many rounds the CTAs meet (0: never), for a launch of `full_rounds` rounds in which
// every CTA has a tile, `k_blocks` k-blocks a tile, A and B of `operand_bytes` together and an L2 of
// `l2_bytes`. Only where A and B do not fit in L2: the CTAs drift apart over the rounds, and once
// the ones that share panels of A and B read them further apart than L2 holds, each reads them from
// DRAM alone; where L2 keeps the operands a barrier only costs its wait (~1-1.4 us on the H200:
// 4096 x 32768 x 512 FP8 +28% slower with one every round). Then every ceil(256 / k-blocks) rounds,
// about 1% of the time in waits. On the H200 (DeepGEMM's kernel): FP8 16384 x 16384 x 65536 36.7 ->
// 25.9 ms (DRAM reads 143 -> 25 GB), 32768 x 32768 x 8192 13.3 -> 12.8 ms, 4096 x 4096 x 7168
// unchanged; BF16 8192^3 -1.0%, 16384^3 -3.2%, 32768^2 x 8192 -1.8% (docs/perf.md, stops 31-32).
// The rounds after the first that are multiples of the answer get a barrier; with fewer full rounds
// than that plus one, none does (round_sync_barriers).
TL_HOST_DEVICE inline int round_sync_every(int64_t full_rounds, int64_t k_blocks, int64_t operand_bytes,
                                           int64_t l2_bytes) {
  if (full_rounds < 2 || operand_bytes <= l2_bytes) return 0;
  k_blocks = k_blocks > 1 ? k_blocks : 1;
  return int((256 + k_blocks - 1) / k_blocks);
}

// The barriers a launch of `full_rounds` such rounds has with one every `every` rounds.
TL_HOST_DEVICE inline int64_t round_sync_barriers(int64_t full_rounds, int every) {
  return every > 0 && full_rounds > 1 ? (full_rounds - 1) / every : 0;
}

}  // namespace tl
