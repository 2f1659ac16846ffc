// The CPU kernels' interface: plain structs of pointers and strides, no tensors, so the kernels can be
// compiled once per vector ISA (cpu_isa_*.cc, each in its own namespace) and picked at run time.
//
// A sub-GEMM computes, for m < M and n < N,
//   D[m, n] = (C ? C[m, n] : 0) + acc[m, n]
// where, with scales (FP8 / FP4: sa and sb present), the K axis is cut into promotion blocks of
// `promotion_k` (128, or 32 with 1x32 FP4 scales) and
//   acc = sum over blocks q of (sa(m, q) * sb(n, q)) * P_q[m, n],   P_q = sum_{k in q} a[m, k] * b[n, k]
// all in float32 (P_q accumulated with fused or plain multiply-adds, depending on the ISA), and
// without scales (BF16) acc = sum_k a[m, k] * b[n, k] in float32.
#pragma once

#include <cstdint>

#include "rt/dtype.h"

namespace deepgemm::cpu {

// Element (r, c) of a logical matrix at element offset r * s_r + c * s_c from data (float4_e2m1:
// nibble offset, element 0 of a byte in its low nibble).
struct Matrix {
  const void* data = nullptr;
  rt::DType dtype = rt::DType::F32;
  int64_t s_r = 0, s_c = 0;
};

// Scale of operand element (r, k): element (r / gran_r, k / gran_c) of the matrix (float32 or ue8m0).
struct ScaleMatrix {
  const void* data = nullptr;  // null: no scales (BF16)
  rt::DType dtype = rt::DType::F32;
  int64_t s_r = 0, s_c = 0;
  int gran_r = 1, gran_c = 128;
};

struct OutMatrix {
  void* data = nullptr;
  rt::DType dtype = rt::DType::F32;  // float32 or bfloat16
  int64_t s_r = 0, s_c = 1;
};

struct SubGemm {
  int64_t m = 0, n = 0, k = 0;
  Matrix a;  // [m, k]: float8_e4m3 or bfloat16; K-major (s_c == 1) or M-major (s_r == 1)
  Matrix b;  // [n, k]: float8_e4m3, float4_e2m1 (K-major) or bfloat16; K-major or N-major
  ScaleMatrix sa, sb;
  OutMatrix d;  // [m, n], s_c == 1
  Matrix c;     // [m, n] float32, s_c == 1, or data null
};

// Cache blocking of the scaled kernel: output tiles of block_m x block_n, K in passes of block_k
// (a multiple of promotion_k).
struct Blocking {
  int64_t block_m = 0, block_n = 0, block_k = 0;
  int promotion_k = 128;
  int threads = 1;
};

struct KernelTable {
  const char* isa;  // "avx512", "avx2", "generic"
  int mr, nr;       // register micro-tile of the kernels
  // The scaled sub-GEMMs (all with scales), their output tiles scheduled over `blk.threads` threads.
  // Returns the number of tiles.
  int64_t (*scaled_gemm)(const SubGemm* gemms, int64_t count, const Blocking& blk);
  // Unscaled (BF16) sub-GEMMs, one after the other, each on up to `threads` threads.
  void (*bf16_gemm)(const SubGemm* gemms, int64_t count, int threads);
};

// The kernels built for each ISA (null where not built, e.g. x86 ISAs on other CPUs).
const KernelTable* kernels_generic();
const KernelTable* kernels_avx2();
const KernelTable* kernels_avx512();

}  // namespace deepgemm::cpu
