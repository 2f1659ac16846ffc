#include "rt/device.h"

#include <dlfcn.h>

#include <charconv>
#include <string>

#include "rt/env.h"
#include "rt/error.h"

namespace rt {
namespace {

struct CudaProbe {
  int device_count = 0;
  std::string why_none;  // set when device_count is 0
};

// A minimal driver probe: libcuda.so.1, cuInit(0), cuDeviceGetCount. The full driver module (a later
// issue) replaces it. The library stays loaded: unloading the CUDA driver is not supported.
CudaProbe probe_cuda() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return {0, str("the CUDA driver library libcuda.so.1 cannot be loaded (", dlerror(), ")")};
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  if (!init || !count) return {0, "libcuda.so.1 lacks cuInit or cuDeviceGetCount"};
  if (const int rc = init(0); rc != 0) return {0, str("cuInit(0) failed with CUresult ", rc)};
  int n = 0;
  if (const int rc = count(&n); rc != 0) return {0, str("cuDeviceGetCount failed with CUresult ", rc)};
  if (n <= 0) return {0, "the CUDA driver reports no devices"};
  return {n, ""};
}

const CudaProbe& cuda_probe() {
  static const CudaProbe probe = probe_cuda();
  return probe;
}

}  // namespace

std::vector<Device> available_devices() {
  std::vector<Device> devices{Device::cpu()};
  for (int i = 0; i < cuda_probe().device_count; ++i) devices.push_back(Device::cuda(i));
  return devices;
}

Device parse_device(std::string_view text, std::string_view what) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.substr(0, 5) == "cuda:") {
    const std::string_view digits = text.substr(5);
    int id = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    if (ec == std::errc() && end == digits.data() + digits.size() && id >= 0) return Device::cuda(id);
  }
  throw_user_error(str(what, ": '", text, "' is not a device; use cpu, cuda or cuda:N"));
}

Device best_device() {
  // TL_DEVICE: cpu, cuda or cuda:N forces the device the tools run on (default: the first GPU if any).
  const std::string forced = env_string("TL_DEVICE", "");
  if (!forced.empty()) {
    const Device device = parse_device(forced, "TL_DEVICE");
    if (device.is_cuda()) {
      const CudaProbe& probe = cuda_probe();
      RT_USER_CHECK(probe.device_count > 0, "TL_DEVICE=", forced, " but no CUDA device is usable: ", probe.why_none);
      RT_USER_CHECK(device.id < probe.device_count, "TL_DEVICE=", forced, " but there are only ", probe.device_count,
                    " CUDA devices");
    }
    return device;
  }
  return cuda_probe().device_count > 0 ? Device::cuda(0) : Device::cpu();
}

}  // namespace rt
