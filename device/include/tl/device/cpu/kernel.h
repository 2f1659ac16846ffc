// Small helpers the CPU code generator's output calls: Python's floor division and modulo, rounding
// a float through a narrow format, atomic accumulation into any element type, packed FP4 element
// access, and aligned heap buffers for tensors and tiles too large for the stack.
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

namespace tl::cpu {

// Python's // and % on integers (round toward negative infinity).
template <class T>
inline T floordiv(T a, T b) {
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <class T>
inline T floormod(T a, T b) {
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
inline float floordiv(float a, float b) { return std::floor(a / b); }
inline double floordiv(double a, double b) { return std::floor(a / b); }
inline float floormod(float a, float b) { return a - std::floor(a / b) * b; }
inline double floormod(double a, double b) { return a - std::floor(a / b) * b; }

// The value a float takes once stored as T (T is a narrow float format).
template <class T>
inline float round_to(float x) {
  return tl::to_float(tl::from_float<T>(x));
}

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

// Element i of a packed FP4 array (two values per byte, element 0 in the low nibble).
inline float load_fp4(const uint8_t* base, int64_t i) {
  return tl::float4_e2m1_t::from_bits(static_cast<uint8_t>((base[i >> 1] >> ((i & 1) * 4)) & 0xF)).to_float();
}
inline void store_fp4(uint8_t* base, int64_t i, float v) {
  uint8_t nibble = tl::float4_e2m1_t::from_float(v).bits & 0xF;
  uint8_t& byte = base[i >> 1];
  byte = (i & 1) ? static_cast<uint8_t>((byte & 0x0F) | (nibble << 4)) : static_cast<uint8_t>((byte & 0xF0) | nibble);
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
