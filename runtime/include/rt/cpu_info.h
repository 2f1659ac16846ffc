// What the CPU backend tunes for: core count, cache sizes, vector width. Read once per process.
#pragma once

#include <cstdint>
#include <string>

namespace rt {

struct CpuInfo {
  int cores = 1;  // usable by this process (affinity mask), or TL_NUM_THREADS
  int64_t l1d_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t l3_bytes = 0;
  int simd_bits = 128;  // widest vector: 512 (AVX-512F), 256 (AVX2), 128; TL_CPU_SIMD_BITS overrides
  bool has_fma = false;
  bool has_avx512f = false;
  bool has_avx2 = false;
  bool has_f16c = false;
  std::string model;  // "model name" of /proc/cpuinfo, or "unknown"
  // The kernel's feature list ("flags" or "Features" of /proc/cpuinfo): what -march=native builds
  // depend on, so caches of such builds key on it. Empty when unknown.
  std::string features;
};

// Probed once on first use.
const CpuInfo& cpu_info();
// Probes now (reads the environment and the system again); cpu_info() caches its first result.
CpuInfo probe_cpu_info();

}  // namespace rt
