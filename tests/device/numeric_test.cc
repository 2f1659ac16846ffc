// Numeric storage types: exhaustive decode checks, round trips, and round-to-nearest-even encoding
// checked against a reference that rounds in double over the list of representable values.
#include "tl/device/numeric.h"

#include <gtest/gtest.h>

#include "testutil/rounding.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace {

uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float ffrom(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Description of a format for the independent reference.
struct Format {
  const char* name;
  int exp_bits, man_bits;
  bool ieee_specials;  // top exponent = inf/NaN (half, bf16, e5m2)
  bool e4m3_nan;       // only S.1111.111 is NaN (e4m3fn)
  bool satfinite;      // overflow saturates to max instead of infinity
};

// Independent decoder: value of a (non-NaN) bit pattern by the textbook formula, in double.
double ref_decode(const Format& f, uint32_t bits, bool* is_nan) {
  const int width = f.exp_bits + f.man_bits;
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const bool neg = (bits >> width) & 1u;
  const uint32_t e = (bits >> f.man_bits) & ((1u << f.exp_bits) - 1u);
  const uint32_t m = bits & ((1u << f.man_bits) - 1u);
  *is_nan = false;
  double v;
  if (f.ieee_specials && e == (1u << f.exp_bits) - 1u) {
    if (m != 0) {
      *is_nan = true;
      return 0;
    }
    v = std::numeric_limits<double>::infinity();
  } else if (f.e4m3_nan && e == (1u << f.exp_bits) - 1u && m == (1u << f.man_bits) - 1u) {
    *is_nan = true;
    return 0;
  } else if (e == 0) {
    v = std::ldexp(double(m), 1 - bias - f.man_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(double(m), -f.man_bits), int(e) - bias);
  }
  return neg ? -v : v;
}

// Reference encoder: nearest representable value in double, ties to the even pattern.
struct RefEncoder {
  Format f;
  std::vector<std::pair<double, uint32_t>> values;  // non-negative finite values, ascending
  double max_finite = 0;
  uint32_t inf_bits = 0;  // valid when ieee_specials
  uint32_t nan_check_mask = 0;

  explicit RefEncoder(const Format& fmt) : f(fmt) {
    const int width = f.exp_bits + f.man_bits;
    for (uint32_t b = 0; b < (1u << width); ++b) {
      bool nan;
      const double v = ref_decode(f, b, &nan);
      if (nan) continue;
      if (std::isinf(v)) {
        inf_bits = b;
        continue;
      }
      values.push_back({v, b});
    }
    std::sort(values.begin(), values.end());
    max_finite = values.back().first;
  }

  // Returns the expected bits for x (sign bit at position width); x a float or a double.
  uint32_t encode(double x) const {
    const int width = f.exp_bits + f.man_bits;
    const uint32_t sign = uint32_t(std::signbit(x)) << width;
    const double a = std::fabs(x);
    if (std::isinf(a)) return f.satfinite ? (sign | values.back().second) : (sign | inf_bits);
    // Candidates: the representable neighbours, plus the "next" value past max (2^(emax+1)),
    // which stands for overflow.
    const double next_past_max = std::ldexp(1.0, std::ilogb(max_finite) + 1);
    auto it = std::lower_bound(values.begin(), values.end(), std::make_pair(a, 0u));
    if (it != values.end() && it->first == a) return sign | it->second;
    double lo_v, hi_v;
    uint32_t lo_b, hi_b;
    bool hi_is_overflow = false;
    if (it == values.end()) {
      lo_v = values.back().first;
      lo_b = values.back().second;
      hi_v = next_past_max;
      hi_b = lo_b + 1;  // the pattern after max: even-ness of the overflow code decides ties
      hi_is_overflow = true;
    } else {
      hi_v = it->first;
      hi_b = it->second;
      lo_v = (it - 1)->first;
      lo_b = (it - 1)->second;
    }
    uint32_t r;
    bool overflow = false;
    if (a - lo_v < hi_v - a) {
      r = lo_b;
    } else if (a - lo_v > hi_v - a) {
      r = hi_b;
      overflow = hi_is_overflow;
    } else {
      r = (lo_b & 1u) ? hi_b : lo_b;
      overflow = hi_is_overflow && r == hi_b;
    }
    if (hi_is_overflow && a > next_past_max) overflow = true;
    if (overflow) return f.satfinite ? (sign | values.back().second) : (sign | inf_bits);
    if (f.satfinite && a > max_finite) return sign | values.back().second;
    return sign | r;
  }

  // Interesting inputs: every representable value, the midpoints between neighbours, a float ulp
  // either side of each midpoint, and values around the overflow threshold.
  std::vector<float> special_inputs() const {
    std::vector<float> out;
    auto add = [&](double v) {
      const float fv = float(v);
      if (double(fv) != v) return;  // midpoints are exact in float for every format tested
      for (float s : {1.0f, -1.0f}) {
        out.push_back(s * fv);
        out.push_back(s * std::nextafter(fv, 0.0f));
        out.push_back(s * std::nextafter(fv, std::numeric_limits<float>::infinity()));
      }
    };
    for (size_t i = 0; i < values.size(); ++i) {
      add(values[i].first);
      if (i + 1 < values.size()) add(0.5 * (values[i].first + values[i + 1].first));
    }
    const double next_past_max = std::ldexp(1.0, std::ilogb(max_finite) + 1);
    add(0.5 * (max_finite + next_past_max));
    add(next_past_max);
    add(2 * next_past_max);
    add(0.25 * values[1].first);  // a quarter of the smallest subnormal
    add(0.5 * values[1].first);   // exactly half the smallest subnormal: ties to zero
    add(0.75 * values[1].first);
    return out;
  }

  // Random floats spread (log-uniformly) over the format's range and a bit beyond.
  std::vector<float> random_inputs(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    const int lo = std::ilogb(values[1].first) - 3, hi = std::ilogb(max_finite) + 3;
    std::uniform_int_distribution<int> e(lo, hi);
    std::uniform_int_distribution<uint32_t> mant(0, 0x7fffff), coin(0, 1), any(0, 0xffffffffu);
    std::vector<float> out;
    for (int i = 0; i < n; ++i) {
      if (i % 8 == 7) {  // fully random bit pattern (any exponent), NaNs skipped
        const float x = ffrom(any(rng));
        if (!std::isnan(x)) out.push_back(x);
        continue;
      }
      const int ex = std::clamp(e(rng), -126, 127);
      const float x = ffrom((uint32_t(ex + 127) << 23) | mant(rng) | (coin(rng) << 31));
      out.push_back(x);
    }
    return out;
  }
};

const Format kHalf{"half", 5, 10, true, false, false};
const Format kBf16{"bf16", 8, 7, true, false, false};
const Format kE4M3{"e4m3", 4, 3, false, true, true};
const Format kE5M2{"e5m2", 5, 2, true, false, false};
const Format kE5M2Sat{"e5m2 satfinite", 5, 2, true, false, true};
const Format kE2M1{"e2m1", 2, 1, false, false, true};

template <class Encode>
void check_encoder(const Format& fmt, Encode encode, int random_count) {
  RefEncoder ref(fmt);
  std::vector<float> inputs = ref.special_inputs();
  const std::vector<float> rnd = ref.random_inputs(random_count, 1234u + uint32_t(fmt.exp_bits * 31 + fmt.man_bits));
  inputs.insert(inputs.end(), rnd.begin(), rnd.end());
  for (float z : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::min()})
    inputs.push_back(z);
  int failures = 0;
  for (float x : inputs) {
    const uint32_t want = ref.encode(x);
    const uint32_t got = encode(x);
    if (got != want && failures++ < 10)
      ADD_FAILURE() << fmt.name << ": from_float(" << x << " = 0x" << std::hex << fbits(x) << ") = 0x" << got
                    << ", want 0x" << want;
  }
  EXPECT_EQ(failures, 0) << fmt.name << ": " << failures << " of " << inputs.size() << " inputs misrounded";
}

template <class T, class GetBits>
void check_decoder(const Format& fmt, GetBits make) {
  const int width = fmt.exp_bits + fmt.man_bits + 1;
  int failures = 0;
  for (uint32_t b = 0; b < (1u << width); ++b) {
    bool nan;
    const double want = ref_decode(fmt, b, &nan);
    const float got = make(b).to_float();
    const bool ok = nan ? std::isnan(got) : (double(got) == want && std::signbit(got) == std::signbit(want));
    if (!ok && failures++ < 10)
      ADD_FAILURE() << fmt.name << ": to_float(0x" << std::hex << b << ") = " << got << ", want " << want;
  }
  EXPECT_EQ(failures, 0);
}

TEST(Numeric, HalfAllPatternsRoundTripAndDecode) {
  check_decoder<tl::half_t>(kHalf, [](uint32_t b) { return tl::half_t::from_bits(uint16_t(b)); });
  for (uint32_t b = 0; b < 65536; ++b) {
    const tl::half_t h = tl::half_t::from_bits(uint16_t(b));
    const float f = h.to_float();
    ASSERT_EQ(tl::half_t::from_float(f).bits, b) << std::hex << "pattern 0x" << b;
    ASSERT_EQ(tl::from_float<tl::half_t>(tl::to_float(h)).bits, b);
  }
}

TEST(Numeric, HalfEncodeMatchesReference) {
  check_encoder(kHalf, [](float x) { return uint32_t(tl::half_t::from_float(x).bits); }, 400000);
}

#if defined(__F16C__)
TEST(Numeric, HalfEncodeMatchesF16C) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(0, 0xffffffffu);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t u = any(rng);
    // Concentrate on the half range: exponents 100..145.
    u = (u & 0x807fffffu) | ((100u + (u >> 23) % 46u) << 23);
    const float x = ffrom(u);
    const uint16_t hw = uint16_t(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
    ASSERT_EQ(tl::half_t::from_float(x).bits, hw) << "x=" << x;
  }
}
#endif

TEST(Numeric, HalfHandPicked) {
  EXPECT_EQ(tl::half_t::from_float(1.0f).bits, 0x3c00);
  EXPECT_EQ(tl::half_t::from_float(65504.0f).bits, 0x7bff);
  EXPECT_EQ(tl::half_t::from_float(65519.99f).bits, 0x7bff);  // below the midpoint 65520
  EXPECT_EQ(tl::half_t::from_float(65520.0f).bits, 0x7c00);   // tie -> even = infinity
  EXPECT_EQ(tl::half_t::from_float(1e10f).bits, 0x7c00);
  EXPECT_EQ(tl::half_t::from_float(-1e10f).bits, 0xfc00);
  EXPECT_EQ(tl::half_t::from_float(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(tl::half_t::from_float(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie -> even = 0
  EXPECT_EQ(tl::half_t::from_float(std::ldexp(3.0f, -26)).bits, 0x0001);  // 0.75 ulp -> 1
  EXPECT_EQ(tl::half_t::from_float(std::ldexp(3.0f, -25)).bits, 0x0002);  // 1.5 ulp tie -> even 2
  EXPECT_EQ(tl::half_t::from_float(std::ldexp(1023.5f, -24)).bits, 0x0400);  // rounds up into normal
  EXPECT_EQ(tl::half_t::from_float(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);  // tie -> even
  EXPECT_EQ(tl::half_t::from_float(1.0f + std::ldexp(3.0f, -11)).bits, 0x3c02);  // tie -> even
  EXPECT_EQ(tl::half_t::from_float(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(tl::half_t::from_float(std::nanf("")).to_float()));
  EXPECT_EQ(tl::half_t::from_float(std::nanf("")).bits & 0x7c00, 0x7c00);
  EXPECT_EQ(tl::half_t::from_float(ffrom(0x7f800001u)).bits, 0x7e00);  // payload lost -> quiet NaN, not inf
}

TEST(Numeric, Bf16AllPatternsRoundTripAndDecode) {
  check_decoder<tl::bfloat16_t>(kBf16, [](uint32_t b) { return tl::bfloat16_t::from_bits(uint16_t(b)); });
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = tl::bfloat16_t::from_bits(uint16_t(b)).to_float();
    uint32_t want = b;
    if (std::isnan(f)) want |= 0x40u;  // signalling NaNs come back quiet
    ASSERT_EQ(tl::bfloat16_t::from_float(f).bits, want) << std::hex << "pattern 0x" << b;
  }
}

TEST(Numeric, Bf16EncodeMatchesReference) {
  check_encoder(kBf16, [](float x) { return uint32_t(tl::bfloat16_t::from_float(x).bits); }, 400000);
  EXPECT_EQ(tl::bfloat16_t::from_float(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);  // tie -> even
  EXPECT_EQ(tl::bfloat16_t::from_float(1.0f + std::ldexp(3.0f, -8)).bits, 0x3f82);
  EXPECT_EQ(tl::bfloat16_t::from_float(std::numeric_limits<float>::max()).bits, 0x7f80);  // overflow -> inf
  EXPECT_EQ(tl::bfloat16_t::from_float(std::numeric_limits<float>::denorm_min()).bits, 0x0000);
  EXPECT_EQ(tl::bfloat16_t::from_float(ffrom(0x00018000u)).bits, 0x0002);  // subnormal tie -> even
}

// From double and from int64, through tl::to_float_odd: rounded once, as the reference rounds the
// exact value. Inputs crowd the formats' midpoints (a float rounded to nearest lands exactly on a
// midpoint from m (1 +- 2^-40), and the narrow rounding then ties to even: the double rounding
// to_float_odd exists to avoid) and spread log-uniformly with full 52-bit mantissas.
template <class T>
void check_wide_encoder(const Format& fmt) {
  RefEncoder ref(fmt);
  std::vector<double> inputs;
  for (size_t i = 0; i + 1 < ref.values.size(); ++i) {
    const double m = 0.5 * (ref.values[i].first + ref.values[i + 1].first);
    for (double rel : {0.0, 0x1p-40, -0x1p-40, 0x1p-30, -0x1p-30})
      for (double s : {1.0, -1.0}) inputs.push_back(s * m * (1 + rel));
  }
  std::mt19937_64 rng(20261201u + uint32_t(fmt.exp_bits * 31 + fmt.man_bits));
  const int lo = std::ilogb(ref.values[1].first) - 3, hi = std::ilogb(ref.max_finite) + 3;
  std::uniform_int_distribution<int> e(lo, hi);
  for (int i = 0; i < 200000; ++i) {
    const double mant = 1.0 + double(rng() >> 12) * 0x1p-52;
    inputs.push_back(std::ldexp((rng() & 1) ? -mant : mant, e(rng)));
  }
  for (double z : {0.0, -0.0, 1e300, -1e300, 1e-300, -1e-300, std::numeric_limits<double>::infinity()}) inputs.push_back(z);
  int failures = 0;
  for (double x : inputs) {
    const uint32_t want = ref.encode(x), got = uint32_t(T::from_float(tl::to_float_odd(x)).bits);
    if (got != want && failures++ < 10)
      ADD_FAILURE() << fmt.name << ": from_float(to_float_odd(" << std::hexfloat << x << ")) = 0x" << std::hex << got
                    << ", want 0x" << want;
  }
  EXPECT_EQ(failures, 0) << fmt.name << ": " << failures << " of " << inputs.size() << " doubles misrounded";
  EXPECT_TRUE(std::isnan(tl::to_float_odd(std::numeric_limits<double>::quiet_NaN())));
}

TEST(Numeric, WideValuesRoundOnceIntoNarrowFormats) {
  check_wide_encoder<tl::half_t>(kHalf);
  check_wide_encoder<tl::bfloat16_t>(kBf16);
  check_wide_encoder<tl::float8_e4m3_t>(kE4M3);
  check_wide_encoder<tl::float8_e5m2_t>(kE5M2);
  // int64 into bfloat16 (the only narrow format whose range reaches past float's 24 exact bits):
  // the reference rounds the integer itself to 8 significant bits, ties to even.
  RefEncoder ref(kBf16);
  std::mt19937_64 rng(77u);
  std::vector<int64_t> ints = {INT64_MIN, INT64_MAX, 0, 1, -1, (int64_t(1) << 25) + (int64_t(1) << 17) + 1};
  for (int k = 9; k < 63; ++k)
    for (int64_t d : {-1, 0, 1}) ints.push_back((int64_t(1) << k) + (int64_t(1) << (k - 8)) + d);  // ties and neighbours
  for (int i = 0; i < 100000; ++i) ints.push_back(int64_t(rng() >> (rng() % 64)) * ((rng() & 1) ? -1 : 1));
  int failures = 0;
  for (int64_t x : ints) {
    const uint32_t want = ref.encode(testutil::round_to_bits(x, 8)), got = tl::bfloat16_t::from_float(tl::to_float_odd(x)).bits;
    if (got != want && failures++ < 10) ADD_FAILURE() << "bf16 of int64 " << x << " = 0x" << std::hex << got << ", want 0x" << want;
  }
  EXPECT_EQ(failures, 0);
}

TEST(Numeric, E4M3) {
  check_decoder<tl::float8_e4m3_t>(kE4M3, [](uint32_t b) { return tl::float8_e4m3_t::from_bits(uint8_t(b)); });
  check_encoder(kE4M3, [](float x) { return uint32_t(tl::float8_e4m3_t::from_float(x).bits); }, 200000);
  for (uint32_t b = 0; b < 256; ++b) {
    const float f = tl::float8_e4m3_t::from_bits(uint8_t(b)).to_float();
    const uint32_t want = (b & 0x7fu) == 0x7fu ? 0x7fu : b;  // both NaNs come back canonical
    EXPECT_EQ(tl::float8_e4m3_t::from_float(f).bits, want) << b;
  }
  EXPECT_EQ(tl::float8_e4m3_t::from_bits(0x7e).to_float(), 448.0f);
  EXPECT_EQ(tl::float8_e4m3_t::from_bits(0x01).to_float(), std::ldexp(1.0f, -9));
  EXPECT_EQ(tl::float8_e4m3_t::from_float(464.0f).bits, 0x7e);   // tie, saturates
  EXPECT_EQ(tl::float8_e4m3_t::from_float(1e6f).bits, 0x7e);     // satfinite
  EXPECT_EQ(tl::float8_e4m3_t::from_float(-1e6f).bits, 0xfe);
  EXPECT_EQ(tl::float8_e4m3_t::from_float(INFINITY).bits, 0x7e);
  EXPECT_EQ(tl::float8_e4m3_t::from_float(std::nanf("")).bits, 0x7f);
  EXPECT_EQ(tl::float8_e4m3_t::from_float(-std::nanf("")).bits, 0x7f);  // canonical, like cvt
  EXPECT_TRUE(std::isnan(tl::float8_e4m3_t::from_bits(0xff).to_float()));
  EXPECT_EQ(tl::float8_e4m3_t::from_float(std::ldexp(1.0f, -10)).bits, 0x00);  // half the min subnormal: tie -> 0
  EXPECT_EQ(tl::float8_e4m3_t::from_float(std::ldexp(3.0f, -11)).bits, 0x01);
}

TEST(Numeric, E5M2) {
  check_decoder<tl::float8_e5m2_t>(kE5M2, [](uint32_t b) { return tl::float8_e5m2_t::from_bits(uint8_t(b)); });
  check_encoder(kE5M2, [](float x) { return uint32_t(tl::float8_e5m2_t::from_float(x).bits); }, 200000);
  check_encoder(kE5M2Sat, [](float x) { return uint32_t(tl::float8_e5m2_t::from_float_satfinite(x).bits); },
                100000);
  EXPECT_EQ(tl::float8_e5m2_t::from_bits(0x7b).to_float(), 57344.0f);
  EXPECT_EQ(tl::float8_e5m2_t::from_float(61439.0f).bits, 0x7b);
  EXPECT_EQ(tl::float8_e5m2_t::from_float(61440.0f).bits, 0x7c);  // tie -> even = inf
  EXPECT_EQ(tl::float8_e5m2_t::from_float_satfinite(61440.0f).bits, 0x7b);
  EXPECT_TRUE(std::isinf(tl::float8_e5m2_t::from_bits(0xfc).to_float()));
  EXPECT_EQ(tl::float8_e5m2_t::from_float(std::nanf("")).bits, 0x7f);
  EXPECT_EQ(tl::float8_e5m2_t::from_float(-std::nanf("")).bits, 0x7f);
  EXPECT_TRUE(std::isnan(tl::float8_e5m2_t::from_bits(0xfd).to_float()));
  EXPECT_EQ(tl::float8_e5m2_t::from_float(std::ldexp(1.0f, -16)).bits, 0x01);
}

TEST(Numeric, E2M1AndNibblePacking) {
  check_decoder<tl::float4_e2m1_t>(kE2M1, [](uint32_t b) { return tl::float4_e2m1_t::from_bits(uint8_t(b)); });
  check_encoder(kE2M1, [](float x) { return uint32_t(tl::float4_e2m1_t::from_float(x).bits); }, 100000);
  const float expect[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int b = 0; b < 16; ++b) {
    const float v = tl::float4_e2m1_t::from_bits(uint8_t(b)).to_float();
    EXPECT_EQ(std::fabs(v), expect[b & 7]);
    EXPECT_EQ(std::signbit(v), b >= 8);
  }
  EXPECT_EQ(tl::float4_e2m1_t::from_float(5.0f).bits, 0x6);    // tie 4|6 -> even mantissa = 4
  EXPECT_EQ(tl::float4_e2m1_t::from_float(2.5f).bits, 0x4);    // tie 2|3 -> 2
  EXPECT_EQ(tl::float4_e2m1_t::from_float(0.25f).bits, 0x0);   // tie 0|0.5 -> 0
  EXPECT_EQ(tl::float4_e2m1_t::from_float(0.75f).bits, 0x2);   // tie 0.5|1 -> 1
  EXPECT_EQ(tl::float4_e2m1_t::from_float(100.0f).bits, 0x7);  // satfinite
  EXPECT_EQ(tl::float4_e2m1_t::from_float(-100.0f).bits, 0xf);
  EXPECT_EQ(tl::float4_e2m1_t::from_float(std::nanf("")).bits, 0x7);

  tl::float4_e2m1x2_t p = tl::float4_e2m1x2_t::from_float(1.5f, -6.0f);
  EXPECT_EQ(p.bits, 0xf3);  // element 0 (1.5 = 0x3) in the low nibble, -6 = 0xf in the high nibble
  EXPECT_EQ(p.get(0), 1.5f);
  EXPECT_EQ(p.get(1), -6.0f);
  p.set(0, -0.5f);
  EXPECT_EQ(p.bits, 0xf9);
  p.set(1, 3.0f);
  EXPECT_EQ(p.bits, 0x59);
  EXPECT_EQ(p.nibble(0), 0x9);
  EXPECT_EQ(p.nibble(1), 0x5);
  p.set_nibble(1, 0x2);
  EXPECT_EQ(p.get(1), 1.0f);
  EXPECT_EQ(p.get(0), -0.5f);
  EXPECT_EQ(p.element(0).to_float(), -0.5f);
  for (int b = 0; b < 256; ++b) {
    const auto q = tl::float4_e2m1x2_t::from_bits(uint8_t(b));
    EXPECT_EQ(tl::float4_e2m1x2_t::from_float(q.get(0), q.get(1)).bits, b);  // -0 keeps its sign
  }
}

TEST(Numeric, UE8M0) {
  for (int b = 0; b < 255; ++b) {
    const float v = tl::ue8m0_t::from_bits(uint8_t(b)).to_float();
    EXPECT_EQ(double(v), std::ldexp(1.0, b - 127)) << b;
    EXPECT_EQ(tl::ue8m0_t::from_float(v).bits, b);
    EXPECT_EQ(tl::ue8m0_t::from_float_ceil(v).bits, b);
    EXPECT_EQ(tl::ue8m0_t::from_bits(uint8_t(b)).exponent(), b - 127);
  }
  EXPECT_TRUE(std::isnan(tl::ue8m0_t::from_bits(0xff).to_float()));
  EXPECT_EQ(tl::ue8m0_t::from_float(std::nanf("")).bits, 0xff);
  EXPECT_EQ(tl::ue8m0_t::from_float_ceil(std::nanf("")).bits, 0xff);
  EXPECT_EQ(tl::ue8m0_t::from_float_ceil(1.0f).bits, 127);
  EXPECT_EQ(tl::ue8m0_t::from_float_ceil(1.0000001f).bits, 128);
  EXPECT_EQ(tl::ue8m0_t::from_float_ceil(0.75f).bits, 127);
  EXPECT_EQ(tl::ue8m0_t::from_float_ceil(3.0f / 448.0f).bits, 127 - 7);  // 0.0067 -> 2^-7
  EXPECT_EQ(tl::ue8m0_t::from_float_ceil(0.0f).bits, 0);
  EXPECT_EQ(tl::ue8m0_t::from_float_ceil(INFINITY).bits, 254);
  EXPECT_EQ(tl::ue8m0_t::from_float(1.4f).bits, 127);
  EXPECT_EQ(tl::ue8m0_t::from_float(1.6f).bits, 128);
  EXPECT_EQ(tl::ue8m0_t::from_float(1.5f).bits, 128);  // tie: 127 is odd -> 128
  EXPECT_EQ(tl::ue8m0_t::from_float(3.0f).bits, 128);  // tie: 128 is even
  EXPECT_EQ(tl::ue8m0_t::from_exponent(-3).to_float(), 0.125f);
  EXPECT_EQ(tl::ue8m0_t::from_exponent(500).bits, 254);
  // Random: ceil is the smallest power of two >= |x|.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-40.0f, 40.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::exp2(u(rng));
    const double want = std::ldexp(1.0, int(std::ceil(std::log2(double(x)))));
    ASSERT_EQ(double(tl::ue8m0_t::from_float_ceil(x).to_float()), want) << x;
    const double p = std::ldexp(1.0, std::ilogb(x));  // nearest: p or 2p, p*1.5 the midpoint
    const double nearest = double(x) < 1.5 * p ? p : 2 * p;
    if (double(x) != 1.5 * p) {
      ASSERT_EQ(double(tl::ue8m0_t::from_float(x).to_float()), nearest) << x;
    }
  }
}

TEST(Numeric, GenericConversions) {
  EXPECT_EQ(tl::to_float(2.5f), 2.5f);
  EXPECT_EQ(tl::from_float<float>(2.5f), 2.5f);
  EXPECT_EQ(tl::from_float<tl::half_t>(2.5f).bits, 0x4100);
  EXPECT_EQ(tl::to_float(tl::from_float<tl::bfloat16_t>(-3.0f)), -3.0f);
  EXPECT_EQ(tl::to_float(tl::from_float<tl::float8_e4m3_t>(0.5f)), 0.5f);
  EXPECT_EQ(tl::to_float(tl::from_float<tl::float8_e5m2_t>(-0.75f)), -0.75f);
  EXPECT_EQ(tl::to_float(tl::from_float<tl::float4_e2m1_t>(3.0f)), 3.0f);
  EXPECT_EQ(tl::to_float(tl::from_float<tl::ue8m0_t>(0.25f)), 0.25f);
  EXPECT_EQ(tl::from_float<int8_t>(2.5f), 2);  // nearest even
  EXPECT_EQ(tl::from_float<int8_t>(3.5f), 4);
  EXPECT_EQ(tl::from_float<int8_t>(-300.0f), -128);
  EXPECT_EQ(tl::from_float<int8_t>(300.0f), 127);
  EXPECT_EQ(tl::from_float<int8_t>(std::nanf("")), 0);
  EXPECT_EQ(tl::from_float<int32_t>(3e9f), 2147483520);
  EXPECT_EQ(tl::from_float<int32_t>(-3e9f), INT32_MIN);
  EXPECT_EQ(tl::to_float(int8_t(-7)), -7.0f);
  EXPECT_EQ(float(tl::half_t(1.5f)), 1.5f);
  static_assert(sizeof(tl::half_t) == 2 && sizeof(tl::bfloat16_t) == 2);
  static_assert(sizeof(tl::float8_e4m3_t) == 1 && sizeof(tl::float8_e5m2_t) == 1);
  static_assert(sizeof(tl::float4_e2m1x2_t) == 1 && sizeof(tl::ue8m0_t) == 1);
  static_assert(std::is_trivially_copyable_v<tl::half_t> && std::is_trivial_v<tl::float8_e4m3_t>);
}

}  // namespace
