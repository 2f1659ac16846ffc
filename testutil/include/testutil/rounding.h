// Exact references for conversions into narrow float formats: a value rounded to `bits`
// significant bits, to nearest with ties to even, computed without any intermediate rounding
// (in the formats' normal range; the caller handles overflow and subnormals).
#pragma once

#include <cmath>
#include <cstdint>

namespace testutil {

inline double round_to_bits(double v, int bits) {  // exact in double for bits <= 52
  int e = 0;
  const double m = std::frexp(v, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits);
}

inline double round_to_bits(int64_t x, int bits) {  // exact for every int64 (bits <= 53)
  const uint64_t u = x < 0 ? uint64_t(0) - uint64_t(x) : uint64_t(x);
  int width = 0;
  while (width < 64 && (u >> width) != 0) ++width;
  if (width <= bits) return double(x);
  const int shift = width - bits;
  uint64_t kept = u >> shift;
  const uint64_t rem = u & ((uint64_t(1) << shift) - 1), half = uint64_t(1) << (shift - 1);
  if (rem > half || (rem == half && (kept & 1))) ++kept;
  const double r = std::ldexp(double(kept), shift);
  return x < 0 ? -r : r;
}

}  // namespace testutil
