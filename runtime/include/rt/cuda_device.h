// CUDA devices: how many, what each one is (read once through the driver), and the context our
// work runs in. We use each device's primary context (the one the CUDA runtime and PyTorch use, so
// pointers pass between them), retained once per process and never released.
#pragma once

#include <cstdint>
#include <string>

#include "rt/cuda_driver.h"

namespace rt {

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;  // "NVIDIA H200"
  int sm_major = 0, sm_minor = 0;
  int sm_count = 0;
  int64_t smem_per_block_optin = 0;  // the most dynamic shared memory one block may opt into
  int64_t smem_per_sm = 0;
  int64_t l2_bytes = 0;
  int64_t global_mem_bytes = 0;
  int max_threads_per_block = 0;
  int clock_khz = 0;            // 0 when the driver does not report it
  int mem_clock_khz = 0;        // 0 when the driver does not report it
  int mem_bus_width = 0;        // bits
  bool cluster_launch = false;  // thread-block clusters (sm_90+)

  // The architecture we compile for: "sm_90a" for 9.0 (always the arch-specific variant on Hopper,
  // for wgmma and setmaxnreg), "sm_80", "sm_86", "sm_89", ...
  std::string arch_name() const;
};

// "sm_<major><minor>", with the 'a' suffix for 9.0.
std::string cuda_arch_name(int sm_major, int sm_minor);

// The number of CUDA devices; 0 when there is no driver or no device. Never throws.
int cuda_device_count();
// Why there is no usable CUDA device ("" when there is one). Never throws.
std::string cuda_unavailable_reason();

// The device's properties, read once per process (thread-safe). A user error when the driver is
// missing or there is no such device.
const CudaDeviceInfo& cuda_device(int ordinal = 0);

// Retains `ordinal`'s primary context (once per process) and makes it current on the calling thread
// (the current context is per thread); returns it. Every driver call of ours that needs a context
// goes through this. A user error when the driver is missing or there is no such device.
CuContext cuda_context(int ordinal);

}  // namespace rt
