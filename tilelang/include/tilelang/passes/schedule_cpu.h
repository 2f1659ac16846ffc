#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Maps whole-tensor code (outside T.Kernel) onto the host's cores and vector units, from the
// hardware description (rt::cpu_info): the outermost loop whose iterations are independent and
// carry enough work runs on all cores; innermost elementwise loops over contiguous memory are
// vectorized; gemms get cache block sizes from the cache hierarchy. Loops that are not provably
// independent stay serial.
ir::PrimFunc schedule_cpu(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
