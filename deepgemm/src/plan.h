// The plan of one launch of the Hopper kernel: what the call allows (TMA stores, tile height,
// multicast), the configuration the heuristics or the tuning knobs pick, split-K and round
// barriers. Decided on the host from plain facts, without a GPU, so that gpu.cc launches what the
// GPU fuzz test (tests/deepgemm/gpu_fuzz_test.cc) predicts from the same rules.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu_kernels.h"
#include "heuristics.h"
#include "problem.h"
#include "rt/tensor.h"
#include "tl/device/split_k.h"

namespace deepgemm::detail {

// The tuning knobs of deepgemm/config.h as set (gpu.cc reads them from the environment).
struct Sm90Knobs {
  std::string config;        // DG_GPU_CONFIG: a forced blocking, "" for the heuristic's
  std::string fp4 = "auto";  // DG_GPU_FP4: auto, registers, registers:BMxBN[i] or shared (FP4 B only)
  int64_t split_k = 0;       // DG_GPU_SPLIT_K: 0 for the plan's choice, 1 for none, S for S pieces
  int64_t round_sync = -1;   // DG_GPU_ROUND_SYNC: -1 for the rule, 0 for never, R rounds apart
};

// One launch: the operands as the kernel reads them (after gpu.cc's copies), the device, the knobs.
struct Sm90Facts {
  std::string function;  // the public call, for error messages
  bool fp8 = true;
  bool fp4_b = false;        // B packed e2m1, loaded as such and expanded in the kernel
  bool sfb_per_row = false;  // B's scales per row (FP4 B, K-grouped) rather than per 128 x 128 block
  bool sfb_ue8m0 = false;    // B's scales given as UE8M0 (powers of two)
  int promotion_k = 128;     // K between FP8 promotions (B's scale granularity: 32 or 128)
  Grouping grouping = Grouping::None;  // None, MContiguous or MMasked (the K-grouped GEMM: a launch a group)
  int64_t m = 0, n = 0, k = 0;
  int64_t expected_m = 0;  // M-masked: the rows a group will usually have (0: unknown)
  int64_t groups_a = 1;    // groups of A's and D's rows the tiles cover (M-masked: G)
  int a_bits = 8, b_bits = 8;  // bits of A's and B's elements
  rt::DType out = rt::DType::BF16;
  bool has_c = false;        // C given (D = C + A B^T; FP32 D): the epilogue reads it (the plan does not depend on it)
  bool d_aligned16 = false;  // D's address and its row and group strides in bytes are multiples of 16
  // The device (set_num_sms applied to sms).
  int sms = 0;
  int64_t smem_limit = 0;  // opt-in shared memory per block
  int64_t l2_bytes = 0;
  bool cluster_launch = false;
  Sm90Knobs knobs;

  int out_bytes() const { return rt::bits(out) / 8; }
  // Rows of per-row B scales each stage holds (128 / promotion K), 0 for block scales.
  int sfb_rows() const { return sfb_per_row ? 128 / promotion_k : 0; }
  // The rows per group the tiles are chosen for: M-masked, the expected ones.
  int64_t m_hint() const {
    return grouping == Grouping::MMasked && expected_m > 0 ? std::min(expected_m, m) : m;
  }
};

struct Sm90Plan {
  GpuBlocking blocking;        // with split-K's pieces and grid
  bool fp4_registers = false;  // FP4 B expanded in registers (kernels/sm90_fp4_gemm.cuh)
  tl::SplitKPlan split_k;      // the split, where blocking.splits > 1
  bool fold_scales = false;    // FP4 B's UE8M0 scales folded into its values (Sm90KernelSpec::fold_scales)
  bool ring_rounds = false;    // sm90_ring_rounds
  int round_sync_every = 0;    // rounds between the producers' barriers (0: never)
  bool round_sync = false;     // whether a barrier happens at all (the kernel then needs its counter)
};

// The plan for one launch; a user error naming f.function where a knob asks for what the launch
// cannot take.
Sm90Plan plan_sm90(const Sm90Facts& f);

// The kernel that launches plan `plan` of facts `f` (gpu.cc compiles and launches it; the compile
// test compiles every one the heuristic picks).
Sm90KernelSpec sm90_kernel_spec(const Sm90Facts& f, const Sm90Plan& plan);

}  // namespace deepgemm::detail
