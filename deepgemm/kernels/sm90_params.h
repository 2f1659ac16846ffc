// The run-time arguments of DeepGEMM's Hopper kernel (sm90_gemm.cuh), shared by the host code that
// fills them (deepgemm/src/gpu.cc) and the device code that reads them: one struct passed by value
// as a __grid_constant__ kernel parameter, so host and device must see the same layout (plain
// fixed-width fields, no padding surprises: 8-byte fields first).
#pragma once

#include "tl/device/numeric.h"
#include "tl/device/split_k.h"

namespace deepgemm::kernels {

using tl::int32_t;
using tl::int64_t;
using tl::uint32_t;
using tl::uint64_t;
using tl::uint8_t;

// The loop without a second partial set (Sm90GemmConfig::kStagedSfb) reads B's block scales from a
// window of this many k-blocks per consumer warp in shared memory (host and kernel both size it).
// An enumerator: with -default-device NVRTC would emit a namespace-scope variable as a device global.
enum : int { kSm90SfbWindow = 32 };

// Whether an FP8 tile with block scales of B has registers for a second partial set (64- and
// 128-row tiles up to 128 wide: 3 x 64 accumulators a thread), which the kernel's loop then uses
// (Sm90GemmConfig::kOverlapPromotion); the other tiles take the staged-scale loop. Host and kernel
// both decide by it (the host sizes the staged window's shared memory).
constexpr bool sm90_two_partial_sets(int block_m, int block_n) {
  return (block_m == 64 || block_m == 128) && block_n <= 128;
}

struct Sm90GemmParams {
  // B's scale factors (FP8 only; A's come through a TMA map): one per 128 rows of B (N) and 128 of
  // K, element (g, r, kb) at sfb[g * s_g + r * s_r + kb * s_c].
  const float* sfb;
  // D for the direct (non-TMA) epilogue, element (g, r, c) at d[g * d_sg + r * d_sr + c].
  void* d;
  // C (FP32 output only; may be d itself): D = C + A B^T; element (g, r, c) at c[g * c_sg + r * c_sr + c].
  const float* c;
  const int32_t* m_indices;  // M-grouped contiguous: the group of each row of A/D, -1 for padding
  const int32_t* masked_m;   // M-grouped masked: the valid rows of each group
  // Plain GEMMs of several rounds of tiles: the producers' barriers between rounds
  // (tl/device/cuda/round_sync.h): two words, zero; null for none.
  uint32_t* round_sync;
  // Split-K (plain GEMMs; tl/device/split_k.h): the tiles past split_k.dp_tiles run as pieces of K
  // that sum their partials in the kernel. SplitK{} for none.
  tl::SplitK split_k;
  int64_t sfb_sg, sfb_sr, sfb_sc;
  int64_t d_sg, d_sr;
  int64_t c_sg, c_sr;
  int32_t m;           // rows of D: all groups (none, contiguous), or max_M per group (masked)
  int32_t n, k;
  int32_t num_groups;  // groups of B (and of A/D when masked)
  int32_t sfb_rows;    // ceil(N / 128)
  int32_t raster_group;
  int32_t round_sync_every;  // with round_sync: the producers meet before every this many rounds
};

}  // namespace deepgemm::kernels
