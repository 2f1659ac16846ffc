#include "rt/cpu_info.h"

#include <sched.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <string>

#include "rt/env.h"
#include "rt/error.h"
#include "rt/file.h"

namespace rt {
namespace {

// Typical sizes of current server cores, used when neither sysfs nor sysconf tells.
constexpr int64_t kDefaultL1d = 32 << 10, kDefaultL2 = 1 << 20, kDefaultL3 = 32 << 20;

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\n") - begin + 1);
}

// "48K", "2048K", "32M" as sysfs writes cache sizes; 0 when unparsable.
int64_t parse_size(const std::string& text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc()) return 0;
  const std::string unit = trim(std::string(end, text.data() + text.size()));
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return unit.empty() ? value : 0;
}

// Data/unified cache size of `level` from /sys/devices/system/cpu/cpu0/cache/index*, 0 when missing.
int64_t sysfs_cache_bytes(int level) {
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::optional<std::string> lvl = read_file(dir + "level");
    if (!lvl) break;
    const std::string type = trim(read_file(dir + "type").value_or(""));
    if (trim(*lvl) == std::to_string(level) && type != "Instruction")
      return parse_size(trim(read_file(dir + "size").value_or("")));
  }
  return 0;
}

int64_t cache_bytes(int level, int sysconf_name, int64_t fallback) {
  if (const int64_t bytes = sysfs_cache_bytes(level); bytes > 0) return bytes;
  if (const long bytes = sysconf(sysconf_name); bytes > 0) return bytes;
  return fallback;
}

// The value of the first /proc/cpuinfo line whose key is `key`, or "".
std::string proc_cpuinfo(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon != std::string::npos && trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return "";
}

}  // namespace

CpuInfo probe_cpu_info() {
  CpuInfo info;
  // TL_NUM_THREADS: how many threads the CPU backend uses (default: the cores this process may run on).
  const int64_t cores = env_int("TL_NUM_THREADS", usable_cores());
  RT_USER_CHECK(cores >= 1 && cores <= 65536, "environment variable TL_NUM_THREADS=", cores,
                " must be between 1 and 65536");
  info.cores = static_cast<int>(cores);
  // TL_CPU_L1D_BYTES, TL_CPU_L2_BYTES, TL_CPU_L3_BYTES: pretend these cache sizes (the compiler's
  // tiling follows them; golden tests pin them so their output does not depend on the host).
  info.l1d_bytes = env_int("TL_CPU_L1D_BYTES", cache_bytes(1, _SC_LEVEL1_DCACHE_SIZE, kDefaultL1d));
  info.l2_bytes = env_int("TL_CPU_L2_BYTES", cache_bytes(2, _SC_LEVEL2_CACHE_SIZE, kDefaultL2));
  info.l3_bytes = env_int("TL_CPU_L3_BYTES", cache_bytes(3, _SC_LEVEL3_CACHE_SIZE, kDefaultL3));
  RT_USER_CHECK(info.l1d_bytes > 0 && info.l2_bytes > 0 && info.l3_bytes >= 0, "TL_CPU_*_BYTES must be positive");
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  info.has_fma = __builtin_cpu_supports("fma");
  info.has_avx512f = __builtin_cpu_supports("avx512f");
  info.has_avx2 = __builtin_cpu_supports("avx2");
  info.has_f16c = __builtin_cpu_supports("f16c");
#elif defined(__aarch64__)
  info.has_fma = true;  // part of AArch64 Advanced SIMD
#endif
  info.simd_bits = info.has_avx512f ? 512 : info.has_avx2 ? 256 : 128;
  // TL_CPU_SIMD_BITS (128, 256 or 512): pretend this vector width in the compiler's CPU schedule
  // (the gemm micro-tile it blocks for; the code itself still uses the ISA it was built for, whose
  // kernels round any blocking to their own tile). Golden tests pin it with the cache sizes.
  const int64_t simd = env_int("TL_CPU_SIMD_BITS", info.simd_bits);
  RT_USER_CHECK(simd == 128 || simd == 256 || simd == 512, "environment variable TL_CPU_SIMD_BITS=", simd,
                " must be 128, 256 or 512");
  info.simd_bits = static_cast<int>(simd);
  info.model = proc_cpuinfo("model name");
  if (info.model.empty()) info.model = "unknown";
  info.features = proc_cpuinfo("flags");                                // x86
  if (info.features.empty()) info.features = proc_cpuinfo("Features");  // AArch64
  return info;
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = probe_cpu_info();
  return info;
}

}  // namespace rt
