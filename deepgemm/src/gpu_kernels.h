// The GPU kernels' sources and their JIT: what gpu.cc launches, generated for one configuration and
// compiled by NVRTC for the device (rt::compile_cuda's disk cache, plus an in-process table of
// loaded kernels), with our headers carried inside the library.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "rt/cuda_module.h"
#include "rt/dtype.h"
#include "rt/embedded_file.h"
#include "rt/nvrtc.h"

namespace deepgemm::detail {

// One instance of kernels/sm90_gemm.cuh (the template arguments of Sm90GemmConfig).
struct Sm90KernelSpec {
  bool fp8 = true;                  // e4m3 inputs with scales; else bfloat16
  rt::DType out = rt::DType::BF16;  // D: BF16 or F32
  int block_m = 128, block_n = 128, stages = 4;
  int grouping = 0;  // kernels::Sm90Grouping: 0 none, 1 M-contiguous, 2 M-masked
  bool has_c = false;
  bool tma_store = false;
  int epilogue_buffers = 2;  // 64 x 64 staging buffers per consumer of the TMA-store epilogue (1 or 2, or
                             // one per box of the slice with epilogue_whole_slice)
  bool epilogue_whole_slice = false;
  bool fp4_b = false;        // B packed e2m1, expanded to e4m3 in the kernel
  // fp4_b expanded in registers as wgmma's A operand (kernels/sm90_fp4_gemm.cuh: D^T = B A^T;
  // block_m rows of A, block_n rows of B a tile) instead of into a shared-memory tile.
  bool fp4_registers = false;
  bool fold_scales = false;  // fp4_b with power-of-two scales per 32 of K, folded into the values
  bool sfb_per_row = false;  // B's scales per row and promotion_k of K (FP4 B, K-grouped)
  int promotion_k = 128;
  int multicast = 1;       // clusters of 2 sharing B's tile
  // fp4_registers: 64-row tiles of B on two consumers taking alternate k-blocks (sm90_fp4_gemm.cuh;
  // sm90_gemm.cuh has no such form: sm90_gemm_source refuses it there).
  bool k_interleave = false;
  bool ring_rounds = false;   // the staged-scale loop's whole ring rounds unrolled
  int64_t smem_bytes = 0;  // the host's count, asserted against the kernel's in the source

  auto key() const {
    return std::make_tuple(fp8, out, block_m, block_n, stages, grouping, has_c, tma_store, epilogue_buffers,
                           epilogue_whole_slice, fp4_b, fp4_registers, fold_scales, sfb_per_row, promotion_k,
                           multicast, k_interleave, ring_rounds, smem_bytes);
  }
};

// The loaded kernel of one spec and its name as GemmConfig::kernel reports it.
struct Sm90Kernel {
  rt::CudaKernel kernel;
  std::string name;
};

inline constexpr const char* kSm90GemmKernel = "deepgemm_sm90_gemm";
inline constexpr const char* kLayoutCopyKernel = "deepgemm_layout_copy";
inline constexpr const char* kQuantCastKernel = "deepgemm_quant_cast";

// The quantization casts of kernels/quant_cast.cuh.
enum class QuantCast {
  RowBlocksFp8,  // per token: (in, rows, k, s0, s1, int block, float fmax, int ue8m0, q, scales)
  RowBlocksFp4,  // per token to e2m1, the same parameters
  Blocks,        // per 128 x 128 block: (in, rows, cols, s0, s1, int ue8m0, q, scales)
  Columns,       // per column and 128 rows: the same parameters
};

// extern "C" kSm90GemmKernel(TmaDescriptor a, b, sfa, sfb, d, Sm90GemmParams p) for `spec` (of
// kernels/sm90_fp4_gemm.cuh with spec.fp4_registers, else of kernels/sm90_gemm.cuh).
std::string sm90_gemm_source(const Sm90KernelSpec& spec);
// extern "C" kLayoutCopyKernel(const In*, Out*, int rows, int cols, int64_t s_g, s_r, s_c, out_ld).
std::string layout_copy_source(rt::DType in, rt::DType out);
// extern "C" kQuantCastKernel for `cast` of `in` (float32, bfloat16 or float16) input.
std::string quant_cast_source(QuantCast cast, rt::DType in);

// Our kernel headers and the device primitives, as NVRTC's in-memory include files.
const std::vector<rt::EmbeddedFile>& kernel_headers();

// NVRTC's options for `arch`, with the user's extra flags from DG_JIT_FLAGS (whitespace-separated,
// e.g. "-DTL_CUDA_WAIT_TIMEOUT_NS=4000000000" to make a hung pipeline trap, or "--use_fast_math").
rt::NvrtcOptions jit_options(const std::string& arch);

// The extern "C" kernel `name` of `source`, compiled for CUDA device `device` once per process and
// set of options.
rt::CudaKernel jit_kernel(const std::string& source, const std::string& name, int device);

// The GEMM kernel of `spec` on `device` (jit_kernel), then found by the spec and DG_JIT_FLAGS alone:
// later calls generate no source (which cost microseconds on every call).
Sm90Kernel sm90_kernel(const Sm90KernelSpec& spec, int device);

}  // namespace deepgemm::detail
