#include "rt/cuda_device.h"

#include <map>
#include <memory>
#include <mutex>

namespace rt {
namespace {

struct DeviceCount {
  int count = 0;
  std::string why_none;
};

DeviceCount count_devices() {
  if (!cuda_driver_available()) return {0, cuda_driver_error()};
  const CudaDriver& d = cuda_driver();
  int n = 0;
  if (const CuResult rc = d.cuDeviceGetCount(&n); rc != cu::kSuccess)
    return {0, str("cuDeviceGetCount failed with ", cuda_error_text(rc))};
  if (n <= 0) return {0, "the CUDA driver reports no devices (check CUDA_VISIBLE_DEVICES)"};
  return {n, ""};
}

const DeviceCount& device_count() {
  static const DeviceCount count = [] {
    try {
      return count_devices();
    } catch (const std::exception& e) {
      return DeviceCount{0, e.what()};
    }
  }();
  return count;
}

void check_ordinal(int ordinal) {
  const CudaDriver& driver = cuda_driver();  // the user error of a missing driver comes first
  (void)driver;
  const DeviceCount& count = device_count();
  RT_USER_CHECK(count.count > 0, "cuda:", ordinal, " is not available: ", count.why_none);
  RT_USER_CHECK(ordinal >= 0 && ordinal < count.count, "cuda:", ordinal, " does not exist: there ",
                count.count == 1 ? "is 1 CUDA device" : str("are ", count.count, " CUDA devices"),
                " (check CUDA_VISIBLE_DEVICES)");
}

std::mutex& state_mutex() {
  static std::mutex m;
  return m;
}

int attribute(const CudaDriver& d, CuDevice dev, int attr, const char* what, bool optional = false) {
  int value = 0;
  const CuResult rc = d.cuDeviceGetAttribute(&value, attr, dev);
  if (rc != cu::kSuccess) {
    if (optional) return 0;  // e.g. clock rates, which newer drivers may stop reporting
    throw_cuda_error(rc, "cuDeviceGetAttribute", str(what, " of cuda:", dev), __FILE__, __LINE__);
  }
  return value;
}

CudaDeviceInfo query(int ordinal) {
  const CudaDriver& d = cuda_driver();
  CuDevice dev = 0;
  RT_CU_CHECK(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet", "cuda:", ordinal);
  CudaDeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  RT_CU_CHECK(d.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName", "cuda:", ordinal);
  info.name = name;
  size_t total = 0;
  RT_CU_CHECK(d.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem", "cuda:", ordinal);
  info.global_mem_bytes = static_cast<int64_t>(total);
  info.sm_major = attribute(d, dev, cu::kDevAttrComputeCapabilityMajor, "compute capability major");
  info.sm_minor = attribute(d, dev, cu::kDevAttrComputeCapabilityMinor, "compute capability minor");
  info.sm_count = attribute(d, dev, cu::kDevAttrMultiprocessorCount, "multiprocessor count");
  info.smem_per_block_optin = attribute(d, dev, cu::kDevAttrMaxSharedMemoryPerBlockOptin, "opt-in shared memory");
  info.smem_per_sm = attribute(d, dev, cu::kDevAttrMaxSharedMemoryPerMultiprocessor, "shared memory per SM");
  info.l2_bytes = attribute(d, dev, cu::kDevAttrL2CacheSize, "L2 size");
  info.max_threads_per_block = attribute(d, dev, cu::kDevAttrMaxThreadsPerBlock, "max threads per block");
  info.clock_khz = attribute(d, dev, cu::kDevAttrClockRate, "clock rate", true);
  info.mem_clock_khz = attribute(d, dev, cu::kDevAttrMemoryClockRate, "memory clock rate", true);
  info.mem_bus_width = attribute(d, dev, cu::kDevAttrGlobalMemoryBusWidth, "memory bus width", true);
  info.cluster_launch = attribute(d, dev, cu::kDevAttrClusterLaunch, "cluster launch", true) != 0;
  return info;
}

}  // namespace

std::string cuda_arch_name(int sm_major, int sm_minor) {
  return str("sm_", sm_major, sm_minor, sm_major == 9 && sm_minor == 0 ? "a" : "");
}

std::string CudaDeviceInfo::arch_name() const { return cuda_arch_name(sm_major, sm_minor); }

int cuda_device_count() { return device_count().count; }

std::string cuda_unavailable_reason() { return device_count().why_none; }

const CudaDeviceInfo& cuda_device(int ordinal) {
  check_ordinal(ordinal);
  static std::map<int, std::unique_ptr<CudaDeviceInfo>> infos;  // stable addresses
  std::lock_guard lock(state_mutex());
  auto& slot = infos[ordinal];
  if (!slot) slot = std::make_unique<CudaDeviceInfo>(query(ordinal));
  return *slot;
}

CuContext cuda_context(int ordinal) {
  const CudaDriver& d = cuda_driver();
  // Fast path: this thread already made this device's context current (the usual case). Checked
  // against the driver, since other code (PyTorch, say) may have switched this thread's context.
  thread_local int cached_ordinal = -1;
  thread_local CuContext cached_ctx = nullptr;
  if (cached_ctx != nullptr && cached_ordinal == ordinal) {
    CuContext current = nullptr;
    if (d.cuCtxGetCurrent(&current) == cu::kSuccess && current == cached_ctx) return cached_ctx;
  }
  check_ordinal(ordinal);
  static std::map<int, CuContext> contexts;  // retained once per process, never released
  CuContext ctx = nullptr;
  {
    std::lock_guard lock(state_mutex());
    CuContext& slot = contexts[ordinal];
    if (!slot) {
      CuDevice dev = 0;
      RT_CU_CHECK(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet", "cuda:", ordinal);
      RT_CU_CHECK(d.cuDevicePrimaryCtxRetain(&slot, dev), "cuDevicePrimaryCtxRetain", "cuda:", ordinal);
    }
    ctx = slot;
  }
  RT_CU_CHECK(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", "cuda:", ordinal);
  cached_ordinal = ordinal;
  cached_ctx = ctx;
  return ctx;
}

}  // namespace rt
