#include "tl/device/cpu/math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

TEST(CpuMath, Functions) {
  EXPECT_EQ(tl::cpu::exp2f_(3.0f), 8.0f);
  EXPECT_EQ(tl::cpu::exp2f_(-2.0f), 0.25f);
  EXPECT_EQ(tl::cpu::log2f_(1024.0f), 10.0f);
  EXPECT_FLOAT_EQ(tl::cpu::rsqrt(16.0f), 0.25f);
  EXPECT_FLOAT_EQ(tl::cpu::rsqrt(2.0f), 0.70710678f);
  EXPECT_TRUE(std::isinf(tl::cpu::rsqrt(0.0f)));
  EXPECT_FLOAT_EQ(tl::cpu::sigmoid(0.0f), 0.5f);
  EXPECT_EQ(tl::cpu::ceil_div(10, 4), 3);
  EXPECT_EQ(tl::cpu::ceil_div<int64_t>(12, 4), 3);
}

TEST(CpuMath, SpecialValues) {
  EXPECT_TRUE(std::isinf(tl::cpu::infinity<float>()) && tl::cpu::infinity<float>() > 0);
  EXPECT_TRUE(std::isinf(tl::to_float(tl::cpu::infinity<tl::half_t>())));
  EXPECT_TRUE(std::isinf(tl::to_float(tl::cpu::infinity<tl::bfloat16_t>())));
  EXPECT_TRUE(std::isinf(tl::to_float(tl::cpu::infinity<tl::float8_e5m2_t>())));
  EXPECT_EQ(tl::to_float(tl::cpu::max_value<tl::half_t>()), 65504.0f);
  EXPECT_EQ(tl::to_float(tl::cpu::min_value<tl::half_t>()), -65504.0f);
  EXPECT_EQ(tl::to_float(tl::cpu::max_value<tl::bfloat16_t>()), tl::bfloat16_t::kMax);
  EXPECT_EQ(tl::to_float(tl::cpu::max_value<tl::float8_e4m3_t>()), 448.0f);
  EXPECT_EQ(tl::to_float(tl::cpu::min_value<tl::float8_e4m3_t>()), -448.0f);
  EXPECT_EQ(tl::to_float(tl::cpu::max_value<tl::float8_e5m2_t>()), 57344.0f);
  EXPECT_EQ(tl::to_float(tl::cpu::max_value<tl::float4_e2m1_t>()), 6.0f);
  EXPECT_EQ(tl::cpu::max_value<float>(), std::numeric_limits<float>::max());
  EXPECT_EQ(tl::cpu::min_value<float>(), -std::numeric_limits<float>::max());
  EXPECT_EQ(tl::cpu::min_value<int8_t>(), -128);
}

}  // namespace
