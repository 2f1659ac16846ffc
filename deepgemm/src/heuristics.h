// Configuration choices, kept apart from the kernels (DESIGN: "heuristics kept apart from kernels").
#pragma once

#include <cstdint>
#include <vector>

#include "cpu_kernels.h"

namespace deepgemm::detail {

// The CPU scaled kernel's blocking for these sub-GEMMs: block_k a multiple of promotion_k sized for
// the L2 cache with block_n, tiles large enough to amortize packing yet numerous enough (about 2 per
// thread) to keep `threads` threads busy; threads capped by the work (about 4 MFLOP each).
cpu::Blocking choose_cpu_blocking(const std::vector<cpu::SubGemm>& gemms, int mr, int nr, int promotion_k,
                                  int threads);

// Threads for the BF16 path (tl::cpu::gemm trims further for small problems itself).
int choose_cpu_threads(int max_threads);

}  // namespace deepgemm::detail
