// The GPU kernels through NVRTC for sm_90a without a GPU (CI): every grouping, output and input kind
// of kernels/sm90_gemm.cuh compiles, the host's shared-memory count agrees with the kernel's (the
// generated source asserts it), and the PTX holds the tensor-core instructions it is meant to.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dg_test_util.h"
#include "gpu_kernels.h"
#include "h200.h"
#include "heuristics.h"
#include "plan.h"
#include "rt/error.h"
#include "rt/nvrtc.h"
#include "testutil/environment.h"
#include "testutil/test_shards.h"

namespace {

using deepgemm::detail::Sm90KernelSpec;

std::string compile_ptx(const std::string& source, const std::string& name) {
  rt::NvrtcOptions options;
  options.arch = "sm_90a";
  return rt::compile_cuda(source, name + ".cu", deepgemm::detail::kernel_headers(), options).ptx;
}

Sm90KernelSpec spec(bool fp8, rt::DType out, int bm, int bn, int stages, int grouping, bool has_c, bool tma_store,
                    int per_row_promotion_k = 0, int multicast = 1) {
  Sm90KernelSpec s;
  s.fp8 = fp8;
  s.out = out;
  s.block_m = bm;
  s.block_n = bn;
  s.stages = stages;
  s.grouping = grouping;
  s.has_c = has_c;
  s.tma_store = tma_store;
  s.sfb_per_row = per_row_promotion_k > 0;
  s.promotion_k = s.sfb_per_row ? per_row_promotion_k : 128;
  s.multicast = multicast;
  s.smem_bytes = deepgemm::detail::sm90_smem_bytes(fp8, bm, bn, stages, tma_store ? s.epilogue_buffers : 0,
                                                   out == rt::DType::BF16 ? 2 : 4,
                                                   s.sfb_per_row ? 128 / s.promotion_k : 0, false,
                                                   deepgemm::detail::sm90_dual_b(grouping == 1, bm));
  return s;
}

// s with one epilogue buffer per consumer (what the heuristic takes where two leave too few stages).
Sm90KernelSpec one_buffer(Sm90KernelSpec s) {
  s.epilogue_buffers = 1;
  s.smem_bytes = deepgemm::detail::sm90_smem_bytes(s.fp8, s.block_m, s.block_n, s.stages, s.tma_store ? 1 : 0,
                                                   s.out == rt::DType::BF16 ? 2 : 4, 0, false,
                                                   deepgemm::detail::sm90_dual_b(s.grouping == 1, s.block_m));
  return s;
}

// The FP8 x FP4 kernel with B expanded in registers (6 stages, BF16 out, plain grouping).
Sm90KernelSpec fp4_registers(int bm, int bn, int promotion, bool k_interleave) {
  Sm90KernelSpec s = spec(true, rt::DType::BF16, bm, bn, 6, 0, false, false, promotion);
  s.fp4_b = s.fp4_registers = true;
  s.k_interleave = k_interleave;
  s.smem_bytes = deepgemm::detail::sm90_fp4_register_smem_bytes(bm, bn, 6, 128 / promotion, k_interleave);
  return s;
}

TEST(GpuCompile, Sm90GemmVariants) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  struct Case {
    Sm90KernelSpec s;
    const char* wgmma;  // expected in the PTX
  };
  const Case cases[] = {
      {spec(true, rt::DType::BF16, 128, 128, 5, 0, false, true), "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::F32, 128, 112, 4, 0, true, false), "wgmma.mma_async.sync.aligned.m64n112k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::BF16, 64, 160, 6, 1, false, false), "wgmma.mma_async.sync.aligned.m64n160k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::BF16, 128, 192, 4, 2, false, true), "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3"},
      {spec(false, rt::DType::BF16, 128, 256, 4, 0, false, true), "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"},
      {spec(false, rt::DType::F32, 64, 96, 4, 2, true, false), "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16"},
      {spec(true, rt::DType::BF16, 256, 128, 3, 0, false, true), "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"},
      // Three consumers (192-row tiles).
      {spec(true, rt::DType::BF16, 192, 128, 4, 0, false, true), "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::F32, 192, 64, 6, 0, true, false), "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::F32, 256, 96, 3, 1, true, false), "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3"},
      {spec(false, rt::DType::BF16, 256, 128, 4, 2, false, true), "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"},
      // Contiguous grouped 256-row tiles (two B slots a stage): FP8 (above, 256 x 96) and BF16.
      {one_buffer(spec(true, rt::DType::BF16, 256, 128, 3, 1, false, true)), "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"},
      {one_buffer(spec(false, rt::DType::BF16, 256, 128, 3, 1, false, true)), "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"},
      // Per-row B scales (FP4 B, K-grouped): promotion every 32 and every 128 of K.
      {spec(true, rt::DType::F32, 128, 176, 4, 0, true, false, 32), "wgmma.mma_async.sync.aligned.m64n176k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::BF16, 256, 128, 3, 2, false, true, 128), "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"},
      // Clusters of 2 multicasting B.
      {spec(true, rt::DType::BF16, 256, 128, 3, 0, false, true, 0, 2), "multicast::cluster"},
      {spec(false, rt::DType::F32, 128, 256, 4, 0, true, false, 0, 2), "multicast::cluster"},
      // 64-row tiles (one consumer) with two partial sets.
      {spec(true, rt::DType::BF16, 64, 64, 8, 0, false, true), "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::F32, 64, 128, 6, 2, true, false), "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::BF16, 64, 32, 12, 0, false, false), "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3"},
      // Widths that are multiples of 8 only (float inputs): 56 columns (128 tiles across N = 7168).
      {spec(true, rt::DType::BF16, 64, 56, 8, 0, false, false), "wgmma.mma_async.sync.aligned.m64n56k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::F32, 128, 56, 6, 0, true, false), "wgmma.mma_async.sync.aligned.m64n56k32.f32.e4m3.e4m3"},
      {spec(true, rt::DType::BF16, 256, 40, 4, 0, false, false), "wgmma.mma_async.sync.aligned.m64n40k32.f32.e4m3.e4m3"},
      {spec(false, rt::DType::BF16, 128, 56, 6, 0, false, false), "wgmma.mma_async.sync.aligned.m64n56k16.f32.bf16.bf16"},
      // Widths that are not multiples of 16 past 56 (NVRTC's "incomplete type WgmmaSsF32<88>" until stop 43).
      {spec(false, rt::DType::BF16, 256, 88, 4, 0, false, false), "wgmma.mma_async.sync.aligned.m64n88k16.f32.bf16.bf16"},
      {spec(true, rt::DType::BF16, 128, 72, 6, 0, false, false), "wgmma.mma_async.sync.aligned.m64n72k32.f32.e4m3.e4m3"},
  };
  for (const Case& c : cases) {
    const std::string ptx = compile_ptx(deepgemm::detail::sm90_gemm_source(c.s), deepgemm::detail::kSm90GemmKernel);
    EXPECT_NE(ptx.find(c.wgmma), std::string::npos) << c.wgmma;
    EXPECT_NE(ptx.find("cp.async.bulk.tensor.3d"), std::string::npos);
    if (c.s.fp8 && !c.s.sfb_per_row) {
      EXPECT_NE(ptx.find("ld.global.nc.f32"), std::string::npos);  // B's block scales, read by the consumers
    }
    if (c.s.tma_store) {
      EXPECT_NE(ptx.find("cp.async.bulk.tensor.3d.global.shared::cta"), std::string::npos);
    }
  }
}

// Every block_n the forced configurations accept (any multiple of 8, DG_GPU_CONFIG) has its wgmma
// wrapper in the kernels' headers, for FP8 (k32) and BF16 (k16): the kernel issues one instruction
// as wide as its tile. (DG_GPU_CONFIG=256x88x4 was an internal error from NVRTC until stop 43.)
TEST(GpuCompile, EveryForcedWidthHasItsWgmma) {
  std::string headers;
  for (const rt::EmbeddedFile& h : deepgemm::detail::kernel_headers()) headers += h.contents;
  for (int bn = 16; bn <= 256; bn += 8) {
    for (const char* shape : {"k16.f32.\" TY \".\" TY", "k32.f32.\" TA \".\" TB"}) {
      const std::string instruction = rt::str("wgmma.mma_async.sync.aligned.m64n", bn, shape);
      EXPECT_NE(headers.find(instruction), std::string::npos) << instruction;
    }
  }
}

// ptxas serializes wgmma where it cannot prove the pipeline safe, and says so only in an "info"
// line of its verbose log (C75xx: stop 39 lost most of a kernel's speed to one, a run-time branch
// around the waits; rt::compile_cuda collects those lines). The kernels the heuristic picks on the
// H200 compile free of them, with C too (BF16 + C serialized every wgmma until stop 42); a kernel that
// calls printf between a wgmma and its wait shows the message gets through (the control).
TEST(GpuCompile, NoKernelSerializesItsWgmmas) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  const testutil::TempDir cache;  // a fresh disk cache: a cached compile keeps no log
  const testutil::ScopedEnv cache_dir("TL_CACHE_DIR", cache.path());
  rt::NvrtcOptions options;
  options.arch = "sm_90a";
  auto compile = [&](const std::string& source, const char* name) {
    return rt::compile_cuda(source, name, deepgemm::detail::kernel_headers(), options);
  };
  testing::internal::CaptureStderr();  // (the control's warning)
  const rt::NvrtcResult control = compile(R"(
extern "C" __global__ void serialized(float* out, unsigned long long desc_a, unsigned long long desc_b) {
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %5, %6, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(1), "l"(desc_a), "l"(desc_b));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  if (threadIdx.x == 0) printf("%f\n", d0);
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  out[threadIdx.x] = d0 + d1 + d2 + d3;
}
)", "serialized.cu");
  testing::internal::GetCapturedStderr();
  ASSERT_FALSE(control.serialized_wgmma.empty()) << "the control's serialization is not in the log:\n" << control.log;
  const Sm90KernelSpec kernels[] = {
      spec(true, rt::DType::BF16, 256, 128, 3, 0, false, true),            // M = 4096, FP8
      spec(true, rt::DType::BF16, 192, 128, 4, 0, false, true),            // three consumers
      spec(true, rt::DType::BF16, 128, 64, 7, 0, false, true),             // M = 128
      spec(true, rt::DType::BF16, 64, 64, 8, 0, false, true),              // M = 128, one consumer
      spec(false, rt::DType::BF16, 128, 256, 4, 0, false, true),           // BF16
      spec(false, rt::DType::F32, 128, 256, 4, 0, true, false),            // BF16 + C (its loads were in the accumulators)
      spec(false, rt::DType::F32, 64, 96, 4, 2, true, false),              // the same, masked grouped
      spec(true, rt::DType::F32, 256, 128, 3, 0, true, false),             // FP8 + C
      spec(true, rt::DType::BF16, 128, 56, 6, 0, false, false),            // 56 columns (N = 7168 in 128 tiles)
      spec(true, rt::DType::BF16, 64, 56, 8, 0, false, false),
      spec(true, rt::DType::BF16, 64, 32, 12, 0, false, false),            // M <= 128, 64 x 64 tiles too few
      fp4_registers(64, 64, 128, true),                                    // FP4 B in registers
      fp4_registers(64, 128, 32, false),
  };
  for (const Sm90KernelSpec& s : kernels) {
    const rt::NvrtcResult r = compile(deepgemm::detail::sm90_gemm_source(s), "sm90_gemm.cu");
    EXPECT_NE(r.log.find("ptxas info"), std::string::npos) << "no ptxas log:\n" << r.log;
    EXPECT_TRUE(r.serialized_wgmma.empty()) << s.block_m << "x" << s.block_n << (s.fp4_registers ? " fp4 registers" : "") << ":\n" << r.log;
  }
}

// Packed FP4 B: the expansion (byte permutes) and a third barrier per stage; host and kernel agree
// on its shared memory, and the heuristic leaves room for it.
TEST(GpuCompile, PackedFp4B) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  for (int promotion : {32, 128}) {
    Sm90KernelSpec s = spec(true, rt::DType::BF16, 128, 128, 4, 0, false, true, promotion);
    s.fp4_b = true;
    s.smem_bytes = deepgemm::detail::sm90_smem_bytes(true, 128, 128, 4, 2, 2, 128 / promotion, true);
    const std::string ptx = compile_ptx(deepgemm::detail::sm90_gemm_source(s), deepgemm::detail::kSm90GemmKernel);
    EXPECT_NE(ptx.find("prmt.b32"), std::string::npos);
    EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), std::string::npos);
    if (promotion == 32) {  // power-of-two scales folded into the values: e4m3 conversions of the tables
      s.fold_scales = true;
      const std::string folded =
          compile_ptx(deepgemm::detail::sm90_gemm_source(s), deepgemm::detail::kSm90GemmKernel);
      EXPECT_NE(folded.find("cvt.rn.satfinite.e4m3x2.f32"), std::string::npos);
    }
  }
  const int64_t smem = 232448;
  for (int64_t m : {128, 4096}) {
    const auto b = deepgemm::detail::choose_gpu_blocking(true, m, 7168, 2048, 1, 2, true, 132, smem, 4, 256, true);
    EXPECT_TRUE(b.fp4_b);
    EXPECT_LE(b.smem_bytes, smem);
    EXPECT_EQ(b.smem_bytes, deepgemm::detail::sm90_smem_bytes(true, b.block_m, b.block_n, b.stages,
                                                              b.tma_store ? b.epilogue_buffers : 0, 2, 4, true));
  }
}

// FP4 B expanded in registers (kernels/sm90_fp4_gemm.cuh): wgmma with its A fragment in registers
// (the "{%r..}" operand), every grouping, both promotions, one and two consumers; host and kernel
// agree on shared memory (the source asserts it); the blocking picks tiles that fill the SMs.
TEST(GpuCompile, Fp4BInRegisters) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  struct Case {
    int bm, bn, grouping, promotion;
    rt::DType out;
    bool has_c, k_interleave;
  };
  for (const Case& c : {Case{64, 64, 0, 128, rt::DType::BF16, false, false}, Case{128, 128, 1, 128, rt::DType::F32, true, false},
                        Case{32, 128, 2, 32, rt::DType::BF16, false, false}, Case{64, 64, 0, 32, rt::DType::F32, true, false},
                        Case{128, 64, 0, 128, rt::DType::F32, true, true}, Case{32, 64, 2, 32, rt::DType::BF16, false, true}}) {
    Sm90KernelSpec s = spec(true, c.out, c.bm, c.bn, 6, c.grouping, c.has_c, false, c.promotion);
    s.fp4_b = s.fp4_registers = true;
    s.k_interleave = c.k_interleave;
    s.smem_bytes = deepgemm::detail::sm90_fp4_register_smem_bytes(c.bm, c.bn, 6, 128 / c.promotion, c.k_interleave);
    const std::string ptx = compile_ptx(deepgemm::detail::sm90_gemm_source(s), deepgemm::detail::kSm90GemmKernel);
    const std::string wgmma = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(c.bm) + "k32.f32.e4m3.e4m3";
    const size_t at = ptx.find(wgmma);
    ASSERT_NE(at, std::string::npos) << wgmma;
    // The A operand: four 32-bit registers after the accumulators, not a 64-bit descriptor.
    EXPECT_NE(ptx.find("}, {%r", at), std::string::npos) << ptx.substr(at, 400);
    EXPECT_NE(ptx.find("prmt.b32"), std::string::npos);
    // No expanded tile in shared memory (k-interleaved: only the hand-over of the second consumer's sum).
    EXPECT_EQ(ptx.find("st.shared") != std::string::npos, c.k_interleave);
  }
  const int64_t smem = 232448;
  struct Shape {
    int64_t m, n;
    int promotion;
    int bm, bn;  // expected (the fastest measured on the H200 where measured: docs/perf.md)
    bool k_interleave;
  };
  for (const Shape& sh : {Shape{128, 4096, 128, 64, 64, true}, Shape{128, 2112, 128, 32, 64, true},
                          Shape{64, 4096, 32, 32, 64, true}, Shape{128, 7168, 32, 64, 128, false},
                          Shape{4096, 4096, 128, 128, 128, false}}) {
    const auto b = deepgemm::detail::choose_fp4_register_blocking(sh.m, sh.n, 1, 132, smem, sh.promotion, false);
    EXPECT_TRUE(b.fp4_registers);
    EXPECT_EQ(b.block_m, sh.bm) << sh.m << " x " << sh.n;
    EXPECT_EQ(b.block_n, sh.bn) << sh.m << " x " << sh.n;
    EXPECT_EQ(b.k_interleave, sh.k_interleave) << sh.m << " x " << sh.n;
    EXPECT_LE(b.smem_bytes, smem);
    EXPECT_EQ(b.smem_bytes, deepgemm::detail::sm90_fp4_register_smem_bytes(b.block_m, b.block_n, b.stages,
                                                                           128 / sh.promotion, b.k_interleave));
    EXPECT_GE(b.stages, 4);
  }
  EXPECT_TRUE(deepgemm::detail::sm90_fp4_in_registers(128));
  EXPECT_TRUE(deepgemm::detail::sm90_fp4_in_registers(512));
  EXPECT_FALSE(deepgemm::detail::sm90_fp4_in_registers(1024));
  // The contiguous layout's tiles stay inside one 128-row block.
  EXPECT_EQ(128 % deepgemm::detail::choose_fp4_register_blocking(4096, 4096, 1, 132, smem, 128, true).block_m, 0);
  // A forced tile the kernel takes but the heuristic never picks (80 and 112 rows): it is the tile
  // (it matched no candidate: block_m 0, a division by zero before the launch).
  for (int bm : {80, 112}) {
    const auto forced = deepgemm::detail::choose_fp4_register_blocking(200, 200, 1, 132, smem, 128, false, bm, 64, false);
    EXPECT_EQ(forced.block_m, bm);
    EXPECT_EQ(forced.block_n, 64);
    EXPECT_GT(forced.grid, 0);
  }
}

// One epilogue buffer per consumer: each box's store must leave shared memory before the next box
// is staged there (wait_group.read 0, not 1).
TEST(GpuCompile, OneEpilogueBuffer) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  Sm90KernelSpec s = spec(true, rt::DType::BF16, 256, 128, 4, 0, false, true);
  s.epilogue_buffers = 1;
  s.smem_bytes = deepgemm::detail::sm90_smem_bytes(true, 256, 128, 4, 1, 2);
  EXPECT_LE(s.smem_bytes, 232448);
  const std::string ptx = compile_ptx(deepgemm::detail::sm90_gemm_source(s), deepgemm::detail::kSm90GemmKernel);
  EXPECT_NE(ptx.find("cp.async.bulk.wait_group.read 0"), std::string::npos);
  EXPECT_EQ(ptx.find("cp.async.bulk.wait_group.read 1"), std::string::npos);
}

// The whole slice staged at once (a buffer per box): one bulk group a tile, against four with two
// buffers taking the 256 x 128 tile's four boxes in turn.
TEST(GpuCompile, EpilogueWholeSlice) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  auto commits = [](const std::string& ptx) {
    int n = 0;
    for (size_t at = ptx.find("cp.async.bulk.commit_group"); at != std::string::npos;
         at = ptx.find("cp.async.bulk.commit_group", at + 1))
      ++n;
    return n;
  };
  for (int buffers : {2, 4}) {
    Sm90KernelSpec s = spec(true, rt::DType::BF16, 256, 128, 3, 0, false, true);
    s.epilogue_buffers = buffers;
    s.epilogue_whole_slice = buffers == 4;
    s.smem_bytes = deepgemm::detail::sm90_smem_bytes(true, 256, 128, 3, buffers, 2);
    const std::string ptx = compile_ptx(deepgemm::detail::sm90_gemm_source(s), deepgemm::detail::kSm90GemmKernel);
    EXPECT_EQ(commits(ptx), buffers == 4 ? 1 : 4) << buffers;
    EXPECT_NE(ptx.find(buffers == 4 ? "cp.async.bulk.wait_group.read 0" : "cp.async.bulk.wait_group.read 1"),
              std::string::npos)
        << buffers;
  }
}

TEST(GpuCompile, HostAndKernelAgreeOnSharedMemory) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  Sm90KernelSpec s = spec(true, rt::DType::BF16, 128, 128, 4, 0, false, true);
  s.smem_bytes += 16;  // a host count that drifted from the kernel's must not compile
  try {
    compile_ptx(deepgemm::detail::sm90_gemm_source(s), deepgemm::detail::kSm90GemmKernel);
    ADD_FAILURE() << "a wrong shared-memory count compiled";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("host and kernel disagree on shared memory"), std::string::npos) << e.what();
  }
}

// DG_JIT_FLAGS reach NVRTC: a define it sets is seen by the kernel source.
TEST(GpuCompile, JitFlagsFromTheEnvironment) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  dgtest::ScopedEnv env("DG_JIT_FLAGS", "  -DDG_PROBE=7   -DDG_OTHER ");
  const rt::NvrtcOptions options = deepgemm::detail::jit_options("sm_90a");
  EXPECT_EQ(options.extra, (std::vector<std::string>{"-DDG_PROBE=7", "-DDG_OTHER"}));
  const std::string source =
      "static_assert(DG_PROBE == 7, \"the flag did not arrive\");\n"
      "extern \"C\" __global__ void probe(int* x) { *x = DG_PROBE; }\n";
  EXPECT_NE(rt::compile_cuda(source, "probe.cu", {}, options).ptx.find("probe"), std::string::npos);
}

// The opt-in timeline (kernels/sm90_timeline.h) compiles into every loop it stamps when
// DG_JIT_FLAGS carries -DDG_TIMELINE=<buffer address>, without ptxas serializing the wgmmas; without
// the define nothing of it is left; a define without an address is refused.
TEST(GpuCompile, TimelineStamps) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  Sm90KernelSpec fp4 = spec(true, rt::DType::BF16, 128, 128, 4, 0, false, true, 128);
  fp4.fp4_b = true;
  fp4.smem_bytes = deepgemm::detail::sm90_smem_bytes(true, 128, 128, 4, 2, 2, 1, true);
  const Sm90KernelSpec specs[] = {
      spec(true, rt::DType::BF16, 64, 64, 12, 0, false, true),         // M = 128: two partial sets
      spec(true, rt::DType::F32, 256, 96, 3, 1, true, false),          // two m64 waves, one partial set
      spec(true, rt::DType::F32, 128, 176, 4, 0, true, false, 32),     // per-row B scales
      fp4,                                                             // FP4 B, consumers expanding
      spec(false, rt::DType::BF16, 128, 256, 4, 0, false, true),       // BF16
      spec(true, rt::DType::BF16, 256, 128, 3, 0, false, true, 0, 2),  // multicast
      fp4_registers(64, 64, 128, true),                                 // FP4 B in registers, k-interleaved
      fp4_registers(32, 128, 32, false),                                // the same, per-32
  };
  for (const Sm90KernelSpec& s : specs) {
    const std::string source = deepgemm::detail::sm90_gemm_source(s);
    dgtest::ScopedEnv env("DG_JIT_FLAGS", "-DDG_TIMELINE=0x7f0000000000");
    const rt::NvrtcResult on = rt::compile_cuda(source, "timeline.cu", deepgemm::detail::kernel_headers(),
                                                deepgemm::detail::jit_options("sm_90a"));
    EXPECT_NE(on.ptx.find("%clock64"), std::string::npos) << s.block_m << "x" << s.block_n;
    EXPECT_NE(on.ptx.find("%globaltimer"), std::string::npos);
    EXPECT_NE(on.ptx.find("%smid"), std::string::npos);
    EXPECT_EQ(on.log.find("serialized"), std::string::npos) << on.log;
    EXPECT_EQ(compile_ptx(source, deepgemm::detail::kSm90GemmKernel).find("%clock64"), std::string::npos);
  }
  dgtest::ScopedEnv env("DG_JIT_FLAGS", "-DDG_TIMELINE");
  try {
    rt::compile_cuda(deepgemm::detail::sm90_gemm_source(specs[0]), "timeline.cu", deepgemm::detail::kernel_headers(),
                     deepgemm::detail::jit_options("sm_90a"));
    ADD_FAILURE() << "DG_TIMELINE without an address compiled";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the stamp buffer's device address"), std::string::npos) << e.what();
  }
}

TEST(GpuCompile, LayoutCopies) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  for (auto [in, out] : {std::pair{rt::DType::F8E4M3, rt::DType::F8E4M3}, std::pair{rt::DType::BF16, rt::DType::BF16},
                         std::pair{rt::DType::UE8M0, rt::DType::F32}}) {
    const std::string ptx =
        compile_ptx(deepgemm::detail::layout_copy_source(in, out), deepgemm::detail::kLayoutCopyKernel);
    EXPECT_NE(ptx.find(deepgemm::detail::kLayoutCopyKernel), std::string::npos) << rt::name(in);
  }
}

TEST(GpuCompile, BlockingFitsTheDevice) {
  // H200-like: 132 SMs, 227 KiB of shared memory per block.
  const int64_t smem = 232448;
  for (bool fp8 : {true, false}) {
    for (int64_t m : {64, 128, 4096}) {
      for (auto [n, k] : {std::pair<int64_t, int64_t>{2112, 7168}, {24576, 1536}, {7168, 16384}, {4096, 7168}}) {
        const auto b = deepgemm::detail::choose_gpu_blocking(fp8, m, n, k, 1, 2, true, 132, smem, 0, 256, false, fp8);
        EXPECT_LE(b.smem_bytes, smem);
        EXPECT_GE(b.stages, 2);
        EXPECT_GE(b.grid, 1);
        EXPECT_LE(b.grid, 132);
        EXPECT_TRUE(b.block_m == 64 || b.block_m == 128 || b.block_m == 256 || (fp8 && b.block_m == 192));
        if (fp8) {
          EXPECT_LE(b.block_n, 192);
        }
        EXPECT_EQ(b.tma_store, b.block_n % 64 == 0);
        // No k-interleaved consumers (removed from the kernel); 64-row FP8 tiles from 64 columns up
        // with at most 8 stages (measured faster).
        EXPECT_FALSE(b.k_interleave) << m << "x" << n << "x" << k;
        if (fp8 && b.block_m == 64 && b.block_n >= 64) {
          EXPECT_LE(b.stages, 8) << m << "x" << n << "x" << k;
        }
        EXPECT_EQ(b.smem_bytes, deepgemm::detail::sm90_smem_bytes(fp8, b.block_m, b.block_n, b.stages,
                                                                  b.tma_store ? b.epilogue_buffers : 0, 2));
      }
    }
  }
  // Where 64 x 64 tiles fill at most half the SMs, plain FP8 GEMMs take one wave of 64 x 32 tiles
  // (no split in K) on one consumer with 12 stages, as measured against two k-interleaved ones
  // (equal, stop 43); grouped ones keep 64 x 64.
  for (auto [m, n] : {std::pair<int64_t, int64_t>{128, 2112}, {64, 4096}, {64, 2112}, {128, 1024}}) {
    const auto b = deepgemm::detail::choose_gpu_blocking(true, m, n, 7168, 1, 2, true, 132, smem, 0, 256, false, true);
    EXPECT_EQ(b.block_m * 1000 + b.block_n, 64 * 1000 + 32) << m << "x" << n;
    EXPECT_EQ(b.stages, 12) << m << "x" << n;
    EXPECT_FALSE(b.k_interleave) << m << "x" << n;
  }
  EXPECT_EQ(deepgemm::detail::choose_gpu_blocking(true, 128, 2112, 7168, 1, 2, true, 132, smem, 0, 256, false, false)
                .block_n,
            64);
  EXPECT_EQ(deepgemm::detail::choose_gpu_blocking(true, 128, 4096, 7168, 1, 2, true, 132, smem, 0, 256, false, true)
                .block_n,
            64);
  // 256 x 128 FP8 tiles: three stages with two epilogue buffers per consumer; a forced fourth stage
  // fits with one buffer. 128 x 128 tiles fit five stages with two.
  auto wide = deepgemm::detail::choose_gpu_blocking(true, 4096, 4096, 7168, 1, 2, true, 132, smem);
  ASSERT_EQ(wide.block_m, 256);
  EXPECT_EQ(wide.grid, 128);  // 512 tiles: 4 rounds on 132 SMs, as on 128 CTAs
  EXPECT_EQ(wide.stages, 3);
  EXPECT_EQ(wide.epilogue_buffers, 2);
  // K of 56 blocks: the epilogue keeps staging box by box.
  deepgemm::detail::choose_whole_slice_epilogue(wide, true, 7168, 2, 0, smem);
  EXPECT_FALSE(wide.epilogue_whole_slice);
  EXPECT_EQ(wide.epilogue_buffers, 2);
  // Short K: a buffer per box of a consumer's slice (two m64 waves of two boxes), still three stages.
  auto short_k = deepgemm::detail::choose_gpu_blocking(true, 4096, 7168, 576, 1, 2, true, 132, smem);
  ASSERT_EQ(short_k.block_m * 1000 + short_k.block_n, 256 * 1000 + 128);
  deepgemm::detail::choose_whole_slice_epilogue(short_k, true, 576, 2, 0, smem);
  EXPECT_TRUE(short_k.epilogue_whole_slice);
  EXPECT_EQ(short_k.epilogue_buffers, 4);
  EXPECT_EQ(short_k.stages, 3);
  EXPECT_EQ(short_k.smem_bytes, deepgemm::detail::sm90_smem_bytes(true, 256, 128, 3, 4, 2));
  // 192 x 128 (a slice of two boxes: the two buffers it has) at K = 512; none without the TMA store.
  auto three = deepgemm::detail::choose_gpu_blocking(true, 4096, 32768, 512, 1, 2, true, 132, smem, 0, 256, false, true);
  ASSERT_EQ(three.block_m, 192);
  deepgemm::detail::choose_whole_slice_epilogue(three, true, 512, 2, 0, smem);
  EXPECT_TRUE(three.epilogue_whole_slice);
  EXPECT_EQ(three.epilogue_buffers, 2);
  auto direct = deepgemm::detail::choose_gpu_blocking(true, 4096, 7168, 576, 1, 4, false, 132, smem);
  deepgemm::detail::choose_whole_slice_epilogue(direct, true, 576, 4, 0, smem);
  EXPECT_FALSE(direct.epilogue_whole_slice);
  ASSERT_TRUE(deepgemm::detail::choose_sm90_stages(wide, true, 2, 0, smem, 4));
  EXPECT_EQ(wide.epilogue_buffers, 1);
  EXPECT_EQ(wide.smem_bytes, deepgemm::detail::sm90_smem_bytes(true, 256, 128, 4, 1, 2));
  deepgemm::detail::GpuBlocking square;
  square.block_m = square.block_n = 128;
  square.tma_store = true;
  ASSERT_TRUE(deepgemm::detail::choose_sm90_stages(square, true, 2, 0, smem));
  EXPECT_EQ(square.stages, 5);
  EXPECT_EQ(square.epilogue_buffers, 2);
  // A forced depth that does not fit even with one buffer is refused.
  EXPECT_FALSE(deepgemm::detail::choose_sm90_stages(square, true, 2, 0, smem, 7));
  // 192-row tiles (three consumers) where 256 x 128 would leave a partial wave, for plain FP8 GEMMs
  // only: 4096 x 2112 x 7168 (374 tiles, 3 waves, against 544 of 128 x 128 in 5).
  EXPECT_EQ(deepgemm::detail::choose_gpu_blocking(true, 4096, 2112, 7168, 1, 2, true, 132, smem, 0, 256, false, true)
                .block_m,
            192);
  for (int64_t m : {4096, 8192})
    EXPECT_NE(deepgemm::detail::choose_gpu_blocking(true, m, 2112, 7168, 1, 2, true, 132, smem).block_m, 192);
  // The contiguous layout (FP8): 256-row tiles with a second B tile a stage (its groups start on
  // 128-row boundaries), within the shared memory; none taller than max_block_m. (BF16 prefers 128 x
  // 256 tiles anyway.)
  const auto contiguous = deepgemm::detail::choose_gpu_blocking(true, 32768, 4096, 7168, 1, 2, true, 132, smem, 0, 256,
                                                                false, false, true);
  EXPECT_EQ(contiguous.block_m, 256);
  EXPECT_TRUE(contiguous.dual_b);
  EXPECT_GE(contiguous.stages, 3);
  EXPECT_EQ(contiguous.smem_bytes,
            deepgemm::detail::sm90_smem_bytes(true, 256, contiguous.block_n, contiguous.stages,
                                              contiguous.epilogue_buffers, 2, 0, false, true));
  EXPECT_LE(contiguous.smem_bytes, smem);
  EXPECT_FALSE(deepgemm::detail::choose_gpu_blocking(true, 32768, 4096, 7168, 1, 2, true, 132, smem).dual_b);
  for (int64_t m : {4096, 32768})
    EXPECT_LE(deepgemm::detail::choose_gpu_blocking(true, m, 4096, 7168, 1, 2, true, 132, smem, 0, 128).block_m, 128);
}

// 64-row tiles run on one consumer: DG_GPU_CONFIG's c1 (the only form, kept so that older
// configurations parse) and no suffix plan the same one-consumer kernel at every width, while c2 (two
// k-interleaved consumers, removed from sm90_gemm.cuh: no faster than one on the H200) is refused by
// name; a kernel spec asking sm90_gemm.cuh for them is an internal error. (On the host: plan_sm90 as
// gpu.cc calls it, for a plain FP8 GEMM on an H200.)
TEST(GpuCompile, SixtyFourRowTilesOnOneConsumer) {
  using deepgemm::detail::Sm90Facts;
  auto facts = [](const char* config) {
    Sm90Facts f;
    f.function = "fp8_gemm_nt";
    f.m = 128;
    f.n = 2112;
    f.k = 7168;
    f.d_aligned16 = true;
    f.knobs.config = config;
    dgtest::on_h200(f);
    return f;
  };
  for (const char* config : {"64x32x12", "64x32x12c1", "64x56x8", "64x64x8", "64x64x8c1", "64x96x6", "64x128x7c1",
                             "64x160x5", "64x192x4c1", "64x64x6x2c1"}) {
    const Sm90Facts f = facts(config);
    const deepgemm::detail::Sm90Plan plan = deepgemm::detail::plan_sm90(f);
    EXPECT_EQ(plan.blocking.block_m, 64) << config;
    EXPECT_EQ(plan.blocking.block_n, std::atoi(config + 3)) << config;
    EXPECT_FALSE(plan.blocking.k_interleave) << config;
    EXPECT_EQ(deepgemm::detail::sm90_consumers(plan.blocking.block_m), 1) << config;
    const Sm90KernelSpec s = deepgemm::detail::sm90_kernel_spec(f, plan);
    EXPECT_FALSE(s.k_interleave) << config;
    // The spec of c1 is the spec without it.
    std::string plain = config;
    if (plain.size() > 2 && plain.compare(plain.size() - 2, 2, "c1") == 0) {
      plain.resize(plain.size() - 2);
      const Sm90Facts g = facts(plain.c_str());
      EXPECT_EQ(s.key(), deepgemm::detail::sm90_kernel_spec(g, deepgemm::detail::plan_sm90(g)).key()) << config;
    }
  }
  for (const char* config : {"64x32x12c2", "64x64x8c2", "64x128x7c2", "128x128x4c2"}) {
    dgtest::expect_user_error([&] { deepgemm::detail::plan_sm90(facts(config)); },
                              {"fp8_gemm_nt", rt::str("DG_GPU_CONFIG='", config, "'"), "c2", "was removed"});
  }
  Sm90KernelSpec interleaved = spec(true, rt::DType::BF16, 64, 32, 12, 0, false, false);
  interleaved.k_interleave = true;
  try {
    deepgemm::detail::sm90_gemm_source(interleaved);
    ADD_FAILURE() << "sm90_gemm.cuh's source was generated with k-interleaved consumers";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), rt::ErrorKind::Internal) << e.what();
    EXPECT_NE(std::string(e.what()).find("k-interleaved"), std::string::npos) << e.what();
  }
}

// Whole ring rounds unrolled (Sm90GemmConfig::kRingRounds): the staged-scale loop gains a copy of
// its k-block per stage (more wgmmas in the PTX), and the heuristic takes them only where the H200
// measured them faster: tiles of three or more rounds of k-blocks, more tiles than CTAs.
TEST(GpuCompile, RingRounds) {
  using deepgemm::detail::choose_gpu_blocking;
  using deepgemm::detail::sm90_ring_rounds;
  const int64_t smem = 232448;  // the H200's opt-in shared memory per block
  if (rt::nvrtc_available()) {
    auto wgmmas = [](const std::string& ptx) {
      int n = 0;
      for (size_t at = ptx.find("wgmma.mma_async"); at != std::string::npos; at = ptx.find("wgmma.mma_async", at + 1))
        ++n;
      return n;
    };
    for (int bm : {256, 192}) {
      Sm90KernelSpec s = spec(true, rt::DType::BF16, bm, 128, bm == 256 ? 3 : 4, 0, false, true);
      const int plain = wgmmas(compile_ptx(deepgemm::detail::sm90_gemm_source(s), deepgemm::detail::kSm90GemmKernel));
      s.ring_rounds = true;
      const int rounds = wgmmas(compile_ptx(deepgemm::detail::sm90_gemm_source(s), deepgemm::detail::kSm90GemmKernel));
      // A k-block is kMmaM waves of four k32 wgmmas; the rounds add at least kStages of them.
      EXPECT_GE(rounds - plain, s.stages * (bm == 256 ? 2 : 1) * 4) << bm;
    }
  }
  auto takes = [&](int64_t m, int64_t n, int64_t k) {
    const auto b = choose_gpu_blocking(true, m, n, k, 1, 2, true, 132, smem, 0, 256, false, true);
    return sm90_ring_rounds(b, true, m, n, k, 1, 0);
  };
  // The one-tile-a-CTA case below is a staged-scale tiling (wider than 128), so the rule it tests is
  // the tile count's.
  const auto wide_thin = choose_gpu_blocking(true, 128, 24576, 1536, 1, 2, true, 132, smem, 0, 256, false, true);
  ASSERT_TRUE(deepgemm::detail::sm90_staged_sfb(true, wide_thin.block_m, wide_thin.block_n, 0));
  ASSERT_LE(deepgemm::detail::sm90_tiles(wide_thin, 128, 24576, 1), wide_thin.grid);
  EXPECT_TRUE(takes(4096, 4096, 7168));    // 256 x 128, 56 k-blocks: -2.7%
  EXPECT_TRUE(takes(4096, 7168, 16384));   // 128 k-blocks: -2.8%
  EXPECT_TRUE(takes(4096, 2112, 7168));    // 192 x 128: -2.9%
  EXPECT_TRUE(takes(4096, 24576, 1536));   // 12 k-blocks on 4 stages: -1.1%
  EXPECT_FALSE(takes(4096, 32768, 512));   // 4 k-blocks: +1.4%
  EXPECT_FALSE(takes(4096, 7168, 576));    // 5 k-blocks: +2.2%
  EXPECT_FALSE(takes(128, 24576, 1536));   // 128 x 192, one tile a CTA: +5%
  EXPECT_FALSE(takes(128, 7168, 16384));   // 128 x 64: two partial sets, no staged scales
  const auto bf16 = choose_gpu_blocking(false, 4096, 4096, 7168, 1, 2, true, 132, smem);
  EXPECT_FALSE(sm90_ring_rounds(bf16, false, 4096, 4096, 7168, 1, 0));
}

// The producers' barrier between rounds of tiles (Sm90GemmParams::round_sync) is in every plain
// kernel's PTX (a run-time choice); the heuristic takes it where A and B outgrow L2,
// every ceil(256 / k-blocks) rounds, and never for split-K or a single round.
TEST(GpuCompile, RoundSyncRule) {
  using deepgemm::detail::choose_gpu_blocking;
  using deepgemm::detail::sm90_round_sync_every;
  if (rt::nvrtc_available()) {
    const Sm90KernelSpec s = spec(true, rt::DType::BF16, 256, 128, 3, 0, false, true);
    const std::string ptx = compile_ptx(deepgemm::detail::sm90_gemm_source(s), deepgemm::detail::kSm90GemmKernel);
    EXPECT_NE(ptx.find("red.release.gpu.global.add.u32"), std::string::npos);
  }
  const int64_t smem = 232448, l2 = int64_t(50) << 20;  // the H200's opt-in shared memory per block, L2
  auto every = [&](int64_t m, int64_t n, int64_t k) {
    const auto b = choose_gpu_blocking(true, m, n, k, 1, 2, true, 132, smem, 0, 256, false, true);
    return sm90_round_sync_every(b, true, m, n, k, (m + n) * k, l2);
  };
  EXPECT_EQ(every(16384, 16384, 65536), 1);  // 512 k-blocks: 36.7 -> 25.9 ms on the H200
  EXPECT_EQ(every(32768, 32768, 8192), 4);   // 64 k-blocks: 13.3 -> 12.8 ms
  EXPECT_EQ(every(4096, 7168, 16384), 2);    // 184 MB of operands
  EXPECT_EQ(every(4096, 32768, 512), 0);     // 18 MB: fits in L2 (one barrier a round: +28%)
  EXPECT_EQ(every(4096, 24576, 1536), 0);    // 44 MB
  EXPECT_EQ(every(128, 7168, 16384), 0);     // one round
  // Rounds as the kernel counts them: with multicast, clusters over tile pairs. 40 tiles on 32 CTAs
  // in clusters of 2 are 20 pairs on 16 clusters: one full round, so no barrier.
  deepgemm::detail::GpuBlocking pairs;
  pairs.block_m = 256, pairs.block_n = 128, pairs.multicast = 2, pairs.grid = 32;
  EXPECT_EQ(deepgemm::detail::sm90_full_rounds(pairs, 4 * 256, 10 * 128), 1);
  EXPECT_FALSE(deepgemm::detail::sm90_round_sync_ok(pairs, true, 4 * 256, 10 * 128));
  EXPECT_EQ(deepgemm::detail::sm90_full_rounds(pairs, 8 * 256, 10 * 128), 2);  // 40 pairs: two
  EXPECT_TRUE(deepgemm::detail::sm90_round_sync_ok(pairs, true, 8 * 256, 10 * 128));
  auto split = choose_gpu_blocking(true, 16384, 16384, 65536, 1, 2, true, 132, smem, 0, 256, false, true);
  const int64_t bytes = int64_t(2) * 16384 * 65536;
  split.splits = 2;
  EXPECT_EQ(sm90_round_sync_every(split, true, 16384, 16384, 65536, bytes, l2), 0);
  split.splits = 1;
  EXPECT_EQ(sm90_round_sync_every(split, true, 16384, 16384, 65536, bytes, l2), 1);
  EXPECT_EQ(sm90_round_sync_every(split, false, 16384, 16384, 65536, bytes, l2), 0);  // grouped
  const auto bf16 = choose_gpu_blocking(false, 16384, 16384, 65536, 1, 2, true, 132, smem);
  EXPECT_EQ(bf16.block_k, 64);
  EXPECT_EQ(sm90_round_sync_every(bf16, true, 16384, 16384, 65536, 2 * bytes, l2), 1);  // 1024 k-blocks
  const auto bf16_8k = choose_gpu_blocking(false, 8192, 8192, 8192, 1, 2, true, 132, smem);
  EXPECT_EQ(sm90_round_sync_every(bf16_8k, true, 8192, 8192, 8192, int64_t(2) * 2 * 8192 * 8192, l2), 2);  // -1.0%
}

// The quantization casts compile for every input dtype.
TEST(GpuCompile, QuantCasts) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  using deepgemm::detail::QuantCast;
  for (QuantCast cast : {QuantCast::RowBlocksFp8, QuantCast::RowBlocksFp4, QuantCast::Blocks, QuantCast::Columns})
    for (rt::DType in : {rt::DType::F32, rt::DType::BF16, rt::DType::F16})
      EXPECT_NE(compile_ptx(deepgemm::detail::quant_cast_source(cast, in), deepgemm::detail::kQuantCastKernel)
                    .find(deepgemm::detail::kQuantCastKernel),
                std::string::npos)
          << int(cast) << " " << rt::name(in);
}


// ------------------------------------------------------------------------------------------------
// Every kernel the heuristic picks by itself on the H200.

using deepgemm::detail::Grouping;
using deepgemm::detail::Sm90Facts;

// A spec in words, for failure messages and the summary.
std::string describe(const Sm90KernelSpec& s) {
  std::string r = rt::str(s.fp8 ? (s.fp4_b ? "fp8xfp4" : "fp8") : "bf16", " ", s.block_m, "x", s.block_n, "x",
                          s.stages, " d=", rt::name(s.out), " grouping=", s.grouping);
  if (s.has_c) r += " +c";
  if (s.tma_store) r += rt::str(" tma_store(buffers=", s.epilogue_buffers, s.epilogue_whole_slice ? ", whole slice" : "", ")");
  if (s.fp4_registers) r += " fp4_registers";
  if (s.fold_scales) r += " fold_scales";
  if (s.sfb_per_row) r += rt::str(" sfb_per_row(promotion_k=", s.promotion_k, ")");
  if (s.multicast > 1) r += rt::str(" multicast=", s.multicast);
  if (s.k_interleave) r += " k_interleave";
  if (s.ring_rounds) r += " ring_rounds";
  return r + rt::str(" smem=", s.smem_bytes);
}

struct PlannedKernel {
  Sm90KernelSpec spec;
  std::string first;  // the first launch of the grid that plans it
  int64_t launches = 0;
};

// The launches of every public call over a grid of DeepGEMM's usual shapes (and a few odd ones) on
// an H200, as gpu.cc gives them to plan_sm90 with the knobs unset, and the distinct kernels they
// launch (sm90_kernel_spec), in the order first planned.
std::vector<PlannedKernel> planned_kernels(int64_t* launches) {
  enum class Call { Fp8, Bf16, Fp4, ContFp8, ContFp4, ContBf16, MaskFp8, MaskFp4, MaskBf16, KGrouped };
  const Call calls[] = {Call::Fp8,     Call::Bf16,    Call::Fp4,     Call::ContFp8,  Call::ContFp4,
                        Call::ContBf16, Call::MaskFp8, Call::MaskFp4, Call::MaskBf16, Call::KGrouped};
  const char* names[] = {"fp8_gemm_nt",
                         "bf16_gemm_nt",
                         "fp8_fp4_gemm_nt",
                         "m_grouped_fp8_gemm_nt_contiguous",
                         "m_grouped_fp8_fp4_gemm_nt_contiguous",
                         "m_grouped_bf16_gemm_nt_contiguous",
                         "m_grouped_fp8_gemm_nt_masked",
                         "m_grouped_fp8_fp4_gemm_nt_masked",
                         "m_grouped_bf16_gemm_nt_masked",
                         "k_grouped_fp8_gemm_tn_contiguous"};
  const int64_t ms[] = {1, 64, 128, 256, 512, 1024, 4096, 16384};
  // (N, K): DeepGEMM's usual shapes, then odd ones. K must be whole 16-byte units of every operand
  // (validation: K % 8 for BF16, % 16 for FP8, % 32 with FP4 B; K-grouped: each group's K a multiple
  // of 128, 0 included), so 520 serves BF16 only, 528 FP8, 544 FP4 B.
  const std::pair<int64_t, int64_t> nks[] = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384}, {4096, 7168},
                                             {7168, 2048}, {7168, 576},   {100, 7168},  {7168, 520},   {7168, 528},
                                             {7168, 544},  {100, 520},    {100, 544},   {7168, 128},   {4096, 0}};
  std::map<decltype(Sm90KernelSpec{}.key()), size_t> index;
  std::vector<PlannedKernel> kernels;
  *launches = 0;
  for (Call call : calls) {
    const bool bf16 = call == Call::Bf16 || call == Call::ContBf16 || call == Call::MaskBf16;
    const bool fp4 = call == Call::Fp4 || call == Call::ContFp4 || call == Call::MaskFp4;
    const bool k_grouped = call == Call::KGrouped;
    const Grouping grouping = call == Call::ContFp8 || call == Call::ContFp4 || call == Call::ContBf16 ? Grouping::MContiguous
                              : call == Call::MaskFp8 || call == Call::MaskFp4 || call == Call::MaskBf16 ? Grouping::MMasked
                                                                                                         : Grouping::None;
    const bool takes_c = grouping == Grouping::None;  // the plain and the K-grouped calls (FP32 D)
    const int k_unit = k_grouped ? 128 : bf16 ? 8 : fp4 ? 32 : 16;
    for (const rt::DType out : {rt::DType::BF16, rt::DType::F32}) {
      if (k_grouped && out != rt::DType::F32) continue;  // FP32 D only
      for (const bool has_c : {false, true}) {
        if (has_c && (!takes_c || out != rt::DType::F32)) continue;
        for (const int promotion_k : {128, 32}) {  // FP4 B's scales per 128 or per 32 of K
          if (promotion_k == 32 && !fp4) continue;
          for (const bool ue8m0 : {false, true}) {  // B's scales as FP32 or UE8M0
            if (ue8m0 && bf16) continue;
            for (const int64_t m : ms) {
              // M-masked: G groups of max_M = m rows, expected_m all of them or a quarter.
              for (const int64_t groups : {1, 4, 32}) {
                if ((groups > 1) != (grouping == Grouping::MMasked)) continue;
                for (const int64_t expected_m : {m, std::max<int64_t>(1, m / 4)}) {
                  if (expected_m != m && grouping != Grouping::MMasked) continue;
                  for (const auto& [n, k] : nks) {
                    if (k % k_unit != 0 || (k == 0 && !k_grouped)) continue;
                    Sm90Facts f;
                    f.function = names[int(call)];
                    f.fp8 = !bf16;
                    f.fp4_b = fp4 && k > 0;
                    f.sfb_per_row = fp4 || k_grouped;
                    f.sfb_ue8m0 = ue8m0;
                    f.promotion_k = promotion_k;
                    f.grouping = grouping;
                    f.m = m;
                    f.n = n;
                    f.k = k;
                    f.expected_m = grouping == Grouping::MMasked ? expected_m : 0;
                    f.groups_a = groups;
                    f.a_bits = bf16 ? 16 : 8;
                    f.b_bits = bf16 ? 16 : fp4 ? 4 : 8;
                    f.out = out;
                    f.has_c = has_c;
                    f.d_aligned16 = true;  // validation: D 16-byte aligned, its row and group strides too
                    dgtest::on_h200(f);
                    const Sm90KernelSpec s = deepgemm::detail::sm90_kernel_spec(f, deepgemm::detail::plan_sm90(f));
                    ++*launches;
                    auto [at, fresh] = index.emplace(s.key(), kernels.size());
                    if (fresh) {
                      kernels.push_back(PlannedKernel{
                          s, rt::str(f.function, " M=", m, groups > 1 ? rt::str(" G=", groups, " expected_m=", expected_m) : "",
                                     " N=", n, " K=", k, " d=", rt::name(out), has_c ? " +c" : "",
                                     f.fp8 ? rt::str(" b_scales=", ue8m0 ? "ue8m0" : "f32") : "",
                                     fp4 ? rt::str("/", promotion_k) : "")});
                    }
                    ++kernels[at->second].launches;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return kernels;
}

// Every distinct kernel the heuristic plans for the grid above compiles for sm_90a with the JIT's
// options, tensor cores in its PTX, and ptxas serializes none of its wgmmas
// (NoKernelSerializesItsWgmmas's check, for every kernel the planner can launch on its own rather
// than a hand-picked few). All of them, no sampling: a few hundred compiles of about 0.8 s each.
// NVRTC runs one compile at a time in a process (threads gain nothing), so the test runs itself in
// up to 8 child processes (one per core), each compiling the kernels i with i % processes == its
// index (DG_PLANNED_SHARD=index/processes).
TEST(GpuCompile, EveryPlannedKernelCompiles) {
  int64_t launches = 0;
  const std::vector<PlannedKernel> kernels = planned_kernels(&launches);
  ASSERT_GT(kernels.size(), 10u);
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  const testutil::TempDir cache;  // a fresh disk cache: a cached compile keeps no log
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::printf("%lld launches planned, %zu distinct kernels\n", static_cast<long long>(launches), kernels.size());
  const testutil::TestShard shard = testutil::shard_this_test("DG_PLANNED_SHARD", cache.path(), "DG_TEST_VERBOSE");
  if (shard.done) {
    std::printf("compiled %zu distinct planned kernels in %.1f s (%u processes)\n", kernels.size(), elapsed(), shard.count);
    return;
  }
  const testutil::ScopedEnv cache_dir("TL_CACHE_DIR", cache.path());
  const rt::NvrtcOptions options = deepgemm::detail::jit_options("sm_90a");
  size_t compiled = 0;
  for (size_t i = shard.index; i < kernels.size(); i += shard.count) {
    const PlannedKernel& p = kernels[i];
    const std::string what = rt::str(describe(p.spec), "\n  first planned for ", p.first, " (", p.launches, " launches)");
    rt::NvrtcResult r;
    try {
      r = rt::compile_cuda(deepgemm::detail::sm90_gemm_source(p.spec), "sm90_gemm.cu",
                           deepgemm::detail::kernel_headers(), options);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "does not compile: " << what << "\n" << e.what();
      continue;
    }
    ++compiled;
    EXPECT_FALSE(r.cached) << what;
    EXPECT_NE(r.ptx.find("wgmma.mma_async"), std::string::npos) << what;
    EXPECT_NE(r.log.find("ptxas info"), std::string::npos) << "no ptxas log: " << what << "\n" << r.log;
    EXPECT_TRUE(r.serialized_wgmma.empty()) << "wgmma serialized: " << what << "\n" << r.log;
    if (std::getenv("DG_TEST_VERBOSE")) std::printf("%5.1fs  %s\n", r.seconds, what.c_str());
  }
  std::printf("compiled %zu of %zu distinct planned kernels in %.1f s (shard %u/%u)\n", compiled, kernels.size(),
              elapsed(), shard.index, shard.count);
}

}  // namespace
