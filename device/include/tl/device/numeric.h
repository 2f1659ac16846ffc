// Narrow numeric storage types shared by host code, the CPU twin and CUDA device code.
//
// Each type is a trivially copyable struct that only holds the raw bits; arithmetic happens in float.
//   tl::half_t            IEEE binary16 (1.5.10, bias 15, inf/NaN, max 65504)
//   tl::bfloat16_t        bfloat16 (1.8.7, the top half of a float)
//   tl::float8_e4m3_t     OCP FP8 E4M3FN (1.4.3, bias 7, no infinities, NaN = S.1111.111, max 448)
//   tl::float8_e5m2_t     OCP FP8 E5M2 (1.5.2, bias 15, IEEE-like inf/NaN, max 57344)
//   tl::float4_e2m1_t     OCP FP4 E2M1 (1.2.1, bias 1, no inf/NaN, max 6), one value in the low nibble
//   tl::float4_e2m1x2_t   two E2M1 values in one byte, element 0 in the low nibble
//   tl::ue8m0_t           unsigned power-of-two scale: value = 2^(bits - 127), bits 0xFF = NaN
//
// Conversions from float are exact round-to-nearest-even, subnormals included. Overflow:
//   half, bf16, e5m2: to infinity (IEEE); e5m2 also has from_float_satfinite (saturates to +-57344).
//   e4m3, e2m1: saturate to the largest finite value ("satfinite", like cvt.rn.satfinite); an
//   infinite input saturates too.
//   NaN stays NaN: half and bf16 keep the sign and the top payload bits (quieting if needed); e4m3
//   and e5m2 give 0x7F (0.1111.111 / 0.11111.11, the canonical NaN NVIDIA's cvt produces, whatever
//   the input's sign). E2M1 has no NaN: NaN gives +6 (0x7), the positive maximum, as cvt does.
// The float8/float4 conversions match cuda_fp8.h / cuda_fp4.h (__nv_cvt_float_to_fp8 with
// __NV_SATFINITE for e4m3, __NV_NOSAT / __NV_SATFINITE for e5m2, __nv_cvt_float_to_fp4) bit for bit.
// Conversions to float are exact for every bit pattern (half and bf16 NaN payloads are preserved).
//
// Generic code converts with tl::to_float(x) and tl::from_float<T>(float); both also accept float
// (identity) and the integer types used as tensor elements.
//
// This header is shared with CUDA (nvcc and NVRTC): host-only code is guarded, shared functions are
// TL_HOST_DEVICE, and nothing is included when __CUDACC_RTC__ is defined.
#pragma once

#if !defined(__CUDACC_RTC__)
#include <cstdint>
#endif
// Host code built for a CPU with F16C converts half precision in one instruction (the CPU
// backend's kernels store float16 tensors element by element).
#if !defined(__CUDACC__) && defined(__F16C__)
#include <immintrin.h>
#define TL_HOST_F16C 1
#endif

#ifndef TL_HOST_DEVICE
#if defined(__CUDACC__)
#define TL_HOST_DEVICE __host__ __device__
#else
#define TL_HOST_DEVICE
#endif
#endif

namespace tl {

#if defined(__CUDACC_RTC__)
// NVRTC has no <cstdint>: the host's spellings (LP64 Linux: int64_t is long), so tl::int64_t is
// the same type as the host's std::int64_t and as a prelude's `typedef long int64_t`.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
#if defined(_WIN32)
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
typedef long int64_t;
typedef unsigned long uint64_t;
#endif
#else
using std::int16_t;
using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::uint16_t;
using std::uint32_t;
using std::uint64_t;
using std::uint8_t;
#endif

namespace detail {

TL_HOST_DEVICE inline uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#elif defined(__CUDACC__)
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof(u));
  return u;
#else
  return __builtin_bit_cast(uint32_t, f);
#endif
}

TL_HOST_DEVICE inline float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#elif defined(__CUDACC__)
  float f;
  __builtin_memcpy(&f, &u, sizeof(f));
  return f;
#else
  return __builtin_bit_cast(float, u);
#endif
}

// Rounds a finite, non-negative float (given by its bits `a`, sign cleared) to a format with
// kExpBits exponent bits (bias 2^(kExpBits-1)-1) and kManBits mantissa bits, round-to-nearest-even,
// subnormals exact. Returns the magnitude bits (exponent << kManBits | mantissa) WITHOUT range
// clamping: a result above the format's largest finite pattern means overflow (the caller decides).
// Float subnormals are below half the smallest subnormal of every format this is used for (the
// formats here have at most 5 exponent bits), so they round to zero.
template <int kExpBits, int kManBits>
TL_HOST_DEVICE inline uint32_t round_magnitude(uint32_t a) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static_assert(kExpBits <= 5 && kManBits <= 10, "only for formats narrower than half");
  const int exp = int(a >> 23);
  if (exp == 0) return 0u;
  const uint32_t mant = a & 0x7fffffu;
  const int te = exp - 127 + kBias;  // biased exponent in the target format
  if (te >= 1) {
    constexpr int kShift = 23 - kManBits;
    uint32_t v = (uint32_t(te) << kManBits) | (mant >> kShift);
    const uint32_t rem = mant & ((1u << kShift) - 1u);
    constexpr uint32_t kHalf = 1u << (kShift - 1);
    if (rem > kHalf || (rem == kHalf && (v & 1u))) ++v;  // a carry into the exponent is correct
    return v;
  }
  // Subnormal in the target: value / smallest_subnormal = sig * 2^-(24 - kManBits - te).
  const uint32_t sig = mant | 0x800000u;
  const int shift = 24 - kManBits - te;
  if (shift > 24) return 0u;  // below half the smallest subnormal
  uint32_t v = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (v & 1u))) ++v;  // may round up to the smallest normal: correct
  return v;
}

// Decodes a format without inf/NaN handling (caller handles specials): sign bit at kExpBits+kManBits.
template <int kExpBits, int kManBits>
TL_HOST_DEVICE inline float decode_finite(uint32_t bits) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  constexpr int kWidth = kExpBits + kManBits;
  const uint32_t sign = ((bits >> kWidth) & 1u) << 31;
  const uint32_t exp = (bits >> kManBits) & ((1u << kExpBits) - 1u);
  const uint32_t man = bits & ((1u << kManBits) - 1u);
  if (exp == 0) {
    // man * 2^(1 - bias - kManBits), exact in float; the scale is built from bits.
    const float scale = bits_to_float(uint32_t(127 + 1 - kBias - kManBits) << 23);
    return bits_to_float(float_to_bits(float(man) * scale) | sign);
  }
  return bits_to_float(sign | ((exp + uint32_t(127 - kBias)) << 23) | (man << (23 - kManBits)));
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
struct half_t {
  uint16_t bits;

  static constexpr float kMax = 65504.0f;

  half_t() = default;
  TL_HOST_DEVICE explicit half_t(float f) : bits(from_float(f).bits) {}
  TL_HOST_DEVICE explicit operator float() const { return to_float(); }

  TL_HOST_DEVICE static half_t from_bits(uint16_t b) {
    half_t h;
    h.bits = b;
    return h;
  }
  TL_HOST_DEVICE static half_t from_float(float f) {
    const uint32_t u = detail::float_to_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {  // NaN: keep the top payload bits, force quiet if they vanish
      uint32_t payload = (a >> 13) & 0x3ffu;
      if (payload == 0) payload = 0x200u;
      return from_bits(uint16_t(sign | 0x7c00u | payload));
    }
#if defined(TL_HOST_F16C)
    (void)sign;
    return from_bits(uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)));  // same rounding and overflow rules
#else
    uint32_t v = detail::round_magnitude<5, 10>(a);
    if (v > 0x7c00u) v = 0x7c00u;  // overflow (and infinity) -> infinity
    return from_bits(uint16_t(sign | v));
#endif
  }
  TL_HOST_DEVICE float to_float() const {
    const uint32_t b = bits;
    if ((b & 0x7c00u) == 0x7c00u)  // inf / NaN, payload preserved
      return detail::bits_to_float(((b & 0x8000u) << 16) | 0x7f800000u | ((b & 0x3ffu) << 13));
#if defined(TL_HOST_F16C)
    return _cvtsh_ss(uint16_t(b));
#else
    return detail::decode_finite<5, 10>(b);
#endif
  }
};

// ---------------------------------------------------------------------------------------------
struct bfloat16_t {
  uint16_t bits;

  static constexpr float kMax = 3.38953139e38f;  // 0x7F7F

  bfloat16_t() = default;
  TL_HOST_DEVICE explicit bfloat16_t(float f) : bits(from_float(f).bits) {}
  TL_HOST_DEVICE explicit operator float() const { return to_float(); }

  TL_HOST_DEVICE static bfloat16_t from_bits(uint16_t b) {
    bfloat16_t h;
    h.bits = b;
    return h;
  }
  TL_HOST_DEVICE static bfloat16_t from_float(float f) {
    const uint32_t u = detail::float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return from_bits(uint16_t((u >> 16) | 0x40u));  // quiet NaN
    // Same exponent range as float: rounding the low 16 bits is exact RNE, subnormals and overflow
    // to infinity included.
    return from_bits(uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));
  }
  TL_HOST_DEVICE float to_float() const { return detail::bits_to_float(uint32_t(bits) << 16); }
};

// ---------------------------------------------------------------------------------------------
struct float8_e4m3_t {
  uint8_t bits;

  static constexpr float kMax = 448.0f;

  float8_e4m3_t() = default;
  TL_HOST_DEVICE explicit float8_e4m3_t(float f) : bits(from_float(f).bits) {}
  TL_HOST_DEVICE explicit operator float() const { return to_float(); }

  TL_HOST_DEVICE static float8_e4m3_t from_bits(uint8_t b) {
    float8_e4m3_t h;
    h.bits = b;
    return h;
  }
  // Round to nearest even, saturating to +-448 (satfinite); NaN -> 0x7F.
  TL_HOST_DEVICE static float8_e4m3_t from_float(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    // The instruction with the same rounding (tests/device/cuda/numeric_cvt_check.cu compares the
    // two): one cvt where the bit work below takes ~15 instructions (FP8 attention casts every P).
    uint16_t pair;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(f));  // f -> the low byte
    return from_bits(uint8_t(pair));
#endif
    const uint32_t u = detail::float_to_bits(f);
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return from_bits(0x7fu);  // canonical NaN, as cvt gives
    uint32_t v = detail::round_magnitude<4, 3>(a);
    if (v > 0x7eu) v = 0x7eu;
    return from_bits(uint8_t(sign | v));
  }
  TL_HOST_DEVICE float to_float() const {
    if ((bits & 0x7fu) == 0x7fu) return detail::bits_to_float(0x7fc00000u | (uint32_t(bits & 0x80u) << 24));
    return detail::decode_finite<4, 3>(bits);
  }
};

// ---------------------------------------------------------------------------------------------
struct float8_e5m2_t {
  uint8_t bits;

  static constexpr float kMax = 57344.0f;

  float8_e5m2_t() = default;
  TL_HOST_DEVICE explicit float8_e5m2_t(float f) : bits(from_float(f).bits) {}
  TL_HOST_DEVICE explicit operator float() const { return to_float(); }

  TL_HOST_DEVICE static float8_e5m2_t from_bits(uint8_t b) {
    float8_e5m2_t h;
    h.bits = b;
    return h;
  }
  // Round to nearest even; overflow goes to infinity (IEEE); NaN -> 0x7F.
  TL_HOST_DEVICE static float8_e5m2_t from_float(float f) {
    const uint32_t u = detail::float_to_bits(f);
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return from_bits(0x7fu);  // canonical NaN, as cvt gives
    uint32_t v = detail::round_magnitude<5, 2>(a);
    if (v > 0x7cu) v = 0x7cu;
    return from_bits(uint8_t(sign | v));
  }
  // Round to nearest even, saturating to +-57344 (cvt.rn.satfinite.e5m2x2); infinity saturates too.
  TL_HOST_DEVICE static float8_e5m2_t from_float_satfinite(float f) {
    const uint32_t u = detail::float_to_bits(f);
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return from_bits(0x7fu);  // canonical NaN, as cvt gives
    uint32_t v = detail::round_magnitude<5, 2>(a);
    if (v > 0x7bu) v = 0x7bu;
    return from_bits(uint8_t(sign | v));
  }
  TL_HOST_DEVICE float to_float() const {
    const uint32_t b = bits;
    if ((b & 0x7cu) == 0x7cu)
      return detail::bits_to_float(((b & 0x80u) << 24) | 0x7f800000u | ((b & 0x3u) << 21));
    return detail::decode_finite<5, 2>(b);
  }
};

// ---------------------------------------------------------------------------------------------
namespace detail {
// Round-to-nearest-even, satfinite E2M1 nibble of a float (NaN -> +6).
TL_HOST_DEVICE inline uint8_t e2m1_from_float(float f) {
  const uint32_t u = detail::float_to_bits(f);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7u;
  uint32_t v = detail::round_magnitude<2, 1>(a);
  if (v > 0x7u) v = 0x7u;
  return uint8_t(((u >> 28) & 0x8u) | v);
}
TL_HOST_DEVICE inline float e2m1_to_float(uint32_t nibble) {
  // 0, 0.5, 1, 1.5, 2, 3, 4, 6 as float bits (a table in registers works on host and device).
  const uint32_t mag = nibble & 0x7u;
  const uint32_t e = mag >> 1, m = mag & 1u;
  const uint32_t fb = mag == 0 ? 0u : mag == 1 ? 0x3f000000u : (((e + 126u) << 23) | (m << 22));
  return detail::bits_to_float(fb | ((nibble & 0x8u) << 28));
}
}  // namespace detail

struct float4_e2m1_t {
  uint8_t bits;  // value in the low nibble; the high nibble is zero

  static constexpr float kMax = 6.0f;

  float4_e2m1_t() = default;
  TL_HOST_DEVICE explicit float4_e2m1_t(float f) : bits(detail::e2m1_from_float(f)) {}
  TL_HOST_DEVICE explicit operator float() const { return to_float(); }

  TL_HOST_DEVICE static float4_e2m1_t from_bits(uint8_t b) {
    float4_e2m1_t h;
    h.bits = uint8_t(b & 0xfu);
    return h;
  }
  TL_HOST_DEVICE static float4_e2m1_t from_float(float f) { return from_bits(detail::e2m1_from_float(f)); }
  TL_HOST_DEVICE float to_float() const { return detail::e2m1_to_float(bits); }
};

struct float4_e2m1x2_t {
  uint8_t bits;  // element 0 in bits 0..3, element 1 in bits 4..7

  static constexpr float kMax = 6.0f;

  float4_e2m1x2_t() = default;

  TL_HOST_DEVICE static float4_e2m1x2_t from_bits(uint8_t b) {
    float4_e2m1x2_t h;
    h.bits = b;
    return h;
  }
  TL_HOST_DEVICE static float4_e2m1x2_t from_float(float x0, float x1) {
    return from_bits(uint8_t(detail::e2m1_from_float(x0) | (detail::e2m1_from_float(x1) << 4)));
  }
  TL_HOST_DEVICE uint8_t nibble(int i) const { return uint8_t((bits >> (4 * i)) & 0xfu); }
  TL_HOST_DEVICE void set_nibble(int i, uint8_t n) {
    const int s = 4 * i;
    bits = uint8_t((bits & ~(0xfu << s)) | ((n & 0xfu) << s));
  }
  TL_HOST_DEVICE float get(int i) const { return detail::e2m1_to_float(nibble(i)); }
  TL_HOST_DEVICE void set(int i, float v) { set_nibble(i, detail::e2m1_from_float(v)); }
  TL_HOST_DEVICE float4_e2m1_t element(int i) const { return float4_e2m1_t::from_bits(nibble(i)); }
};

// ---------------------------------------------------------------------------------------------
// UE8M0: the biased exponent of a float alone. bits b in [0, 254] -> 2^(b-127); 255 -> NaN.
// 2^-127 (b = 0) is a float subnormal and decodes exactly.
struct ue8m0_t {
  uint8_t bits;

  ue8m0_t() = default;

  TL_HOST_DEVICE static ue8m0_t from_bits(uint8_t b) {
    ue8m0_t h;
    h.bits = b;
    return h;
  }
  // 2^e for e in [-127, 127] (clamped).
  TL_HOST_DEVICE static ue8m0_t from_exponent(int e) {
    e = e < -127 ? -127 : e > 127 ? 127 : e;
    return from_bits(uint8_t(e + 127));
  }
  // Nearest power of two to |x| (ties between 2^e and 2^(e+1), i.e. x = 1.5 * 2^e, go to the even
  // code, as RNE on a format with no mantissa bits). Saturates to [2^-127, 2^127]: zero and values
  // below give 2^-127, infinity gives 2^127. NaN -> 0xFF. The sign is ignored.
  TL_HOST_DEVICE static ue8m0_t from_float(float x) {
    const uint32_t a = detail::float_to_bits(x) & 0x7fffffffu;
    if (a > 0x7f800000u) return from_bits(0xffu);
    if (a < 0x00800000u) return from_bits(a > 0x00600000u ? 1u : 0u);  // float subnormal: 2^-127 or 2^-126
    uint32_t e = a >> 23;
    const uint32_t mant = a & 0x7fffffu;
    if (mant > 0x400000u || (mant == 0x400000u && (e & 1u))) ++e;
    return from_bits(uint8_t(e > 254u ? 254u : e));
  }
  // Smallest power of two >= |x| (DeepGEMM's ceil_to_ue8m0 for scale factors: x / scale never
  // exceeds the target range). Saturates to [2^-127, 2^127]; NaN -> 0xFF.
  TL_HOST_DEVICE static ue8m0_t from_float_ceil(float x) {
    const uint32_t a = detail::float_to_bits(x) & 0x7fffffffu;
    if (a > 0x7f800000u) return from_bits(0xffu);
    if (a < 0x00800000u) return from_bits(a > 0x00400000u ? 1u : 0u);
    uint32_t e = a >> 23;
    if (a & 0x7fffffu) ++e;
    return from_bits(uint8_t(e > 254u ? 254u : e));
  }
  TL_HOST_DEVICE int exponent() const { return int(bits) - 127; }
  TL_HOST_DEVICE float to_float() const {
    if (bits == 0xffu) return detail::bits_to_float(0x7fc00000u);
    if (bits == 0u) return detail::bits_to_float(0x00400000u);
    return detail::bits_to_float(uint32_t(bits) << 23);
  }
};

// ---------------------------------------------------------------------------------------------
// Generic conversions: tl::to_float(x) and tl::from_float<T>(float) for every element type.
TL_HOST_DEVICE inline float to_float(float x) { return x; }
TL_HOST_DEVICE inline float to_float(double x) { return float(x); }
TL_HOST_DEVICE inline float to_float(half_t x) { return x.to_float(); }
TL_HOST_DEVICE inline float to_float(bfloat16_t x) { return x.to_float(); }
TL_HOST_DEVICE inline float to_float(float8_e4m3_t x) { return x.to_float(); }
TL_HOST_DEVICE inline float to_float(float8_e5m2_t x) { return x.to_float(); }
TL_HOST_DEVICE inline float to_float(float4_e2m1_t x) { return x.to_float(); }
TL_HOST_DEVICE inline float to_float(ue8m0_t x) { return x.to_float(); }
TL_HOST_DEVICE inline float to_float(int8_t x) { return float(x); }
TL_HOST_DEVICE inline float to_float(uint8_t x) { return float(x); }
TL_HOST_DEVICE inline float to_float(int16_t x) { return float(x); }
TL_HOST_DEVICE inline float to_float(int32_t x) { return float(x); }
TL_HOST_DEVICE inline float to_float(int64_t x) { return float(x); }

// A double or a wide integer as a float rounded to odd: toward zero, with the last bit set where
// that is inexact. A narrow format rounding that float to nearest gets what rounding the value itself
// would: float keeps 13 or more bits past every narrow format's (half 11, bf16 8), and the set last
// bit stands for the bits cut off, so no tie appears where there was none. Through a float rounded
// to nearest, double 1 + 2^-8 + 2^-40 became bf16 1.0 (not 1 + 2^-7), and int 2^25 + 2^17 + 1 became
// bf16 2^25 (not 2^25 + 2^18). Generated code converts float64 and 32/64-bit integers to the narrow
// formats through these, and the compiler folds constants the same way.
TL_HOST_DEVICE inline float to_float_odd(double x) {
  float f = float(x);
  const double back = double(f);
  if (back != x && x == x) {  // inexact (NaN and infinities convert exactly)
    uint32_t u = detail::float_to_bits(f);
    if ((back < 0 ? -back : back) > (x < 0 ? -x : x)) --u;  // the float next to it toward zero
    f = detail::bits_to_float(u | 1u);
  }
  return f;
}
TL_HOST_DEVICE inline float to_float_odd(uint64_t x) {
  if (x < (uint64_t(1) << 24)) return float(x);  // exact
#if defined(__CUDA_ARCH__)
  const int shift = 40 - __clzll(static_cast<long long>(x));  // the bits past the float's 24
#else
  const int shift = 40 - __builtin_clzll(x);
#endif
  const uint64_t kept = (x >> shift) | ((x & ((uint64_t(1) << shift) - 1)) != 0 ? 1u : 0u);
  return float(kept) * detail::bits_to_float(uint32_t(127 + shift) << 23);  // both exact
}
TL_HOST_DEVICE inline float to_float_odd(int64_t x) {
  const float m = to_float_odd(x < 0 ? uint64_t(0) - uint64_t(x) : uint64_t(x));
  return x < 0 ? -m : m;
}

namespace detail {
// Round to nearest even and saturate to [lo, hi]; NaN -> 0 (like cvt.rni.sat).
TL_HOST_DEVICE inline float round_sat(float x, float lo, float hi) {
  if (!(x == x)) return 0.0f;
  x = x < lo ? lo : x > hi ? hi : x;
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return __builtin_rintf(x);  // default rounding mode: nearest even
#endif
}
}  // namespace detail

template <class T>
TL_HOST_DEVICE inline T from_float(float x) {
  return T::from_float(x);
}
template <>
TL_HOST_DEVICE inline float from_float<float>(float x) {
  return x;
}
template <>
TL_HOST_DEVICE inline double from_float<double>(float x) {
  return double(x);
}
template <>
TL_HOST_DEVICE inline int8_t from_float<int8_t>(float x) {
  return int8_t(detail::round_sat(x, -128.0f, 127.0f));
}
template <>
TL_HOST_DEVICE inline uint8_t from_float<uint8_t>(float x) {
  return uint8_t(detail::round_sat(x, 0.0f, 255.0f));
}
template <>
TL_HOST_DEVICE inline int16_t from_float<int16_t>(float x) {
  return int16_t(detail::round_sat(x, -32768.0f, 32767.0f));
}
template <>
TL_HOST_DEVICE inline int32_t from_float<int32_t>(float x) {
  // 2147483520 is the largest float below 2^31.
  return int32_t(detail::round_sat(x, -2147483648.0f, 2147483520.0f));
}
template <>
TL_HOST_DEVICE inline int64_t from_float<int64_t>(float x) {
  return int64_t(detail::round_sat(x, -9223372036854775808.0f, 9223371487098961920.0f));
}


// ---------------------------------------------------------------------------------------------
namespace detail {
constexpr double pow2(int n) { return n == 0 ? 1.0 : 2.0 * pow2(n - 1); }
}  // namespace detail
// An integer type's range as trunc_to needs it: lo, the minimum, and hi_excl, the power of two past
// the maximum, both exact as doubles (and as floats).
template <class T>
struct IntRange {
  static constexpr bool kSigned = T(-1) < T(0);
  static constexpr int kBits = 8 * int(sizeof(T));
  static constexpr double hi_excl = detail::pow2(kSigned ? kBits - 1 : kBits);
  static constexpr double lo = kSigned ? -hi_excl : 0.0;
  static constexpr T max = T(kSigned ? ~(uint64_t(1) << (kBits - 1)) : ~uint64_t(0));
};
// A cast from float (or double) to an integer type, as T.cast and the implicit conversions of
// generated code do it, and as the compiler folds constants: toward zero, saturating at the type's
// range, NaN -> 0 -- PTX's cvt.rzi for 32- and 64-bit results. C++ leaves an out-of-range
// conversion undefined (x86 gives the type's minimum, CUDA's 8-bit casts keep the low byte of a
// 32-bit conversion), so the CPU and the GPU disagreed without it.
template <class T, class F>
TL_HOST_DEVICE inline T trunc_to(F x) {
  if (!(x == x)) return T(0);
  if (x <= F(IntRange<T>::lo)) return T(IntRange<T>::lo);  // the bounds are exact in float and double
  if (x >= F(IntRange<T>::hi_excl)) return IntRange<T>::max;
  return T(x);
}

}  // namespace tl
