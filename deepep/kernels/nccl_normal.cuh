// Device code of normal-mode dispatch and combine on the nccl data plane (src/buffer/nccl_dispatch.cc):
// NCCL moves contiguous pieces between the ranks, so dispatch first gathers each destination's rows
// into one staging area, and combine reduces the rows NCCL returned into a staging area. The row
// writes and the reduction are the cuda_ipc kernels' (intranode.cuh: dispatch_row, reduce_token), so
// both planes give the CPU path's bits. No signalling: the host orders the kernels and NCCL on one
// stream. JIT-compiled by NVRTC like intranode.cuh.
#pragma once

#include "deepep/kernels/intranode.cuh"

namespace deepep::kernels {

// The rows this rank sends, destination by destination in rank order and each destination's in slot
// order, into the staging arrays `to` (dispatch_row's arrays; 0: absent): staging row j is slot
// j - begin[d] of destination d, where begin[d] sums sent[0 .. d) (sent: the tokens sent to each
// rank), and that slot's token is order[d * tokens + slot]. One warp per row. Dynamic shared memory:
// ranks + 1 words.
__device__ __forceinline__ void nccl_dispatch_gather_body(const unsigned char* x, const unsigned char* scales,
                                                          const void* topk, int topk_i64, int k, const float* weights,
                                                          const int* order, i64 tokens, const i64* sent, int ranks,
                                                          const ArrayAddresses& to, const RegionRows& rows,
                                                          int experts_per_rank) {
  i64* const begin = shared_words();  // [ranks + 1]
  if (threadIdx.x == 0) {
    begin[0] = 0;
    for (int d = 0; d < ranks; ++d) begin[d + 1] = begin[d] + sent[d];
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (i64 j = i64(blockIdx.x) * warps + threadIdx.x / 32; j < begin[ranks]; j += i64(gridDim.x) * warps) {
    int lo = 0, hi = ranks - 1;  // the last d with begin[d] <= j (a destination with rows)
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (begin[mid] <= j)
        lo = mid;
      else
        hi = mid - 1;
    }
    dispatch_row(to, j, order[i64(lo) * tokens + (j - begin[lo])], lo, x, scales, topk, topk_i64, k, weights, rows,
                 experts_per_rank, lane);
  }
}

// At the source: out[t] = token t's returned rows summed in rank order in f32 (reduce_token), with
// its weights into out_w when given. stage holds the rows returned by each rank r, r after r in rank
// order (sent[r] rows each, in r's slot order), and stage_w their k weights the same way; rank r's
// row of token t is at slot[t * ranks + r] of r's rows (-1: t did not go to r). One warp per token.
// Dynamic shared memory: 2 ranks words.
template <class T>
__device__ __forceinline__ void nccl_combine_reduce_body(T* out, const T* stage, const float* stage_w, i64 hidden,
                                                         const int* slot, const i64* sent, int ranks, i64 tokens,
                                                         float* out_w, int k) {
  i64* const x_at = shared_words();  // [ranks] each: the first element of rank r's rows, of its weights
  i64* const w_at = x_at + ranks;
  if (threadIdx.x == 0) {
    i64 rows = 0;
    for (int r = 0; r < ranks; ++r) {
      x_at[r] = rows * hidden;
      w_at[r] = rows * k;
      rows += sent[r];
    }
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  const bool vec = ((u64(out) | u64(stage) | u64(hidden * i64(sizeof(T)))) & 15) == 0;
  for (i64 t = i64(blockIdx.x) * warps + threadIdx.x / 32; t < tokens; t += i64(gridDim.x) * warps)
    reduce_token(out, stage, stage_w, x_at, w_at, slot, t, ranks, hidden, out_w, k, vec, lane);
}

}  // namespace deepep::kernels
