// Helpers the CPU code generator's output calls beyond tl/device/scalar.h (which host and device
// share): atomic accumulation into any element type, and aligned heap buffers for tensors and
// tiles too large for the stack.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "tl/device/numeric.h"
#include "tl/device/scalar.h"

namespace tl::cpu {

// *p += v, atomically with respect to other threads; any element type (narrow floats through
// their bits with a compare-and-swap loop).
template <class T>
inline void atomic_add(T* p, float v) {
  if constexpr (std::is_arithmetic_v<T>) {
    std::atomic_ref<T>(*p).fetch_add(static_cast<T>(v), std::memory_order_relaxed);
  } else {
    using Bits = decltype(p->bits);
    std::atomic_ref<Bits> bits(p->bits);
    Bits expected = bits.load(std::memory_order_relaxed);
    while (!bits.compare_exchange_weak(expected, tl::from_float<T>(T::from_bits(expected).to_float() + v).bits, std::memory_order_relaxed)) {
    }
  }
}

// A 64-byte aligned array of n elements, freed at the end of its scope.
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
inline std::unique_ptr<T[], AlignedFree> alloc(int64_t n) {
  size_t bytes = (static_cast<size_t>(n > 0 ? n : 1) * sizeof(T) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  return std::unique_ptr<T[], AlignedFree>(static_cast<T*>(p));
}

}  // namespace tl::cpu
