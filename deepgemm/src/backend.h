// The backends behind the one dispatch point (dispatch.cc): each runs a validated Problem and
// returns the configuration it used.
#pragma once

#include "deepgemm/config.h"
#include "problem.h"

namespace deepgemm::detail {

// Runs `p` on the device of its tensors (the CPU path or the GPU kernels) and records the
// configuration (last_config(), DG_PRINT_CONFIGS). The only place that chooses a backend.
void run(const Problem& p);

// The threaded CPU path (cpu_gemm.cc).
GemmConfig run_cpu(const Problem& p);
// The CUDA kernels (gpu.cc): the Hopper GEMM kernel, JIT-compiled per configuration.
GemmConfig run_gpu(const Problem& p);

// last_config() and DG_PRINT_CONFIGS (config.cc).
void record_config(const GemmConfig& config);

}  // namespace deepgemm::detail
