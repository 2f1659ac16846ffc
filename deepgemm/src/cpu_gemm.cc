// The CPU path: turns a validated Problem into sub-GEMMs (one per group, or per run of rows of one
// group in the contiguous layout), picks the kernels for this CPU's vector ISA and runs them.
#include <cstring>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "backend.h"
#include "cpu_kernels.h"
#include "heuristics.h"
#include "rt/env.h"
#include "rt/error.h"

namespace deepgemm::detail {
namespace {

bool cpu_runs(const char* isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (std::strcmp(isa, "avx512") == 0)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("popcnt");
  if (std::strcmp(isa, "avx2") == 0)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
           __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
#endif
  return std::strcmp(isa, "generic") == 0;
}

// DG_CPU_ISA: avx512, avx2 or generic; unset: the widest this CPU runs.
const cpu::KernelTable& select_kernels() {
  struct Entry {
    const char* name;
    const cpu::KernelTable* table;
  };
  const Entry entries[] = {{"avx512", cpu::kernels_avx512()}, {"avx2", cpu::kernels_avx2()},
                           {"generic", cpu::kernels_generic()}};
  const std::string want = rt::env_string("DG_CPU_ISA", "");
  std::string usable;
  for (const Entry& e : entries) {
    const bool ok = e.table && cpu_runs(e.name);
    if (ok) usable += (usable.empty() ? "" : ", ") + std::string(e.name);
    if (want.empty() ? ok : want == e.name) {
      RT_USER_CHECK(ok, "DG_CPU_ISA=", want, ": ",
                    e.table ? "this CPU does not support it" : "this build has no kernels for it",
                    "; usable here: ", usable);
      return *e.table;
    }
  }
  RT_USER_CHECK(want.empty(), "DG_CPU_ISA=", want, " is not an ISA of deepgemm's CPU kernels; use avx512, avx2 or generic");
  return *cpu::kernels_generic();
}

int max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Byte pointer of element offset `e` (a whole byte for float4_e2m1: even offsets only).
const void* at_offset(const rt::Tensor& t, int64_t e) {
  const int64_t bits = rt::bits(t.dtype());
  RT_ICHECK((e * bits) % 8 == 0, "element offset ", e, " of a ", rt::name(t.dtype()), " tensor is not byte-aligned");
  return static_cast<const char*>(t.data()) + e * bits / 8;
}

cpu::Matrix matrix(const MatrixArg& v, int64_t g, int64_t r0, int64_t c0) {
  cpu::Matrix m;
  m.data = at_offset(v.tensor, g * v.s_g + r0 * v.s_r + c0 * v.s_c);
  m.dtype = v.tensor.dtype();
  m.s_r = v.s_r;
  m.s_c = v.s_c;
  return m;
}

cpu::ScaleMatrix scales(const ScaleArg& v, int64_t g, int64_t r0, int64_t c0) {
  cpu::ScaleMatrix s;
  if (!v.present()) return s;
  s.data = at_offset(v.tensor, g * v.s_g + r0 * v.s_r + c0 * v.s_c);
  s.dtype = v.tensor.dtype();
  s.s_r = v.s_r;
  s.s_c = v.s_c;
  s.gran_r = v.gran_r;
  s.gran_c = v.gran_c;
  return s;
}

cpu::OutMatrix output(const MatrixArg& v, int64_t g, int64_t r0) {
  cpu::OutMatrix o;
  o.data = const_cast<void*>(at_offset(v.tensor, g * v.s_g + r0 * v.s_r));
  o.dtype = v.tensor.dtype();
  o.s_r = v.s_r;
  o.s_c = v.s_c;
  return o;
}

// Group g's sub-GEMM over rows [r0, r0 + m) of A/D (and of A's scales), K from k0 on for k.
cpu::SubGemm sub_gemm(const Problem& p, int64_t group_a, int64_t group_b, int64_t group_d, int64_t r0, int64_t m,
                      int64_t k0, int64_t k) {
  cpu::SubGemm s;
  s.m = m;
  s.n = p.n;
  s.k = k;
  s.a = matrix(p.a, group_a, r0, k0);
  s.b = matrix(p.b, group_b, 0, k0);
  if (p.kind != Kind::Bf16) {
    s.sa = scales(p.sfa, group_a, r0, k0 / p.sfa.gran_c);
    s.sb = scales(p.sfb, group_b, 0, k0 / p.sfb.gran_c);
  }
  s.d = output(p.d, group_d, r0);
  if (p.c.present()) s.c = matrix(p.c, group_d, r0, 0);
  return s;
}

// Rows [r0, r1) of D (group 0) set to zero: the padding rows of the contiguous layout.
void zero_rows(const Problem& p, int64_t r0, int64_t r1) {
  const int64_t esize = rt::bits(p.d.tensor.dtype()) / 8;
  for (int64_t r = r0; r < r1; ++r) std::memset(const_cast<void*>(at_offset(p.d.tensor, r * p.d.s_r)), 0, size_t(p.n * esize));
}

std::vector<cpu::SubGemm> build(const Problem& p) {
  std::vector<cpu::SubGemm> gemms;
  switch (p.grouping) {
    case Grouping::None:
      gemms.push_back(sub_gemm(p, 0, 0, 0, 0, p.m, 0, p.k));
      break;
    case Grouping::MContiguous: {
      const int32_t* idx = static_cast<const int32_t*>(p.m_indices.data());
      for (int64_t r = 0; r < p.m;) {
        int64_t e = r + 1;
        while (e < p.m && idx[e] == idx[r]) ++e;
        if (idx[r] < 0)
          zero_rows(p, r, e);
        else
          gemms.push_back(sub_gemm(p, 0, idx[r], 0, r, e - r, 0, p.k));
        r = e;
      }
      break;
    }
    case Grouping::MMasked: {
      const int32_t* mm = static_cast<const int32_t*>(p.masked_m.data());
      for (int64_t g = 0; g < p.num_groups; ++g)
        if (mm[g] > 0) gemms.push_back(sub_gemm(p, g, g, g, 0, mm[g], 0, p.k));
      break;
    }
    case Grouping::KContiguous: {
      int64_t k0 = 0;
      for (int64_t g = 0; g < p.num_groups; ++g) {
        gemms.push_back(sub_gemm(p, 0, 0, g, 0, p.m, k0, p.ks[size_t(g)]));
        k0 += p.ks[size_t(g)];
      }
      break;
    }
  }
  return gemms;
}

}  // namespace

GemmConfig run_cpu(const Problem& p) {
  const cpu::KernelTable& kernels = select_kernels();
  const std::vector<cpu::SubGemm> gemms = build(p);
  GemmConfig cfg;
  cfg.function = p.function;
  cfg.backend = "cpu";
  cfg.m = p.m;
  cfg.n = p.n;
  cfg.k = p.k;
  cfg.num_groups = p.num_groups;
  if (p.kind == Kind::Bf16) {
    cfg.kernel = std::string("cpu.bf16_gemm.") + kernels.isa;
    cfg.num_threads = choose_cpu_threads(max_threads());
    cfg.num_tasks = int(gemms.size());
    kernels.bf16_gemm(gemms.data(), int64_t(gemms.size()), cfg.num_threads);
    return cfg;
  }
  const cpu::Blocking blk = choose_cpu_blocking(gemms, kernels.mr, kernels.nr, p.promotion_k(), max_threads());
  cfg.kernel = std::string("cpu.scaled_gemm.") + kernels.isa;
  cfg.block_m = int(blk.block_m);
  cfg.block_n = int(blk.block_n);
  cfg.block_k = int(blk.block_k);
  cfg.promotion_k = blk.promotion_k;
  cfg.num_threads = blk.threads;
  cfg.num_tasks = int(kernels.scaled_gemm(gemms.data(), int64_t(gemms.size()), blk));
  return cfg;
}

}  // namespace deepgemm::detail
