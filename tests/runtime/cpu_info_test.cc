#include "rt/cpu_info.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace {

using rt_test::ScopedEnv;

TEST(CpuInfo, Sane) {
  const rt::CpuInfo& info = rt::cpu_info();
  EXPECT_GE(info.cores, 1);
  EXPECT_GT(info.l1d_bytes, 0);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_GT(info.l3_bytes, 0);
  EXPECT_TRUE(info.simd_bits == 128 || info.simd_bits == 256 || info.simd_bits == 512) << info.simd_bits;
  EXPECT_EQ(info.simd_bits == 512, info.has_avx512f);
  EXPECT_TRUE(!info.has_avx512f || info.has_avx2);
  EXPECT_FALSE(info.model.empty());
  EXPECT_EQ(&rt::cpu_info(), &info);  // read once
}

TEST(CpuInfo, NumThreadsOverridesCores) {
  {
    ScopedEnv threads("TL_NUM_THREADS", "3");
    EXPECT_EQ(rt::probe_cpu_info().cores, 3);
  }
  for (const char* bad : {"0", "-2", "many"}) {
    ScopedEnv threads("TL_NUM_THREADS", bad);
    rt_test::expect_error([] { rt::probe_cpu_info(); }, rt::ErrorKind::User, "TL_NUM_THREADS");
  }
}

TEST(CpuInfo, SimdBitsOverride) {
  for (const char* bits : {"128", "256", "512"}) {
    ScopedEnv simd("TL_CPU_SIMD_BITS", bits);
    EXPECT_EQ(rt::probe_cpu_info().simd_bits, std::stoi(bits));
  }
  for (const char* bad : {"0", "384", "wide"}) {
    ScopedEnv simd("TL_CPU_SIMD_BITS", bad);
    rt_test::expect_error([] { rt::probe_cpu_info(); }, rt::ErrorKind::User, "TL_CPU_SIMD_BITS");
  }
}

}  // namespace
