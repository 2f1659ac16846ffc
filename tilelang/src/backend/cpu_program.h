// The CPU backend's program: generated C++ compiled by the host compiler into a shared object.
#pragma once

#include "backend/program.h"

namespace tilelang::backend {

std::unique_ptr<Program> build_cpu_program(const ir::PrimFunc& lowered);

}  // namespace tilelang::backend
