// Scalar helpers shared by host (CPU backend) and device (CUDA backend) code that the code
// generators emit: Python's floor division and modulo, shifts by any amount, rounding a float
// through a narrow format, and element access of packed float4 arrays.
#pragma once

#if !defined(__CUDACC_RTC__)
#include <cmath>
#endif

#include "tl/device/numeric.h"

namespace tl {

// Infinity and a quiet NaN without <cmath> macros (NVRTC has none).
TL_HOST_DEVICE inline float float_inf() { return detail::bits_to_float(0x7f800000u); }
TL_HOST_DEVICE inline float float_nan() { return detail::bits_to_float(0x7fc00000u); }

// Python's // and % on integers (round toward negative infinity). By -1 the quotient is the
// negation, wrapping as two's complement (INT_MIN // -1 is INT_MIN, as the compiler folds it) and the
// remainder 0: C++'s INT_MIN / -1 is undefined and traps on x86. (A divisor of 0 is undefined on the
// GPU; the CPU backend checks it first, tl::cpu::divisor.)
template <class T>
TL_HOST_DEVICE inline T floordiv(T a, T b) {
  if (b == T(-1)) return T(uint64_t(0) - uint64_t(a));
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
}
// C's integer division (T.truncdiv; T.truncmod is a - q * b), with INT_MIN / -1 the wrapping
// negation as for floordiv.
template <class T>
TL_HOST_DEVICE inline T truncdiv(T a, T b) {
  return b == T(-1) ? T(uint64_t(0) - uint64_t(a)) : T(a / b);
}
template <class T>
TL_HOST_DEVICE inline T floormod(T a, T b) {
  if (b == T(-1)) return T(0);
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
}

// Python's // and % on floats, as CPython's float_divmod computes them (NumPy and PyTorch agree):
// the remainder is fmod's, which is exact, moved to the divisor's sign; the quotient is (a - r) / b,
// made integral. (a - floor(a / b) * b is not exact: its product is rounded, or fused into an fma
// by the C++ and CUDA compilers, and 1 % -1e-8 gave 6e-9, 9.2e18 % 2e9 more than 2e9.) By 0: a / b
// and NaN, as IEEE division gives them.
namespace detail {
TL_HOST_DEVICE inline float fmod_of(float a, float b) { return fmodf(a, b); }
TL_HOST_DEVICE inline double fmod_of(double a, double b) { return fmod(a, b); }
TL_HOST_DEVICE inline float floor_of(float a) { return floorf(a); }
TL_HOST_DEVICE inline double floor_of(double a) { return floor(a); }
TL_HOST_DEVICE inline float copysign_of(float a, float b) { return copysignf(a, b); }
TL_HOST_DEVICE inline double copysign_of(double a, double b) { return copysign(a, b); }

template <class F>
TL_HOST_DEVICE inline F python_divmod(F a, F b, F* mod) {
  F m = fmod_of(a, b);
  if (b == F(0)) {
    *mod = m;
    return a / b;
  }
  F div = (a - m) / b;
  if (m != F(0)) {
    if ((b < F(0)) != (m < F(0))) {
      m += b;
      div -= F(1);
    }
  } else {
    m = copysign_of(F(0), b);
  }
  *mod = m;
  if (div == F(0)) return copysign_of(F(0), a / b);
  F q = floor_of(div);
  return div - q > F(0.5) ? q + F(1) : q;
}
}  // namespace detail

TL_HOST_DEVICE inline float floordiv(float a, float b) {
  float m;
  return detail::python_divmod(a, b, &m);
}
TL_HOST_DEVICE inline double floordiv(double a, double b) {
  double m;
  return detail::python_divmod(a, b, &m);
}
TL_HOST_DEVICE inline float floormod(float a, float b) {
  float m;
  detail::python_divmod(a, b, &m);
  return m;
}
TL_HOST_DEVICE inline double floormod(double a, double b) {
  double m;
  detail::python_divmod(a, b, &m);
  return m;
}

// Shifts by a run-time amount, defined for every amount (C++ and CUDA leave an amount outside
// [0, width) undefined): a negative amount or one of at least the width shifts every bit out, so
// shl gives 0 and shr gives 0, or -1 for a negative x (the sign fills). Kernels shift int32 and
// int64 values (narrower integers are promoted to int32 first).
TL_HOST_DEVICE inline int32_t shl(int32_t x, int32_t s) { return uint32_t(s) < 32u ? int32_t(uint32_t(x) << s) : 0; }
TL_HOST_DEVICE inline int64_t shl(int64_t x, int64_t s) { return uint64_t(s) < 64u ? int64_t(uint64_t(x) << s) : 0; }
TL_HOST_DEVICE inline int32_t shr(int32_t x, int32_t s) { return x >> (uint32_t(s) < 32u ? s : 31); }
TL_HOST_DEVICE inline int64_t shr(int64_t x, int64_t s) { return x >> (uint64_t(s) < 64u ? s : 63); }

// max and min of floats as CUDA's fmaxf / fminf (IEEE maxNum / minNum): a NaN operand gives the
// other operand, so T.max and the max/min reductions skip NaNs on every target alike (std::max,
// which the CPU backend used, returned its first operand when either was NaN: the result depended
// on the order). The CPU backend emits these; CUDA kernels call fmaxf / fminf.
// Written as a comparison that gives b when either is NaN (one maxss / minss on x86) and a select
// of a where that was NaN, branch-free: a reduction's chain is ~20% slower than std::max's (other
// spellings measured 1.3-5x slower on this machine's compiler).
template <class F>
TL_HOST_DEVICE inline F max_num(F a, F b) {
  const F m = b < a ? a : b;
  return m != m ? a : m;
}
template <class F>
TL_HOST_DEVICE inline F min_num(F a, F b) {
  const F m = a < b ? a : b;
  return m != m ? a : m;
}

// The value a float takes once stored as T (T is a narrow float format).
template <class T>
TL_HOST_DEVICE inline float round_to(float x) {
  return tl::to_float(tl::from_float<T>(x));
}

// Element i of a packed float4 array (two values per byte, element 0 in the low nibble).
TL_HOST_DEVICE inline float load_fp4(const uint8_t* base, int64_t i) {
  return tl::float4_e2m1_t::from_bits(static_cast<uint8_t>((base[i >> 1] >> ((i & 1) * 4)) & 0xF)).to_float();
}
// Two elements share a byte and may be written by different threads: the nibble is replaced
// atomically (clear, then set: no other thread touches the same nibble).
TL_HOST_DEVICE inline void store_fp4(uint8_t* base, int64_t i, float v) {
  const unsigned nibble = tl::float4_e2m1_t::from_float(v).bits & 0xFu;
#if defined(__CUDA_ARCH__)
  // 32-bit atomics on the word holding the byte.
  uint8_t* byte = base + (i >> 1);
  auto* word = reinterpret_cast<unsigned int*>(reinterpret_cast<size_t>(byte) & ~size_t(3));
  const unsigned shift = unsigned(reinterpret_cast<size_t>(byte) & 3) * 8u + unsigned(i & 1) * 4u;
  atomicAnd(word, ~(0xFu << shift));
  atomicOr(word, nibble << shift);
#else
  uint8_t* byte = base + (i >> 1);
  const unsigned shift = unsigned(i & 1) * 4u;
  __atomic_fetch_and(byte, static_cast<uint8_t>(~(0xFu << shift)), __ATOMIC_RELAXED);
  __atomic_fetch_or(byte, static_cast<uint8_t>(nibble << shift), __ATOMIC_RELAXED);
#endif
}

}  // namespace tl
