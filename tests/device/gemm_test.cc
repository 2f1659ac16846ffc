// tl::cpu::gemm and tl::cpu::gemm_tile against a float64 reference on fresh random inputs.
//
// Every output element is checked against the rigorous bound of float accumulation,
//   |out - ref| <= (K + 2) * u * (|c0| + sum_k |a_ik * b_kj|)   (u = 2^-24),
// and the whole output by relative Frobenius error and DeepGEMM's calc_diff. Outputs and the unused
// padding of every operand are poisoned (NaN, or a large value for int8), so unwritten elements and
// reads outside the logical matrices show up.
#include "tl/device/cpu/gemm.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <class T>
T poison_value() {
  if constexpr (std::is_integral_v<T>) {
    return T(100);
  } else {
    return tl::from_float<T>(kNaN);
  }
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "f32";
  if constexpr (std::is_same_v<T, tl::half_t>) return "f16";
  if constexpr (std::is_same_v<T, tl::bfloat16_t>) return "bf16";
  if constexpr (std::is_same_v<T, tl::float8_e4m3_t>) return "e4m3";
  if constexpr (std::is_same_v<T, tl::float8_e5m2_t>) return "e5m2";
  if constexpr (std::is_same_v<T, int8_t>) return "i8";
  return "?";
}

// A stored matrix: rows x cols logical, row stride ld >= cols, padding poisoned; `val` holds the
// logical values (after quantisation to T) in double.
template <class T>
struct Operand {
  int64_t rows = 0, cols = 0, ld = 0;
  std::vector<T> data;
  std::vector<double> val;
  double at(int64_t r, int64_t c) const { return val[size_t(r * cols + c)]; }
};

template <class T>
Operand<T> make_operand(int64_t rows, int64_t cols, int64_t pad, std::mt19937& rng) {
  Operand<T> m;
  m.rows = rows;
  m.cols = cols;
  m.ld = cols + pad;
  m.data.assign(size_t(std::max<int64_t>(1, rows * m.ld)), poison_value<T>());
  m.val.resize(size_t(rows * cols));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float x = u(rng);
      if constexpr (std::is_integral_v<T>) x *= 8.0f;
      const T q = tl::from_float<T>(x);
      m.data[size_t(r * m.ld + c)] = q;
      m.val[size_t(r * cols + c)] = double(tl::to_float(q));
    }
  return m;
}

struct Reference {
  std::vector<double> value;  // M x N
  std::vector<double> bound;  // sum_k |a*b|
};

template <class TA, class TB>
Reference reference(int64_t M, int64_t N, int64_t K, const Operand<TA>& A, bool ta, const Operand<TB>& B, bool tb) {
  Reference ref;
  ref.value.assign(size_t(M * N), 0.0);
  ref.bound.assign(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const double a = ta ? A.at(k, i) : A.at(i, k);
      for (int64_t j = 0; j < N; ++j) {
        const double b = tb ? B.at(j, k) : B.at(k, j);
        ref.value[size_t(i * N + j)] += a * b;
        ref.bound[size_t(i * N + j)] += std::fabs(a * b);
      }
    }
  return ref;
}

// Compares out (M x N with row stride ldo, as double via get) to want with per-element bounds.
struct Checker {
  int64_t M, N, K;
  double extra_rel = 0;  // extra relative error allowed per element (rounding of a narrow output)
  std::string what;

  template <class Get>
  void check(Get get, const std::vector<double>& want, const std::vector<double>& bound) const {
    const double u = std::ldexp(1.0, -24);
    double err2 = 0, ref2 = 0, sxy = 0, sxx = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        const double x = get(i, j), y = want[size_t(i * N + j)];
        const double tol = double(K + 2) * u * bound[size_t(i * N + j)] + extra_rel * std::fabs(y) + 1e-30;
        if (!(std::fabs(x - y) <= tol)) {
          if (bad++ < 5)
            ADD_FAILURE() << what << ": element (" << i << ", " << j << ") = " << x << ", want " << y
                          << " (tolerance " << tol << ")";
        }
        err2 += (x - y) * (x - y);
        ref2 += y * y;
        sxy += x * y;
        sxx += x * x + y * y;
      }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << M * N << " elements out of bound";
    // The aggregate measures are statistical; with few elements a cancelling sum dominates them,
    // and the per-element bound above is the check that matters.
    if (M * N >= 256) {
      const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
      const double rel_tol = 2e-7 * std::sqrt(double(K)) + 2e-7 + extra_rel;
      EXPECT_LE(rel, rel_tol) << what << ": relative Frobenius error";
      const double diff = sxx > 0 ? 1.0 - 2.0 * sxy / sxx : 0.0;
      EXPECT_LE(diff, 1e-10 + extra_rel * extra_rel) << what << ": calc_diff";
    }
  }
};

std::string describe(const char* ta_name, const char* tb_name, int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                     const tl::cpu::GemmBlocking& blk) {
  std::ostringstream os;
  os << ta_name << "x" << tb_name << " M=" << M << " N=" << N << " K=" << K << " trans_a=" << ta << " trans_b=" << tb
     << " blocking={mc " << blk.mc << ", nc " << blk.nc << ", kc " << blk.kc << ", threads " << blk.threads << "}";
  return os.str();
}

uint32_t g_seed = 20240601u;

// gemm with the store epilogue into a poisoned float C with padded rows.
template <class TA, class TB>
void run_store_case(int64_t M, int64_t N, int64_t K, bool ta, bool tb, const tl::cpu::GemmBlocking& blk) {
  std::mt19937 rng(g_seed++);
  const auto A = ta ? make_operand<TA>(K, M, 3, rng) : make_operand<TA>(M, K, 3, rng);
  const auto B = tb ? make_operand<TB>(N, K, 5, rng) : make_operand<TB>(K, N, 5, rng);
  const int64_t ldc = N + 7;
  std::vector<float> C(size_t(M * ldc), kNaN);
  tl::cpu::gemm(M, N, K, A.data.data(), A.ld, ta, B.data.data(), B.ld, tb, tl::cpu::store_epilogue(C.data(), ldc), blk);
  const Reference ref = reference(M, N, K, A, ta, B, tb);
  const std::string what = describe(type_name<TA>(), type_name<TB>(), M, N, K, ta, tb, blk);
  Checker{M, N, K, 0.0, what}.check([&](int64_t i, int64_t j) { return double(C[size_t(i * ldc + j)]); }, ref.value,
                                    ref.bound);
  int64_t touched = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = N; j < ldc; ++j) touched += !std::isnan(C[size_t(i * ldc + j)]);
  EXPECT_EQ(touched, 0) << what << ": elements of C past column N were written";
}

tl::cpu::GemmBlocking with_threads(tl::cpu::GemmBlocking b, int threads) {
  b.threads = threads;
  return b;
}

// Blockings that force many passes, blocks and edge cases, plus the default.
std::vector<tl::cpu::GemmBlocking> blockings() {
  const tl::cpu::GemmBlocking def = tl::cpu::default_blocking();
  return {
      def,
      with_threads(def, 1),
      tl::cpu::GemmBlocking{tl::cpu::kGemmMR, tl::cpu::kGemmNR, 8, 2},  // one micro-tile per block, kc 8
      tl::cpu::GemmBlocking{30, 70, 37, 3},                             // rounded up: odd sizes, 3 threads
  };
}

const int64_t kShapes[][3] = {
    {1, 1, 1},      {1, 1, 7},     {2, 3, 1},       {5, 1, 9},     {1, 40, 3},     {37, 53, 71},
    {130, 257, 129}, {14, 32, 64},  {15, 33, 65},    {28, 64, 100}, {1000, 7, 300}, {7, 1000, 300},
    {3, 5, 2000},   {256, 256, 256}, {300, 200, 1031},
};

TEST(CpuGemm, F32AllShapesTransposesBlockings) {
  for (const auto& blk : blockings())
    for (const auto& s : kShapes)
      for (int t = 0; t < 4; ++t) run_store_case<float, float>(s[0], s[1], s[2], t & 1, t & 2, blk);
}

template <class TA, class TB>
void run_dtype_cases() {
  const tl::cpu::GemmBlocking def = tl::cpu::default_blocking();
  const tl::cpu::GemmBlocking tiny{tl::cpu::kGemmMR, 2 * tl::cpu::kGemmNR, 24, 2};
  const int64_t shapes[][3] = {{1, 1, 1}, {37, 53, 71}, {130, 257, 129}, {200, 40, 700}, {64, 64, 32}};
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t) {
      run_store_case<TA, TB>(s[0], s[1], s[2], t & 1, t & 2, def);
      run_store_case<TA, TB>(s[0], s[1], s[2], t & 1, t & 2, tiny);
    }
}

TEST(CpuGemm, F16Inputs) { run_dtype_cases<tl::half_t, tl::half_t>(); }
TEST(CpuGemm, Bf16Inputs) { run_dtype_cases<tl::bfloat16_t, tl::bfloat16_t>(); }
TEST(CpuGemm, E4M3Inputs) { run_dtype_cases<tl::float8_e4m3_t, tl::float8_e4m3_t>(); }
TEST(CpuGemm, E5M2Inputs) { run_dtype_cases<tl::float8_e5m2_t, tl::float8_e5m2_t>(); }
TEST(CpuGemm, Int8Inputs) { run_dtype_cases<int8_t, int8_t>(); }
TEST(CpuGemm, MixedInputs) {
  run_dtype_cases<tl::half_t, float>();
  run_dtype_cases<tl::float8_e4m3_t, tl::bfloat16_t>();
}

TEST(CpuGemm, LargeDefaultBlocking) {
  // Big enough for several kc passes, nc blocks and both threads with the default blocking.
  run_store_case<float, float>(700, 1200, 1100, false, false, tl::cpu::default_blocking());
  run_store_case<float, float>(600, 650, 900, true, true, tl::cpu::default_blocking());
}

TEST(CpuGemm, WorkspaceRowSuperBlocks) {
  // K needs several passes and the workspace budget allows only a few row blocks at a time, so B is
  // re-packed per row super-block.
  int64_t& budget = tl::cpu::detail::work_budget_bytes();
  const int64_t saved = budget;
  budget = 3 * 64 * 4 * tl::cpu::kGemmMR;  // 3 row blocks of mc = kGemmMR at nc = 64
  const tl::cpu::GemmBlocking blk{tl::cpu::kGemmMR, 64, 40, 2};
  for (int t = 0; t < 4; ++t) run_store_case<float, float>(150, 140, 130, t & 1, t & 2, blk);
  run_store_case<tl::half_t, tl::bfloat16_t>(150, 140, 130, false, true, blk);
  budget = saved;
}

TEST(CpuGemm, AccumulateEpilogue) {
  for (const auto& blk : blockings())
    for (int t = 0; t < 4; ++t) {
      const int64_t M = 61, N = 90, K = 77;
      const bool ta = t & 1, tb = t & 2;
      std::mt19937 rng(g_seed++);
      const auto A = ta ? make_operand<float>(K, M, 1, rng) : make_operand<float>(M, K, 0, rng);
      const auto B = tb ? make_operand<float>(N, K, 0, rng) : make_operand<float>(K, N, 2, rng);
      auto C0 = make_operand<float>(M, N, 4, rng);  // random initial C, NaN padding
      std::vector<float> C = C0.data;
      tl::cpu::gemm(M, N, K, A.data.data(), A.ld, ta, B.data.data(), B.ld, tb,
                    tl::cpu::accumulate_epilogue(C.data(), C0.ld), blk);
      Reference ref = reference(M, N, K, A, ta, B, tb);
      for (size_t e = 0; e < ref.value.size(); ++e) {
        ref.value[e] += C0.val[e];
        ref.bound[e] += std::fabs(C0.val[e]);
      }
      Checker{M, N, K, 0.0, describe("f32", "f32", M, N, K, ta, tb, blk) + " accumulate"}.check(
          [&](int64_t i, int64_t j) { return double(C[size_t(i * C0.ld + j)]); }, ref.value, ref.bound);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = N; j < C0.ld; ++j) EXPECT_TRUE(std::isnan(C[size_t(i * C0.ld + j)]));
    }
}

TEST(CpuGemm, StoreEpilogueNarrowOutputs) {
  const int64_t M = 45, N = 70, K = 130;
  std::mt19937 rng(g_seed++);
  const auto A = make_operand<tl::bfloat16_t>(M, K, 0, rng);
  const auto B = make_operand<tl::bfloat16_t>(K, N, 0, rng);
  const Reference ref = reference(M, N, K, A, false, B, false);
  {
    std::vector<tl::half_t> C(size_t(M * N), tl::from_float<tl::half_t>(kNaN));
    tl::cpu::gemm(M, N, K, A.data.data(), K, false, B.data.data(), N, false, tl::cpu::store_epilogue(C.data(), N));
    Checker{M, N, K, std::ldexp(1.0, -11) + 1e-7, "store f16"}.check(
        [&](int64_t i, int64_t j) { return double(C[size_t(i * N + j)].to_float()); }, ref.value, ref.bound);
  }
  {
    std::vector<tl::bfloat16_t> C(size_t(M * N), tl::from_float<tl::bfloat16_t>(kNaN));
    tl::cpu::gemm(M, N, K, A.data.data(), K, false, B.data.data(), N, false, tl::cpu::store_epilogue(C.data(), N));
    Checker{M, N, K, std::ldexp(1.0, -8) + 1e-7, "store bf16"}.check(
        [&](int64_t i, int64_t j) { return double(C[size_t(i * N + j)].to_float()); }, ref.value, ref.bound);
  }
  {
    // half accumulate: C = half(float(C) + acc)
    auto C0 = make_operand<tl::half_t>(M, N, 0, rng);
    std::vector<tl::half_t> C = C0.data;
    tl::cpu::gemm(M, N, K, A.data.data(), K, false, B.data.data(), N, false, tl::cpu::accumulate_epilogue(C.data(), N));
    std::vector<double> want = ref.value, bound = ref.bound;
    for (size_t e = 0; e < want.size(); ++e) {
      want[e] += C0.val[e];
      bound[e] += std::fabs(C0.val[e]);
    }
    Checker{M, N, K, std::ldexp(1.0, -11) + 1e-7, "accumulate f16"}.check(
        [&](int64_t i, int64_t j) { return double(C[size_t(i * N + j)].to_float()); }, want, bound);
  }
}

TEST(CpuGemm, ElementwiseEpilogueCalledOncePerElement) {
  for (const auto& blk : blockings())
    for (const auto& s : kShapes) {
      const int64_t M = s[0], N = s[1], K = s[2];
      if (M * N * K > 20000000) continue;
      std::mt19937 rng(g_seed++);
      const auto A = make_operand<float>(M, K, 0, rng);
      const auto B = make_operand<float>(K, N, 0, rng);
      std::vector<float> bias(static_cast<size_t>(N));
      for (auto& b : bias) b = std::uniform_real_distribution<float>(-1, 1)(rng);
      std::unique_ptr<std::atomic<int>[]> calls(new std::atomic<int>[size_t(M * N)]);
      for (int64_t e = 0; e < M * N; ++e) calls[size_t(e)] = 0;
      std::vector<float> C(size_t(M * N), kNaN);
      std::atomic<int64_t> out_of_range{0};
      tl::cpu::gemm(M, N, K, A.data.data(), K, false, B.data.data(), N, false,
                    tl::cpu::elementwise_epilogue([&](int64_t i, int64_t j, float acc) {
                      if (i < 0 || i >= M || j < 0 || j >= N) {
                        ++out_of_range;
                        return;
                      }
                      calls[size_t(i * N + j)]++;
                      C[size_t(i * N + j)] = std::max(acc + bias[size_t(j)], 0.0f);  // fused bias + relu
                    }),
                    blk);
      EXPECT_EQ(out_of_range.load(), 0);
      int64_t wrong_calls = 0;
      for (int64_t e = 0; e < M * N; ++e) wrong_calls += calls[size_t(e)] != 1;
      EXPECT_EQ(wrong_calls, 0) << M << "x" << N << "x" << K << ": elements not called exactly once";
      const Reference ref = reference(M, N, K, A, false, B, false);
      const double u = std::ldexp(1.0, -24);
      int64_t bad = 0;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const double want = std::max(ref.value[size_t(i * N + j)] + bias[size_t(j)], 0.0);
          const double tol = double(K + 3) * u * (ref.bound[size_t(i * N + j)] + std::fabs(bias[size_t(j)])) + 1e-30;
          bad += !(std::fabs(double(C[size_t(i * N + j)]) - want) <= tol);
        }
      EXPECT_EQ(bad, 0) << M << "x" << N << "x" << K;
    }
}

TEST(CpuGemm, RawEpilogueRegions) {
  // The raw epilogue interface: regions are in range, at most one micro-tile, and cover C once.
  const int64_t M = 97, N = 131, K = 50;
  std::mt19937 rng(g_seed++);
  const auto A = make_operand<float>(M, K, 0, rng);
  const auto B = make_operand<float>(K, N, 0, rng);
  std::vector<std::atomic<int>> cover(size_t(M * N));
  std::atomic<int> bad_region{0};
  std::vector<float> C(size_t(M * N), kNaN);
  tl::cpu::gemm(M, N, K, A.data.data(), K, false, B.data.data(), N, false,
                [&](int64_t i0, int64_t j0, int rows, int cols, const float* acc, int64_t ld) {
                  if (i0 < 0 || j0 < 0 || rows <= 0 || cols <= 0 || rows > tl::cpu::kGemmMR ||
                      cols > tl::cpu::kGemmNR || i0 + rows > M || j0 + cols > N || ld < cols) {
                    ++bad_region;
                    return;
                  }
                  for (int r = 0; r < rows; ++r)
                    for (int c = 0; c < cols; ++c) {
                      cover[size_t((i0 + r) * N + j0 + c)]++;
                      C[size_t((i0 + r) * N + j0 + c)] = acc[r * ld + c];
                    }
                });
  EXPECT_EQ(bad_region.load(), 0);
  for (int64_t e = 0; e < M * N; ++e) ASSERT_EQ(cover[size_t(e)].load(), 1) << e;
  const Reference ref = reference(M, N, K, A, false, B, false);
  Checker{M, N, K, 0.0, "raw epilogue"}.check([&](int64_t i, int64_t j) { return double(C[size_t(i * N + j)]); },
                                              ref.value, ref.bound);
}

// An epilogue that throws on one tile, with the problem split over several threads: the exception
// reaches the caller (it terminated the program when it left the parallel region).
TEST(CpuGemm, EpilogueExceptionReachesTheCaller) {
  const int64_t M = 256, N = 256, K = 64;
  std::mt19937 rng(g_seed++);
  const auto A = make_operand<float>(M, K, 0, rng);
  const auto B = make_operand<float>(K, N, 0, rng);
  tl::cpu::GemmBlocking blk = tl::cpu::default_blocking();
  blk.threads = 4;
  std::atomic<int> tiles{0};
  try {
    tl::cpu::gemm(M, N, K, A.data.data(), K, false, B.data.data(), N, false,
                  [&](int64_t i0, int64_t j0, int, int, const float*, int64_t) {
                    ++tiles;
                    if (i0 >= M / 2 && j0 >= N / 2 && i0 < M / 2 + tl::cpu::kGemmMR && j0 < N / 2 + tl::cpu::kGemmNR) throw std::runtime_error("tile refused");
                  },
                  blk);
    ADD_FAILURE() << "no exception reached the caller";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "tile refused");
  }
  EXPECT_GT(tiles.load(), 1);
}

TEST(CpuGemm, EmptyDepthGivesZeros) {
  const int64_t M = 20, N = 45;
  std::vector<float> C(size_t(M * N), kNaN);
  const float dummy = 1.0f;
  tl::cpu::gemm(M, N, 0, &dummy, 1, false, &dummy, 1, false, tl::cpu::store_epilogue(C.data(), N));
  for (float c : C) EXPECT_EQ(c, 0.0f);
  // Empty outputs call nothing.
  int calls = 0;
  tl::cpu::gemm(0, N, 5, &dummy, 1, false, &dummy, 1, false,
                [&](int64_t, int64_t, int, int, const float*, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

#if defined(_OPENMP)
TEST(CpuGemm, InsideParallelRegion) {
  // Each thread of an outer team runs its own GEMM (single-threaded inside, no nested team).
  const int64_t M = 70, N = 90, K = 110;
  const int teams = 3;
  std::vector<Operand<float>> As, Bs;
  std::mt19937 rng(g_seed++);
  for (int t = 0; t < teams; ++t) {
    As.push_back(make_operand<float>(M, K, 0, rng));
    Bs.push_back(make_operand<float>(K, N, 0, rng));
  }
  std::vector<std::vector<float>> Cs(teams, std::vector<float>(size_t(M * N), kNaN));
#pragma omp parallel for num_threads(teams)
  for (int t = 0; t < teams; ++t)
    tl::cpu::gemm(M, N, K, As[t].data.data(), K, false, Bs[t].data.data(), N, false,
                  tl::cpu::store_epilogue(Cs[t].data(), N));
  for (int t = 0; t < teams; ++t) {
    const Reference ref = reference(M, N, K, As[t], false, Bs[t], false);
    Checker{M, N, K, 0.0, "team " + std::to_string(t)}.check(
        [&](int64_t i, int64_t j) { return double(Cs[t][size_t(i * N + j)]); }, ref.value, ref.bound);
  }
}
#endif

// ---------------------------------------------------------------------------------------------
template <class TA, class TB>
void run_tile_case(int M, int N, int K, bool ta, bool tb) {
  std::mt19937 rng(g_seed++);
  const auto A = ta ? make_operand<TA>(K, M, 2, rng) : make_operand<TA>(M, K, 2, rng);
  const auto B = tb ? make_operand<TB>(N, K, 1, rng) : make_operand<TB>(K, N, 1, rng);
  auto C0 = make_operand<float>(M, N, 3, rng);  // random accumulator, NaN padding
  std::vector<float> C = C0.data;
  tl::cpu::gemm_tile(M, N, K, A.data.data(), A.ld, ta, B.data.data(), B.ld, tb, C.data(), C0.ld);
  Reference ref = reference(M, N, K, A, ta, B, tb);
  for (size_t e = 0; e < ref.value.size(); ++e) {
    ref.value[e] += C0.val[e];
    ref.bound[e] += std::fabs(C0.val[e]);
  }
  const tl::cpu::GemmBlocking none{0, 0, 0, 1};
  const std::string what = "gemm_tile " + describe(type_name<TA>(), type_name<TB>(), M, N, K, ta, tb, none);
  Checker{M, N, K, 0.0, what}.check([&](int64_t i, int64_t j) { return double(C[size_t(i * C0.ld + j)]); },
                                    ref.value, ref.bound);
  int64_t touched = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = N; j < C0.ld; ++j) touched += !std::isnan(C[size_t(i * C0.ld + j)]);
  EXPECT_EQ(touched, 0) << what << ": padding of C written";
}

const int kTileShapes[][3] = {{1, 1, 1},    {16, 16, 16},  {64, 64, 32},  {128, 128, 64}, {256, 256, 256},
                              {17, 33, 9},  {14, 32, 1},   {100, 3, 70},  {3, 100, 70},   {64, 128, 600},
                              {96, 80, 48}, {255, 129, 31}};

TEST(CpuGemmTile, F32) {
  for (const auto& s : kTileShapes)
    for (int t = 0; t < 4; ++t) run_tile_case<float, float>(s[0], s[1], s[2], t & 1, t & 2);
}
TEST(CpuGemmTile, NarrowInputs) {
  for (const auto& s : kTileShapes)
    for (int t = 0; t < 4; ++t) {
      run_tile_case<tl::half_t, tl::half_t>(s[0], s[1], s[2], t & 1, t & 2);
      run_tile_case<tl::bfloat16_t, tl::bfloat16_t>(s[0], s[1], s[2], t & 1, t & 2);
      run_tile_case<tl::float8_e4m3_t, tl::float8_e4m3_t>(s[0], s[1], s[2], t & 1, t & 2);
    }
}
TEST(CpuGemmTile, RepeatedAccumulation) {
  // A K loop of a generated kernel: C accumulates over several tile GEMMs.
  const int M = 64, N = 64, Kt = 32, steps = 5;
  std::mt19937 rng(g_seed++);
  const auto A = make_operand<tl::half_t>(M, Kt * steps, 0, rng);
  const auto B = make_operand<tl::half_t>(Kt * steps, N, 0, rng);
  std::vector<float> C(size_t(M * N), 0.0f);
  for (int s = 0; s < steps; ++s)
    tl::cpu::gemm_tile(M, N, Kt, A.data.data() + s * Kt, A.ld, false, B.data.data() + int64_t(s) * Kt * B.ld, B.ld,
                       false, C.data(), N);
  const Reference ref = reference(M, N, Kt * steps, A, false, B, false);
  Checker{M, N, Kt * steps, 0.0, "tile K loop"}.check([&](int64_t i, int64_t j) { return double(C[size_t(i * N + j)]); },
                                                      ref.value, ref.bound);
}

// The checker itself must catch a wrong result: one dropped k term in one element.
TEST(CpuGemm, CheckerCatchesErrors) {
  const int64_t M = 30, N = 40, K = 50;
  std::mt19937 rng(g_seed++);
  const auto A = make_operand<float>(M, K, 0, rng);
  const auto B = make_operand<float>(K, N, 0, rng);
  std::vector<float> C(size_t(M * N), kNaN);
  tl::cpu::gemm(M, N, K, A.data.data(), K, false, B.data.data(), N, false, tl::cpu::store_epilogue(C.data(), N));
  C[size_t(7 * N + 9)] -= float(A.at(7, 3) * B.at(3, 9));
  const Reference ref = reference(M, N, K, A, false, B, false);
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS,
                                                        &failures);
    Checker{M, N, K, 0.0, "sabotaged"}.check([&](int64_t i, int64_t j) { return double(C[size_t(i * N + j)]); },
                                             ref.value, ref.bound);
  }
  EXPECT_GE(failures.size(), 1);
}

}  // namespace
