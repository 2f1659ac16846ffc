// bench_cpu_deepgemm: deepgemm's CPU path, fp8_gemm_nt and bf16_gemm_nt, at a few shapes.
//
//   bench_cpu_deepgemm [--reps N] [--shapes MxNxK,...] [--isa avx512|avx2|generic]
//
// For each shape: fresh N(0, 1) inputs, quantized with per_token_cast_to_fp8 (A) and
// per_block_cast_to_fp8 (B); one warm-up call, then `reps` timed calls of each; the figures are the
// median and, in parentheses, the best (a machine shared with other work shows in the gap). Beside them, the same product through tl::cpu::gemm on the unscaled e4m3 values (one
// float accumulation over all of K, no promotion): the cost of the per-128 promotion is the gap.
// Each result is checked against the unquantized product (relative error, calc_diff).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "deepgemm/deepgemm.h"
#include "testutil/environment.h"
#include "rt/cpu_info.h"
#include "testutil/tensors.h"
#include "tl/device/cpu/gemm.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  int64_t m, n, k;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Timing {
  double median_s, best_s;
};

template <class F>
Timing time_runs(int reps, F&& f) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return {median(t), *std::min_element(t.begin(), t.end())};
}

rt::Tensor normal_bf16(int64_t r, int64_t c, uint64_t seed) {
  rt::Tensor t = rt::Tensor::empty({r, c}, rt::DType::BF16);
  std::vector<double> v(size_t(r * c));
  uint64_t s = seed;
  for (size_t i = 0; i < v.size(); i += 2) {  // Box-Muller on a xorshift generator
    auto uni = [&] {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      return (double(s >> 11) + 0.5) / 9007199254740992.0;
    };
    const double u1 = uni(), u2 = uni(), rad = std::sqrt(-2.0 * std::log(u1));
    v[i] = rad * std::cos(2 * M_PI * u2);
    if (i + 1 < v.size()) v[i + 1] = rad * std::sin(2 * M_PI * u2);
  }
  testutil::from_f64(t, v);
  return t;
}

// The unquantized product, sampled on `rows` rows (float64), for the accuracy columns.
std::vector<double> exact_rows(const rt::Tensor& a, const rt::Tensor& b, const std::vector<int64_t>& rows) {
  const int64_t n = b.size(0), k = a.size(1);
  const auto* ap = static_cast<const tl::bfloat16_t*>(a.data());
  const auto* bp = static_cast<const tl::bfloat16_t*>(b.data());
  std::vector<double> out;
  for (int64_t r : rows)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t x = 0; x < k; ++x) s += double(ap[r * k + x].to_float()) * double(bp[j * k + x].to_float());
      out.push_back(s);
    }
  return out;
}

std::vector<double> sample_rows(const rt::Tensor& d, const std::vector<int64_t>& rows) {
  const std::vector<double> all = testutil::to_f64(d);
  const int64_t n = d.size(1);
  std::vector<double> out;
  for (int64_t r : rows) out.insert(out.end(), all.begin() + r * n, all.begin() + (r + 1) * n);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::vector<Shape> shapes = {{256, 256, 1024}, {1024, 1024, 1024}, {2048, 2048, 2048}, {128, 2112, 7168},
                               {128, 7168, 2048}, {1024, 4096, 7168}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (arg == "--isa" && i + 1 < argc) {
      setenv("DG_CPU_ISA", argv[++i], 1);
    } else if (arg == "--shapes" && i + 1 < argc) {
      shapes.clear();
      std::string list = argv[++i];
      size_t pos = 0;
      while (pos < list.size()) {
        size_t end = list.find(',', pos);
        if (end == std::string::npos) end = list.size();
        Shape s{};
        if (std::sscanf(list.substr(pos, end - pos).c_str(), "%ldx%ldx%ld", &s.m, &s.n, &s.k) != 3) {
          std::fprintf(stderr, "bad shape '%s' (want MxNxK)\n", list.substr(pos, end - pos).c_str());
          return 2;
        }
        shapes.push_back(s);
        pos = end + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--shapes MxNxK,...] [--isa avx512|avx2|generic]\n", argv[0]);
      return 2;
    }
  }
  int threads = 1;
#if defined(_OPENMP)
  threads = omp_get_max_threads();
#endif
  std::printf("CPU: %s, %d threads, GFLOP/s = 2MNK / time: median (best) of %d runs; load average %s\n",
              rt::cpu_info().model.c_str(), threads, reps, testutil::load_average().c_str());
  std::printf("| shape (MxNxK) | fp8_gemm_nt GFLOP/s | bf16_gemm_nt GFLOP/s | tl::cpu::gemm e4m3, no scales | fp8 rel. err | fp8 calc_diff | bf16 rel. err | config |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    const rt::Tensor a = normal_bf16(s.m, s.k, testutil::fresh_seed()), b = normal_bf16(s.n, s.k, testutil::fresh_seed());
    auto [qa, sfa] = deepgemm::per_token_cast_to_fp8(a);
    auto [qb, sfb] = deepgemm::per_block_cast_to_fp8(b);
    rt::Tensor d8 = rt::Tensor::empty({s.m, s.n}, rt::DType::BF16), d16 = rt::Tensor::empty({s.m, s.n}, rt::DType::BF16);
    rt::Tensor draw = rt::Tensor::empty({s.m, s.n}, rt::DType::F32);
    const Timing t8 = time_runs(reps, [&] { deepgemm::fp8_gemm_nt(qa, sfa, qb, sfb, d8); });
    const std::string config = deepgemm::last_config().to_string();
    const Timing t16 = time_runs(reps, [&] { deepgemm::bf16_gemm_nt(a, b, d16); });
    const auto* qap = static_cast<const tl::float8_e4m3_t*>(qa.data());
    const auto* qbp = static_cast<const tl::float8_e4m3_t*>(qb.data());
    const Timing traw = time_runs(reps, [&] {
      tl::cpu::gemm(s.m, s.n, s.k, qap, s.k, false, qbp, s.k, true, tl::cpu::store_epilogue(draw.data_as<float>(), s.n));
    });
    const double gf = 2.0 * double(s.m) * double(s.n) * double(s.k) * 1e-9;
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < s.m; r += std::max<int64_t>(1, s.m / 16)) rows.push_back(r);
    const std::vector<double> exact = exact_rows(a, b, rows);
    const std::vector<double> o8 = sample_rows(d8, rows), o16 = sample_rows(d16, rows);
    std::printf("| %ldx%ldx%ld | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) | %.2f%% | %.2g | %.3f%% | %s |\n", s.m, s.n,
                s.k, gf / t8.median_s, gf / t8.best_s, gf / t16.median_s, gf / t16.best_s, gf / traw.median_s,
                gf / traw.best_s, 100 * testutil::rel_error(o8, exact), testutil::calc_diff(o8, exact),
                100 * testutil::rel_error(o16, exact), config.c_str());
    std::fflush(stdout);
  }
  std::printf("load average at the end: %s\n", testutil::load_average().c_str());
  return 0;
}
