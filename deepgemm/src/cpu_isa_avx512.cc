// The CPU kernels built for AVX-512 F/BW/DQ/VL/CD (x86-64-v4); CMakeLists.txt sets this file's ISA flags.
// Everything, tl/device/cpu/gemm.h and tl/device/numeric.h included, lives in namespace
// dg_isa_avx512, so none of its inline functions is merged with another ISA's build of them.
#include "cpu_isa_prelude.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__)
namespace dg_isa_avx512 {
#include "tl/device/cpu/gemm.h"
#include "cpu_kernels_impl.inc"
}  // namespace dg_isa_avx512

const deepgemm::cpu::KernelTable* deepgemm::cpu::kernels_avx512() { return &dg_isa_avx512::impl::table("avx512"); }
#else
const deepgemm::cpu::KernelTable* deepgemm::cpu::kernels_avx512() { return nullptr; }
#endif
