// Configuration: the SM count the GPU kernels may use, and what configuration a call ran with.
//
// Environment knobs (read at each call):
//   DG_PRINT_CONFIGS=1   print each call's configuration to stderr, once per distinct function,
//                        shape and configuration
//   DG_CPU_ISA=...       the CPU kernels' vector ISA: avx512, avx2 or generic (default: the widest
//                        this CPU runs); asking for one the CPU lacks is a user error
//   DG_GPU_CONFIG=BMxBNxS[xC][c1]  force the GPU kernel's block M (64, 128, 192, 256), block N,
//                        pipeline stages and (C = 2) clusters of 2 multicasting B, e.g. 128x128x5 or
//                        256x128x3x2 (tuning; a user error when the kernel cannot take it). c1: one
//                        consumer, what 64-row tiles run on anyway (c2, two k-interleaved ones, was
//                        removed and is refused)
//   DG_GPU_FP4=auto|registers|registers:BMxBN[i]|shared  which FP4-B kernel (docs/deepgemm.md)
//   DG_GPU_SPLIT_K=S|1|auto  split-K for plain GEMMs: S ranges of K, 1 for none, or (unset, auto)
//                        the plan's choice (docs/deepgemm.md)
//   DG_GPU_ROUND_SYNC=R|0|auto  a grid-wide barrier every R rounds of tiles, 0 for never, or
//                        (unset, auto) the rule
//   DG_GPU_PDL=0         launch each kernel plainly, not overlapping the kernel before it
//   OMP_NUM_THREADS      threads of the CPU path (OpenMP)
//   DG_JIT_FLAGS="..."   extra NVRTC options for the GPU kernels, whitespace-separated (e.g.
//                        -DTL_CUDA_WAIT_TIMEOUT_NS=4000000000: a stuck pipeline traps instead of hanging;
//                        -DDG_TIMELINE=<address>: cycle stamps, kernels/sm90_timeline.h)
//   TL_CACHE_DIR         (runtime) where the GPU kernels' JIT cache lives
#pragma once

#include <cstdint>
#include <string>

#include "rt/cuda_driver.h"

namespace deepgemm {

// The number of SMs the GPU kernels may use (DeepGEMM's set_num_sms): 0 resets to the device's
// count; otherwise 1..the SM count of CUDA device 0 when a device is present. A user error otherwise.
void set_num_sms(int num_sms);
// The value set, else the SM count of CUDA device 0, else 0 (no GPU).
int get_num_sms();

// The CUDA stream the GPU kernels will enqueue on, per calling thread (DeepGEMM uses the framework's
// current stream; this is ours). nullptr (the default): the legacy default stream, which rt::Tensor's
// copies synchronize with. The CPU path ignores it: its calls are complete when they return.
void set_stream(rt::CuStream stream);
rt::CuStream get_stream();

// What one call ran with.
struct GemmConfig {
  std::string function;  // "fp8_gemm_nt"
  std::string backend;   // "cpu" or "cuda"
  std::string kernel;    // "cpu.scaled_gemm.avx512", "cpu.bf16_gemm.avx2", "cuda.sm90_fp8_gemm.tma_store", ...
  int64_t m = 0, n = 0, k = 0;
  int64_t num_groups = 1;
  // CPU: rows per task, columns per packed B panel, K per packing pass; GPU: the block shape.
  int block_m = 0, block_n = 0, block_k = 0;
  int promotion_k = 0;  // K between scale promotions (128, or 32 for per-32 FP4 scales); 0: none (BF16)
  int num_tasks = 0;    // CPU: output tiles scheduled; GPU: thread blocks
  int num_threads = 0;  // CPU: OpenMP threads; GPU: SMs used
  int num_stages = 0;       // GPU only
  int num_multicast = 0;    // GPU only
  int split_k = 1;          // GPU only: K ranges computed apart and summed (few-tile shapes)
  bool round_sync = false;  // GPU only: the thread blocks meet between rounds of tiles (large FP8 GEMMs)
  std::string to_string() const;
};

// The configuration of the last GEMM call made on this thread (function empty before any call).
GemmConfig last_config();

}  // namespace deepgemm
