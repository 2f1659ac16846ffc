// The CPU kernels built for the baseline ISA of the build (SSE2 on x86-64; whatever the compiler
// targets elsewhere): the fallback that runs everywhere.
// Everything, tl/device/cpu/gemm.h and tl/device/numeric.h included, lives in namespace
// dg_isa_generic, so none of its inline functions is merged with another ISA's build of them.
#include "cpu_isa_prelude.h"

namespace dg_isa_generic {
#include "tl/device/cpu/gemm.h"
#include "cpu_kernels_impl.inc"
}  // namespace dg_isa_generic

const deepgemm::cpu::KernelTable* deepgemm::cpu::kernels_generic() { return &dg_isa_generic::impl::table("generic"); }
