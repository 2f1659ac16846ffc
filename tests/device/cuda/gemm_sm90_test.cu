// Test and benchmark of tl/device/cuda/gemm_sm90.h on an sm_90a GPU, against cuBLAS.
//
// Build (tests/device/cuda/build.sh does this; one line, from the repository root):
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -I device/include
//        -DTL_CUDA_WAIT_TIMEOUT_NS=4000000000ull tests/device/cuda/gemm_sm90_test.cu
//        -o <dir>/gemm_sm90_test -lcublas -lcuda
// Run:
//   <dir>/gemm_sm90_test            correctness for every shape/dtype/layout/config, then timings
//   <dir>/gemm_sm90_test --quick    correctness only
//   <dir>/gemm_sm90_test --bench-only  timings (each timed case is still checked once)
// Exit status 0 only if every check passed. The timing table also goes to $GEMM_SM90_REPORT, or to
// $OUT/gemm_sm90.txt when OUT is set.
//
//   <dir>/gemm_sm90_test --splits=N [--few-tiles]  split-K configs take N pieces (calibration),
//                                   --few-tiles: only the M = 128 and N = 2112 shapes,
//                                   --seed-layout: only bf16 with B [K,N], --shape=MxNxK: that one
//   <dir>/gemm_sm90_test --round-sync=R  the barrier between rounds (tl/device/round_sync_plan.h)
//                                   every R rounds wherever one can go, 0: never (default: the rule)
// Kernel configs: BLOCK_MxBLOCK_N/stages (BLOCK_K = 64), TMA-store epilogue, split-K as planned by
// tl/device/split_k.h; a trailing "w": whole tiles only (no split-K); "d": direct (register ->
// global) epilogue.
// What is checked, per case (shape x {bf16, fp16} x B in {[K,N] (seed matmul), [N,K]} x kernel config):
// - C is poisoned with NaN bit patterns (0xFFFF) first, plus a guard region after it and, for one
//   shape, padding columns (ldc > N): every element must be written, nothing outside.
// - ||ours - ref|| / ||ref|| < 1e-2 (bf16) or 2e-3 (fp16), ref = cuBLAS GemmEx with FP32 output and
//   FP32 compute on the same inputs.
// - cuBLAS itself (the reference) is checked against a naive FP64 dot product on sampled elements
//   (corners included), so a wrong cuBLAS call cannot hide a wrong kernel; ours is checked there too.
// Inputs are random in [-1, 1) (never zeros). K must be a multiple of 8 and, for B = [K,N], N too
// (TMA's 16-byte row alignment), so the ragged shapes use K = 72 and N = 136.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tl/device/cuda/gemm_sm90.h"

#define CHECK_CUDA(expr)                                                                                   \
  do {                                                                                                     \
    cudaError_t err_ = (expr);                                                                             \
    if (err_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "FAIL: %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      if (err_ == cudaErrorLaunchFailure || err_ == cudaErrorIllegalInstruction)                          \
        std::fprintf(stderr, "  (a trap: an mbarrier wait timed out, or a bad instruction)\n");            \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)
#define CHECK_CU(expr)                                                                           \
  do {                                                                                           \
    CUresult err_ = (expr);                                                                      \
    if (err_ != CUDA_SUCCESS) {                                                                  \
      const char* s_ = nullptr;                                                                  \
      cuGetErrorString(err_, &s_);                                                               \
      std::fprintf(stderr, "FAIL: %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, s_ ? s_ : "?"); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
#define CHECK_CUBLAS(expr)                                                                           \
  do {                                                                                               \
    cublasStatus_t err_ = (expr);                                                                    \
    if (err_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "FAIL: %s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #expr, int(err_)); \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)

namespace {

using tl::bfloat16_t;
using tl::half_t;

// ---------------------------------------------------------------------------------------------
// Device helpers: random fill, poison, compare, sampled FP64 reference.

__device__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return uint32_t(x);
}

template <class T>
__global__ void fill_random_kernel(T* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float u = float(hash32(i * 0x9e3779b97f4a7c15ull + seed) >> 8) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = tl::from_float<T>(2.0f * u - 1.0f);
  }
}

__global__ void fill_u16_kernel(uint16_t* p, size_t n, uint16_t v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = v;
}

// sums[0] += (ours - ref)^2, sums[1] += ref^2 over the M x N elements; counts[0]: non-finite outputs
// (unwritten poison or overflow), counts[1]: padding columns [N, ldc) or guard elements that are no
// longer the poison pattern.
template <class TC>
__global__ void compare_kernel(const TC* ours, const float* ref, int M, int N, int64_t ldc, size_t guard,
                               uint16_t poison, double* sums, unsigned long long* counts) {
  double d2 = 0, r2 = 0;
  unsigned long long bad = 0, touched = 0;
  const size_t total = size_t(M) * size_t(ldc);
  for (size_t idx = blockIdx.x * size_t(blockDim.x) + threadIdx.x; idx < total + guard;
       idx += size_t(gridDim.x) * blockDim.x) {
    if (idx >= total) {
      touched += ours[idx].bits != poison;
      continue;
    }
    const size_t i = idx / size_t(ldc), j = idx % size_t(ldc);
    if (j >= size_t(N)) {
      touched += ours[idx].bits != poison;
      continue;
    }
    const float o = tl::to_float(ours[idx]);
    const float r = ref[i * size_t(N) + j];
    if (!isfinite(o)) {
      ++bad;
      continue;
    }
    const double d = double(o) - double(r);
    d2 += d * d;
    r2 += double(r) * double(r);
  }
  for (int off = 16; off > 0; off >>= 1) {
    d2 += __shfl_down_sync(0xffffffffu, d2, off);
    r2 += __shfl_down_sync(0xffffffffu, r2, off);
    bad += __shfl_down_sync(0xffffffffu, bad, off);
    touched += __shfl_down_sync(0xffffffffu, touched, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&sums[0], d2);
    atomicAdd(&sums[1], r2);
    atomicAdd(&counts[0], bad);
    atomicAdd(&counts[1], touched);
  }
}

// out[s] = sum_k A[i,k] * B(k,j) in FP64 for the sampled (i, j) = (rows[s], cols[s]).
template <class T>
__global__ void sampled_reference_kernel(const T* A, const T* B, bool b_kn, int N, int K, const int* rows,
                                         const int* cols, int n, double* out) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n) return;
  const int i = rows[s], j = cols[s];
  double acc = 0;
  for (int k = 0; k < K; ++k) {
    const double a = tl::to_float(A[size_t(i) * K + k]);
    const double b = tl::to_float(b_kn ? B[size_t(k) * N + j] : B[size_t(j) * K + k]);
    acc += a * b;
  }
  out[s] = acc;
}

template <class TC>
__global__ void gather_kernel(const TC* c, int64_t ldc, const int* rows, const int* cols, int n, float* out) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s < n) out[s] = tl::to_float(c[size_t(rows[s]) * ldc + cols[s]]);
}

// ---------------------------------------------------------------------------------------------
// Host helpers.

template <class T>
constexpr CUtensorMapDataType tma_dtype() {
  return tl::cuda::is_same_v<T, bfloat16_t> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
}
template <class T>
constexpr cudaDataType_t cublas_dtype() {
  return tl::cuda::is_same_v<T, bfloat16_t> ? CUDA_R_16BF : CUDA_R_16F;
}
template <class T>
const char* dtype_name() {
  return tl::cuda::is_same_v<T, bfloat16_t> ? "bf16" : "fp16";
}

// 2-D tensor map of a row-major [outer, inner] matrix of 16-bit elements (rows `ld` elements
// apart, default inner), 128-byte swizzle.
tl::cuda::TmaDescriptor make_tma_2d(const void* ptr, CUtensorMapDataType dtype, uint64_t inner, uint64_t outer,
                                    uint32_t box_inner, uint32_t box_outer, uint64_t ld = 0) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {(ld ? ld : inner) * 2};  // bytes between rows
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t elem_strides[2] = {1, 1};
  CHECK_CU(cuTensorMapEncodeTiled(&map, dtype, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  tl::cuda::TmaDescriptor d;
  static_assert(sizeof(d) == sizeof(map), "TmaDescriptor and CUtensorMap differ in size");
  std::memcpy(&d, &map, sizeof(d));
  return d;
}

int g_num_sms = 0;
int g_grid_cap = 0;  // > 0: at most this many CTAs (each then walks many tiles, edges included)
int g_raster_group = 8;
int g_force_splits = 0;  // --splits=N: every split-K config takes N pieces (0: the plan's choice)
// The barrier between rounds of tiles (tl/device/round_sync_plan.h): -1 the rule's choice, 0 none,
// R a barrier every R rounds wherever one can go. --round-sync=R sets it for every case; a shape's
// own round_sync (for coverage) takes precedence. Its two words: zero, left zero by every launch.
int g_round_sync = -1;
int g_case_round_sync = -1;
int64_t g_l2_bytes = 0;
uint32_t* g_round_sync_words = nullptr;
// Split-K scratch for every launch (one launch at a time): FP32 partial tiles and the per-tile
// counters, zeroed once; every launch leaves them zero.
float* g_workspace = nullptr;
int* g_counters = nullptr;
constexpr size_t kWorkspaceFloats = size_t(64) << 20;  // 256 MB
constexpr size_t kCounters = size_t(1) << 16;

// One kernel configuration: tensor maps + launch.
struct KernelRunner {
  const char* name;
  int block_m, block_n;
  bool split_k;  // plans split-K (tl/device/split_k.h), or always runs whole tiles
  void (*launch)(const void* A, const void* B, void* C, int M, int N, int K, int64_t ldc, bool split_k,
                 cudaStream_t stream);
  void (*setup)();
};

template <class Cfg>
void setup_kernel() {
  auto kernel = tl::cuda::gemm_sm90_kernel<Cfg>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
  cudaFuncAttributes attr;
  CHECK_CUDA(cudaFuncGetAttributes(&attr, kernel));
  int blocks = 0;
  CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, Cfg::kThreads, Cfg::kSmemBytes));
  std::printf("  kernel %3dx%3dx%2d stages %d %s B=%s %s epilogue: %d regs/thread at launch, %zu B local, %d B dyn "
              "smem, %d block/SM\n",
              Cfg::kBlockM, Cfg::kBlockN, Cfg::kBlockK, Cfg::kStages, dtype_name<typename Cfg::T>(),
              Cfg::kBNMajor ? "[K,N]" : "[N,K]", Cfg::kTmaStore ? "TMA-store" : "direct", attr.numRegs,
              size_t(attr.localSizeBytes), Cfg::kSmemBytes, blocks);
  if (blocks < 1) {
    std::fprintf(stderr, "FAIL: kernel cannot be resident (occupancy 0)\n");
    std::exit(1);
  }
}

template <class Cfg>
void launch_kernel(const void* A, const void* B, void* C, int M, int N, int K, int64_t ldc, bool split_k,
                   cudaStream_t stream) {
  using T = typename Cfg::T;
  const auto ta = make_tma_2d(A, tma_dtype<T>(), uint64_t(K), uint64_t(M), Cfg::kBoxAInner, Cfg::kBoxAOuter);
  const auto tb = Cfg::kBNMajor
                      ? make_tma_2d(B, tma_dtype<T>(), uint64_t(N), uint64_t(K), Cfg::kBoxBInner, Cfg::kBoxBOuter)
                      : make_tma_2d(B, tma_dtype<T>(), uint64_t(K), uint64_t(N), Cfg::kBoxBInner, Cfg::kBoxBOuter);
  tl::cuda::TmaDescriptor tc{};
  if constexpr (Cfg::kTmaStore)
    tc = make_tma_2d(C, tma_dtype<typename Cfg::TC>(), uint64_t(N), uint64_t(M), Cfg::kBoxC, Cfg::kBoxC, uint64_t(ldc));
  const int sms = g_grid_cap > 0 ? g_grid_cap : g_num_sms;
  const tl::SplitKPlan plan = tl::plan_split_k(Cfg::num_tiles(M, N), (K + Cfg::kBlockK - 1) / Cfg::kBlockK, sms,
                                               split_k ? g_force_splits : 1);
  if (plan.grid <= 0) return;
  if (size_t(plan.workspace_floats(Cfg::kBlockM * Cfg::kBlockN)) > kWorkspaceFloats ||
      size_t(plan.counters(Cfg::kNumConsumers)) > kCounters) {
    std::fprintf(stderr, "FAIL: split-K workspace too small for %dx%dx%d\n", M, N, K);
    std::exit(1);
  }
  const tl::SplitK sk{plan.dp_tiles, plan.splits, g_workspace, g_counters};
  const int64_t full_rounds = plan.splits <= 1 ? Cfg::num_tiles(M, N) / plan.grid : 0;
  const int forced = g_case_round_sync >= 0 ? g_case_round_sync : g_round_sync;
  const int every = forced >= 0 ? forced
                                : tl::round_sync_every(full_rounds, (K + Cfg::kBlockK - 1) / Cfg::kBlockK,
                                                       (int64_t(M) + N) * K * int64_t(sizeof(T)), g_l2_bytes);
  tl::RoundSync rs;
  if (tl::round_sync_barriers(full_rounds, every) > 0) rs = tl::RoundSync{g_round_sync_words, every};
  tl::cuda::gemm_sm90_kernel<Cfg><<<plan.grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(
      ta, tb, tc, static_cast<typename Cfg::TC*>(C), M, N, K, ldc, g_raster_group, sk, rs);
}

template <class Cfg>
KernelRunner runner(const char* name, bool split_k = true) {
  return KernelRunner{name, Cfg::kBlockM, Cfg::kBlockN, split_k, &launch_kernel<Cfg>, &setup_kernel<Cfg>};
}

// The configurations under test, per (input type, B layout).
template <class T, bool kBNMajor>
std::vector<KernelRunner> kernel_configs() {
  using namespace tl::cuda;
  return {
      runner<GemmSm90Config<T, T, 128, 256, 64, 4, kBNMajor, true>>("128x256/4"),
      runner<GemmSm90Config<T, T, 128, 256, 64, 4, kBNMajor, true>>("128x256/4w", false),  // whole tiles
      runner<GemmSm90Config<T, T, 128, 128, 64, 6, kBNMajor, true>>("128x128/6"),
      runner<GemmSm90Config<T, T, 128, 128, 64, 6, kBNMajor, true>>("128x128/6w", false),
      runner<GemmSm90Config<T, T, 256, 128, 64, 4, kBNMajor, true>>("256x128/4"),
      // Candidates for M = 128 (one tile row): fewer, wider tiles or more, narrower ones.
      runner<GemmSm90Config<T, T, 128, 192, 64, 4, kBNMajor, true>>("128x192/4"),
      runner<GemmSm90Config<T, T, 128, 64, 64, 8, kBNMajor, true>>("128x64/8"),
      runner<GemmSm90Config<T, T, 128, 64, 64, 8, kBNMajor, true>>("128x64/8w", false),
      // 64-row tiles (one consumer warpgroup): twice the tiles along M, fewer split-K pieces.
      runner<GemmSm90Config<T, T, 64, 64, 64, 12, kBNMajor, true>>("64x64/12"),
      runner<GemmSm90Config<T, T, 64, 128, 64, 8, kBNMajor, true>>("64x128/8"),
      runner<GemmSm90Config<T, T, 64, 256, 64, 5, kBNMajor, true>>("64x256/5"),
      runner<GemmSm90Config<T, T, 64, 128, 64, 8, kBNMajor, true>>("64x128/8w", false),
      runner<GemmSm90Config<T, T, 128, 256, 64, 4, kBNMajor, false>>("128x256/4d"),  // direct-store epilogue
  };
}

// cuBLAS, row-major C[M,N] = A[M,K] * B, as the column-major C^T = B^T * A^T.
void cublas_gemm(cublasHandle_t h, cudaDataType_t ab_type, cudaDataType_t c_type, const void* A, const void* B,
                 bool b_kn, void* C, int M, int N, int K) {
  const float alpha = 1.0f, beta = 0.0f;
  // B [K,N] row-major is B^T [N,K] column-major (ld N): no transpose. B [N,K] row-major is a K x N
  // column-major matrix (ld K): transpose.
  CHECK_CUBLAS(cublasGemmEx(h, b_kn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, B, ab_type,
                            b_kn ? N : K, A, ab_type, K, &beta, C, c_type, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

struct Shape {
  int M, N, K;
  int ldc_pad;       // extra columns of C (must stay untouched)
  int grid_cap = 0;  // > 0: launch at most this many CTAs
  int round_sync = -1;  // >= 0: the barrier between rounds every this many rounds (0: none)
};

struct Stats {
  int cases = 0, failures = 0;
};

template <class T>
void fill_random(T* p, size_t n, uint64_t seed) {
  fill_random_kernel<T><<<1024, 256>>>(p, n, seed);
  CHECK_CUDA(cudaGetLastError());
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
float time_ms(F&& f, int warmup, int iters) {
  std::vector<cudaEvent_t> ev(2 * iters);
  for (auto& e : ev) CHECK_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < warmup; ++i) f();
  std::vector<float> times(iters);
  for (int i = 0; i < iters; ++i) {
    CHECK_CUDA(cudaEventRecord(ev[2 * i]));
    f();
    CHECK_CUDA(cudaEventRecord(ev[2 * i + 1]));
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaGetLastError());
  for (int i = 0; i < iters; ++i) CHECK_CUDA(cudaEventElapsedTime(&times[i], ev[2 * i], ev[2 * i + 1]));
  for (auto& e : ev) CHECK_CUDA(cudaEventDestroy(e));
  return median(times);
}

struct Row {
  std::string text;
};

// Runs every config on one shape / dtype / layout: correctness, then (optionally) timings.
template <class T, bool kBNMajor>
void run_case(cublasHandle_t handle, const Shape& sh, bool bench, bool check, Stats& stats, std::vector<Row>& table) {
  const int M = sh.M, N = sh.N, K = sh.K;
  const int64_t ldc = int64_t(N) + sh.ldc_pad;
  const size_t guard = 4096;
  const uint16_t kPoison = 0xFFFF;  // NaN in both bf16 and fp16
  const double tol = tl::cuda::is_same_v<T, bfloat16_t> ? 1e-2 : 2e-3;
  const char* layout = kBNMajor ? "[K,N]" : "[N,K]";
  g_grid_cap = sh.grid_cap;
  g_case_round_sync = sh.round_sync;
  bench = bench && sh.grid_cap == 0;  // a capped grid is for coverage, not speed

  T *A, *B, *C;
  float* ref;
  CHECK_CUDA(cudaMalloc(&A, sizeof(T) * size_t(M) * K));
  CHECK_CUDA(cudaMalloc(&B, sizeof(T) * size_t(N) * K));
  CHECK_CUDA(cudaMalloc(&C, sizeof(T) * (size_t(M) * size_t(ldc) + guard)));
  CHECK_CUDA(cudaMalloc(&ref, sizeof(float) * size_t(M) * N));
  const uint64_t seed = (uint64_t(M) * 1000003u + uint64_t(N)) * 1000033u + uint64_t(K) + (kBNMajor ? 17 : 0);
  fill_random(A, size_t(M) * K, seed);
  fill_random(B, size_t(N) * K, seed ^ 0x5bd1e995u);
  cublas_gemm(handle, cublas_dtype<T>(), CUDA_R_32F, A, B, kBNMajor, ref, M, N, K);
  CHECK_CUDA(cudaDeviceSynchronize());

  // Sampled FP64 reference: corners, edges and random elements.
  std::vector<int> rows, cols;
  const int corner_r[] = {0, M - 1, 0, M - 1, M / 2};
  const int corner_c[] = {0, 0, N - 1, N - 1, N / 2};
  for (int i = 0; i < 5; ++i) rows.push_back(corner_r[i]), cols.push_back(corner_c[i]);
  uint64_t rng = seed * 6364136223846793005ull + 1442695040888963407ull;
  auto next = [&]() {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(rng >> 33);
  };
  for (int i = 0; i < 251; ++i) rows.push_back(int(next() % uint32_t(M))), cols.push_back(int(next() % uint32_t(N)));
  const int ns = int(rows.size());
  int *d_rows, *d_cols;
  double* d_exact;
  float* d_got;
  CHECK_CUDA(cudaMalloc(&d_rows, sizeof(int) * ns));
  CHECK_CUDA(cudaMalloc(&d_cols, sizeof(int) * ns));
  CHECK_CUDA(cudaMalloc(&d_exact, sizeof(double) * ns));
  CHECK_CUDA(cudaMalloc(&d_got, sizeof(float) * ns));
  CHECK_CUDA(cudaMemcpy(d_rows, rows.data(), sizeof(int) * ns, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_cols, cols.data(), sizeof(int) * ns, cudaMemcpyHostToDevice));
  sampled_reference_kernel<T><<<(ns + 127) / 128, 128>>>(A, B, kBNMajor, N, K, d_rows, d_cols, ns, d_exact);
  CHECK_CUDA(cudaGetLastError());
  std::vector<double> exact(ns);
  std::vector<float> got(ns);
  CHECK_CUDA(cudaMemcpy(exact.data(), d_exact, sizeof(double) * ns, cudaMemcpyDeviceToHost));
  auto sampled_rel_err = [&](const float* dev, int64_t ld, bool is_ref) {
    if (is_ref)
      gather_kernel<float><<<(ns + 127) / 128, 128>>>(dev, ld, d_rows, d_cols, ns, d_got);
    else
      gather_kernel<T><<<(ns + 127) / 128, 128>>>(reinterpret_cast<const T*>(dev), ld, d_rows, d_cols, ns, d_got);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(got.data(), d_got, sizeof(float) * ns, cudaMemcpyDeviceToHost));
    double d2 = 0, r2 = 0;
    for (int s = 0; s < ns; ++s) {
      const double d = double(got[s]) - exact[s];
      d2 += std::isfinite(got[s]) ? d * d : 1e300;
      r2 += exact[s] * exact[s];
    }
    return std::sqrt(d2 / std::max(r2, 1e-300));
  };
  const double ref_err = sampled_rel_err(ref, N, true);
  ++stats.cases;
  if (!(ref_err < 1e-4)) {
    ++stats.failures;
    std::printf("FAIL  %5d %5d %5d %s B=%s: cuBLAS reference vs FP64 samples rel err %.3e\n", M, N, K,
                dtype_name<T>(), layout, ref_err);
  }

  double* d_sums;
  unsigned long long* d_counts;
  CHECK_CUDA(cudaMalloc(&d_sums, sizeof(double) * 2));
  CHECK_CUDA(cudaMalloc(&d_counts, sizeof(unsigned long long) * 2));

  const auto configs = kernel_configs<T, kBNMajor>();
  std::vector<float> ms(configs.size(), 0.0f);
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const auto& cfg = configs[ci];
    fill_u16_kernel<<<1024, 256>>>(reinterpret_cast<uint16_t*>(C), size_t(M) * size_t(ldc) + guard, kPoison);
    CHECK_CUDA(cudaGetLastError());
    cfg.launch(A, B, C, M, N, K, ldc, cfg.split_k, 0);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    if (check || bench) {
      CHECK_CUDA(cudaMemset(d_sums, 0, sizeof(double) * 2));
      CHECK_CUDA(cudaMemset(d_counts, 0, sizeof(unsigned long long) * 2));
      compare_kernel<T><<<1024, 256>>>(C, ref, M, N, ldc, guard, kPoison, d_sums, d_counts);
      CHECK_CUDA(cudaGetLastError());
      double sums[2];
      unsigned long long counts[2];
      CHECK_CUDA(cudaMemcpy(sums, d_sums, sizeof(sums), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(counts, d_counts, sizeof(counts), cudaMemcpyDeviceToHost));
      const double err = std::sqrt(sums[0] / std::max(sums[1], 1e-300));
      const double sample_err = sampled_rel_err(reinterpret_cast<const float*>(C), ldc, false);
      const bool ok = counts[0] == 0 && counts[1] == 0 && err < tol && sample_err < tol;
      ++stats.cases;
      if (!ok) ++stats.failures;
      std::printf("%s  %5d %5d %5d %s B=%s %-11s grid<=%-3d rel err %.3e (samples %.3e)  non-finite %llu  "
                  "outside-writes %llu\n",
                  ok ? "ok  " : "FAIL", M, N, K, dtype_name<T>(), layout, cfg.name, sh.grid_cap ? sh.grid_cap : g_num_sms,
                  err, sample_err, counts[0], counts[1]);
    }
    if (bench) {
      ms[ci] = time_ms([&] { cfg.launch(A, B, C, M, N, K, ldc, cfg.split_k, 0); }, 5, 20);
    }
  }

  if (bench) {
    T* Cb;
    CHECK_CUDA(cudaMalloc(&Cb, sizeof(T) * size_t(M) * N));
    const float cublas_ms = time_ms(
        [&] { cublas_gemm(handle, cublas_dtype<T>(), cublas_dtype<T>(), A, B, kBNMajor, Cb, M, N, K); }, 5, 20);
    CHECK_CUDA(cudaFree(Cb));
    const double flop = 2.0 * M * double(N) * K;
    auto tflops = [&](float t) { return t > 0 ? flop / (double(t) * 1e-3) / 1e12 : 0.0; };
    size_t best = 0;
    for (size_t ci = 1; ci < configs.size(); ++ci)
      if (ms[ci] < ms[best]) best = ci;
    char line[512];
    int len = std::snprintf(line, sizeof(line), "%5d %5d %5d  %s %s  cuBLAS %7.1f  ours %7.1f (%-10s) %5.2fx |", M, N,
                            K, dtype_name<T>(), layout, tflops(cublas_ms), tflops(ms[best]), configs[best].name,
                            tflops(ms[best]) / std::max(tflops(cublas_ms), 1e-9));
    for (size_t ci = 0; ci < configs.size(); ++ci)
      len += std::snprintf(line + len, sizeof(line) - size_t(len), " %7.1f", tflops(ms[ci]));
    table.push_back(Row{line});
    std::printf("bench %s\n", line);
  }

  CHECK_CUDA(cudaFree(d_sums));
  CHECK_CUDA(cudaFree(d_counts));
  CHECK_CUDA(cudaFree(d_rows));
  CHECK_CUDA(cudaFree(d_cols));
  CHECK_CUDA(cudaFree(d_exact));
  CHECK_CUDA(cudaFree(d_got));
  CHECK_CUDA(cudaFree(A));
  CHECK_CUDA(cudaFree(B));
  CHECK_CUDA(cudaFree(C));
  CHECK_CUDA(cudaFree(ref));
}

}  // namespace

int main(int argc, char** argv) {
  bool check = true, bench = true;
  bool few_tiles_only = false;  // only the shapes split-K is for (M = 128, N = 2112)
  bool seed_layout_only = false;  // only bf16 with B [K,N], the seed matmul's case
  std::vector<Shape> only_shape;  // --shape: this shape instead of the list (profiling)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      bench = false;
    } else if (a == "--bench-only") {
      check = false;
    } else if (a.rfind("--group=", 0) == 0) {
      g_raster_group = std::atoi(a.c_str() + 8);
    } else if (a.rfind("--splits=", 0) == 0) {
      g_force_splits = std::atoi(a.c_str() + 9);
    } else if (a.rfind("--round-sync=", 0) == 0) {
      g_round_sync = std::atoi(a.c_str() + 13);
    } else if (a == "--few-tiles") {
      few_tiles_only = true;
    } else if (a == "--seed-layout") {
      seed_layout_only = true;
    } else if (a.rfind("--shape=", 0) == 0) {
      Shape sh{};
      if (std::sscanf(a.c_str() + 8, "%dx%dx%d", &sh.M, &sh.N, &sh.K) != 3) {
        std::fprintf(stderr, "--shape=MxNxK, got %s\n", a.c_str());
        return 2;
      }
      only_shape.push_back(sh);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick | --bench-only] [--group=N] [--splits=N] [--round-sync=R] [--few-tiles] "
                   "[--seed-layout] [--shape=MxNxK]\n",
                   argv[0]);
      return 2;
    }
  }

  int dev = 0;
  CHECK_CUDA(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  g_num_sms = prop.multiProcessorCount;
  std::printf("device: %s, sm_%d%d, %d SMs, %zu KB smem/block opt-in, L2 %d MB\n", prop.name, prop.major, prop.minor,
              g_num_sms, size_t(prop.sharedMemPerBlockOptin) / 1024, prop.l2CacheSize >> 20);
  if (prop.major != 9) {
    std::printf("FAIL: needs an sm_90 (Hopper) GPU\n");
    return 1;
  }
  CHECK_CU(cuInit(0));
  CHECK_CUDA(cudaMalloc(&g_workspace, sizeof(float) * kWorkspaceFloats));
  CHECK_CUDA(cudaMalloc(&g_counters, sizeof(int) * kCounters));
  CHECK_CUDA(cudaMemset(g_counters, 0, sizeof(int) * kCounters));
  g_l2_bytes = prop.l2CacheSize;
  CHECK_CUDA(cudaMalloc(&g_round_sync_words, 2 * sizeof(uint32_t)));
  CHECK_CUDA(cudaMemset(g_round_sync_words, 0, 2 * sizeof(uint32_t)));

  std::printf("kernels:\n");
  for (auto& k : kernel_configs<bfloat16_t, true>()) k.setup();
  for (auto& k : kernel_configs<bfloat16_t, false>()) k.setup();
  for (auto& k : kernel_configs<half_t, true>()) k.setup();
  for (auto& k : kernel_configs<half_t, false>()) k.setup();

  cublasHandle_t handle;
  CHECK_CUBLAS(cublasCreate(&handle));

  // Ragged shapes also run on a capped grid (correctness only), so that one CTA walks several tiles,
  // edge tiles included.
  std::vector<Shape> shapes = {
      {128, 128, 64, 0},     {200, 136, 72, 8},     {200, 136, 72, 0, 1},     {1992, 2000, 520, 16, 5},
      {1024, 1024, 1024, 0}, {4096, 4096, 4096, 0}, {8192, 8192, 8192, 0},
      // The barrier between rounds, forced: many rounds on a capped grid, one every round / third.
      {1992, 2000, 520, 0, 5, 1}, {1000, 1104, 3000, 0, 7, 3},
      // Split-K: a ragged tile and K, few tiles; and tiles leaving a tail on a capped grid.
      {300, 520, 4000, 24, 0}, {1000, 1104, 3000, 0, 7},
  };
  for (int m : {128, 4096})
    for (auto nk : {std::pair{2112, 7168}, {24576, 1536}, {7168, 16384}, {4096, 7168}, {7168, 2048}})
      shapes.push_back(Shape{m, nk.first, nk.second, 0});
  if (!only_shape.empty()) shapes = only_shape;
  if (few_tiles_only) {
    shapes.erase(std::remove_if(shapes.begin(), shapes.end(),
                                [](const Shape& s) { return s.M != 128 && s.N != 2112; }),
                 shapes.end());
  }

  Stats stats;
  std::vector<Row> table;
  for (const Shape& sh : shapes) {
    run_case<bfloat16_t, true>(handle, sh, bench, check, stats, table);
    if (seed_layout_only) continue;
    run_case<bfloat16_t, false>(handle, sh, bench, check, stats, table);
    run_case<half_t, true>(handle, sh, bench, check, stats, table);
    run_case<half_t, false>(handle, sh, bench, check, stats, table);
  }
  CHECK_CUBLAS(cublasDestroy(handle));

  if (bench) {
    std::string report;
    char head[512];
    std::snprintf(head, sizeof(head),
                  "# gemm_sm90 on %s (%d SMs), TFLOPS = 2MNK / median of 20 runs after 5 warm-ups (cudaEvents); "
                  "raster group %d\n#     M     N     K  dtype B      cuBLAS     ours (best config)   ratio | per "
                  "config:",
                  prop.name, g_num_sms, g_raster_group);
    report += head;
    for (auto& k : kernel_configs<bfloat16_t, true>()) report += std::string(" ") + k.name;
    report += "\n";
    for (auto& r : table) report += r.text + "\n";
    std::printf("\n%s", report.c_str());
    std::string path;
    if (const char* p = std::getenv("GEMM_SM90_REPORT")) path = p;
    else if (const char* o = std::getenv("OUT")) path = std::string(o) + "/gemm_sm90.txt";
    if (!path.empty()) {
      if (FILE* f = std::fopen(path.c_str(), "w")) {
        std::fputs(report.c_str(), f);
        std::fclose(f);
        std::printf("report written to %s\n", path.c_str());
      } else {
        std::printf("could not write %s\n", path.c_str());
      }
    }
  }

  std::printf("\n%s: %d of %d checks failed\n", stats.failures ? "FAIL" : "PASS", stats.failures, stats.cases);
  return stats.failures ? 1 : 0;
}
