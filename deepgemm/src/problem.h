// The one description of a GEMM call that every public entry point builds (validate.cc) and every
// backend consumes (cpu_gemm.cc; the GPU kernels next): logical views of the operands with their
// strides, so the storage letters (nt/nn/tn/tt) are gone by the time a backend sees the problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rt/tensor.h"

namespace deepgemm::detail {

enum class Kind {
  Fp8,     // A e4m3 (1x128 scales), B e4m3 (128x128, or 1x128 for the K-grouped GEMM)
  Fp8Fp4,  // A e4m3 (1x128 scales), B e2m1 (1x32 or 1x128 scales)
  Bf16,    // no scales
};

enum class Grouping {
  None,         // one GEMM
  MContiguous,  // rows of A/D concatenated over groups, m_indices gives each row's group
  MMasked,      // [G, max_M, ...] batches, masked_m gives each group's valid rows
  KContiguous,  // K concatenated over groups (ks), D [G, M, N]
};

// A logical matrix [rows, cols] (per group) over a tensor: element (g, r, c) sits at element offset
// g * s_g + r * s_r + c * s_c from tensor.data() (for float4_e2m1: nibble offset, two per byte).
// Operands: A is [M, K], B is [N, K], D and C are [M, N]; scales are [ceil(rows/gran_r), K/gran_c].
struct MatrixArg {
  rt::Tensor tensor;  // undefined: absent (c, or the scales of a BF16 GEMM)
  int64_t rows = 0, cols = 0;
  int64_t s_g = 0, s_r = 0, s_c = 0;
  bool present() const { return tensor.defined(); }
};

struct ScaleArg : MatrixArg {
  int gran_r = 1;    // rows of the operand per scale row (1 or 128)
  int gran_c = 128;  // K per scale column (128 or 32)
};

struct Problem {
  std::string function;  // the public name, for messages: "fp8_gemm_nt"
  Kind kind = Kind::Fp8;
  Grouping grouping = Grouping::None;
  rt::Device device;
  // M: rows of D (MContiguous: all groups; MMasked: max_M per group); N; K (KContiguous: sum(ks)).
  int64_t m = 0, n = 0, k = 0;
  int64_t num_groups = 1;
  MatrixArg a, b, d, c;
  ScaleArg sfa, sfb;
  rt::Tensor m_indices;      // MContiguous: int32 [M]
  rt::Tensor masked_m;       // MMasked: int32 [G]
  int64_t expected_m = 0;    // MMasked: hint
  std::vector<int64_t> ks;   // KContiguous

  // K between two scale promotions: 128, or 32 with 1x32 FP4 scales; 0 for BF16.
  int promotion_k() const {
    if (kind == Kind::Bf16) return 0;
    return sfb.gran_c < sfa.gran_c ? sfb.gran_c : sfa.gran_c;
  }
};

}  // namespace deepgemm::detail
