// The CUDA backend's program: generated CUDA C++ compiled by NVRTC (disk-cached), loaded as a
// module, and its launch plan replayed on the device.
#pragma once

#include "backend/program.h"

namespace tilelang::backend {

std::unique_ptr<Program> build_cuda_program(const ir::PrimFunc& lowered, const Target& target);

// The CUDA source of a lowered kernel and its PTX for the target (for --emit=cuda|ptx and for CI
// compile checks); compiling needs NVRTC, not a GPU.
std::string cuda_source(const ir::PrimFunc& lowered, const Target& target);
std::string cuda_ptx(const ir::PrimFunc& lowered, const Target& target);

}  // namespace tilelang::backend
