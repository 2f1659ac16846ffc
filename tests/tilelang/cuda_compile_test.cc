// The CUDA backend without a GPU: every example and test program goes through CUDA code generation
// and NVRTC for sm_90a and sm_80 without error, and the seed matmul's PTX holds the tensor-core
// instructions, as do the tile programs' gemms (wgmma on sm_90a, mma.sync on sm_80). (scripts/gpu_check.sh runs the numerical suite itself on a GPU.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "program_util.h"
#include "rt/nvrtc.h"
#include "testutil/environment.h"
#include "testutil/test_shards.h"
#include "tilelang/codegen/codegen_cuda.h"
#include "tilelang/frontend/elaborate.h"
#include "tilelang/passes/pipeline.h"

namespace {

using tilelang::frontend::TensorSpec;
using rt::DType;

struct Case {
  const char* name;
  const char* file;
  const char* kernel;
  std::map<std::string, std::string> params;
  std::vector<TensorSpec> shapes;  // @tile_kernel inputs
};

std::vector<Case> cases() {
  TensorSpec h2{DType::F16, {200, 136}}, h2t{DType::F16, {136, 72}};
  return {
      {"seed_matmul", "examples/matmul.py", "matmul", {}, {{DType::F16, {256, 256}}, {DType::F16, {256, 256}}}},
      {"blocked_gemm", "examples/gemm.py", "matmul", {{"M", "200"}, {"N", "136"}, {"K", "72"}}, {}},
      {"flash_attention", "examples/flash_attention.py", "flash_attention", {{"batch", "1"}, {"heads", "2"}, {"seq_len", "100"}, {"dim", "32"}, {"is_causal", "True"}}, {}},
      {"softmax_tile", "tests/tilelang/programs/softmax_tile.py", "softmax", {{"M", "37"}, {"N", "96"}}, {}},
      {"elementwise_tile", "tests/tilelang/programs/elementwise_tile.py", "chain", {{"M", "45"}, {"N", "150"}}, {}},
      {"block_reduce_threads", "tests/tilelang/programs/block_reduce_threads.py", "row_sum", {{"M", "9"}, {"N", "1000"}}, {}},
      {"extern_and_inline", "tests/tilelang/programs/extern_and_inline.py", "hatches", {{"N", "150"}, {"target", "cuda"}, {"hypot", "hypotf"}}, {}},
      {"gemm_transposed_tile", "tests/tilelang/programs/gemm_transposed_tile.py", "gemm_t", {{"M", "96"}, {"N", "136"}, {"K", "80"}, {"trans_a", "True"}, {"trans_b", "True"}}, {}},
      {"column_sum_atomic", "tests/tilelang/programs/column_sum_atomic.py", "column_sum", {{"M", "100"}, {"N", "70"}}, {}},
      {"integer_ops", "tests/tilelang/programs/integer_ops_tile.py", "integer_ops", {{"N", "24"}}, {}},
      {"shifts", "tests/tilelang/programs/shifts_tile.py", "shifts", {{"N", "141"}}, {}},
      {"weak_ints", "tests/tilelang/programs/weak_ints_tile.py", "weak_ints", {{"N", "64"}}, {}},
      {"float_to_int", "tests/tilelang/programs/float_to_int_tile.py", "float_to_int", {{"N", "16"}}, {}},
      {"nan_max", "tests/tilelang/programs/nan_max_tile.py", "nan_max", {{"N", "8"}}, {}},
      {"nan_max_folded", "tests/tilelang/programs/nan_max_folded_tile.py", "nan_max_folded", {{"N", "5"}}, {}},
      {"int_division", "tests/tilelang/programs/int_division_tile.py", "int_division", {{"N", "10"}}, {}},
      {"float_divmod", "tests/tilelang/programs/float_divmod_tile.py", "float_divmod", {{"N", "14"}}, {}},
      {"int_wrap", "tests/tilelang/programs/int_wrap_tile.py", "int_wrap", {{"N", "5"}}, {}},
      {"narrow_unary", "tests/tilelang/programs/narrow_unary_tile.py", "narrow_unary", {{"N", "6"}}, {}},
      {"narrow_rounding", "tests/tilelang/programs/narrow_rounding_tile.py", "narrow_rounding", {{"N", "10"}}, {}},
      {"reused_shared_tile", "tests/tilelang/programs/reused_shared_tile.py", "rowsum_then_cast", {{"M", "200"}, {"N", "48"}}, {}},
      {"thread_binding_then_tile_ops", "tests/tilelang/programs/thread_binding_then_tile_ops.py", "scale_rows", {{"M", "7"}, {"N", "300"}}, {}},
      {"shared_read_then_written", "tests/tilelang/programs/shared_read_then_written.py", "update_if_small", {{"N", "300"}}, {}},
      {"per_thread_tile_ops", "tests/tilelang/programs/per_thread_tile_ops.py", "own_parts", {{"P", "4"}}, {}},
      {"thread_binding_then_gemm", "tests/tilelang/programs/thread_binding_then_gemm.py", "gemm_rowsum", {{"M", "200"}, {"N", "192"}, {"K", "96"}}, {}},
      {"pipelined_in_serial_loop", "tests/tilelang/programs/pipelined_in_serial_loop.py", "passes_gemm", {{"M", "200"}, {"N", "192"}, {"K", "96"}, {"passes", "4"}}, {}},
      {"softmax_seed", "tests/tilelang/programs/softmax_seed.py", "softmax", {}, {{DType::F16, {37, 301}}}},
      {"layernorm_seed", "tests/tilelang/programs/layernorm_seed.py", "layernorm", {}, {{DType::F16, {19, 250}}, {DType::F16, {250}}, {DType::F16, {250}}}},
      {"row_reductions_seed", "tests/tilelang/programs/row_reductions_seed.py", "row_stats", {}, {{DType::F32, {41, 333}}}},
      {"elementwise_chain_seed", "tests/tilelang/programs/elementwise_chain_seed.py", "chain", {}, {{DType::F16, {29, 131}}, {DType::F16, {29, 131}}, {DType::F16, {131}}}},
      {"matmul_epilogue_seed", "tests/tilelang/programs/matmul_epilogue_seed.py", "linear_relu", {}, {{DType::F16, {64, 128}}, {DType::F16, {128, 96}}, {DType::F16, {96}}}},
      {"batched_matmul_seed", "tests/tilelang/programs/batched_matmul_seed.py", "bmm", {}, {{DType::F16, {3, 33, 29}}, {DType::F16, {3, 47, 29}}}},
      {"matmul_int8_seed", "tests/tilelang/programs/matmul_int8_seed.py", "matmul_int8", {}, {{DType::I8, {33, 300}}, {DType::I8, {300, 20}}}},
      {"float4_store_seed", "tests/tilelang/programs/float4_store_seed.py", "to_fp4", {}, {{DType::F32, {9}}}},
      {"triangle_seed", "tests/tilelang/programs/triangle_seed.py", "upper", {}, {{DType::F32, {37, 45}}}},
      {"scan_beside_temporary_seed", "tests/tilelang/programs/scan_beside_temporary_seed.py", "scan_twice", {}, {{DType::F32, {300}}}},
      {"explicit_cast_tile", "tests/tilelang/programs/explicit_cast_tile.py", "explicit_cast", {{"N", "64"}}, {}},
      {"explicit_rounding_seed", "tests/tilelang/programs/explicit_rounding_seed.py", "rounded_operand", {}, {{DType::F32, {5, 9}}, {DType::F32, {9, 7}}}},
      {"triangular_product_seed", "tests/tilelang/programs/triangular_product_seed.py", "upper_times", {}, {{DType::F32, {13, 13}}, {DType::F32, {13, 6}}}},
      {"carry_store_seed", "tests/tilelang/programs/carry_store_seed.py", "carry", {}, {{DType::F32, {40000}}}},
      {"gemm_unit_dims_tile", "tests/tilelang/programs/gemm_unit_dims_tile.py", "gemm_unit_dims", {{"M", "9"}, {"N", "1"}, {"K", "8"}}, {}},
      {"matmul_f32_out_seed", "tests/tilelang/programs/matmul_f32_out_seed.py", "matmul_f32_out", {}, {{DType::BF16, {45, 130}}, {DType::BF16, {130, 77}}}},
      {"gemm_register_a", "tests/tilelang/programs/gemm_register_a.py", "chain", {{"M", "128"}}, {}},
      {"gemm_8bit_int8", "examples/gemm_8bit.py", "matmul", {{"M", "200"}, {"N", "136"}, {"K", "96"}, {"a_dtype", "int8"}}, {}},
      // (block_N 128: sm_80 keeps a float8 gemm's C in shared memory, and 128 x 256 would not fit.)
      {"gemm_8bit_fp8", "examples/gemm_8bit.py", "matmul", {{"M", "200"}, {"N", "136"}, {"K", "96"}, {"b_dtype", "float8_e5m2"}, {"block_N", "128"}}, {}},
  };
}

tilelang::Kernel kernel_for(const Case& c, const std::string& arch, bool wgmma_register_a = true) {
  tilelang::CompileOptions o;
  o.target = tilelang::Target::cuda(arch);
  o.params = c.params;
  o.wgmma_register_a = wgmma_register_a;
  return tilelang::Module::load(tltest::source_path(c.file)).kernel(c.kernel, o);
}

std::string ptx_for(const Case& c, const std::string& arch) { return kernel_for(c, arch).emit(tilelang::Stage::Ptx, c.shapes); }

class CudaCompile : public ::testing::TestWithParam<std::tuple<Case, std::string>> {};

TEST_P(CudaCompile, GeneratesPtx) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  const auto& [c, arch] = GetParam();
  std::string ptx = ptx_for(c, arch);
  EXPECT_NE(ptx.find(".target " + arch), std::string::npos) << c.name;
  EXPECT_NE(ptx.find(".entry"), std::string::npos) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Programs, CudaCompile, ::testing::Combine(::testing::ValuesIn(cases()), ::testing::Values("sm_90a", "sm_80")),
                         [](const auto& p) { return std::string(std::get<0>(p.param).name) + "_" + std::get<1>(p.param); });

// ptxas serializes wgmma where it cannot prove a pipeline safe and says so only in its verbose log
// (stop 39 lost most of a DeepGEMM kernel's speed to one); rt::compile_cuda counts those compiles
// (its own test shows a serialized kernel is caught). The tile programs with gemms here, and the
// examples at their default tilings and real sizes, compile free of it for sm_90a. It found a
// pipelined loop of one iteration (K <= block_K) whose gemm was left in flight with no wait after
// it: the loop, which the code generator drained at its end, had been simplified away; and
// pipelined_in_serial_loop, whose loops may run no iteration after the accumulator's float zeros
// (serialized until those zeros were pinned as int32 ones are).
TEST(CudaCompile, NoTileProgramSerializesItsWgmmas) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  const testutil::TempDir cache;  // a fresh disk cache: only a compile runs ptxas
  const testutil::ScopedEnv cache_dir("TL_CACHE_DIR", cache.path());
  std::vector<Case> programs;
  for (const Case& c : cases())
    for (const char* gemm : {"seed_matmul", "blocked_gemm", "gemm_transposed_tile", "thread_binding_then_gemm", "matmul_epilogue_seed", "gemm_register_a",
                             "gemm_8bit_int8", "gemm_8bit_fp8", "pipelined_in_serial_loop"})
      if (std::string(c.name) == gemm) programs.push_back(c);
  const std::map<std::string, std::string> attention{{"batch", "1"}, {"heads", "16"}, {"seq_len", "4096"}, {"dim", "128"}};
  auto with = [](std::map<std::string, std::string> params, const char* key, const char* value) {
    params[key] = value;
    return params;
  };
  programs.push_back({"attention_4096", "examples/flash_attention.py", "flash_attention", attention, {}});
  programs.push_back({"attention_4096_causal", "examples/flash_attention.py", "flash_attention", with(attention, "is_causal", "True"), {}});
  programs.push_back({"attention_fp8", "examples/flash_attention.py", "flash_attention", with(attention, "dtype", "float8_e4m3"), {}});
  programs.push_back({"attention_dim256", "examples/flash_attention.py", "flash_attention", with(attention, "dim", "256"), {}});
  programs.push_back({"gemm_4096", "examples/gemm.py", "matmul", {{"M", "4096"}, {"N", "4096"}, {"K", "4096"}}, {}});
  programs.push_back({"gemm_one_k_block", "examples/gemm.py", "matmul", {{"M", "256"}, {"N", "256"}, {"K", "64"}}, {}});
  programs.push_back({"gemm_8bit_4096", "examples/gemm_8bit.py", "matmul", {{"M", "4096"}, {"N", "4096"}, {"K", "4096"}}, {}});
  programs.push_back({"seed_matmul_4096", "examples/matmul.py", "matmul", {}, {{DType::F16, {4096, 4096}}, {DType::F16, {4096, 4096}}}});
  ASSERT_EQ(programs.size(), 17u);
  for (const Case& c : programs) {
    const int64_t before = rt::nvrtc_serialized_wgmma_count();
    const std::string ptx = ptx_for(c, "sm_90a");
    EXPECT_NE(ptx.find("wgmma.mma_async"), std::string::npos) << c.name << ": no wgmma to check";
    EXPECT_EQ(rt::nvrtc_serialized_wgmma_count(), before) << c.name << ": ptxas serialized its wgmma (see stderr)";
  }
}

TEST(CudaCompile, SeedMatmulUsesTensorCoresOnHopper) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  for (DType dtype : {DType::F16, DType::BF16}) {
    std::string src = tltest::read_source("examples/matmul.py");
    if (dtype == DType::BF16) src.replace(src.find("Tensor[FP16]"), 12, "Tensor[BF16]"), src.replace(src.find("Tensor[FP16]"), 12, "Tensor[BF16]"),
                                  src.replace(src.find("Tensor[FP16]"), 12, "Tensor[BF16]");
    tilelang::CompileOptions o;
    o.target = tilelang::Target::cuda("sm_90a");
    tilelang::Kernel k = tilelang::Module::from_source(src, "examples/matmul.py").kernel("matmul", o);
    std::string ptx = k.emit(tilelang::Stage::Ptx, {{dtype, {4096, 4096}}, {dtype, {4096, 4096}}});
    EXPECT_NE(ptx.find("wgmma.mma_async"), std::string::npos) << rt::name(dtype);
    EXPECT_NE(ptx.find("cp.async.bulk.tensor"), std::string::npos) << rt::name(dtype);
  }
}

// T.gemm runs on wgmma on sm_90a and on mma.sync (operands by ldmatrix) on sm_80.
TEST(CudaCompile, BlockedGemmUsesTensorCoresAndPipelinedCopies) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  for (const char* dtype : {"float16", "bfloat16"})
    for (const char* arch : {"sm_80", "sm_90a"}) {
      Case c{"blocked_gemm", "examples/gemm.py", "matmul", {{"M", "1024"}, {"N", "512"}, {"K", "256"}, {"dtype", dtype}}, {}};
      std::string ptx = ptx_for(c, arch);
      bool hopper = std::string(arch) == "sm_90a";
      // The default 128 x 256 tile on two warpgroups: each a 64 x 256 instruction per k16 step.
      EXPECT_EQ(ptx.find("wgmma.mma_async.sync.aligned.m64n256k16.f32") != std::string::npos, hopper) << dtype << " " << arch;
      EXPECT_EQ(ptx.find("mma.sync.aligned.m16n8k16") != std::string::npos, !hopper) << dtype << " " << arch;
      if (hopper) {
        // T.Pipelined: the tiles arrive by TMA, on one mbarrier per stage; the gemm of iteration k
        // runs on while iteration k + 1 loads (one wgmma group left in flight).
        EXPECT_NE(ptx.find("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"), std::string::npos) << dtype;
        EXPECT_NE(ptx.find("mbarrier.try_wait.parity"), std::string::npos) << dtype;
        EXPECT_NE(ptx.find("wgmma.wait_group.sync.aligned 1"), std::string::npos) << dtype;
        EXPECT_EQ(ptx.find("cp.async.cg.shared.global"), std::string::npos) << dtype;
      } else {
        EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4"), std::string::npos) << dtype;  // C in registers
        // T.Pipelined: the tile copies run 2 stages ahead with cp.async, 16 bytes a thread.
        EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos) << dtype;
        EXPECT_NE(ptx.find("cp.async.wait_group 2"), std::string::npos) << dtype;
      }
    }
}

// Every operand orientation of T.gemm reaches wgmma on sm_90a (K-major and MN-major descriptors).
TEST(CudaCompile, TransposedTileGemmsUseWgmma) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  for (const char* ta : {"False", "True"})
    for (const char* tb : {"False", "True"}) {
      Case c{"gemm_t", "tests/tilelang/programs/gemm_transposed_tile.py", "gemm_t", {{"M", "128"}, {"N", "128"}, {"K", "96"}, {"trans_a", ta}, {"trans_b", tb}}, {}};
      std::string ptx = ptx_for(c, "sm_90a");
      EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), std::string::npos) << ta << " " << tb;
      EXPECT_EQ(ptx.find("mma.sync.aligned"), std::string::npos) << ta << " " << tb;
    }
}

// 8-bit T.gemm with K-major operands runs on the tensor cores, each pair of input types: wgmma's
// k32 forms on sm_90a, mma.sync m16n8k32 below it (int8 / uint8 from sm_80, float8 from sm_89); the
// other orientations, and float8 on sm_80, take the scalar tile gemm (no tensor-core instruction).
TEST(CudaCompile, EightBitTileGemmsUseTensorCoresWhenKMajor) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  const std::pair<const char*, const char*> kinds[] = {{"float8_e4m3", "f32.e4m3.e4m3"}, {"float8_e5m2", "f32.e5m2.e5m2"}, {"int8", "s32.s8.s8"}, {"uint8", "s32.u8.u8"}};
  for (const auto& [dtype, types] : kinds) {
    Case c{"gemm_8bit", "examples/gemm_8bit.py", "matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}, {"a_dtype", dtype}}, {}};
    const std::string t = types;
    EXPECT_NE(ptx_for(c, "sm_90a").find("wgmma.mma_async.sync.aligned.m64n256k32." + t), std::string::npos) << dtype;
    const std::string mma = "mma.sync.aligned.m16n8k32.row.col." + t + (t[0] == 's' ? ".s32" : ".f32");
    EXPECT_NE(ptx_for(c, "sm_89").find(mma), std::string::npos) << dtype;
    // sm_80 keeps a float8 gemm's C in shared memory (the cooperative loop): 128 x 128 tiles fit there.
    Case c80 = c;
    c80.params["block_N"] = "128";
    const std::string sm80 = ptx_for(c80, "sm_80");
    EXPECT_EQ(sm80.find("wgmma"), std::string::npos) << dtype;
    EXPECT_EQ(sm80.find(mma) != std::string::npos, t[0] == 's') << dtype;
    if (t[0] == 'f') {
      EXPECT_EQ(sm80.find("mma.sync"), std::string::npos) << dtype;
    }
  }
  for (const auto& [a, b, types] : {std::tuple("float8_e4m3", "float8_e5m2", "f32.e4m3.e5m2"), std::tuple("float8_e5m2", "float8_e4m3", "f32.e5m2.e4m3"),
                                    std::tuple("int8", "uint8", "s32.s8.u8"), std::tuple("uint8", "int8", "s32.u8.s8")}) {
    Case c{"gemm_8bit", "examples/gemm_8bit.py", "matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}, {"a_dtype", a}, {"b_dtype", b}}, {}};
    EXPECT_NE(ptx_for(c, "sm_90a").find(std::string("wgmma.mma_async.sync.aligned.m64n256k32.") + types), std::string::npos) << a << " x " << b;
  }
  for (const char* ta : {"False", "True"})
    for (const char* tb : {"False", "True"}) {
      Case c{"gemm_t", "tests/tilelang/programs/gemm_transposed_tile.py", "gemm_t",
             {{"M", "128"}, {"N", "128"}, {"K", "96"}, {"trans_a", ta}, {"trans_b", tb}, {"dtype", "float8_e4m3"}}, {}};
      const bool k_major = std::string(ta) == "False" && std::string(tb) == "True";
      EXPECT_EQ(ptx_for(c, "sm_90a").find("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3") != std::string::npos, k_major) << ta << " " << tb;
    }
}

// T.clear of a wgmma accumulator is pinned right after the zeros (wgmma_waits): ptxas otherwise
// placed int32 zeros above setmaxnreg and spilled them (int8 128 x 128 on one consumer warpgroup, two
// blocks an SM), and serialized the wgmma of a pipelined loop that may run no iteration after float
// zeros (pipelined_in_serial_loop, in NoTileProgramSerializesItsWgmmas).
TEST(CudaCompile, AccumulatorIsPinnedAfterItsClear) {
  for (const char* dtype : {"int8", "float8_e4m3"}) {
    Case c{"gemm_8bit", "examples/gemm_8bit.py", "matmul",
           {{"M", "4096"}, {"N", "4096"}, {"K", "4096"}, {"a_dtype", dtype}, {"block_N", "128"}, {"threads", "128"}, {"num_stages", "3"}}, {}};
    const std::string cuda = kernel_for(c, "sm_90a").emit(tilelang::Stage::Cuda, {});
    const size_t zero = cuda.find("C_local[static_cast<int64_t>(r)] = 0"), pin = cuda.find("fence_register_tile<128>(C_local);"),
                 gemm = cuda.find("tile_gemm_wgmma<");
    ASSERT_NE(zero, std::string::npos) << dtype << "\n" << cuda;
    ASSERT_NE(gemm, std::string::npos) << dtype << "\n" << cuda;
    EXPECT_TRUE(pin != std::string::npos && zero < pin && pin < gemm) << dtype << "\n" << cuda;
  }
}

// The 64 x 64 tiling on one warpgroup (the example's default is 128 x 128 on two up to head dim 128).
const std::map<std::string, std::string> kAttention64{{"block_M", "64"}, {"block_N", "64"}, {"threads", "128"}};
std::map<std::string, std::string> with(std::map<std::string, std::string> params, const std::map<std::string, std::string>& more) {
  params.insert(more.begin(), more.end());
  return params;
}

// Both gemms of the attention kernel (S = Q K^T, O += P V) run on wgmma at head dims 64 and 128;
// at head dim 32 V's rows are 64 bytes, which an N-major wgmma operand cannot take, so the kernel
// stays on mma.sync.
TEST(CudaCompile, AttentionGemmsUseWgmmaWhereTheTilesAllow) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  for (const char* dim : {"32", "64", "128"}) {
    Case c{"flash_attention", "examples/flash_attention.py", "flash_attention",
           with({{"batch", "1"}, {"heads", "2"}, {"seq_len", "256"}, {"dim", dim}}, kAttention64), {}};
    std::string ptx = ptx_for(c, "sm_90a");
    bool wgmma = std::string(dim) != "32";
    EXPECT_EQ(ptx.find("wgmma.mma_async.sync.aligned.m64n64k16") != std::string::npos, wgmma) << dim;
    EXPECT_EQ(ptx.find("mma.sync.aligned.m16n8k16") != std::string::npos, !wgmma) << dim;
  }
}

// The attention kernel's row statistics (max, sum, scale: 1-D fragments beside the score and
// output accumulators) live in registers on sm_90a, each thread holding the rows it holds of the
// accumulators, so the softmax steps need no shared memory and no block barriers. (On sm_80 the
// 64 x 128 output accumulator splits its rows over two warps, so they stay in shared memory.)
TEST(CudaCompile, AttentionRowStatisticsLiveInRegisters) {
  tilelang::CompileOptions o;
  o.target = tilelang::Target::cuda("sm_90a");
  o.params = {{"batch", "1"}, {"heads", "2"}, {"seq_len", "256"}, {"dim", "128"}};
  std::string cuda = tilelang::Module::load(tltest::source_path("examples/flash_attention.py")).kernel("flash_attention", o).emit(tilelang::Stage::Cuda, {});
  for (const char* vector : {"scores_max", "scores_max_prev", "scores_scale", "scores_sum", "logsum"}) {
    EXPECT_NE(cuda.find(std::string("float ") + vector + "["), std::string::npos) << vector << " is not in registers";
    EXPECT_EQ(cuda.find(std::string("float* __restrict__ ") + vector + " ="), std::string::npos) << vector << " is in shared memory";
  }
}

// T.use_swizzle (examples/gemm.py's `panel`) takes the blocks' (x, y) from the grouped tile order;
// with enable=False the blocks keep the launch order. Warp-specialized (the default on sm_90a), the
// kernel is persistent: its roles walk the 8 x 4 blocks in that order (tile_scheduler.h's
// PersistentBlocks); without a producer, each block maps its own index.
TEST(CudaCompile, UseSwizzleRemapsTheBlocks) {
  for (const char* panel : {"8", "0"})
    for (const char* ws : {"None", "False"}) {
      tilelang::CompileOptions o;
      o.target = tilelang::Target::cuda("sm_90a");
      o.params = {{"M", "1024"}, {"N", "1024"}, {"K", "256"}, {"panel", panel}, {"warp_specialize", ws}};
      std::string cuda = tilelang::Module::load(tltest::source_path("examples/gemm.py")).kernel("matmul", o).emit(tilelang::Stage::Cuda, {});
      const bool on = std::string(panel) == "8", persistent = std::string(ws) == "None";
      EXPECT_EQ(cuda.find("GroupedTileScheduler::make(int(gridDim.y), int(gridDim.x), 1, 1, 8)") != std::string::npos, on && !persistent) << panel << ws;
      EXPECT_EQ(cuda.find("= static_cast<int32_t>(tl_block_x);") != std::string::npos, on && !persistent) << panel << ws;
      EXPECT_EQ(cuda.find(rt::str("PersistentBlocks::make(int(4), int(8), 1, ", panel, ");")) != std::string::npos, persistent) << panel << ws;
    }
}

TEST(CudaCompile, CopiesOutsidePipelinesMove16Bytes) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  Case c{"flash_attention", "examples/flash_attention.py", "flash_attention", {{"batch", "1"}, {"heads", "2"}, {"seq_len", "256"}, {"dim", "64"}}, {}};
  std::string ptx = ptx_for(c, "sm_90a");
  bool vector_loads = ptx.find("ld.global.v4") != std::string::npos || ptx.find("ld.global.nc.v4") != std::string::npos;
  EXPECT_TRUE(vector_loads) << "the copy of Q should move 16 bytes a thread";
  EXPECT_NE(ptx.find("shfl.sync.bfly"), std::string::npos) << "row reductions of the scores in registers";
}

// Tensors at unaligned addresses (offset views) get a specialization without 16-byte accesses or TMA.
TEST(CudaCompile, UnalignedTensorsGetScalarAccesses) {
  auto source = [](const char* file, const char* kernel, std::map<std::string, std::string> params, std::vector<TensorSpec> inputs, bool aligned) {
    auto ast = tilelang::ast::parse(std::make_shared<tilelang::SourceFile>(file, tltest::read_source(file)));
    tilelang::ir::PrimFunc f = tilelang::frontend::elaborate(ast, {kernel, std::move(params), std::move(inputs)});
    tilelang::Target target = tilelang::Target::cuda("sm_90a");
    return tilelang::codegen::generate_cuda(tilelang::passes::lower(f, {target, aligned}), target).code;
  };
  std::map<std::string, std::string> gemm{{"M", "256"}, {"N", "256"}, {"K", "256"}};
  std::string aligned = source("examples/gemm.py", "matmul", gemm, {}, true), unaligned = source("examples/gemm.py", "matmul", gemm, {}, false);
  EXPECT_NE(aligned.find("tile_copy_tma"), std::string::npos);
  EXPECT_EQ(unaligned.find("tile_copy_tma"), std::string::npos);
  EXPECT_EQ(unaligned.find("cp_async_16"), std::string::npos);
  EXPECT_EQ(unaligned.find("uint4"), std::string::npos);
  std::vector<TensorSpec> seed{{DType::F16, {256, 256}}, {DType::F16, {256, 256}}};
  EXPECT_NE(source("examples/matmul.py", "matmul", {}, seed, true).find("gemm_sm90"), std::string::npos);
  EXPECT_EQ(source("examples/matmul.py", "matmul", {}, seed, false).find("gemm_sm90"), std::string::npos);
}

}  // namespace

namespace {

// The Hopper GEMM's tile shape follows the problem (codegen_cuda.cc): 128 x 256 by default; when
// that leaves SMs idle, the 128-row tile the split-K plan favours (64 columns unless a wider tile
// fills the SMs in one wave); 256 x 128 when that leaves a better last wave; 64 x 64 for M <= 64,
// and at M = 128 where 64 x 64 tiles fill one wave of the 132 SMs (sm_90a's count without a device).
TEST(CudaCompile, SeedMatmulTileShapeFollowsTheProblem) {
  std::string text = tltest::read_source("examples/matmul.py");
  const std::string square = "zeros_like(a)";
  ASSERT_NE(text.find(square), std::string::npos);
  text.replace(text.find(square), square.size(), "zeros((a.shape[0], b.shape[1]), a.dtype)");
  auto config = [&](int64_t m, int64_t n, int64_t k) {
    auto ast = tilelang::ast::parse(std::make_shared<tilelang::SourceFile>("examples/matmul.py", text));
    std::vector<TensorSpec> inputs{{DType::F16, {m, k}}, {DType::F16, {k, n}}};
    tilelang::ir::PrimFunc f = tilelang::frontend::elaborate(ast, {"matmul", {}, inputs});
    tilelang::Target target = tilelang::Target::cuda("sm_90a");
    std::string code = tilelang::codegen::generate_cuda(tilelang::passes::lower(f, {target, true}), target).code;
    size_t at = code.find("GemmSm90Config<");
    EXPECT_NE(at, std::string::npos) << m << "x" << n << "x" << k << ": no Hopper GEMM";
    return at == std::string::npos ? std::string() : code.substr(at, code.find('>', at) - at + 1);
  };
  EXPECT_NE(config(4096, 4096, 4096).find(", 128, 256, 64, 4,"), std::string::npos) << config(4096, 4096, 4096);
  EXPECT_NE(config(128, 2112, 7168).find(", 128, 64, 64, 8,"), std::string::npos) << config(128, 2112, 7168);
  EXPECT_NE(config(128, 7168, 2048).find(", 128, 64, 64, 8,"), std::string::npos) << config(128, 7168, 2048);
  EXPECT_NE(config(128, 24576, 1536).find(", 128, 192, 64, 4,"), std::string::npos) << config(128, 24576, 1536);
  EXPECT_NE(config(4096, 2112, 7168).find(", 256, 128, 64, 4,"), std::string::npos) << config(4096, 2112, 7168);
  EXPECT_NE(config(64, 4096, 7168).find(", 64, 64, 64, 12,"), std::string::npos) << config(64, 4096, 7168);
  EXPECT_NE(config(40, 2112, 7168).find(", 64, 64, 64, 12,"), std::string::npos) << config(40, 2112, 7168);
  EXPECT_NE(config(65, 2112, 7168).find(", 128, "), std::string::npos) << config(65, 2112, 7168);
  EXPECT_NE(config(128, 4096, 7168).find(", 64, 64, 64, 12,"), std::string::npos) << config(128, 4096, 7168);
  EXPECT_NE(config(128, 4224, 4096).find(", 64, 64, 64, 12,"), std::string::npos) << config(128, 4224, 4096);
  EXPECT_NE(config(128, 3840, 7168).find(", 128, 64, 64, 8,"), std::string::npos) << config(128, 3840, 7168);
  EXPECT_NE(config(96, 4096, 7168).find(", 128, "), std::string::npos) << config(96, 4096, 7168);
}

// One distinct Hopper GEMM kernel the seed matmul's code generation chose over seed_problems(): its
// CUDA source (the dedup key: tile shape, stages, dtypes and layout are all in it; M, N, K, split-K,
// rounds and the grid are launch arguments), the first problem that chose it, and how many did.
struct SeedKernel {
  std::string form;  // the kernel of matmul_forms_seed.py
  std::vector<TensorSpec> inputs;
  std::string code, first;
  int problems = 0;
};

// The seed matmul (tests/tilelang/programs/matmul_forms_seed.py: B N-major or transposed, C in the
// operands' dtype or float32) over float16 and bfloat16, M from 1 to 16384 and DeepGEMM's usual
// (N, K) plus odd ones, for sm_90a with its 132 SMs (the count without a device); its distinct
// Hopper GEMM kernels in a fixed order (the shards of EverySeedTilingCompiles agree on it).
// `problems`: the grid's size; `other`: its problems lowered to something else, each with N or K not
// a multiple of 8 (TMA's 16-byte rows, lower_host_cuda.cc's hopper_gemm_fits): any other fails.
std::vector<SeedKernel> seed_kernels(int* problems, int* other) {
  const std::string file = "tests/tilelang/programs/matmul_forms_seed.py";
  const tilelang::Module module = tilelang::Module::load(tltest::source_path(file));
  tilelang::CompileOptions o;
  o.target = tilelang::Target::cuda("sm_90a");
  const std::vector<std::pair<int64_t, int64_t>> nks{{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384}, {4096, 7168}, {7168, 2048},
                                                     {4096, 4096}, {8192, 8192}, {100, 7168},   {104, 520},   {256, 72},    {7168, 520}};
  std::vector<SeedKernel> out;
  std::map<std::string, size_t> index;
  *problems = *other = 0;
  for (const char* form : {"matmul", "matmul_bt", "matmul_f32_out", "matmul_bt_f32_out"}) {
    const tilelang::Kernel kernel = module.kernel(form, o);
    const bool bt = std::string(form).find("_bt") != std::string::npos;
    for (DType dtype : {DType::F16, DType::BF16})
      for (int64_t m : {1, 64, 100, 128, 256, 1024, 4096, 16384})
        for (const auto& [n, k] : nks) {
          ++*problems;
          const std::vector<TensorSpec> inputs{{dtype, {m, k}}, bt ? TensorSpec{dtype, {n, k}} : TensorSpec{dtype, {k, n}}};
          const std::string what = rt::str(form, " ", rt::name(dtype), " M=", m, " N=", n, " K=", k);
          std::string code;
          try {
            code = kernel.emit(tilelang::Stage::Cuda, inputs);
          } catch (const std::exception& e) {
            ADD_FAILURE() << what << ": no CUDA\n" << e.what();
            continue;
          }
          if (code.find("GemmSm90Config<") == std::string::npos) {
            ++*other;
            EXPECT_TRUE(n % 8 != 0 || k % 8 != 0) << what << ": not the Hopper GEMM kernel";
            continue;
          }
          auto [it, fresh] = index.emplace(code, out.size());
          if (fresh) out.push_back({form, inputs, code, what});
          ++out[it->second].problems;
        }
  }
  return out;
}

// The config line of a seed kernel's source ("GemmSm90Config<...>"), to name it.
std::string seed_config(const std::string& code) {
  const size_t at = code.find("GemmSm90Config<");
  return code.substr(at, code.find('>', at) - at + 1);
}

// Every Hopper GEMM kernel the code generation picks by itself for the seed matmul over the grid of
// seed_kernels() compiles for sm_90a, with wgmma in its PTX and none serialized by ptxas
// (NoTileProgramSerializesItsWgmmas's check for every tiling the seed can choose, not only
// 4096 x 4096: 64 x 64 at small M, the split-K-favoured 128-row tiles, 256 x 128, each dtype and
// layout). Each distinct kernel compiles once, in a fresh cache (a cached compile has no ptxas log);
// NVRTC compiles one at a time in a process, so the test runs itself in up to 8 child processes
// (TL_SEED_SHARD=index/processes, testutil::run_test_in_shards).
TEST(CudaCompile, EverySeedTilingCompiles) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  int problems = 0, other = 0;
  const std::vector<SeedKernel> kernels = seed_kernels(&problems, &other);
  // 6 tilings (64 x 64, 128 x 64/128/192/256, 256 x 128) x 2 dtypes x 4 forms.
  EXPECT_EQ(kernels.size(), 48u);
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  const testutil::TempDir cache;  // a fresh disk cache: a cached compile keeps no ptxas log
  std::printf("%d seed matmul problems (%d not on the Hopper GEMM kernel), %zu distinct Hopper GEMM kernels\n", problems, other, kernels.size());
  const testutil::TestShard shard = testutil::shard_this_test("TL_SEED_SHARD", cache.path(), "TL_TEST_VERBOSE");
  if (shard.done) {
    std::printf("compiled %zu distinct seed kernels in %.1f s (%u processes)\n", kernels.size(), elapsed(), shard.count);
    return;
  }
  const testutil::ScopedEnv cache_dir("TL_CACHE_DIR", cache.path());
  tilelang::CompileOptions o;
  o.target = tilelang::Target::cuda("sm_90a");
  const tilelang::Module module = tilelang::Module::load(tltest::source_path("tests/tilelang/programs/matmul_forms_seed.py"));
  size_t compiled = 0;
  for (size_t i = shard.index; i < kernels.size(); i += shard.count) {
    const SeedKernel& s = kernels[i];
    const std::string what = rt::str(seed_config(s.code), "\n  first chosen for ", s.first, " (", s.problems, " problems)");
    const int64_t compiles = rt::nvrtc_compile_count(), serialized = rt::nvrtc_serialized_wgmma_count();
    const auto t0 = std::chrono::steady_clock::now();
    std::string ptx;
    try {
      ptx = module.kernel(s.form, o).emit(tilelang::Stage::Ptx, s.inputs);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "does not compile: " << what << "\n" << e.what();
      continue;
    }
    ++compiled;
    EXPECT_EQ(rt::nvrtc_compile_count(), compiles + 1) << "not compiled afresh (no ptxas log): " << what;
    EXPECT_NE(ptx.find("wgmma.mma_async"), std::string::npos) << what;
    EXPECT_EQ(rt::nvrtc_serialized_wgmma_count(), serialized) << "wgmma serialized (see stderr): " << what;
    if (std::getenv("TL_TEST_VERBOSE"))
      std::printf("%5.1fs  %s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), what.c_str());
  }
  std::printf("compiled %zu of %zu distinct seed kernels in %.1f s (shard %u/%u)\n", compiled, kernels.size(), elapsed(), shard.index, shard.count);
}

}  // namespace

namespace {

// The CUDA code of kernel `name` of an inline program (its file name is `name`.py) for sm_90a.
std::string sm90_cuda_of(const std::string& src, const std::string& name, const std::map<std::string, std::string>& params = {}) {
  tilelang::CompileOptions o;
  o.target = tilelang::Target::cuda("sm_90a");
  o.params = params;
  return tilelang::Module::from_source(src, name + ".py").kernel(name, o).emit(tilelang::Stage::Cuda, {});
}

// The CUDA a program lowers to, and its launches, for sm_90a or sm_80.
tilelang::codegen::CudaSource cuda_for(const Case& c, const std::string& arch) {
  auto ast = tilelang::ast::parse(std::make_shared<tilelang::SourceFile>(c.file, tltest::read_source(c.file)));
  tilelang::ir::PrimFunc f = tilelang::frontend::elaborate(ast, {c.kernel, c.params, c.shapes});
  tilelang::Target target = tilelang::Target::cuda(arch);
  return tilelang::codegen::generate_cuda(tilelang::passes::lower(f, {target, true}), target);
}

// The CUDA of the program case `name` (cases()) for `arch`.
std::string case_cuda(const std::string& name, const std::string& arch) {
  const auto all = cases();
  const auto c = std::find_if(all.begin(), all.end(), [&](const Case& x) { return x.name == name; });
  if (c == all.end()) {
    ADD_FAILURE() << "no program case " << name;
    return {};
  }
  return cuda_for(*c, arch).code;
}

// A shared tile that takes the bytes of one whose scope has ended waits for that one's readers: the
// row sums' store (a few threads) and the first write of the tile after them (every thread) are
// separated by a block barrier (reused_shared_tile.py; without it the writers overwrote row sums not
// yet stored, on the GPU only).
TEST(CudaCompile, NewSharedTileWaitsForReadersOfTheTileItReuses) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const std::string code = case_cuda("reused_shared_tile", arch);
    const size_t store = code.find("R["), tile = code.find("* __restrict__ c = ");
    ASSERT_NE(store, std::string::npos) << arch;
    ASSERT_NE(tile, std::string::npos) << arch;
    ASSERT_LT(store, tile) << arch;
    EXPECT_NE(code.substr(store, tile - store).find("__syncthreads();"), std::string::npos) << arch << ":\n" << code;
  }
}

// A TMA-pipelined loop inside a serial loop (pipelined_in_serial_loop.py): the block meets before
// thread 0 initializes the loop's mbarriers again for the next pass (warps still in the pass before
// may wait on them or release a stage into them).
TEST(CudaCompile, PipelinedLoopInALoopMeetsBeforeItsBarriersAreReset) {
  const std::string code = case_cuda("pipelined_in_serial_loop", "sm_90a");
  const size_t outer = code.find("for (int32_t ro = 0;"), init = code.find("tile_copy_barriers_init<");
  ASSERT_NE(outer, std::string::npos) << code;
  ASSERT_NE(init, std::string::npos) << code;
  ASSERT_LT(outer, init) << code;
  EXPECT_NE(code.substr(outer, init - outer).find("__syncthreads();"), std::string::npos) << code;
}

// Tile operations inside the scope of T.get_thread_binding's per-thread value are the block's: the
// copy and the parallel loop over the 300-element row are shared out among the threads, never a
// whole loop in each (thread_binding_then_tile_ops.py; each thread doubled the row itself, racing);
// the parallel loop that writes a local runs whole in each thread.
TEST(CudaCompile, TileOpsAfterAThreadBindingAreSharedOut) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const std::string code = case_cuda("thread_binding_then_tile_ops", arch);
    EXPECT_NE(code.find("(r * 128) + tx)"), std::string::npos) << arch << ":\n" << code;
    EXPECT_EQ(code.find("< 300; ++"), std::string::npos) << arch << ": a loop over the whole row in every thread\n" << code;
    EXPECT_NE(code.find("i < 2; ++i) {"), std::string::npos) << arch << ": the local's loop shared out\n" << code;
  }
}

// An if's condition, a let's value and a loop's extent reading shared memory their body writes: every
// thread reads it, then the block meets, then the body writes (shared_read_then_written.py: without
// the barrier a fast warp's writes reached a slow warp's reads).
TEST(CudaCompile, SharedReadBeforeTheBodyWritesIt) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const std::string code = case_cuda("shared_read_then_written", arch);
    for (const char* read : {"const bool cond = (s[0] < 100.0f);\n  __syncthreads();\n  if (cond) {", "const int32_t k_extent = n[0];\n  __syncthreads();",
                             "const float m = s[1];\n  __syncthreads();"})
      EXPECT_NE(code.find(read), std::string::npos) << arch << ": no barrier after " << read << "\n" << code;
  }
}

// A gemm after `tx = T.get_thread_binding(0)` (a per-thread let around the rest of the kernel) keeps
// its accumulator in registers and, on sm_90a, its loop's producer warpgroup, which binds only the
// lets its copies use (thread_binding_then_gemm.py: the accumulator went to shared memory and the
// loop ran without a producer, as if the whole let body were per-thread code).
TEST(CudaCompile, GemmAfterAThreadBindingKeepsRegistersAndProducer) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const std::string code = case_cuda("thread_binding_then_gemm", arch);
    EXPECT_NE(code.find("alignas(16) float C_l[32];"), std::string::npos) << arch << ": the accumulator not in registers\n" << code;
    EXPECT_NE(code.find("__shfl_xor_sync"), std::string::npos) << arch << ": the row sum not by the register layout\n" << code;
    EXPECT_EQ(code.find("Warp-specialized") != std::string::npos, std::string(arch) == "sm_90a") << arch << "\n" << code;
  }
}

// Tile ops on a thread's own part run whole in each thread (per_thread_tile_ops.py): a loop over its 4
// elements at tid * 4 + i, never one shared out among the threads (`if (tx < 4)`, `tid * 5`).
TEST(CudaCompile, PerThreadTileOpsRunWholeInEachThread) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const std::string code = case_cuda("per_thread_tile_ops", arch);
    EXPECT_EQ(code.find("if ((tx < "), std::string::npos) << arch << ": a per-thread tile op shared out\n" << code;
    EXPECT_EQ(code.find("* 5)"), std::string::npos) << arch << "\n" << code;
    EXPECT_NE(code.find("tl::cuda::atomic_add(&G[(((static_cast<int64_t>(bx) * 512) + (static_cast<int64_t>(tid) * 4)) + static_cast<int64_t>("), std::string::npos)
        << arch << "\n" << code;
  }
}

// Warp specialization on sm_90a: a T.Pipelined loop whose loads all go by TMA gets a producer
// warpgroup after the kernel's threads (the launch grows by 128): it gives registers back and one of
// its threads issues the stages' boxes; the kernel's threads take the registers, consume the stages
// and meet on named barrier 1 only. One consumer warpgroup runs two blocks an SM where the shared
// memory allows (128 registers at launch: producer 40, consumers 216), two run one (168: 40, 232).
TEST(CudaCompile, PipelinedLoopsAreWarpSpecializedOnHopper) {
  struct WsCase {
    Case c;
    int64_t consumers, blocks, consumer_regs, stages;
    const char* epilogue_tile;  // the epilogue's staging tile (through shared memory, 16-byte stores)
    bool persistent;            // every block runs the loop alike and the epilogue tile fits beside the stages
  };
  // One consumer warpgroup (128 x 128 x 32 tiles), and two (the example's default tile, 4 stages).
  std::map<std::string, std::string> gemm{{"M", "1024"}, {"N", "1024"}, {"K", "1024"}, {"dtype", "bfloat16"},
                                          {"block_N", "128"}, {"block_K", "32"}, {"threads", "128"}};
  std::map<std::string, std::string> wide{{"M", "1024"}, {"N", "1024"}, {"K", "1024"}, {"dtype", "bfloat16"}, {"num_stages", "4"}};
  auto attention = [](const char* dim, const char* causal) {
    return with({{"batch", "1"}, {"heads", "2"}, {"seq_len", "256"}, {"dim", dim}, {"is_causal", causal}}, kAttention64);
  };
  std::map<std::string, std::string> example{{"M", "1024"}, {"N", "1024"}, {"K", "1024"}, {"dtype", "bfloat16"}};
  std::map<std::string, std::string> attention_wide{{"batch", "1"}, {"heads", "2"}, {"seq_len", "256"}, {"dim", "128"}, {"is_causal", "False"}};
  for (const WsCase& w : {WsCase{{"gemm", "examples/gemm.py", "matmul", gemm, {}}, 128, 2, 216, 3, "C_tile", false},
                          WsCase{{"gemm_wide", "examples/gemm.py", "matmul", wide, {}}, 256, 1, 232, 4, "C_tile", false},
                          WsCase{{"gemm_default", "examples/gemm.py", "matmul", example, {}}, 256, 1, 232, 3, "C_tile", true},
                          WsCase{{"attention", "examples/flash_attention.py", "flash_attention", attention("128", "True"), {}}, 128, 2, 216, 2, "Output_tile", false},
                          WsCase{{"attention_d64", "examples/flash_attention.py", "flash_attention", attention("64", "False"), {}}, 128, 2, 216, 2, "Output_tile", false},
                          WsCase{{"attention_wide", "examples/flash_attention.py", "flash_attention", attention_wide, {}}, 256, 1, 232, 2, "Output_tile", true}}) {
    const std::string t = std::to_string(w.consumers);
    tilelang::codegen::CudaSource src = cuda_for(w.c, "sm_90a");
    const std::string& cuda = src.code;
    ASSERT_EQ(src.launches.size(), 1u) << w.c.name;
    EXPECT_EQ(src.launches[0].threads, w.consumers + 128) << w.c.name;
    EXPECT_NE(cuda.find(rt::str("__launch_bounds__(", w.consumers + 128, ", ", w.blocks, ")")), std::string::npos) << w.c.name;
    EXPECT_NE(cuda.find(rt::str("tile_copy_barriers_init<", w.stages, ", true>(reinterpret_cast<tl::cuda::mbarrier_t*>(&k_stage_bars[0]), ", w.consumers / 32, ");")),
              std::string::npos)
        << w.c.name << ": the consumer warps release the stages";
    // Everything after the role branch: the producer, then the consumers.
    size_t branch = cuda.find(rt::str("if (tl::cuda::warpgroup_idx() >= ", w.consumers / 128, ") {"));
    ASSERT_NE(branch, std::string::npos) << w.c.name << "\n" << cuda;
    size_t consumers = cuda.find("} else {", branch);
    ASSERT_NE(consumers, std::string::npos) << w.c.name;
    std::string producer = cuda.substr(branch, consumers - branch), rest = cuda.substr(consumers);
    EXPECT_NE(producer.find("tl::cuda::setmaxnreg_dec<40>();"), std::string::npos) << w.c.name;
    EXPECT_NE(producer.find("if (threadIdx.x == " + t + ") {"), std::string::npos) << w.c.name;
    EXPECT_NE(producer.find("tl::cuda::tile_copy_tma_issue("), std::string::npos) << w.c.name;
    EXPECT_NE(producer.find("tl::cuda::mbarrier_wait_parity("), std::string::npos) << w.c.name << ": waits for the stage's release";
    EXPECT_EQ(producer.find("wgmma"), std::string::npos) << w.c.name;
    EXPECT_NE(rest.find(rt::str("tl::cuda::setmaxnreg_inc<", w.consumer_regs, ">();")), std::string::npos) << w.c.name;
    EXPECT_NE(rest.find("tl::cuda::tile_copy_wait("), std::string::npos) << w.c.name;
    EXPECT_NE(rest.find("tl::cuda::tile_copy_release("), std::string::npos) << w.c.name;
    EXPECT_EQ(rest.find("tile_copy_tma"), std::string::npos) << w.c.name << ": the consumers issue no copies";
    EXPECT_EQ(rest.find("__syncthreads()"), std::string::npos) << w.c.name << ": a block barrier the producer never reaches";
    EXPECT_NE(rest.find("tl::cuda::named_barrier_sync(1, " + t + ");"), std::string::npos) << w.c.name;
    // The stage tiles are allocated in each role, at the same offsets. Without persistence (the
    // wide tiles leave no other room; causal attention's blocks run their loops for different
    // lengths; one consumer warpgroup's blocks run two an SM) the epilogue's tile takes their memory after the loop and goes out by 16-byte
    // stores. A persistent kernel walks the blocks in rounds in both roles; its epilogue tile is the
    // kernel's own, apart from the stages (the producer fills them with the next block's stages
    // meanwhile), and goes out by TMA while the consumers go on (whole tiles here), thread 0 waiting
    // until the stores have read it before it is filled again and before the block exits.
    const size_t stage_at = producer.find("K_shared") != std::string::npos ? producer.find("K_shared = ") : producer.find("A_shared = ");
    ASSERT_NE(stage_at, std::string::npos) << w.c.name << ": the producer allocates the stages";
    const std::string stage_line = producer.substr(stage_at, producer.find('\n', stage_at) - stage_at);
    EXPECT_NE(rest.find(stage_line), std::string::npos) << w.c.name << ": the consumers' stages at the producer's offset: " << stage_line;
    const size_t tile_at = cuda.find(rt::str(w.epilogue_tile, " = "));
    ASSERT_NE(tile_at, std::string::npos) << w.c.name << ": no epilogue tile\n" << cuda;
    const std::string tile_line = cuda.substr(tile_at, cuda.find('\n', tile_at) - tile_at);
    auto offset = [](const std::string& line) { return std::stoll(line.substr(line.find("(tl_smem + ") + 11)); };
    int64_t stages_bottom = INT64_MAX;  // the start of the producer's first stage tile
    for (size_t at = producer.find("(tl_smem + "); at != std::string::npos; at = producer.find("(tl_smem + ", at + 1))
      stages_bottom = std::min<int64_t>(stages_bottom, offset(producer.substr(at)));
    if (w.persistent) {
      EXPECT_LT(tile_at, branch) << w.c.name << ": the epilogue tile is allocated for the whole kernel";
      EXPECT_LT(offset(tile_line), stages_bottom) << w.c.name << ": the epilogue tile lies apart from the stages: " << tile_line;
      EXPECT_NE(producer.find("tl_blocks.rounds()"), std::string::npos) << w.c.name;
      EXPECT_NE(rest.find("tl_blocks.rounds()"), std::string::npos) << w.c.name;
      const size_t wait = rest.find("tl::cuda::tile_store_wait_read();"), fill = rest.find(rt::str(w.epilogue_tile, " + tl::cuda::swizzled_offset"));
      const size_t issue = rest.find(rt::str("tl::cuda::tile_store_tma(", w.epilogue_tile, " + ")), commit = rest.find("tl::cuda::tile_store_commit();");
      EXPECT_TRUE(wait < fill && fill < issue && issue < commit && commit != std::string::npos) << w.c.name << ": wait, fill, store, commit\n" << rest;
      EXPECT_NE(rest.find("tl::cuda::tile_store_wait_all();"), std::string::npos) << w.c.name;
      if (std::string(w.c.name) == "gemm_default") {  // a plain loop: the round's last stage is released once the loop has drained its gemm
        const size_t drain = rest.find("tl::cuda::wgmma_wait_group<0>();");
        EXPECT_TRUE(drain != std::string::npos && rest.find("tl::cuda::tile_copy_release(", drain) < wait) << w.c.name << "\n" << rest;
      }
      EXPECT_EQ(src.launches[0].persistent_blocks_per_sm, w.blocks) << w.c.name;
    } else {
      EXPECT_EQ(offset(tile_line), offset(stage_line)) << w.c.name << ": the epilogue tile reuses the first stage tile's memory: " << tile_line << " / " << stage_line;
      EXPECT_EQ(cuda.find("tl_blocks"), std::string::npos) << w.c.name;
      EXPECT_EQ(cuda.find("tile_store_tma"), std::string::npos) << w.c.name;
      EXPECT_EQ(src.launches[0].persistent_blocks_per_sm, 0) << w.c.name;
    }
    if (!rt::nvrtc_available()) continue;
    std::string ptx = ptx_for(w.c, "sm_90a");
    EXPECT_NE(ptx.find("setmaxnreg.dec.sync.aligned.u32 40;"), std::string::npos) << w.c.name;
    EXPECT_NE(ptx.find(rt::str("setmaxnreg.inc.sync.aligned.u32 ", w.consumer_regs, ";")), std::string::npos) << w.c.name;
    EXPECT_NE(ptx.find("wgmma.mma_async"), std::string::npos) << w.c.name;
  }
}
// The example's default tiling: 128 x 128 on two consumer warpgroups (and a producer) up to head
// dim 128, 64 x 64 on one above.
TEST(CudaCompile, AttentionDefaultTilingByHeadDim) {
  for (auto [dim, threads] : {std::pair{"64", 384}, std::pair{"128", 384}, std::pair{"256", 256}}) {
    Case c{"flash_attention", "examples/flash_attention.py", "flash_attention", {{"batch", "1"}, {"heads", "2"}, {"seq_len", "512"}, {"dim", dim}}, {}};
    tilelang::codegen::CudaSource src = cuda_for(c, "sm_90a");
    ASSERT_EQ(src.launches.size(), 1u) << dim;
    EXPECT_EQ(src.launches[0].threads, threads) << dim;  // consumers of 64 rows each, and a producer
  }
}


// float32 exp2 is the SFU's ex2.approx.ftz alone on the GPU (attention's softmax: no subnormal
// handling around every call).
TEST(CudaCompile, Exp2IsTheHardwareApproximation) {
  Case c{"attention", "examples/flash_attention.py", "flash_attention",
         {{"batch", "1"}, {"heads", "2"}, {"seq_len", "256"}, {"dim", "64"}}, {}};
  const std::string cuda = cuda_for(c, "sm_90a").code;
  EXPECT_NE(cuda.find("tl::cuda::exp2_approx("), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("exp2f("), std::string::npos) << cuda;
  if (!rt::nvrtc_available()) return;
  EXPECT_NE(ptx_for(c, "sm_90a").find("ex2.approx.ftz.f32"), std::string::npos);
}

// The FA3 schedule (pipelined_softmax, T.Pipelined's order/stage/group): the loop's first and last
// steps are peeled, and each step between issues S = Q K^T and O += P V with no branch around them,
// waits for S alone (wgmma.wait_group 1: P V runs on during the softmax) and for P V before the P
// tile is stored (wait_group 0). Without the schedule every wait is wait_group 0.
TEST(CudaCompile, PipelinedSoftmaxWaitsForTheScoresAlone) {
  for (bool causal : {false, true})
    for (bool pipelined : {true, false}) {
      Case c{"attention", "examples/flash_attention.py", "flash_attention",
             with({{"batch", "1"}, {"heads", "2"}, {"seq_len", "256"}, {"dim", "128"}, {"is_causal", causal ? "True" : "False"}, {"pipelined_softmax", pipelined ? "True" : "False"}}, kAttention64), {}};
      const std::string cuda = cuda_for(c, "sm_90a").code, what = rt::str("causal=", causal, " pipelined_softmax=", pipelined);
      const size_t loop = cuda.find("for (int32_t k = "), end = cuda.find("tile_copy_release", loop);
      ASSERT_NE(loop, std::string::npos) << what;
      const std::string body = cuda.substr(loop, end - loop);
      EXPECT_EQ(body.find("wgmma_wait_group<1>();") != std::string::npos, pipelined) << what << "\n" << body;
      EXPECT_NE(body.find("wgmma_wait_group<0>();"), std::string::npos) << what;
      if (pipelined) {
        EXPECT_EQ(cuda.find("for (int32_t k = 1; "), loop) << what << ": the first step is peeled";
        EXPECT_EQ(body.find("if ("), std::string::npos) << what << ": a branch in the steady steps\n" << body;
        EXPECT_LT(body.find("tile_gemm_wgmma<tl::bfloat16_t, false, true"), body.find("tile_gemm_wgmma<tl::bfloat16_t, false, false")) << what << ": S is issued first";
      }
      if (!rt::nvrtc_available()) continue;
      EXPECT_EQ(ptx_for(c, "sm_90a").find("wgmma.wait_group.sync.aligned 1;") != std::string::npos, pipelined) << what;
    }
}

// The wgmma instructions of a PTX text whose A operand is in registers (the RS form: four 32-bit
// registers in braces after the accumulators, where the SS form has a descriptor), and all of them.
std::pair<int, int> wgmma_register_a_count(const std::string& ptx) {
  int rs = 0, all = 0;
  for (size_t at = ptx.find("wgmma.mma_async"); at != std::string::npos; at = ptx.find("wgmma.mma_async", at + 1)) {
    const size_t acc_end = ptx.find('}', at);
    ++all;
    rs += ptx.compare(acc_end, 4, "}, {") == 0;
  }
  return {rs, all};
}

// An 8-bit P (cast from an FP32 or int32 accumulator) read whole as a wgmma gemm's A stays in
// registers too: the gemm reorders it into the k32 fragment (shuffles) and reads it in the RS form;
// on sm_89 (no wgmma) it goes through a shared tile to mma.sync.
TEST(CudaCompile, EightBitRegisterAOperandsUseTheRegisterForm) {
  for (const auto& [dtype, types] : {std::pair("float8_e4m3", "f32.e4m3.e4m3"), std::pair("float8_e5m2", "f32.e5m2.e5m2"),
                                     std::pair("int8", "s32.s8.s8"), std::pair("uint8", "s32.u8.u8")}) {
    Case c{"gemm_register_a", "tests/tilelang/programs/gemm_register_a.py", "chain", {{"M", "128"}, {"dtype", dtype}}, {}};
    const std::string cuda = cuda_for(c, "sm_90a").code;
    EXPECT_NE(cuda.find("tl::cuda::tile_gemm_wgmma_rs<"), std::string::npos) << dtype << "\n" << cuda;
    if (!rt::nvrtc_available()) continue;
    const std::string ptx = ptx_for(c, "sm_90a");
    auto [rs, all] = wgmma_register_a_count(ptx);
    EXPECT_EQ(rs, 2) << dtype;   // O = P C^T: K = 64, two k32 steps from registers (each warpgroup's code)
    EXPECT_EQ(all, 4) << dtype;  // and S = A B^T's two from shared memory
    EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n64k32." + std::string(types)), std::string::npos) << dtype;
    EXPECT_NE(ptx.find("shfl.sync.idx"), std::string::npos) << dtype;
    const std::string t = types;
    EXPECT_NE(ptx_for(c, "sm_89").find("mma.sync.aligned.m16n8k32.row.col." + t + (t[0] == 's' ? ".s32" : ".f32")), std::string::npos) << dtype;
  }
}

// P stays in registers only while the register fragments fit a thread's budget (192 of 255): at
// head dim 256, attention's 64 x 64 tiles hold 176 with P (RS form; 128 x 128 tiles, 224, would not
// fit shared memory either). In the two-gemm chain (tests/tilelang/programs/gemm_register_a.py,
// 64 rows on one warpgroup) P of 128 columns holds 128 with S and the result; of 256 columns, 224:
// P goes through a shared tile there.
TEST(CudaCompile, PInRegistersOnlyWithinTheRegisterBudget) {
  Case attention{"attention", "examples/flash_attention.py", "flash_attention",
                 {{"batch", "1"}, {"heads", "2"}, {"seq_len", "512"}, {"dim", "256"}, {"block_M", "64"}, {"block_N", "64"}, {"threads", "128"}}, {}};
  EXPECT_NE(cuda_for(attention, "sm_90a").code.find("tl::bfloat16_t acc_s_cast["), std::string::npos);
  if (rt::nvrtc_available()) {
    EXPECT_GT(wgmma_register_a_count(ptx_for(attention, "sm_90a")).first, 0);
  }
  for (auto [width, in_registers] : {std::pair{"128", true}, std::pair{"256", false}}) {
    Case c{"gemm_register_a", "tests/tilelang/programs/gemm_register_a.py", "chain", {{"M", "64"}, {"width", width}}, {}};
    const std::string cuda = cuda_for(c, "sm_90a").code;
    EXPECT_EQ(cuda.find("tl::bfloat16_t P[") != std::string::npos, in_registers) << width << "\n" << cuda;
    if (!rt::nvrtc_available()) continue;
    EXPECT_EQ(wgmma_register_a_count(ptx_for(c, "sm_90a")).first > 0, in_registers) << width;
  }
}

// On sm_90a attention's P (a 16-bit fragment cast from the score accumulator, read whole as the P V
// gemm's A) stays in registers in the accumulator layout, and wgmma reads it there (RS form): no P
// tile, no fence and barrier in the loop; in the FA3 loop the wait for P V (wait_group 0) goes
// before P is rewritten and pins P's registers. With wgmma_register_a = false P goes through a shared tile (SS form), as
// before; 128-row tiles on two warpgroups (each reads its own rows) likewise.
TEST(CudaCompile, AttentionPFeedsWgmmaFromRegisters) {
  for (const char* tile : {"64", "128"})
    for (bool pipelined : {true, false})
      for (bool registers : {true, false}) {
        Case c{"attention", "examples/flash_attention.py", "flash_attention",
               {{"batch", "1"}, {"heads", "2"}, {"seq_len", "512"}, {"dim", "128"}, {"block_M", tile}, {"block_N", tile},
                {"threads", tile == std::string("64") ? "128" : "256"}, {"pipelined_softmax", pipelined ? "True" : "False"}}, {}};
        const std::string what = rt::str("tile ", tile, " pipelined_softmax=", pipelined, " wgmma_register_a=", registers);
        tilelang::Kernel k = kernel_for(c, "sm_90a", registers);
        const std::string cuda = k.emit(tilelang::Stage::Cuda);
        const size_t loop = cuda.find("for (int32_t k = "), end = cuda.find("tile_copy_release", loop);
        ASSERT_NE(loop, std::string::npos) << what;
        const std::string body = cuda.substr(loop, end - loop);
        EXPECT_EQ(cuda.find("tl::bfloat16_t acc_s_cast[") != std::string::npos, registers) << what;
        EXPECT_EQ(cuda.find("acc_s_cast = reinterpret_cast<") == std::string::npos, registers) << what;
        EXPECT_EQ(body.find("tile_gemm_wgmma_rs<tl::bfloat16_t, false, ") != std::string::npos, registers) << what << "\n" << body;
        EXPECT_EQ(body.find("named_barrier_sync") == std::string::npos, registers) << what << "\n" << body;
        if (registers && pipelined) {  // (in the plain loop the wait ends the step before)
          const size_t pack = body.find("*reinterpret_cast<tl::uint32_t*>(acc_s_cast + ");
          ASSERT_NE(pack, std::string::npos) << what << "\n" << body;
          const size_t wait = body.rfind("wgmma_wait_group<0>();", pack);
          ASSERT_NE(wait, std::string::npos) << what << "\n" << body;
          EXPECT_NE(body.substr(wait, pack - wait).find(rt::str("fence_register_tile<", tile == std::string("64") ? 32 : 64, ">(acc_s_cast);")), std::string::npos)
              << what << ": P's registers are pinned after the wait before they are rewritten\n" << body;
        }
        if (!rt::nvrtc_available()) continue;
        auto [rs, all] = wgmma_register_a_count(k.emit(tilelang::Stage::Ptx));
        EXPECT_GT(all, 0) << what;
        EXPECT_EQ(rs > 0, registers) << what;
        EXPECT_LT(rs, all) << what << ": Q K^T reads Q from shared memory";
      }
}

// Key tiles of 48, 80, 96 or 112 give P rows that suit no shared-memory swizzle (96-224 bytes):
// with P in registers both gemms still run on wgmma (S = Q K^T as m64nNk16, P V in the RS form);
// staged (wgmma_register_a = false) P would need a swizzled tile, so the kernel keeps mma.sync.
TEST(CudaCompile, AttentionKeyTilesNoSwizzleFitsRunOnWgmmaFromRegisters) {
  for (const char* n : {"48", "80", "96", "112"})
    for (bool registers : {true, false}) {
      Case c{"attention", "examples/flash_attention.py", "flash_attention",
             {{"batch", "1"}, {"heads", "2"}, {"seq_len", "512"}, {"dim", "128"}, {"block_M", "128"}, {"block_N", n}, {"threads", "256"}}, {}};
      const std::string what = rt::str("block_N ", n, " wgmma_register_a=", registers);
      tilelang::Kernel k = kernel_for(c, "sm_90a", registers);
      const std::string cuda = k.emit(tilelang::Stage::Cuda);
      EXPECT_EQ(cuda.find("tile_gemm_wgmma_rs<tl::bfloat16_t") != std::string::npos, registers) << what;
      EXPECT_EQ(cuda.find("tile_gemm_mma") == std::string::npos, registers) << what;
      if (!registers || !rt::nvrtc_available()) continue;
      const std::string ptx = k.emit(tilelang::Stage::Ptx);
      EXPECT_NE(ptx.find(rt::str("wgmma.mma_async.sync.aligned.m64n", n, "k16")), std::string::npos) << what;
      auto [rs, all] = wgmma_register_a_count(ptx);
      EXPECT_GT(rs, 0) << what;
      EXPECT_LT(rs, all) << what;
    }
}

// A 16-bit A operand wgmma cannot read from registers as it stands (transposed) goes through a
// shared tile; not transposed, the same chain of gemms reads it from registers (on one warpgroup or
// two, and with two 64-row tiles on one).
TEST(CudaCompile, RegisterAOnlyWhereTheLayoutIsWgmmas) {
  for (const char* m : {"64", "128"})
    for (bool trans_a : {false, true}) {
      if (trans_a && m == std::string("128")) continue;
      Case c{"chain", "tests/tilelang/programs/gemm_register_a.py", "chain", {{"M", m}, {"trans_a", trans_a ? "True" : "False"}}, {}};
      const std::string cuda = cuda_for(c, "sm_90a").code, what = rt::str("M=", m, " trans_a=", trans_a);
      EXPECT_EQ(cuda.find("tl::bfloat16_t P[32];") != std::string::npos, !trans_a) << what << "\n" << cuda;
      EXPECT_EQ(cuda.find("tile_gemm_wgmma_rs<") != std::string::npos, !trans_a) << what;
      EXPECT_EQ(cuda.find("tile_gemm_wgmma<tl::bfloat16_t, true, false") != std::string::npos, trans_a) << what;
      if (!rt::nvrtc_available()) continue;
      auto [rs, all] = wgmma_register_a_count(ptx_for(c, "sm_90a"));
      EXPECT_EQ(rs > 0, !trans_a) << what;
      EXPECT_GT(all, rs) << what;
    }
  // One warpgroup over 128 rows: each thread's P is two 64-row tiles, read as two wgmma A fragments.
  Case c{"chain", "tests/tilelang/programs/gemm_register_a.py", "chain", {{"M", "128"}, {"threads", "128"}}, {}};
  const std::string cuda = cuda_for(c, "sm_90a").code;
  EXPECT_NE(cuda.find("tl::bfloat16_t P[64];"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("tile_gemm_wgmma_rs<tl::bfloat16_t, false, 2, 64, 64,"), std::string::npos) << cuda;
  // P 80 columns wide: rows of 160 bytes, which no swizzle fits. In registers wgmma reads it all the
  // same; kept out of registers (p_corner reads P[i, 0] outside a tile nest) it would need a shared
  // tile wgmma cannot read, and the kernel runs on mma.sync instead.
  for (bool p_corner : {false, true}) {
    Case w{"chain", "tests/tilelang/programs/gemm_register_a.py", "chain",
           {{"M", "128"}, {"width", "80"}, {"p_corner", p_corner ? "True" : "False"}}, {}};
    const std::string code = cuda_for(w, "sm_90a").code, what = rt::str("width 80 p_corner=", p_corner);
    EXPECT_EQ(code.find("tile_gemm_wgmma_rs<tl::bfloat16_t, false, 1, 64, 80,") != std::string::npos, !p_corner) << what << "\n" << code;
    EXPECT_EQ(code.find("tile_gemm_mma") != std::string::npos, p_corner) << what;
    if (p_corner || !rt::nvrtc_available()) continue;
    EXPECT_NE(ptx_for(w, "sm_90a").find("wgmma.mma_async.sync.aligned.m64n80k16"), std::string::npos) << what;
  }
}

// Found by differential testing: a scheduled loop's peeled first and last steps (and a middle of one
// step), their conditions folded, ran in one C++ scope, where the column sum's accumulator was
// declared twice (NVRTC: "red" has already been declared). Each peeled step binds its own.
TEST(CudaCompile, PeeledStepsDeclareTheirOwnLocals) {
  if (!rt::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  const std::string src = R"(import tilelang.language as T


def late_gemm():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 128), "bfloat16"), C: T.Tensor((64, 128), "float32"), S: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "bfloat16")
            B_s = T.alloc_shared((32, 128), "bfloat16")
            C_l = T.alloc_fragment((64, 128), "float32")
            s = T.alloc_fragment((128,), "float32")
            T.clear(C_l)
            T.clear(s)
            for k in T.Pipelined(2, num_stages=2, order=[-1, -1, 0, 1], stage=[-1, -1, 1, 1], group=[[0], [1], [2], [3]]):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l)
                T.reduce_sum(B_s, s, dim=0, clear=False)
            T.copy(C_l, C)
            T.copy(s, S)

    return main
)";
  for (const char* arch : {"sm_90a", "sm_80"}) {
    tilelang::CompileOptions o;
    o.target = tilelang::Target::cuda(arch);
    const std::string ptx = tilelang::Module::from_source(src, "late_gemm.py").kernel("late_gemm", o).emit(tilelang::Stage::Ptx, {});
    EXPECT_NE(ptx.find(".entry"), std::string::npos) << arch;
  }
}

// A 16-bit fragment that is also row-reduced stays in shared memory: register row reductions are of
// float accumulators.
TEST(CudaCompile, RowReducedAFragmentStaysShared) {
  const std::string src = R"(import tilelang.language as T


def reduced_p():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "bfloat16"), O: T.Tensor((64, 64), "float32"), R: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            C_shared = T.alloc_shared((64, 64), "bfloat16")
            P = T.alloc_fragment((64, 64), "bfloat16")
            acc = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment((64,), "float32")
            T.copy(C, C_shared)
            T.copy(A, P)
            T.reduce_sum(P, r, dim=1)
            T.gemm(P, C_shared, acc, clear_accum=True)
            T.copy(acc, O)
            T.copy(r, R)

    return main
)";
  const std::string cuda = sm90_cuda_of(src, "reduced_p");
  EXPECT_NE(cuda.find("tl::bfloat16_t* __restrict__ P = reinterpret_cast<"), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("tile_gemm_wgmma_rs<"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("tile_gemm_wgmma<"), std::string::npos) << cuda;
}

// A pipelined loop's only gemm stays in flight into the next step (gemm_in_flight) only when the
// loop writes none of its operands but the stages: here the step rewrites P, the gemm's A in
// registers, so the gemm is waited for before the step ends.
TEST(CudaCompile, NoGemmInFlightWhoseOperandTheLoopWrites) {
  const std::string src = R"(import tilelang.language as T


def loop_p(n):
    @T.prim_func
    def main(A: T.Tensor((64, 64 * n), "bfloat16"), B: T.Tensor((64 * n, 64), "bfloat16"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((64, 64), "bfloat16")
            B_shared = T.alloc_shared((64, 64), "bfloat16")
            P = T.alloc_fragment((64, 64), "bfloat16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(n, num_stages=3):
                T.copy(A[0, k * 64], A_shared)
                T.copy(B[k * 64, 0], B_shared)
                for i, j in T.Parallel(64, 64):
                    P[i, j] = A_shared[i, j] * 2
                T.gemm(P, B_shared, acc)
            T.copy(acc, O)

    return main
)";
  const std::string cuda = sm90_cuda_of(src, "loop_p", {{"n", "4"}});
  const size_t gemm = cuda.find("tile_gemm_wgmma_rs<"), end = cuda.find(';', gemm);
  ASSERT_NE(gemm, std::string::npos) << cuda;
  EXPECT_NE(cuda.substr(gemm, end - gemm).find(", -1>("), std::string::npos) << "the gemm is left to wgmma_waits\n" << cuda;
  EXPECT_NE(cuda.find("tl::cuda::fence_register_tile<32>(P);", gemm), std::string::npos) << "P's registers pinned after the wait\n" << cuda;
}

// Likewise a B tile the loop's threads write (not a pipelined copy: it computes): left in flight,
// the gemm would still read B_shared while the next step rewrites it.
TEST(CudaCompile, NoGemmInFlightWhoseSharedOperandTheLoopWrites) {
  const std::string src = R"(import tilelang.language as T


def loop_b(n):
    @T.prim_func
    def main(A: T.Tensor((64, 64 * n), "bfloat16"), B: T.Tensor((64 * n, 64), "bfloat16"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((64, 64), "bfloat16")
            B_shared = T.alloc_shared((64, 64), "bfloat16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(n, num_stages=3):
                T.copy(A[0, k * 64], A_shared)
                for i, j in T.Parallel(64, 64):
                    B_shared[i, j] = B[k * 64 + i, j] * 2
                T.gemm(A_shared, B_shared, acc)
            T.copy(acc, O)

    return main
)";
  const std::string cuda = sm90_cuda_of(src, "loop_b", {{"n", "4"}});
  const size_t gemm = cuda.find("tile_gemm_wgmma<"), end = cuda.find(';', gemm);
  ASSERT_NE(gemm, std::string::npos) << cuda;
  EXPECT_NE(cuda.substr(gemm, end - gemm).find(", -1>("), std::string::npos) << "the gemm is left to wgmma_waits\n" << cuda;
}

// Two gemms reading one A in registers run at once (wgmma instructions in flight may share their A
// registers): no wait between them; the one after them pins P.
TEST(CudaCompile, GemmsSharingARegisterARunAtOnce) {
  Case c{"chain", "tests/tilelang/programs/gemm_register_a.py", "chain", {{"M", "128"}, {"twice", "True"}}, {}};
  const std::string cuda = cuda_for(c, "sm_90a").code;
  const size_t first = cuda.find("tile_gemm_wgmma_rs<"), second = cuda.find("tile_gemm_wgmma_rs<", first + 1);
  ASSERT_NE(second, std::string::npos) << cuda;
  EXPECT_EQ(cuda.substr(first, second - first).find("wgmma_wait_group"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("fence_register_tile<32>(P);", cuda.find("wgmma_wait_group<0>();", second)), std::string::npos) << cuda;
}

// A wgmma wait covers only the warpgroup's own gemms: with two warpgroups, the one past a barrier may
// overwrite a shared operand the other's gemm still reads, so the wait goes before the barrier.
TEST(CudaCompile, WgmmaWaitPrecedesTheBarrierBeforeAnOperandIsRewritten) {
  const std::string src = R"(import tilelang.language as T


def two(threads):
    @T.prim_func
    def main(A: T.Tensor((128, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"), B2: T.Tensor((64, 64), "bfloat16"),
             C: T.Tensor((128, 64), "float32"), D: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((128, 64), "bfloat16")
            B_s = T.alloc_shared((64, 64), "bfloat16")
            C_f = T.alloc_fragment((128, 64), "float32")
            D_f = T.alloc_fragment((128, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.copy(B2, B_s)
            T.gemm(A_s, B_s, D_f, clear_accum=True)
            T.copy(C_f, C)
            T.copy(D_f, D)

    return main
)";
  const std::string cuda = sm90_cuda_of(src, "two", {{"threads", "256"}});
  const size_t gemm = cuda.find("tile_gemm_wgmma<"), wait = cuda.find("wgmma_wait_group<0>();", gemm), barrier = cuda.find("__syncthreads()", gemm);
  ASSERT_NE(gemm, std::string::npos) << cuda;
  EXPECT_LT(wait, barrier) << cuda;
}

// Warp specialization: the producer copies into its stage tiles from the start, so a tile the
// consumers use before their loop (here in a loop of its own, so its scope ends before the
// pipelined one) lies above the stage tiles, not in their memory as the epilogue's tile may.
TEST(CudaCompile, ConsumerTilesBeforeTheLoopAvoidTheProducersStages) {
  const std::string src = R"(import tilelang.language as T


def pre():
    @T.prim_func
    def main(A: T.Tensor((1024, 1024), "bfloat16"), B: T.Tensor((1024, 1024), "bfloat16"), Bias: T.Tensor((1024, 1024), "float32"),
             C: T.Tensor((1024, 1024), "float32")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, 64), "bfloat16")
            B_shared = T.alloc_shared((64, 128), "bfloat16")
            C_local = T.alloc_fragment((128, 128), "float32")
            for r in T.serial(2):
                Bias_shared = T.alloc_shared((128, 64), "float32")
                T.copy(Bias[by * 128, bx * 128 + r * 64], Bias_shared)
                for i, j in T.Parallel(128, 64):
                    C_local[i, j + r * 64] = Bias_shared[i, j]
            for k in T.Pipelined(16, num_stages=3):
                T.copy(A[by * 128, k * 64], A_shared)
                T.copy(B[k * 64, bx * 128], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 128])

    return main
)";
  const std::string cuda = sm90_cuda_of(src, "pre");
  auto offset = [&](const std::string& tile) {
    const size_t at = cuda.find(tile + " = reinterpret_cast<");
    EXPECT_NE(at, std::string::npos) << tile << "\n" << cuda;
    const size_t plus = cuda.find("tl_smem + ", at) + 10;
    return std::stoll(cuda.substr(plus, cuda.find(')', plus) - plus));
  };
  ASSERT_NE(cuda.find("Warp-specialized"), std::string::npos) << cuda;
  // Three stages of each: A 3 x 128 x 64 and B 3 x 64 x 128 bf16, 48 KiB each.
  const int64_t stages_end = std::max(offset("A_shared"), offset("B_shared")) + 3 * 64 * 128 * 2;
  EXPECT_GE(offset("Bias_shared"), stages_end) << cuda;
}

// Where a producer's layout would not fit (consumer tiles before the loop above the stages it
// fills), the loop keeps the unspecialized lowering, whose stages reuse those tiles' memory; asked
// for, a producer is an error (tests/tilelang/error/cases.txt).
TEST(CudaCompile, NoProducerWhereItsSharedMemoryWouldNotFit) {
  Case c{"bias_first", "tests/tilelang/error/warp_specialize_shared_memory.py", "bias_first", {{"N", "512"}, {"ws", "None"}}, {}};
  const std::string cuda = cuda_for(c, "sm_90a").code;
  EXPECT_EQ(cuda.find("warpgroup_idx()"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("Bias_shared = reinterpret_cast<float*>(tl_smem + 0);"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("tile_copy_tma("), std::string::npos) << cuda;
}

// warp_specialize=False keeps every thread loading and computing (thread 0 issues the boxes, no
// producer); sm_80 has no warp specialization and ignores warp_specialize=True.
TEST(CudaCompile, WarpSpecializationCanBeTurnedOff) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    Case c{"gemm", "examples/gemm.py", "matmul", {{"M", "1024"}, {"N", "1024"}, {"K", "1024"}, {"warp_specialize", arch == std::string("sm_80") ? "True" : "False"}}, {}};
    tilelang::codegen::CudaSource src = cuda_for(c, arch);
    EXPECT_EQ(src.launches.at(0).threads, 256) << arch;  // the example's threads, no producer added
    EXPECT_NE(src.code.find("__launch_bounds__(256)"), std::string::npos) << arch;
    EXPECT_EQ(src.code.find("setmaxnreg"), std::string::npos) << arch;
    EXPECT_EQ(src.code.find("warpgroup_idx()"), std::string::npos) << arch;
    EXPECT_EQ(src.code.find("named_barrier_sync"), std::string::npos) << arch;
    EXPECT_NE(src.code.find(arch == std::string("sm_80") ? "cp_async_16(" : "tl::cuda::tile_copy_tma("), std::string::npos) << arch;
  }
}

// Found by fuzzing: a block of one thread over a 128 x 128 tile had its cooperative loops fully
// unrolled (16384 rounds, or 128 rounds of a 128-long row sum), which NVRTC compiled for minutes.
// Such loops stay loops.
TEST(CudaCompile, FewThreadsOverLargeTilesAreNotFullyUnrolled) {
  const std::string src = R"(import tilelang.language as T


def k(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1) as bx:
            C_l = T.alloc_fragment((128, 128), "float32")
            R = T.alloc_fragment((128,), "float32")
            T.copy(X[0, 0], C_l)
            T.reduce_sum(C_l, R, dim=1)
            for i, j in T.Parallel(128, 128):
                C_l[i, j] = C_l[i, j] - R[i]
            T.copy(C_l, Y[0, 0])

    return main
)";
  const std::map<std::string, std::string> params{{"M", "128"}, {"N", "128"}};
  auto ast = tilelang::ast::parse(std::make_shared<tilelang::SourceFile>("few_threads.py", src));
  tilelang::ir::PrimFunc f = tilelang::frontend::elaborate(ast, {"k", params, {}});
  tilelang::Target target = tilelang::Target::cuda("sm_80");
  const std::string cuda = tilelang::codegen::generate_cuda(tilelang::passes::lower(f, {target, true}), target).code;
  EXPECT_EQ(cuda.find("#pragma unroll"), std::string::npos) << cuda;
  if (!rt::nvrtc_available()) return;
  tilelang::CompileOptions o;
  o.target = target;
  o.params = params;
  EXPECT_NE(tilelang::Module::from_source(src, "few_threads.py").kernel("k", o).emit(tilelang::Stage::Ptx, {}).find(".entry"), std::string::npos);
}

// Found by fuzzing: the "free" barriers of TMA-pipelined stages counted threads / 32 warps: 0 for a
// block of 16 threads (NVRTC crashed with SIGSEGV on it) and one too few for 48 (the last, partial
// warp arrives too).
TEST(CudaCompile, StageBarriersCountPartialWarps) {
  for (const auto& [threads, warps] : std::vector<std::pair<std::string, std::string>>{{"16", "1"}, {"48", "2"}}) {
    Case c{"gemm", "examples/gemm.py", "matmul",
           {{"M", "128"}, {"N", "128"}, {"K", "128"}, {"block_M", "64"}, {"block_N", "64"}, {"threads", threads}}, {}};
    const std::string cuda = cuda_for(c, "sm_90a").code;
    EXPECT_NE(cuda.find("tile_copy_barriers_init<3, true>(reinterpret_cast<tl::cuda::mbarrier_t*>(&k_stage_bars[0]), " + warps + ");"), std::string::npos)
        << threads << " threads:\n" << cuda;
    if (rt::nvrtc_available()) {
      EXPECT_NE(ptx_for(c, "sm_90a").find(".entry"), std::string::npos) << threads << " threads";
    }
  }
}

// Found by fuzzing: a float32 constant past FLT_MAX was written as 1e+308f, which NVRTC rejects
// ("floating constant is out of range": an internal error). It is the float it rounds to, infinity.
TEST(CudaCompile, Float32ConstantsPastTheRangeAreInfinite) {
  const std::string src =
      "@tile_kernel\n"
      "def clip(x: Tensor) -> Tensor:\n"
      "    y = zeros_like(x)\n"
      "    for i in range(x.shape[0]):\n"
      "        if x[i] < 1e308:\n"
      "            y[i] = x[i]\n"
      "    return y\n";
  auto ast = tilelang::ast::parse(std::make_shared<tilelang::SourceFile>("clip.py", src));
  const std::vector<TensorSpec> shapes{{DType::F32, {64}}};
  tilelang::ir::PrimFunc f = tilelang::frontend::elaborate(ast, {"clip", {}, shapes});
  tilelang::Target target = tilelang::Target::cuda("sm_80");
  const std::string cuda = tilelang::codegen::generate_cuda(tilelang::passes::lower(f, {target, true}), target).code;
  EXPECT_NE(cuda.find("< (tl::float_inf())"), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("1e+308f"), std::string::npos) << cuda;
  if (!rt::nvrtc_available()) return;
  tilelang::CompileOptions o;
  o.target = target;
  EXPECT_NE(tilelang::Module::from_source(src, "clip.py").kernel("clip", o).emit(tilelang::Stage::Ptx, shapes).find(".entry"), std::string::npos);
}

}  // namespace
