// NVRTC: compiles here (no GPU needed) whenever libnvrtc is installed; skipped, with the reason,
// where it is not.
#include "rt/nvrtc.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "rt/file.h"
#include "test_util.h"

namespace {

using rt::ErrorKind;
using rt::NvrtcOptions;
using rt::NvrtcResult;
using rt_test::expect_error;
using rt_test::ScopedEnv;
using rt_test::TempDir;

#define REQUIRE_NVRTC() \
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error()

const std::vector<rt::EmbeddedFile> kHeaders = {
    {"tl/device/test_twice.h",
     "#pragma once\n"
     "namespace tl {\n"
     "__device__ inline float twice(float x) { return 2.0f * x; }\n"
     "}  // namespace tl\n"},
};

constexpr const char* kTwice = R"(#include "tl/device/test_twice.h"
extern "C" __global__ void twice_kernel(float* y, const float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = tl::twice(x[i]);
}
)";

// One wgmma (sm_90a only): fence, a 64x8x16 bf16 MMA from shared-memory descriptors, commit, wait.
constexpr const char* kWgmma = R"(
extern "C" __global__ void wgmma_kernel(float* out, unsigned long long desc_a, unsigned long long desc_b) {
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %5, %6, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(1), "l"(desc_a), "l"(desc_b));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  out[threadIdx.x] = d0 + d1 + d2 + d3;
}
)";

NvrtcOptions arch(const std::string& a) {
  NvrtcOptions o;
  o.arch = a;
  return o;
}

TEST(Nvrtc, LibraryAndVersion) {
  REQUIRE_NVRTC();
  EXPECT_FALSE(rt::nvrtc_library_path().empty());
  const std::string version = rt::nvrtc_version();
  EXPECT_GE(std::stoi(version.substr(0, version.find('.'))), 12) << version;
  const std::vector<int> archs = rt::nvrtc_supported_archs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 80), archs.end());
}

TEST(Nvrtc, CompilesWithEmbeddedHeadersForHopperAndAmpere) {
  REQUIRE_NVRTC();
  TempDir dir;
  ScopedEnv cache("TL_CACHE_DIR", dir.path());
  for (const char* a : {"sm_90a", "sm_80"}) {
    SCOPED_TRACE(a);
    const NvrtcResult r = rt::compile_cuda(kTwice, "twice.cu", kHeaders, arch(a));
    EXPECT_FALSE(r.cached);
    EXPECT_NE(r.ptx.find(std::string(".target ") + a), std::string::npos) << r.ptx.substr(0, 400);
    EXPECT_NE(r.ptx.find(".entry twice_kernel("), std::string::npos);
    ASSERT_GT(r.cubin.size(), 4u);
    EXPECT_EQ(r.cubin.substr(0, 4),
              "\x7f"
              "ELF");  // a cubin is an ELF image
    EXPECT_GT(r.seconds, 0.0);
  }
}

TEST(Nvrtc, SecondCompileHitsTheDiskCache) {
  REQUIRE_NVRTC();
  TempDir dir;
  ScopedEnv cache("TL_CACHE_DIR", dir.path());
  const int64_t before = rt::nvrtc_compile_count();
  const NvrtcResult first = rt::compile_cuda(kTwice, "twice.cu", kHeaders, arch("sm_90a"));
  EXPECT_FALSE(first.cached);
  EXPECT_EQ(rt::nvrtc_compile_count(), before + 1);
  const NvrtcResult second = rt::compile_cuda(kTwice, "twice.cu", kHeaders, arch("sm_90a"));
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(rt::nvrtc_compile_count(), before + 1);
  EXPECT_EQ(second.ptx, first.ptx);
  EXPECT_EQ(second.cubin, first.cubin);
  // Anything that changes the output changes the key: options, headers, arch.
  NvrtcOptions no_lines = arch("sm_90a");
  no_lines.lineinfo = false;
  EXPECT_FALSE(rt::compile_cuda(kTwice, "twice.cu", kHeaders, no_lines).cached);
  std::vector<rt::EmbeddedFile> other_headers = kHeaders;
  other_headers[0].contents = "namespace tl { __device__ inline float twice(float x) { return x + x; } }\n";
  EXPECT_FALSE(rt::compile_cuda(kTwice, "twice.cu", other_headers, arch("sm_90a")).cached);
  EXPECT_EQ(rt::nvrtc_compile_count(), before + 3);
}

TEST(Nvrtc, PtxOnlyUsesTheVirtualArchitecture) {
  REQUIRE_NVRTC();
  TempDir dir;
  ScopedEnv cache("TL_CACHE_DIR", dir.path());
  NvrtcOptions o = arch("sm_90a");
  o.want_cubin = false;
  const NvrtcResult r = rt::compile_cuda(kTwice, "twice.cu", kHeaders, o);
  EXPECT_TRUE(r.cubin.empty());
  EXPECT_NE(r.ptx.find(".target sm_90a"), std::string::npos);
  const NvrtcResult again = rt::compile_cuda(kTwice, "twice.cu", kHeaders, o);
  EXPECT_TRUE(again.cached);
  EXPECT_TRUE(again.cubin.empty());
}

TEST(Nvrtc, SyntaxErrorCarriesTheLogAndKeepsTheSource) {
  REQUIRE_NVRTC();
  TempDir dir;
  ScopedEnv cache("TL_CACHE_DIR", dir.path());
  const std::string bad = "extern \"C\" __global__ void broken(int* p) { int x = ; p[0] = x; }\n";
  std::string message;
  try {
    rt::compile_cuda(bad, "broken.cu", {}, arch("sm_90a"));
    ADD_FAILURE() << "expected an error";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    message = e.what();
  }
  EXPECT_NE(message.find("failed to compile broken.cu for sm_90a"), std::string::npos) << message;
  EXPECT_NE(message.find("broken.cu(1): error: expected an expression"), std::string::npos) << message;
  EXPECT_NE(message.find("--gpu-architecture=sm_90a"), std::string::npos) << message;
  const std::string marker = "source kept at: ";
  const size_t at = message.find(marker);
  ASSERT_NE(at, std::string::npos) << message;
  const std::string kept = message.substr(at + marker.size(), message.find('\n', at) - at - marker.size());
  EXPECT_EQ(kept.rfind(dir.path(), 0), 0u) << kept;
  EXPECT_EQ(rt::read_file(kept).value_or("<missing>"), bad);
}

TEST(Nvrtc, MissingHeaderIsReported) {
  REQUIRE_NVRTC();
  TempDir dir;
  ScopedEnv cache("TL_CACHE_DIR", dir.path());
  expect_error([] { rt::compile_cuda("#include \"tl/device/nope.h\"\n", "nope.cu", kHeaders, arch("sm_80")); },
               ErrorKind::Internal, "tl/device/nope.h");
}

TEST(Nvrtc, WgmmaCompilesForSm90aOnly) {
  REQUIRE_NVRTC();
  TempDir dir;
  ScopedEnv cache("TL_CACHE_DIR", dir.path());
  const NvrtcResult hopper = rt::compile_cuda(kWgmma, "wgmma.cu", {}, arch("sm_90a"));
  EXPECT_NE(hopper.ptx.find("wgmma.mma_async"), std::string::npos);
  EXPECT_FALSE(hopper.cubin.empty());
  expect_error([] { rt::compile_cuda(kWgmma, "wgmma.cu", {}, arch("sm_80")); }, ErrorKind::Internal,
               "failed to compile wgmma.cu for sm_80", "not supported on .target 'sm_80'");
}

// ptxas serializes a wgmma whose results are read before its wait (printf of one between them)
// and says so only in its verbose log: the result keeps the note, stderr gets a warning, the
// count grows. The same kernel without the printf has none.
TEST(Nvrtc, SerializedWgmmaIsReported) {
  REQUIRE_NVRTC();
  TempDir dir;
  ScopedEnv cache("TL_CACHE_DIR", dir.path());
  std::string serialized = kWgmma;
  const std::string wait = "  asm volatile(\"wgmma.wait_group.sync.aligned 0;";
  serialized.insert(serialized.find(wait), "  if (threadIdx.x == 0) printf(\"%f\\n\", d0);\n");
  const int64_t before = rt::nvrtc_serialized_wgmma_count();
  testing::internal::CaptureStderr();
  const NvrtcResult slow = rt::compile_cuda(serialized, "serialized.cu", {}, arch("sm_90a"));
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_FALSE(slow.serialized_wgmma.empty()) << slow.log;
  EXPECT_NE(slow.serialized_wgmma[0].find("(C75"), std::string::npos) << slow.serialized_wgmma[0];
  EXPECT_NE(err.find("warning: ptxas serialized the wgmma instructions of serialized.cu"), std::string::npos) << err;
  EXPECT_EQ(rt::nvrtc_serialized_wgmma_count(), before + 1);
  const NvrtcResult fine = rt::compile_cuda(kWgmma, "wgmma.cu", {}, arch("sm_90a"));
  EXPECT_TRUE(fine.serialized_wgmma.empty()) << fine.serialized_wgmma[0];
  EXPECT_EQ(rt::nvrtc_serialized_wgmma_count(), before + 1);
}

// The serialization notes come from ptxas's log, so every sm_90a compile must run ptxas: NVRTC
// 12.9+ would otherwise answer a repeated compile from the driver's compute cache without one (two
// fresh disk caches, the same kernel: on a machine with a driver the second compile was such a hit
// before compile_cuda passed --no-cache).
TEST(Nvrtc, EverySm90aCompileHasThePtxasLog) {
  REQUIRE_NVRTC();
  for (int round = 0; round < 2; ++round) {
    TempDir dir;
    ScopedEnv cache("TL_CACHE_DIR", dir.path());
    const NvrtcResult r = rt::compile_cuda(kWgmma, "wgmma.cu", {}, arch("sm_90a"));
    EXPECT_FALSE(r.cached);
    EXPECT_NE(r.log.find("ptxas info"), std::string::npos) << "round " << round << ", NVRTC " << rt::nvrtc_version()
                                                             << "\n" << r.log;
  }
}

TEST(Nvrtc, BadArchitecturesAreUserErrors) {
  REQUIRE_NVRTC();
  expect_error([] { rt::compile_cuda(kTwice, "twice.cu", kHeaders, arch("gfx90a")); }, ErrorKind::User,
               "'gfx90a' is not a GPU architecture", "sm_90a");
  expect_error([] { rt::compile_cuda(kTwice, "twice.cu", kHeaders, arch("")); }, ErrorKind::User,
               "'' is not a GPU architecture");
  expect_error([] { rt::compile_cuda(kTwice, "twice.cu", kHeaders, arch("sm_20")); }, ErrorKind::User,
               "cannot compile for sm_20", "it supports", "sm_90");
}

TEST(Nvrtc, VerboseJitPrintsTheOptionsAndTime) {
  REQUIRE_NVRTC();
  TempDir dir;
  ScopedEnv cache("TL_CACHE_DIR", dir.path());
  ScopedEnv verbose("TL_JIT_VERBOSE", "1");
  testing::internal::CaptureStderr();
  rt::compile_cuda(kTwice, "twice.cu", kHeaders, arch("sm_80"));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[tl jit] nvrtc -std=c++20 --gpu-architecture=sm_80 -default-device -lineinfo twice.cu"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("[tl jit] nvrtc compiled twice.cu in "), std::string::npos) << err;
}

}  // namespace
