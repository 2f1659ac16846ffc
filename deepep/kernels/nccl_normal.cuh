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
// rank), and that slot's token is order[d * tokens + slot]. keep_global: the top-k indices stay the
// global experts (the hierarchical route's records for a node's forwarder, which remaps them for
// each rank it hands them to), d only groups the rows. src_of (null: the token itself): each
// token's source index (a forwarder's staged rows came from other ranks' tokens). One warp per row.
// Dynamic shared memory: ranks + 1 words.
__device__ __forceinline__ void nccl_dispatch_gather_body(const unsigned char* x, const unsigned char* scales,
                                                          const void* topk, int topk_i64, int k, const float* weights,
                                                          const int* order, i64 tokens, const i64* sent, int ranks,
                                                          const ArrayAddresses& to, const RegionRows& rows,
                                                          int experts_per_rank, int keep_global, const int* src_of) {
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
    const i64 t = order[i64(lo) * tokens + (j - begin[lo])];
    // Global: destination 0 holding every expert index (an entry of -1 stays -1, weight 0).
    dispatch_row(to, j, t, keep_global ? 0 : lo, x, scales, topk, topk_i64, k, weights, rows,
                 keep_global ? 0x7fffffff : experts_per_rank, lane);
    if (src_of && to.at[4] && lane == 0) reinterpret_cast<int*>(to.at[4])[j] = src_of[t];  // after dispatch_row's
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

// --- the hierarchical route (nccl_internode.cc; the CPU path's sums: combine.cc) ---------------------

// One step of a sum as the CPU path folds it: the first term starts a bf16 sum as it is and the other
// dtypes' from 0; later terms add.
template <class T>
__device__ __forceinline__ float fold_term(float acc, float x, bool first) {
  if (first) return same_type<T, bf16_t>::value ? x : 0.0f + x;
  return acc + x;
}

// At a forwarder, each staged token's partial over the rows its node's ranks returned (slots
// slot_offset[j] .. slot_offset[j + 1], in rank order; slot s's row is row slot_row[s] of fstage):
// one row, as it is (T); several, their f32 sum -- at byte partial_off[j] of `partials`; the
// weights (k floats at row j of partial_w) copied or summed from 0. One warp per staged token.
template <class T>
__device__ __forceinline__ void nccl_forward_partial_body(unsigned char* partials, const i64* partial_off,
                                                          float* partial_w, const T* fstage, const float* fstage_w,
                                                          const i64* slot_row, const i64* slot_offset, i64 staged,
                                                          i64 hidden, int k) {
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (i64 j = i64(blockIdx.x) * warps + threadIdx.x / 32; j < staged; j += i64(gridDim.x) * warps) {
    const i64 s0 = slot_offset[j], s1 = slot_offset[j + 1];
    unsigned char* const out = partials + partial_off[j];
    if (s1 - s0 == 1) {
      const T* row = fstage + slot_row[s0] * hidden;
      for (i64 c = lane; c < hidden; c += 32) reinterpret_cast<T*>(out)[c] = row[c];
      for (int q = lane; q < k; q += 32) partial_w[j * k + q] = fstage_w[slot_row[s0] * k + q];
      continue;
    }
    for (i64 c = lane; c < hidden; c += 32) {
      float acc = 0.0f;
      for (i64 s = s0; s < s1; ++s) acc = fold_term<T>(acc, Elem<T>::load(fstage + slot_row[s] * hidden, c), s == s0);
      reinterpret_cast<float*>(out)[c] = acc;
    }
    for (int q = lane; q < k; q += 32) {
      float w = 0.0f;
      for (i64 s = s0; s < s1; ++s) w += fstage_w[slot_row[s] * k + q];
      partial_w[j * k + q] = w;
    }
  }
}

// At the source, token t's sum over the nodes in node order: its own node's from the rows its ranks
// returned (own_offset[t] .. own_offset[t + 1], in rank order, rows own_row[.] of ostage), another
// node n's from the partial its forwarder sent (at byte partial_at[t * nodes + n] of pin, -1: none;
// single[t * nodes + n]: a row of T, else f32), rounded once into out[t] (0 where the token went
// nowhere); the weights the same way from 0 (pin_w's row partial_at_w[t * nodes + n]). One warp per token.
template <class T>
__device__ __forceinline__ void nccl_hierarchical_reduce_body(T* out, float* out_w, const T* ostage,
                                                              const float* ostage_w, const i64* own_offset,
                                                              const i64* own_row, const unsigned char* pin,
                                                              const float* pin_w, const i64* partial_at,
                                                              const i64* partial_at_w, const unsigned char* single,
                                                              i64 tokens, i64 hidden, int k, int nodes, int mine) {
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (i64 t = i64(blockIdx.x) * warps + threadIdx.x / 32; t < tokens; t += i64(gridDim.x) * warps) {
    const i64 o0 = own_offset[t], o1 = own_offset[t + 1];
    for (i64 c = lane; c < hidden; c += 32) {
      float total = 0.0f;
      bool first = true;
      for (int n = 0; n < nodes; ++n) {
        float sum = 0.0f;
        if (n == mine) {
          if (o0 == o1) continue;
          for (i64 s = o0; s < o1; ++s) sum = fold_term<T>(sum, Elem<T>::load(ostage + own_row[s] * hidden, c), s == o0);
        } else {
          const i64 at = partial_at[t * nodes + n];
          if (at < 0) continue;
          sum = single[t * nodes + n] ? fold_term<T>(0.0f, Elem<T>::load(reinterpret_cast<const T*>(pin + at), c), true)
                                      : reinterpret_cast<const float*>(pin + at)[c];
        }
        total = fold_term<T>(total, sum, first);
        first = false;
      }
      Elem<T>::store(out + t * hidden, c, first ? 0.0f : total);
    }
    for (int q = lane; out_w != nullptr && q < k; q += 32) {
      float total = 0.0f;
      for (int n = 0; n < nodes; ++n) {
        if (n == mine) {
          if (o0 == o1) continue;
          float w = 0.0f;
          for (i64 s = o0; s < o1; ++s) w += ostage_w[own_row[s] * k + q];
          total += w;
        } else if (partial_at_w[t * nodes + n] >= 0) {
          total += pin_w[partial_at_w[t * nodes + n] * k + q];
        }
      }
      out_w[t * k + q] = total;
    }
  }
}

}  // namespace deepep::kernels
