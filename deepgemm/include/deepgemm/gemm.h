// DeepGEMM's GEMMs on rt::Tensor: FP8 with fine-grained scaling, FP8 x FP4, BF16, and the grouped
// GEMMs of mixture-of-experts. docs/deepgemm.md is the full reference (layouts, scaling, math).
//
// Conventions shared by every call
// - Logical shapes follow DeepGEMM: A is [M, K], B is [N, K], D = C + A * B^T is [M, N]. The two
//   letters of a name are BLAS's (and DeepGEMM's) for D = op(A) op(B) with B as a [K, N] matrix:
//   A: 'n' = stored [M, K] (K-major), 't' = stored [K, M] (M-major); B: 't' = stored [N, K]
//   (K-major), 'n' = stored [K, N] (N-major). An operand stored MN-major comes with its scales
//   transposed too. So fp8_gemm_nt is the all-K-major case, fp8_gemm_nn takes b as [K, N] with
//   b_scales [K/128, ceil(N/128)], and fp8_gemm_tn takes both operands MN-major.
// - FP8 operands are float8_e4m3. A is scaled per 1x128 block (one scale per row and 128 of K):
//   a_scales is logically [M, K/128]; B per 128x128 block: b_scales is [ceil(N/128), K/128]. Scales
//   are float32 or ue8m0 (powers of two). Every scale tensor may be stored K-major (logically
//   row-major) or MN-major; an MN-major per-row scale tensor (a_scales, FP4 and K-grouped b_scales)
//   needs a 16-byte aligned leading stride (get_mn_major_tma_aligned_tensor()'s layout, which the
//   GPU kernels load with TMA). K is whole 16-byte units of each operand (K % 16 == 0 for FP8,
//   % 32 with FP4 B, % 8 for BF16), whatever the storage; a last 128-block of K may be partial.
// - The FP8 math (the GPU kernels' "promotion"): for every 128-wide block kb of K, the FP32 partial
//   product P_kb[m, n] = sum_{k in kb} a[m, k] * b[n, k] is scaled and accumulated in FP32:
//     acc += (a_scale[m, kb] * b_scale[n / 128, kb]) * P_kb;   D = C + acc.
// - Output d: bfloat16 or float32. The optional c (float32, the shape of d; it may be d itself)
//   is added: D = C + A * B^T; with c, d must be float32 (accumulation for weight gradients).
// - Layout rules (what the GPU's TMA needs, checked for every device): every tensor's data pointer is
//   16-byte aligned, the innermost dimension is contiguous (stride 1) and the other strides are
//   multiples of 16 bytes; d must not overlap an input (c may be d itself).
// - All tensors of a call are on one device. CPU tensors run the threaded CPU path (OpenMP); CUDA
//   tensors run the Hopper kernels (sm_90a; other GPUs get a user error naming the call).
// - Bad input is an rt::Error of kind User naming the function and the argument.
// - Each call records the configuration it used: deepgemm::last_config() (deepgemm/config.h), and
//   DG_PRINT_CONFIGS=1 prints it once per distinct call shape.
#pragma once

#include <cstdint>
#include <vector>

#include "rt/tensor.h"

namespace deepgemm {

// ---------------------------------------------------------------------------------------------
// FP8 GEMMs: D = C + A * B^T with A, B float8_e4m3, A scaled per 1x128, B per 128x128.
//   nt: a [M, K],  a_scales [M, K/128],  b [N, K],  b_scales [ceil(N/128), K/128]
//   nn: a [M, K],  a_scales [M, K/128],  b [K, N],  b_scales [K/128, ceil(N/128)]
//   tn: a [K, M],  a_scales [K/128, M],  b [K, N],  b_scales [K/128, ceil(N/128)]
//   tt: a [K, M],  a_scales [K/128, M],  b [N, K],  b_scales [ceil(N/128), K/128]
//   d [M, N] bfloat16 or float32; c optional float32 [M, N] (then d float32; c may be d).
void fp8_gemm_nt(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                 const rt::Tensor& d, const rt::Tensor& c = {});
void fp8_gemm_nn(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                 const rt::Tensor& d, const rt::Tensor& c = {});
void fp8_gemm_tn(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                 const rt::Tensor& d, const rt::Tensor& c = {});
void fp8_gemm_tt(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                 const rt::Tensor& d, const rt::Tensor& c = {});

// ---------------------------------------------------------------------------------------------
// BF16 GEMMs: D = C + A * B^T in FP32, A and B bfloat16 with the same storage letters as above.
void bf16_gemm_nt(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d, const rt::Tensor& c = {});
void bf16_gemm_nn(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d, const rt::Tensor& c = {});
void bf16_gemm_tn(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d, const rt::Tensor& c = {});
void bf16_gemm_tt(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d, const rt::Tensor& c = {});

// ---------------------------------------------------------------------------------------------
// FP8 x FP4: A float8_e4m3 scaled per 1x128 as above; B float4_e2m1 (two per byte along K, element
// 0 in the low nibble), [N, K], K-major, scaled per 1x32 or 1x128 block along K (per row of B):
// b_scales [N, K/32] or [N, K/128] (the shape says which), float32 or ue8m0. The promotion block is
// the finer of the two scale blocks (32 or 128). e2m1 values are exact in e4m3, so the GPU kernels
// will convert B to FP8 after loading it.
void fp8_fp4_gemm_nt(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b, const rt::Tensor& b_scales,
                     const rt::Tensor& d, const rt::Tensor& c = {});

// ---------------------------------------------------------------------------------------------
// M-grouped GEMMs (mixture-of-experts): G groups (experts) share N and K; group g multiplies its
// rows of A by its own B[g].

// Contiguous layout: the tokens of all groups concatenated along M.
//   a [M, K], a_scales [M, K/128], b [G, N, K], b_scales [G, ceil(N/128), K/128], d [M, N] (bf16 or f32),
//   m_indices [M] int32: the group of each row, -1 for padding rows.
// Each group's segment starts at a multiple of get_mk_alignment_for_contiguous_layout() (128) rows
// and its padding rows (-1) come at the end of it: every aligned block of 128 rows holds the rows of
// at most one group, then padding. Padding rows of d are set to zero. The CPU path checks the
// indices (range and layout); on a GPU they are read as they are (a block takes its first row's group).
void m_grouped_fp8_gemm_nt_contiguous(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                      const rt::Tensor& b_scales, const rt::Tensor& d, const rt::Tensor& m_indices);
// Masked layout: a fixed-capacity batch, usable inside CUDA graphs without a host sync.
//   a [G, max_M, K], a_scales [G, max_M, K/128], b [G, N, K], b_scales [G, ceil(N/128), K/128],
//   d [G, max_M, N] (bf16 or f32), masked_m [G] int32: rows [0, masked_m[g]) of group g are computed;
//   rows at and past masked_m[g] of d are left untouched. expected_m (> 0) is the typical count, a
//   hint for the GPU kernels' configuration.
void m_grouped_fp8_gemm_nt_masked(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                  const rt::Tensor& b_scales, const rt::Tensor& d, const rt::Tensor& masked_m,
                                  int64_t expected_m);
// The same with FP4 B: b [G, N, K] float4_e2m1, b_scales [G, N, K/32] or [G, N, K/128].
void m_grouped_fp8_fp4_gemm_nt_contiguous(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                          const rt::Tensor& b_scales, const rt::Tensor& d,
                                          const rt::Tensor& m_indices);
void m_grouped_fp8_fp4_gemm_nt_masked(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                      const rt::Tensor& b_scales, const rt::Tensor& d, const rt::Tensor& masked_m,
                                      int64_t expected_m);
// BF16: the same layouts without scales.
void m_grouped_bf16_gemm_nt_contiguous(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d,
                                       const rt::Tensor& m_indices);
void m_grouped_bf16_gemm_nt_masked(const rt::Tensor& a, const rt::Tensor& b, const rt::Tensor& d,
                                   const rt::Tensor& masked_m, int64_t expected_m);

// K-grouped FP8 GEMM for MoE weight gradients: group g owns ks[g] consecutive rows of a and b (the
// tokens, K, concatenated), and D[g] = C[g] + A_g * B_g^T with A_g = a[rows of g]^T ([M, ks[g]]).
//   a [sum(ks), M] and b [sum(ks), N] float8_e4m3 (both MN-major: the "tn" storage as above),
//   a_scales [sum(ks)/128, M], b_scales [sum(ks)/128, N]: both scaled per 128 of K per column
//   (per_channel_cast_to_fp8), float32 or ue8m0; each ks[g] a multiple of 128 (0 allowed: D[g] = C[g]);
//   d [G, M, N] float32; c optional [G, M, N] float32 (may be d).
void k_grouped_fp8_gemm_tn_contiguous(const rt::Tensor& a, const rt::Tensor& a_scales, const rt::Tensor& b,
                                      const rt::Tensor& b_scales, const rt::Tensor& d, const std::vector<int64_t>& ks,
                                      const rt::Tensor& c = {});

}  // namespace deepgemm
