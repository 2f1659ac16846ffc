// Loaded GPU code: a CudaModule is a cubin or PTX image loaded into a device's primary context, a
// CudaKernel one of its __global__ functions, launched plainly or with thread-block clusters.
// Both are cheap handles: copies share the module, which is unloaded when the last one goes (a
// kernel keeps its module alive).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "rt/cuda_driver.h"

namespace rt {

struct NvrtcResult;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  std::string to_string() const;  // "(x, y, z)"
};

class CudaKernel;

class CudaModule {
 public:
  CudaModule() = default;  // no module; every accessor but loaded() is an error
  // Loads `image` (a cubin, or NUL-free PTX text that the driver JIT-compiles) on `device`. `name`
  // names the module in errors. A PTX the driver rejects is an internal error carrying its JIT log.
  CudaModule(const std::string& image, const std::string& name, int device = 0);
  // The cubin of `compiled` when it has one, else its PTX.
  static CudaModule load(const NvrtcResult& compiled, const std::string& name, int device = 0);

  bool loaded() const { return state_ != nullptr; }
  // The __global__ function `kernel_name` (its mangled name, or the plain one for extern "C"); an
  // internal error when the module lacks it.
  CudaKernel function(const std::string& kernel_name) const;
  CuModule handle() const;
  int device() const;
  const std::string& name() const;

 private:
  friend class CudaKernel;
  struct State;
  std::shared_ptr<State> state_;
};

class CudaKernel {
 public:
  CudaKernel() = default;  // no kernel

  bool loaded() const { return state_ != nullptr; }
  const std::string& name() const;
  CuFunction handle() const;
  int device() const;
  // A CUfunction_attribute (cu::kFuncAttr*), e.g. registers or static shared memory.
  int attribute(int func_attribute) const;
  // Allows launches with up to `bytes` of dynamic shared memory (above the default 48 KiB a block
  // must opt in). A user error naming the kernel when `bytes` plus its static shared memory exceed
  // what one block of the device may use. launch() calls it itself when a launch needs more.
  void set_max_dynamic_smem(int64_t bytes) const;

  // cuLaunchKernel. `args` holds one pointer to each kernel parameter, in order. Launch shapes the
  // device cannot run (too many threads, too much shared memory) are user errors naming the kernel.
  // With TL_CUDA_SYNC=1 every launch is followed by a synchronization, so a kernel fault is reported
  // with the kernel that caused it.
  void launch(Dim3 grid, Dim3 block, size_t dynamic_smem, CuStream stream, void** args) const;
  // cuLaunchKernelEx with a cluster dimension (sm_90+): `cluster` must divide `grid`; clusters of
  // more than 8 blocks are allowed where the device supports them (non-portable sizes).
  void launch_cluster(Dim3 grid, Dim3 block, Dim3 cluster, size_t dynamic_smem, CuStream stream, void** args) const;

  // launch() with the parameters passed by value: launch_with(grid, block, 0, stream, ptr, n).
  // Each argument's type must match the kernel parameter's exactly (e.g. int64_t vs int).
  template <class... Args>
  void launch_with(Dim3 grid, Dim3 block, size_t dynamic_smem, CuStream stream, const Args&... args) const {
    void* params[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    launch(grid, block, dynamic_smem, stream, params);
  }
  // A programmatic dependent launch (sm_90+; elsewhere launch()): the kernel may start before the
  // previous kernel on the stream completes, once every block of that one has executed
  // griddepcontrol.launch_dependents (or exited). Before it executes griddepcontrol.wait (the
  // previous kernel's end, its writes visible) it may not rely on that kernel's writes, and what
  // is queued after it should not count on following that kernel unless it waits.
  void launch_overlapping(Dim3 grid, Dim3 block, size_t dynamic_smem, CuStream stream, void** args) const;
  template <class... Args>
  void launch_overlapping_with(Dim3 grid, Dim3 block, size_t dynamic_smem, CuStream stream, const Args&... args) const {
    void* params[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    launch_overlapping(grid, block, dynamic_smem, stream, params);
  }

 private:
  // cuLaunchKernelEx with one attribute; `what` describes it in the error.
  void launch_ex(Dim3 grid, Dim3 block, size_t dynamic_smem, CuStream stream, void** args,
                 const CuLaunchAttribute& attr, const std::string& what) const;
  friend class CudaModule;
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace rt
