#pragma once

#include "tilelang/passes/pass.h"

namespace tilelang::passes {

// Prepares T.Kernel launches for the CPU, where one core runs a whole block (the code generator
// spreads the blocks over the cores). Code written per thread (it uses the thread index, or scalars
// such code wrote) runs for each thread index in turn, in loops cut at the barriers; thread-local
// buffers that outlive such a loop get one copy per thread; barriers go away. A barrier under a
// condition or loop that depends on the thread index is a user error, as on a GPU.
ir::PrimFunc lower_kernel_cpu(const ir::PrimFunc& func, const PassOptions& options);

}  // namespace tilelang::passes
