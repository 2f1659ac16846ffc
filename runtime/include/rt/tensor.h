// The one tensor type of the stack (DESIGN: "One tensor type across the stack, DLPack-compatible"):
// shared storage, a data pointer, a device, a dtype, and shape/strides in elements. A Tensor is a
// cheap handle; copies share the storage. Views and copies belong to the products, not here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rt/dlpack.h"
#include "rt/dtype.h"

namespace rt {

struct Device {
  enum class Kind { CPU, CUDA };
  Kind kind = Kind::CPU;
  int id = 0;

  static Device cpu() { return {Kind::CPU, 0}; }
  static Device cuda(int id = 0) { return {Kind::CUDA, id}; }
  bool is_cpu() const { return kind == Kind::CPU; }
  bool is_cuda() const { return kind == Kind::CUDA; }
  std::string to_string() const;  // "cpu", "cuda:0"
  bool operator==(const Device&) const = default;
};

using Shape = std::vector<int64_t>;

// Row-major strides (in elements) of a compact tensor of `shape`.
Shape contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false and every accessor but defined() is an error

  // Uninitialized storage (CPU: 64-byte aligned, and blocks of 4 MiB or more recycled through a
  // bounded per-process cache when freed, so large tensors need not fault in fresh pages; CUDA:
  // cuMemAlloc, 256-byte aligned, on the device's primary context). Fill it before reading: see DESIGN on poisoning. On CUDA, a missing
  // driver or device, or too little memory, is a user error.
  static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu());
  // A tensor over memory owned elsewhere; `keep_alive` (if any) is held as long as any handle is.
  // Empty `strides` means row-major contiguous.
  static Tensor wrap(void* data, Shape shape, DType dtype, Device device, Shape strides = {},
                     std::shared_ptr<void> keep_alive = {});
  // Takes ownership of `managed` even when it throws: its deleter runs exactly once, when the last
  // handle (or the failed import) lets go.
  static Tensor from_dlpack(DLManagedTensor* managed);
  // A new DLManagedTensor sharing this storage, which stays alive until the consumer calls the
  // deleter (for a wrap() without keep_alive, the memory's owner must outlive the consumer).
  DLManagedTensor* to_dlpack() const;

  bool defined() const { return defined_; }
  void* data() const;
  template <class T>
  T* data_as() const {
    check_element_type(sizeof(T));
    return static_cast<T*>(data());
  }
  DType dtype() const;
  Device device() const;
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t dim() const;
  int64_t size(int64_t i) const;    // negative i counts from the end
  int64_t stride(int64_t i) const;  // negative i counts from the end
  int64_t numel() const;
  // Bytes the elements take when packed (F4E2M1: two per byte), not the span of a strided view.
  int64_t nbytes() const;
  bool is_contiguous() const;
  int element_size_bits() const;
  std::string shape_string() const;  // "[64, 32]", "[]" for a scalar
  // A copy on `device` (this tensor itself when it is already there), row-major contiguous; host to
  // device, device to host and between devices. The copy is complete when this returns. Only
  // contiguous tensors: a strided view is a user error (make it contiguous first).
  Tensor to(Device device) const;
  // Sets every byte of a contiguous tensor to zero (memset, or cuMemsetD8 on CUDA; complete on return).
  void zero_() const;

  // The owner of the memory (shared by every handle); for code that must keep the memory alive.
  const std::shared_ptr<void>& storage() const { return storage_; }

 private:
  Tensor(std::shared_ptr<void> storage, void* data, Device device, DType dtype, Shape shape, Shape strides,
         int64_t numel);
  void check_defined(const char* what) const;
  void check_element_type(size_t element_bytes) const;

  bool defined_ = false;
  std::shared_ptr<void> storage_;  // may be empty for a wrap() without keep_alive
  void* data_ = nullptr;
  Device device_;
  DType dtype_ = DType::F32;
  Shape shape_;
  Shape strides_;
  int64_t numel_ = 0;
};

}  // namespace rt
