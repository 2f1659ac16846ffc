// Compiles the tl/device/cuda/ headers with NVRTC for sm_90a, the way the TileLang and DeepGEMM JITs
// will: each header alone (it must be self-contained under NVRTC's restrictions: no host headers,
// no CUDA headers), then a translation unit instantiating the GEMM kernel for every supported
// (dtype, B layout) pair, in C++17 and C++20. Needs no GPU. Prints each log; exit status 0 only if
// every compilation succeeded without warnings and the cubin has the expected instructions' PTX.
//
// Build and run (from the repository root; the build is one line):
//   g++ -std=c++20 -O1 tests/device/cuda/nvrtc_check.cc -I/usr/local/cuda/include
//       -L/usr/local/cuda/lib64 -lnvrtc -o /tmp/nvrtc_check
//   LD_LIBRARY_PATH=/usr/local/cuda/lib64 /tmp/nvrtc_check device/include
#include <nvrtc.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Source {
  std::string name;
  std::string code;
  std::vector<std::string> name_expressions;  // kernels to instantiate and look up
  std::vector<std::string> ptx_must_contain;
};

bool compile(const Source& src, const std::string& include_dir, const char* std_flag) {
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src.code.c_str(), (src.name + ".cu").c_str(), 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    std::printf("FAIL %s: nvrtcCreateProgram\n", src.name.c_str());
    return false;
  }
  for (const auto& e : src.name_expressions) nvrtcAddNameExpression(prog, e.c_str());
  const std::string inc = "-I" + include_dir;
  const char* opts[] = {"--gpu-architecture=sm_90a", std_flag, inc.c_str(), "-default-device", "--restrict"};
  const nvrtcResult rc = nvrtcCompileProgram(prog, int(sizeof(opts) / sizeof(opts[0])), opts);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  bool ok = rc == NVRTC_SUCCESS && log.find("warning") == std::string::npos;
  std::string detail;
  if (rc == NVRTC_SUCCESS) {
    for (const auto& e : src.name_expressions) {
      const char* lowered = nullptr;
      if (nvrtcGetLoweredName(prog, e.c_str(), &lowered) != NVRTC_SUCCESS || !lowered) {
        ok = false;
        detail += " [no lowered name for " + e + "]";
      }
    }
    size_t ptx_size = 0;
    nvrtcGetPTXSize(prog, &ptx_size);
    std::string ptx(ptx_size, '\0');
    nvrtcGetPTX(prog, ptx.data());
    for (const auto& needle : src.ptx_must_contain) {
      if (ptx.find(needle) == std::string::npos) {
        ok = false;
        detail += " [PTX lacks '" + needle + "']";
      }
    }
    size_t cubin_size = 0;
    nvrtcGetCUBINSize(prog, &cubin_size);
    detail += " ptx " + std::to_string(ptx_size) + " B, cubin " + std::to_string(cubin_size) + " B";
  }
  std::printf("%s %-28s %s:%s\n", ok ? "ok  " : "FAIL", src.name.c_str(), std_flag, detail.c_str());
  if (!log.empty()) std::printf("%s\n", log.c_str());
  nvrtcDestroyProgram(&prog);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <repo>/device/include\n", argv[0]);
    return 2;
  }
  const std::string inc = argv[1];
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::printf("NVRTC %d.%d\n", major, minor);

  std::vector<Source> sources;
  for (const char* h : {"arch.h", "mbarrier.h", "tma.h", "wgmma_ops.h", "wgmma.h", "convert.h", "tile_scheduler.h",
                        "round_sync.h", "gemm_sm90.h"}) {
    sources.push_back(Source{std::string("header ") + h, std::string("#include \"tl/device/cuda/") + h + "\"\n", {}, {}});
  }

  // Every GEMM instance the test builds, plus a float-output one, through name expressions (as a
  // JIT does). The kernel body must use wgmma with both B layouts, TMA and setmaxnreg.
  Source gemm{"gemm_sm90 instances", "#include \"tl/device/cuda/gemm_sm90.h\"\n", {}, {}};
  for (const char* t : {"tl::bfloat16_t", "tl::half_t"}) {
    for (const char* major_n : {"true", "false"}) {
      for (const char* shape : {"128, 256, 64, 4", "128, 192, 64, 4", "128, 128, 64, 6", "128, 64, 64, 8", "256, 128, 64, 4",
                                "64, 64, 64, 12", "64, 128, 64, 8", "64, 256, 64, 5"}) {
        gemm.name_expressions.push_back(std::string("tl::cuda::gemm_sm90_kernel<tl::cuda::GemmSm90Config<") + t +
                                        ", " + t + ", " + shape + ", " + major_n + ">>");
      }
    }
  }
  gemm.name_expressions.push_back(
      "tl::cuda::gemm_sm90_kernel<tl::cuda::GemmSm90Config<tl::bfloat16_t, float, 128, 64, 64, 8, true>>");
  gemm.name_expressions.push_back(
      "tl::cuda::gemm_sm90_kernel<tl::cuda::GemmSm90Config<tl::half_t, tl::half_t, 128, 256, 64, 4, true, false>>");
  gemm.ptx_must_contain = {"wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
                           "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16",
                           "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
                           "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
                           "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                           "setmaxnreg.inc.sync.aligned.u32 232",
                           "setmaxnreg.dec.sync.aligned.u32 40",
                           "mbarrier.try_wait.parity.shared::cta.b64",
                           "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"};
  sources.push_back(gemm);

  // Every generated wgmma size compiles, both dtypes, both B layouts.
  Source ops{"wgmma sizes", "#include \"tl/device/cuda/wgmma.h\"\n", {}, {}};
  std::string body = "template <class T, int N, bool kT>\n__global__ void wgmma_probe(unsigned long long a, "
                     "unsigned long long b, float* out) {\n  float d[N / 2];\n  for (int i = 0; i < N / 2; ++i) d[i] = 0;\n"
                     "  tl::cuda::wgmma_fence();\n  tl::cuda::wgmma_m64k16_ss<T, N, kT>(a, b, d);\n"
                     "  tl::cuda::wgmma_commit_group();\n  tl::cuda::wgmma_wait_group<0>();\n"
                     "  float s = 0;\n  for (int i = 0; i < N / 2; ++i) s += d[i];\n  out[threadIdx.x] = s;\n}\n";
  ops.code += body;
  for (int n : {8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256}) {
    for (const char* t : {"tl::bfloat16_t", "tl::half_t"})
      for (const char* tr : {"true", "false"})
        ops.name_expressions.push_back(std::string("wgmma_probe<") + t + ", " + std::to_string(n) + ", " + tr + ">");
  }
  ops.ptx_must_contain = {"m64n8k16.f32.bf16.bf16", "m64n240k16.f32.f16.f16"};
  sources.push_back(ops);

  // Every 8-bit wgmma size, each pair of input types: FP8 into float, 8-bit integers into int32, A
  // from shared memory and from registers.
  Source ops8{"wgmma 8-bit sizes", "#include \"tl/device/cuda/wgmma.h\"\n", {}, {}};
  ops8.code += "template <class Acc, int N, bool kA, bool kB>\n__global__ void wgmma8_probe(unsigned long long a, "
               "unsigned long long b, Acc* out) {\n  Acc d[N / 2];\n  for (int i = 0; i < N / 2; ++i) d[i] = 0;\n"
               "  const unsigned ra[4] = {unsigned(a), unsigned(a >> 8), unsigned(a >> 16), unsigned(a >> 24)};\n"
               "  tl::cuda::wgmma_fence();\n  if constexpr (tl::cuda::is_same_v<Acc, float>) tl::cuda::wgmma_m64k32_ss_fp8<N, kA, kB>(a, b, d);\n"
               "  else tl::cuda::wgmma_m64k32_ss_int8<N, kA, kB>(a, b, d);\n"
               "  if constexpr (tl::cuda::is_same_v<Acc, float>) tl::cuda::wgmma_m64k32_rs_fp8<N, kA, kB>(ra, b, d);\n"
               "  else tl::cuda::wgmma_m64k32_rs_int8<N, kA, kB>(ra, b, d);\n"
               "  tl::cuda::wgmma_commit_group();\n  tl::cuda::wgmma_wait_group<0>();\n"
               "  Acc s = 0;\n  for (int i = 0; i < N / 2; ++i) s += d[i];\n  out[threadIdx.x] = s;\n}\n";
  for (int n : {8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256})
    for (const char* acc : {"float", "int"})
      for (const char* pair : {"false, false", "false, true", "true, false", "true, true"})
        ops8.name_expressions.push_back(std::string("wgmma8_probe<") + acc + ", " + std::to_string(n) + ", " + pair + ">");
  ops8.ptx_must_contain = {"m64n8k32.f32.e4m3.e4m3", "m64n256k32.f32.e5m2.e4m3", "m64n16k32.f32.e4m3.e5m2",
                           "m64n8k32.s32.s8.s8", "m64n256k32.s32.u8.s8", "m64n128k32.s32.s8.u8", "m64n64k32.s32.u8.u8",
                           "}, {%r"};  // the register form: A in braces after the accumulators
  sources.push_back(ops8);

  int failures = 0;
  for (const char* std_flag : {"-std=c++17", "-std=c++20"})
    for (const auto& s : sources) failures += compile(s, inc, std_flag) ? 0 : 1;
  std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
