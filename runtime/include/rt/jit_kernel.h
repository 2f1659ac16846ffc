// A kernel compiled from generated source at run time and loaded once per process: NVRTC (with its
// disk cache, rt/nvrtc.h) for the device's architecture, then an in-process table keyed by device,
// source and options, so repeated calls cost a map lookup. Shared by every library that JITs
// kernels (deepgemm's GEMMs, deepep's data movement).
#pragma once

#include <string>
#include <vector>

#include "rt/cuda_module.h"
#include "rt/embedded_file.h"

namespace rt {

// The extern "C" kernel `name` of `source`, compiled for CUDA device `device` with `headers` as
// in-memory includes and `extra_flags` as additional NVRTC options.
CudaKernel jit_kernel(const std::string& source, const std::string& name, int device,
                      const std::vector<EmbeddedFile>& headers, const std::vector<std::string>& extra_flags = {});

}  // namespace rt
