// Float math helpers for generated CPU code: only what <cmath> does not already spell the same way
// (the CUDA side has the same names as intrinsics or in its own header).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tl/device/numeric.h"

namespace tl::cpu {

inline float exp2f_(float x) { return std::exp2(x); }
inline float log2f_(float x) { return std::log2(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

template <class T>
constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Special values of every element type: infinity (formats that have one), the largest finite value
// and the lowest finite value (-max for the float formats).
template <class T>
inline T infinity() {
  if constexpr (std::is_same_v<T, half_t>) return half_t::from_bits(0x7c00);
  else if constexpr (std::is_same_v<T, bfloat16_t>) return bfloat16_t::from_bits(0x7f80);
  else if constexpr (std::is_same_v<T, float8_e5m2_t>) return float8_e5m2_t::from_bits(0x7c);
  else {
    static_assert(std::numeric_limits<T>::has_infinity, "this type has no infinity");
    return std::numeric_limits<T>::infinity();
  }
}

template <class T>
inline T max_value() {
  if constexpr (std::is_same_v<T, half_t>) return half_t::from_bits(0x7bff);
  else if constexpr (std::is_same_v<T, bfloat16_t>) return bfloat16_t::from_bits(0x7f7f);
  else if constexpr (std::is_same_v<T, float8_e4m3_t>) return float8_e4m3_t::from_bits(0x7e);
  else if constexpr (std::is_same_v<T, float8_e5m2_t>) return float8_e5m2_t::from_bits(0x7b);
  else if constexpr (std::is_same_v<T, float4_e2m1_t>) return float4_e2m1_t::from_bits(0x7);
  else return std::numeric_limits<T>::max();
}

template <class T>
inline T min_value() {
  if constexpr (std::is_same_v<T, half_t>) return half_t::from_bits(0xfbff);
  else if constexpr (std::is_same_v<T, bfloat16_t>) return bfloat16_t::from_bits(0xff7f);
  else if constexpr (std::is_same_v<T, float8_e4m3_t>) return float8_e4m3_t::from_bits(0xfe);
  else if constexpr (std::is_same_v<T, float8_e5m2_t>) return float8_e5m2_t::from_bits(0xfb);
  else if constexpr (std::is_same_v<T, float4_e2m1_t>) return float4_e2m1_t::from_bits(0xf);
  else return std::numeric_limits<T>::lowest();
}

}  // namespace tl::cpu
