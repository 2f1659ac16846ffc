// A caching allocator for host tensors and scratch of the communication calls. Outputs of
// dispatch/combine are fresh tensors every call; allocating them with malloc would map and zero new
// pages every time (glibc maps blocks above 32 MiB and unmaps them on free), which costs more than
// moving the data. Freed blocks return here and serve later calls of similar sizes; blocks of 2 MiB
// and more are 2 MiB aligned and advised for transparent huge pages.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "rt/tensor.h"

namespace deepep {

class HostPool {
 public:
  HostPool();
  // An uninitialized contiguous CPU tensor whose storage returns to the pool when released.
  rt::Tensor empty(const rt::Shape& shape, rt::DType dtype);
  size_t cached_bytes() const;

 private:
  struct State {
    std::mutex mutex;
    std::multimap<size_t, void*> free;  // capacity -> block
    size_t cached = 0;
    ~State();
  };
  std::shared_ptr<State> state_;
};

}  // namespace deepep
