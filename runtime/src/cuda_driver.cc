#include "rt/cuda_driver.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <initializer_list>
#include <mutex>
#include <type_traits>

namespace rt {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

// The result of loading the driver once: the table, or why there is none.
struct DriverLoad {
  CudaDriver driver{};
  std::string error;  // empty when usable
};

// The first of `names` the library exports, or null.
void* find_symbol(void* lib, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (void* p = dlsym(lib, name)) return p;
  return nullptr;
}

std::string loaded_path(void* lib) {
  link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return kDriverLibrary;
}

DriverLoad load_driver() {
  DriverLoad load;
  // The library stays loaded for the life of the process: unloading the driver is not supported.
  void* lib = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    load.error =
        str("CUDA driver (libcuda.so.1) not found: no NVIDIA driver on this machine; use --target cpu (or "
            "TL_DEVICE=cpu). [dlopen: ",
            why ? why : "unknown error", "]");
    return load;
  }
  CudaDriver& d = load.driver;
  d.library_path = loaded_path(lib);
  std::string missing;
  auto resolve = [&](auto& fn, std::initializer_list<const char*> names, bool required = true) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(find_symbol(lib, names));
    if (!fn && required) missing += str(missing.empty() ? "" : ", ", *names.begin());
  };
  resolve(d.cuGetErrorName, {"cuGetErrorName"});
  resolve(d.cuGetErrorString, {"cuGetErrorString"});
  resolve(d.cuInit, {"cuInit"});
  resolve(d.cuDriverGetVersion, {"cuDriverGetVersion"});
  resolve(d.cuDeviceGet, {"cuDeviceGet"});
  resolve(d.cuDeviceGetCount, {"cuDeviceGetCount"});
  resolve(d.cuDeviceGetName, {"cuDeviceGetName"});
  resolve(d.cuDeviceTotalMem, {"cuDeviceTotalMem_v2"});
  resolve(d.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
  resolve(d.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
  resolve(d.cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2"});
  resolve(d.cuCtxSetCurrent, {"cuCtxSetCurrent"});
  resolve(d.cuCtxGetCurrent, {"cuCtxGetCurrent"});
  resolve(d.cuCtxSynchronize, {"cuCtxSynchronize"});
  resolve(d.cuMemAlloc, {"cuMemAlloc_v2"});
  resolve(d.cuMemFree, {"cuMemFree_v2"});
  resolve(d.cuMemGetInfo, {"cuMemGetInfo_v2"});
  resolve(d.cuMemHostAlloc, {"cuMemHostAlloc"});
  resolve(d.cuMemFreeHost, {"cuMemFreeHost"});
  resolve(d.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"});
  resolve(d.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"});
  resolve(d.cuMemcpyDtoD, {"cuMemcpyDtoD_v2"});
  resolve(d.cuMemcpyPeer, {"cuMemcpyPeer"});
  resolve(d.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"});
  resolve(d.cuMemcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"});
  resolve(d.cuMemsetD8, {"cuMemsetD8_v2"});
  resolve(d.cuMemsetD8Async, {"cuMemsetD8Async"});
  resolve(d.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"});
  resolve(d.cuIpcGetMemHandle, {"cuIpcGetMemHandle"});
  resolve(d.cuIpcOpenMemHandle, {"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"});
  resolve(d.cuIpcCloseMemHandle, {"cuIpcCloseMemHandle"});
  resolve(d.cuModuleLoadData, {"cuModuleLoadData"});
  resolve(d.cuModuleLoadDataEx, {"cuModuleLoadDataEx"});
  resolve(d.cuModuleUnload, {"cuModuleUnload"});
  resolve(d.cuModuleGetFunction, {"cuModuleGetFunction"});
  resolve(d.cuFuncSetAttribute, {"cuFuncSetAttribute"});
  resolve(d.cuFuncGetAttribute, {"cuFuncGetAttribute"});
  resolve(d.cuLaunchKernel, {"cuLaunchKernel"});
  resolve(d.cuLaunchKernelEx, {"cuLaunchKernelEx"}, false);
  resolve(d.cuStreamCreate, {"cuStreamCreate"});
  resolve(d.cuStreamSynchronize, {"cuStreamSynchronize"});
  resolve(d.cuStreamQuery, {"cuStreamQuery"});
  resolve(d.cuStreamDestroy, {"cuStreamDestroy_v2"});
  resolve(d.cuEventCreate, {"cuEventCreate"});
  resolve(d.cuEventRecord, {"cuEventRecord"});
  resolve(d.cuEventSynchronize, {"cuEventSynchronize"});
  resolve(d.cuEventQuery, {"cuEventQuery"});
  resolve(d.cuStreamWaitEvent, {"cuStreamWaitEvent"});
  resolve(d.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
  resolve(d.cuEventDestroy, {"cuEventDestroy_v2"});
  // Graphs are optional (rt::CudaGraph names what is missing): nothing else needs them.
  resolve(d.cuStreamBeginCapture, {"cuStreamBeginCapture_v2"}, false);
  resolve(d.cuStreamEndCapture, {"cuStreamEndCapture"}, false);
  resolve(d.cuGraphInstantiateWithFlags, {"cuGraphInstantiateWithFlags"}, false);
  resolve(d.cuGraphLaunch, {"cuGraphLaunch"}, false);
  resolve(d.cuGraphExecDestroy, {"cuGraphExecDestroy"}, false);
  resolve(d.cuGraphDestroy, {"cuGraphDestroy"}, false);
  resolve(d.cuTensorMapEncodeTiled, {"cuTensorMapEncodeTiled"}, false);
  if (!missing.empty()) {
    load.error =
        str("the CUDA driver library ", d.library_path, " lacks ", missing,
            ": the NVIDIA driver is too old or not a real driver; install a current driver or use --target cpu");
    return load;
  }
  if (const CuResult rc = d.cuInit(0); rc != cu::kSuccess) {
    std::string hint;
    switch (rc) {
      case cu::kErrorNoDevice:
        hint = "no CUDA-capable GPU is visible (check CUDA_VISIBLE_DEVICES)";
        break;
      case cu::kErrorStubLibrary:
        hint = "the stub libcuda.so.1 of the toolkit was loaded instead of the driver";
        break;
      case cu::kErrorCallRequiresNewerDriver:
        hint = "the NVIDIA driver is too old; update it";
        break;
      case cu::kErrorSystemDriverMismatch:
        hint = "the driver library and the loaded kernel module do not match; reinstall the driver or reboot";
        break;
      default:
        hint = "the driver cannot be initialized";
        break;
    }
    load.error = str("CUDA driver ", d.library_path, ": cuInit(0) failed with ", cuda_error_text(rc), ": ", hint,
                     "; use --target cpu (or TL_DEVICE=cpu) to run without a GPU");
    return load;
  }
  if (d.cuDriverGetVersion(&d.version) != cu::kSuccess) d.version = 0;
  return load;
}

const DriverLoad& driver_load() {
  static const DriverLoad load = load_driver();
  return load;
}

std::mutex& launch_mutex() {
  static std::mutex m;
  return m;
}
std::string& last_launch() {
  static std::string name;
  return name;
}

bool is_user_error(CuResult rc) {
  switch (rc) {
    case cu::kErrorOutOfMemory:
    case cu::kErrorStubLibrary:
    case cu::kErrorCallRequiresNewerDriver:
    case cu::kErrorDeviceUnavailable:
    case cu::kErrorNoDevice:
    case cu::kErrorInvalidDevice:
    case cu::kErrorNoBinaryForGpu:
    case cu::kErrorEccUncorrectable:
    case cu::kErrorNvlinkUncorrectable:
    case cu::kErrorJitCompilerNotFound:
    case cu::kErrorUnsupportedPtxVersion:
    case cu::kErrorSystemNotReady:
    case cu::kErrorSystemDriverMismatch:
    case cu::kErrorCompatNotSupportedOnDevice:
      return true;
    default:
      return false;
  }
}

const char* hint_for(CuResult rc) {
  switch (rc) {
    case cu::kErrorOutOfMemory:
      return "the GPU is out of memory; use smaller shapes or free other GPU memory";
    case cu::kErrorNoDevice:
      return "no CUDA-capable GPU is visible (check CUDA_VISIBLE_DEVICES)";
    case cu::kErrorInvalidDevice:
      return "no such GPU (check the device ordinal and CUDA_VISIBLE_DEVICES)";
    case cu::kErrorDeviceUnavailable:
      return "the GPU is busy or in exclusive-process mode for another process";
    case cu::kErrorNoBinaryForGpu:
      return "the kernel was compiled for another GPU architecture";
    case cu::kErrorUnsupportedPtxVersion:
      return "the driver is older than the compiler (NVRTC) that produced the PTX; update the NVIDIA driver";
    case cu::kErrorStubLibrary:
      return "the toolkit's stub libcuda was loaded instead of the driver";
    case cu::kErrorCallRequiresNewerDriver:
    case cu::kErrorSystemDriverMismatch:
    case cu::kErrorCompatNotSupportedOnDevice:
      return "the NVIDIA driver is too old or does not match its kernel module; update the driver";
    case cu::kErrorEccUncorrectable:
    case cu::kErrorNvlinkUncorrectable:
      return "a hardware error was reported; check the GPU (nvidia-smi)";
    default:
      return nullptr;
  }
}

}  // namespace

std::string CudaDriver::version_string() const { return str(version / 1000, ".", version % 1000 / 10); }

const CudaDriver& cuda_driver() {
  const DriverLoad& load = driver_load();
  if (!load.error.empty()) throw_user_error(load.error);
  return load.driver;
}

bool cuda_driver_available() {
  try {
    return driver_load().error.empty();
  } catch (...) {
    return false;
  }
}

std::string cuda_driver_error() {
  try {
    return driver_load().error;
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string cuda_error_text(CuResult result) {
  const DriverLoad& load = driver_load();
  const char* name = nullptr;
  const char* text = nullptr;
  if (load.driver.cuGetErrorName && load.driver.cuGetErrorName(result, &name) != cu::kSuccess) name = nullptr;
  if (load.driver.cuGetErrorString && load.driver.cuGetErrorString(result, &text) != cu::kSuccess) text = nullptr;
  if (!name) return str("CUresult ", result);
  return text ? str(name, " (", text, ")") : std::string(name);
}

bool cuda_error_is_sticky(CuResult result) {
  switch (result) {
    case cu::kErrorIllegalAddress:
    case cu::kErrorLaunchTimeout:
    case cu::kErrorHardwareStackError:
    case cu::kErrorIllegalInstruction:
    case cu::kErrorMisalignedAddress:
    case cu::kErrorInvalidAddressSpace:
    case cu::kErrorInvalidPc:
    case cu::kErrorLaunchFailed:
      return true;
    default:
      return false;
  }
}

void throw_cuda_error(CuResult result, const char* call, const std::string& context, const char* file, int line) {
  std::string message =
      str("CUDA error in ", call, context.empty() ? "" : " (" + context + ")", ": ", cuda_error_text(result));
  if (const char* hint = hint_for(result)) message += str("; ", hint);
  if (cuda_error_is_sticky(result)) {
    const std::string kernel = last_cuda_launch();
    message += str(". A kernel faulted", kernel.empty() ? "" : "; the last kernel launched was '" + kernel + "'",
                   ". The CUDA context is now unusable: restart the process. Rerun with TL_CUDA_SYNC=1 to attribute "
                   "the fault to its kernel, or under compute-sanitizer");
  }
  if (is_user_error(result)) throw_user_error(message);
  throw_internal_error(file, line, message);
}

void note_cuda_launch(const std::string& kernel_name) {
  std::lock_guard lock(launch_mutex());
  last_launch() = kernel_name;
}

std::string last_cuda_launch() {
  std::lock_guard lock(launch_mutex());
  return last_launch();
}

}  // namespace rt
