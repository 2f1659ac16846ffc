// Register-level conversions of FP32 accumulators to storage types, two values at a time.
//
// Why: epilogues turn accumulator pairs (adjacent columns of a wgmma fragment) into one 32-bit
// word of two 16-bit outputs; cvt.rn.{bf16x2,f16x2}.f32 does both in one instruction, with the
// same round-to-nearest-even as tl::from_float (tl/device/numeric.h) and NaN/inf preserved. The
// same for e4m3 pairs (16 bits) from sm_89.
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

// Bits of {lo, hi} in e4m3 (satfinite, as tl::float8_e4m3_t::from_float), `lo` in the low byte:
// one cvt.rn.satfinite.e4m3x2.f32 from sm_89 (a cast fragment of FP8 attention's P, two at a time).
TL_DEVICE uint16_t pack2_e4m3(float lo, float hi) {
#if __CUDA_ARCH__ >= 890
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));  // first source -> upper byte
  return r;
#else
  return uint16_t(float8_e4m3_t::from_float(lo).bits | (uint16_t(float8_e4m3_t::from_float(hi).bits) << 8));
#endif
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
