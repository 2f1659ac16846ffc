#include "rt/cuda_module.h"

#include <atomic>
#include <mutex>

#include "rt/cuda_device.h"
#include "rt/env.h"
#include "rt/nvrtc.h"

namespace rt {
namespace {

constexpr int64_t kDefaultDynamicSmem = 48 * 1024;  // what a block may use without opting in
constexpr unsigned kMaxPortableCluster = 8;

bool sync_after_launch() {
  // TL_CUDA_SYNC: synchronize after every kernel launch, so a kernel fault names its kernel (slow).
  static const bool sync = env_flag("TL_CUDA_SYNC");
  return sync;
}

std::string trim_log(const char* buffer) {
  std::string log(buffer);
  while (!log.empty() && (log.back() == '\n' || log.back() == '\0')) log.pop_back();
  return log;
}

}  // namespace

std::string Dim3::to_string() const { return str("(", x, ", ", y, ", ", z, ")"); }

struct CudaModule::State {
  CuModule module = nullptr;
  int device = 0;
  std::string name;

  ~State() {
    try {
      const CudaDriver& d = cuda_driver();
      cuda_context(device);
      d.cuModuleUnload(module);  // nothing to do on failure (e.g. a driver shut down at exit)
    } catch (...) {
    }
  }
};

struct CudaKernel::State {
  std::shared_ptr<CudaModule::State> module;  // keeps the module loaded
  CuFunction function = nullptr;
  std::string name;
  int device = 0;
  std::mutex mutex;                                            // serializes attribute changes
  std::atomic<int64_t> max_dynamic_smem{kDefaultDynamicSmem};  // what launches may use now
  bool non_portable_cluster = false;                           // guarded by mutex
};

CudaModule::CudaModule(const std::string& image, const std::string& name, int device) {
  RT_ICHECK(!image.empty(), "empty GPU code image for module ", name);
  const CudaDriver& d = cuda_driver();
  cuda_context(device);
  // The JIT logs (for PTX images; cubins load without JIT).
  char info_log[8192] = {};
  char error_log[8192] = {};
  int options[] = {cu::kJitInfoLogBuffer, cu::kJitInfoLogBufferSizeBytes, cu::kJitErrorLogBuffer,
                   cu::kJitErrorLogBufferSizeBytes};
  void* values[] = {info_log, reinterpret_cast<void*>(sizeof(info_log) - 1), error_log,
                    reinterpret_cast<void*>(sizeof(error_log) - 1)};
  auto state = std::make_shared<State>();
  state->device = device;
  state->name = name;
  // PTX text must be NUL-terminated; std::string's buffer is.
  const CuResult rc = d.cuModuleLoadDataEx(&state->module, image.c_str(), 4, options, values);
  if (rc != cu::kSuccess) {
    state->module = nullptr;
    const std::string log = trim_log(error_log);
    throw_cuda_error(rc, "cuModuleLoadData",
                     str("module ", name, " on cuda:", device, log.empty() ? "" : "; JIT log:\n" + log), __FILE__,
                     __LINE__);
  }
  state_ = std::move(state);
}

CudaModule CudaModule::load(const NvrtcResult& compiled, const std::string& name, int device) {
  return CudaModule(compiled.cubin.empty() ? compiled.ptx : compiled.cubin, name, device);
}

CuModule CudaModule::handle() const {
  RT_ICHECK(state_, "CudaModule::handle on an empty module");
  return state_->module;
}

int CudaModule::device() const {
  RT_ICHECK(state_, "CudaModule::device on an empty module");
  return state_->device;
}

const std::string& CudaModule::name() const {
  RT_ICHECK(state_, "CudaModule::name on an empty module");
  return state_->name;
}

CudaKernel CudaModule::function(const std::string& kernel_name) const {
  RT_ICHECK(state_, "CudaModule::function('", kernel_name, "') on an empty module");
  const CudaDriver& d = cuda_driver();
  cuda_context(state_->device);
  auto state = std::make_shared<CudaKernel::State>();
  state->module = state_;
  state->name = kernel_name;
  state->device = state_->device;
  const CuResult rc = d.cuModuleGetFunction(&state->function, state_->module, kernel_name.c_str());
  if (rc == cu::kErrorNotFound)
    throw_internal_error(__FILE__, __LINE__,
                         str("module ", state_->name, " has no kernel named '", kernel_name,
                             "' (a C++ kernel needs extern \"C\" or its mangled name)"));
  if (rc != cu::kSuccess)
    throw_cuda_error(rc, "cuModuleGetFunction", str("kernel '", kernel_name, "' of module ", state_->name), __FILE__,
                     __LINE__);
  CudaKernel kernel;
  kernel.state_ = std::move(state);
  return kernel;
}

const std::string& CudaKernel::name() const {
  RT_ICHECK(state_, "CudaKernel::name on an empty kernel");
  return state_->name;
}

CuFunction CudaKernel::handle() const {
  RT_ICHECK(state_, "CudaKernel::handle on an empty kernel");
  return state_->function;
}

int CudaKernel::device() const {
  RT_ICHECK(state_, "CudaKernel::device on an empty kernel");
  return state_->device;
}

int CudaKernel::attribute(int func_attribute) const {
  RT_ICHECK(state_, "CudaKernel::attribute on an empty kernel");
  const CudaDriver& d = cuda_driver();
  cuda_context(state_->device);
  int value = 0;
  RT_CU_CHECK(d.cuFuncGetAttribute(&value, func_attribute, state_->function), "cuFuncGetAttribute", "attribute ",
              func_attribute, " of kernel '", state_->name, "'");
  return value;
}

void CudaKernel::set_max_dynamic_smem(int64_t bytes) const {
  RT_ICHECK(state_, "CudaKernel::set_max_dynamic_smem on an empty kernel");
  RT_ICHECK(bytes >= 0, "negative shared memory size ", bytes, " for kernel '", state_->name, "'");
  const CudaDeviceInfo& dev = cuda_device(state_->device);
  const int64_t static_smem = attribute(cu::kFuncAttrSharedSizeBytes);
  RT_USER_CHECK(bytes + static_smem <= dev.smem_per_block_optin, "kernel '", state_->name, "' needs ", bytes,
                " bytes of dynamic shared memory", static_smem ? str(" plus ", static_smem, " static") : "",
                ", more than the ", dev.smem_per_block_optin, " bytes one block may use on cuda:", state_->device, " (",
                dev.name, "); use smaller tiles or fewer pipeline stages");
  std::lock_guard lock(state_->mutex);
  const CudaDriver& d = cuda_driver();
  cuda_context(state_->device);
  RT_CU_CHECK(d.cuFuncSetAttribute(state_->function, cu::kFuncAttrMaxDynamicSharedSizeBytes, static_cast<int>(bytes)),
              "cuFuncSetAttribute", "max dynamic shared memory ", bytes, " of kernel '", state_->name, "'");
  state_->max_dynamic_smem = bytes;
}

namespace {

void check_shape(const std::string& kernel, const CudaDeviceInfo& dev, Dim3 grid, Dim3 block) {
  RT_USER_CHECK(grid.x >= 1 && grid.y >= 1 && grid.z >= 1, "kernel '", kernel, "': empty grid ", grid.to_string());
  RT_USER_CHECK(grid.x <= 0x7fffffffu && grid.y <= 65535 && grid.z <= 65535, "kernel '", kernel, "': grid ",
                grid.to_string(), " exceeds the limits (2^31-1, 65535, 65535)");
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  RT_USER_CHECK(threads >= 1 && threads <= static_cast<uint64_t>(dev.max_threads_per_block) && block.z <= 64,
                "kernel '", kernel, "': a block of ", block.to_string(), " = ", threads, " threads; cuda:", dev.ordinal,
                " (", dev.name, ") runs 1 to ", dev.max_threads_per_block, " threads a block");
}

}  // namespace

void CudaKernel::launch(Dim3 grid, Dim3 block, size_t dynamic_smem, CuStream stream, void** args) const {
  RT_ICHECK(state_, "CudaKernel::launch on an empty kernel");
  const CudaDriver& d = cuda_driver();
  const CudaDeviceInfo& dev = cuda_device(state_->device);
  check_shape(state_->name, dev, grid, block);
  if (static_cast<int64_t>(dynamic_smem) > state_->max_dynamic_smem.load())
    set_max_dynamic_smem(static_cast<int64_t>(dynamic_smem));
  cuda_context(state_->device);
  note_cuda_launch(state_->name);
  RT_CU_CHECK(d.cuLaunchKernel(state_->function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                               static_cast<unsigned>(dynamic_smem), stream, args, nullptr),
              "cuLaunchKernel", "kernel '", state_->name, "', grid ", grid.to_string(), ", block ", block.to_string(),
              ", ", dynamic_smem, " bytes of dynamic shared memory");
  if (sync_after_launch())
    RT_CU_CHECK(d.cuStreamSynchronize(stream), "cuStreamSynchronize", "after kernel '", state_->name, "'");
}

void CudaKernel::launch_cluster(Dim3 grid, Dim3 block, Dim3 cluster, size_t dynamic_smem, CuStream stream,
                                void** args) const {
  RT_ICHECK(state_, "CudaKernel::launch_cluster on an empty kernel");
  const CudaDriver& d = cuda_driver();
  const CudaDeviceInfo& dev = cuda_device(state_->device);
  check_shape(state_->name, dev, grid, block);
  RT_USER_CHECK(dev.sm_major >= 9 && dev.cluster_launch, "kernel '", state_->name,
                "': thread-block clusters need sm_90 or newer; cuda:", dev.ordinal, " (", dev.name, ") is sm_",
                dev.sm_major, dev.sm_minor);
  RT_USER_CHECK(d.cuLaunchKernelEx != nullptr, "kernel '", state_->name, "': the CUDA driver ", d.version_string(),
                " lacks cuLaunchKernelEx (cluster launches need a CUDA 12 driver)");
  const unsigned cluster_size = cluster.x * cluster.y * cluster.z;
  RT_USER_CHECK(cluster.x >= 1 && cluster.y >= 1 && cluster.z >= 1 && grid.x % cluster.x == 0 &&
                    grid.y % cluster.y == 0 && grid.z % cluster.z == 0,
                "kernel '", state_->name, "': the cluster ", cluster.to_string(), " does not divide the grid ",
                grid.to_string());
  RT_USER_CHECK(cluster_size <= 16, "kernel '", state_->name, "': a cluster of ", cluster_size,
                " blocks; at most 16 (8 portably)");
  if (static_cast<int64_t>(dynamic_smem) > state_->max_dynamic_smem.load())
    set_max_dynamic_smem(static_cast<int64_t>(dynamic_smem));
  cuda_context(state_->device);
  if (cluster_size > kMaxPortableCluster) {
    std::lock_guard lock(state_->mutex);
    if (!state_->non_portable_cluster) {
      RT_CU_CHECK(d.cuFuncSetAttribute(state_->function, cu::kFuncAttrNonPortableClusterSizeAllowed, 1),
                  "cuFuncSetAttribute", "non-portable cluster size of kernel '", state_->name, "'");
      state_->non_portable_cluster = true;
    }
  }
  CuLaunchAttribute attr{};
  attr.id = cu::kLaunchAttributeClusterDimension;
  attr.value.cluster_dim = {cluster.x, cluster.y, cluster.z};
  launch_ex(grid, block, dynamic_smem, stream, args, attr, str(", cluster ", cluster.to_string()));
}

void CudaKernel::launch_overlapping(Dim3 grid, Dim3 block, size_t dynamic_smem, CuStream stream, void** args) const {
  RT_ICHECK(state_, "CudaKernel::launch_overlapping on an empty kernel");
  const CudaDeviceInfo& dev = cuda_device(state_->device);
  if (dev.sm_major < 9 || cuda_driver().cuLaunchKernelEx == nullptr)
    return launch(grid, block, dynamic_smem, stream, args);
  check_shape(state_->name, dev, grid, block);
  if (static_cast<int64_t>(dynamic_smem) > state_->max_dynamic_smem.load())
    set_max_dynamic_smem(static_cast<int64_t>(dynamic_smem));
  cuda_context(state_->device);
  CuLaunchAttribute attr{};
  attr.id = cu::kLaunchAttributeProgrammaticStreamSerialization;
  attr.value.i = 1;
  launch_ex(grid, block, dynamic_smem, stream, args, attr, ", overlapping the previous kernel");
}

void CudaKernel::launch_ex(Dim3 grid, Dim3 block, size_t dynamic_smem, CuStream stream, void** args,
                           const CuLaunchAttribute& attr, const std::string& what) const {
  const CudaDriver& d = cuda_driver();
  CuLaunchConfig config{};
  config.grid_x = grid.x;
  config.grid_y = grid.y;
  config.grid_z = grid.z;
  config.block_x = block.x;
  config.block_y = block.y;
  config.block_z = block.z;
  config.shared_mem_bytes = static_cast<unsigned>(dynamic_smem);
  config.stream = stream;
  config.attrs = const_cast<CuLaunchAttribute*>(&attr);
  config.num_attrs = 1;
  note_cuda_launch(state_->name);
  RT_CU_CHECK(d.cuLaunchKernelEx(&config, state_->function, args, nullptr), "cuLaunchKernelEx", "kernel '",
              state_->name, "', grid ", grid.to_string(), what, ", block ", block.to_string(), ", ", dynamic_smem,
              " bytes of dynamic shared memory");
  if (sync_after_launch())
    RT_CU_CHECK(d.cuStreamSynchronize(stream), "cuStreamSynchronize", "after kernel '", state_->name, "'");
}

}  // namespace rt
