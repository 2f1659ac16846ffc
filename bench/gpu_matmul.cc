// bench_gpu_matmul: the seed matmul (examples/matmul.py, a plain triple loop) compiled by TileLang's
// automatic path for the GPU, and the TileLang-style blocked GEMM (examples/gemm.py), against
// cuBLAS (cublasGemmEx, FP32 accumulation) on the same inputs, in the same run.
//
//   bench_gpu_matmul [--quick]
//   bench_gpu_matmul --blocked M N K   the seed and the best blocked-GEMM tiling (with and without a
//                                      producer warpgroup) at one BF16 shape: how fixed per-tile
//                                      costs weigh as K changes
//   bench_gpu_matmul --eight-bit M N K the 8-bit tile program (examples/gemm_8bit.py) alone, at one
//                                      shape (the full run has it at 4096^3 and 8192^3)
//   bench_gpu_matmul --seed DTYPE M N K  the seed alone beside cuBLAS, one dtype (bfloat16 or
//                                      float16) and shape: what bench/seed_kernel_times.py profiles
//
// The 8-bit rows (int8 and float8 e4m3, B given as [N, K]): int8 beside cuBLAS's int8 GEMM
// (cublasGemmEx, int32 sums), checked for equality; float8 beside cuBLAS's BF16 GEMM of the same
// values (e4m3 values are exact in bfloat16; FP32 out), checked against it. cuBLASLt's FP8 GEMM is
// bench_gpu_deepgemm's peer (`--time M N K`), for the same call.
//
// BF16 and FP16 inputs, output in the input dtype, B given as [K, N] (the seed's layout). Fresh
// random inputs per shape; device events, warm-up, median of 20 runs, the seed and the blocked
// GEMM timed in turns with cuBLAS (interleaved_ms; until stop 34 each side ran its 20 in a row).
// Each result is checked against cuBLAS's (relative error); a mismatch fails the run.
#include <cublas_v2.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "rt/cuda_device.h"
#include "rt/cuda_stream.h"
#include "rt/error.h"
#include "testutil/environment.h"
#include "testutil/tensors.h"
#include "tilelang/module.h"

namespace {

struct Shape {
  int64_t m, n, k;
};

// The seed program in the given dtype. As written it makes its output with zeros_like(a), the
// shape of A, which fits square problems only; for the others the output is made M x N.
std::string seed_source(rt::DType dtype, bool square) {
  std::ifstream in(testutil::source_path("examples/matmul.py"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string src = std::regex_replace(ss.str(), std::regex("FP16"), dtype == rt::DType::BF16 ? "BF16" : "FP16");
  if (!square) src = std::regex_replace(src, std::regex("zeros_like\\(a\\)"), "zeros((a.shape[0], b.shape[1]), a.dtype)");
  return src;
}

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) rt::throw_user_error(rt::str(what, " failed with cuBLAS status ", int(s)));
}

// Row-major C[M,N] = A[M,K] * B[K,N] through column-major cuBLAS: C^T = B^T * A^T.
void cublas_matmul(cublasHandle_t h, const rt::Tensor& a, const rt::Tensor& b, rt::Tensor& c, const Shape& s) {
  const float alpha = 1.0f, beta = 0.0f;
  cudaDataType_t t = a.dtype() == rt::DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  check_cublas(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, int(s.n), int(s.m), int(s.k), &alpha, b.data(), t, int(s.n), a.data(), t, int(s.k), &beta,
                            c.data(), t, int(s.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

double tflops(const Shape& s, double ms) { return 2.0 * double(s.m) * double(s.n) * double(s.k) / (ms * 1e-3) / 1e12; }

// Ours and the peer timed in turns (rt::CudaTimer::time_interleaved), so a clock that drifts over
// the run (the H200 under its power limit) weighs on both alike: their median times, ms.
template <class Ours, class Peer>
std::pair<double, double> interleaved_ms(const rt::CudaTimer& timer, Ours ours, Peer peer) {
  const std::vector<rt::CudaTiming> t = timer.time_interleaved({[&](rt::CuStream) { ours(); }, [&](rt::CuStream) { peer(); }});
  return {t[0].median_ms, t[1].median_ms};
}

// Row-major C[M,N] = A[M,K] * B[N,K]^T through column-major cuBLAS (C^T = B A^T, the "TN" form its
// int8 GEMM takes): int8 into int32 C, or bfloat16 into float32 C.
void cublas_matmul_nt(cublasHandle_t h, const rt::Tensor& a, const rt::Tensor& b, rt::Tensor& c, const Shape& s) {
  const int n = int(s.n), m = int(s.m), k = int(s.k);
  if (a.dtype() == rt::DType::I8) {
    const int32_t alpha = 1, beta = 0;
    check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b.data(), CUDA_R_8I, k, a.data(), CUDA_R_8I, k, &beta, c.data(), CUDA_R_32I, n,
                              CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx (int8)");
  } else {
    const float alpha = 1.0f, beta = 0.0f;
    check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b.data(), CUDA_R_16BF, k, a.data(), CUDA_R_16BF, k, &beta, c.data(), CUDA_R_32F,
                              n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx (bf16 x bf16 -> f32)");
  }
}

// examples/gemm_8bit.py in a few tilings (128-byte rows of K: 128-byte swizzles, whole k32 steps)
// at one shape: int8 beside cuBLAS's int8 GEMM, float8 e4m3 beside cuBLAS's BF16 GEMM of the same
// values. False when a result differs from cuBLAS's.
bool eight_bit_rows(cublasHandle_t handle, rt::CudaTimer& timer, const rt::CudaDeviceInfo& dev, const Shape& s) {
  struct Tiling {
    const char *m, *n, *k, *threads, *stages, *panel;
  };
  bool ok = true;
  rt::Device gpu = rt::Device::cuda(0);
  for (rt::DType dtype : {rt::DType::I8, rt::DType::F8E4M3}) {
    const bool integer = dtype == rt::DType::I8;
    const auto [lo, hi] = testutil::typical_range(dtype);
    rt::Tensor a_host = testutil::random_tensor({s.m, s.k}, dtype, testutil::fresh_seed(), lo, hi);
    rt::Tensor b_host = testutil::random_tensor({s.n, s.k}, dtype, testutil::fresh_seed(), lo, hi);
    rt::Tensor a = a_host.to(gpu), b = b_host.to(gpu), a_peer = a, b_peer = b;
    if (!integer) {  // the peer's inputs: the same values in bfloat16
      rt::Tensor ab = rt::Tensor::empty({s.m, s.k}, rt::DType::BF16), bb = rt::Tensor::empty({s.n, s.k}, rt::DType::BF16);
      testutil::from_f64(ab, testutil::to_f64(a_host));
      testutil::from_f64(bb, testutil::to_f64(b_host));
      a_peer = ab.to(gpu), b_peer = bb.to(gpu);
    }
    const rt::DType out_dtype = integer ? rt::DType::I32 : rt::DType::F32;
    rt::Tensor ref = rt::Tensor::empty({s.m, s.n}, out_dtype, gpu);
    cublas_matmul_nt(handle, a_peer, b_peer, ref, s);
    const std::vector<double> ref_values = testutil::to_f64(ref.to(rt::Device::cpu()));
    for (const Tiling& t : {Tiling{"128", "128", "128", "128", "3", "0"}, Tiling{"128", "128", "128", "128", "4", "0"}, Tiling{"128", "256", "128", "256", "3", "0"},
                            Tiling{"128", "256", "128", "256", "3", "8"},
                            Tiling{"128", "256", "128", "256", "4", "8"}, Tiling{"256", "128", "128", "256", "4", "8"}}) {
      tilelang::CompileOptions opts;
      opts.target = tilelang::Target::cuda(dev.arch_name());
      opts.params = {{"M", std::to_string(s.m)}, {"N", std::to_string(s.n)},    {"K", std::to_string(s.k)}, {"a_dtype", rt::name(dtype)},
                     {"block_M", t.m},          {"block_N", t.n},               {"block_K", t.k},           {"threads", t.threads},
                     {"num_stages", t.stages},  {"panel", t.panel}};
      tilelang::Kernel gemm = tilelang::Module::load(testutil::source_path("examples/gemm_8bit.py")).kernel("matmul", opts);
      rt::Tensor ours = rt::Tensor::empty({s.m, s.n}, out_dtype, gpu);
      gemm.launch({a, b, ours});
      const double err = testutil::rel_error(testutil::to_f64(ours.to(rt::Device::cpu())), ref_values);
      const auto [ms_ours, ms_blas] = interleaved_ms(timer, [&] { gemm.launch({a, b, ours}); }, [&] { cublas_matmul_nt(handle, a_peer, b_peer, ref, s); });
      // float8: exact products, which Hopper's FP8 tensor cores add with fewer mantissa bits than
      // float32 (~1e-4-1e-3 against cuBLAS's float32 sums); a wrong tile is off by O(1).
      const bool good = integer ? err == 0 : err < 5e-3;
      ok &= good;
      std::printf("| 8-bit tile GEMM (examples/gemm_8bit.py, %sx%sx%s, %s threads, %s stages, swizzle panel %s) | %s | %lld x %lld x %lld | %.1f | %.1f (%s) | %.3f | %.2e%s |\n",
                  t.m, t.n, t.k, t.threads, t.stages, t.panel, rt::name(dtype), (long long)s.m, (long long)s.n, (long long)s.k, tflops(s, ms_ours), tflops(s, ms_blas),
                  integer ? "int8" : "bf16", ms_blas / ms_ours, err, good ? "" : " FAIL");
      std::fflush(stdout);
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    // --quick: the two square shapes; --few-tiles: the seed at M = 128 only (the shapes whose tile
    // choice leaves SMs idle); --blocked M N K: the seed and the blocked GEMM at one shape.
    bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const bool few_tiles = argc == 2 && std::strcmp(argv[1], "--few-tiles") == 0;
    const bool one_shape = argc == 5 && std::strcmp(argv[1], "--blocked") == 0;
    const bool eight_bit = argc == 5 && std::strcmp(argv[1], "--eight-bit") == 0;
    const bool seed_only = argc == 6 && std::strcmp(argv[1], "--seed") == 0;
    RT_USER_CHECK(argc == 1 || quick || few_tiles || one_shape || eight_bit || seed_only,
                  "usage: bench_gpu_matmul [--quick | --few-tiles | --blocked M N K | --eight-bit M N K | --seed DTYPE M N K]");
    const int first_size = seed_only ? 3 : 2;
    const Shape tile_shape = one_shape || eight_bit || seed_only
                                 ? Shape{std::atoll(argv[first_size]), std::atoll(argv[first_size + 1]), std::atoll(argv[first_size + 2])}
                                 : Shape{4096, 4096, 4096};
    RT_USER_CHECK(tile_shape.m > 0 && tile_shape.n > 0 && tile_shape.k > 0, argv[1], " needs three positive sizes");
    const std::optional<rt::DType> seed_dtype = seed_only ? rt::parse_dtype(argv[2]) : std::nullopt;
    RT_USER_CHECK(!seed_only || seed_dtype == rt::DType::BF16 || seed_dtype == rt::DType::F16, "--seed takes bfloat16 or float16, not '",
                  argv[2], "'");
    const rt::CudaDeviceInfo& dev = rt::cuda_device(0);
    std::printf("device: %s (%s, %d SMs)\n", dev.name.c_str(), dev.arch_name().c_str(), dev.sm_count);
    cublasHandle_t handle;
    check_cublas(cublasCreate(&handle), "cublasCreate");
    rt::CudaTimer timer(nullptr, 0, rt::CudaTimer::Options{5, quick ? 5 : 20, false});
    if (eight_bit) {
      std::printf("\n| kernel | dtype | M x N x K | ours TFLOPS | cuBLAS TFLOPS | ours / cuBLAS | rel. error vs cuBLAS |\n|---|---|---|---|---|---|---|\n");
      const bool ok = eight_bit_rows(handle, timer, dev, tile_shape);
      cublasDestroy(handle);
      return ok ? 0 : 1;
    }
    std::vector<Shape> shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}};
    for (int64_t m : {4096, 128})
      for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{2112, 7168}, {24576, 1536}, {7168, 16384}, {4096, 7168}, {7168, 2048}})
        shapes.push_back({m, n, k});
    if (quick) shapes.resize(2);
    if (few_tiles) shapes.erase(shapes.begin(), shapes.end() - 5);
    if (one_shape || seed_only) shapes = {tile_shape};
    bool ok = true;
    std::printf("\n| kernel | dtype | M x N x K | ours TFLOPS | cuBLAS TFLOPS | ours / cuBLAS | rel. error vs cuBLAS |\n|---|---|---|---|---|---|---|\n");
    for (rt::DType dtype : {rt::DType::BF16, rt::DType::F16}) {
      if ((one_shape && dtype != rt::DType::BF16) || (seed_only && dtype != *seed_dtype)) continue;
      tilelang::CompileOptions opts;
      opts.target = tilelang::Target::cuda(dev.arch_name());
      tilelang::Kernel square = tilelang::Module::from_source(seed_source(dtype, true), "examples/matmul.py").kernel("matmul", opts);
      tilelang::Kernel general = tilelang::Module::from_source(seed_source(dtype, false), "examples/matmul.py").kernel("matmul", opts);
      for (const Shape& s : shapes) {
        const tilelang::Kernel& seed = s.n == s.k ? square : general;
        rt::Device gpu = rt::Device::cuda(0);
        rt::Tensor a = testutil::random_tensor({s.m, s.k}, dtype, testutil::fresh_seed()).to(gpu);
        rt::Tensor b = testutil::random_tensor({s.k, s.n}, dtype, testutil::fresh_seed()).to(gpu);
        rt::Tensor ours = rt::Tensor::empty({s.m, s.n}, dtype, gpu), ref = rt::Tensor::empty({s.m, s.n}, dtype, gpu);
        seed.launch({a, b, ours});
        cublas_matmul(handle, a, b, ref, s);
        double err = testutil::rel_error(testutil::to_f64(ours.to(rt::Device::cpu())), testutil::to_f64(ref.to(rt::Device::cpu())));
        const auto [ms_ours, ms_blas] = interleaved_ms(timer, [&] { seed.launch({a, b, ours}); }, [&] { cublas_matmul(handle, a, b, ref, s); });
        bool good = err < (dtype == rt::DType::BF16 ? 1e-2 : 2e-3);
        ok &= good;
        std::printf("| seed (automatic) | %s | %lld x %lld x %lld | %.1f | %.1f | %.3f | %.2e%s |\n", rt::name(dtype), (long long)s.m, (long long)s.n,
                    (long long)s.k, tflops(s, ms_ours), tflops(s, ms_blas), ms_blas / ms_ours, err, good ? "" : " FAIL");
        std::fflush(stdout);
      }
    }
    // The explicit tile program (T.gemm on wgmma on sm_90a, the accumulator in registers), in its
    // default configuration first (128 x 256 x 64, 256 threads, 3 stages, panels of 8), then others
    // (the first is the former default).
    // Each configuration also without T.use_swizzle (panel 0), for the rasterization's effect, and
    // without warp specialization (warp_specialize=False: no producer warpgroup), for its effect.
    struct TileConfig {
      const char *m, *n, *k, *threads, *stages, *panel, *ws;
    };
    std::vector<TileConfig> configs;
    for (const TileConfig& c : {TileConfig{"128", "256", "64", "256", "3", "8", "None"}, TileConfig{"128", "128", "32", "128", "3", "8", "None"},
                                TileConfig{"128", "128", "64", "128", "4", "8", "None"}, TileConfig{"128", "256", "64", "256", "4", "8", "None"},
                                TileConfig{"128", "256", "32", "256", "5", "8", "None"}}) {
      if (few_tiles || seed_only || (one_shape && std::strcmp(c.n, "256") + std::strcmp(c.k, "64") != 0)) continue;
      configs.push_back(c);
      configs.push_back(TileConfig{c.m, c.n, c.k, c.threads, c.stages, "0", c.ws});
      configs.push_back(TileConfig{c.m, c.n, c.k, c.threads, c.stages, c.panel, "False"});
    }
    for (const TileConfig& c : configs) {
      const Shape s = tile_shape;
      tilelang::CompileOptions opts;
      opts.target = tilelang::Target::cuda(dev.arch_name());
      opts.params = {{"M", std::to_string(s.m)}, {"N", std::to_string(s.n)}, {"K", std::to_string(s.k)}, {"dtype", "bfloat16"}, {"block_M", c.m},
                     {"block_N", c.n},    {"block_K", c.k},     {"threads", c.threads}, {"num_stages", c.stages}, {"panel", c.panel},
                     {"warp_specialize", c.ws}};
      tilelang::Kernel gemm = tilelang::Module::load(testutil::source_path("examples/gemm.py")).kernel("matmul", opts);
      rt::Device gpu = rt::Device::cuda(0);
      rt::Tensor a = testutil::random_tensor({s.m, s.k}, rt::DType::BF16, testutil::fresh_seed()).to(gpu);
      rt::Tensor b = testutil::random_tensor({s.k, s.n}, rt::DType::BF16, testutil::fresh_seed()).to(gpu);
      rt::Tensor ours = rt::Tensor::empty({s.m, s.n}, rt::DType::BF16, gpu), ref = rt::Tensor::empty({s.m, s.n}, rt::DType::BF16, gpu);
      gemm.launch({a, b, ours});
      cublas_matmul(handle, a, b, ref, s);
      double err = testutil::rel_error(testutil::to_f64(ours.to(rt::Device::cpu())), testutil::to_f64(ref.to(rt::Device::cpu())));
      const auto [ms_ours, ms_blas] = interleaved_ms(timer, [&] { gemm.launch({a, b, ours}); }, [&] { cublas_matmul(handle, a, b, ref, s); });
      bool good = err < 1e-2;
      ok &= good;
      std::printf("| blocked GEMM (examples/gemm.py, %sx%sx%s, %s threads, %s stages, swizzle panel %s, warp_specialize=%s) | bfloat16 | %lld x %lld x %lld | %.1f | %.1f | %.3f | %.2e%s |\n",
                  c.m, c.n, c.k, c.threads, c.stages, c.panel, c.ws, (long long)s.m, (long long)s.n, (long long)s.k, tflops(s, ms_ours), tflops(s, ms_blas),
                  ms_blas / ms_ours, err, good ? "" : " FAIL");
      std::fflush(stdout);
    }
    if (!few_tiles && !one_shape && !seed_only)
      for (const Shape& s : quick ? std::vector<Shape>{{4096, 4096, 4096}} : std::vector<Shape>{{4096, 4096, 4096}, {8192, 8192, 8192}})
        ok &= eight_bit_rows(handle, timer, dev, s);
    cublasDestroy(handle);
    std::printf("\n%s\n", ok ? "all results match cuBLAS" : "MISMATCH against cuBLAS");
    return ok ? 0 : 1;
  } catch (const rt::Error& e) {
    std::fprintf(stderr, "bench_gpu_matmul: %s\n", e.what());
    return 1;
  }
}
