// Quantization to the GEMMs' input formats, and the scale layouts (docs/deepgemm.md, "Scaling").
//
// Every cast takes a 2-D bfloat16, float16 or float32 tensor (any strides) and returns new
// contiguous tensors (values, scales), like DeepGEMM's test utilities:
//   amax  = max(|x|) over the block, at least 1e-4 (so all-zero blocks get a finite scale)
//   scale = amax / 448 (FP8) or amax / 6 (FP4), in float32
//   with use_ue8m0: scale = 2^ceil(log2(scale)), the smallest power of two >= it (exact as ue8m0)
//   q     = round-to-nearest-even(x * (1 / scale)), saturated to the format's range
// so that x ~= q * scale and the block's amax maps to at most 448 (6). Scales come back as float32
// (powers of two with use_ue8m0); cast_scales_to_ue8m0() makes ue8m0 tensors of those.
// NaN and infinite inputs are not checked: a NaN stays out of the amax (and becomes NaN, or +6 in
// e2m1); an infinity makes its block's scale infinite (2^127 with use_ue8m0) and zeroes the block's
// finite values (docs/deepgemm.md, "Scaling recipes").
//
// The casts run on CPU or CUDA tensors (the results on the same device, the same bits; on the GPU in
// the stream of set_stream()). cast_scales_to_ue8m0 runs on CPU tensors.
#pragma once

#include <cstdint>
#include <utility>

#include "rt/tensor.h"

namespace deepgemm {

// x [M, K] -> (float8_e4m3 [M, K], float32 scales [M, ceil(K/128)]): one scale per row and 128 of K
// (per token; the A operand's scaling). A trailing partial block has its own scale.
std::pair<rt::Tensor, rt::Tensor> per_token_cast_to_fp8(const rt::Tensor& x, bool use_ue8m0 = false);
// x [N, K] -> (float8_e4m3 [N, K], float32 scales [ceil(N/128), ceil(K/128)]): one scale per 128x128
// block (the B operand's scaling).
std::pair<rt::Tensor, rt::Tensor> per_block_cast_to_fp8(const rt::Tensor& x, bool use_ue8m0 = false);
// x [K, MN] -> (float8_e4m3 [K, MN], float32 scales [ceil(K/128), MN]): one scale per column and 128
// rows (the operands of k_grouped_fp8_gemm_tn_contiguous, whose K runs along rows).
std::pair<rt::Tensor, rt::Tensor> per_channel_cast_to_fp8(const rt::Tensor& x, bool use_ue8m0 = false);
// x [N, K] -> (float4_e2m1 [N, K] packed two per byte along K, float32 scales [N, ceil(K/gran_k)]):
// one scale per row and gran_k (32 or 128) of K, amax / 6; K must be even.
std::pair<rt::Tensor, rt::Tensor> per_token_cast_to_fp4(const rt::Tensor& x, int64_t gran_k = 32,
                                                        bool use_ue8m0 = true);

// A float32 scale tensor whose values are all powers of two (use_ue8m0 casts) as ue8m0, same shape
// and layout rules (a new contiguous tensor); a user error naming the first other value.
rt::Tensor cast_scales_to_ue8m0(const rt::Tensor& scales);

// ---------------------------------------------------------------------------------------------
// Layout helpers (DeepGEMM's names).

// Rows per alignment block of the M-grouped contiguous layout (and of k_grouped ks): 128.
int64_t get_mk_alignment_for_contiguous_layout();
// x rounded up so that x elements of element_size bytes span a multiple of 16 bytes (TMA).
int64_t get_tma_aligned_size(int64_t x, int64_t element_size);
// The scale layout the GPU kernels read (TMA): a new tensor with the same logical shape, [MN, KB] or
// [G, MN, KB], stored MN-major with the MN dimension padded to get_tma_aligned_size(MN, element):
// strides (1, MN') or (KB * MN', 1, MN'), MN' = MN rounded up to 4 floats / 16 ue8m0 values (the
// padding is zero). Accepted by every GEMM's scale argument, as is the plain row-major form.
rt::Tensor get_mn_major_tma_aligned_tensor(const rt::Tensor& scales);

}  // namespace deepgemm
