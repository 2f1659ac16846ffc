// bench_gpu_attention: the FlashAttention-style tile program (examples/flash_attention.py) on the
// GPU, BF16, head dim 128, causal and not, at the shapes bench/torch_attention.py times torch's
// SDPA backends on (the peers, in the same scripts/gpu_check.sh run); and the JIT compile time of
// the kernel, cold (empty cache) and from the disk cache.
//
//   bench_gpu_attention [--quick | --main] [--causal] [--dim D] [--keys N]
//       (--dim: another head dim, 16-256; --keys: 128-query tiles of N keys, 16-256, beside the default)
//
// Device events, warm-up, median. Sampled query rows are checked against a float64 reference.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rt/cuda_device.h"
#include "rt/cuda_stream.h"
#include "rt/error.h"
#include "testutil/environment.h"
#include "testutil/tensors.h"
#include "tilelang/module.h"

namespace {

int64_t g_dim = 128;  // head dim (--dim)

// A tiling of the program: block_M queries per block with `threads` threads (consumers: one warpgroup
// per 64 rows), block_N keys per step; warp_specialize is the pipelined loop's argument (None: a
// producer warpgroup on sm_90a; False: none); pipelined_softmax the FA3 schedule of the loop (the
// softmax of step k beside the P V gemm of step k - 1); register_p whether the P V gemm reads P
// from registers (wgmma's RS form, CompileOptions::wgmma_register_a) or from a shared tile.
struct Tiling {
  int block_m, block_n, threads;
  const char* warp_specialize;
  bool pipelined_softmax;
  bool register_p = true;
};

tilelang::Kernel attention_kernel(int64_t b, int64_t h, int64_t s, bool causal, const std::string& arch, const Tiling& t) {
  tilelang::CompileOptions opts;
  opts.target = tilelang::Target::cuda(arch);
  opts.params = {{"batch", std::to_string(b)},       {"heads", std::to_string(h)},
                 {"seq_len", std::to_string(s)},     {"dim", std::to_string(g_dim)},
                 {"is_causal", causal ? "True" : "False"}, {"dtype", "bfloat16"},
                 {"block_M", std::to_string(t.block_m)},  {"block_N", std::to_string(t.block_n)},
                 {"threads", std::to_string(t.threads)},  {"warp_specialize", t.warp_specialize},
                 {"pipelined_softmax", t.pipelined_softmax ? "True" : "False"}};
  opts.wgmma_register_a = t.register_p;
  return tilelang::Module::load(testutil::source_path("examples/flash_attention.py")).kernel("flash_attention", opts);
}

// Relative error of a few query rows of (batch 0, head 0) against float64 softmax(QK^T/sqrt(d))V.
double sampled_error(const rt::Tensor& q, const rt::Tensor& k, const rt::Tensor& v, const rt::Tensor& o, int64_t h, int64_t s, bool causal) {
  std::vector<double> qv = testutil::to_f64(q), kv = testutil::to_f64(k), vv = testutil::to_f64(v), ov = testutil::to_f64(o);
  auto at = [&](int64_t t, int64_t x) { return (t * h) * g_dim + x; };  // batch 0, head 0 of [b, s, h, d]
  std::vector<double> got, want;
  for (int64_t i : {int64_t{0}, s / 3, s / 2 + 1, s - 1}) {
    int64_t keys = causal ? i + 1 : s;
    std::vector<double> p(static_cast<size_t>(keys));
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < keys; ++j) {
      double dot = 0;
      for (int64_t x = 0; x < g_dim; ++x) dot += qv[at(i, x)] * kv[at(j, x)];
      p[j] = dot / std::sqrt(double(g_dim));
      mx = std::max(mx, p[j]);
    }
    for (double& x : p) sum += (x = std::exp(x - mx));
    for (int64_t x = 0; x < g_dim; ++x) {
      double acc = 0;
      for (int64_t j = 0; j < keys; ++j) acc += p[j] * vv[at(j, x)];
      want.push_back(acc / sum);
      got.push_back(ov[at(i, x)]);
    }
  }
  return testutil::rel_error(got, want);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    // --quick: the first shape only; --main: every shape, only the FA3-scheduled tilings with a
    // producer and P in registers (the ones to compare with the peers); --causal (after either or
    // alone): causal rows only; --keys N: only 128 x N tiles on two consumers against the default.
    bool quick = false, main_only = false, causal_only = false;
    int64_t keys = 0;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--quick") == 0) quick = true;
      else if (std::strcmp(argv[i], "--main") == 0) main_only = true;
      else if (std::strcmp(argv[i], "--causal") == 0) causal_only = true;
      else if (std::strcmp(argv[i], "--dim") == 0 && i + 1 < argc && std::atoll(argv[i + 1]) >= 16 &&
               std::atoll(argv[i + 1]) <= 256)
        g_dim = std::atoll(argv[++i]);
      else if (std::strcmp(argv[i], "--keys") == 0 && i + 1 < argc && std::atoll(argv[i + 1]) >= 16 &&
               std::atoll(argv[i + 1]) <= 256 && std::atoll(argv[i + 1]) % 16 == 0)
        keys = std::atoll(argv[++i]);
      else {
        std::fprintf(stderr, "usage: bench_gpu_attention [--quick | --main] [--causal] [--dim 16-256] [--keys 16-256, a multiple of 16]\n");
        return 2;
      }
    }
    const rt::CudaDeviceInfo& dev = rt::cuda_device(0);
    std::printf("device: %s (%s, %d SMs)\n", dev.name.c_str(), dev.arch_name().c_str(), dev.sm_count);
    rt::CudaTimer timer(nullptr, 0, rt::CudaTimer::Options{2, quick ? 3 : 10, false});
    struct Shape {
      int64_t b, h, s;
    };
    std::vector<Shape> shapes = {{8, 16, 4096}, {4, 16, 8192}, {2, 16, 16384}};
    if (quick) shapes.resize(1);
    bool ok = true;
    // The example's defaults (64 x 64, one warpgroup) with and without the producer warpgroup, each
    // with the FA3 schedule and without, and 128-query tiles on two consumer warpgroups (2-3% slower
    // on the H200 without the schedule, 128 x 64 10%: perf.md); P from registers, and for the FA3
    // schedule with a producer also staged through shared memory (the form before), in one process.
    std::vector<Tiling> tilings = {{64, 64, 128, "None", true},          {64, 64, 128, "None", true, false}, {64, 64, 128, "None", false},
                                   {64, 64, 128, "False", true},         {64, 64, 128, "False", false},      {128, 128, 256, "None", true},
                                   {128, 128, 256, "None", true, false}, {128, 128, 256, "None", false}};
    if (main_only) tilings = {{128, 128, 256, "None", true}, {64, 64, 128, "None", true}};
    if (keys > 0) tilings = {{128, keys, 256, "None", true}, {128, 128, 256, "None", true}};
    std::printf("\n| batch x heads x seq | causal | block_M x block_N, threads | warp_specialize | pipelined_softmax | P | ours TFLOPS | JIT cold s | JIT cached s | sampled rel. error |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Shape& sh : shapes) {
      // Fresh inputs per shape (generating them on the host is most of this benchmark's time).
      rt::Device gpu = rt::Device::cuda(0);
      rt::Tensor q = testutil::random_tensor({sh.b, sh.s, sh.h, g_dim}, rt::DType::BF16, testutil::fresh_seed());
      rt::Tensor k = testutil::random_tensor({sh.b, sh.s, sh.h, g_dim}, rt::DType::BF16, testutil::fresh_seed());
      rt::Tensor v = testutil::random_tensor({sh.b, sh.s, sh.h, g_dim}, rt::DType::BF16, testutil::fresh_seed());
      rt::Tensor qd = q.to(gpu), kd = k.to(gpu), vd = v.to(gpu), od = rt::Tensor::empty(q.shape(), rt::DType::BF16, gpu);
      for (bool causal : {false, true})
        for (const Tiling& t : tilings) {
          if (causal_only && !causal) continue;
          // The first launch compiles (NVRTC; the disk cache is empty on a fresh machine); a new
          // kernel object for the same program then loads the cached binary.
          auto seconds = [](auto&& f) {
            auto t0 = std::chrono::steady_clock::now();
            f();
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          };
          od.zero_();  // a kernel that skipped rows must not pass on the previous one's output
          tilelang::Kernel kern = attention_kernel(sh.b, sh.h, sh.s, causal, dev.arch_name(), t);
          double cold = 0;
          try {
            cold = seconds([&] { kern.launch({qd, kd, vd, od}); });
          } catch (const rt::Error& e) {  // a tiling this head dim cannot take (shared memory): say so, go on
            std::printf("| %lld x %lld x %lld | %s | %d x %d, %d | %s | %s | %s | - (%s) | | | |\n", (long long)sh.b,
                        (long long)sh.h, (long long)sh.s, causal ? "True" : "False", t.block_m, t.block_n, t.threads,
                        t.warp_specialize, t.pipelined_softmax ? "True" : "False", t.register_p ? "registers" : "shared",
                        e.what());
            continue;
          }
          double cached = seconds([&] { attention_kernel(sh.b, sh.h, sh.s, causal, dev.arch_name(), t).launch({qd, kd, vd, od}); });
          double err = sampled_error(q, k, v, od.to(rt::Device::cpu()), sh.h, sh.s, causal);
          double ms = timer.median_ms([&](rt::CuStream) { kern.launch({qd, kd, vd, od}); });
          double flops = 4.0 * double(sh.b * sh.h) * double(sh.s) * double(sh.s) * double(g_dim) / (causal ? 2 : 1);
          bool good = err < 2e-2;
          ok &= good;
          std::printf("| %lld x %lld x %lld | %s | %d x %d, %d | %s | %s | %s | %.1f | %.2f | %.2f | %.2e%s |\n", (long long)sh.b, (long long)sh.h,
                      (long long)sh.s, causal ? "True" : "False", t.block_m, t.block_n, t.threads, t.warp_specialize, t.pipelined_softmax ? "True" : "False",
                      t.register_p ? "registers" : "shared", flops / (ms * 1e-3) / 1e12, cold, cached, err, good ? "" : " FAIL");
          std::fflush(stdout);
        }
    }
    std::printf("\n%s\n", ok ? "all sampled rows match the reference" : "MISMATCH against the reference");
    return ok ? 0 : 1;
  } catch (const rt::Error& e) {
    std::fprintf(stderr, "bench_gpu_attention: %s\n", e.what());
    return 1;
  }
}
