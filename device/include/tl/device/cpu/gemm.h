// CPU twin GEMM: a cache-blocked, packed, multithreaded float-accumulating GEMM (BLIS/GotoBLAS
// design) and a single-threaded tile GEMM for the tiles generated kernels hold in memory.
//
//   tl::cpu::gemm(M, N, K, A, lda, trans_a, B, ldb, trans_b, epi [, blocking])
//     acc[i][j] = sum_k opA(i,k) * opB(k,j) in float, where opA(i,k) = trans_a ? A[k*lda+i] : A[i*lda+k]
//     and opB(k,j) = trans_b ? B[j*ldb+k] : B[k*ldb+j]. Inputs may be float, half_t, bfloat16_t,
//     float8_e4m3_t, float8_e5m2_t, int8_t, ... (anything tl::to_float accepts); they are converted
//     to float while packing. The result goes to the epilogue, micro-tile by micro-tile:
//       epi(int64_t i0, int64_t j0, int rows, int cols, const float* acc, int64_t ld_acc)
//     where acc[r*ld_acc + c] is the final sum for element (i0+r, j0+c). Each output element is in
//     exactly one call. Calls come from several threads at once (for disjoint regions).
//   tl::cpu::gemm_tile(M, N, K, A, lda, trans_a, B, ldb, trans_b, C, ldc)
//     C[i*ldc+j] += sum_k opA(i,k) * opB(k,j), C float, single-threaded (no OpenMP inside), meant
//     for tiles of 16..256 held in memory (T.gemm on shared/fragment buffers of the CPU twin).
//   tl::cpu::gemm_tile_int32(...): the same for integer inputs into an int32 C (wrapping sums).
//
// Design: B is packed into kc x nc panels of NR-wide micro-panels (kept in L2), A into MR-tall
// micro-panels (one lives in L1 while the kernel sweeps the B panel); the micro-kernel keeps an
// MR x NR float accumulator in vector registers (14x32 with AVX-512, 6x16 with AVX/AVX2, 6x8 with
// SSE, 4x8 generic). Edges are zero-padded in the packs and clipped in the epilogue. When K needs
// more than one kc pass, partial sums live in a per-thread float workspace and only the last pass
// calls the epilogue. Threads split the output into a tm x tn grid of independent blocks (no
// barriers); the grid minimises per-thread compute plus packing.
//
// The ISA-specific code sits in an inline namespace named after the vector ISA, so objects built
// with different -march flags never share (ODR-merge) a kernel.
//
// Notes for callers:
// - Preconditions are not checked: lda/ldb must cover the stored rows, pointers must be valid for
//   the logical extents. M, N or K <= 0 are fine (K = 0 hands zeros to the epilogue).
// - Without OpenMP, or when called inside an OpenMP parallel region, gemm runs on one thread.
// - Packing buffers are per-thread and reused across calls (thread_local); an epilogue must not call
//   tl::cpu::gemm itself (gemm_tile has its own buffers and is fine). An exception thrown by an
//   epilogue (or a scratch allocation) on any thread reaches the caller after the parallel region
//   (the first one thrown; the other threads finish their blocks), with C partly written.
// - On a machine where other processes keep cores busy, OpenMP's default spin-waiting makes the
//   threads fight them; OMP_WAIT_POLICY=passive avoids that (at a few % on small, idle runs).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__unix__)
#include <unistd.h>
#endif

#include "tl/device/numeric.h"

#if defined(__AVX512F__)
#define TL_CPU_ISA_NS isa_avx512
#elif defined(__AVX__)
#define TL_CPU_ISA_NS isa_avx
#elif defined(__SSE2__)
#define TL_CPU_ISA_NS isa_sse2
#else
#define TL_CPU_ISA_NS isa_generic
#endif

#if defined(__GNUC__)
#define TL_CPU_INLINE inline __attribute__((always_inline))
#define TL_CPU_NOINLINE __attribute__((noinline))
#define TL_CPU_RESTRICT __restrict__
#else
#define TL_CPU_INLINE inline
#define TL_CPU_NOINLINE
#define TL_CPU_RESTRICT
#endif

namespace tl::cpu {

// Cache blocking of tl::cpu::gemm. mc: rows of A packed per block (rounded to MR); nc: columns of
// the packed B panel (rounded to NR); kc: depth of one pass (at most; passes are balanced);
// threads: 0 = omp_get_max_threads(), otherwise this many (small problems use fewer; inside an
// OpenMP parallel region, or without OpenMP, always one). Values <= 0 fall back to the defaults.
struct GemmBlocking {
  int mc;
  int nc;
  int kc;
  int threads;
};

// The register micro-tile (rows x columns of floats) of the kernel built for a vector width:
// 14x32 with AVX-512, 6x16 with AVX/AVX2, 6x8 with SSE2 (simd_bits 128).
struct MicroTile {
  int mr, nr;
};
constexpr MicroTile micro_tile_for(int simd_bits) {
  return simd_bits >= 512 ? MicroTile{14, 32} : simd_bits >= 256 ? MicroTile{6, 16} : MicroTile{6, 8};
}

// Cache blocking from the cache sizes and the micro-tile (the BLIS recipe); the compiler's CPU
// schedule calls this with the host's description, default_blocking() with this build's own.
inline GemmBlocking blocking_for(int64_t l1_bytes, int64_t l2_bytes, MicroTile tile, int threads) {
  GemmBlocking b;
  // kc: an A micro-panel (mr x kc floats) takes about a third of L1 while the kernel streams B.
  int64_t kc = l1_bytes / 3 / (tile.mr * int64_t(sizeof(float)));
  kc = std::clamp<int64_t>(kc / 16 * 16, 64, 1024);
  // nc: the packed B panel (kc x nc floats) takes about 5/8 of L2; a wide panel means A is packed
  // fewer times.
  int64_t nc = l2_bytes * 5 / 8 / (kc * int64_t(sizeof(float)));
  nc = std::clamp<int64_t>(nc / tile.nr * tile.nr, tile.nr, 8192);
  b.kc = int(kc);
  b.nc = int(nc);
  b.mc = 8 * tile.mr;  // rows of A packed per block (kc x mc floats, in L2)
  b.threads = threads;
  return b;
}

inline namespace TL_CPU_ISA_NS {
namespace detail {

// ---------------------------------------------------------------------------------------------
// Vector layer: one register type `vec` of kW floats and the handful of operations the kernel uses.
#if defined(__AVX512F__)
constexpr int kW = 16;
using vec = __m512;
TL_CPU_INLINE vec vzero() { return _mm512_setzero_ps(); }
TL_CPU_INLINE vec vload(const float* p) { return _mm512_loadu_ps(p); }
TL_CPU_INLINE void vstore(float* p, vec v) { _mm512_storeu_ps(p, v); }
TL_CPU_INLINE vec vbcast(float s) { return _mm512_set1_ps(s); }
TL_CPU_INLINE vec vfma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
TL_CPU_INLINE vec vadd(vec a, vec b) { return _mm512_add_ps(a, b); }
constexpr int kMR = 14, kNV = 2;
#elif defined(__AVX__)
constexpr int kW = 8;
using vec = __m256;
TL_CPU_INLINE vec vzero() { return _mm256_setzero_ps(); }
TL_CPU_INLINE vec vload(const float* p) { return _mm256_loadu_ps(p); }
TL_CPU_INLINE void vstore(float* p, vec v) { _mm256_storeu_ps(p, v); }
TL_CPU_INLINE vec vbcast(float s) { return _mm256_set1_ps(s); }
#if defined(__FMA__)
TL_CPU_INLINE vec vfma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
#else
TL_CPU_INLINE vec vfma(vec a, vec b, vec c) { return _mm256_add_ps(_mm256_mul_ps(a, b), c); }
#endif
TL_CPU_INLINE vec vadd(vec a, vec b) { return _mm256_add_ps(a, b); }
constexpr int kMR = 6, kNV = 2;
#else
// SSE2 or anything else: GCC vector extensions (16 bytes), lowered to whatever the target has.
constexpr int kW = 4;
typedef float vec __attribute__((vector_size(16)));
typedef float vec_u __attribute__((vector_size(16), aligned(4)));
TL_CPU_INLINE vec vzero() { return vec{0.0f, 0.0f, 0.0f, 0.0f}; }
TL_CPU_INLINE vec vload(const float* p) { return *reinterpret_cast<const vec_u*>(p); }
TL_CPU_INLINE void vstore(float* p, vec v) { *reinterpret_cast<vec_u*>(p) = v; }
TL_CPU_INLINE vec vbcast(float s) { return vec{s, s, s, s}; }
TL_CPU_INLINE vec vfma(vec a, vec b, vec c) { return a * b + c; }
TL_CPU_INLINE vec vadd(vec a, vec b) { return a + b; }
#if defined(__SSE2__)
constexpr int kMR = 6, kNV = 2;
#else
constexpr int kMR = 4, kNV = 2;
#endif
#endif
constexpr int kNR = kW * kNV;

// ---------------------------------------------------------------------------------------------
// Micro-kernel: cout[i*ldo + j] = (kLoadC ? cin[i*ldi + j] : 0) + sum_{k<kc} a[k*kMR + i] * b[k*ldb + j]
// for the full kMR x kNR tile. `a` is a packed A micro-panel, `b` rows of kNR floats with stride ldb.
template <bool kLoadC>
TL_CPU_INLINE void micro_kernel(int64_t kc, const float* TL_CPU_RESTRICT a, const float* TL_CPU_RESTRICT b,
                                int64_t ldb, const float* cin, int64_t ldi, float* cout, int64_t ldo) {
  vec acc[kMR][kNV];
#pragma GCC unroll 16
  for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) acc[i][v] = vzero();

  int64_t k = 0;
  for (; k + 4 <= kc; k += 4) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const float* bk = b + (k + u) * ldb;
      const float* ak = a + (k + u) * kMR;
      __builtin_prefetch(bk + 8 * ldb, 0, 3);
      vec bv[kNV];
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) bv[v] = vload(bk + v * kW);
#pragma GCC unroll 16
      for (int i = 0; i < kMR; ++i) {
        const vec av = vbcast(ak[i]);
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v) acc[i][v] = vfma(av, bv[v], acc[i][v]);
      }
    }
  }
  for (; k < kc; ++k) {
    const float* bk = b + k * ldb;
    const float* ak = a + k * kMR;
    vec bv[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) bv[v] = vload(bk + v * kW);
#pragma GCC unroll 16
    for (int i = 0; i < kMR; ++i) {
      const vec av = vbcast(ak[i]);
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) acc[i][v] = vfma(av, bv[v], acc[i][v]);
    }
  }

  if constexpr (kLoadC) {
#pragma GCC unroll 16
    for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) vstore(cout + i * ldo + v * kW, vadd(vload(cin + i * ldi + v * kW), acc[i][v]));
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) vstore(cout + i * ldo + v * kW, acc[i][v]);
  }
}

// ---------------------------------------------------------------------------------------------
// Conversion of a contiguous run to float (vectorised for the common element types).
template <class T>
TL_CPU_INLINE void convert_run(const T* TL_CPU_RESTRICT src, float* TL_CPU_RESTRICT dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = uint32_t(src[i].bits) << 16;
      std::memcpy(dst + i, &u, 4);
    }
  } else if constexpr (std::is_same_v<T, half_t>) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(__mmask16(0xffff), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
    for (; i < n; ++i) dst[i] = src[i].to_float();
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = tl::to_float(src[i]);
  }
}

// n elements converted to float, zero-filled up to `width` (the edge of a packed micro-panel).
template <class T>
TL_CPU_INLINE void convert_padded(const T* TL_CPU_RESTRICT src, float* TL_CPU_RESTRICT dst, int n, int width) {
  if (n == width) return convert_run(src, dst, width);
  int i = 0;
  for (; i < n; ++i) dst[i] = tl::to_float(src[i]);
  for (; i < width; ++i) dst[i] = 0.0f;
}

#if defined(__AVX512F__)
// In-register transpose of 16 vectors of 16 floats: r[c] becomes column c of the input. Written
// with generic shuffles (GCC picks vunpck*/vshuff*/vpermt2*), which also sidesteps GCC 12's false
// -Wmaybe-uninitialized warnings from the unpack/shuffle intrinsics.
typedef float v16sf_t __attribute__((vector_size(64)));
TL_CPU_INLINE void transpose16(__m512 r[16]) {
  v16sf_t t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // 32-bit interleave within 128-bit lanes
    const v16sf_t a = r[2 * i], b = r[2 * i + 1];
    t[2 * i] = __builtin_shufflevector(a, b, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
    t[2 * i + 1] = __builtin_shufflevector(a, b, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // 64-bit interleave within 128-bit lanes
    const v16sf_t a = t[4 * i], b = t[4 * i + 1], c = t[4 * i + 2], d = t[4 * i + 3];
    u[4 * i + 0] = __builtin_shufflevector(a, c, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    u[4 * i + 1] = __builtin_shufflevector(a, c, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    u[4 * i + 2] = __builtin_shufflevector(b, d, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    u[4 * i + 3] = __builtin_shufflevector(b, d, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i)  // 128-bit lanes: (a0, a2, b0, b2) and (a1, a3, b1, b3)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const v16sf_t a = u[8 * i + j], b = u[8 * i + 4 + j];
      t[8 * i + j] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
      t[8 * i + 4 + j] = __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const v16sf_t a = t[j], b = t[j + 8];
    r[j] = __m512(__builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27));
    r[j + 8] = __m512(__builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31));
  }
}
#endif

// dst[k*ldd + r] = (r < R ? src[r*lds + k] : 0) for r < W, k < kc (R <= W <= 16): the transposing
// half of packing, for operands whose packed direction is strided in memory.
inline void transpose_pack(const float* TL_CPU_RESTRICT src, int64_t lds, int R, int64_t kc,
                           float* TL_CPU_RESTRICT dst, int64_t ldd, int W) {
#if defined(__AVX512F__)
  const __mmask16 wmask = __mmask16((1u << W) - 1u);
  int64_t k = 0;
  for (; k < kc; k += 16) {
    const int kn = int(std::min<int64_t>(16, kc - k));
    const __mmask16 kmask = __mmask16((1u << kn) - 1u);
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      r[i] = i < R ? _mm512_maskz_loadu_ps(kmask, src + i * lds + k) : _mm512_setzero_ps();
    transpose16(r);
    if (kn == 16) {
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c) _mm512_mask_storeu_ps(dst + (k + c) * ldd, wmask, r[c]);
    } else {
      for (int c = 0; c < kn; ++c) _mm512_mask_storeu_ps(dst + (k + c) * ldd, wmask, r[c]);
    }
  }
#else
  for (int r = 0; r < R; ++r)
    for (int64_t k = 0; k < kc; ++k) dst[k * ldd + r] = src[r * lds + k];
  for (int r = R; r < W; ++r)
    for (int64_t k = 0; k < kc; ++k) dst[k * ldd + r] = 0.0f;
#endif
}

// Packs rows [i0, i0+rows) x depth [k0, k0+kc) of opA into micro-panels of kMR rows:
// dst[p*kMR*kc + k*kMR + r] = opA(i0 + p*kMR + r, k0 + k), rows past `rows` zero-filled.
// tmp: kMR * kc floats.
template <class TA>
TL_CPU_NOINLINE void pack_a(const TA* A, int64_t lda, bool trans_a, int64_t i0, int64_t rows, int64_t k0,
                            int64_t kc, float* TL_CPU_RESTRICT dst, float* TL_CPU_RESTRICT tmp) {
  for (int64_t p = 0; p < rows; p += kMR) {
    const int r_n = int(std::min<int64_t>(kMR, rows - p));
    float* d = dst + p * kc;
    if (trans_a) {
      // opA(i, k) = A[k*lda + i]: each k gives r_n contiguous elements.
      for (int64_t k = 0; k < kc; ++k) {
        const TA* s = A + (k0 + k) * lda + (i0 + p);
        float* dk = d + k * kMR;
        convert_padded(s, dk, r_n, kMR);
      }
    } else {
      // opA(i, k) = A[i*lda + k]: rows are contiguous in k; transpose.
      const TA* s = A + (i0 + p) * lda + k0;
      if constexpr (std::is_same_v<TA, float>) {
        transpose_pack(s, lda, r_n, kc, d, kMR, kMR);
      } else {
        for (int r = 0; r < r_n; ++r) convert_run(s + r * lda, tmp + r * kc, kc);
        transpose_pack(tmp, kc, r_n, kc, d, kMR, kMR);
      }
    }
  }
}

// Packs depth [k0, k0+kc) x columns [j0, j0+cols) of opB into micro-panels of kNR columns:
// dst[q*kNR*kc + k*kNR + c] = opB(k0 + k, j0 + q*kNR + c), columns past `cols` zero-filled.
// tmp: 16 * kc floats.
template <class TB>
TL_CPU_NOINLINE void pack_b(const TB* B, int64_t ldb, bool trans_b, int64_t k0, int64_t kc, int64_t j0,
                            int64_t cols, float* TL_CPU_RESTRICT dst, float* TL_CPU_RESTRICT tmp) {
  constexpr int kChunk = kNR < 16 ? kNR : 16;  // columns transposed at once
  for (int64_t q = 0; q < cols; q += kNR) {
    const int c_n = int(std::min<int64_t>(kNR, cols - q));
    float* d = dst + q * kc;
    if (!trans_b) {
      for (int64_t k = 0; k < kc; ++k) {
        const TB* s = B + (k0 + k) * ldb + (j0 + q);
        float* dk = d + k * kNR;
        convert_padded(s, dk, c_n, kNR);
      }
    } else {
      // opB(k, j) = B[j*ldb + k]: columns of opB are contiguous in k; transpose in chunks.
      for (int c0 = 0; c0 < kNR; c0 += kChunk) {
        const int R = std::max(0, std::min(kChunk, c_n - c0));
        const TB* s = B + (j0 + q + c0) * ldb + k0;
        if constexpr (std::is_same_v<TB, float>) {
          transpose_pack(s, ldb, R, kc, d + c0, kNR, kChunk);
        } else {
          for (int r = 0; r < R; ++r) convert_run(s + r * ldb, tmp + r * kc, kc);
          transpose_pack(tmp, kc, R, kc, d + c0, kNR, kChunk);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Per-thread scratch buffers, 64-byte aligned, grown on demand and kept for the thread's lifetime.
struct ScratchBuffer {
  float* ptr = nullptr;
  size_t cap = 0;
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { std::free(ptr); }
  float* get(size_t n) {
    if (n > cap) {
      std::free(ptr);
      const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
      ptr = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (!ptr) throw std::bad_alloc();
      cap = bytes / sizeof(float);
    }
    return ptr;
  }
};
enum ScratchSlot { kSlotA = 0, kSlotB, kSlotWork, kSlotTmp, kSlotTileA, kSlotTileB, kSlotTileTmp, kNumSlots };
inline float* scratch(int slot, size_t n) {
  static thread_local ScratchBuffer buffers[kNumSlots];
  return buffers[slot].get(n);
}

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

struct CacheSizes {
  int64_t l1 = 32 * 1024;
  int64_t l2 = 1024 * 1024;
};
inline CacheSizes cache_sizes() {
  static const CacheSizes sizes = [] {
    CacheSizes s;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l1 >= 16 * 1024 && l1 <= 1024 * 1024) s.l1 = l1;
    if (l2 >= 128 * 1024 && l2 <= 64 * 1024 * 1024) s.l2 = l2;
#endif
    return s;
  }();
  return sizes;
}

// Per-thread budget of the multi-pass workspace (16 MiB); a variable so tests can shrink it.
inline int64_t& work_budget_bytes() {
  static int64_t budget = int64_t(16) << 20;
  return budget;
}

inline int max_threads() {
#if defined(_OPENMP)
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

// Single-threaded GEMM of the output block [i_begin, i_end) x [j_begin, j_end).
template <class TA, class TB, class Epi>
void gemm_block(int64_t i_begin, int64_t i_end, int64_t j_begin, int64_t j_end, int64_t K, const TA* A,
                int64_t lda, bool trans_a, const TB* B, int64_t ldb, bool trans_b, Epi& epi, int64_t mc,
                int64_t nc, int64_t kc_max) {
  const int64_t Mt = i_end - i_begin, Nt = j_end - j_begin;
  if (Mt <= 0 || Nt <= 0) return;
  const int64_t passes = ceil_div(K, kc_max);
  const int64_t kc = round_up(ceil_div(K, passes), 4);  // balanced passes
  nc = std::min(nc, round_up(Nt, kNR));
  mc = std::min(mc, round_up(Mt, kMR));

  // With several kc passes the partial sums of a (rows x nc) block live in a float workspace; the
  // rows are processed in super-blocks of mb rows so that the workspace stays within the budget.
  const int64_t budget = work_budget_bytes();
  const int64_t mb =
      passes > 1 ? std::min(round_up(Mt, kMR), std::max(mc, budget / int64_t(sizeof(float) * nc) / mc * mc)) : Mt;

  float* bpack = scratch(kSlotB, size_t(kc * nc));
  float* apack = scratch(kSlotA, size_t(kc * mc));
  float* tmp = scratch(kSlotTmp, size_t(16 * kc));
  float* work = passes > 1 ? scratch(kSlotWork, size_t(round_up(mb, kMR) * nc)) : nullptr;
  const int64_t ldw = nc;
  alignas(64) float tile[kMR * kNR];

  for (int64_t jc = 0; jc < Nt; jc += nc) {
    const int64_t ncur = std::min(nc, Nt - jc);
    for (int64_t ib = 0; ib < Mt; ib += mb) {
      const int64_t mbcur = std::min(mb, Mt - ib);
      for (int64_t p = 0; p < passes; ++p) {
        const int64_t k0 = p * kc;
        const int64_t kcur = std::min(kc, K - k0);
        if (kcur <= 0) break;
        const bool first = p == 0, last = (p == passes - 1) || (k0 + kcur >= K);
        pack_b(B, ldb, trans_b, k0, kcur, j_begin + jc, ncur, bpack, tmp);
        for (int64_t ic = ib; ic < ib + mbcur; ic += mc) {
          const int64_t mcur = std::min(mc, ib + mbcur - ic);
          pack_a(A, lda, trans_a, i_begin + ic, mcur, k0, kcur, apack, tmp);
          for (int64_t ir = 0; ir < mcur; ir += kMR) {
            const float* ap = apack + ir * kcur;
            const int rows = int(std::min<int64_t>(kMR, mcur - ir));
            for (int64_t jr = 0; jr < ncur; jr += kNR) {
              const float* bp = bpack + jr * kcur;
              float* w = work ? work + (ic - ib + ir) * ldw + jr : nullptr;
              if (last) {
                if (first)
                  micro_kernel<false>(kcur, ap, bp, kNR, nullptr, 0, tile, kNR);
                else
                  micro_kernel<true>(kcur, ap, bp, kNR, w, ldw, tile, kNR);
                const int cols = int(std::min<int64_t>(kNR, ncur - jr));
                epi(i_begin + ic + ir, j_begin + jc + jr, rows, cols, static_cast<const float*>(tile), int64_t(kNR));
              } else if (first) {
                micro_kernel<false>(kcur, ap, bp, kNR, nullptr, 0, w, ldw);
              } else {
                micro_kernel<true>(kcur, ap, bp, kNR, w, ldw, w, ldw);
              }
            }
          }
        }
      }
    }
  }
}

// Picks the tm x tn thread grid (tm * tn == nt) with the smallest per-thread cost estimate.
inline void choose_grid(int64_t M, int64_t N, int64_t K, int nt, int64_t nc, int* tm_out, int* tn_out) {
  const int64_t mt = ceil_div(M, kMR), ntl = ceil_div(N, kNR);
  double best = -1;
  for (int tm = 1; tm <= nt; ++tm) {
    if (nt % tm) continue;
    const int tn = nt / tm;
    if (tm > mt || tn > ntl) continue;
    const double rows = double(ceil_div(mt, tm) * kMR), cols = double(ceil_div(ntl, tn) * kNR);
    const double jblocks = double(ceil_div(int64_t(cols), nc));
    // cycles: kernel FMAs at 2 vectors/cycle, packing about one element per cycle.
    const double cost = rows * cols * double(K) / (2.0 * kW) + rows * double(K) * jblocks + cols * double(K);
    if (best < 0 || cost < best) {
      best = cost;
      *tm_out = tm;
      *tn_out = tn;
    }
  }
  if (best < 0) {  // more threads than tiles in both directions: split the longer side
    if (mt >= ntl) {
      *tm_out = nt;
      *tn_out = 1;
    } else {
      *tm_out = 1;
      *tn_out = nt;
    }
  }
}

}  // namespace detail

// Micro-tile shape of this build (for callers that want to align their own tiling).
constexpr int kGemmMR = detail::kMR;
constexpr int kGemmNR = detail::kNR;

inline GemmBlocking default_blocking() {
  const detail::CacheSizes cs = detail::cache_sizes();
  return blocking_for(cs.l1, cs.l2, MicroTile{detail::kMR, detail::kNR}, detail::max_threads());
}

template <class TA, class TB, class Epilogue>
void gemm(int64_t M, int64_t N, int64_t K, const TA* A, int64_t lda, bool trans_a, const TB* B, int64_t ldb,
          bool trans_b, Epilogue&& epi, const GemmBlocking& blk = default_blocking()) {
  using namespace detail;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // empty sum: every element is zero
    alignas(64) float zeros[kMR * kNR] = {};
    for (int64_t i = 0; i < M; i += kMR)
      for (int64_t j = 0; j < N; j += kNR)
        epi(i, j, int(std::min<int64_t>(kMR, M - i)), int(std::min<int64_t>(kNR, N - j)),
            static_cast<const float*>(zeros), int64_t(kNR));
    return;
  }
  const GemmBlocking def = default_blocking();
  const int64_t mc = round_up(blk.mc > 0 ? blk.mc : def.mc, kMR);
  const int64_t nc = round_up(blk.nc > 0 ? blk.nc : def.nc, kNR);
  const int64_t kc = blk.kc > 0 ? blk.kc : def.kc;
  int nt = max_threads();  // 1 inside a parallel region (no nested teams)
#if defined(_OPENMP)
  if (blk.threads > 0 && !omp_in_parallel()) nt = blk.threads;
#endif
  // Fewer threads for small problems: about 2 MFLOP per thread at least, and no more threads than
  // micro-tiles.
  const double flops = 2.0 * double(M) * double(N) * double(K);
  nt = int(std::min<double>(nt, std::max(1.0, flops / 2.0e6)));
  nt = int(std::min<int64_t>(nt, ceil_div(M, kMR) * ceil_div(N, kNR)));
  if (nt < 1) nt = 1;

  auto run = [&](int t, int threads) {
    int tm = 1, tn = 1;
    choose_grid(M, N, K, threads, nc, &tm, &tn);
    const int tr = t / tn, tcol = t % tn;
    const int64_t mt = ceil_div(M, kMR), ntl = ceil_div(N, kNR);
    // Split micro-tiles as evenly as possible.
    const int64_t r0 = mt * tr / tm, r1 = mt * (tr + 1) / tm;
    const int64_t c0 = ntl * tcol / tn, c1 = ntl * (tcol + 1) / tn;
    gemm_block(r0 * kMR, std::min(M, r1 * kMR), c0 * kNR, std::min(N, c1 * kNR), K, A, lda, trans_a, B, ldb,
               trans_b, epi, mc, nc, kc);
  };
#if defined(_OPENMP)
  if (nt > 1) {
    // An exception must not leave the region (std::terminate): the first is kept and rethrown.
    std::exception_ptr thrown;
    std::atomic<bool> caught{false};
#pragma omp parallel num_threads(nt)
    {
      try {
        run(omp_get_thread_num(), omp_get_num_threads());
      } catch (...) {
        if (!caught.exchange(true)) thrown = std::current_exception();
      }
    }
    if (thrown) std::rethrow_exception(thrown);
    return;
  }
#endif
  run(0, 1);
}

template <class TA, class TB>
void gemm_tile(int M, int N, int K, const TA* A, int64_t lda, bool trans_a, const TB* B, int64_t ldb, bool trans_b,
               float* C, int64_t ldc) {
  using namespace detail;
  if (M <= 0 || N <= 0 || K <= 0) return;
  const int64_t kc_max = 512;
  const int64_t passes = ceil_div(K, kc_max);
  const int64_t kc = round_up(ceil_div(K, passes), 4);
  const int64_t npad = round_up(N, kNR);
  float* bpack = scratch(kSlotTileB, size_t(kc * npad));
  float* apack = scratch(kSlotTileA, size_t(kc * kMR));
  float* tmp = scratch(kSlotTileTmp, size_t(16 * kc));
  alignas(64) float tile[kMR * kNR];
  for (int64_t k0 = 0; k0 < K; k0 += kc) {
    const int64_t kcur = std::min<int64_t>(kc, K - k0);
    pack_b(B, ldb, trans_b, k0, kcur, 0, N, bpack, tmp);
    for (int64_t i = 0; i < M; i += kMR) {
      const int rows = int(std::min<int64_t>(kMR, M - i));
      pack_a(A, lda, trans_a, i, rows, k0, kcur, apack, tmp);
      for (int64_t j = 0; j < N; j += kNR) {
        const int cols = int(std::min<int64_t>(kNR, N - j));
        const float* bp = bpack + j * kcur;
        float* c = C + i * ldc + j;
        if (rows == kMR && cols == kNR) {
          micro_kernel<true>(kcur, apack, bp, kNR, c, ldc, c, ldc);
        } else {
          micro_kernel<false>(kcur, apack, bp, kNR, nullptr, 0, tile, kNR);
          for (int r = 0; r < rows; ++r)
            for (int cc = 0; cc < cols; ++cc) c[r * ldc + cc] += tile[r * kNR + cc];
        }
      }
    }
  }
}

// C[i*ldc+j] += sum_k opA(i,k) * opB(k,j) in 32-bit integers, for integer tiles (T.gemm into an
// int32 accumulator): exact products, sums that wrap modulo 2^32 as the GPU's s32 tensor-core sums
// do. Single-threaded; a row of C is built in unsigned arithmetic (wrapping is defined there) over
// B's rows, contiguous when B is not transposed, so the inner loop vectorizes.
template <class TA, class TB>
void gemm_tile_int32(int M, int N, int K, const TA* A, int64_t lda, bool trans_a, const TB* B, int64_t ldb, bool trans_b,
                     int32_t* C, int64_t ldc) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  thread_local std::vector<uint32_t> row_sums;
  if (row_sums.size() < size_t(N)) row_sums.resize(size_t(N));
  uint32_t* row = row_sums.data();
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) row[j] = uint32_t(C[i * ldc + j]);
    for (int64_t k = 0; k < K; ++k) {
      const uint32_t a = uint32_t(int32_t(trans_a ? A[k * lda + i] : A[i * lda + k]));
      if (trans_b) {
        for (int64_t j = 0; j < N; ++j) row[j] += a * uint32_t(int32_t(B[j * ldb + k]));
      } else {
        const TB* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) row[j] += a * uint32_t(int32_t(b[j]));
      }
    }
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = int32_t(row[j]);
  }
}

// ---------------------------------------------------------------------------------------------
// Ready-made epilogues.

// C[i*ldc + j] = TC(acc)
template <class TC>
struct StoreEpilogue {
  TC* C;
  int64_t ldc;
  void operator()(int64_t i0, int64_t j0, int rows, int cols, const float* acc, int64_t ld_acc) const {
    for (int r = 0; r < rows; ++r) {
      TC* c = C + (i0 + r) * ldc + j0;
      const float* a = acc + r * ld_acc;
      if constexpr (std::is_same_v<TC, float>) {
        std::memcpy(c, a, sizeof(float) * size_t(cols));
      } else {
        for (int j = 0; j < cols; ++j) c[j] = tl::from_float<TC>(a[j]);
      }
    }
  }
};
template <class TC>
StoreEpilogue<TC> store_epilogue(TC* C, int64_t ldc) {
  return StoreEpilogue<TC>{C, ldc};
}

// C[i*ldc + j] = TC(float(C[i*ldc + j]) + acc)
template <class TC>
struct AccumulateEpilogue {
  TC* C;
  int64_t ldc;
  void operator()(int64_t i0, int64_t j0, int rows, int cols, const float* acc, int64_t ld_acc) const {
    for (int r = 0; r < rows; ++r) {
      TC* c = C + (i0 + r) * ldc + j0;
      const float* a = acc + r * ld_acc;
      for (int j = 0; j < cols; ++j) c[j] = tl::from_float<TC>(tl::to_float(c[j]) + a[j]);
    }
  }
};
template <class TC>
AccumulateEpilogue<TC> accumulate_epilogue(TC* C, int64_t ldc) {
  return AccumulateEpilogue<TC>{C, ldc};
}

// f(int64_t i, int64_t j, float acc) for every element.
template <class F>
struct ElementwiseEpilogue {
  F f;
  void operator()(int64_t i0, int64_t j0, int rows, int cols, const float* acc, int64_t ld_acc) {
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < cols; ++j) f(i0 + r, j0 + j, acc[r * ld_acc + j]);
  }
};
template <class F>
ElementwiseEpilogue<std::decay_t<F>> elementwise_epilogue(F&& f) {
  return ElementwiseEpilogue<std::decay_t<F>>{std::forward<F>(f)};
}

}  // inline namespace TL_CPU_ISA_NS
}  // namespace tl::cpu
