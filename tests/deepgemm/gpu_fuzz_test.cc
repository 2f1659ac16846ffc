// A randomized differential test of DeepGEMM's GPU path against its CPU path: every public GEMM
// call on random shapes (awkward ones: M = 1, ragged N, partial last K blocks, empty and uneven
// groups, padding rows and padding-only blocks, masked counts of 0 and max_M), storage layouts
// (padded row strides, MN-major operands), scale forms (float32 / UE8M0, K-major / TMA-aligned
// MN-major / tight MN-major), both outputs, C separate and in place, and for a fraction of the cases
// a forced GPU configuration (DG_GPU_CONFIG from a small per-seed pool of tilings the kernel rules
// accept, DG_GPU_FP4, DG_GPU_SPLIT_K, DG_GPU_ROUND_SYNC, set_num_sms). Both paths get the same
// quantized inputs, so their results may differ only by float32 rounding and the tensor cores'
// accumulation: each GPU result is checked against the CPU's element by element (a bound from
// sum |a b|, which the CPU path computes by the same call on the inputs' absolute values), by
// DeepGEMM's calc_diff per 64 x 64 tile and overall (1e-3 with FP8/FP4 inputs, 1e-5 with BF16), for
// non-finite values, and for memory the call must not write (D's row padding, guard rows around D,
// gaps between groups, rows of masked groups past their count) keeping its bytes.
//
// A plan starts with directed cases (each call once with no knobs; then one case per kernel feature
// -- TMA-store and whole-slice epilogues, ring rounds, folded FP4 scales, both FP4 kernels (the
// registers one k-interleaved too), dual-B, one- and three-consumer tiles, 256-row tiles, multicast,
// split-K, round sync -- and
// per input property), then random cases. Each new kernel configuration costs an NVRTC compile (and
// the driver's) of 1-3 s on its first use, so the generator predicts each case's configuration (by
// the library's plan_sm90, src/plan.h, which gpu.cc launches) and redraws random cases that would
// take the run past DG_FUZZ_MAX_KERNELS distinct ones.
//
// Deterministic: DG_FUZZ_SEED (default kDefaultSeed), DG_FUZZ_CASES (default kDefaultCases),
// DG_FUZZ_MAX_KERNELS (default kDefaultMaxKernels), DG_FUZZ_CASE=i to run case i alone (the same
// case for the same seed and budget), DG_FUZZ_TIME_LIMIT_S (stop taking new cases after this many
// seconds; default 80, 0 for no limit). A failure prints the case's full description (call,
// shapes, strides, dtypes, scale forms, knobs) and the line that replays it.
//
//   build/tests/deepgemm_tests --gtest_filter='GpuFuzz*'
//
// GpuFuzz.* skip without a Hopper GPU; GpuFuzzGenerator.* run everywhere: they draw the plan and
// other seeds' and run small cases of every call through the CPU path (which validates them as the
// GPU path would) against the float64 reference of the de-quantized inputs, and check that the
// comparison catches wrong, non-finite and stray outputs, so CI exercises the generator and the
// checks. GpuFuzzGenerator.HostTimeOfTheRun (DG_FUZZ_HOST_TIME=1) times the GPU run's host share.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "deepgemm/deepgemm.h"
#include "dg_test_util.h"
#include "h200.h"
#include "heuristics.h"
#include "plan.h"
#include "rt/cuda_device.h"
#include "rt/error.h"
#include "rt/tensor.h"

namespace {

using rt::DType;

constexpr uint64_t kDefaultSeed = 20261201;
constexpr int kDefaultCases = 240;
constexpr int kDefaultMaxKernels = 40;
using dgtest::kH200Sms;

int64_t env_i64(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 0) : fallback;
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

// ------------------------------------------------------------------------------------------------
// Cases.

enum class Api {
  Fp8Nt, Fp8Nn, Fp8Tn, Fp8Tt, Bf16Nt, Bf16Nn, Bf16Tn, Bf16Tt, Fp4Nt,
  ContFp8, MaskFp8, ContFp4, MaskFp4, ContBf16, MaskBf16, KGrouped, Count
};
const char* api_name(Api a) {
  static const char* names[] = {"fp8_gemm_nt", "fp8_gemm_nn", "fp8_gemm_tn", "fp8_gemm_tt", "bf16_gemm_nt",
                                "bf16_gemm_nn", "bf16_gemm_tn", "bf16_gemm_tt", "fp8_fp4_gemm_nt",
                                "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked",
                                "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nt_masked",
                                "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nt_masked",
                                "k_grouped_fp8_gemm_tn_contiguous"};
  return names[int(a)];
}
enum class Kind { Fp8, Fp4, Bf16 };
enum class Group { None, Cont, Mask, K };
Kind kind_of(Api a) {
  switch (a) {
    case Api::Bf16Nt: case Api::Bf16Nn: case Api::Bf16Tn: case Api::Bf16Tt: case Api::ContBf16: case Api::MaskBf16:
      return Kind::Bf16;
    case Api::Fp4Nt: case Api::ContFp4: case Api::MaskFp4:
      return Kind::Fp4;
    default:
      return Kind::Fp8;
  }
}
Group group_of(Api a) {
  switch (a) {
    case Api::ContFp8: case Api::ContFp4: case Api::ContBf16: return Group::Cont;
    case Api::MaskFp8: case Api::MaskFp4: case Api::MaskBf16: return Group::Mask;
    case Api::KGrouped: return Group::K;
    default: return Group::None;
  }
}
// A stored [K, M] (M-major) and B stored [K, N] (N-major).
bool a_mn_major(Api a) { return a == Api::Fp8Tn || a == Api::Fp8Tt || a == Api::Bf16Tn || a == Api::Bf16Tt || a == Api::KGrouped; }
bool b_mn_major(Api a) { return a == Api::Fp8Nn || a == Api::Fp8Tn || a == Api::Bf16Nn || a == Api::Bf16Tn || a == Api::KGrouped; }
bool takes_c(Api a) { return group_of(a) == Group::None || group_of(a) == Group::K; }

// How a scale tensor is stored: row-major in its logical [MN, K/gran] shape, the TMA-aligned
// MN-major form (get_mn_major_tma_aligned_tensor), or MN-major without padding.
enum class SfForm { KMajor, MnAligned, MnTight };
const char* sf_form_name(SfForm f) { return f == SfForm::KMajor ? "k-major" : f == SfForm::MnAligned ? "mn-major-tma-aligned" : "mn-major-tight"; }
// Whether a tight MN-major form of per-row scales keeps TMA's 16-byte leading stride.
bool tight_ok(int64_t mn, DType dtype, bool per_row) { return !per_row || (mn * (rt::bits(dtype) / 8)) % 16 == 0; }

struct Case {
  int index = 0;
  uint64_t seed = 0;  // the inputs' values
  Api api = Api::Fp8Nt;
  // Plain: D [m, n]; contiguous: m rows in all; masked: m = max_M per group; K-grouped: D [g, m, n].
  int64_t m = 1, n = 16, k = 128, g = 1;
  std::vector<int32_t> m_indices;  // contiguous
  std::vector<int32_t> masked;     // masked
  int64_t expected_m = 0;
  std::vector<int64_t> ks;         // K-grouped
  bool out_f32 = false;
  int c_mode = 0;  // 0: no C, 1: a separate C, 2: in place (c is d)
  int64_t a_pad = 0, b_pad = 0;  // extra 16-byte units in the operands' row strides
  int64_t d_pad = 0, d_lead = 0, d_gap = 0, d_trail = 0;  // D: extra 16-byte units a row; guard rows before, between groups, after
  bool ue8m0_values = false;  // power-of-two scales
  DType sfa_dtype = DType::F32, sfb_dtype = DType::F32;
  SfForm sfa_form = SfForm::KMajor, sfb_form = SfForm::KMajor;
  int fp4_gran = 128;
  std::string config, fp4, split_k, round_sync;  // DG_GPU_CONFIG, DG_GPU_FP4, DG_GPU_SPLIT_K, DG_GPU_ROUND_SYNC ("": unset)
  int num_sms = 0;  // set_num_sms for the GPU call (0: the device's)
  bool medium = false;

  Kind kind() const { return kind_of(api); }
  Group group() const { return group_of(api); }
  int64_t rows_a() const { return group() == Group::Mask ? g * m : m; }  // rows of the (flattened) A
  int64_t d_groups() const { return group() == Group::Mask || group() == Group::K ? g : 1; }
  bool knobs() const { return !config.empty() || !fp4.empty() || !split_k.empty() || !round_sync.empty(); }
  double flops() const {
    if (group() == Group::K) return 2.0 * double(m) * double(n) * double(k);
    return 2.0 * double(rows_a()) * double(n) * double(k);
  }
  std::string describe() const;
};

template <class T>
std::string list_str(const std::vector<T>& v, size_t max_items = 64) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size() && i < max_items; ++i) o << (i ? "," : "") << v[i];
  if (v.size() > max_items) o << ",... (" << v.size() << ")";
  o << "]";
  return o.str();
}

// m_indices as runs: "g x count" for each run of equal values.
std::string runs_str(const std::vector<int32_t>& idx) {
  std::ostringstream o;
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j < idx.size() && idx[j] == idx[i]) ++j;
    o << (i ? " " : "") << idx[i] << "x" << (j - i);
    i = j;
  }
  return o.str();
}

std::string Case::describe() const {
  std::ostringstream o;
  o << "case " << index << ": " << api_name(api) << " M=" << m << " N=" << n << " K=" << k;
  if (group() != Group::None) o << " G=" << g;
  if (group() == Group::Cont) o << " m_indices(runs)=[" << runs_str(m_indices) << "]";
  if (group() == Group::Mask) o << " masked_m=" << list_str(masked) << " expected_m=" << expected_m;
  if (group() == Group::K) o << " ks=" << list_str(ks);
  o << " d=" << (out_f32 ? "f32" : "bf16") << (c_mode == 1 ? " +c" : c_mode == 2 ? " +c(in place)" : "");
  o << " a_pad=" << a_pad << "x16B b_pad=" << b_pad << "x16B d_pad=" << d_pad << "x16B d_guard(lead/gap/trail rows)="
    << d_lead << "/" << d_gap << "/" << d_trail;
  if (kind() != Kind::Bf16) {
    o << " scales=" << (ue8m0_values ? "pow2" : "any") << " a_scales=" << rt::name(sfa_dtype) << "/"
      << sf_form_name(sfa_form) << " b_scales=" << rt::name(sfb_dtype) << "/" << sf_form_name(sfb_form);
    if (kind() == Kind::Fp4) o << " fp4_gran=" << fp4_gran;
  }
  o << " DG_GPU_CONFIG=" << (config.empty() ? "(unset)" : config) << " DG_GPU_FP4=" << (fp4.empty() ? "(unset)" : fp4)
    << " DG_GPU_SPLIT_K=" << (split_k.empty() ? "(unset)" : split_k)
    << " DG_GPU_ROUND_SYNC=" << (round_sync.empty() ? "(unset)" : round_sync) << " num_sms=" << (num_sms ? std::to_string(num_sms) : "device")
    << " seed=" << seed;
  return o.str();
}

// ------------------------------------------------------------------------------------------------
// The GPU configuration a case should get (the library's plan_sm90, as gpu.cc calls it), for the
// kernel budget and the estimate of distinct kernels; the GPU run records the real ones.

struct Tiling {
  int bm = 128, bn = 128, stages = 4, multicast = 0, consumers = 0;
  std::string str() const {
    std::string s = rt::str(bm, "x", bn, "x", stages);
    if (multicast) s += rt::str("x", multicast);
    if (consumers) s += rt::str("c", consumers);
    return s;
  }
};

// What gpu.cc would give plan_sm90 for each launch of the case (the K-grouped GEMM: one a group) on
// an H200 with `sms` SMs.
std::vector<deepgemm::detail::Sm90Facts> launches_of(const Case& c, int sms) {
  using deepgemm::detail::Grouping;
  deepgemm::detail::Sm90Facts f;
  f.function = api_name(c.api);
  f.fp8 = c.kind() != Kind::Bf16;
  f.sfb_per_row = c.kind() == Kind::Fp4 || c.group() == Group::K;
  f.sfb_ue8m0 = c.sfb_dtype == DType::UE8M0;
  f.promotion_k = c.kind() == Kind::Fp4 ? c.fp4_gran : 128;
  f.grouping = c.group() == Group::Cont ? Grouping::MContiguous : c.group() == Group::Mask ? Grouping::MMasked
                                                                                          : Grouping::None;
  f.m = c.m;
  f.n = c.n;
  f.expected_m = c.expected_m;
  f.groups_a = c.group() == Group::Mask ? c.g : 1;
  f.a_bits = f.fp8 ? 8 : 16;
  f.b_bits = c.kind() == Kind::Fp4 ? 4 : f.fp8 ? 8 : 16;
  f.out = c.out_f32 ? DType::F32 : DType::BF16;
  f.has_c = c.c_mode != 0;
  f.d_aligned16 = true;  // D's rows and groups start 16-byte aligned by construction (make_inputs)
  dgtest::on_h200(f, sms);
  f.knobs.config = c.config;
  if (!c.fp4.empty()) f.knobs.fp4 = c.fp4;
  if (!c.split_k.empty()) f.knobs.split_k = std::atoll(c.split_k.c_str());
  if (!c.round_sync.empty()) f.knobs.round_sync = std::atoll(c.round_sync.c_str());
  std::vector<deepgemm::detail::Sm90Facts> out;
  for (int64_t k : c.group() == Group::K ? c.ks : std::vector<int64_t>{c.k}) {
    f.k = k;
    f.fp4_b = c.kind() == Kind::Fp4 && k > 0;  // (gpu.cc: with K = 0 nothing of B is read)
    out.push_back(f);
  }
  return out;
}

struct Fp4RegTile {
  int bm = 64, bn = 64;
  bool ki = false;
  std::string str() const { return rt::str("registers:", bm, "x", bn, ki ? "i" : ""); }
};

// The predicted kernel keys of a case's launches; empty with `rejected` where a knob is refused.
// Kernel features a launch of the case uses (for the directed cases at the start of a plan).
enum Feature : uint32_t {
  kTmaStoreFp8 = 1u << 0, kWholeSlice = 1u << 1, kRingRounds = 1u << 2, kFolded = 1u << 3, kFp4Shared = 1u << 4,
  kFp4RegInterleaved = 1u << 5, kFp4Reg128 = 1u << 6, kDualB = 1u << 7, kOneConsumer64 = 1u << 8,
  kThreeConsumers = 1u << 9, kBlockM256 = 1u << 10, kMulticast = 1u << 11, kSplitK = 1u << 12,
  kRoundSync = 1u << 13, kTmaStoreBf16 = 1u << 14,
};
struct Prediction {
  bool rejected = false;
  uint32_t features = 0;
  std::vector<std::string> keys;
  std::string first;  // the last launch's block shape, "BMxBNxS" (for the notes on mismatches)
};

std::optional<Tiling> parse_tiling(const std::string& text) {
  Tiling t;
  int used = 0;
  if (std::sscanf(text.c_str(), "%dx%dx%d%n", &t.bm, &t.bn, &t.stages, &used) != 3) return std::nullopt;
  const char* rest = text.c_str() + used;
  if (*rest == 'x') {
    t.multicast = std::atoi(rest + 1);
    ++rest;
    while (*rest >= '0' && *rest <= '9') ++rest;
  }
  if (*rest == 'c') t.consumers = std::atoi(rest + 1);
  return t;
}

Prediction predict(const Case& c, int sms) {
  using namespace deepgemm::detail;
  Prediction p;
  for (const Sm90Facts& s : launches_of(c, sms)) {
    Sm90Plan plan;
    try {
      plan = plan_sm90(s);
    } catch (const rt::Error& e) {
      if (e.kind() != rt::ErrorKind::User) throw;
      p.rejected = true;
      return p;
    }
    const GpuBlocking& blk = plan.blocking;
    const bool fp4_registers = plan.fp4_registers;
    const int grouping = s.grouping == Grouping::MContiguous ? 1 : s.grouping == Grouping::MMasked ? 2 : 0;
    uint32_t& f = p.features;
    if (blk.tma_store && s.fp8 && !blk.epilogue_whole_slice) f |= kTmaStoreFp8;
    if (blk.tma_store && !s.fp8) f |= kTmaStoreBf16;
    if (blk.epilogue_whole_slice) f |= kWholeSlice;
    if (plan.ring_rounds) f |= kRingRounds;
    if (plan.fold_scales) f |= kFolded;
    if (s.fp4_b && !fp4_registers) f |= kFp4Shared;
    if (fp4_registers && blk.k_interleave) f |= kFp4RegInterleaved;
    if (fp4_registers && blk.block_n == 128) f |= kFp4Reg128;
    if (!fp4_registers && blk.dual_b) f |= kDualB;
    if (!fp4_registers && blk.block_m == 64 && s.fp8 && s.sfb_rows() == 0) f |= kOneConsumer64;
    if (!fp4_registers && blk.block_m == 192) f |= kThreeConsumers;
    if (!fp4_registers && blk.block_m == 256) f |= kBlockM256;
    if (blk.multicast == 2) f |= kMulticast;
    if (blk.splits > 1) f |= kSplitK;
    if (plan.round_sync) f |= kRoundSync;
    const std::string key =
        fp4_registers
            ? rt::str("fp4reg|", rt::name(s.out), "|", blk.block_m, "x", blk.block_n, "x", blk.stages, "|g", grouping,
                      "|c", c.c_mode != 0, "|p", s.promotion_k, "|i", blk.k_interleave)
            : rt::str(s.fp8 ? "fp8|" : "bf16|", rt::name(s.out), "|", blk.block_m, "x", blk.block_n, "x", blk.stages, "|g",
                      grouping, "|c", c.c_mode != 0, "|t", blk.tma_store, "|e", blk.epilogue_buffers,
                      blk.epilogue_whole_slice, "|f", s.fp4_b, plan.fold_scales, "|r", s.sfb_per_row, "|p",
                      s.promotion_k, "|m", blk.multicast, "|o", plan.ring_rounds);
    p.first = rt::str(blk.block_m, "x", blk.block_n, "x", blk.stages);  // the last launch's (last_config's)
    p.keys.push_back(key);
  }
  return p;
}

// ------------------------------------------------------------------------------------------------
// The generator.

struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  int64_t uni(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); }  // [lo, hi]
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(gen) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[size_t(uni(0, int64_t(v.size()) - 1))]; }
};

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The forced configurations a run draws from (a few, so that the distinct kernels stay few).
struct Pools {
  std::vector<Tiling> tilings;
  std::vector<Fp4RegTile> fp4_tiles;
};

Pools make_pools(uint64_t seed) {
  Rng r(mix(seed ^ 0x51CEull));
  Pools p;
  // Always some of each family: 64-row tiles (one consumer; without and with c1), 128, 192 (FP8
  // only), 256, and a multicast one; then random ones.
  p.tilings.push_back({64, int(16 * r.uni(2, 8)), int(r.uni(3, 8)), 0, 0});
  p.tilings.push_back({64, int(16 * r.uni(1, 8)), int(r.uni(2, 8)), 0, 1});
  p.tilings.push_back({128, int(16 * r.uni(4, 12)), int(r.uni(2, 5)), 0, 0});
  p.tilings.push_back({192, int(16 * r.uni(4, 8)), int(r.uni(2, 4)), 0, 0});
  p.tilings.push_back({256, int(16 * r.uni(4, 8)), int(r.uni(2, 3)), 0, 0});
  p.tilings.push_back({int(r.chance(0.5) ? 128 : 64), int(16 * r.uni(4, 8)), int(r.uni(3, 5)), 2, 0});
  while (p.tilings.size() < 10) {
    Tiling t;
    t.bm = int(r.pick(std::vector<int64_t>{64, 128, 128, 256}));
    t.bn = int(16 * r.uni(1, t.bm == 256 ? 8 : 12));
    t.stages = int(r.uni(2, t.bm == 64 ? 10 : 5));
    if (t.bm == 64 && r.chance(0.3)) t.consumers = 1;  // c1: accepted, what 64-row tiles run on anyway
    p.tilings.push_back(t);
  }
  for (int i = 0; i < 4; ++i) {
    Fp4RegTile t;
    t.bn = r.chance(0.5) ? 64 : 128;
    t.ki = t.bn == 64 && r.chance(0.4);
    t.bm = int(r.pick(std::vector<int64_t>{16, 32, 48, 64, 80, 96, 112, 128}));
    p.fp4_tiles.push_back(t);
  }
  return p;
}

// K for a kind: whole 16-byte units (FP8 16, FP4 32, BF16 8), often a multiple of 128, sometimes
// with a partial last block.
int64_t draw_k(Rng& r, Kind kind, bool medium) {
  const int64_t unit = kind == Kind::Fp4 ? 32 : kind == Kind::Fp8 ? 16 : 8;
  if (medium) return r.chance(0.7) ? 128 * r.uni(4, 16) : unit * r.uni(512 / unit, 2048 / unit);
  if (r.chance(0.65)) return 128 * r.uni(1, r.chance(0.1) ? 16 : 8);
  return unit * r.uni(1, 1024 / unit);
}

int64_t draw_n(Rng& r, bool medium) {
  if (medium) return 16 * r.uni(32, 192);
  if (r.chance(0.7)) return 16 * r.uni(1, 48);
  return r.uni(1, 600);
}

int64_t draw_m(Rng& r) {
  const double u = std::uniform_real_distribution<double>(0, 1)(r.gen);
  if (u < 0.1) return r.uni(1, 4);
  if (u < 0.85) return r.uni(1, 300);
  return r.uni(300, 700);
}

// One case, drawn from rng (shapes, layouts, knobs).
Case draw_case(Rng& r, const Pools& pools, int index, uint64_t value_seed) {
  Case c;
  c.index = index;
  c.seed = value_seed;
  // The calls, weighted: the plain FP8 GEMM and the grouped ones most.
  static const std::vector<std::pair<Api, int>> weights = {
      {Api::Fp8Nt, 14}, {Api::Fp8Nn, 4}, {Api::Fp8Tn, 4}, {Api::Fp8Tt, 4}, {Api::Bf16Nt, 6}, {Api::Bf16Nn, 3},
      {Api::Bf16Tn, 3}, {Api::Bf16Tt, 3}, {Api::Fp4Nt, 12}, {Api::ContFp8, 9}, {Api::MaskFp8, 8}, {Api::ContFp4, 8},
      {Api::MaskFp4, 7}, {Api::ContBf16, 5}, {Api::MaskBf16, 5}, {Api::KGrouped, 7}};
  int total = 0;
  for (auto& w : weights) total += w.second;
  int64_t x = r.uni(0, total - 1);
  for (auto& w : weights) {
    if (x < w.second) {
      c.api = w.first;
      break;
    }
    x -= w.second;
  }
  const Kind kind = c.kind();
  const Group group = c.group();
  c.medium = (group == Group::None || group == Group::Cont) && r.chance(0.04);
  c.n = draw_n(r, c.medium);
  c.k = draw_k(r, kind, c.medium);
  c.out_f32 = r.chance(0.4);
  switch (group) {
    case Group::None:
      c.m = c.medium ? r.uni(1000, 5000) : draw_m(r);
      break;
    case Group::Cont: {
      c.g = r.uni(1, c.medium ? 6 : 5);
      std::vector<int64_t> order(size_t(c.g));
      for (int64_t i = 0; i < c.g; ++i) order[size_t(i)] = i;
      std::shuffle(order.begin(), order.end(), r.gen);
      for (size_t i = 0; i < order.size(); ++i) {
        if (r.chance(0.08)) c.m_indices.insert(c.m_indices.end(), 128, -1);  // a block of padding only
        const double u = std::uniform_real_distribution<double>(0, 1)(r.gen);
        const int64_t rows = u < 0.15 ? 0 : u < 0.25 ? 128 * r.uni(1, 2) : c.medium ? r.uni(1, 700) : r.uni(1, 300);
        c.m_indices.insert(c.m_indices.end(), size_t(rows), int32_t(order[i]));
        const bool last = i + 1 == order.size();
        int64_t pad = round_up(rows, 128) - rows;
        if (last && r.chance(0.4)) pad = r.uni(0, pad);  // the last segment may end early (M not a multiple of 128)
        c.m_indices.insert(c.m_indices.end(), size_t(pad), -1);
      }
      if (c.m_indices.empty()) c.m_indices.push_back(0);
      c.m = int64_t(c.m_indices.size());
      break;
    }
    case Group::Mask: {
      c.g = r.uni(1, 6);
      c.m = r.chance(0.15) ? r.uni(1, 16) : r.uni(1, 320);
      for (int64_t i = 0; i < c.g; ++i) {
        const double u = std::uniform_real_distribution<double>(0, 1)(r.gen);
        c.masked.push_back(int32_t(u < 0.2 ? 0 : u < 0.4 ? c.m : r.uni(0, c.m)));
      }
      c.expected_m = r.uni(1, c.m + c.m / 2 + 1);
      break;
    }
    case Group::K: {
      c.g = r.uni(1, 5);
      c.m = r.chance(0.7) ? 16 * r.uni(1, 20) : r.uni(1, 300);
      int64_t sum = 0;
      for (int64_t i = 0; i < c.g; ++i) {
        c.ks.push_back(r.chance(0.2) ? 0 : 128 * r.uni(1, 6));
        sum += c.ks.back();
      }
      if (sum == 0) c.ks[0] = 128, sum = 128;
      c.k = sum;
      c.out_f32 = true;
      break;
    }
  }
  if (takes_c(c.api) && (c.out_f32 || group == Group::K)) {
    const double u = std::uniform_real_distribution<double>(0, 1)(r.gen);
    c.c_mode = u < 0.4 ? 0 : u < 0.7 ? 1 : 2;
    c.out_f32 = true;
  }
  // Layouts: padded rows for a fraction; D's guard rows and gaps always checked.
  c.a_pad = r.chance(0.25) ? r.uni(1, 3) : 0;
  c.b_pad = r.chance(0.25) ? r.uni(1, 3) : 0;
  c.d_pad = r.chance(0.3) ? r.uni(1, 2) : 0;
  c.d_lead = r.uni(0, 2);
  c.d_trail = r.uni(0, 3);
  c.d_gap = c.d_groups() > 1 ? r.uni(0, 2) : 0;
  // Scales.
  if (kind != Kind::Bf16) {
    c.ue8m0_values = kind == Kind::Fp4 ? r.chance(0.5) : r.chance(0.35);
    c.sfa_dtype = c.ue8m0_values && r.chance(0.6) ? DType::UE8M0 : DType::F32;
    c.sfb_dtype = c.ue8m0_values && r.chance(0.6) ? DType::UE8M0 : DType::F32;
    if (kind == Kind::Fp4) c.fp4_gran = r.chance(0.5) ? 32 : 128;
    const std::vector<SfForm> forms = {SfForm::KMajor, SfForm::MnAligned, SfForm::MnTight};
    c.sfa_form = r.pick(forms);
    c.sfb_form = r.pick(forms);
    // A tight MN-major form of per-row scales needs a 16-byte leading stride (MN elements).
    if (c.sfa_form == SfForm::MnTight && !tight_ok(c.m, c.sfa_dtype, true)) c.sfa_form = SfForm::MnAligned;
    const bool sfb_per_row = kind == Kind::Fp4 || group == Group::K;
    if (c.sfb_form == SfForm::MnTight && !tight_ok(c.n, c.sfb_dtype, sfb_per_row)) c.sfb_form = SfForm::MnAligned;
  }
  // Knobs.
  const bool fp4 = kind == Kind::Fp4;
  if (fp4 && r.chance(0.45)) {
    const double u = std::uniform_real_distribution<double>(0, 1)(r.gen);
    std::vector<Fp4RegTile> tiles;  // the pool's tiles this call takes
    for (const Fp4RegTile& t : pools.fp4_tiles)
      if (deepgemm::detail::fp4_register_tile_error(t.bm, t.bn, c.fp4_gran, group == Group::Cont, t.ki).empty())
        tiles.push_back(t);
    c.fp4 = u < 0.3 || (u >= 0.6 && tiles.empty()) ? "registers" : u < 0.6 ? "shared" : r.pick(tiles).str();
  }
  if (r.chance(0.3)) {
    // A tiling of the pool this call takes (the plan accepts it); none if none does.
    std::vector<Tiling> ok;
    for (const Tiling& t : pools.tilings) {
      Case forced = c;
      forced.config = t.str();
      if (!predict(forced, kH200Sms).rejected) ok.push_back(t);
    }
    if (!ok.empty()) c.config = r.pick(ok).str();
  }
  if (r.chance(0.08)) c.num_sms = int(r.pick(std::vector<int64_t>{8, 16, 33, 66}));
  if ((group == Group::None || group == Group::K) && r.chance(0.15)) {
    const int64_t block_k = kind == Kind::Bf16 ? 64 : 128;
    int64_t min_blocks = INT64_MAX;
    for (const auto& s : launches_of(c, kH200Sms)) min_blocks = std::min(min_blocks, ceil_div(s.k, block_k));
    const std::optional<Tiling> t = parse_tiling(c.config);
    const bool multicast = t && t->multicast == 2;
    if (r.chance(0.3) || min_blocks < 2 || multicast) {
      c.split_k = "1";
    } else {
      c.split_k = std::to_string(r.uni(2, std::min<int64_t>(min_blocks, 4)));
    }
  }
  if (group == Group::None && kind != Kind::Fp4 && r.chance(0.1)) {
    c.round_sync = r.pick(std::vector<std::string>{"0", "1", "2"});
    if (!c.num_sms && r.chance(0.7)) c.num_sms = int(r.pick(std::vector<int64_t>{8, 16}));
  }
  // Knobs the call cannot take (split-K where the FP4 registers kernel runs) dropped.
  if (predict(c, c.num_sms ? c.num_sms : kH200Sms).rejected && !c.split_k.empty()) c.split_k = "1";
  if (predict(c, c.num_sms ? c.num_sms : kH200Sms).rejected) c.config.clear();
  return c;
}

struct Plan {
  uint64_t seed = kDefaultSeed;
  std::vector<Case> cases;
  std::set<std::string> kernels;  // predicted distinct kernel configurations (H200)
  std::vector<std::string> missed;  // directed targets no draw hit
  int predicted_rejections = 0;
};

// The directed cases a plan starts with: one of each call with no knobs (the heuristic's choice),
// then one for each kernel feature and input property (random draws until one has it).
struct Target {
  const char* what;
  Api api = Api::Count;   // a case of this call with no knobs, or
  uint32_t feature = 0;   // one whose predicted configuration has this feature, or
  int property = 0;       // 1: K-grouped with an empty group, 2: masked counts 0 and max_M, 3: contiguous with a
                          // padding-only block and M not a multiple of 128, 4: medium, 5: M = 1, 6: N % 16 != 0
};
std::vector<Target> targets() {
  std::vector<Target> t;
  for (int a = 0; a < int(Api::Count); ++a) t.push_back({api_name(Api(a)), Api(a), 0, 0});
  const std::pair<const char*, uint32_t> features[] = {
      {"FP8 TMA-store epilogue", kTmaStoreFp8}, {"whole-slice epilogue", kWholeSlice}, {"ring rounds", kRingRounds},
      {"folded FP4 scales", kFolded}, {"FP4 shared-memory kernel", kFp4Shared},
      {"FP4 registers k-interleaved", kFp4RegInterleaved}, {"FP4 registers 128 rows of B", kFp4Reg128},
      {"contiguous 256-row dual-B tiles", kDualB},
      {"one-consumer 64-row FP8", kOneConsumer64}, {"three consumers (192 rows)", kThreeConsumers},
      {"256-row tiles", kBlockM256}, {"multicast", kMulticast}, {"split-K", kSplitK}, {"round sync", kRoundSync},
      {"BF16 TMA-store epilogue", kTmaStoreBf16}};
  for (const auto& [what, f] : features) t.push_back({what, Api::Count, f, 0});
  const char* props[] = {"K-grouped empty group", "masked counts 0 and max_M", "contiguous padding block, ragged M",
                         "medium shape", "M = 1", "N not a multiple of 16"};
  for (int i = 0; i < 6; ++i) t.push_back({props[i], Api::Count, 0, i + 1});
  return t;
}

bool hits(const Target& t, const Case& c, const Prediction& p) {
  if (p.rejected) return false;
  if (t.api != Api::Count) return c.api == t.api && !c.knobs() && c.num_sms == 0;
  if (t.feature) return (p.features & t.feature) != 0;
  switch (t.property) {
    case 1: return c.group() == Group::K && std::count(c.ks.begin(), c.ks.end(), 0) > 0;
    case 2: return c.group() == Group::Mask && c.g >= 2 && std::count(c.masked.begin(), c.masked.end(), 0) > 0 &&
                   std::count(c.masked.begin(), c.masked.end(), int32_t(c.m)) > 0;
    case 3: {
      if (c.group() != Group::Cont || c.m % 128 == 0) return false;
      for (size_t b = 0; b < c.m_indices.size(); b += 128)
        if (c.m_indices[b] == -1) return true;
      return false;
    }
    case 4: return c.medium;
    case 5: return c.m == 1 && c.group() == Group::None;
    case 6: return c.n % 16 != 0 && c.group() != Group::K;
  }
  return false;
}

// The run's cases: each drawn from its own stream. The directed ones first (drawn until they hit
// their target, up to 3000 times); then random ones, where a draw whose (predicted) kernels would
// take the run past max_kernels distinct ones is drawn again (up to 40 times), so that later cases
// reuse kernels.
Plan make_plan(uint64_t seed, int count, int max_kernels) {
  Plan plan;
  plan.seed = seed;
  const Pools pools = make_pools(seed);
  const std::vector<Target> directed = targets();
  for (int i = 0; i < count; ++i) {
    Case chosen;
    const Target* target = size_t(i) < directed.size() ? &directed[size_t(i)] : nullptr;
    for (int attempt = 0;; ++attempt) {
      Rng r(mix(seed * 0x100000001B3ull + uint64_t(i) * 7919 + uint64_t(attempt)));
      Case c = draw_case(r, pools, i, mix(seed ^ (uint64_t(i) << 20) ^ uint64_t(attempt)));
      const Prediction p = predict(c, c.num_sms ? c.num_sms : kH200Sms);
      int fresh = 0;
      for (const std::string& k : p.keys) fresh += plan.kernels.count(k) == 0;
      const bool ok = target ? hits(*target, c, p) || attempt >= 3000
                             : fresh == 0 || int(plan.kernels.size()) + fresh <= max_kernels || attempt >= 40;
      if (ok) {
        if (target && !hits(*target, c, p)) plan.missed.push_back(target->what);
        plan.kernels.insert(p.keys.begin(), p.keys.end());
        plan.predicted_rejections += p.rejected;
        chosen = c;
        break;
      }
    }
    plan.cases.push_back(chosen);
  }
  return plan;
}

Plan plan_from_env() {
  return make_plan(uint64_t(env_i64("DG_FUZZ_SEED", int64_t(kDefaultSeed))), int(env_i64("DG_FUZZ_CASES", kDefaultCases)),
                   int(env_i64("DG_FUZZ_MAX_KERNELS", kDefaultMaxKernels)));
}

// ------------------------------------------------------------------------------------------------
// Inputs: every tensor as bytes (a contiguous U8 storage) and a view into them, so that the same
// bytes, strides and offsets go to the GPU.

struct Buf {
  rt::Tensor bytes;  // U8, on the host
  int64_t offset = 0;  // bytes
  rt::Shape shape, strides;
  DType dtype = DType::U8;
  bool defined() const { return bytes.defined(); }
  rt::Tensor view(const rt::Tensor& storage) const {
    return rt::Tensor::wrap(static_cast<char*>(storage.data()) + offset, shape, dtype, storage.device(), strides,
                            storage.storage());
  }
  rt::Tensor host() const { return view(bytes); }
};

rt::Tensor byte_tensor(int64_t n, uint8_t fill) {
  rt::Tensor t = rt::Tensor::empty({std::max<int64_t>(round_up(n, 16), 16)}, DType::U8);
  std::memset(t.data(), fill, size_t(t.numel()));
  return t;
}

// The contiguous tensor src ([R, C] or [G, R, C]) stored with rows `ld` and groups `gs` elements
// apart (0: contiguous), the rest of the storage 0xFF (NaN in every float format).
Buf strided(const rt::Tensor& src, int64_t ld = 0, int64_t gs = 0) {
  const int64_t nd = src.dim();
  const int64_t groups = nd == 3 ? src.size(0) : 1, rows = src.size(nd - 2), cols = src.size(nd - 1);
  if (ld == 0) ld = cols;
  if (gs == 0) gs = rows * ld;
  const int bits = rt::bits(src.dtype());
  const int64_t elems = groups == 0 || rows == 0 ? 0 : (groups - 1) * gs + (rows - 1) * ld + cols;
  Buf b;
  b.bytes = byte_tensor((elems * bits + 7) / 8, 0xFF);
  b.dtype = src.dtype();
  b.shape = src.shape();
  b.strides = nd == 3 ? rt::Shape{gs, ld, 1} : rt::Shape{ld, 1};
  const char* s = static_cast<const char*>(src.data());
  char* d = static_cast<char*>(b.bytes.data());
  const int64_t row_bytes = cols * bits / 8;
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(d + (gi * gs + r * ld) * bits / 8, s + (gi * rows + r) * row_bytes, size_t(row_bytes));
  return b;
}

// A strided host view (byte-sized elements) copied with its strides.
Buf from_view(const rt::Tensor& v) {
  int64_t span = 1;
  for (int64_t i = 0; i < v.dim(); ++i) span += (v.size(i) - 1) * v.stride(i);
  const int64_t es = rt::bits(v.dtype()) / 8;
  Buf b;
  b.bytes = byte_tensor(span * es, 0);
  std::memcpy(b.bytes.data(), v.data(), size_t(span * es));
  b.dtype = v.dtype();
  b.shape = v.shape();
  b.strides = v.strides();
  return b;
}

// The same bytes seen with the last two dimensions swapped.
Buf swapped(Buf b) {
  const size_t nd = b.shape.size();
  std::swap(b.shape[nd - 1], b.shape[nd - 2]);
  std::swap(b.strides[nd - 1], b.strides[nd - 2]);
  return b;
}

// A copy of b's bytes with every element's sign cleared (for the |A| |B|^T bound); scales are
// positive already.
Buf abs_of(const Buf& b) {
  Buf r = b;
  r.bytes = byte_tensor(b.bytes.numel(), 0);
  std::memcpy(r.bytes.data(), b.bytes.data(), size_t(b.bytes.numel()));
  uint8_t* p = static_cast<uint8_t*>(r.bytes.data());
  const int64_t n = r.bytes.numel();
  if (b.dtype == DType::F8E4M3) {
    for (int64_t i = 0; i < n; ++i) p[i] &= 0x7F;
  } else if (b.dtype == DType::F4E2M1) {
    for (int64_t i = 0; i < n; ++i) p[i] &= 0x77;
  } else if (b.dtype == DType::BF16) {
    for (int64_t i = 1; i < n; i += 2) p[i] &= 0x7F;
  } else if (b.dtype == DType::F32) {
    for (int64_t i = 3; i < n; i += 4) p[i] &= 0x7F;
  }
  return r;
}

// The logical per-row or per-block scales S ([MN, KB] or [G, MN, KB], float32, contiguous) in the
// case's dtype and storage form, as the API takes them (transposed when the operand is MN-major).
Buf scales_as(const rt::Tensor& s_f32, DType dtype, SfForm form, bool api_transposed) {
  rt::Tensor s = s_f32;
  if (dtype == DType::UE8M0) {
    const rt::Tensor flat = dgtest::reshaped(s_f32, {s_f32.numel() / s_f32.size(-1), s_f32.size(-1)});
    s = dgtest::reshaped(deepgemm::cast_scales_to_ue8m0(flat), s_f32.shape());
  }
  Buf b;
  if (form == SfForm::KMajor) {
    b = strided(s);
  } else if (form == SfForm::MnAligned) {
    b = from_view(deepgemm::get_mn_major_tma_aligned_tensor(s));
  } else {
    b = swapped(strided(dgtest::transpose(s)));  // [.., KB, MN] contiguous, seen as [.., MN, KB]
  }
  return api_transposed ? swapped(b) : b;
}


struct Inputs {
  Buf a, sfa, b, sfb, c, d;  // d: D's whole storage (poisoned) and its view; c: separate C
  rt::Tensor idx;            // m_indices or masked_m (int32, host)
  // The float64 values of the logical operands (de-quantized) for the reference:
  std::vector<double> deq_a;  // [rows_a, K] (K-grouped: [sum(ks), M] as stored)
  std::vector<double> deq_b;  // [G, N, K] (K-grouped: [sum(ks), N] as stored)
  std::vector<double> c_vals;  // C [d_groups, m, n]
  int64_t d_ld = 0, d_gs = 0, d_off = 0;  // D's element strides and offset in its storage
};

// Random inputs, fast (the GPU run's host time counts): uniform in (-1, 1) times a gain of
// 2^(-2..2) by row (mod 5) and 2^(-3..3) by 128-block of K (mod 7), so that neighbouring scales
// differ and a scale taken from the wrong block shows. `k_along_rows`: K runs along the rows (the
// K-grouped operands [sum(ks), MN]). `dtype` BF16 or F32; `scale` multiplies everything.
rt::Tensor values(const rt::Shape& shape, DType dtype, uint64_t seed, bool k_along_rows = false, double scale = 1.0) {
  rt::Tensor t = rt::Tensor::empty(shape, dtype);
  const int64_t cols = shape.back(), rows = t.numel() / std::max<int64_t>(cols, 1);
  float gr[5], gc[7];
  for (int i = 0; i < 5; ++i) gr[i] = float(scale * std::ldexp(1.0, int(mix(seed + uint64_t(i)) % 5) - 2));
  for (int i = 0; i < 7; ++i) gc[i] = std::ldexp(1.0f, int(mix(seed + 97 + uint64_t(i)) % 7) - 3);
  uint64_t x = mix(seed) | 1;
  auto* f32 = static_cast<float*>(t.data());
  auto* b16 = static_cast<uint16_t*>(t.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      x ^= x >> 12, x ^= x << 25, x ^= x >> 27;  // xorshift64*
      const float u = float(int64_t((x * 0x2545F4914F6CDD1Dull) >> 11) - (int64_t(1) << 52)) * 0x1p-52f;
      const float v = u * (k_along_rows ? gr[c % 5] * gc[(r / 128) % 7] : gr[r % 5] * gc[(c / 128) % 7]);
      if (dtype == DType::F32) {
        f32[r * cols + c] = v;
      } else {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        b16[r * cols + c] = uint16_t((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);  // round to nearest even
      }
    }
  }
  return t;
}

Inputs build_inputs(const Case& c) {
  Inputs in;
  const Kind kind = c.kind();
  const Group group = c.group();
  uint64_t s = c.seed;
  auto next = [&] { return s = mix(s); };
  const int64_t k = c.k, n = c.n, g = c.g;
  const int64_t kb = ceil_div(k, 128);
  const int64_t es_op = kind == Kind::Bf16 ? 2 : 1;
  const int64_t align_op = 16 / es_op;  // elements of a 16-byte unit of A / B (FP8, BF16)

  if (group == Group::K) {
    // a [sum(ks), M], b [sum(ks), N], both MN-major, per-channel scales [sum/128, MN].
    const rt::Tensor xa = values({k, c.m}, DType::BF16, next(), true);
    const rt::Tensor xb = values({k, n}, DType::BF16, next(), true);
    auto [qa, sa] = deepgemm::per_channel_cast_to_fp8(xa, c.ue8m0_values);
    auto [qb, sb] = deepgemm::per_channel_cast_to_fp8(xb, c.ue8m0_values);
    in.deq_a = dgtest::dequant(qa, sa, 128, 1);
    in.deq_b = dgtest::dequant(qb, sb, 128, 1);
    in.a = strided(qa, round_up(c.m, 16) + 16 * c.a_pad);
    in.b = strided(qb, round_up(n, 16) + 16 * c.b_pad);
    // Logical scales [MN, sum/128] from the stored [sum/128, MN].
    in.sfa = scales_as(dgtest::transpose(sa), c.sfa_dtype, c.sfa_form, true);
    in.sfb = scales_as(dgtest::transpose(sb), c.sfb_dtype, c.sfb_form, true);
  } else {
    const int64_t rows_a = c.rows_a();
    const rt::Tensor xa = values({rows_a, k}, DType::BF16, next());
    const rt::Tensor xb = values({g * n, k}, DType::BF16, next());
    rt::Tensor qa, sa, qb, sb;  // qa [rows_a, K]; qb [G*N, K]; sa [rows_a, KB]; sb [G, NB, KB] or [G*N, K/gran]
    if (kind == Kind::Bf16) {
      qa = xa;
      qb = xb;
      in.deq_a = testutil::to_f64(qa);
      in.deq_b = testutil::to_f64(qb);
    } else {
      std::tie(qa, sa) = deepgemm::per_token_cast_to_fp8(xa, c.ue8m0_values);
      in.deq_a = dgtest::dequant(qa, sa, 1, 128);
      if (kind == Kind::Fp4) {
        std::tie(qb, sb) = deepgemm::per_token_cast_to_fp4(xb, c.fp4_gran, c.ue8m0_values);
        in.deq_b = dgtest::dequant(qb, sb, 1, c.fp4_gran);
      } else {
        const int64_t nb = ceil_div(n, 128);
        qb = rt::Tensor::empty({g * n, k}, DType::F8E4M3);
        sb = rt::Tensor::empty({g, nb, kb}, DType::F32);
        for (int64_t gi = 0; gi < g; ++gi) {
          const rt::Tensor slice = rt::Tensor::wrap(static_cast<char*>(xb.data()) + gi * n * k * 2, {n, k}, DType::BF16,
                                                    rt::Device::cpu(), {}, xb.storage());
          auto [q, sc] = deepgemm::per_block_cast_to_fp8(slice, c.ue8m0_values);
          std::memcpy(static_cast<char*>(qb.data()) + gi * n * k, q.data(), size_t(n * k));
          std::memcpy(sb.data_as<float>() + gi * nb * kb, sc.data(), size_t(nb * kb) * 4);
          const std::vector<double> dq = dgtest::dequant(q, sc, 128, 128);
          in.deq_b.insert(in.deq_b.end(), dq.begin(), dq.end());
        }
      }
    }
    // A: [M, K] (or [G, max_M, K]) K-major, or [K, M] for the t layouts.
    if (a_mn_major(c.api)) {
      in.a = strided(dgtest::transpose(qa), round_up(c.m, align_op) + align_op * c.a_pad);
    } else if (group == Group::Mask) {
      const int64_t ld = k + align_op * c.a_pad;
      in.a = strided(dgtest::reshaped(qa, {g, c.m, k}), ld, c.m * ld + (c.a_pad ? ld : 0));
    } else {
      in.a = strided(qa, k + align_op * c.a_pad);
    }
    // B: [N, K] / [G, N, K] K-major (FP4: rows of 32 e2m1 units), or [K, N] for the n layouts.
    if (b_mn_major(c.api)) {
      in.b = strided(dgtest::transpose(qb), round_up(n, align_op) + align_op * c.b_pad);
    } else {
      const int64_t unit = kind == Kind::Fp4 ? 32 : align_op;
      const int64_t ld = k + unit * c.b_pad;
      in.b = group == Group::None ? strided(qb, ld) : strided(dgtest::reshaped(qb, {g, n, k}), ld, n * ld);
    }
    if (kind != Kind::Bf16) {
      const rt::Tensor sa_l = group == Group::Mask ? dgtest::reshaped(sa, {g, c.m, kb}) : sa;
      in.sfa = scales_as(sa_l, c.sfa_dtype, c.sfa_form, a_mn_major(c.api));
      if (kind == Kind::Fp4) {
        const rt::Tensor sb_l = group == Group::None ? sb : dgtest::reshaped(sb, {g, n, sb.size(1)});
        in.sfb = scales_as(sb_l, c.sfb_dtype, c.sfb_form, false);
      } else {
        const rt::Tensor sb_l = group == Group::None ? dgtest::reshaped(sb, {sb.size(1), kb}) : sb;
        in.sfb = scales_as(sb_l, c.sfb_dtype, c.sfb_form, b_mn_major(c.api));
      }
    }
    if (group == Group::Cont) in.idx = dgtest::i32_tensor(c.m_indices);
    if (group == Group::Mask) in.idx = dgtest::i32_tensor(c.masked);
  }

  // D: rows of ld elements (a 16-byte multiple), guard rows before and after, gaps between groups.
  const int64_t out_es = c.out_f32 ? 4 : 2, out_align = 16 / out_es;
  const int64_t dg = c.d_groups();
  in.d_ld = round_up(n, out_align) + out_align * c.d_pad;
  in.d_gs = (c.m + c.d_gap) * in.d_ld;
  in.d_off = c.d_lead * in.d_ld;
  const int64_t total = in.d_off + dg * in.d_gs + c.d_trail * in.d_ld;
  in.d.bytes = byte_tensor(total * out_es, 0xFF);
  in.d.offset = in.d_off * out_es;
  in.d.dtype = c.out_f32 ? DType::F32 : DType::BF16;
  in.d.shape = dg > 1 || group == Group::Mask || group == Group::K ? rt::Shape{dg, c.m, n} : rt::Shape{c.m, n};
  in.d.strides = in.d.shape.size() == 3 ? rt::Shape{in.d_gs, in.d_ld, 1} : rt::Shape{in.d_ld, 1};
  if (c.c_mode != 0) {
    const rt::Tensor cv = values(in.d.shape, DType::F32, next(), false, 4.0);
    in.c_vals = testutil::to_f64(cv);
    if (c.c_mode == 1) {  // rows padded to 16 bytes like D's (other strides than D's)
      in.c = strided(cv, round_up(n, 4) + 4 * (c.d_pad == 0), in.d.shape.size() == 3 ? (c.m + 1) * (round_up(n, 4) + 4 * (c.d_pad == 0)) : 0);
    } else {  // in place: D starts as C
      float* dp = reinterpret_cast<float*>(static_cast<char*>(in.d.bytes.data()) + in.d.offset);
      for (int64_t gi = 0; gi < dg; ++gi)
        for (int64_t r = 0; r < c.m; ++r)
          for (int64_t j = 0; j < n; ++j) dp[gi * in.d_gs + r * in.d_ld + j] = float(in.c_vals[size_t((gi * c.m + r) * n + j)]);
    }
  }
  return in;
}

// The call itself on the tensors given (host or device views).
struct Args {
  rt::Tensor a, sfa, b, sfb, d, c, idx;
};
void call(const Case& cs, const Args& x) {
  const rt::Tensor c = cs.c_mode == 2 ? x.d : x.c;
  switch (cs.api) {
    case Api::Fp8Nt: deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, x.d, c); break;
    case Api::Fp8Nn: deepgemm::fp8_gemm_nn(x.a, x.sfa, x.b, x.sfb, x.d, c); break;
    case Api::Fp8Tn: deepgemm::fp8_gemm_tn(x.a, x.sfa, x.b, x.sfb, x.d, c); break;
    case Api::Fp8Tt: deepgemm::fp8_gemm_tt(x.a, x.sfa, x.b, x.sfb, x.d, c); break;
    case Api::Bf16Nt: deepgemm::bf16_gemm_nt(x.a, x.b, x.d, c); break;
    case Api::Bf16Nn: deepgemm::bf16_gemm_nn(x.a, x.b, x.d, c); break;
    case Api::Bf16Tn: deepgemm::bf16_gemm_tn(x.a, x.b, x.d, c); break;
    case Api::Bf16Tt: deepgemm::bf16_gemm_tt(x.a, x.b, x.d, c); break;
    case Api::Fp4Nt: deepgemm::fp8_fp4_gemm_nt(x.a, x.sfa, x.b, x.sfb, x.d, c); break;
    case Api::ContFp8: deepgemm::m_grouped_fp8_gemm_nt_contiguous(x.a, x.sfa, x.b, x.sfb, x.d, x.idx); break;
    case Api::MaskFp8: deepgemm::m_grouped_fp8_gemm_nt_masked(x.a, x.sfa, x.b, x.sfb, x.d, x.idx, cs.expected_m); break;
    case Api::ContFp4: deepgemm::m_grouped_fp8_fp4_gemm_nt_contiguous(x.a, x.sfa, x.b, x.sfb, x.d, x.idx); break;
    case Api::MaskFp4: deepgemm::m_grouped_fp8_fp4_gemm_nt_masked(x.a, x.sfa, x.b, x.sfb, x.d, x.idx, cs.expected_m); break;
    case Api::ContBf16: deepgemm::m_grouped_bf16_gemm_nt_contiguous(x.a, x.b, x.d, x.idx); break;
    case Api::MaskBf16: deepgemm::m_grouped_bf16_gemm_nt_masked(x.a, x.b, x.d, x.idx, cs.expected_m); break;
    case Api::KGrouped: deepgemm::k_grouped_fp8_gemm_tn_contiguous(x.a, x.sfa, x.b, x.sfb, x.d, cs.ks, c); break;
    case Api::Count: break;
  }
}

std::string tensor_str(const char* name, const rt::Tensor& t) {
  if (!t.defined()) return "";
  std::ostringstream o;
  o << " " << name << "=" << rt::name(t.dtype()) << t.shape_string() << "/strides" << list_str(t.strides());
  return o.str();
}
std::string args_str(const Args& x) {
  return tensor_str("a", x.a) + tensor_str("a_scales", x.sfa) + tensor_str("b", x.b) + tensor_str("b_scales", x.sfb) +
         tensor_str("d", x.d) + tensor_str("c", x.c);
}

// The host views of the inputs, D over `d_storage` (a copy of in.d's bytes).
Args host_args(const Inputs& in, const rt::Tensor& d_storage) {
  Args x;
  x.a = in.a.host();
  if (in.sfa.defined()) x.sfa = in.sfa.host();
  x.b = in.b.host();
  if (in.sfb.defined()) x.sfb = in.sfb.host();
  if (in.c.defined()) x.c = in.c.host();
  x.idx = in.idx;
  x.d = in.d.view(d_storage);
  return x;
}

rt::Tensor copy_bytes(const rt::Tensor& t) {
  rt::Tensor r = rt::Tensor::empty(t.shape(), t.dtype());
  std::memcpy(r.data(), t.data(), size_t(t.nbytes()));
  return r;
}

// The |A| |B|^T (+ |C|) bound of every output element: the CPU path on the inputs' absolute values,
// into a contiguous float32 D.
std::vector<double> abs_bound(const Case& cs, const Inputs& in) {
  Case ca = cs;
  ca.out_f32 = true;
  ca.c_mode = cs.c_mode ? 1 : 0;
  Args x;
  const Buf a = abs_of(in.a), b = abs_of(in.b);
  x.a = a.host();
  x.b = b.host();
  if (in.sfa.defined()) x.sfa = in.sfa.host();
  if (in.sfb.defined()) x.sfb = in.sfb.host();
  x.idx = in.idx;
  // D (and C) [.., M, N] with rows padded to 16 bytes, read back as [.., M, N].
  const int64_t ld = round_up(cs.n, 4);
  rt::Shape shape = in.d.shape;
  shape.back() = ld;
  rt::Tensor d = rt::Tensor::empty(shape, DType::F32);
  std::memset(d.data(), 0, size_t(d.nbytes()));
  const rt::Shape strides = shape.size() == 3 ? rt::Shape{cs.m * ld, ld, 1} : rt::Shape{ld, 1};
  x.d = rt::Tensor::wrap(d.data(), in.d.shape, DType::F32, rt::Device::cpu(), strides, d.storage());
  rt::Tensor c;
  if (cs.c_mode) {
    c = rt::Tensor::empty(shape, DType::F32);
    float* p = c.data_as<float>();
    for (size_t i = 0; i < in.c_vals.size(); ++i) p[int64_t(i) / cs.n * ld + int64_t(i) % cs.n] = std::fabs(float(in.c_vals[i]));
    x.c = rt::Tensor::wrap(c.data(), in.d.shape, DType::F32, rt::Device::cpu(), strides, c.storage());
  }
  call(ca, x);
  const std::vector<double> padded = testutil::to_f64(d);
  std::vector<double> out(padded.size() / size_t(ld) * size_t(cs.n));
  for (size_t i = 0; i < out.size(); ++i) out[i] = padded[i / size_t(cs.n) * size_t(ld) + i % size_t(cs.n)];
  return out;
}

double elem(const rt::Tensor& storage, DType dt, int64_t i) {
  if (dt == DType::F32) {
    float f;
    std::memcpy(&f, static_cast<const char*>(storage.data()) + 4 * i, 4);
    return double(f);
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(storage.data()) + 2 * i, 2);
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return double(f);
}

// Whether element (g, r) of D is one the call writes.
bool row_written(const Case& c, int64_t g, int64_t r) {
  return c.group() != Group::Mask || r < c.masked[size_t(g)];
}

// Checks `out` (D's storage after a call: the GPU's, or the CPU's itself) against `ref` (the CPU's
// storage) element by element with bound |A||B|^T (`abs`), calc_diff per 64 x 64 tile and overall,
// and every element the call does not write against `initial`. Returns "" or the first problems.
std::string compare(const Case& c, const Inputs& in, const rt::Tensor& initial, const rt::Tensor& ref,
                    const rt::Tensor& out, const std::vector<double>& abs) {
  std::ostringstream err;
  int problems = 0;
  auto note = [&](const std::string& s) {
    if (problems++ < 8) err << "\n    " << s;
  };
  const DType dt = in.d.dtype;
  const int64_t es = rt::bits(dt) / 8;
  const int64_t dg = c.d_groups(), n = c.n;
  int64_t kmax = c.k;
  if (c.group() == Group::K) kmax = *std::max_element(c.ks.begin(), c.ks.end());
  const double unit = 2.0 * (128.0 * std::ldexp(1.0, -14) + double(kmax + 16) * std::ldexp(1.0, -24));
  const double bound = c.kind() == Kind::Bf16 ? 1e-5 : 1e-3;
  const int64_t storage_elems = initial.numel() / es;
  std::vector<char> written(size_t(storage_elems), 0);
  // calc_diff = 1 - 2 sum(x y) / sum(x x + y y), overall and per 64 x 64 tile of each group.
  struct Sums {
    double xy = 0, xx_yy = 0;
    void add(double x, double y) {
      xy += x * y;
      xx_yy += x * x + y * y;
    }
    double diff() const { return xx_yy == 0 ? 0.0 : 1.0 - 2.0 * xy / xx_yy; }
  };
  Sums all;
  const int64_t tiles_n = ceil_div(n, 64);
  int64_t bad = 0, nonfinite = 0;
  for (int64_t gi = 0; gi < dg; ++gi) {
    std::vector<Sums> tiles(size_t(ceil_div(c.m, 64) * tiles_n));
    for (int64_t r = 0; r < c.m; ++r) {
      if (!row_written(c, gi, r)) continue;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t e = in.d_off + gi * in.d_gs + r * in.d_ld + j;
        written[size_t(e)] = 1;
        const double o = elem(out, dt, e), f = elem(ref, dt, e);
        const double bnd = abs[size_t((gi * c.m + r) * n + j)];
        if (!std::isfinite(f)) {
          if (nonfinite++ < 3) note(rt::str("the reference (CPU) D[", gi, ",", r, ",", j, "] = ", f, " is not finite"));
          continue;
        }
        if (!std::isfinite(o)) {
          if (nonfinite++ < 3) note(rt::str("D[", gi, ",", r, ",", j, "] = ", o, " is not finite (CPU ", f, ")"));
          continue;
        }
        const double tol = unit * bnd + (dt == DType::BF16 ? 1.01 * std::ldexp(1.0, -7) * std::max(std::fabs(f), std::fabs(o)) : 0.0) + 1e-30;
        if (!(std::fabs(o - f) <= tol) && bad++ < 4)
          note(rt::str("D[", gi, ",", r, ",", j, "] = ", o, ", CPU ", f, " (|diff| ", std::fabs(o - f), " > tolerance ", tol, ")"));
        tiles[size_t((r / 64) * tiles_n + j / 64)].add(o, f);
        all.add(o, f);
      }
    }
    for (size_t t = 0; t < tiles.size(); ++t) {
      const double diff = tiles[t].diff();
      if (!(diff < bound))
        note(rt::str("group ", gi, " tile at row ", int64_t(t) / tiles_n * 64, ", column ", int64_t(t) % tiles_n * 64,
                     ": calc_diff ", diff, " >= ", bound));
    }
  }
  if (bad > 0) note(rt::str(bad, " elements outside the bound"));
  if (nonfinite > 0) note(rt::str(nonfinite, " non-finite elements"));
  if (!(all.diff() < bound)) note(rt::str("calc_diff ", all.diff(), " >= ", bound));
  // Untouched memory: every element the call does not write keeps its bytes.
  const char* ib = static_cast<const char*>(initial.data());
  const char* ob = static_cast<const char*>(out.data());
  int64_t changed = 0;
  for (int64_t e = 0; e < storage_elems; ++e) {
    if (written[size_t(e)] || std::memcmp(ib + e * es, ob + e * es, size_t(es)) == 0) continue;
    if (changed++ < 3) {
      const int64_t rel = e - in.d_off;
      note(rt::str("storage element ", e, " (D offset ", rel, ": group ", rel >= 0 ? rel / in.d_gs : -1, " row ",
                   rel >= 0 ? (rel % in.d_gs) / in.d_ld : -1, " col ", rel >= 0 ? rel % in.d_ld : -1,
                   ") is outside what the call writes but changed to ", elem(out, dt, e)));
    }
  }
  if (changed > 0) note(rt::str(changed, " elements written that the call must leave untouched"));
  return problems ? err.str() : "";
}

// The float64 reference of the written elements (in compare()'s order) and their sum |a b|.
dgtest::Ref reference(const Case& c, const Inputs& in) {
  dgtest::Ref ref;
  const int64_t n = c.n, k = c.k;
  for (int64_t gi = 0; gi < c.d_groups(); ++gi) {
    for (int64_t r = 0; r < c.m; ++r) {
      if (!row_written(c, gi, r)) continue;
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, sa = 0;
        if (!in.c_vals.empty()) {
          s = in.c_vals[size_t((gi * c.m + r) * n + j)];
          sa = std::fabs(s);
        }
        if (c.group() == Group::K) {
          int64_t k0 = 0;
          for (int64_t x = 0; x < gi; ++x) k0 += c.ks[size_t(x)];
          for (int64_t x = k0; x < k0 + c.ks[size_t(gi)]; ++x) {
            const double t = in.deq_a[size_t(x * c.m + r)] * in.deq_b[size_t(x * n + j)];
            s += t;
            sa += std::fabs(t);
          }
        } else {
          const int64_t row = c.group() == Group::Mask ? gi * c.m + r : r;
          const int64_t bg = c.group() == Group::Mask ? gi : c.group() == Group::Cont ? c.m_indices[size_t(r)] : 0;
          if (bg >= 0) {
            const double* a = in.deq_a.data() + row * k;
            const double* b = in.deq_b.data() + (bg * n + j) * k;
            for (int64_t x = 0; x < k; ++x) {
              s += a[x] * b[x];
              sa += std::fabs(a[x] * b[x]);
            }
          }
        }
        ref.val.push_back(s);
        ref.abs.push_back(sa);
      }
    }
  }
  return ref;
}

std::vector<double> written_values(const Case& c, const Inputs& in, const rt::Tensor& storage) {
  std::vector<double> v;
  for (int64_t gi = 0; gi < c.d_groups(); ++gi)
    for (int64_t r = 0; r < c.m; ++r) {
      if (!row_written(c, gi, r)) continue;
      for (int64_t j = 0; j < c.n; ++j) v.push_back(elem(storage, in.d.dtype, in.d_off + gi * in.d_gs + r * in.d_ld + j));
    }
  return v;
}

// The GPU knobs of a case for the scope of one call (unset when the case leaves them unset).
struct Knobs {
  dgtest::ScopedEnv config, fp4, split, sync;
  explicit Knobs(const Case& c)
      : config("DG_GPU_CONFIG", c.config.empty() ? nullptr : c.config.c_str()),
        fp4("DG_GPU_FP4", c.fp4.empty() ? nullptr : c.fp4.c_str()),
        split("DG_GPU_SPLIT_K", c.split_k.empty() ? nullptr : c.split_k.c_str()),
        sync("DG_GPU_ROUND_SYNC", c.round_sync.empty() ? nullptr : c.round_sync.c_str()) {}
};
struct NoKnobs {
  static constexpr const char* kUnset = nullptr;
  dgtest::ScopedEnv config{"DG_GPU_CONFIG", kUnset}, fp4{"DG_GPU_FP4", kUnset}, split{"DG_GPU_SPLIT_K", kUnset},
      sync{"DG_GPU_ROUND_SYNC", kUnset};
};

// A case through the CPU path with no knobs: its inputs, D's bytes before the call and after it,
// and each element's |A||B|^T bound.
struct CpuRun {
  Inputs in;
  rt::Tensor initial, d;
  std::vector<double> abs;
};
// With `rejected`, a user error of the call is caught and described there (the run is then not
// complete); without, it propagates.
CpuRun run_on_cpu(const Case& c, std::string* rejected = nullptr) {
  CpuRun r{build_inputs(c), {}, {}, {}};
  r.initial = copy_bytes(r.in.d.bytes);
  r.d = copy_bytes(r.in.d.bytes);
  const Args x = host_args(r.in, r.d);
  try {
    NoKnobs none;
    call(c, x);
  } catch (const rt::Error& e) {
    if (!rejected) throw;
    *rejected = c.describe() + args_str(x) + ": " + e.what();
    return r;
  }
  r.abs = abs_bound(c, r.in);
  return r;
}

// ------------------------------------------------------------------------------------------------
// CPU-only: the generator's cases are valid calls, the CPU path matches float64 on them, and the
// checks above pass the CPU's own output (untouched memory included).

TEST(GpuFuzzGenerator, DrawsValidCasesWithinTheKernelBudget) {
  const uint64_t seed = uint64_t(env_i64("DG_FUZZ_SEED", int64_t(kDefaultSeed)));
  const int count = int(env_i64("DG_FUZZ_CASES", kDefaultCases));
  const int max_kernels = int(env_i64("DG_FUZZ_MAX_KERNELS", kDefaultMaxKernels));
  const auto t0 = std::chrono::steady_clock::now();
  const Plan plan = make_plan(seed, count, max_kernels);
  const double plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(int(plan.cases.size()), count);
  EXPECT_LE(int(plan.kernels.size()), max_kernels + 4);  // a draw may exceed it after 40 attempts
  EXPECT_TRUE(plan.missed.empty()) << "directed cases that hit no target: " << list_str(plan.missed);
  std::map<std::string, int> per_api;
  int forced = 0, medium = 0, splits = 0, syncs = 0, fp4_forms = 0;
  double flops = 0;
  for (const Case& c : plan.cases) {
    ++per_api[api_name(c.api)];
    forced += !c.config.empty();
    medium += c.medium;
    splits += !c.split_k.empty();
    syncs += !c.round_sync.empty();
    fp4_forms += !c.fp4.empty();
    flops += c.flops();
  }
  std::printf("GpuFuzz plan: seed %llu, %d cases, %zu predicted distinct H200 kernels (budget %d), %d predicted "
              "rejections; %d forced tilings, %d DG_GPU_FP4, %d DG_GPU_SPLIT_K, %d DG_GPU_ROUND_SYNC, %d medium; %.1f "
              "GFLOP; drawn in %.2f s\n",
              static_cast<unsigned long long>(seed), count, plan.kernels.size(), max_kernels, plan.predicted_rejections,
              forced, fp4_forms, splits, syncs, medium, flops / 1e9, plan_s);
  for (const auto& [name, n] : per_api) std::printf("  %-40s %d\n", name.c_str(), n);
  for (const std::string& k : plan.kernels) std::printf("  kernel %s\n", k.c_str());
  for (const Case& c : plan.cases)
    if (predict(c, c.num_sms ? c.num_sms : kH200Sms).rejected) std::printf("  predicted rejected: %s\n", c.describe().c_str());
  if (count >= 200) {
    EXPECT_EQ(int(per_api.size()), int(Api::Count)) << "every API drawn";
  }
  // The same seed draws the same cases.
  const Plan again = make_plan(seed, std::min(count, 40), max_kernels);
  for (size_t i = 0; i < again.cases.size(); ++i) EXPECT_EQ(again.cases[i].describe(), plan.cases[i].describe());

  // Every case's inputs as the generator builds them (the small ones: this machine's CPU) are
  // accepted by the CPU path, which matches float64, and the GPU run's checks pass on the CPU's
  // own output.
  int run = 0;
  std::map<Api, int> run_per_api;
  for (const Case& c : plan.cases) {
    if (c.flops() > 1.5e7 || run_per_api[c.api] >= 3) continue;  // up to 3 small cases of each call
    ++run_per_api[c.api];
    ++run;
    SCOPED_TRACE(c.describe());
    std::string rejected;
    const CpuRun cpu = run_on_cpu(c, &rejected);
    if (!rejected.empty()) {
      ADD_FAILURE() << "the CPU path rejects " << rejected;
      continue;
    }
    const Inputs& in = cpu.in;
    const rt::Tensor &initial = cpu.initial, &d_cpu = cpu.d;
    const Args x = host_args(in, d_cpu);
    const dgtest::Ref ref = reference(c, in);
    const int64_t kmax = c.group() == Group::K ? *std::max_element(c.ks.begin(), c.ks.end()) : c.k;
    dgtest::expect_matches_reference(written_values(c, in, d_cpu), ref, std::max<int64_t>(kmax, 1), !c.out_f32,
                                     c.describe() + args_str(x));
    const std::vector<double>& abs = cpu.abs;
    const std::string problems = compare(c, in, initial, d_cpu, d_cpu, abs);
    EXPECT_TRUE(problems.empty()) << c.describe() << problems;
    // The |A||B|^T bound is the reference's sum |a b| (+ |C|), within float32 rounding.
    for (size_t i = 0, w = 0; i < abs.size() && w < ref.abs.size(); ++i) {
      const int64_t gi = int64_t(i) / (c.m * c.n), r = (int64_t(i) / c.n) % c.m;
      if (!row_written(c, gi, r)) continue;
      EXPECT_NEAR(abs[i], ref.abs[w], 1e-4 * ref.abs[w] + 1e-30) << "element " << i;
      if (std::fabs(abs[i] - ref.abs[w]) > 1e-4 * ref.abs[w] + 1e-30) break;
      ++w;
    }
  }
  EXPECT_GE(run, 30);
  std::printf("GpuFuzzGenerator: %d small cases run through the CPU path (%zu calls)\n", run, run_per_api.size());
}

// The checks catch what they are for: on the CPU's own output of small cases, an element off by
// about twice its bound, a NaN, and a write outside what the call writes (D's row padding, guard rows,
// masked rows) each make compare() complain.
TEST(GpuFuzzGenerator, ChecksCatchWrongOutputs) {
  const Plan plan = make_plan(kDefaultSeed, 80, kDefaultMaxKernels);
  int checked = 0, untouched_checked = 0;
  for (const Case& c : plan.cases) {
    if (c.flops() > 2e7 || checked >= 16) continue;
    ++checked;
    SCOPED_TRACE(c.describe());
    const CpuRun cpu = run_on_cpu(c);
    const Inputs& in = cpu.in;
    const rt::Tensor &initial = cpu.initial, &d_cpu = cpu.d;
    const std::vector<double>& abs = cpu.abs;
    ASSERT_EQ(compare(c, in, initial, d_cpu, d_cpu, abs), "");
    const DType dt = in.d.dtype;
    const int64_t es = rt::bits(dt) / 8;
    auto set = [&](rt::Tensor& t, int64_t e, float v) {
      if (dt == DType::F32) {
        std::memcpy(static_cast<char*>(t.data()) + e * 4, &v, 4);
      } else {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint16_t h = uint16_t(bits >> 16);
        std::memcpy(static_cast<char*>(t.data()) + e * 2, &h, 2);
      }
    };
    // A written element: the last row written of the last group with any, column n - 1.
    int64_t written = -1, gw = 0, rw = 0;
    for (int64_t gi = 0; gi < c.d_groups(); ++gi)
      for (int64_t r = 0; r < c.m; ++r)
        if (row_written(c, gi, r)) written = in.d_off + gi * in.d_gs + r * in.d_ld + c.n - 1, gw = gi, rw = r;
    if (written >= 0) {
      const double v = elem(d_cpu, dt, written), b = abs[size_t((gw * c.m + rw) * c.n + c.n - 1)];
      rt::Tensor off = copy_bytes(d_cpu);
      // (The element bound is ~1.6% of sum |a b|, plus 2^-7 of the value for bfloat16 outputs.)
      set(off, written, float(v + 0.03 * b + 0.03 * std::fabs(v) + 1e-3));
      EXPECT_NE(compare(c, in, initial, d_cpu, off, abs), "") << "an element off by 3% of its bound";
      rt::Tensor nan = copy_bytes(d_cpu);
      set(nan, written, std::nanf(""));
      EXPECT_NE(compare(c, in, initial, d_cpu, nan, abs), "") << "a NaN";
    }
    // An element the call must not write: the first of the storage that is not D's (guard rows,
    // row padding, gaps) or a masked row's.
    const int64_t elems = initial.numel() / es;
    for (int64_t e = 0; e < elems; ++e) {
      const int64_t rel = e - in.d_off;
      const int64_t gi = rel >= 0 ? rel / in.d_gs : -1, r = rel >= 0 ? rel % in.d_gs / in.d_ld : -1,
                    col = rel >= 0 ? rel % in.d_ld : -1;
      const bool inside = rel >= 0 && gi < c.d_groups() && r < c.m && col < c.n && row_written(c, gi, r);
      if (inside) continue;
      rt::Tensor stray = copy_bytes(d_cpu);
      set(stray, e, 1.0f);
      EXPECT_NE(compare(c, in, initial, d_cpu, stray, abs), "") << "a write to storage element " << e;
      ++untouched_checked;
      break;
    }
  }
  EXPECT_GE(checked, 10);
  EXPECT_GE(untouched_checked, 5);
}

// Other seeds draw valid calls too (only validated: the CPU path on the smallest of them).
TEST(GpuFuzzGenerator, OtherSeedsDrawValidCalls) {
  int run = 0;
  for (uint64_t seed : {1ull, 2ull, 977ull}) {
    const Plan plan = make_plan(seed, 120, kDefaultMaxKernels);
    for (const Case& c : plan.cases) {
      if (c.flops() > 2e6) continue;
      ++run;
      std::string rejected;
      run_on_cpu(c, &rejected);
      EXPECT_TRUE(rejected.empty()) << "seed " << seed << ": the CPU path rejects " << rejected;
    }
  }
  EXPECT_GE(run, 20);
}

// The host's share of the GPU run, without a GPU: every case of the plan built, run on the CPU
// (with its bound) and checked, as GpuFuzz.GpuMatchesCpu does. Skipped unless DG_FUZZ_HOST_TIME=1
// (about 20 s on 2 busy cores).
TEST(GpuFuzzGenerator, HostTimeOfTheRun) {
  if (env_i64("DG_FUZZ_HOST_TIME", 0) != 1) GTEST_SKIP() << "DG_FUZZ_HOST_TIME=1 runs it";
  const Plan plan = plan_from_env();
  const auto start = std::chrono::steady_clock::now();
  double worst = 0;
  int worst_case = -1;
  for (const Case& c : plan.cases) {
    const auto t0 = std::chrono::steady_clock::now();
    const CpuRun cpu = run_on_cpu(c);
    EXPECT_EQ(compare(c, cpu.in, cpu.initial, cpu.d, cpu.d, cpu.abs), "") << c.describe();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > worst) worst = s, worst_case = c.index;
  }
  std::printf("host time of %zu cases: %.1f s (slowest: case %d, %.2f s)\n", plan.cases.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), worst_case, worst);
}

// ------------------------------------------------------------------------------------------------
// The GPU run.

#define REQUIRE_HOPPER()                                                                                  \
  do {                                                                                                    \
    if (rt::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << rt::cuda_unavailable_reason(); \
    if (rt::cuda_device(0).sm_major != 9) GTEST_SKIP() << "not a Hopper GPU: " << rt::cuda_device(0).name; \
  } while (0)

TEST(GpuFuzz, GpuMatchesCpu) {
  REQUIRE_HOPPER();
  const rt::Device gpu = rt::Device::cuda(0);
  const Plan plan = plan_from_env();
  const int64_t only = env_i64("DG_FUZZ_CASE", -1);
  const double time_limit = double(env_i64("DG_FUZZ_TIME_LIMIT_S", 80));  // <= 0: none
  std::printf("GpuFuzz: DG_FUZZ_SEED=%llu DG_FUZZ_CASES=%zu DG_FUZZ_MAX_KERNELS=%lld: %zu predicted distinct kernels\n",
              static_cast<unsigned long long>(plan.seed), plan.cases.size(),
              static_cast<long long>(env_i64("DG_FUZZ_MAX_KERNELS", kDefaultMaxKernels)), plan.kernels.size());
  struct SmsGuard {
    ~SmsGuard() { deepgemm::set_num_sms(0); }
  } restore;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::set<std::string> kernels;
  int ran = 0, rejected = 0, failed = 0, mispredicted = 0, skipped_time = 0;
  for (const Case& c : plan.cases) {
    if (only >= 0 && c.index != only) continue;
    if (only < 0 && time_limit > 0 && elapsed() > time_limit) {
      ++skipped_time;
      continue;
    }
    const std::string replay =
        rt::str("replay: DG_FUZZ_SEED=", plan.seed, " DG_FUZZ_CASES=", plan.cases.size(), " DG_FUZZ_MAX_KERNELS=",
                env_i64("DG_FUZZ_MAX_KERNELS", kDefaultMaxKernels), " DG_FUZZ_CASE=", c.index,
                " build/tests/deepgemm_tests --gtest_filter=GpuFuzz.GpuMatchesCpu");
    // The CPU path, and the bound.
    const CpuRun cpu = run_on_cpu(c);
    const Inputs& in = cpu.in;
    const rt::Tensor &initial = cpu.initial, &d_cpu = cpu.d;
    const std::vector<double>& abs = cpu.abs;
    // The GPU path on the same bytes.
    auto up = [&](const Buf& b) { return b.defined() ? b.view(b.bytes.to(gpu)) : rt::Tensor(); };
    const rt::Tensor d_dev = in.d.bytes.to(gpu);
    Args x;
    x.a = up(in.a);
    x.sfa = up(in.sfa);
    x.b = up(in.b);
    x.sfb = up(in.sfb);
    x.c = up(in.c);
    if (in.idx.defined()) x.idx = in.idx.to(gpu);
    x.d = in.d.view(d_dev);
    const Prediction pred = predict(c, c.num_sms ? c.num_sms : rt::cuda_device(0).sm_count);
    std::string error;
    bool user_error = false;
    deepgemm::GemmConfig used;
    try {
      Knobs knobs(c);
      deepgemm::set_num_sms(c.num_sms);
      call(c, x);
      used = deepgemm::last_config();
    } catch (const rt::Error& e) {
      error = e.what();
      user_error = e.kind() == rt::ErrorKind::User;
    }
    deepgemm::set_num_sms(0);
    if (!error.empty()) {
      if (user_error && c.knobs()) {
        ++rejected;
        std::printf("GpuFuzz case %d rejected%s: %s\n", c.index, pred.rejected ? "" : " (NOT predicted)", error.c_str());
        continue;
      }
      ++failed;
      ADD_FAILURE() << c.describe() << args_str(x) << "\n  the GPU call failed: " << error << "\n  " << replay;
      continue;
    }
    ++ran;
    EXPECT_EQ(used.backend, "cuda") << c.describe();
    if (pred.rejected) std::printf("GpuFuzz case %d: predicted a rejection, ran (%s)\n", c.index, used.to_string().c_str());
    kernels.insert(rt::str(used.kernel, "|", used.block_m, "x", used.block_n, "x", used.num_stages, "|m", used.num_multicast,
                           "|p", used.promotion_k, "|", c.out_f32 ? "f32" : "bf16", "|g", int(c.group()), "|c", c.c_mode != 0));
    if (!pred.first.empty() && pred.first != rt::str(used.block_m, "x", used.block_n, "x", used.num_stages) && mispredicted++ < 10)
      std::printf("GpuFuzz case %d: predicted %s, ran %s\n", c.index, pred.first.c_str(), used.to_string().c_str());
    const rt::Tensor d_gpu = d_dev.to(rt::Device::cpu());
    const std::string problems = compare(c, in, initial, d_cpu, d_gpu, abs);
    if (!problems.empty()) {
      ++failed;
      ADD_FAILURE() << c.describe() << args_str(x) << "\n  GPU configuration: " << used.to_string() << problems << "\n  "
                    << replay;
    }
  }
  std::printf("GpuFuzz: %d cases ran, %d forced configurations rejected, %d failed, %d left out by the %.0f s limit; "
              "%zu distinct kernel configurations (%zu predicted), %d block shapes other than predicted; %.1f s\n",
              ran, rejected, failed, skipped_time, time_limit, kernels.size(), plan.kernels.size(), mispredicted, elapsed());
}

}  // namespace
