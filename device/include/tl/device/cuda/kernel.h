// Helpers the CUDA code generator's output calls beyond tl/device/scalar.h: atomic accumulation
// into any element type, and a tile matrix multiply done cooperatively by a block's threads (the
// portable first lowering of T.gemm; Hopper's tensor-core path lives in gemm_sm90.h).
#pragma once

#include "tl/device/cuda/arch.h"
#include "tl/device/numeric.h"
#include "tl/device/scalar.h"

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#error "tl/device/cuda/ headers are CUDA device code: compile them with nvcc or NVRTC"
#endif

namespace tl::cuda {

// 2^x on the special-function unit alone (ex2.approx.ftz.f32: about 2 ulp; results below 2^-126,
// where x < -126, flush to zero). exp2f keeps such results subnormal at the price of a compare and
// two predicated multiplies around every call -- 12% of an attention step's instructions.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// *p += v, atomically; narrow floats through a compare-and-swap on their bits.
__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, float v) { atomicAdd(p, double(v)); }
__device__ __forceinline__ void atomic_add(int32_t* p, float v) { atomicAdd(reinterpret_cast<int*>(p), int(v)); }
__device__ __forceinline__ void atomic_add(int64_t* p, float v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(static_cast<long long>(v)));
}
template <class T>
__device__ __forceinline__ void atomic_add(T* p, float v) {
  static_assert(sizeof(p->bits) == 2, "atomic_add on this element type is not supported on the GPU");
  // 16-bit formats: CAS on the aligned 32-bit word holding the element.
  auto* word = reinterpret_cast<unsigned int*>(reinterpret_cast<size_t>(p) & ~size_t(3));
  const unsigned int shift = (reinterpret_cast<size_t>(p) & 2) ? 16u : 0u;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const float current = T::from_bits(static_cast<uint16_t>((assumed >> shift) & 0xFFFFu)).to_float();
    const unsigned int bits = tl::from_float<T>(current + v).bits;
    old = atomicCAS(word, assumed, (assumed & ~(0xFFFFu << shift)) | (bits << shift));
  } while (old != assumed);
}

// C[i*ldc + j] (=|+=) sum_k opA(i,k) * opB(k,j), the output elements dealt round-robin to the
// kernel's `threads` threads (the first of the block: a warp-specialized block has a producer
// warpgroup after them); accumulation in float, or for an int32 C (integer inputs, which the code
// generator checks) in 32-bit integers that wrap as the tensor cores' s32 sums do. Each of them
// calls it; it does not synchronize (the caller's barriers order it with the code around).
template <class TA, class TB, class TC>
__device__ __forceinline__ void tile_gemm(int M, int N, int K, const TA* A, int64_t lda, bool trans_a, const TB* B, int64_t ldb,
                                          bool trans_b, TC* C, int64_t ldc, bool clear, int threads) {
  if constexpr (is_same_v<TC, int32_t>) {
    for (int e = threadIdx.x; e < M * N; e += threads) {
      const int i = e / N, j = e % N;
      uint32_t acc = clear ? 0u : uint32_t(C[i * ldc + j]);
      for (int k = 0; k < K; ++k)
        acc += uint32_t(int32_t(trans_a ? A[k * lda + i] : A[i * lda + k])) * uint32_t(int32_t(trans_b ? B[j * ldb + k] : B[k * ldb + j]));
      C[i * ldc + j] = int32_t(acc);
    }
    return;
  }
  for (int e = threadIdx.x; e < M * N; e += threads) {
    const int i = e / N, j = e % N;
    float acc = clear ? 0.0f : tl::to_float(C[i * ldc + j]);
    for (int k = 0; k < K; ++k) {
      const float a = tl::to_float(trans_a ? A[k * lda + i] : A[i * lda + k]);
      const float b = tl::to_float(trans_b ? B[j * ldb + k] : B[k * ldb + j]);
      acc += a * b;
    }
    C[i * ldc + j] = tl::from_float<TC>(acc);
  }
}

}  // namespace tl::cuda
