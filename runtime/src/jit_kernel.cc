#include "rt/jit_kernel.h"

#include <map>
#include <mutex>
#include <tuple>

#include "rt/cuda_device.h"
#include "rt/nvrtc.h"

namespace rt {

CudaKernel jit_kernel(const std::string& source, const std::string& name, int device,
                      const std::vector<EmbeddedFile>& headers, const std::vector<std::string>& extra_flags) {
  static std::mutex mutex;
  static std::map<std::tuple<int, std::string, std::vector<std::string>>, CudaKernel> loaded;
  NvrtcOptions options;
  options.arch = cuda_device(device).arch_name();
  options.extra = extra_flags;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_tuple(device, source, extra_flags);
  auto it = loaded.find(key);
  if (it != loaded.end()) return it->second;
  const NvrtcResult compiled = compile_cuda(source, name + ".cu", headers, options);
  CudaKernel kernel = CudaModule::load(compiled, name, device).function(name);
  loaded.emplace(std::move(key), kernel);
  return kernel;
}

}  // namespace rt
