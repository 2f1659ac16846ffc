// Numerical tests of whole programs on the CPU backend: every program runs on fresh random inputs
// (outputs poisoned first) and is compared with a float64 reference, in float32 and float16.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <regex>

#include "program_util.h"
#include "rt/error.h"
#include "testutil/rounding.h"

namespace {

using rt::DType;
using tltest::expect_close;
using tltest::f64;
using tltest::random;
using tltest::run;

std::string dtype_name(const ::testing::TestParamInfo<DType>& p) { return rt::name(p.param); }

std::vector<double> matmul_ref(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t n, int64_t k, bool b_transposed = false) {
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[i * k + p] * (b_transposed ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = s;
    }
  return c;
}

// The seed program of examples/matmul.py, in float16 as written and with its dtype swapped.
tilelang::Module seed_module(DType dtype) {
  std::string src = tltest::read_source("examples/matmul.py");
  if (dtype == DType::F32) src = std::regex_replace(src, std::regex("FP16"), "FP32");
  return tilelang::Module::from_source(src, "examples/matmul.py");
}

class SeedMatmul : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(SeedMatmul, MatchesReference) {
  auto [dtype, n] = GetParam();
  tilelang::Kernel k = tltest::cpu_kernel(seed_module(dtype), "matmul");
  rt::Tensor a = random({n, n}, dtype), b = random({n, n}, dtype);
  auto out = run(k, {a, b}, {{{n, n}, dtype}});
  expect_close(out[0], matmul_ref(f64(a), f64(b), n, n, n), "seed matmul " + std::to_string(n));
}

INSTANTIATE_TEST_SUITE_P(Sizes, SeedMatmul,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16), ::testing::Values(1, 7, 64, 100, 129, 257)),
                         [](const auto& p) { return rt::str(rt::name(std::get<0>(p.param)), "_", std::get<1>(p.param)); });

TEST(SeedMatmul, ReturnsNewTensorThroughCall) {
  tilelang::Kernel k = tltest::cpu_kernel(seed_module(DType::F16), "matmul");
  rt::Tensor a = random({48, 48}, DType::F16), b = random({48, 48}, DType::F16);
  std::vector<rt::Tensor> out = k({a, b});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dtype(), DType::F16);
  EXPECT_EQ(out[0].shape(), (rt::Shape{48, 48}));
  expect_close(out[0], matmul_ref(f64(a), f64(b), 48, 48, 48), "seed matmul through operator()");
}

// The Hopper GEMM's barrier between rounds of tiles (tl/device/cuda/round_sync.h), forced through
// TL_GEMM_ROUND_SYNC: at 4096^3 (several rounds of tiles a CTA) a barrier every round gives the
// bits of no barrier (the kernel's sums do not depend on timing) and float64's products on sampled
// elements; a bad value is a clear error.
TEST(SeedMatmul, RoundSyncedRoundsGiveTheSameBits) {
  // The barrier is the Hopper GEMM kernel's, which the seed lowers to on sm_90a only.
  if (!tltest::on_gpu() || tltest::test_target().arch != "sm_90a") GTEST_SKIP() << "the barrier is the sm_90a kernel's";
  tilelang::Kernel k = tltest::cpu_kernel(seed_module(DType::F16), "matmul");
  const int64_t n = 4096;
  rt::Tensor a = random({n, n}, DType::F16), b = random({n, n}, DType::F16);
  auto with = [&](const char* every) {
    testutil::ScopedEnv env("TL_GEMM_ROUND_SYNC", every);
    return run(k, {a, b}, {{{n, n}, DType::F16}})[0];
  };
  const rt::Tensor plain = with("0"), synced = with("1");
  ASSERT_EQ(std::memcmp(plain.data(), synced.data(), static_cast<size_t>(plain.nbytes())), 0)
      << "a barrier every round changed the result";
  const std::vector<double> av = f64(a), bv = f64(b), cv = f64(synced);
  uint64_t state = testutil::fresh_seed();
  for (int s = 0; s < 64; ++s) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t i = int64_t(state >> 33) % n, j = int64_t(state >> 11) % n;
    double ref = 0, mag = 0;
    for (int64_t p = 0; p < n; ++p) ref += av[i * n + p] * bv[p * n + j], mag += std::fabs(av[i * n + p] * bv[p * n + j]);
    EXPECT_LE(std::fabs(cv[i * n + j] - ref), 1e-3 * std::fabs(ref) + 1e-4 * mag) << "element " << i << ", " << j;
  }
  testutil::ScopedEnv bad("TL_GEMM_ROUND_SYNC", "-3");
  try {
    run(k, {a, b}, {{{n, n}, DType::F16}});
    ADD_FAILURE() << "TL_GEMM_ROUND_SYNC=-3 ran";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), rt::ErrorKind::User) << e.what();
    EXPECT_NE(std::string(e.what()).find("TL_GEMM_ROUND_SYNC='-3' must be auto, 0 or a number of rounds"), std::string::npos)
        << e.what();
  }
}

TEST(SeedMatmul, BecomesOneGemm) {
  if (tltest::on_gpu()) GTEST_SKIP() << "checks the CPU lowering";
  tilelang::Kernel k = tltest::cpu_kernel(seed_module(DType::F16), "matmul");
  std::string lowered = k.emit(tilelang::Stage::Lowered, {{DType::F16, {256, 256}}, {DType::F16, {256, 256}}});
  EXPECT_NE(lowered.find("gemm(a[0 +: 256, 0 +: 256], b[0 +: 256, 0 +: 256], c[0 +: 256, 0 +: 256], clear, accum=float32"), std::string::npos)
      << lowered;
  EXPECT_EQ(lowered.find("for "), std::string::npos) << "no scalar loops should remain:\n" << lowered;
}

class NarrowInputs : public ::testing::TestWithParam<DType> {};

TEST_P(NarrowInputs, MatmulIntoF32) {
  DType dtype = GetParam();
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/matmul_f32_out_seed.py", "matmul_f32_out");
  const int64_t m = 45, n = 77, kk = 130;
  rt::Tensor a = random({m, kk}, dtype), b = random({kk, n}, dtype);
  auto out = run(k, {a, b}, {{{m, n}, DType::F32}});
  expect_close(out[0], matmul_ref(f64(a), f64(b), m, n, kk), std::string("matmul of ") + rt::name(dtype) + " into f32");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NarrowInputs, ::testing::Values(DType::BF16, DType::F8E4M3, DType::F8E5M2, DType::F16), dtype_name);

TEST(IntegerInputs, Int8MatmulIsExact) {
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/matmul_int8_seed.py", "matmul_int8");
  const int64_t m = 33, n = 20, kk = 300;
  rt::Tensor a = random({m, kk}, DType::I8, -128, 128), b = random({kk, n}, DType::I8, -128, 128);
  auto out = run(k, {a, b}, {{{m, n}, DType::I32}});
  std::vector<double> ref = matmul_ref(f64(a), f64(b), m, n, kk);
  EXPECT_EQ(f64(out[0]), ref);  // integer arithmetic: exact
}

// examples/gemm_8bit.py: 8-bit A and B (each type on its own) with B given as [N, K] -- on sm_90a
// wgmma's k32 forms (float8 into float32, int8 / uint8 into int32). Partial tiles in M and N; K a
// whole number of 64-wide blocks, and 96 (the second block half past the end: zeros).
class EightBitGemm : public ::testing::TestWithParam<std::tuple<std::pair<DType, DType>, std::array<int64_t, 3>>> {};

TEST_P(EightBitGemm, MatchesReference) {
  auto [types, shape] = GetParam();
  auto [ta, tb] = types;
  auto [m, n, kk] = shape;
  const bool integer = rt::is_int(ta);
  tilelang::Kernel k = tltest::load("examples/gemm_8bit.py", "matmul",
                                    {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(kk)}, {"a_dtype", rt::name(ta)},
                                     {"b_dtype", rt::name(tb)}});
  const auto [a_lo, a_hi] = testutil::typical_range(ta);
  const auto [b_lo, b_hi] = testutil::typical_range(tb);
  rt::Tensor a = random({m, kk}, ta, a_lo, a_hi), b = random({n, kk}, tb, b_lo, b_hi);
  std::vector<rt::Tensor> out;
  std::string too_big;
  if (!tltest::runs_unless_too_big_for_target([&] { out = run(k, {a, b}, {{{m, n}, integer ? DType::I32 : DType::F32}}); }, &too_big))
    GTEST_SKIP() << too_big;
  std::vector<double> ref = matmul_ref(f64(a), f64(b), m, n, kk, true);
  if (integer) {
    EXPECT_EQ(f64(out[0]), ref) << "integer sums are exact";
  } else {
    // The products are exact in float32; Hopper's FP8 tensor cores add them with fewer mantissa
    // bits than float32 (why DeepGEMM promotes its sums), ~1e-4 here. A wrong tile is off by O(1).
    const double err = testutil::rel_error(f64(out[0]), ref);
    EXPECT_LT(err, 2e-3) << "8-bit gemm " << rt::name(ta) << " x " << rt::name(tb);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, EightBitGemm,
                         ::testing::Combine(::testing::Values(std::pair(DType::F8E4M3, DType::F8E4M3), std::pair(DType::F8E4M3, DType::F8E5M2),
                                                              std::pair(DType::F8E5M2, DType::F8E5M2), std::pair(DType::I8, DType::I8),
                                                              std::pair(DType::I8, DType::U8), std::pair(DType::U8, DType::U8)),
                                            ::testing::Values(std::array<int64_t, 3>{200, 136, 320}, std::array<int64_t, 3>{128, 256, 96})),
                         [](const auto& p) {
                           const auto& types = std::get<0>(p.param);  // (no top-level commas: gtest splits this argument on them)
                           const auto& shape = std::get<1>(p.param);
                           return rt::str(rt::name(types.first), "_", rt::name(types.second), "_", shape[0], "x", shape[1], "x", shape[2]);
                         });

// Tiles of 64 x 64 x 32 and 128 x 128 x 64 (x 32 for float32, to fit shared memory): on sm_90a
// the 16-bit operand rows are 64 and 128 bytes (A) and 128 and 256 bytes (B, two 128-byte swizzle
// panels), each a different wgmma descriptor and TMA box. The 64-wide tiles also run with
// T.use_swizzle in bands of 2 block columns (a 3-column grid: the last band is narrower). The last
// parameter is the loop's warp_specialize (None: a producer warpgroup where sm_90a allows).
class BlockedGemm : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t, int64_t, int64_t, const char*>> {};

TEST_P(BlockedGemm, MatchesReference) {
  auto [dtype, m, n, kk, tile, ws] = GetParam();
  tilelang::Kernel k = tltest::load("examples/gemm.py", "matmul",
                                    {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(kk)}, {"dtype", rt::name(dtype)},
                                     {"block_M", std::to_string(tile)}, {"block_N", std::to_string(tile)},
                                     {"block_K", std::to_string(dtype == DType::F32 ? tile / 4 : tile / 2)}, {"panel", tile == 64 ? "2" : "0"},
                                     {"warp_specialize", ws}});
  rt::Tensor a = random({m, kk}, dtype), b = random({kk, n}, dtype);
  auto out = run(k, {a, b}, {{{m, n}, dtype}});
  expect_close(out[0], matmul_ref(f64(a), f64(b), m, n, kk), "blocked gemm");
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlockedGemm,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16), ::testing::Values(64, 200), ::testing::Values(136),
                                            ::testing::Values(72, 128), ::testing::Values(64, 128), ::testing::Values("None")),
                         [](const auto& p) {
                           return rt::str(rt::name(std::get<0>(p.param)), "_", std::get<1>(p.param), "x", std::get<2>(p.param), "x", std::get<3>(p.param), "_tile",
                                          std::get<4>(p.param));
                         });

// The same loops with every thread loading and computing (no producer warpgroup on sm_90a).
INSTANTIATE_TEST_SUITE_P(NotWarpSpecialized, BlockedGemm,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16), ::testing::Values(200), ::testing::Values(136), ::testing::Values(128),
                                            ::testing::Values(64, 128), ::testing::Values("False")),
                         [](const auto& p) { return rt::str(rt::name(std::get<0>(p.param)), "_200x136x128_tile", std::get<4>(p.param)); });

// 128 x 256 tiles on two consumer warpgroups with four stages: on sm_90a the epilogue's staging
// tile fits only in the stages' memory, which it takes once the loop is done (a partial last tile
// in M and N, K a whole number of stages and more).
TEST(BlockedGemm, WideTilesOnTwoConsumers) {
  const int64_t m = 200, n = 392, kk = 320;
  tilelang::Kernel k = tltest::load("examples/gemm.py", "matmul",
                                    {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(kk)}, {"dtype", "bfloat16"},
                                     {"block_M", "128"}, {"block_N", "256"}, {"block_K", "64"}, {"threads", "256"}, {"num_stages", "4"}});
  rt::Tensor a = random({m, kk}, DType::BF16), b = random({kk, n}, DType::BF16);
  auto out = run(k, {a, b}, {{{m, n}, DType::BF16}});
  expect_close(out[0], matmul_ref(f64(a), f64(b), m, n, kk), "blocked gemm, 128 x 256 tiles");
}

// A persistent kernel (sm_90a's warp-specialized kernels where every block runs the loop alike:
// tile_scheduler.h's PersistentBlocks) launches at most the blocks the GPU holds at once and walks
// the kernel's blocks in rounds. Here 16 x 10 = 160 GEMM blocks of 128 x 128 (two consumer
// warpgroups: one block an SM) on 132 CTAs (some run two rounds, some one), in panels of 3 block
// columns (the last band narrower) and in row order, with ragged edge tiles (2000 x 1224: stored
// element-wise) and whole ones (2048 x 1280: stored by TMA while the next round runs), and 2 x 48 x
// 2 = 192 attention blocks of 128 queries in a 3-D grid (its output tiles by TMA into a 4-D tensor):
// each result matches the reference and has the bits of the same kernel launched a block a tile
// (TL_PERSISTENT_KERNELS=0).
TEST(PersistentKernels, RoundsCoverEveryBlockOnce) {
  if (!tltest::on_gpu() || tltest::test_target().arch != "sm_90a") GTEST_SKIP() << "persistent kernels are sm_90a's warp-specialized ones";
  auto same_bits = [](const rt::Tensor& x, const rt::Tensor& y) { return std::memcmp(x.data(), y.data(), static_cast<size_t>(x.nbytes())) == 0; };
  for (auto [m, n] : {std::pair<int64_t, int64_t>{2000, 1224}, std::pair<int64_t, int64_t>{2048, 1280}}) {
    const int64_t kk = 96;
    rt::Tensor a = random({m, kk}, DType::BF16), b = random({kk, n}, DType::BF16);
    const std::vector<double> ref = matmul_ref(f64(a), f64(b), m, n, kk);
    for (const char* panel : {"3", "0"}) {
      auto gemm = [&](const char* persistent) {
        testutil::ScopedEnv env("TL_PERSISTENT_KERNELS", persistent);
        tilelang::Kernel k = tltest::load("examples/gemm.py", "matmul",
                                          {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(kk)}, {"dtype", "bfloat16"}, {"block_M", "128"},
                                           {"block_N", "128"}, {"block_K", "32"}, {"threads", "256"}, {"num_stages", "2"}, {"panel", panel}});
        return run(k, {a, b}, {{{m, n}, DType::BF16}})[0];
      };
      const rt::Tensor persistent = gemm("1"), per_block = gemm("0");
      expect_close(persistent, ref, rt::str("persistent gemm ", m, " x ", n, ", panel ", panel));
      EXPECT_TRUE(same_bits(persistent, per_block)) << m << " x " << n << ", panel " << panel;
    }
  }
  const int64_t batch = 2, heads = 48, seq = 256, dim = 64;
  rt::Tensor q = random({batch, seq, heads, dim}, DType::BF16), kt = random({batch, seq, heads, dim}, DType::BF16), v = random({batch, seq, heads, dim}, DType::BF16);
  auto attention = [&](const char* persistent) {
    testutil::ScopedEnv env("TL_PERSISTENT_KERNELS", persistent);
    tilelang::Kernel k = tltest::load("examples/flash_attention.py", "flash_attention",
                                      {{"batch", std::to_string(batch)}, {"heads", std::to_string(heads)}, {"seq_len", std::to_string(seq)},
                                       {"dim", std::to_string(dim)}, {"block_M", "128"}, {"block_N", "128"}, {"threads", "256"}});
    return run(k, {q, kt, v}, {{{batch, seq, heads, dim}, DType::BF16}})[0];
  };
  const rt::Tensor persistent = attention("1"), per_block = attention("0");
  EXPECT_TRUE(same_bits(persistent, per_block)) << "attention";
  // Spot rows against float64 (every head, rows of the last batch's last query block).
  const std::vector<double> qv = f64(q), kv = f64(kt), vv = f64(v), ov = f64(persistent);
  auto at = [&](int64_t bb, int64_t t, int64_t hh, int64_t x) { return ((bb * seq + t) * heads + hh) * dim + x; };
  double worst = 0;
  for (int64_t hh = 0; hh < heads; ++hh)
    for (int64_t i = seq - 64; i < seq; i += 7) {
      std::vector<double> p(seq);
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < seq; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < dim; ++x) dot += qv[at(1, i, hh, x)] * kv[at(1, j, hh, x)];
        mx = std::max(mx, p[j] = dot / std::sqrt(double(dim)));
      }
      for (double& e : p) sum += e = std::exp(e - mx);
      for (int64_t x = 0; x < dim; ++x) {
        double o = 0;
        for (int64_t j = 0; j < seq; ++j) o += p[j] * vv[at(1, j, hh, x)];
        worst = std::max(worst, std::fabs(ov[at(1, i, hh, x)] - o / sum));
      }
    }
  EXPECT_LT(worst, 3e-2) << "persistent attention against float64";
}

// Shapes that are whole tiles: the accumulator goes out without guards, two elements per store.
INSTANTIATE_TEST_SUITE_P(WholeTiles, BlockedGemm,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16), ::testing::Values(128), ::testing::Values(128),
                                            ::testing::Values(64), ::testing::Values(64), ::testing::Values("None")),
                         [](const auto& p) { return rt::str(rt::name(std::get<0>(p.param)), "_128x128x64_tile64"); });

// K of one block (64 = block_K): the pipelined loop has one iteration, which a later pass removes;
// its gemm, left in flight for the next iteration, was waited for only at the end of the persistent
// kernel's rounds (ptxas serialized the wgmma around the early reads; CudaCompile.NoTileProgram-
// SerializesItsWgmmas). 256 tiles: two rounds on most CTAs of an H200.
INSTANTIATE_TEST_SUITE_P(OneKBlock, BlockedGemm,
                         ::testing::Combine(::testing::Values(DType::F16, DType::BF16), ::testing::Values(2048), ::testing::Values(2048),
                                            ::testing::Values(64), ::testing::Values(128), ::testing::Values("None")),
                         [](const auto& p) { return rt::str(rt::name(std::get<0>(p.param)), "_2048x2048x64_tile128"); });

// T.gemm with each operand stored either way, then an epilogue on the accumulator (on the GPU: the
// four ldmatrix forms of the tensor-core path, with the accumulator in registers).
class TransposedGemm : public ::testing::TestWithParam<std::tuple<DType, bool, bool>> {};

TEST_P(TransposedGemm, MatchesReference) {
  auto [dtype, ta, tb] = GetParam();
  const int64_t m = 96, n = 136, kk = 80;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/gemm_transposed_tile.py", "gemm_t",
                                    {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(kk)}, {"trans_a", ta ? "True" : "False"},
                                     {"trans_b", tb ? "True" : "False"}, {"dtype", rt::name(dtype)}});
  rt::Tensor a = random(ta ? std::vector<int64_t>{kk, m} : std::vector<int64_t>{m, kk}, dtype);
  rt::Tensor b = random(tb ? std::vector<int64_t>{n, kk} : std::vector<int64_t>{kk, n}, dtype);
  std::vector<double> x = f64(a), y = f64(b), ref(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < kk; ++p) s += (ta ? x[p * m + i] : x[i * kk + p]) * (tb ? y[j * kk + p] : y[p * n + j]);
      ref[i * n + j] = s * 0.5 + 1.0;
    }
  auto out = run(k, {a, b}, {{{m, n}, dtype}});
  expect_close(out[0], ref, rt::str("gemm trans_a=", ta, " trans_b=", tb));
}

// float8: on sm_90a only A [M, K] with B [N, K] runs on wgmma (8-bit operands are K-major); the
// other three take the scalar tile gemm.
INSTANTIATE_TEST_SUITE_P(Layouts, TransposedGemm, ::testing::Combine(::testing::Values(DType::F16, DType::BF16, DType::F8E4M3), ::testing::Bool(), ::testing::Bool()),
                         [](const auto& p) {
                           return rt::str(rt::name(std::get<0>(p.param)), std::get<1>(p.param) ? "_At" : "_A", std::get<2>(p.param) ? "_Bt" : "_B");
                         });

// Offset views: the CUDA backend must not use 16-byte accesses or TMA on them.
TEST(UnalignedTensors, GemmsMatchReference) {
  const int64_t n = 128;
  rt::Tensor a = random({n, n}, DType::F16), b = random({n, n}, DType::F16);
  std::vector<double> ref = matmul_ref(f64(a), f64(b), n, n, n);
  tilelang::Kernel seed = tltest::cpu_kernel(seed_module(DType::F16), "matmul");
  expect_close(tltest::run_unaligned(seed, {a, b}, {{{n, n}, DType::F16}})[0], ref, "seed matmul on offset views");
  tilelang::Kernel blocked = tltest::load("examples/gemm.py", "matmul", {{"M", "128"}, {"N", "128"}, {"K", "128"}, {"block_M", "64"}, {"block_N", "64"}});
  expect_close(tltest::run_unaligned(blocked, {a, b}, {{{n, n}, DType::F16}})[0], ref, "blocked gemm on offset views");
}

class Typed : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(Dtypes, Typed, ::testing::Values(DType::F32, DType::F16), dtype_name);

TEST_P(Typed, BatchedMatmul) {
  DType dtype = GetParam();
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/batched_matmul_seed.py", "bmm");
  const int64_t bs = 3, m = 33, n = 47, kk = 29;
  rt::Tensor a = random({bs, m, kk}, dtype), bt = random({bs, n, kk}, dtype);
  auto out = run(k, {a, bt}, {{{bs, m, n}, dtype}});
  std::vector<double> x = f64(a), y = f64(bt), ref;
  for (int64_t b = 0; b < bs; ++b) {
    std::vector<double> xa(x.begin() + b * m * kk, x.begin() + (b + 1) * m * kk), yb(y.begin() + b * n * kk, y.begin() + (b + 1) * n * kk);
    std::vector<double> c = matmul_ref(xa, yb, m, n, kk, true);
    ref.insert(ref.end(), c.begin(), c.end());
  }
  expect_close(out[0], ref, "batched matmul");
}

std::vector<double> softmax_ref(const std::vector<double>& x, int64_t m, int64_t n) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < m; ++i) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[i * n + j]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(x[i * n + j] - mx);
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = std::exp(x[i * n + j] - mx) / s;
  }
  return y;
}

// Python's // and % on floats (found by fuzzing: the generated C++ called the integer template,
// which applies %, and did not compile).
TEST_P(Typed, FloatFloorDivAndMod) {
  DType dtype = GetParam();
  const std::string src =
      "@tile_kernel\n"
      "def fdm(x: Tensor) -> Tensor:\n"
      "    y = zeros_like(x)\n"
      "    for i in range(x.shape[0]):\n"
      "        y[i] = x[i] // 0.75 + x[i] % 0.75\n"
      "    return y\n";
  tilelang::Kernel k = tltest::cpu_kernel(tilelang::Module::from_source(src, "fdm.py"), "fdm");
  rt::Tensor x = random({301}, dtype, -8, 8);
  auto out = run(k, {x}, {{{301}, dtype}});
  std::vector<double> xv = f64(x), ref(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    double q = std::floor(xv[i] / 0.75);
    ref[i] = q + (xv[i] - q * 0.75);
  }
  expect_close(out[0], ref, "float // and %");
}

TEST_P(Typed, SoftmaxSeed) {
  DType dtype = GetParam();
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/softmax_seed.py", "softmax");
  rt::Tensor x = random({37, 301}, dtype, -4, 4);
  auto out = run(k, {x}, {{{37, 301}, dtype}});
  expect_close(out[0], softmax_ref(f64(x), 37, 301), "softmax (loops)");
}

TEST_P(Typed, SoftmaxTile) {
  DType dtype = GetParam();
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/softmax_tile.py", "softmax", {{"M", "37"}, {"N", "96"}, {"dtype", rt::name(dtype)}});
  rt::Tensor x = random({37, 96}, dtype, -4, 4);
  auto out = run(k, {x}, {{{37, 96}, dtype}});
  expect_close(out[0], softmax_ref(f64(x), 37, 96), "softmax (tiles)");
}

TEST_P(Typed, LayerNorm) {
  DType dtype = GetParam();
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/layernorm_seed.py", "layernorm");
  const int64_t m = 19, n = 250;
  rt::Tensor x = random({m, n}, dtype, -2, 3), g = random({n}, dtype), b = random({n}, dtype);
  auto out = run(k, {x, g, b}, {{{m, n}, dtype}});
  std::vector<double> xv = f64(x), gv = f64(g), bv = f64(b), ref(xv.size());
  for (int64_t i = 0; i < m; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += xv[i * n + j];
    mean /= n;
    for (int64_t j = 0; j < n; ++j) var += (xv[i * n + j] - mean) * (xv[i * n + j] - mean);
    double inv = 1.0 / std::sqrt(var / n + 1e-5);
    for (int64_t j = 0; j < n; ++j) ref[i * n + j] = (xv[i * n + j] - mean) * inv * gv[j] + bv[j];
  }
  expect_close(out[0], ref, "layernorm");
}

TEST_P(Typed, RowReductions) {
  DType dtype = GetParam();
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/row_reductions_seed.py", "row_stats");
  const int64_t m = 41, n = 333;
  rt::Tensor x = random({m, n}, dtype, -1, 1);
  auto out = run(k, {x}, {{{m}, dtype}, {{m}, dtype}, {{m}, DType::F32}});
  std::vector<double> xv = f64(x), s(m), mx(m), sq(m);
  for (int64_t i = 0; i < m; ++i) {
    s[i] = 0, mx[i] = -INFINITY, sq[i] = 0;
    for (int64_t j = 0; j < n; ++j) {
      s[i] += xv[i * n + j];
      mx[i] = std::max(mx[i], xv[i * n + j]);
      sq[i] += xv[i * n + j] * xv[i * n + j];
    }
    sq[i] /= n;
  }
  expect_close(out[0], s, "row sum");
  expect_close(out[1], mx, "row max");
  expect_close(out[2], sq, "row mean square");
}

double chain_ref(double x, double y, double b) {
  double t = x * 2.0 + y * y - b;
  return t > 0 ? std::sqrt(t) + std::abs(x) : std::tanh(t) * 0.5;
}

TEST_P(Typed, ElementwiseChainSeed) {
  DType dtype = GetParam();
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/elementwise_chain_seed.py", "chain");
  const int64_t m = 29, n = 131;
  rt::Tensor x = random({m, n}, dtype), y = random({m, n}, dtype), b = random({n}, dtype);
  auto out = run(k, {x, y, b}, {{{m, n}, dtype}});
  std::vector<double> xv = f64(x), yv = f64(y), bv = f64(b), ref(xv.size());
  for (int64_t i = 0; i < m * n; ++i) ref[i] = chain_ref(xv[i], yv[i], bv[i % n]);
  expect_close(out[0], ref, "elementwise chain (loops)");
}

TEST_P(Typed, ElementwiseChainTile) {
  DType dtype = GetParam();
  const int64_t m = 45, n = 150;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/elementwise_tile.py", "chain", {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"dtype", rt::name(dtype)}});
  rt::Tensor x = random({m, n}, dtype), y = random({m, n}, dtype), b = random({n}, dtype);
  auto out = run(k, {x, y, b}, {{{m, n}, dtype}});
  std::vector<double> xv = f64(x), yv = f64(y), bv = f64(b), ref(xv.size());
  for (int64_t i = 0; i < m * n; ++i) {
    double t = xv[i] * 2.0 + yv[i] - bv[i % n];
    ref[i] = t > 0 ? std::sqrt(t) : std::tanh(t) * 0.5;
  }
  expect_close(out[0], ref, "elementwise chain (tiles)");
}

// A fused epilogue reads the float32 accumulator: inputs in [-2, 2] on a 2^-6 grid and a bias on a
// 2^-12 grid make every sum exact in float32 (|sum| < 2^9: 21 bits) but mostly not in float16 -- on the GPU the gemm used to hand the
// epilogue a float16 temporary (difftest seed_epi on the H200).
// Seed loop nests the CUDA host lowering refused (difftest seed families): a triangle, whose inner
// range reads the outer index, and a mutable scalar beside a whole-tensor temporary.
TEST(SeedLoops, TriangleAndScanBesideATemporary) {
  const int64_t m = 37, n = 45;
  rt::Tensor a = random({m, n}, DType::F32);
  auto tri = run(tltest::load("tests/tilelang/programs/triangle_seed.py", "upper"), {a}, {{{m, n}, DType::F32}});
  std::vector<double> av = f64(a), want(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = i; j < n; ++j) want[size_t(i * n + j)] = double(float(float(av[size_t(i * n + j)]) * 2.0f + 1.0f));
  EXPECT_EQ(f64(tri[0]), want);
  // Sums of multiples of 1/8 below 2^10: exact in float32.
  rt::Tensor x = random({300}, DType::F32, -4, 4);
  std::vector<double> xv = f64(x);
  for (double& v : xv) v = std::round(v * 8) / 8;
  testutil::from_f64(x, xv);
  auto scan = run(tltest::load("tests/tilelang/programs/scan_beside_temporary_seed.py", "scan_twice"), {x}, {{{300}, DType::F32}});
  std::vector<double> sums;
  double t = 0;
  for (double v : xv) sums.push_back(2 * (t += v));
  EXPECT_EQ(f64(scan[0]), sums);
}

TEST(SeedLoops, FusedEpilogueReadsTheFloat32Accumulator) {
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/matmul_bias_f32_seed.py", "linear_f32");
  const int64_t m = 200, n = 136, kk = 96;
  auto on_grid = [](std::vector<int64_t> shape, DType dtype, double lo, double hi, double step) {
    rt::Tensor t = random(shape, dtype, lo, hi);
    std::vector<double> v = f64(t);
    for (double& x : v) x = std::round(x / step) * step;
    testutil::from_f64(t, v);
    return t;
  };
  rt::Tensor a = on_grid({m, kk}, DType::F16, -2, 2, 1.0 / 64), w = on_grid({kk, n}, DType::F16, -2, 2, 1.0 / 64);
  rt::Tensor bias = on_grid({n}, DType::F32, -4, 4, 1.0 / 4096);
  auto out = run(k, {a, w, bias}, {{{m, n}, DType::F32}});
  std::vector<double> ref = matmul_ref(f64(a), f64(w), m, n, kk), bv = f64(bias);
  for (int64_t i = 0; i < m * n; ++i) ref[size_t(i)] += bv[size_t(i % n)];
  EXPECT_EQ(f64(out[0]), ref) << "the sums are exact in float32";
}

TEST_P(Typed, MatmulWithFusedEpilogue) {
  DType dtype = GetParam();
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/matmul_epilogue_seed.py", "linear_relu");
  const int64_t m = 70, n = 90, kk = 110;
  rt::Tensor a = random({m, kk}, dtype), w = random({kk, n}, dtype), bias = random({n}, dtype);
  auto out = run(k, {a, w, bias}, {{{m, n}, dtype}});
  std::vector<double> ref = matmul_ref(f64(a), f64(w), m, n, kk), bv = f64(bias);
  for (int64_t i = 0; i < m * n; ++i) ref[i] = std::max(static_cast<double>(static_cast<float>(ref[i])) + bv[i % n], 0.0);
  expect_close(out[0], ref, "matmul + bias + relu");
  // The elementwise loop fused into the gemm: no float32 temporary, no loop left.
  if (tltest::on_gpu()) return;  // the structure checked is the CPU lowering's
  std::string lowered = k.emit(tilelang::Stage::Lowered, {{dtype, {m, kk}}, {dtype, {kk, n}}, {dtype, {n}}});
  EXPECT_NE(lowered.find("epilogue("), std::string::npos) << lowered;
  EXPECT_EQ(lowered.find("alloc acc"), std::string::npos) << lowered;
}

TEST(ThreadLevel, BlockReduceWithBarriers) {
  const int64_t m = 9, n = 1000;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/block_reduce_threads.py", "row_sum", {{"M", std::to_string(m)}, {"N", std::to_string(n)}});
  rt::Tensor x = random({m, n}, DType::F32);
  auto out = run(k, {x}, {{{m}, DType::F32}});
  std::vector<double> xv = f64(x), ref(m, 0.0);
  for (int64_t i = 0; i < m * n; ++i) ref[i / n] += xv[i];
  expect_close(out[0], ref, "thread-level row sum");
}

// Found by differential testing: on the CPU, block-level statements after per-thread code ran once per
// thread when no barrier split them (S got 32 times the sums, x was scaled 32 times), and a value
// bound from a 2-D thread index was an error at a later barrier even where only used before it.
TEST(ThreadLevel, BlockLevelCodeBetweenThreadCodeRunsOnce) {
  const int64_t n = 5;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/thread_code_between_tile_ops.py", "between_tile_ops", {{"N", std::to_string(n)}});
  rt::Tensor x = random({n, 32}, DType::F32);
  rt::Tensor s = testutil::random_tensor({32}, DType::F32, testutil::fresh_seed());
  rt::Tensor y = rt::Tensor::empty({n, 32}, DType::F32);
  std::vector<double> xv = f64(x), s_ref = f64(s), y_ref(n * 32);
  for (int64_t i = 0; i < n * 32; ++i) s_ref[i % 32] += 2.0 * xv[i], y_ref[i] = 3.0 * xv[i];
  std::vector<rt::Tensor> tensors = {x, s, y};
  tltest::run_in_place(k, tensors);
  expect_close(tensors[1], s_ref, "atomics of a block-level loop");
  expect_close(tensors[2], y_ref, "per-thread code around a block-level scale");
}

// A per-thread binding that reads shared memory keeps its value past the barriers after which that
// memory is overwritten (binding_read_before_a_barrier.py; the CPU used to reject it).
TEST(ThreadLevel, ABindingKeepsTheValueItReadWhenBound) {
  const int64_t m = 3;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/binding_read_before_a_barrier.py", "reverse_rows", {{"M", std::to_string(m)}});
  rt::Tensor x = random({m, 128}, DType::F32);
  auto out = run(k, {x}, {{{m, 128}, DType::F32}});
  const std::vector<double> xv = f64(x);
  std::vector<double> want(xv.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < 128; ++j) want[i * 128 + j] = xv[i * 128 + 127 - j];
  EXPECT_EQ(f64(out[0]), want);
}

TEST(ThreadLevel, TwoDimensionalBindingsAcrossABarrier) {
  const int64_t n = 3;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/thread_code_between_tile_ops.py", "bindings_across_barrier", {{"N", std::to_string(n)}});
  rt::Tensor x = random({n, 32}, DType::F32);
  auto out = run(k, {x}, {{{n, 32}, DType::F32}});
  std::vector<double> xv = f64(x), ref(n * 32);
  for (int64_t i = 0; i < n * 32; ++i) ref[i] = xv[i / 32 * 32 + 31 - i % 32];
  expect_close(out[0], ref, "a row reversed through shared memory");
}

TEST(EscapeHatches, CallExternAndInlineCode) {
  const int64_t n = 150;
  std::map<std::string, std::string> params = {{"N", std::to_string(n)}};
  if (tltest::on_gpu()) params.insert({{"target", "cuda"}, {"hypot", "hypotf"}});
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/extern_and_inline.py", "hatches", params);
  rt::Tensor x = random({n}, DType::F32, -5, 5);
  auto out = run(k, {x}, {{{n}, DType::F32}, {{n}, DType::F32}});
  std::vector<double> xv = f64(x), hyp(n), sq(n);
  for (int64_t i = 0; i < n; ++i) hyp[i] = std::hypot(xv[i], 3.0), sq[i] = xv[i] * xv[i] + 1.0;
  expect_close(out[0], hyp, "T.call_extern");
  expect_close(out[1], sq, "T.inline_code");
}

TEST(Atomics, ColumnSums) {
  const int64_t m = 100, n = 70;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/column_sum_atomic.py", "column_sum", {{"M", std::to_string(m)}, {"N", std::to_string(n)}});
  rt::Tensor x = random({m, n}, DType::F32);
  rt::Tensor s = testutil::random_tensor({n}, DType::F32, testutil::fresh_seed());
  std::vector<double> ref = f64(s);  // atomics add into what is there
  std::vector<double> xv = f64(x);
  for (int64_t i = 0; i < m * n; ++i) ref[i % n] += xv[i];
  std::vector<rt::Tensor> tensors = {x, s};
  tltest::run_in_place(k, tensors);
  expect_close(tensors[1], ref, "atomic column sums");
}

TEST(Call, SeedKernelReadingItsOwnOutputs) {
  // Outputs of a @tile_kernel are the tensors it returns, even when it reads them while computing.
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/row_reductions_seed.py", "row_stats");
  rt::Tensor x = random({5, 40}, DType::F32);
  std::vector<rt::Tensor> out = k({x});
  ASSERT_EQ(out.size(), 3u);
  std::vector<double> xv = f64(x), s(5, 0.0);
  for (int64_t i = 0; i < 5 * 40; ++i) s[i / 40] += xv[i];
  expect_close(out[0], s, "row sums through operator()");
}

TEST(Numerics, IntegerDivisionAndInt8Reductions) {
  const int64_t n = 24;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/integer_ops_tile.py", "integer_ops", {{"N", std::to_string(n)}});
  rt::Tensor x = random({n}, DType::I32, -1000, 1000);
  auto out = run(k, {x}, {{{6, n}, DType::I32}, {{n}, DType::I8}, {{2}, DType::I8}});
  std::vector<double> xv = f64(x), d(6 * n), r(n), q = {-128, -128};
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = static_cast<int64_t>(xv[i]);
    int64_t fq = v / 3 - ((v % 3 != 0) && (v < 0));
    d[i] = static_cast<double>(fq), d[n + i] = static_cast<double>(v - fq * 3);
    d[2 * n + i] = static_cast<double>(v / 3), d[3 * n + i] = static_cast<double>(v % 3);
    const int64_t f4 = v / 4 - ((v % 4 != 0) && (v < 0));
    d[4 * n + i] = static_cast<double>(f4), d[5 * n + i] = static_cast<double>(v - f4 * 4);
    int64_t m100 = v - (v / 100 - ((v % 100 != 0) && (v < 0))) * 100;
    int64_t m7 = v - (v / 7 - ((v % 7 != 0) && (v < 0))) * 7;
    r[i] = static_cast<double>(m100 - 50);
    q[0] = std::max(q[0], r[i]);
    q[1] = std::max(q[1], static_cast<double>(-m7 - 1));
  }
  EXPECT_EQ(f64(out[0]), d);
  EXPECT_EQ(f64(out[1]), r);
  EXPECT_EQ(f64(out[2]), q);
}

// Shifts by every amount from -70 to 70: in range as in C, out of range (negative, or at least the
// width) every bit shifted out (docs/language.md, 2.5); C++ and CUDA leave those undefined (x86
// shifted by the amount modulo the width).
TEST(Numerics, ShiftsByAnyAmount) {
  const int64_t n = 141;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/shifts_tile.py", "shifts", {{"N", std::to_string(n)}});
  rt::Tensor x = random({n}, DType::I32, -2e9, 2e9), w = random({n}, DType::I64, -9e18, 9e18), b = random({n}, DType::I8, -128, 127);
  rt::Tensor s = rt::Tensor::empty({n}, DType::I32);
  std::vector<double> amounts(n);
  for (int64_t i = 0; i < n; ++i) amounts[i] = static_cast<double>(i - 70);
  testutil::from_f64(s, amounts);
  auto out = run(k, {x, w, b, s}, {{{4, n}, DType::I32}, {{2, n}, DType::I64}});
  auto shl = [](int64_t v, int64_t a, int width) -> int64_t {
    if (a < 0 || a >= width) return 0;
    const uint64_t r = static_cast<uint64_t>(v) << a;
    return width == 32 ? static_cast<int32_t>(static_cast<uint32_t>(r)) : static_cast<int64_t>(r);
  };
  auto shr = [](int64_t v, int64_t a, int width) -> int64_t { return v >> (a >= 0 && a < width ? a : 63); };
  const auto* xv = static_cast<const int32_t*>(x.data());
  const auto* wv = static_cast<const int64_t*>(w.data());
  const auto* bv = static_cast<const int8_t*>(b.data());
  const auto* d32 = static_cast<const int32_t*>(out[0].data());
  const auto* d64 = static_cast<const int64_t*>(out[1].data());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t a = i - 70;
    EXPECT_EQ(d32[i], shl(xv[i], a, 32)) << xv[i] << " << " << a;
    EXPECT_EQ(d32[n + i], shr(xv[i], a, 32)) << xv[i] << " >> " << a;
    EXPECT_EQ(d32[2 * n + i], shl(bv[i], a, 32)) << "int8 " << int(bv[i]) << " << " << a;
    EXPECT_EQ(d32[3 * n + i], shr(bv[i], a, 32)) << "int8 " << int(bv[i]) << " >> " << a;
    EXPECT_EQ(d64[i], shl(wv[i], a, 64)) << wv[i] << " << " << a;
    EXPECT_EQ(d64[n + i], shr(wv[i], a, 64)) << wv[i] << " >> " << a;
  }
}

// Python ints beside run-time integers of a type that cannot hold them (docs/language.md): int8
// compared with 200 and -129, int8 plus 300, int32 times 2^32 and plus 2^40 -- each exact. (Typed as
// the int8 or int32 operand, 200 was -56 and every comparison false.)
TEST(Numerics, IntsPastTheOtherOperandsType) {
  const int64_t n = 64;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/weak_ints_tile.py", "weak_ints", {{"N", std::to_string(n)}});
  rt::Tensor b = random({n}, DType::I8, -128, 127), x = random({n}, DType::I32, -2e9, 2e9);
  auto out = run(k, {b, x}, {{{3, n}, DType::I32}, {{2, n}, DType::I64}});
  const auto* bv = static_cast<const int8_t*>(b.data());
  const auto* xv = static_cast<const int32_t*>(x.data());
  const auto* d32 = static_cast<const int32_t*>(out[0].data());
  const auto* d64 = static_cast<const int64_t*>(out[1].data());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(d32[i], 1) << "int8 " << int(bv[i]) << " < 200";
    EXPECT_EQ(d32[n + i], 1) << "int8 " << int(bv[i]) << " > -129";
    EXPECT_EQ(d32[2 * n + i], bv[i] + 300);
    EXPECT_EQ(d64[i], int64_t(xv[i]) * 4294967296LL) << xv[i] << " * 2^32";
    EXPECT_EQ(d64[n + i], int64_t(xv[i]) + (int64_t(1) << 40)) << xv[i] << " + 2^40";
  }
}

// Float to integer (docs/language.md, T.cast): toward zero, saturating at the type's range, NaN to
// 0, from float32 and float64 and in constants the compiler folds. (C++ leaves the out-of-range
// conversions undefined: on x86 the CPU gave the type's minimum, CUDA the low byte for 8 bits.)
TEST(Numerics, FloatToIntSaturates) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> values = {3e9, -3e9, nan, 300.0, -200.0, 1e20, -1.5, 2.5, inf, -inf, 127.9, -128.9, 255.5, -0.5, 1e19, -9.3e18};
  const int64_t n = static_cast<int64_t>(values.size());
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/float_to_int_tile.py", "float_to_int", {{"N", std::to_string(n)}});
  rt::Tensor x = rt::Tensor::empty({n}, DType::F32), y = rt::Tensor::empty({n}, DType::F64);
  testutil::from_f64(x, values);
  testutil::from_f64(y, values);
  auto out = run(k, {x, y}, {{{2, n}, DType::I8}, {{2, n}, DType::U8}, {{2, n}, DType::I32}, {{2, n}, DType::I64}, {{6}, DType::I64}});
  auto expect = [](double v, double lo, double hi) -> double {  // hi: the type's maximum
    if (std::isnan(v)) return 0;
    const double t = std::trunc(v);
    return t < lo ? lo : t > hi ? hi : t;
  };
  const std::vector<double> x32 = f64(x);  // the float32 values as converted
  const std::vector<double> d8 = f64(out[0]), du8 = f64(out[1]), d32 = f64(out[2]);
  const auto* d64 = static_cast<const int64_t*>(out[3].data());
  for (int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < 2; ++r) {
      const double v = r == 0 ? x32[i] : values[i];
      EXPECT_EQ(d8[r * n + i], expect(v, -128, 127)) << "int8 of " << v;
      EXPECT_EQ(du8[r * n + i], expect(v, 0, 255)) << "uint8 of " << v;
      EXPECT_EQ(d32[r * n + i], expect(v, -2147483648.0, 2147483647.0)) << "int32 of " << v;
      const int64_t want64 = std::isnan(v) ? 0 : v >= 9223372036854775808.0 ? INT64_MAX : v <= -9223372036854775808.0 ? INT64_MIN : int64_t(v);
      EXPECT_EQ(d64[r * n + i], want64) << "int64 of " << v;
    }
  }
  const auto* c = static_cast<const int64_t*>(out[4].data());
  EXPECT_EQ(c[0], 127);
  EXPECT_EQ(c[1], 0);
  EXPECT_EQ(c[2], 2147483647);
  EXPECT_EQ(c[3], INT64_MIN);
  EXPECT_EQ(c[4], INT64_MAX);
  EXPECT_EQ(c[5], -2);
}

// Conversions into narrow float formats round once, to nearest even (docs/language.md 2.5), from
// float64 and from 32/64-bit integers alike: in T.cast, in stores and folded from constants. (They
// went through a float rounded to nearest first: double 1 + 2^-8 + 2^-40 became bfloat16 1.0, int
// 2^25 + 2^17 + 1 became 2^25, and a folded T.cast(257, "bfloat16") computed as 257.)

TEST(Numerics, NarrowFloatConversionsRoundOnce) {
  const std::vector<double> ys = {1 + 0x1p-8 + 0x1p-40, -(1 + 0x1p-8 + 0x1p-40), 1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-8, 1 + 0x1p-8 - 0x1p-40,
                                  1 + 0x1p-4 + 0x1p-40, 0.1, 3.14159265358979, 1 + 0x1p-4, 100.25 + 0x1p-30};
  const int64_t big = (int64_t(1) << 60) + (int64_t(1) << 52) + 1;
  const std::vector<int64_t> is = {33685505, -33685505, big, -big, 257, (int64_t(1) << 53) + 3, 16777217, 0, 1, -3};
  const std::vector<int64_t> js = {33685505, -33685505, 257, 16777217, 2147483647, -2147483647 - 1, 12345, 0, 1, 2};
  const int64_t n = static_cast<int64_t>(ys.size());
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/narrow_rounding_tile.py", "narrow_rounding", {{"N", std::to_string(n)}});
  rt::Tensor y = rt::Tensor::empty({n}, DType::F64), i64 = rt::Tensor::empty({n}, DType::I64), i32 = rt::Tensor::empty({n}, DType::I32);
  testutil::from_f64(y, ys);
  std::copy(is.begin(), is.end(), static_cast<int64_t*>(i64.data()));
  for (int64_t i = 0; i < n; ++i) static_cast<int32_t*>(i32.data())[i] = static_cast<int32_t>(js[i]);
  auto out = run(k, {y, i64, i32}, {{{5, n}, DType::F32}, {{3, n}, DType::BF16}, {{n}, DType::F16}, {{7}, DType::F32}});
  const std::vector<double> f = f64(out[0]), sb = f64(out[1]), sh = f64(out[2]), c = f64(out[3]);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(f[i], testutil::round_to_bits(ys[i], 8)) << "T.cast bfloat16 of float64 " << ys[i];
    EXPECT_EQ(f[n + i], testutil::round_to_bits(is[i], 8)) << "T.cast bfloat16 of int64 " << is[i];
    EXPECT_EQ(f[2 * n + i], testutil::round_to_bits(js[i], 8)) << "T.cast bfloat16 of int32 " << js[i];
    EXPECT_EQ(f[3 * n + i], testutil::round_to_bits(ys[i], 11)) << "T.cast float16 of float64 " << ys[i];
    EXPECT_EQ(f[4 * n + i], testutil::round_to_bits(ys[i], 4)) << "T.cast float8_e4m3 of float64 " << ys[i];
    EXPECT_EQ(sb[i], testutil::round_to_bits(ys[i], 8)) << "bfloat16 store of float64 " << ys[i];
    EXPECT_EQ(sb[n + i], testutil::round_to_bits(is[i], 8)) << "bfloat16 store of int64 " << is[i];
    EXPECT_EQ(sb[2 * n + i], testutil::round_to_bits(js[i], 8)) << "bfloat16 store of int32 " << js[i];
    EXPECT_EQ(sh[i], testutil::round_to_bits(ys[i], 11)) << "float16 store of float64 " << ys[i];
  }
  EXPECT_EQ(c[0], 256.0);
  EXPECT_EQ(c[1], 33816576.0);  // 2^25 + 2^18
  EXPECT_EQ(c[2], 1 + 0x1p-7);
  EXPECT_EQ(c[3], 1 + 0x1p-10);
  // T.float16(0.1), T.bfloat16(257) and T.float8_e4m3(0.3) outside the kernel (they were 0.1, 257
  // and 0.3: the double as given).
  EXPECT_EQ(c[4], testutil::round_to_bits(0.1, 11));
  EXPECT_EQ(c[5], 256.0);
  EXPECT_EQ(c[6], testutil::round_to_bits(0.3, 4));
}

// max and min with NaNs (docs/language.md): a NaN operand gives the other operand, in either
// order, and the reductions skip NaNs -- as CUDA's fmaxf / fminf. (The CPU returned the first
// operand when either was NaN: max(NaN, 1) was NaN, max(1, NaN) 1.)
TEST(Numerics, MaxAndMinSkipNaNs) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> xs = {nan, 1.0, nan, -2.0, 5.0, nan, 3.0, -7.0};
  const std::vector<double> ys = {1.0, nan, nan, -3.0, 4.0, -1.0, nan, 8.0};
  const int64_t n = static_cast<int64_t>(xs.size());
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/nan_max_tile.py", "nan_max", {{"N", std::to_string(n)}});
  rt::Tensor x = rt::Tensor::empty({n}, DType::F32), y = rt::Tensor::empty({n}, DType::F32);
  testutil::from_f64(x, xs);
  testutil::from_f64(y, ys);
  auto out = run(k, {x, y}, {{{4, n}, DType::F32}, {{2}, DType::F32}});
  const std::vector<double> d = f64(out[0]), r = f64(out[1]);
  for (int64_t i = 0; i < n; ++i) {
    const double mx = std::isnan(xs[i]) ? ys[i] : std::isnan(ys[i]) ? xs[i] : std::max(xs[i], ys[i]);
    const double mn = std::isnan(xs[i]) ? ys[i] : std::isnan(ys[i]) ? xs[i] : std::min(xs[i], ys[i]);
    for (int order = 0; order < 2; ++order) {
      if (std::isnan(mx)) EXPECT_TRUE(std::isnan(d[order * n + i])) << i;
      else EXPECT_EQ(d[order * n + i], mx) << "max of " << xs[i] << ", " << ys[i];
      if (std::isnan(mn)) EXPECT_TRUE(std::isnan(d[(2 + order) * n + i])) << i;
      else EXPECT_EQ(d[(2 + order) * n + i], mn) << "min of " << xs[i] << ", " << ys[i];
    }
  }
  EXPECT_EQ(r[0], 5.0);
  EXPECT_EQ(r[1], -7.0);
}

// The same with constant operands, folded when the kernel is compiled: the folding used std::max /
// std::min, which give NaN when the NaN comes first (T.max(NaN, 1.0) was NaN, T.max(1.0, NaN) 1).
TEST(Numerics, FoldedMaxAndMinSkipNaNs) {
  const int64_t n = 5;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/nan_max_folded_tile.py", "nan_max_folded", {{"N", std::to_string(n)}});
  rt::Tensor x = random({n}, DType::F32);
  const std::vector<double> xv = f64(x);
  auto out = run(k, {x}, {{{4, n}, DType::F32}});
  const std::vector<double> y = f64(out[0]);
  const double want[4] = {1.0, 2.0, 3.0, -4.0};
  for (int row = 0; row < 4; ++row)
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[row * n + i], static_cast<float>(want[row] + xv[i])) << "row " << row;
}

// Integer // and % by run-time divisors of every sign, -1 among them (docs/language.md): Python's
// floor semantics, and by -1 the two's-complement negation (INT_MIN // -1 is INT_MIN) with a
// remainder of 0 -- C++'s INT_MIN / -1 trapped the CPU process (SIGFPE). T.truncdiv / T.truncmod
// likewise, rounding toward zero (they trapped too).
TEST(Numerics, IntegerDivisionByAnyNonzeroDivisor) {
  const std::vector<int64_t> x32 = {7, -7, INT32_MIN, INT32_MIN, INT32_MAX, 0, -1, 5, INT32_MIN, 13};
  const std::vector<int64_t> y32 = {2, 2, -1, 1, -1, -3, -1, -2, 2, INT32_MIN};
  const std::vector<int64_t> x64 = {7, -7, INT64_MIN, INT64_MIN, INT64_MAX, 0, -1, 5, INT64_MIN, 13};
  const std::vector<int64_t> y64 = {2, 2, -1, 1, -1, -3, -1, -2, 2, INT64_MIN};
  const int64_t n = static_cast<int64_t>(x32.size());
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/int_division_tile.py", "int_division", {{"N", std::to_string(n)}});
  rt::Tensor x = rt::Tensor::empty({n}, DType::I32), y = rt::Tensor::empty({n}, DType::I32);
  rt::Tensor w = rt::Tensor::empty({n}, DType::I64), v = rt::Tensor::empty({n}, DType::I64);
  for (int64_t i = 0; i < n; ++i) {
    static_cast<int32_t*>(x.data())[i] = static_cast<int32_t>(x32[i]), static_cast<int32_t*>(y.data())[i] = static_cast<int32_t>(y32[i]);
    static_cast<int64_t*>(w.data())[i] = x64[i], static_cast<int64_t*>(v.data())[i] = y64[i];
  }
  auto out = run(k, {x, y, w, v}, {{{4, n}, DType::I32}, {{4, n}, DType::I64}});
  // Floor division and its remainder in 128-bit arithmetic, wrapped to the width.
  auto floor_div = [](__int128 a, __int128 b) { __int128 q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; };
  auto wrap = [](__int128 v, int bits) { return bits == 32 ? int64_t(int32_t(uint32_t(uint64_t(v)))) : int64_t(uint64_t(v)); };
  const auto* d32 = static_cast<const int32_t*>(out[0].data());
  const auto* d64 = static_cast<const int64_t*>(out[1].data());
  for (int64_t i = 0; i < n; ++i) {
    const __int128 q32 = floor_div(x32[i], y32[i]), q64 = floor_div(x64[i], y64[i]);
    EXPECT_EQ(d32[i], wrap(q32, 32)) << x32[i] << " // " << y32[i];
    EXPECT_EQ(d32[n + i], wrap(__int128(x32[i]) - q32 * y32[i], 32)) << x32[i] << " % " << y32[i];
    EXPECT_EQ(d64[i], wrap(q64, 64)) << x64[i] << " // " << y64[i];
    EXPECT_EQ(d64[n + i], wrap(__int128(x64[i]) - q64 * y64[i], 64)) << x64[i] << " % " << y64[i];
    const __int128 t32 = __int128(x32[i]) / y32[i], t64 = __int128(x64[i]) / y64[i];  // C's, toward zero
    EXPECT_EQ(d32[2 * n + i], wrap(t32, 32)) << "truncdiv(" << x32[i] << ", " << y32[i] << ")";
    EXPECT_EQ(d32[3 * n + i], wrap(__int128(x32[i]) - t32 * y32[i], 32)) << "truncmod(" << x32[i] << ", " << y32[i] << ")";
    EXPECT_EQ(d64[2 * n + i], wrap(t64, 64)) << "truncdiv(" << x64[i] << ", " << y64[i] << ")";
    EXPECT_EQ(d64[3 * n + i], wrap(__int128(x64[i]) - t64 * y64[i], 64)) << "truncmod(" << x64[i] << ", " << y64[i] << ")";
  }
}

// Unary -, ~ and abs of int8 / uint8 values are int32, as the binary operators' results are
// (docs/language.md, 2.5): bound to a name, used in place and folded alike. (They were typed int8 /
// uint8 while C++ computed them in int: a name bound to -(-128) held -128 and to ~200 held 55, and
// the folded -int8(-128) was -128, where the same expressions in place gave 128 and -201.)
TEST(Numerics, NarrowIntegerUnaryOpsAreInt32) {
  const std::vector<int64_t> bs = {-128, -1, 0, 5, 127, -100}, us = {200, 0, 255, 1, 128, 7};
  const int64_t n = static_cast<int64_t>(bs.size());
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/narrow_unary_tile.py", "narrow_unary", {{"N", std::to_string(n)}});
  rt::Tensor b = rt::Tensor::empty({n}, DType::I8), u = rt::Tensor::empty({n}, DType::U8);
  for (int64_t i = 0; i < n; ++i) static_cast<int8_t*>(b.data())[i] = int8_t(bs[i]), static_cast<uint8_t*>(u.data())[i] = uint8_t(us[i]);
  auto out = run(k, {b, u}, {{{8, n}, DType::I32}, {{3}, DType::I32}});
  auto floor_div = [](int64_t a, int64_t d) { return a / d - ((a % d != 0) && ((a < 0) != (d < 0))); };
  const auto* d = static_cast<const int32_t*>(out[0].data());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x = bs[i], y = us[i];
    EXPECT_EQ(d[i], -x) << "-int8 " << x << " bound to a name";
    EXPECT_EQ(d[n + i], ~y) << "~uint8 " << y << " bound to a name";
    EXPECT_EQ(d[2 * n + i], std::abs(x)) << "abs of int8 " << x << " bound to a name";
    EXPECT_EQ(d[3 * n + i], floor_div(-x, 2)) << "(-int8 " << x << ") // 2";
    EXPECT_EQ(d[4 * n + i], (~y) >> 1) << "(~uint8 " << y << ") >> 1";
    EXPECT_EQ(d[5 * n + i], -y - floor_div(-y, 1000) * 1000) << "(-uint8 " << y << ") % 1000";
    EXPECT_EQ(d[6 * n + i], std::abs(x) / 2) << "abs(int8 " << x << ") // 2";
    EXPECT_EQ(d[7 * n + i], -x > 127 ? 1 : 0) << "-int8 " << x << " > 127";
  }
  EXPECT_EQ(f64(out[1]), (std::vector<double>{128, -201, 128}));
}

// Float // and % (docs/language.md, 2.5) are Python's divmod, exact to the last bit: the expected
// values are NumPy's np.divmod (CPython's float_divmod) of the same float32 / float64 operands, and
// the folded constants Python's. (a - floor(a / b) * b, fused into an fma, gave 1 % -1e-8 = 6e-9
// and 9.2e18 % -1968576462 = 6.9e10; floor(a / b) gave 1.0 // 0.1 = 10.0, inf // 2 = inf.)
TEST(Numerics, FloatDivmodIsPythons) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> a = {1.0, 9.2e18, 1.0, -7.5, 7.5, -1.0, 1.0, inf, 5.0, -0.0, 0.0, 3e9, -1.0, 0.7};
  const std::vector<double> b = {-1e-8, -1968576462.0, 0.1, 2.0, -2.0, inf, inf, 2.0, 0.0, 3.0, -3.0, 7.0, 0.1, -0.1};
  const std::vector<double> q32 = {-100000000.0, -4673427968.0, 9.0, -4.0, -4.0, -1.0, 0.0, nan, inf, -0.0, -0.0, 428571424.0, -10.0, -7.0};
  const std::vector<double> r32 = {-3.9225289683031406e-09, -537632768.0, 0.09999998658895493, 0.5, -0.5, inf, 1.0, nan, nan, 0.0, -0.0, 4.0,
                                   1.4901161193847656e-08, -2.2351741790771484e-08};
  const std::vector<double> q64 = {-100000000.0, -4673427819.0, 9.0, -4.0, -4.0, -1.0, 0.0, nan, inf, -0.0, -0.0, 428571428.0, -10.0, -7.0};
  const std::vector<double> r64 = {-2.0922560830128473e-17, -1339396378.0, 0.09999999999999995, 0.5, -0.5, inf, 1.0, nan, nan, 0.0, -0.0, 4.0,
                                   5.551115123125783e-17, -8.326672684688674e-17};
  const int64_t n = static_cast<int64_t>(a.size());
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/float_divmod_tile.py", "float_divmod", {{"N", std::to_string(n)}});
  rt::Tensor a32 = rt::Tensor::empty({n}, DType::F32), b32 = rt::Tensor::empty({n}, DType::F32);
  rt::Tensor a64 = rt::Tensor::empty({n}, DType::F64), b64 = rt::Tensor::empty({n}, DType::F64);
  testutil::from_f64(a32, a), testutil::from_f64(b32, b), testutil::from_f64(a64, a), testutil::from_f64(b64, b);
  auto out = run(k, {a32, b32, a64, b64}, {{{2, n}, DType::F32}, {{2, n}, DType::F64}, {{4}, DType::F64}});
  const std::vector<double> d32 = f64(out[0]), d64 = f64(out[1]);
  auto same = [](double got, double want) { return std::isnan(want) ? std::isnan(got) : got == want && std::signbit(got) == std::signbit(want); };
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_PRED2(same, d32[i], q32[i]) << "float32 " << a[i] << " // " << b[i];
    EXPECT_PRED2(same, d32[n + i], r32[i]) << "float32 " << a[i] << " % " << b[i];
    EXPECT_PRED2(same, d64[i], q64[i]) << "float64 " << a[i] << " // " << b[i];
    EXPECT_PRED2(same, d64[n + i], r64[i]) << "float64 " << a[i] << " % " << b[i];
  }
  EXPECT_EQ(f64(out[2]), (std::vector<double>{9.0, 0.09999999999999995, -10.0, 5.551115123125783e-17}));
}

// Integer + - * wrap in two's complement at run time (docs/language.md, 2.5), as constant folding
// does. (C++ leaves signed overflow undefined: the host compiler folded X + 1 > X and W - 1 < W to
// true, and X * 65536 < 0 to false for every X.)
TEST(Numerics, IntegerArithmeticWraps) {
  // The H200 run read x + 1 > x true at INT32_MAX: NVRTC folds as C++ allows (a known issue there).
  if (tltest::on_gpu()) GTEST_SKIP() << "signed overflow is undefined on CUDA (docs/language.md, known issues)";
  const std::vector<int64_t> xs = {INT32_MAX, 5, INT32_MIN, (1 << 30) + 7, 40000}, ws = {INT64_MIN, 7, INT64_MAX, int64_t(1) << 62, -5};
  const int64_t n = static_cast<int64_t>(xs.size());
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/int_wrap_tile.py", "int_wrap", {{"N", std::to_string(n)}});
  rt::Tensor x = rt::Tensor::empty({n}, DType::I32), w = rt::Tensor::empty({n}, DType::I64);
  for (int64_t i = 0; i < n; ++i) static_cast<int32_t*>(x.data())[i] = int32_t(xs[i]), static_cast<int64_t*>(w.data())[i] = ws[i];
  auto out = run(k, {x, w}, {{{4, n}, DType::I32}, {{2, n}, DType::I64}});
  auto wrap32 = [](int64_t v) { return int64_t(int32_t(uint32_t(uint64_t(v)))); };
  auto wrap64 = [](__int128 v) { return int64_t(uint64_t(v)); };
  const auto* d = static_cast<const int32_t*>(out[0].data());
  const auto* e = static_cast<const int64_t*>(out[1].data());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = xs[i];
    EXPECT_EQ(d[i], wrap32(v + 1) > v ? 1 : 0) << v << " + 1 > " << v;
    EXPECT_EQ(d[n + i], wrap32(v * 2) / 2 == v ? 1 : 0) << v << " * 2 // 2 == " << v;
    EXPECT_EQ(d[2 * n + i], wrap64(__int128(ws[i]) - 1) < ws[i] ? 1 : 0) << ws[i] << " - 1 < " << ws[i];
    EXPECT_EQ(d[3 * n + i], wrap32(v * 65536) < 0 ? 1 : 0) << v << " * 65536 < 0";
    EXPECT_EQ(e[i], wrap32(v * 4 + 1)) << v << " * 4 + 1";
    EXPECT_EQ(e[n + i], wrap64(__int128(ws[i]) * 3)) << ws[i] << " * 3";
  }
}

// Column tiles (block_M x 1) copied in and out at points X[by * block_M, bx]: the tile's own shape,
// clipped at the bottom edge (docs/language.md, 4.5). Each tile got a piece of a row before, and Y
// kept its poison outside the first columns.
TEST(TileCopy, ColumnTileAtAPoint) {
  const int64_t m = 21, n = 5;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/column_tile_copy.py", "column_tiles", {{"M", std::to_string(m)}, {"N", std::to_string(n)}});
  rt::Tensor x = random({m, n}, DType::F32);
  auto out = run(k, {x}, {{{m, n}, DType::F32}});
  std::vector<double> want = f64(x);
  for (double& v : want) v *= 2.0;
  EXPECT_EQ(f64(out[0]), want);
}

// Row sums stored by a few threads from a shared tile, then a tile written by all threads that takes
// the row sums' bytes (reused_shared_tile.py): the block meets in between. Many blocks, so that on the
// GPU some of them would interleave the two without the barrier.
TEST(TileCopy, NewTileWaitsForReadersOfTheTileItReuses) {
  const int64_t m = 96 * 264 - 5, n = 48;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/reused_shared_tile.py", "rowsum_then_cast", {{"M", std::to_string(m)}, {"N", std::to_string(n)}});
  rt::Tensor a = random({m, n}, DType::F32);
  auto out = run(k, {a}, {{{m}, DType::F32}, {{m, n}, DType::BF16}});
  const std::vector<double> av = f64(a);
  std::vector<double> sums(m, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) sums[i] += av[i * n + j];
  expect_close(out[0], sums, "row sums");
  expect_close(out[1], av, "the tile as bfloat16");
}

// The copy and the parallel loop after T.get_thread_binding are shared out among the threads
// (thread_binding_then_tile_ops.py: on the GPU every thread ran them whole, doubling the row racily);
// a parallel loop writing a local runs whole in every thread (it was shared out: 2 threads set it).
TEST(TileCopy, TileOpsAfterAThreadBinding) {
  const int64_t m = 9, n = 300;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/thread_binding_then_tile_ops.py", "scale_rows", {{"M", std::to_string(m)}, {"N", std::to_string(n)}});
  rt::Tensor x = random({m, n}, DType::F32);
  auto out = run(k, {x}, {{{m, n}, DType::F32}});
  std::vector<double> ref = f64(x);
  for (double& v : ref) v = 3.0 * v + 3.0;
  expect_close(out[0], ref, "3 x + 1 + 2");
}

// An if's condition, a let's value and a loop's extent that read shared memory their body writes are
// read before the body runs (shared_read_then_written.py: on the GPU a fast warp's writes reached the
// reads of a slow one: the update skipped in some warps, `m` and the loop count differing).
TEST(TileCopy, SharedReadBeforeTheBodyWritesIt) {
  const int64_t n = 300;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/shared_read_then_written.py", "update_if_small", {{"N", std::to_string(n)}});
  rt::Tensor x = random({4, n}, DType::F32), c = random({4}, DType::I32, 1, 5);
  auto out = run(k, {x, c}, {{{4, n}, DType::F32}});
  std::vector<double> xv = f64(x), cv = f64(c), ref(4 * n);
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t j = 0; j < n; ++j) ref[b * n + j] = (xv[b * n + j] + 1001 + cv[b]) + (xv[b * n + 1] + 1000 + cv[b]);
  expect_close(out[0], ref, "X + 1000 + C + 1 + m");
}

// A gemm and a row sum of its accumulator after T.get_thread_binding(0) of a 2-D block, then a
// per-thread store (thread_binding_then_gemm.py: on the GPU the accumulator had left its registers).
TEST(TileCopy, GemmAfterAThreadBinding) {
  const int64_t m = 200, n = 192, k = 96;
  tilelang::Kernel kern = tltest::load("tests/tilelang/programs/thread_binding_then_gemm.py", "gemm_rowsum",
                                       {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(k)}});
  rt::Tensor a = random({m, k}, DType::F16), b = random({k, n}, DType::F16);
  auto out = run(kern, {a, b}, {{{m, n}, DType::F32}, {{n / 64, m}, DType::F32}, {{4, n / 64, 128}, DType::F32}});
  const std::vector<double> c = matmul_ref(f64(a), f64(b), m, n, k);
  std::vector<double> rows(n / 64 * m, 0.0), z(4 * (n / 64) * 128);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) rows[j / 64 * m + i] += c[i * n + j];
  for (size_t i = 0; i < z.size(); ++i) z[i] = double(i % 128);
  expect_close(out[0], c, "A B");
  expect_close(out[1], rows, "row sums of each 64-column block");
  expect_close(out[2], z, "each thread's index");
}

// A TMA-pipelined loop in a serial loop, starting at the outer variable (pipelined_in_serial_loop.py):
// pass ro adds the K blocks from ro on, the last passes fewer iterations than stages, the very last
// none. On sm_90a the passes re-initialize the loop's mbarriers: without a block barrier first, warps
// still finishing a pass waited on or released into barriers being reset. Many blocks for the GPU.
TEST(TileCopy, PipelinedLoopInASerialLoop) {
  const int64_t m = 1000, n = 520, k = 96, passes = 4;
  tilelang::Kernel kern = tltest::load("tests/tilelang/programs/pipelined_in_serial_loop.py", "passes_gemm",
                                       {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(k)}, {"passes", std::to_string(passes)}});
  rt::Tensor a = random({m, k}, DType::F16), b = random({k, n}, DType::F16);
  auto out = run(kern, {a, b}, {{{m, n}, DType::F32}});
  const std::vector<double> av = f64(a), bv = f64(b);
  std::vector<double> ref(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk) {
      const double times = double(std::min<int64_t>(kk / 32, passes - 1) + 1);  // the passes ro <= kk / 32
      for (int64_t j = 0; j < n; ++j) ref[i * n + j] += times * av[i * k + kk] * bv[kk * n + j];
    }
  expect_close(out[0], ref, "the sum over passes of A[:, 32 ro:] B[32 ro:]");
}

// Tile ops on a thread's own part (per_thread_tile_ops.py: a copy of a local to the thread's place,
// the tile atomic of it, a T.Parallel over its elements) run whole in each thread; on the GPU they
// were shared out among the threads (threads 0..3 stored a few elements at wrong places).
TEST(TileCopy, PerThreadTileOps) {
  const int64_t p = 4, n = 128 * p;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/per_thread_tile_ops.py", "own_parts", {{"P", std::to_string(p)}});
  rt::Tensor x = random({4, n}, DType::F32), g = random({4, n}, DType::F32);
  std::vector<double> xv = f64(x), g_ref = f64(g), y_ref(4 * n), w_ref(4 * n);
  for (int64_t i = 0; i < 4 * n; ++i) {
    y_ref[i] = 2 * xv[i];
    g_ref[i] += 2 * xv[i];
    w_ref[i] = 2 * xv[i] + double(i % p);
  }
  std::vector<rt::Tensor> tensors{x, g, tltest::poisoned({4, n}, DType::F32), tltest::poisoned({4, n}, DType::F32)};
  tltest::run_in_place(k, tensors);
  expect_close(tensors[1], g_ref, "G + 2 X (the tile atomic)");
  expect_close(tensors[2], y_ref, "2 X (the copy)");
  expect_close(tensors[3], w_ref, "2 X + q (the parallel loop)");
}

// Folded float16 / bfloat16 constant arithmetic computes in float, as the same arithmetic on run-time
// values does (folded_narrow_arithmetic.py: the fold was in double, 1e-4 against 0).
TEST(Numerics, FoldedNarrowArithmeticIsFloatArithmetic) {
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/folded_narrow_arithmetic.py", "folded_narrow");
  rt::Tensor h = rt::Tensor::empty({2}, DType::F16), b = rt::Tensor::empty({2}, DType::BF16);
  testutil::from_f64(h, {2048.0, 0.0001});
  testutil::from_f64(b, {16777216.0, 0.5});
  auto out = run(k, {h, b}, {{{4}, DType::F32}});
  const std::vector<double> y = f64(out[0]);
  EXPECT_EQ(y[0], 0.0) << "float16 at run time: 2048 + 0.0001 rounds to 2048 in float";
  EXPECT_EQ(y[1], y[0]) << "float16 folded";
  EXPECT_EQ(y[2], 0.0) << "bfloat16 at run time";
  EXPECT_EQ(y[3], y[2]) << "bfloat16 folded";
}

TEST(Numerics, RoundingIntoFloat4) {
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/float4_store_seed.py", "to_fp4");
  rt::Tensor x = rt::Tensor::empty({9}, DType::F32);
  testutil::from_f64(x, {0.1, 0.6, 1.2, 2.6, 3.5, -5.0, 7.0, 100.0, -0.25});
  std::vector<rt::Tensor> out = k({x});
  EXPECT_EQ(f64(out[0]), (std::vector<double>{0.0, 0.5, 1.0, 3.0, 4.0, -4.0, 6.0, 6.0, -0.0}));
}

// A cast to a narrower type inside a product or a running sum is a rounding the program asks for
// at every step (docs/language.md 3.5: recognition only changes rounding to the stored type). The
// recognizers stripped every float cast, so `c += float8(a) * b` became a float32 gemm of the
// unrounded a, and `s = float8(s + x)` a float32 sum never rounded to float8.
TEST(Numerics, ExplicitRoundingInsideLoopsIsKept) {
  const int64_t m = 5, n = 7, kk = 9;
  // Magnitudes 1/4 to 2: operands and products are normal float8 values, where rounding to 4
  // significant bits is the e4m3 conversion.
  rt::Tensor a = random({m, kk}, DType::F32, 0.25, 2.0), b = random({kk, n}, DType::F32, 0.25, 2.0);
  const std::vector<double> av = f64(a), bv = f64(b);
  std::vector<double> a8(av.size()), ref_operand(m * n, 0.0), ref_product(m * n, 0.0);
  for (size_t e = 0; e < av.size(); ++e) a8[e] = testutil::round_to_bits(av[e], 4);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < kk; ++p) {
        ref_operand[i * n + j] += a8[i * kk + p] * bv[p * n + j];
        ref_product[i * n + j] += testutil::round_to_bits(static_cast<double>(static_cast<float>(av[i * kk + p] * bv[p * n + j])), 4);
      }
  auto operand = run(tltest::load("tests/tilelang/programs/explicit_rounding_seed.py", "rounded_operand"), {a, b}, {{{m, n}, DType::F32}});
  expect_close(operand[0], ref_operand, "c += float8(a) * b");
  auto product = run(tltest::load("tests/tilelang/programs/explicit_rounding_seed.py", "rounded_product"), {a, b}, {{{m, n}, DType::F32}});
  expect_close(product[0], ref_product, "c += float8(a * b)");

  // Quarters from -4 to 4: every partial sum is a float8 normal value or 0 before its rounding, and
  // the sums stay far from e4m3's largest value (448).
  const int64_t rows = 6, cols = 40;
  rt::Tensor x = rt::Tensor::empty({rows, cols}, DType::F32);
  std::vector<double> xv(rows * cols), ref_sum(rows, 0.0);
  for (size_t e = 0; e < xv.size(); ++e) xv[e] = static_cast<double>(static_cast<int64_t>((e * 37 + 11) % 33) - 16) / 4.0;
  testutil::from_f64(x, xv);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) ref_sum[i] = testutil::round_to_bits(ref_sum[i] + xv[i * cols + j], 4);
  auto sum = run(tltest::load("tests/tilelang/programs/explicit_rounding_seed.py", "rounded_sum"), {x}, {{{rows}, DType::F32}});
  EXPECT_EQ(f64(sum[0]), ref_sum) << "s = float8(s + x)";

  // A float64 sum rounded to float32 at every step (float32 was taken to hold every float64 value).
  rt::Tensor w = random({rows, cols}, DType::F64);
  const std::vector<double> wv = f64(w);
  std::vector<double> ref_wide(rows, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) ref_wide[i] = static_cast<float>(ref_wide[i] + wv[i * cols + j]);
  auto wide = run(tltest::load("tests/tilelang/programs/explicit_rounding_seed.py", "rounded_wide_sum"), {w}, {{{rows}, DType::F64}});
  EXPECT_EQ(f64(wide[0]), ref_wide) << "s = float32(s + x) into a float64 s";
}

// A product nest whose k loop starts at the row index (u upper triangular). The gemm recognizer
// took the loops' bounds as the gemm's regions, so the region named i outside its loop ("'i' is
// used outside the loop ..." on a valid program); such a nest is no gemm and stays loops.
TEST(SeedLoops, TriangularProductStaysLoops) {
  const int64_t m = 13, n = 6;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/triangular_product_seed.py", "upper_times");
  rt::Tensor u = random({m, m}, DType::F32), x = random({m, n}, DType::F32);
  const std::vector<double> uv = f64(u), xv = f64(x);
  std::vector<double> ref(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = i; p < m; ++p) ref[i * n + j] += uv[i * m + p] * xv[p * n + j];
  auto out = run(k, {u, x}, {{{m, n}, DType::F32}});
  expect_close(out[0], ref, "upper-triangular product");
}

// `for j in range(s[0]): s[0] = s[0] + 1` inside a loop doubles s each outer step. promote_reductions
// gave s an accumulator stored back only after the nest, so every inner loop read the first s (4n
// instead of 8n).
TEST(SeedLoops, InnerLoopBoundReadsTheSum) {
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/growing_loop_seed.py", "doubling");
  rt::Tensor n = rt::Tensor::empty({1}, DType::I32);
  static_cast<int32_t*>(n.data())[0] = 5;
  auto out = run(k, {n}, {{{1}, DType::I32}});
  EXPECT_EQ(f64(out[0]), (std::vector<double>{40.0}));
}

// A sum whose index reads a tensor the nest writes (`s[t[0]] += x[j]; t[0] += 1`, `s[s[0]] += x[j]`):
// promote_reductions loaded s[t[0]] into an accumulator before the loop and stored it after, so
// every step added into the first element (s = [3, 0, 0, 0] for x = [1, 1, 1], not [1, 1, 1, 0]).
// Found by differential testing (tools/difftest, family seed_reduce).
TEST(SeedLoops, SumIntoAnElementTheLoopMovesStaysStepwise) {
  rt::Tensor x = rt::Tensor::empty({3}, DType::I32);
  for (int i = 0; i < 3; ++i) static_cast<int32_t*>(x.data())[i] = 1;
  auto counter = run(tltest::load("tests/tilelang/programs/moving_index_seed.py", "counter_index"), {x}, {{{4}, DType::I32}});
  EXPECT_EQ(f64(counter[0]), (std::vector<double>{1, 1, 1, 0})) << "s[t[0]] += x[j]; t[0] += 1";
  // s[0] goes 0 -> 1, then s[1] takes the next two steps.
  auto self = run(tltest::load("tests/tilelang/programs/moving_index_seed.py", "self_index"), {x}, {{{4}, DType::I32}});
  EXPECT_EQ(f64(self[0]), (std::vector<double>{1, 2, 0, 0})) << "s[s[0]] += x[j]";
}

// A product nest whose k loop's bound reads C (`for k in range(int(c[0, 0]))`): the recognizer made it
// one gemm with that bound as its K, read once before the gemm, while the loops read it anew for every
// (i, j) after c[0, 0] has changed. Found by differential testing (tools/difftest, family seed_gemm).
TEST(SeedLoops, ProductWhoseBoundReadsCStaysLoops) {
  const int64_t m = 3, n = 4, kk = 6;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/bound_reads_c_seed.py", "growing_k");
  rt::Tensor a = rt::Tensor::empty({m, kk}, DType::F32), b = rt::Tensor::empty({kk, n}, DType::F32), c0 = rt::Tensor::empty({m, n}, DType::F32);
  testutil::from_f64(a, std::vector<double>(m * kk, 1.0));
  testutil::from_f64(b, std::vector<double>(kk * n, 1.0));
  testutil::from_f64(c0, std::vector<double>(m * n, 2.0));
  // c[0, 0] = 2 + 2 = 4 after the first element; every later element then sums min(4, 6) = 4 terms.
  std::vector<double> ref(m * n, 6.0);
  ref[0] = 4.0;
  auto out = run(k, {a, b, c0}, {{{m, n}, DType::F32}});
  EXPECT_EQ(f64(out[0]), ref);
}

// A product nest with a dimension of one (one row of A, a batch of one) is a gemm like any other
// (docs/language.md 3.5): float32 sums rounded once into the bfloat16 C. simplify inlines loops of
// one iteration before recognize_tile_ops runs, which took only loop variables as C's indices, so the
// nest stayed loops and, k outermost, rounded every step: 1 + 2^-8 is a tie that rounds to 1 in
// bfloat16, so 1 + 4 x 2^-8 came out as 1. Found by differential testing (family seed_gemm).
TEST(SeedLoops, ProductWithAUnitDimensionIsAGemm) {
  const int64_t kk = 5, n = 3;
  std::vector<double> av(kk, 0x1p-8);
  av[0] = 1.0;
  rt::Tensor a = rt::Tensor::empty({1, kk}, DType::F32), b = rt::Tensor::empty({kk, n}, DType::F32);
  testutil::from_f64(a, av);
  testutil::from_f64(b, std::vector<double>(kk * n, 1.0));
  auto row = run(tltest::load("tests/tilelang/programs/unit_dim_product_seed.py", "one_row"), {a, b}, {{{1, n}, DType::BF16}});
  EXPECT_EQ(f64(row[0]), std::vector<double>(n, 1.0 + 4 * 0x1p-8)) << "m = 1";
  rt::Tensor a3 = rt::Tensor::empty({1, 2, kk}, DType::F32), b3 = rt::Tensor::empty({1, kk, n}, DType::F32);
  std::vector<double> av3 = av;
  av3.insert(av3.end(), av.begin(), av.end());
  testutil::from_f64(a3, av3);
  testutil::from_f64(b3, std::vector<double>(kk * n, 1.0));
  auto batch = run(tltest::load("tests/tilelang/programs/unit_dim_product_seed.py", "batch_of_one"), {a3, b3}, {{{1, 2, n}, DType::BF16}});
  EXPECT_EQ(f64(batch[0]), std::vector<double>(2 * n, 1.0 + 4 * 0x1p-8)) << "a batch of one";
}

// A loop writing y[i] and y[i + 1]: each store was indexed by the loop variable plus an invariant,
// which the independence test took as "every iteration writes its own element", so the loop ran
// in parallel (OpenMP on the CPU, a thread an iteration on CUDA) and steps read carries not yet
// written. 40000 steps: past the CPU's threshold for a parallel loop.
TEST(SeedLoops, CarryIntoTheNextElementStaysSerial) {
  const int64_t n = 40000;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/carry_store_seed.py", "carry");
  rt::Tensor x = random({n}, DType::F32);
  const std::vector<double> xv = f64(x);
  std::vector<double> ref(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    ref[i] = static_cast<float>(ref[i] * 0.5);
    ref[i + 1] = static_cast<float>(ref[i] + xv[i]);
  }
  auto out = run(k, {x}, {{{n + 1}, DType::F32}});
  EXPECT_EQ(f64(out[0]), ref);
}

// float32 products accumulated into a float64 C: the recognizer made the nest a gemm, which sums in
// float32, so 1 + 999 * 2^-30 came out as 1. A float64 C keeps the loops and their float64 sum.
TEST(SeedLoops, Float64SumOfFloat32ProductsStaysFloat64) {
  const int64_t m = 3, n = 2, kk = 1000;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/f64_sum_seed.py", "wide_sum");
  rt::Tensor a = rt::Tensor::empty({m, kk}, DType::F32), b = rt::Tensor::empty({kk, n}, DType::F32);
  std::vector<double> av(m * kk, 0x1p-30), bv(kk * n, 1.0);
  for (int64_t i = 0; i < m; ++i) av[i * kk] = 1.0;
  testutil::from_f64(a, av);
  testutil::from_f64(b, bv);
  auto out = run(k, {a, b}, {{{m, n}, DType::F64}});
  EXPECT_EQ(f64(out[0]), std::vector<double>(m * n, 1.0 + 999 * 0x1p-30));
}

// float64 terms added into a float32 s: promote_reductions gave s a float32 accumulator and rounded
// each term to float32 first, which the program never does (it adds in float64, then rounds): 100
// terms of 2^-24 (1 + 2^-25) left 1.0 unchanged. The accumulator is float64 now, rounded once.
TEST(SeedLoops, Float64TermsIntoFloat32SumInFloat64) {
  const int64_t n = 100;
  const double term = 0x1p-24 * (1 + 0x1p-25);
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/f64_sum_seed.py", "narrow_sum");
  rt::Tensor x = rt::Tensor::empty({n}, DType::F64);
  testutil::from_f64(x, std::vector<double>(n, term));
  auto out = run(k, {x}, {{{1}, DType::F32}});
  EXPECT_EQ(f64(out[0]), (std::vector<double>{static_cast<float>(1.0 + n * term)}));
}

// An explicit conversion to a narrow float type of an expression of that type (x_f16 * 3.0, which
// kernels compute in float32) rounds, as docs/language.md 6 says. The cast was dropped as a no-op
// (same type), so T.cast(x * 3.0, "float16") stored into float32 kept all of x * 3.0.
TEST(Numerics, ExplicitNarrowCastsRound) {
  const int64_t n = 64;
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/explicit_cast_tile.py", "explicit_cast", {{"N", std::to_string(n)}});
  // Magnitudes 1/4 to 1: every result is a normal float16, where rounding is to 11 significant bits.
  rt::Tensor x = random({n}, DType::F16, 0.25, 1.0);
  const std::vector<double> xv = f64(x);
  auto out = run(k, {x}, {{{3, n}, DType::F32}});
  const std::vector<double> y = f64(out[0]);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(y[i], testutil::round_to_bits(xv[i] * 3.0, 11)) << "T.cast(x * 3.0, float16), x = " << xv[i];
    EXPECT_EQ(y[n + i], testutil::round_to_bits(xv[i] / 3.0, 11)) << "T.float16(x / 3.0), x = " << xv[i];
    EXPECT_EQ(y[2 * n + i], testutil::round_to_bits(xv[i] * 5.0, 11)) << "h: T.float16 = x * 5.0, x = " << xv[i];
  }
}

// T.gemm compared its operands' shapes with every unit dimension dropped and padded in front, so a
// [9, 1] C read as [1, 9]: matrix-vector products (N = 1), row times matrix (M = 1) and outer
// products (K = 1) were rejected ("shapes do not fit: A [9, 8], B [8, 1], C [9, 1]").
class GemmUnitDims : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, bool>> {};

TEST_P(GemmUnitDims, MatchesReference) {
  auto [m, n, kk, trans_b] = GetParam();
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/gemm_unit_dims_tile.py", "gemm_unit_dims",
                                    {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(kk)}, {"trans_b", trans_b ? "True" : "False"}});
  rt::Tensor a = random({m, kk}, DType::F32), b = trans_b ? random({n, kk}, DType::F32) : random({kk, n}, DType::F32);
  auto out = run(k, {a, b}, {{{m, n}, DType::F32}});
  expect_close(out[0], matmul_ref(f64(a), f64(b), m, n, kk, trans_b), "gemm with a unit dimension");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmUnitDims,
                         ::testing::Values(std::make_tuple(9, 1, 8, false), std::make_tuple(9, 1, 8, true), std::make_tuple(1, 7, 5, false),
                                           std::make_tuple(6, 4, 1, false), std::make_tuple(1, 1, 1, true)),
                         [](const auto& p) {
                           return rt::str(std::get<0>(p.param), "x", std::get<1>(p.param), "x", std::get<2>(p.param), std::get<3>(p.param) ? "_bt" : "");
                         });

// Head dims 32 and 128: on sm_90a the first keeps mma.sync (V's 64-byte rows), the second runs both
// gemms on wgmma with 256-byte rows cut into 128-byte swizzle panels, P V reading P from registers.
// The fourth parameter is the loop's warp_specialize, as for BlockedGemm; the fifth
// pipelined_softmax (the FA3 schedule: the loop rotated, P V a step late); the last the tiling and
// P's form (AttentionForm). 200 keys: 4 steps of 64, the last ragged, so the rotated loop has a first
// step (no P V yet), steady steps and a last one (no S = Q K^T).
// kOddKeys: 128 x 80 tiles (P's 160-byte rows suit no swizzle, so on sm_90a P V runs on wgmma only
// from registers; 200 keys: steps of 80, 80 and 40).
enum class AttentionForm { kDefault, kWide, kStagedP, kOddKeys };  // 64 x 64 tiles; 128 x 128 on two warpgroups; P through shared memory
class FlashAttention : public ::testing::TestWithParam<std::tuple<DType, bool, int64_t, const char*, bool, AttentionForm>> {};

TEST_P(FlashAttention, MatchesReference) {
  auto [dtype, causal, d, ws, pipelined, form] = GetParam();
  // 8-bit: V transposed ([b, h, d, s]), O in bfloat16; 256 keys (V's rows of s bytes suit TMA).
  const bool eight_bit = rt::bits(dtype) == 8;
  const int64_t b = 1, h = 2, s = eight_bit ? 256 : 200;
  const bool two_warpgroups = form == AttentionForm::kWide || form == AttentionForm::kOddKeys;
  const char* tile_m = two_warpgroups ? "128" : "64";
  const char* tile_n = form == AttentionForm::kWide ? "128" : form == AttentionForm::kOddKeys ? "80" : "64";
  tilelang::CompileOptions o;
  o.target = tltest::test_target();
  o.params = {{"batch", "1"}, {"heads", "2"}, {"seq_len", std::to_string(s)}, {"dim", std::to_string(d)}, {"is_causal", causal ? "True" : "False"},
              {"dtype", rt::name(dtype)}, {"warp_specialize", ws}, {"pipelined_softmax", pipelined ? "True" : "False"},
              {"block_M", tile_m}, {"block_N", tile_n}, {"threads", two_warpgroups ? "256" : "128"}};
  o.wgmma_register_a = form != AttentionForm::kStagedP;
  tilelang::Kernel k = tilelang::Module::load(tltest::source_path("examples/flash_attention.py")).kernel("flash_attention", o);
  rt::Tensor q = random({b, s, h, d}, dtype), kk = random({b, s, h, d}, dtype);
  rt::Tensor v = eight_bit ? random({b, h, d, s}, dtype) : random({b, s, h, d}, dtype);
  std::vector<rt::Tensor> out;
  std::string too_big;
  if (!tltest::runs_unless_too_big_for_target([&] { out = run(k, {q, kk, v}, {{{b, s, h, d}, eight_bit ? DType::BF16 : dtype}}); }, &too_big))
    GTEST_SKIP() << too_big;
  std::vector<double> qv = f64(q), kv = f64(kk), vv = f64(v), ref(qv.size());
  auto at = [&](int64_t t, int64_t hh, int64_t x) { return (t * h + hh) * d + x; };
  auto v_at = [&](int64_t t, int64_t hh, int64_t x) { return eight_bit ? (hh * d + x) * s + t : at(t, hh, x); };
  for (int64_t hh = 0; hh < h; ++hh)
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> p(s, 0.0);
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < s; ++j) {
        if (causal && j > i) continue;
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += qv[at(i, hh, x)] * kv[at(j, hh, x)];
        p[j] = dot / std::sqrt(static_cast<double>(d));
        mx = std::max(mx, p[j]);
      }
      for (int64_t j = 0; j < s; ++j) {
        p[j] = (causal && j > i) ? 0.0 : std::exp(p[j] - mx);
        sum += p[j];
      }
      for (int64_t x = 0; x < d; ++x) {
        double o = 0;
        for (int64_t j = 0; j < s; ++j) o += p[j] * vv[v_at(j, hh, x)];
        ref[at(i, hh, x)] = o / sum;
      }
    }
  double err = testutil::rel_error(f64(out[0]), ref);
  // P is rounded to the input dtype before P*V, as on tensor cores (e4m3: a relative step of 2^-4).
  const double bound = dtype == DType::F32 ? 1e-5 : dtype == DType::F16 ? 3e-3 : dtype == DType::BF16 ? 2e-2 : 4e-2;
  EXPECT_LT(err, bound) << "flash attention, causal=" << causal << ", pipelined_softmax=" << pipelined;
}

std::string attention_name(const ::testing::TestParamInfo<std::tuple<DType, bool, int64_t, const char*, bool, AttentionForm>>& p) {
  const AttentionForm form = std::get<5>(p.param);
  return rt::str(rt::name(std::get<0>(p.param)), std::get<1>(p.param) ? "_causal" : "_full", "_d", std::get<2>(p.param),
                 std::get<4>(p.param) ? "_pipelined_softmax" : "",
                 form == AttentionForm::kWide       ? "_128x128"
                 : form == AttentionForm::kStagedP  ? "_staged_p"
                 : form == AttentionForm::kOddKeys ? "_128x80"
                                                    : "");
}

INSTANTIATE_TEST_SUITE_P(Variants, FlashAttention,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16), ::testing::Bool(), ::testing::Values(32, 128),
                                            ::testing::Values("None"), ::testing::Bool(), ::testing::Values(AttentionForm::kDefault)),
                         attention_name);

// float8_e4m3 Q, K, V and P: on sm_90a Q K^T and P V on wgmma's k32 forms, P V reading P from
// registers (reordered into the 8-bit A fragment), V transposed through TMA.
INSTANTIATE_TEST_SUITE_P(Types, FlashAttention,
                         ::testing::Combine(::testing::Values(DType::F8E4M3), ::testing::Bool(), ::testing::Values(128), ::testing::Values("None"),
                                            ::testing::Bool(), ::testing::Values(AttentionForm::kDefault, AttentionForm::kWide)),
                         attention_name);

INSTANTIATE_TEST_SUITE_P(NotWarpSpecialized, FlashAttention,
                         ::testing::Combine(::testing::Values(DType::BF16), ::testing::Bool(), ::testing::Values(128), ::testing::Values("False"),
                                            ::testing::Bool(), ::testing::Values(AttentionForm::kDefault)),
                         attention_name);

// 128-query tiles on two consumer warpgroups (each reads its own rows of P from registers), P
// staged through a shared tile (wgmma_register_a = false, the form before P in registers), and
// 80-key tiles.
INSTANTIATE_TEST_SUITE_P(Forms, FlashAttention,
                         ::testing::Combine(::testing::Values(DType::BF16), ::testing::Bool(), ::testing::Values(128), ::testing::Values("None"),
                                            ::testing::Bool(), ::testing::Values(AttentionForm::kWide, AttentionForm::kStagedP, AttentionForm::kOddKeys)),
                         attention_name);

// Two gemms chained through a 16- or 8-bit fragment (tests/tilelang/programs/gemm_register_a.py): on
// sm_90a the second reads it from registers (M = 64: one warpgroup, 128: two), or from a shared tile
// when transposed; `twice`, a third gemm reads it beside the second (both in flight at once);
// `threads` other than 0 (the default, a warpgroup per 64 rows): 128 with M = 128, two 64-row
// tiles of P in one warpgroup; `width` P's columns (80: no swizzle fits its rows, so wgmma reads it
// only from registers); `p_corner` an extra read of P that keeps it out of registers (at width 80
// the kernel then runs on mma.sync). 8-bit dtypes: C is [64, width] (K-major), integers accumulate
// in int32 and are drawn small enough that S fits the 8-bit type (P = S exactly).
struct RegisterACase {
  DType dtype;
  int64_t m;
  bool trans_a, twice;
  int64_t threads, width;
  bool p_corner;
};
class RegisterA : public ::testing::TestWithParam<RegisterACase> {};

TEST_P(RegisterA, MatchesReference) {
  const auto [dtype, m, trans_a, twice, threads, w, p_corner] = GetParam();
  std::map<std::string, std::string> params{{"M", std::to_string(m)},         {"trans_a", trans_a ? "True" : "False"},
                                            {"dtype", rt::name(dtype)},        {"twice", twice ? "True" : "False"},
                                            {"width", std::to_string(w)},      {"p_corner", p_corner ? "True" : "False"}};
  if (threads > 0) params["threads"] = std::to_string(threads);
  tilelang::Kernel k = tltest::load("tests/tilelang/programs/gemm_register_a.py", "chain", params);
  const bool eight_bit = rt::bits(dtype) == 8, integer = dtype == DType::I8 || dtype == DType::U8;
  // Integers: |S| <= 64 (A in {-1, 0, 1} or {0, 1}, B in {0, 1}) fits the 8-bit type; C in [-8, 8) or [0, 8).
  const double lo = dtype == DType::I8 ? -1 : 0;
  rt::Tensor a = integer ? random({m, 64}, dtype, lo, 2) : random({m, 64}, dtype);
  rt::Tensor bb = integer ? random({w, 64}, dtype, 0, 2) : random({w, 64}, dtype);
  rt::Tensor c = integer ? random({64, w}, dtype, 8 * lo, 8) : eight_bit ? random({64, w}, dtype) : random({w, 64}, dtype);
  const std::vector<double> x = f64(a), y = f64(bb), z = f64(c);
  // C's element (q, j) of the product op(P) C: [K, N] for 16-bit dtypes, [N, K] (K-major) for 8-bit.
  auto cz = [&](int64_t q, int64_t j) { return eight_bit ? z[j * w + q] : z[q * 64 + j]; };
  // S = A B^T, P rounded to the dtype as the kernel rounds it (through a tensor of that dtype).
  std::vector<double> p(static_cast<size_t>(m * w), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < w; ++j)
      for (int64_t q = 0; q < 64; ++q) p[i * w + j] += x[i * 64 + q] * y[j * 64 + q];
  rt::Tensor pt = rt::Tensor::empty({m, w}, dtype, rt::Device::cpu());
  testutil::from_f64(pt, p);
  p = f64(pt);
  // O = op(P) C (+ op(P) C^T with twice, where C is square); trans_a needs M == width.
  std::vector<double> ref(static_cast<size_t>(m * 64), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < 64; ++j)
      for (int64_t q = 0; q < w; ++q)
        ref[i * 64 + j] += (trans_a ? p[q * w + i] : p[i * w + q]) * (cz(q, j) + (twice ? z[j * 64 + q] : 0.0));
  if (p_corner)
    for (int64_t i = 0; i < m; ++i) ref[i * 64] += p[i * w];
  auto out = run(k, {a, bb, c}, {{{m, 64}, integer ? DType::I32 : DType::F32}});
  const std::string what = rt::str("chained gemm ", rt::name(dtype), " M=", m, " trans_a=", trans_a, " twice=", twice, " threads=", threads,
                                    " width=", w, " p_corner=", p_corner);
  if (integer) {  // exact
    const std::vector<double> got = f64(out[0]);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], ref[i]) << what << ", element " << i;
    return;
  }
  // S in float32 may round to P one unit apart from the float64 S: a few elements of 2^-8. float8:
  // wgmma's FP8 sums keep fewer bits than FP32 (DeepGEMM's reason to promote them), so about one
  // element in a thousand lands on the other side of a rounding step of P (2^-3 or 2^-4 of it), each
  // moving O's norm by ~1e-3 (measured 1.1e-3 - 4.2e-3 on the H200); a misplaced element of P would
  // move it by ~1.
  EXPECT_LT(testutil::rel_error(f64(out[0]), ref), eight_bit ? 2e-2 : 1e-3) << what;
}

INSTANTIATE_TEST_SUITE_P(Layouts, RegisterA,
                         ::testing::Values(RegisterACase{DType::BF16, 64, false, false, 0, 64, false},
                                           RegisterACase{DType::F16, 128, false, false, 0, 64, false},
                                           RegisterACase{DType::BF16, 64, true, false, 0, 64, false},
                                           RegisterACase{DType::BF16, 128, false, true, 0, 64, false},
                                           RegisterACase{DType::BF16, 128, false, false, 128, 64, false},
                                           RegisterACase{DType::BF16, 128, false, false, 0, 80, false},
                                           RegisterACase{DType::BF16, 128, false, false, 0, 80, true},
                                           RegisterACase{DType::F8E4M3, 64, false, false, 0, 64, false},
                                           RegisterACase{DType::F8E5M2, 128, false, false, 0, 128, false},
                                           RegisterACase{DType::F8E4M3, 128, false, false, 128, 96, false},
                                           RegisterACase{DType::I8, 128, false, false, 0, 64, false},
                                           RegisterACase{DType::U8, 64, false, false, 0, 128, false},
                                           RegisterACase{DType::F8E4M3, 64, false, false, 0, 64, true}),
                         [](const auto& p) {
                           const RegisterACase& c = p.param;
                           return rt::str(rt::name(c.dtype), "_M", c.m, c.trans_a ? "_At" : "_A", c.twice ? "_twice" : "",
                                          c.threads > 0 ? rt::str("_t", c.threads) : std::string(),
                                          c.width != 64 ? rt::str("_w", c.width) : std::string(), c.p_corner ? "_corner" : "");
                         });

// scripts/gpu_check.sh runs this file's tests on the GPU through a filter of suite names: every
// suite here must be in it, or a new one would never run on a GPU and nobody would notice.
TEST(GpuCheck, ProgramFilterNamesEverySuiteOfThisFile) {
  const std::string script = tltest::read_source("scripts/gpu_check.sh");
  std::smatch found;
  ASSERT_TRUE(std::regex_search(script, found, std::regex("programs='([^']*)'"))) << "no programs='...' filter in scripts/gpu_check.sh";
  const std::string filter = ":" + found[1].str() + ":";
  const std::string self = tltest::read_source("tests/tilelang/programs_test.cc");
  const std::regex suite(R"(\n(TEST|INSTANTIATE_TEST_SUITE_P)\((\w+),)");
  int suites = 0;
  for (auto it = std::sregex_iterator(self.begin(), self.end(), suite); it != std::sregex_iterator(); ++it, ++suites) {
    const std::string name = (*it)[2].str();
    if (name == "GpuCheck") continue;
    const std::string pattern = (*it)[1].str() == "TEST" ? name + ".*" : name + "/*";
    EXPECT_NE(filter.find(":" + pattern + ":"), std::string::npos) << pattern << " is missing from the programs filter of scripts/gpu_check.sh";
  }
  EXPECT_GT(suites, 10);
}

}  // namespace
