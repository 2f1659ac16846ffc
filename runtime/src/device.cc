#include "rt/device.h"

#include <charconv>
#include <string>

#include "rt/cuda_device.h"
#include "rt/env.h"
#include "rt/error.h"

namespace rt {

std::vector<Device> available_devices() {
  std::vector<Device> devices{Device::cpu()};
  for (int i = 0, n = cuda_device_count(); i < n; ++i) devices.push_back(Device::cuda(i));
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
      const int count = cuda_device_count();
      RT_USER_CHECK(count > 0, "TL_DEVICE=", forced, " but no CUDA device is usable: ", cuda_unavailable_reason());
      RT_USER_CHECK(device.id < count, "TL_DEVICE=", forced, " but there are only ", count, " CUDA devices");
    }
    return device;
  }
  return cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu();
}

}  // namespace rt
