// Which devices this process can use. CUDA is probed through the driver (rt/cuda_device.h, dlopen),
// so binaries run on machines with no GPU and no driver (DESIGN "Rules of the layering").
#pragma once

#include <string_view>
#include <vector>

#include "rt/tensor.h"

namespace rt {

// The CPU, then every CUDA device the driver reports (probed once per process).
std::vector<Device> available_devices();
// TL_DEVICE if set, else the first CUDA device, else the CPU.
Device best_device();
// "cpu", "cuda" (device 0) or "cuda:N"; a user error naming `what` (e.g. "TL_DEVICE") otherwise.
Device parse_device(std::string_view text, std::string_view what);

}  // namespace rt
