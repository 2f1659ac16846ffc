// Bad input: every check names the function and the argument, and nothing runs on bad data.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "deepgemm/deepgemm.h"
#include "dg_test_util.h"
#include "rt/cuda_device.h"

namespace {

using dgtest::expect_user_error;

constexpr int64_t M = 64, N = 128, K = 256;

// A valid FP8 NT problem to break one argument at a time.
struct Args {
  rt::Tensor a, sfa, b, sfb, d;
  Args() {
    a = dgtest::normal({M, K}, rt::DType::F8E4M3, testutil::fresh_seed());
    b = dgtest::normal({N, K}, rt::DType::F8E4M3, testutil::fresh_seed());
    sfa = dgtest::normal({M, K / 128}, rt::DType::F32, testutil::fresh_seed());
    sfb = dgtest::normal({1, K / 128}, rt::DType::F32, testutil::fresh_seed());
    d = rt::Tensor::empty({M, N}, rt::DType::BF16);
  }
};

// The same metadata, claimed to be on cuda:0 (never dereferenced: the checks only read metadata).
rt::Tensor on_gpu(const rt::Tensor& t) {
  return rt::Tensor::wrap(t.data(), t.shape(), t.dtype(), rt::Device::cuda(0), t.strides(), t.storage());
}

// A view of fresh storage: shape with the given strides and a byte offset from a 64-byte aligned start.
rt::Tensor strided(const rt::Shape& shape, rt::DType dtype, const rt::Shape& strides, int64_t byte_offset = 0) {
  int64_t span = 1;
  for (size_t i = 0; i < shape.size(); ++i) span += (shape[i] - 1) * strides[i];
  rt::Tensor storage = rt::Tensor::empty({span + 64}, dtype);
  return rt::Tensor::wrap(static_cast<char*>(storage.data()) + byte_offset, shape, dtype, rt::Device::cpu(), strides,
                          storage.storage());
}

TEST(Errors, ValidArgumentsRun) {
  Args x;
  deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, x.d);
}

TEST(Errors, Dtypes) {
  Args x;
  const rt::Tensor bf = rt::Tensor::empty({M, K}, rt::DType::BF16);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(bf, x.sfa, x.b, x.sfb, x.d); },
                    {"deepgemm::fp8_gemm_nt", "a must be float8_e4m3", "got bfloat16"});
  const rt::Tensor e5 = rt::Tensor::empty({N, K}, rt::DType::F8E5M2);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, e5, x.sfb, x.d); }, {"b must be float8_e4m3"});
  const rt::Tensor f16 = rt::Tensor::empty({M, N}, rt::DType::F16);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, f16); }, {"d must be bfloat16 or float32"});
  const rt::Tensor sf_bf = rt::Tensor::empty({M, K / 128}, rt::DType::BF16);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, sf_bf, x.b, x.sfb, x.d); }, {"a_scales must be float32 or ue8m0"});
  // Accumulation needs float32 for c and d.
  const rt::Tensor c32 = rt::Tensor::empty({M, N}, rt::DType::F32), cbf = rt::Tensor::empty({M, N}, rt::DType::BF16);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, x.d, c32); },
                    {"with c (accumulation), d must be float32"});
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, c32, cbf); }, {"c must be float32"});
  expect_user_error([&] { deepgemm::bf16_gemm_nt(x.a, x.b, x.d); }, {"deepgemm::bf16_gemm_nt", "a must be bfloat16"});
  expect_user_error([&] { deepgemm::fp8_fp4_gemm_nt(x.a, x.sfa, x.b, x.sfb, x.d); },
                    {"deepgemm::fp8_fp4_gemm_nt", "b must be float4_e2m1"});
}

TEST(Errors, ShapesAndScaleShapes) {
  Args x;
  expect_user_error([&] { deepgemm::fp8_gemm_nt(rt::Tensor::empty({1, M, K}, rt::DType::F8E4M3), x.sfa, x.b, x.sfb, x.d); },
                    {"a must be a 2-d tensor [M, K]"});
  const rt::Tensor b_k = rt::Tensor::empty({N, K + 128}, rt::DType::F8E4M3);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, b_k, x.sfb, x.d); }, {"b [N, K]", "has K = 384", "has K = 256"});
  const rt::Tensor d_bad = rt::Tensor::empty({M, N + 8}, rt::DType::BF16);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, d_bad); }, {"d must have shape [M, N] = [64, 128]"});
  const rt::Tensor sfa_bad = rt::Tensor::empty({M, K / 128 + 1}, rt::DType::F32);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, sfa_bad, x.b, x.sfb, x.d); },
                    {"a_scales must have shape [M, ceil(K/128)] = [64, 2]", "got [64, 3]"});
  const rt::Tensor sfb_bad = rt::Tensor::empty({2, K / 128}, rt::DType::F32);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, sfb_bad, x.d); },
                    {"b_scales must have shape [ceil(N/128), ceil(K/128)] = [1, 2]"});
  // nn: b is [K, N] and its scales [ceil(K/128), ceil(N/128)].
  expect_user_error([&] { deepgemm::fp8_gemm_nn(x.a, x.sfa, dgtest::transpose(x.b), x.sfb, x.d); },
                    {"fp8_gemm_nn", "b_scales must have shape [ceil(K/128), ceil(N/128)] = [2, 1]"});
  // K whose rows are not whole 16-byte units (TMA); K = 192 (a partial last scale block) is fine.
  const rt::Tensor a200 = rt::Tensor::empty({M, 200}, rt::DType::F8E4M3), b200 = rt::Tensor::empty({N, 200}, rt::DType::F8E4M3);
  const rt::Tensor s200 = rt::Tensor::empty({M, 2}, rt::DType::F32), sb200 = rt::Tensor::empty({1, 2}, rt::DType::F32);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(a200, s200, b200, sb200, x.d); }, {"a's row stride (200", "16 bytes"});
  // ... nor when the rows are padded, nor when K is the row count of an MN-major operand: the GPU
  // loads and copies rows of K with TMA.
  const rt::Tensor a17 = strided({M, 17}, rt::DType::F8E4M3, {32, 1}), b17 = strided({N, 17}, rt::DType::F8E4M3, {32, 1});
  const rt::Tensor s17 = rt::Tensor::empty({M, 1}, rt::DType::F32), sb17 = rt::Tensor::empty({1, 1}, rt::DType::F32);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(a17, s17, b17, sb17, x.d); },
                    {"K = 17 is not a whole number of 16-byte units of a's float8_e4m3 elements"});
  const rt::Tensor a200t = rt::Tensor::empty({200, M}, rt::DType::F8E4M3), b200t = rt::Tensor::empty({200, N}, rt::DType::F8E4M3);
  expect_user_error([&] { deepgemm::fp8_gemm_tn(a200t, dgtest::transpose(s200), b200t, sb200, x.d); },
                    {"fp8_gemm_tn", "K = 200 is not a whole number of 16-byte units of a's"});
  const rt::Tensor a4t = rt::Tensor::empty({4, M}, rt::DType::BF16), b4k = strided({N, 4}, rt::DType::BF16, {8, 1});
  expect_user_error([&] { deepgemm::bf16_gemm_tt(a4t, b4k, x.d); }, {"K = 4", "a's bfloat16 elements"});
  // FP4: 32 values per 16 bytes.
  const rt::Tensor a48 = strided({M, 48}, rt::DType::F8E4M3, {64, 1}), b48 = strided({N, 48}, rt::DType::F4E2M1, {64, 1});
  const rt::Tensor sb48 = rt::Tensor::empty({N, 2}, rt::DType::F32);
  expect_user_error([&] { deepgemm::fp8_fp4_gemm_nt(a48, s17, b48, sb48, x.d); },
                    {"K = 48 is not a whole number of 16-byte units of b's float4_e2m1 elements"});
  // FP4 scales: [N, ceil(K/32)] or [N, ceil(K/128)].
  const rt::Tensor b4 = rt::Tensor::empty({N, K}, rt::DType::F4E2M1);
  const rt::Tensor sb4 = rt::Tensor::empty({N, K / 64}, rt::DType::F32);
  expect_user_error([&] { deepgemm::fp8_fp4_gemm_nt(x.a, x.sfa, b4, sb4, x.d); },
                    {"b_scales must have shape [N, ceil(K/32)] or [N, ceil(K/128)]", "ceil(K/32) = 8", "ceil(K/128) = 2"});
}

TEST(Errors, AlignmentAndLayout) {
  Args x;
  // Misaligned pointer (16-byte aligned strides).
  const rt::Tensor a_off = strided({M, K}, rt::DType::F8E4M3, {K + 16, 1}, 8);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(a_off, x.sfa, x.b, x.sfb, x.d); }, {"a's data pointer", "16-byte aligned"});
  // Row stride not a multiple of 16 bytes.
  const rt::Tensor b_ld = strided({N, K}, rt::DType::F8E4M3, {K + 8, 1});
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, b_ld, x.sfb, x.d); },
                    {"b's row stride (264 elements of float8_e4m3)", "multiple of 16 bytes"});
  const rt::Tensor d_ld = strided({M, N}, rt::DType::BF16, {N + 4, 1});
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, d_ld); }, {"d's row stride"});
  // The last dimension not contiguous (an MN-major a given to nt).
  const rt::Tensor a_t = strided({M, K}, rt::DType::F8E4M3, {1, M});
  expect_user_error([&] { deepgemm::fp8_gemm_nt(a_t, x.sfa, x.b, x.sfb, x.d); },
                    {"a must be contiguous in its last dimension"});
  // Overlapping rows.
  const rt::Tensor a_overlap = strided({M, K}, rt::DType::F8E4M3, {16, 1});
  expect_user_error([&] { deepgemm::fp8_gemm_nt(a_overlap, x.sfa, x.b, x.sfb, x.d); }, {"a's rows overlap"});
  // MN-major scales with a leading stride that is not a multiple of 16 bytes (M = 66).
  const int64_t m66 = 66;
  const rt::Tensor a66 = rt::Tensor::empty({m66, K}, rt::DType::F8E4M3);
  const rt::Tensor d66 = rt::Tensor::empty({m66, N}, rt::DType::BF16);
  const rt::Tensor sfa_mn = strided({m66, K / 128}, rt::DType::F32, {1, m66});
  expect_user_error([&] { deepgemm::fp8_gemm_nt(a66, sfa_mn, x.b, x.sfb, d66); },
                    {"a_scales is MN-major with a leading stride of 66", "get_mn_major_tma_aligned_tensor"});
  const rt::Tensor sfa_odd = strided({M, K / 128}, rt::DType::F32, {4, 2});
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, sfa_odd, x.b, x.sfb, x.d); },
                    {"a_scales must be stored K-major", "MN-major"});
}

TEST(Errors, DevicesAndUndefined) {
  Args x;
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, on_gpu(x.d)); },
                    {"fp8_gemm_nt", "d is on cuda:0 but a is on cpu", "one device"});
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, on_gpu(x.sfb), x.d); }, {"b_scales is on cuda:0"});
  // Every tensor "on the GPU" (host memory labelled cuda:0): checked, then the GPU path, which
  // needs a device. Where one exists the kernels would read host pointers, so only without one.
  if (rt::cuda_device_count() == 0) {
    expect_user_error([&] { deepgemm::fp8_gemm_nt(on_gpu(x.a), on_gpu(x.sfa), on_gpu(x.b), on_gpu(x.sfb), on_gpu(x.d)); },
                      {"deepgemm::fp8_gemm_nt", "the tensors are on cuda:0", "no usable CUDA device"});
  }
  // ... but the checks come first.
  expect_user_error([&] { deepgemm::fp8_gemm_nt(on_gpu(x.a), on_gpu(x.b), on_gpu(x.b), on_gpu(x.sfb), on_gpu(x.d)); },
                    {"a_scales must be float32 or ue8m0"});
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, {}, x.b, x.sfb, x.d); }, {"a_scales is an undefined tensor"});
}

TEST(Errors, Aliasing) {
  Args x;
  // d over a's memory.
  const rt::Tensor d_over_a = rt::Tensor::wrap(x.a.data(), {M, N}, rt::DType::BF16, rt::Device::cpu(), {}, x.a.storage());
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, d_over_a); }, {"d overlaps a"});
  // c overlapping d without being d.
  const rt::Tensor big = rt::Tensor::empty({M + 1, N}, rt::DType::F32);
  const rt::Tensor d = rt::Tensor::wrap(big.data(), {M, N}, rt::DType::F32, rt::Device::cpu(), {}, big.storage());
  const rt::Tensor c = rt::Tensor::wrap(big.data_as<float>() + N, {M, N}, rt::DType::F32, rt::Device::cpu(), {},
                                        big.storage());
  expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, d, c); }, {"d overlaps c"});
}

TEST(Errors, GroupedIndices) {
  const int64_t g = 4, m = 256;
  const rt::Tensor a = dgtest::normal({m, K}, rt::DType::F8E4M3, testutil::fresh_seed());
  const rt::Tensor sfa = dgtest::normal({m, K / 128}, rt::DType::F32, testutil::fresh_seed());
  const rt::Tensor b = dgtest::normal({g, N, K}, rt::DType::F8E4M3, testutil::fresh_seed());
  const rt::Tensor sfb = dgtest::normal({g, 1, K / 128}, rt::DType::F32, testutil::fresh_seed());
  const rt::Tensor d = rt::Tensor::empty({m, N}, rt::DType::BF16);
  auto run = [&](std::vector<int32_t> idx) {
    deepgemm::m_grouped_fp8_gemm_nt_contiguous(a, sfa, b, sfb, d, dgtest::i32_tensor(idx));
  };
  std::vector<int32_t> ok(size_t(m), 1);
  run(ok);
  std::vector<int32_t> bad = ok;
  bad[5] = 7;
  expect_user_error([&] { run(bad); }, {"m_grouped_fp8_gemm_nt_contiguous", "m_indices[5] = 7 is out of range for 4 groups"});
  bad = ok;
  bad[200] = -2;
  expect_user_error([&] { run(bad); }, {"m_indices[200] = -2 is out of range"});
  bad = ok;
  for (int r = 64; r < 128; ++r) bad[size_t(r)] = 2;
  expect_user_error([&] { run(bad); }, {"rows 0..127", "groups 1 and 2", "multiple of 128"});
  bad = ok;
  bad[130] = -1;
  expect_user_error([&] { run(bad); }, {"m_indices[131] = 1 follows a padding row"});
  expect_user_error([&] { run(std::vector<int32_t>(size_t(m - 1), 0)); }, {"m_indices must have shape [M] = [256]"});
  const rt::Tensor idx64 = rt::Tensor::empty({m}, rt::DType::I64);
  expect_user_error([&] { deepgemm::m_grouped_fp8_gemm_nt_contiguous(a, sfa, b, sfb, d, idx64); }, {"m_indices must be int32"});
  const rt::Tensor sfb_bad = rt::Tensor::empty({g, 2, K / 128}, rt::DType::F32);
  expect_user_error([&] { deepgemm::m_grouped_fp8_gemm_nt_contiguous(a, sfa, b, sfb_bad, d, dgtest::i32_tensor(ok)); },
                    {"b_scales must have shape [G, ceil(N/128), ceil(K/128)] = [4, 1, 2]"});

  // Masked.
  const int64_t max_m = 64;
  const rt::Tensor am = rt::Tensor::empty({g, max_m, K}, rt::DType::F8E4M3);
  const rt::Tensor sm = rt::Tensor::empty({g, max_m, K / 128}, rt::DType::F32);
  const rt::Tensor dm = rt::Tensor::empty({g, max_m, N}, rt::DType::BF16);
  expect_user_error([&] { deepgemm::m_grouped_fp8_gemm_nt_masked(am, sm, b, sfb, dm, dgtest::i32_tensor({1, 999, 0, 3}), 32); },
                    {"m_grouped_fp8_gemm_nt_masked", "masked_m[1] = 999 is out of range [0, max_M = 64]"});
  expect_user_error([&] { deepgemm::m_grouped_fp8_gemm_nt_masked(am, sm, b, sfb, dm, dgtest::i32_tensor({1, 2, 0, 3}), 0); },
                    {"expected_m = 0 must be positive"});
  const rt::Tensor b3 = rt::Tensor::empty({3, N, K}, rt::DType::F8E4M3);
  expect_user_error([&] { deepgemm::m_grouped_fp8_gemm_nt_masked(am, sm, b3, sfb, dm, dgtest::i32_tensor({1, 2, 0, 3}), 8); },
                    {"b [G, N, K] = [3, 128, 256] has 3 groups but a [G, max_M, K] = [4, 64, 256] has 4"});
  expect_user_error([&] { deepgemm::m_grouped_fp8_gemm_nt_masked(am, sm, b, sfb, dm, dgtest::i32_tensor({1, 2, 3}), 8); },
                    {"masked_m must have shape [G] = [4]"});
}

TEST(Errors, KGrouped) {
  const std::vector<int64_t> ks = {128, 256};
  const rt::Tensor a = rt::Tensor::empty({384, 32}, rt::DType::F8E4M3), b = rt::Tensor::empty({384, 48}, rt::DType::F8E4M3);
  const rt::Tensor sfa = rt::Tensor::empty({3, 32}, rt::DType::F32), sfb = rt::Tensor::empty({3, 48}, rt::DType::F32);
  const rt::Tensor d = rt::Tensor::empty({2, 32, 48}, rt::DType::F32);
  deepgemm::k_grouped_fp8_gemm_tn_contiguous(a, sfa, b, sfb, d, ks);
  expect_user_error([&] { deepgemm::k_grouped_fp8_gemm_tn_contiguous(a, sfa, b, sfb, d, {100, 284}); },
                    {"k_grouped_fp8_gemm_tn_contiguous", "ks[0] = 100", "multiple of 128"});
  expect_user_error([&] { deepgemm::k_grouped_fp8_gemm_tn_contiguous(a, sfa, b, sfb, d, {128, 128}); },
                    {"has 384 rows but sum(ks) = 256"});
  expect_user_error([&] { deepgemm::k_grouped_fp8_gemm_tn_contiguous(a, sfa, b, sfb, d, {256, 256}); },
                    {"ks[1] = 256 takes sum(ks) past the 384 rows of a [sum(ks), M] = [384, 32]"});
  // Group sizes whose sum wraps around to a's 384 rows (it ran the groups past a's memory).
  const int64_t huge = int64_t(1) << 62;
  const rt::Tensor d4 = rt::Tensor::empty({4, 32, 48}, rt::DType::F32);
  expect_user_error([&] { deepgemm::k_grouped_fp8_gemm_tn_contiguous(a, sfa, b, sfb, d4, {huge, huge, huge, huge + 384}); },
                    {"ks[0] = 4611686018427387904 takes sum(ks) past the 384 rows"});
  expect_user_error([&] { deepgemm::k_grouped_fp8_gemm_tn_contiguous(a, sfa, b, sfb, d, {}); }, {"ks is empty"});
  const rt::Tensor dbf = rt::Tensor::empty({2, 32, 48}, rt::DType::BF16);
  expect_user_error([&] { deepgemm::k_grouped_fp8_gemm_tn_contiguous(a, sfa, b, sfb, dbf, ks); }, {"d must be float32"});
  const rt::Tensor d3 = rt::Tensor::empty({3, 32, 48}, rt::DType::F32);
  expect_user_error([&] { deepgemm::k_grouped_fp8_gemm_tn_contiguous(a, sfa, b, sfb, d3, ks); },
                    {"d must have shape [G, M, N] = [2, 32, 48]"});
}

// Sizes near 2^63 on empty operands (M = N = 0): the scale shapes are computed without overflow,
// and there is nothing to compute.
TEST(Errors, HugeKOfEmptyOperands) {
  alignas(16) static uint8_t no_elements[16];
  auto empty = [](const rt::Shape& shape, rt::DType dtype) {
    return rt::Tensor::wrap(no_elements, shape, dtype, rt::Device::cpu());
  };
  const int64_t k = INT64_MAX / 16 * 16, kb = k / 128 + 1;
  const rt::Tensor a = empty({0, k}, rt::DType::F8E4M3), b = empty({0, k}, rt::DType::F8E4M3);
  const rt::Tensor sf = empty({0, kb}, rt::DType::F32), d = empty({0, 0}, rt::DType::F32);
  deepgemm::fp8_gemm_nt(a, sf, b, sf, d);
  expect_user_error([&] { deepgemm::fp8_gemm_nt(a, empty({0, kb - 1}, rt::DType::F32), b, sf, d); },
                    {"a_scales must have shape [M, ceil(K/128)] = [0, 72057594037927936]"});
}

TEST(Errors, Knobs) {
  Args x;
  {
    dgtest::ScopedEnv env("DG_CPU_ISA", "bogus");
    expect_user_error([&] { deepgemm::fp8_gemm_nt(x.a, x.sfa, x.b, x.sfb, x.d); }, {"DG_CPU_ISA=bogus"});
  }
  expect_user_error([] { deepgemm::set_num_sms(-1); }, {"set_num_sms", "-1"});
}

}  // namespace
