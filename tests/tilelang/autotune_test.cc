// The autotuner on the test target (the CPU in CI, the GPU in scripts/gpu_check.sh): it times every
// candidate of a space, keeps the fastest, records the ones that fail, caches the decision, and
// rejects a malformed space with a clear error.
#include "tilelang/autotune.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "program_util.h"
#include "rt/error.h"
#include "testutil/tensors.h"

namespace {

using rt::DType;

// Each test tunes with its own disk cache, so no decision leaks between tests or runs.
class Autotune : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tl-tune-test-" + std::to_string(testutil::fresh_seed()));
    const char* old = std::getenv("TL_CACHE_DIR");
    saved_ = old ? old : "";
    had_ = old != nullptr;
    setenv("TL_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (had_) setenv("TL_CACHE_DIR", saved_.c_str(), 1);
    else unsetenv("TL_CACHE_DIR");
    std::filesystem::remove_all(dir_);
  }

  tilelang::Module gemm_ = tilelang::Module::load(tltest::source_path("examples/gemm.py"));
  tilelang::CompileOptions fixed() const {
    tilelang::CompileOptions o;
    o.target = tltest::test_target();
    o.params = {{"M", "128"}, {"N", "128"}, {"K", "64"}, {"dtype", "float16"}};
    return o;
  }
  std::vector<rt::Tensor> inputs() const {
    rt::Device d = tltest::on_gpu() ? rt::Device::cuda(0) : rt::Device::cpu();
    return {testutil::random_tensor({128, 64}, DType::F16, testutil::fresh_seed()).to(d),
            testutil::random_tensor({64, 128}, DType::F16, testutil::fresh_seed()).to(d)};
  }

 private:
  std::filesystem::path dir_;
  std::string saved_;
  bool had_ = false;
};

TEST_F(Autotune, PicksTheFastestWorkingCandidateAndCachesIt) {
  tilelang::TuneSpace space{{"block_M", {"32", "64"}}, {"block_N", {"64", "128"}}, {"block_K", {"32", "not_a_number"}}};
  std::vector<rt::Tensor> in = inputs();
  tilelang::TuneResult r = tilelang::autotune(gemm_, "matmul", fixed(), space, in, {1, 3, true});
  ASSERT_EQ(r.trials.size(), 8u);
  EXPECT_FALSE(r.from_cache);
  double fastest = 1e30;
  for (const tilelang::TuneTrial& t : r.trials) {
    bool bad = t.params.at("block_K") == "not_a_number";
    EXPECT_EQ(t.ms < 0, bad) << t.error;
    EXPECT_EQ(t.error.empty(), !bad);
    if (bad) {
      EXPECT_NE(t.error.find("not_a_number"), std::string::npos) << t.error;
    } else {
      fastest = std::min(fastest, t.ms);
    }
  }
  EXPECT_EQ(r.best_ms, fastest);
  EXPECT_EQ(r.best.at("block_K"), "32");
  EXPECT_EQ(r.options.params.at("block_M"), r.best.at("block_M"));
  EXPECT_EQ(r.options.params.at("M"), "128");

  // The chosen configuration computes the product.
  tilelang::Kernel best = gemm_.kernel("matmul", r.options);
  rt::Tensor c = best(in)[0].to(rt::Device::cpu());
  std::vector<double> a = testutil::to_f64(in[0].to(rt::Device::cpu())), b = testutil::to_f64(in[1].to(rt::Device::cpu())), ref(128 * 128, 0.0);
  for (int i = 0; i < 128; ++i)
    for (int p = 0; p < 64; ++p)
      for (int j = 0; j < 128; ++j) ref[i * 128 + j] += a[i * 64 + p] * b[p * 128 + j];
  EXPECT_LT(testutil::rel_error(testutil::to_f64(c), ref), 2e-3);

  // The same question again: answered from the cache, nothing run.
  tilelang::TuneResult again = tilelang::autotune(gemm_, "matmul", fixed(), space, in);
  EXPECT_TRUE(again.from_cache);
  EXPECT_TRUE(again.trials.empty());
  EXPECT_EQ(again.best, r.best);
  // Other shapes are another question.
  tilelang::CompileOptions other = fixed();
  other.params["N"] = "64";
  std::vector<rt::Tensor> narrow{in[0], testutil::random_tensor({64, 64}, DType::F16, testutil::fresh_seed()).to(in[0].device())};
  EXPECT_FALSE(tilelang::autotune(gemm_, "matmul", other, {{"block_M", {"32", "64"}}}, narrow, {0, 1, true}).from_cache);
}

TEST_F(Autotune, RejectsMalformedSpaces) {
  std::vector<rt::Tensor> in = inputs();
  auto message = [&](const tilelang::TuneSpace& space) {
    try {
      tilelang::autotune(gemm_, "matmul", fixed(), space, in, {0, 1, false});
    } catch (const rt::Error& e) {
      EXPECT_EQ(e.kind(), rt::ErrorKind::User) << e.what();
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error";
    return std::string();
  };
  EXPECT_NE(message({}).find("no free parameters"), std::string::npos);
  EXPECT_NE(message({{"block_M", {}}}).find("'block_M' has no candidate values"), std::string::npos);
  EXPECT_NE(message({{"M", {"64"}}}).find("'M' is both fixed (128) and tuned"), std::string::npos);
  EXPECT_NE(message({{"block_M", {"64"}}, {"block_M", {"32"}}}).find("'block_M' is listed twice"), std::string::npos);
  std::string all_failed = message({{"block_K", {"x1", "x2"}}});
  EXPECT_NE(all_failed.find("every one of the 2 candidates failed"), std::string::npos) << all_failed;
  EXPECT_NE(all_failed.find("x2"), std::string::npos) << all_failed;
}

}  // namespace
