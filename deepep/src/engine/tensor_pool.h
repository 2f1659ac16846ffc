// A caching allocator for the tensors and scratch of the communication calls, on the host or on
// one CUDA device. Outputs of dispatch/combine are fresh tensors every call; allocating them with
// malloc would map and zero new pages every time (glibc maps blocks above 32 MiB and unmaps them on
// free), and cuMemAlloc/cuMemFree cost tens of microseconds and synchronize the device, more than
// moving the data. Freed blocks return here and serve later calls of similar sizes; host blocks of
// 2 MiB and more are 2 MiB aligned and advised for transparent huge pages. A device block is reused
// by the next call's kernels on the communicator's stream: as with PyTorch's caching allocator, a
// tensor must not be freed while work on another stream still uses it.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "rt/tensor.h"

namespace deepep {

class TensorPool {
 public:
  explicit TensorPool(rt::Device device = rt::Device::cpu());
  // An uninitialized contiguous tensor on the pool's device whose storage returns to the pool when
  // released.
  rt::Tensor empty(const rt::Shape& shape, rt::DType dtype);
  size_t cached_bytes() const;

 private:
  struct State {
    rt::Device device;
    std::mutex mutex;
    std::multimap<size_t, void*> free;  // capacity -> block
    size_t cached = 0;
    ~State();
  };
  std::shared_ptr<State> state_;
};

}  // namespace deepep
