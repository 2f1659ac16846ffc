// bench_cpu_gemm: tl::cpu::gemm and the seed matmul compiled by TileLang's automatic path
// (examples/matmul.py: a plain triple loop) against OpenBLAS cblas_sgemm on the same number of threads.
//
//   bench_cpu_gemm [--threads N] [--reps N] [--rounds N] [--sizes 256,512,...]
//
// Row-major C = A * B, fresh random inputs. For each shape: warm-up runs, then `rounds` rounds of
// (`reps` timed runs of ours, a pause, `reps` timed runs of OpenBLAS, a pause); the figure is the
// median over all timed runs. Alternating blocks keeps a noisy machine fair to both sides, and the
// pauses let the other library's spinning worker threads go to sleep. Our result is checked
// against OpenBLAS's (max relative difference).
//
// OpenBLAS 0.3.21 (Debian 12) does not recognise newer Xeons (e.g. family 6 model 207) and falls
// back to its Prescott (SSE3) kernels, which would make the comparison meaningless. When the
// auto-detected core is such a fallback on an AVX-512 host and OPENBLAS_CORETYPE is not set, the
// program re-executes itself with OPENBLAS_CORETYPE=SapphireRapids (OpenBLAS picks its best AVX-512
// kernels for it) and prints which core OpenBLAS used.
#include "testutil/environment.h"
#include "tl/device/cpu/gemm.h"
#include "tilelang/module.h"

#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern "C" {
void openblas_set_num_threads(int num_threads);
char* openblas_get_corename(void);
char* openblas_get_config(void);
}

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <class F>
double time_once(F&& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time used by other processes: total busy time from /proc/stat minus our own (getrusage).
struct CpuSample {
  double busy_s = 0, self_s = 0, wall_s = 0;
};
CpuSample cpu_sample() {
  CpuSample c;
  if (std::FILE* f = std::fopen("/proc/stat", "r")) {
    unsigned long long v[8] = {};
    if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                    &v[7]) == 8)
      c.busy_s = double(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / double(sysconf(_SC_CLK_TCK));
    std::fclose(f);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  c.self_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  c.wall_s = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  return c;
}
// Average number of cores other processes kept busy between two samples.
double others_cores(const CpuSample& a, const CpuSample& b) {
  const double wall = b.wall_s - a.wall_s;
  if (wall <= 0) return 0;
  return std::max(0.0, ((b.busy_s - a.busy_s) - (b.self_s - a.self_s)) / wall);
}

void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

struct Options {
  int threads = 0;
  int reps = 7;
  int rounds = 3;
  std::vector<int> sizes = {256, 512, 1024, 2048};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") {
      o.threads = std::atoi(next());
    } else if (a == "--reps") {
      o.reps = std::max(1, std::atoi(next()));
    } else if (a == "--rounds") {
      o.rounds = std::max(1, std::atoi(next()));
    } else if (a == "--sizes") {
      o.sizes.clear();
      std::string s = next();
      size_t p = 0;
      while (p < s.size()) {
        const size_t q = s.find(',', p);
        o.sizes.push_back(std::atoi(s.substr(p, q - p).c_str()));
        if (q == std::string::npos) break;
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--reps N] [--rounds N] [--sizes 256,512,...]\n", argv[0]);
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  if (o.threads <= 0) o.threads = omp_get_num_procs();
  return o;
}

// See the header comment: make OpenBLAS use its AVX-512 kernels when it failed to detect the CPU.
void maybe_reexec_with_coretype(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  std::string core = openblas_get_corename();
  for (auto& c : core) c = char(std::tolower(static_cast<unsigned char>(c)));
  const bool avx512_core = core == "skylakex" || core == "cooperlake" || core == "sapphirerapids";
  if (avx512_core || !__builtin_cpu_supports("avx512f")) return;
  std::printf("OpenBLAS auto-detected core '%s' on an AVX-512 host; re-running with OPENBLAS_CORETYPE=SapphireRapids\n",
              openblas_get_corename());
  std::fflush(stdout);
  setenv("OPENBLAS_CORETYPE", "SapphireRapids", 1);
  setenv("TL_BENCH_AUTODETECTED_CORE", openblas_get_corename(), 1);
  execv("/proc/self/exe", argv);
  std::perror("execv /proc/self/exe (continuing with the auto-detected core)");
}

template <class T>
std::vector<T> random_matrix(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<T> v(n);
  for (auto& x : v) x = tl::from_float<T>(u(rng));
  return v;
}

struct Row {
  std::string shape;
  double ours = 0, blas = 0;
  double seed = NAN;  // the compiled seed program, when measured
  double max_rel_diff = 0;
  double others = 0;  // cores used by other processes meanwhile
};

// Our GEMM on inputs of type T (converted from the same random floats as OpenBLAS's f32 inputs).
// The seed program with its dtype annotation set to T's (it is written for float16).
tilelang::Kernel seed_kernel(rt::DType dtype) {
  std::ifstream in(testutil::source_path("examples/matmul.py"));
  std::stringstream src;
  src << in.rdbuf();
  std::string text = std::regex_replace(src.str(), std::regex("FP16"), dtype == rt::DType::F32 ? "FP32" : "FP16");
  tilelang::CompileOptions copts;
  copts.target = tilelang::Target::cpu();
  return tilelang::Module::from_source(text, "examples/matmul.py").kernel("matmul", copts);
}

template <class T>
Row bench_shape(int M, int N, int K, bool trans_b, const Options& o, const char* label, const tilelang::Kernel* seed = nullptr) {
  std::mt19937 rng(uint32_t(M * 7 + N * 13 + K * 17));
  const std::vector<float> A = random_matrix<float>(size_t(M) * K, rng);
  const std::vector<float> B = random_matrix<float>(size_t(K) * N, rng);
  std::vector<T> At(A.size()), Bt(B.size());
  for (size_t i = 0; i < A.size(); ++i) At[i] = tl::from_float<T>(A[i]);
  for (size_t i = 0; i < B.size(); ++i) Bt[i] = tl::from_float<T>(B[i]);
  // OpenBLAS runs on the same (rounded) values our GEMM sees.
  std::vector<float> Af(A.size()), Bf(B.size());
  for (size_t i = 0; i < A.size(); ++i) Af[i] = tl::to_float(At[i]);
  for (size_t i = 0; i < B.size(); ++i) Bf[i] = tl::to_float(Bt[i]);
  std::vector<float> C_ours(size_t(M) * N, NAN), C_blas(size_t(M) * N, NAN);
  const int ldb = trans_b ? K : N;

  tl::cpu::GemmBlocking blk = tl::cpu::default_blocking();
  blk.threads = o.threads;
  auto ours = [&] {
    tl::cpu::gemm(M, N, K, At.data(), K, false, Bt.data(), ldb, trans_b, tl::cpu::store_epilogue(C_ours.data(), N),
                  blk);
  };
  auto blas = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, Af.data(), K,
                Bf.data(), ldb, 0.0f, C_blas.data(), N);
  };

  // The seed program computes C = A * B on the same inputs (square problems only: its output has A's shape).
  std::vector<T> C_seed(size_t(M) * N);
  const rt::DType dt = std::is_same_v<T, float> ? rt::DType::F32 : rt::DType::F16;
  rt::Tensor ta = rt::Tensor::wrap(At.data(), {M, K}, dt, rt::Device::cpu());
  rt::Tensor tb = rt::Tensor::wrap(Bt.data(), {K, N}, dt, rt::Device::cpu());
  rt::Tensor tc = rt::Tensor::wrap(C_seed.data(), {M, N}, dt, rt::Device::cpu());
  auto run_seed = [&] { seed->launch({ta, tb, tc}); };

  std::vector<double> t_ours, t_blas, t_seed;
  const CpuSample before = cpu_sample();
  for (int round = 0; round < o.rounds; ++round) {
    for (int w = 0; w < 2; ++w) ours();
    for (int r = 0; r < o.reps; ++r) t_ours.push_back(time_once(ours));
    pause_ms(300);
    for (int w = 0; w < 2; ++w) blas();
    for (int r = 0; r < o.reps; ++r) t_blas.push_back(time_once(blas));
    pause_ms(300);
    if (seed) {
      for (int w = 0; w < 2; ++w) run_seed();
      for (int r = 0; r < o.reps; ++r) t_seed.push_back(time_once(run_seed));
      pause_ms(300);
    }
  }
  const double flops = 2.0 * M * N * double(K);
  Row row;
  row.others = others_cores(before, cpu_sample());
  row.shape = label;
  row.ours = flops / median(t_ours) / 1e9;
  row.blas = flops / median(t_blas) / 1e9;
  double num = 0, den = 0;
  for (size_t i = 0; i < C_ours.size(); ++i) {
    num = std::max(num, double(std::fabs(C_ours[i] - C_blas[i])));
    den = std::max(den, double(std::fabs(C_blas[i])));
  }
  row.max_rel_diff = std::isnan(num) ? NAN : num / den;
  if (seed) {
    row.seed = flops / median(t_seed) / 1e9;
    double seed_diff = 0;
    for (size_t i = 0; i < C_seed.size(); ++i) seed_diff = std::max(seed_diff, std::fabs(double(tl::to_float(C_seed[i])) - double(C_blas[i])));
    // f32 output: float accumulation differences; f16 output: its rounding.
    row.max_rel_diff = std::max(row.max_rel_diff, std::isnan(seed_diff) ? NAN : seed_diff / den);
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  maybe_reexec_with_coretype(argv);
  const Options o = parse(argc, argv);
  openblas_set_num_threads(o.threads);
  omp_set_num_threads(o.threads);

  const tl::cpu::GemmBlocking blk = tl::cpu::default_blocking();
  const char* detected = std::getenv("TL_BENCH_AUTODETECTED_CORE");
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("threads %d, %d rounds x %d timed runs each side (median), OMP_WAIT_POLICY=%s\n", o.threads, o.rounds,
              o.reps, wait_policy ? wait_policy : "(unset)");
  std::printf("OpenBLAS: core %s%s%s; %s\n", openblas_get_corename(), detected ? ", auto-detected " : "",
              detected ? detected : "", openblas_get_config());
  std::printf("tl::cpu::gemm: micro-tile %dx%d, blocking mc %d nc %d kc %d\n", tl::cpu::kGemmMR, tl::cpu::kGemmNR,
              blk.mc, blk.nc, blk.kc);
  std::printf("load average before: %s\n", testutil::load_average().c_str());

  auto print_header = [] {
    std::printf("| %-26s | %12s | %12s | %16s | %6s | %10s | %12s | %11s |\n", "shape (MxNxK)", "ours GFLOP/s",
                "seed GFLOP/s", "OpenBLAS GFLOP/s", "ratio", "seed ratio", "max rel diff", "other load");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(28, '-').c_str(), std::string(14, '-').c_str(),
                std::string(14, '-').c_str(), std::string(18, '-').c_str(), std::string(8, '-').c_str(),
                std::string(12, '-').c_str(), std::string(14, '-').c_str(), std::string(13, '-').c_str());
  };
  auto print_row = [](const Row& r) {
    std::printf("| %-26s | %12.1f | %12.1f | %16.1f | %6.3f | %10.3f | %12.2e | %5.2f cores |\n", r.shape.c_str(), r.ours, r.seed,
                r.blas, r.ours / r.blas, r.seed / r.blas, r.max_rel_diff, r.others);
    std::fflush(stdout);
  };
  // "seed": examples/matmul.py compiled by the automatic path (first call compiles; warm-up excludes it).
  const tilelang::Kernel seed_f32 = seed_kernel(rt::DType::F32), seed_f16 = seed_kernel(rt::DType::F16);
  print_header();
  for (int n : o.sizes) {
    const std::string label = std::to_string(n) + "^3 f32 NN";
    print_row(bench_shape<float>(n, n, n, false, o, label.c_str(), &seed_f32));
  }
  print_row(bench_shape<float>(1024, 1024, 1024, true, o, "1024^3 f32 NT"));
  // f16 inputs (converted while packing) against OpenBLAS f32 on the same values.
  print_row(bench_shape<tl::half_t>(1024, 1024, 1024, false, o, "1024^3 f16 in (vs sgemm)", &seed_f16));
  print_row(bench_shape<tl::bfloat16_t>(1024, 1024, 1024, false, o, "1024^3 bf16 in (vs sgemm)"));
  std::printf("\nload average after: %s\n", testutil::load_average().c_str());
  std::printf("'other load': cores kept busy by other processes during the row. Above ~0.1 both sides are noisy,\n"
              "and ours suffers more: OpenMP's default spin-waiting fights the other process for the cores\n"
              "(OMP_WAIT_POLICY=passive avoids that at ~10%% cost on small sizes when the machine is idle).\n");
  return 0;
}
