// Register-level conversions of FP32 accumulators to storage types, two values at a time.
//
// Why: epilogues turn accumulator pairs (adjacent columns of a wgmma fragment) into one 32-bit
// word of two 16-bit outputs; cvt.rn.{bf16x2,f16x2}.f32 does both in one instruction, with the
// same round-to-nearest-even as tl::from_float (tl/device/numeric.h) and NaN/inf preserved.
#pragma once

#include "tl/device/cuda/arch.h"

namespace tl::cuda {

// Bits of {lo, hi} in the storage type T, `lo` in the low half (the lower address in memory).
template <class T>
TL_DEVICE uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (is_same_v<T, bfloat16_t>) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));  // first source -> upper half
  } else {
    static_assert(is_same_v<T, half_t>, "pack2: bfloat16_t or half_t");
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// One value in the storage type (float passes through).
template <class T>
TL_DEVICE T convert1(float x) {
  if constexpr (is_same_v<T, float>) {
    return x;
  } else if constexpr (is_same_v<T, bfloat16_t>) {
    uint16_t b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(x));
    return bfloat16_t::from_bits(b);
  } else {
    static_assert(is_same_v<T, half_t>, "convert1: float, bfloat16_t or half_t");
    uint16_t b;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(x));
    return half_t::from_bits(b);
  }
}

}  // namespace tl::cuda
