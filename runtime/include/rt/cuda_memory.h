// Device memory through the driver: allocation and synchronous copies/fills. What Tensor uses for
// CUDA storage; kernels and libraries use Tensor, not these, where they can.
#pragma once

#include <cstddef>
#include <string>

#include "rt/cuda_driver.h"

namespace rt {

// cuMemAlloc on `device` (at least 1 byte, so the pointer is never null). Out of memory is a user
// error naming `what` (e.g. "bfloat16[1024, 1024]"), the size and the device's free memory.
CuDevicePtr cuda_malloc(int device, size_t bytes, const std::string& what);
// cuMemFree. Never throws: a failure (say, the driver already shut down at process exit) is ignored.
void cuda_free(int device, CuDevicePtr ptr) noexcept;

// Page-locked host memory (cuMemHostAlloc), for asynchronous copies that do not go through the
// driver's staging buffers. Out of memory is a user error naming `what`.
void* cuda_host_alloc(int device, size_t bytes, const std::string& what);
void cuda_host_free(int device, void* ptr) noexcept;

// A growable block of page-locked host memory (what it held is not kept when it grows).
class PinnedBuffer {
 public:
  explicit PinnedBuffer(int device) : device_(device) {}
  ~PinnedBuffer() { cuda_host_free(device_, data_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  // At least `bytes` bytes.
  unsigned char* reserve(size_t bytes, const std::string& what);

 private:
  int device_;
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
};

// Synchronous copies: complete when they return (the legacy default stream is synchronized, so
// work queued on blocking streams before the call is ordered before the copy). Work on
// non-blocking streams must be synchronized by the caller first.
void cuda_copy_to_device(int device, CuDevicePtr dst, const void* src, size_t bytes);
void cuda_copy_to_host(int device, void* dst, CuDevicePtr src, size_t bytes);
// Within one device, or between two (peer copy through the two primary contexts).
void cuda_copy_device_to_device(int dst_device, CuDevicePtr dst, int src_device, CuDevicePtr src, size_t bytes);
// Sets `bytes` bytes to `value` (cuMemsetD8), synchronously.
void cuda_memset(int device, CuDevicePtr dst, unsigned char value, size_t bytes);

}  // namespace rt
