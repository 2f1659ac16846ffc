// The H200 that the host-side predictions of the deepgemm suite plan for (plan_sm90 without a GPU):
// gpu_fuzz_test's expected configurations and gpu_compile_test's planned kernels.
#pragma once

#include <cstdint>

#include "plan.h"

namespace dgtest {

inline constexpr int kH200Sms = 132;
inline constexpr int64_t kH200Smem = 232448;     // the H200's opt-in shared memory per block
inline constexpr int64_t kH200L2 = 60ll << 20;  // the L2 size the predictions assume for it (round barriers)

// f's device: an H200 with `sms` SMs (set_num_sms), cluster launches available.
inline void on_h200(deepgemm::detail::Sm90Facts& f, int sms = kH200Sms) {
  f.sms = sms;
  f.smem_limit = kH200Smem;
  f.l2_bytes = kH200L2;
  f.cluster_launch = true;
}

}  // namespace dgtest
