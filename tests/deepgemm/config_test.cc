// Configuration: last_config(), DG_PRINT_CONFIGS, set_num_sms / get_num_sms, the CPU threads.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "deepgemm/deepgemm.h"
#include "dg_test_util.h"
#include "heuristics.h"
#include "rt/cuda_device.h"

namespace {

// A problem of more than 2^31 * 4 MFLOP still gets every thread (its work per thread was converted
// to int, which is undefined there and gave one thread).
TEST(Config, HugeCpuProblemUsesEveryThread) {
  deepgemm::cpu::SubGemm g;
  g.m = g.n = g.k = int64_t(1) << 20;
  EXPECT_EQ(deepgemm::detail::choose_cpu_blocking({g}, 14, 32, 128, 8).threads, 8);
}

TEST(Config, LastConfigDescribesTheCall) {
  const rt::Tensor a = dgtest::normal({32, 256}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({64, 256}, rt::DType::BF16, testutil::fresh_seed());
  auto [qa, sfa] = deepgemm::per_token_cast_to_fp8(a);
  auto [qb, sfb] = deepgemm::per_block_cast_to_fp8(b);
  rt::Tensor d = rt::Tensor::empty({32, 64}, rt::DType::BF16);
  deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d);
  deepgemm::GemmConfig cfg = deepgemm::last_config();
  EXPECT_EQ(cfg.function, "fp8_gemm_nt");
  EXPECT_EQ(cfg.backend, "cpu");
  EXPECT_EQ(cfg.kernel.rfind("cpu.scaled_gemm.", 0), 0u) << cfg.kernel;
  EXPECT_EQ(cfg.m, 32);
  EXPECT_EQ(cfg.n, 64);
  EXPECT_EQ(cfg.k, 256);
  EXPECT_EQ(cfg.promotion_k, 128);
  EXPECT_EQ(cfg.block_k % 128, 0);
  EXPECT_GE(cfg.num_tasks, 1);
  EXPECT_GE(cfg.num_threads, 1);
  EXPECT_NE(cfg.to_string().find("fp8_gemm_nt m=32 n=64 k=256"), std::string::npos) << cfg.to_string();

  deepgemm::bf16_gemm_nt(a, b, d);
  cfg = deepgemm::last_config();
  EXPECT_EQ(cfg.function, "bf16_gemm_nt");
  EXPECT_EQ(cfg.kernel.rfind("cpu.bf16_gemm.", 0), 0u) << cfg.kernel;
  EXPECT_EQ(cfg.promotion_k, 0);
}

TEST(Config, PrintConfigsOncePerShape) {
  const rt::Tensor a = dgtest::normal({16, 128}, rt::DType::BF16, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({48, 128}, rt::DType::BF16, testutil::fresh_seed());
  rt::Tensor d = rt::Tensor::empty({16, 48}, rt::DType::F32);
  dgtest::ScopedEnv env("DG_PRINT_CONFIGS", "1");
  testing::internal::CaptureStderr();
  deepgemm::bf16_gemm_tt(dgtest::transpose(a), b, d);
  deepgemm::bf16_gemm_tt(dgtest::transpose(a), b, d);
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string line = "deepgemm: bf16_gemm_tt m=16 n=48 k=128";
  ASSERT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(err.find(line, err.find(line) + 1), std::string::npos) << "printed twice: " << err;
}

TEST(Config, NumSms) {
  deepgemm::set_num_sms(0);
  const int device_default = deepgemm::get_num_sms();
  if (rt::cuda_device_count() == 0) {
    EXPECT_EQ(device_default, 0);
    deepgemm::set_num_sms(100);
    EXPECT_EQ(deepgemm::get_num_sms(), 100);
  } else {
    EXPECT_EQ(device_default, rt::cuda_device(0).sm_count);
    deepgemm::set_num_sms(device_default - 1);
    EXPECT_EQ(deepgemm::get_num_sms(), device_default - 1);
    dgtest::expect_user_error([&] { deepgemm::set_num_sms(device_default + 1); }, {"set_num_sms", "SMs of cuda:0"});
  }
  deepgemm::set_num_sms(0);
  EXPECT_EQ(deepgemm::get_num_sms(), device_default);
}

}  // namespace

namespace {

TEST(Config, StreamIsPerThread) {
  const rt::CuStream s = reinterpret_cast<rt::CuStream>(uintptr_t(0x1000));
  EXPECT_EQ(deepgemm::get_stream(), nullptr);
  deepgemm::set_stream(s);
  EXPECT_EQ(deepgemm::get_stream(), s);
  rt::CuStream other = s;
  std::thread([&] { other = deepgemm::get_stream(); }).join();
  EXPECT_EQ(other, nullptr);
  deepgemm::set_stream(nullptr);
  EXPECT_EQ(deepgemm::get_stream(), nullptr);
}

}  // namespace
