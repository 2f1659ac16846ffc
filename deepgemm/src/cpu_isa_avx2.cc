// The CPU kernels built for AVX2 + FMA + F16C (x86-64-v3); CMakeLists.txt sets this file's ISA flags.
// Everything, tl/device/cpu/gemm.h and tl/device/numeric.h included, lives in namespace
// dg_isa_avx2, so none of its inline functions is merged with another ISA's build of them.
#include "cpu_isa_prelude.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
namespace dg_isa_avx2 {
#include "tl/device/cpu/gemm.h"
#include "cpu_kernels_impl.inc"
}  // namespace dg_isa_avx2

const deepgemm::cpu::KernelTable* deepgemm::cpu::kernels_avx2() { return &dg_isa_avx2::impl::table("avx2"); }
#else
const deepgemm::cpu::KernelTable* deepgemm::cpu::kernels_avx2() { return nullptr; }
#endif
