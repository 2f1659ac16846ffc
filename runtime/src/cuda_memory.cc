#include "rt/cuda_memory.h"

#include <algorithm>

#include "rt/cuda_device.h"

namespace rt {

CuDevicePtr cuda_malloc(int device, size_t bytes, const std::string& what) {
  const CudaDriver& d = cuda_driver();
  cuda_context(device);
  CuDevicePtr ptr = 0;
  const CuResult rc = d.cuMemAlloc(&ptr, bytes > 0 ? bytes : 1);
  if (rc == cu::kErrorOutOfMemory) {
    size_t free_bytes = 0, total_bytes = 0;
    d.cuMemGetInfo(&free_bytes, &total_bytes);
    throw_user_error(str("out of GPU memory on cuda:", device, " allocating ", bytes, " bytes for ", what, " (",
                         free_bytes, " of ", total_bytes, " bytes free); use smaller shapes or free GPU memory"));
  }
  if (rc != cu::kSuccess)
    throw_cuda_error(rc, "cuMemAlloc", str(bytes, " bytes for ", what, " on cuda:", device), __FILE__, __LINE__);
  return ptr;
}

void cuda_free(int device, CuDevicePtr ptr) noexcept {
  if (ptr == 0) return;
  try {
    const CudaDriver& d = cuda_driver();
    cuda_context(device);
    d.cuMemFree(ptr);  // an error here (deinitialized driver at exit, a sticky fault) leaves nothing to do
  } catch (...) {
  }
}

void* cuda_host_alloc(int device, size_t bytes, const std::string& what) {
  const CudaDriver& d = cuda_driver();
  cuda_context(device);
  void* ptr = nullptr;
  const CuResult rc = d.cuMemHostAlloc(&ptr, bytes > 0 ? bytes : 1, 0);
  if (rc == cu::kErrorOutOfMemory)
    throw_user_error(str("out of page-locked host memory allocating ", bytes, " bytes for ", what));
  if (rc != cu::kSuccess) throw_cuda_error(rc, "cuMemHostAlloc", str(bytes, " bytes for ", what), __FILE__, __LINE__);
  return ptr;
}

void cuda_host_free(int device, void* ptr) noexcept {
  if (ptr == nullptr) return;
  try {
    const CudaDriver& d = cuda_driver();
    cuda_context(device);
    d.cuMemFreeHost(ptr);  // as cuda_free: nothing to do about a failure at exit
  } catch (...) {
  }
}

unsigned char* PinnedBuffer::reserve(size_t bytes, const std::string& what) {
  if (bytes > bytes_) {
    cuda_host_free(device_, data_);
    data_ = nullptr;
    bytes_ = 0;
    const size_t grown = std::max(bytes, size_t(64) << 10);
    data_ = static_cast<unsigned char*>(cuda_host_alloc(device_, grown, what));
    bytes_ = grown;
  }
  return data_;
}

void cuda_copy_to_device(int device, CuDevicePtr dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const CudaDriver& d = cuda_driver();
  cuda_context(device);
  RT_CU_CHECK(d.cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD", bytes, " bytes to cuda:", device);
  RT_CU_CHECK(d.cuStreamSynchronize(nullptr), "cuStreamSynchronize", "after a copy to cuda:", device);
}

void cuda_copy_to_host(int device, void* dst, CuDevicePtr src, size_t bytes) {
  if (bytes == 0) return;
  const CudaDriver& d = cuda_driver();
  cuda_context(device);
  RT_CU_CHECK(d.cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH", bytes, " bytes from cuda:", device);
}

void cuda_copy_device_to_device(int dst_device, CuDevicePtr dst, int src_device, CuDevicePtr src, size_t bytes) {
  if (bytes == 0) return;
  const CudaDriver& d = cuda_driver();
  if (dst_device == src_device) {
    cuda_context(dst_device);
    RT_CU_CHECK(d.cuMemcpyDtoD(dst, src, bytes), "cuMemcpyDtoD", bytes, " bytes on cuda:", dst_device);
    RT_CU_CHECK(d.cuStreamSynchronize(nullptr), "cuStreamSynchronize", "after a copy on cuda:", dst_device);
    return;
  }
  const CuContext src_ctx = cuda_context(src_device);
  const CuContext dst_ctx = cuda_context(dst_device);
  RT_CU_CHECK(d.cuMemcpyPeer(dst, dst_ctx, src, src_ctx, bytes), "cuMemcpyPeer", bytes, " bytes from cuda:", src_device,
              " to cuda:", dst_device);
  RT_CU_CHECK(d.cuCtxSynchronize(), "cuCtxSynchronize", "after a copy to cuda:", dst_device);
}

void cuda_memset(int device, CuDevicePtr dst, unsigned char value, size_t bytes) {
  if (bytes == 0) return;
  const CudaDriver& d = cuda_driver();
  cuda_context(device);
  RT_CU_CHECK(d.cuMemsetD8(dst, value, bytes), "cuMemsetD8", bytes, " bytes on cuda:", device);
  RT_CU_CHECK(d.cuStreamSynchronize(nullptr), "cuStreamSynchronize", "after a memset on cuda:", device);
}

}  // namespace rt
