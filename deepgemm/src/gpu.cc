// The GPU backend: runs a validated Problem on the Hopper kernel (kernels/sm90_gemm.cuh), compiled
// at run time for the configuration the heuristic picks (gpu_kernels.h), on the stream of
// set_stream().
//
// Operands the kernel cannot read as they are get a device copy first (kernels/layout_copy.cuh):
// MN-major A or B (the nn/tn/tt layouts; FP8 wgmma reads K-major tiles only), A's scales unless
// FP32, MN-major and TMA-aligned (get_mn_major_tma_aligned_tensor), and UE8M0 scales of B. Not on the GPU yet, a user error naming the call: FP4 B
// (fp8_fp4_*) and the K-grouped GEMM.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>

#include "backend.h"
#include "deepgemm/kernels/sm90_params.h"
#include "gpu_kernels.h"
#include "heuristics.h"
#include "rt/cuda_device.h"
#include "rt/env.h"
#include "rt/error.h"
#include "rt/tensor_map.h"

namespace deepgemm::detail {
namespace {

using kernels::Sm90GemmParams;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Copies the logical [groups, rows, cols] view v (element (g, r, c) at g*s_g + r*s_r + c*s_c) into a
// new tensor of `out_dtype` on the same device, rows `out_ld` >= cols elements apart (the padding is
// left unwritten); returns the new tensor, [groups, rows, out_ld].
template <class Arg>
rt::Tensor layout_copy(const Arg& v, int64_t groups, rt::DType out_dtype, int64_t out_ld, rt::CuStream stream,
                       const char* what, const std::string& function) {
  const rt::Device device = v.tensor.device();
  RT_USER_CHECK(v.rows <= 65535 * 32 && groups <= 65535, "deepgemm::", function, ": ", what, " (", groups, " x ",
                v.rows, " x ", v.cols, ") is too large for the GPU layout copy");
  const rt::Tensor out = rt::Tensor::empty({groups, v.rows, out_ld}, out_dtype, device);
  const rt::CudaKernel kernel =
      jit_kernel(layout_copy_source(v.tensor.dtype(), out_dtype), kLayoutCopyKernel, device.id);
  const void* in = v.tensor.data();
  void* dst = out.data();
  const int rows = int(v.rows), cols = int(v.cols);
  kernel.launch_with(rt::Dim3{unsigned(ceil_div(cols, 32)), unsigned(ceil_div(rows, 32)), unsigned(groups)},
                     rt::Dim3{32, 8, 1}, 0, stream, in, dst, rows, cols, v.s_g, v.s_r, v.s_c, out_ld);
  return out;
}

// v in the K-major form the kernel's TMA loads read (v itself when it already is), in `out_dtype`.
template <class Arg>
Arg k_major(const Arg& v, int64_t groups, rt::DType out_dtype, rt::CuStream stream, const char* what,
            const std::string& function) {
  if (v.s_c == 1 && v.tensor.dtype() == out_dtype) return v;
  Arg r = v;
  r.tensor = layout_copy(v, groups, out_dtype, v.cols, stream, what, function);
  r.s_g = v.rows * v.cols;
  r.s_r = v.cols;
  r.s_c = 1;
  return r;
}

// A's per-row scales in the form the kernel's TMA loads read: FP32, MN-major (stride 1 along M), the
// stride between k-blocks and groups a multiple of 16 bytes (get_mn_major_tma_aligned_tensor's
// layout). Other forms (K-major, UE8M0, unaligned) are copied once into it.
ScaleArg mn_major_scales(const ScaleArg& v, int64_t groups, rt::CuStream stream, const std::string& function) {
  const bool aligned = reinterpret_cast<uintptr_t>(v.tensor.data()) % 16 == 0 && (v.s_c * 4) % 16 == 0 &&
                       (groups == 1 || (v.s_g * 4) % 16 == 0);
  if (v.tensor.dtype() == rt::DType::F32 && (v.s_r == 1 || v.rows == 1) && aligned) return v;
  ScaleArg t = v;  // the transposed view [K / 128, M], copied row by row into rows of M padded to 4
  t.rows = v.cols;
  t.cols = v.rows;
  t.s_r = v.s_c;
  t.s_c = v.s_r;
  const int64_t ld = (v.rows + 3) / 4 * 4;
  ScaleArg r = v;
  r.tensor = layout_copy(t, groups, rt::DType::F32, ld, stream, "a_scales", function);
  r.s_g = v.cols * ld;
  r.s_r = 1;
  r.s_c = ld;
  return r;
}

// A 3-D TMA map {cols, rows, groups} over a K-major operand view, box {box_cols, box_rows, 1}.
rt::CuTensorMap operand_map(const std::string& name, const MatrixArg& v, int64_t groups, uint32_t box_cols,
                            uint32_t box_rows) {
  const int64_t esize = rt::bits(v.tensor.dtype()) / 8;
  rt::TensorMapSpec spec;
  spec.name = name;
  spec.dtype = v.tensor.dtype();
  spec.global_address = v.tensor.data();
  spec.global_dims = {uint64_t(v.cols), uint64_t(v.rows), uint64_t(groups)};
  // One group: any valid stride (the dimension has a single index).
  const int64_t group_stride = groups > 1 ? v.s_g : v.rows * v.s_r;
  spec.global_strides = {uint64_t(v.s_r * esize), uint64_t(group_stride * esize)};
  spec.box_dims = {box_cols, box_rows, 1};
  spec.swizzle = rt::TmaSwizzle::B128;
  return rt::encode_tensor_map(spec);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// DG_GPU_CONFIG=<block_m>x<block_n>x<stages> (tuning): the heuristic's choice replaced, after the
// kernel's own rules are checked.
GpuBlocking forced_blocking(const std::string& fn, const std::string& text, bool fp8, int64_t m, int64_t n,
                            int64_t tile_groups, int out_bytes, bool tma_store_ok, int sms, int64_t smem_limit) {
  int bm = 0, bn = 0, stages = 0;
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  in >> bm >> x1 >> bn >> x2 >> stages;
  RT_USER_CHECK(in && in.peek() == EOF && x1 == 'x' && x2 == 'x', "deepgemm::", fn, ": DG_GPU_CONFIG='", text,
                "' is not <block_m>x<block_n>x<stages>, e.g. 128x128x5");
  const int gcd128 = bn % 128 == 0 ? 128 : bn % 64 == 0 ? 64 : bn % 32 == 0 ? 32 : 16;
  // The kernel's register rule: (waves + FP8's partial sets) x block_n / 2 accumulators <= 192.
  const int waves = bm == 256 ? 2 : 1;
  const int partials = fp8 ? (waves == 1 && bn <= 128 ? 2 : 1) : 0;
  RT_USER_CHECK((bm == 64 || bm == 128 || bm == 256) && bn >= 16 && bn % 16 == 0 && bn <= 256 &&
                    (waves + partials) * bn / 2 <= 192 && (!fp8 || bn + 128 - gcd128 <= 256) && stages >= 2,
                "deepgemm::", fn, ": DG_GPU_CONFIG='", text, "': block_m must be 64, 128 or 256, block_n a multiple ",
                "of 16 with (waves + partial sets) * block_n / 2 <= 192 accumulators (",
                fp8 ? "FP8: block_n <= 192 for block_m 64/128, <= 128 for 256; a tile may touch at most two 128-blocks "
                      "of B's scales"
                    : "BF16: block_n <= 256, <= 192 for block_m 256",
                "), stages >= 2");
  GpuBlocking b;
  b.block_m = bm;
  b.block_n = bn;
  b.block_k = fp8 ? 128 : 64;
  b.stages = stages;
  b.tma_store = tma_store_ok && bn % 64 == 0;
  b.smem_bytes = sm90_smem_bytes(fp8, bm, bn, stages, b.tma_store, out_bytes);
  RT_USER_CHECK(b.smem_bytes <= smem_limit, "deepgemm::", fn, ": DG_GPU_CONFIG='", text, "' needs ", b.smem_bytes,
                " bytes of shared memory; the device allows ", smem_limit);
  const int64_t tiles = ceil_div(std::max<int64_t>(m, 1), bm) * ceil_div(n, bn) * tile_groups;
  b.grid = int(std::min<int64_t>(tiles, sms));
  b.raster_group = int(std::clamp<int64_t>(ceil_div(n, bn), 1, 8));
  return b;
}

}  // namespace

GemmConfig run_gpu(const Problem& p) {
  const std::string& fn = p.function;
  const int device = p.device.id;
  RT_USER_CHECK(device < rt::cuda_device_count(), "deepgemm::", fn, ": the tensors are on ", p.device.to_string(),
                " but there is no usable CUDA device of that ordinal (", rt::cuda_device_count(), " found",
                rt::cuda_device_count() == 0 ? ": " + rt::cuda_unavailable_reason() : std::string(), ")");
  const rt::CudaDeviceInfo& info = rt::cuda_device(device);
  RT_USER_CHECK(info.sm_major == 9 && info.sm_minor == 0, "deepgemm::", fn, ": the GPU kernels need a Hopper GPU ",
                "(sm_90a); ", p.device.to_string(), " is ", info.name, " (", info.arch_name(), ")");
  RT_USER_CHECK(p.kind != Kind::Fp8Fp4, "deepgemm::", fn, ": FP4 B operands are not on the GPU yet (the CPU path ",
                "runs them: pass CPU tensors)");
  RT_USER_CHECK(p.grouping != Grouping::KContiguous, "deepgemm::", fn,
                ": the K-grouped GEMM is not on the GPU yet (the CPU path runs it: pass CPU tensors)");

  const bool fp8 = p.kind == Kind::Fp8;
  const rt::CuStream stream = get_stream();
  const int64_t groups_b = p.grouping == Grouping::None ? 1 : p.num_groups;
  const int64_t groups_a = p.grouping == Grouping::MMasked ? p.num_groups : 1;
  GemmConfig cfg;
  cfg.function = fn;
  cfg.backend = "cuda";
  cfg.m = p.m;
  cfg.n = p.n;
  cfg.k = p.k;
  cfg.num_groups = p.num_groups;
  if (p.m == 0 || p.n == 0) {
    cfg.kernel = "none (empty output)";
    return cfg;
  }

  // Operands in the forms the kernel reads. The copies live until the call returns; the launches
  // are ordered on `stream`, and freeing device memory waits for the work in flight.
  const MatrixArg a = k_major(p.a, groups_a, p.a.tensor.dtype(), stream, "a", fn);
  const MatrixArg b = k_major(p.b, groups_b, p.b.tensor.dtype(), stream, "b", fn);
  // A's scales go through TMA (MN-major); B's (two per k-block) are read directly, in any layout.
  const ScaleArg sfa = fp8 ? mn_major_scales(p.sfa, groups_a, stream, fn) : p.sfa;
  const ScaleArg sfb = fp8 && p.sfb.tensor.dtype() == rt::DType::UE8M0
                           ? k_major(p.sfb, groups_b, rt::DType::F32, stream, "b_scales", fn)
                           : p.sfb;

  const rt::DType out_dtype = p.d.tensor.dtype();
  const int out_bytes = rt::bits(out_dtype) / 8;
  const bool tma_store_ok = out_dtype == rt::DType::BF16 && aligned16(p.d.tensor.data()) && (p.d.s_r * 2) % 16 == 0 &&
                            (groups_a == 1 || (p.d.s_g * 2) % 16 == 0);
  const int sms = get_num_sms();
  const int64_t m_hint = p.grouping == Grouping::MMasked && p.expected_m > 0 ? std::min(p.expected_m, p.m) : p.m;
  GpuBlocking blk = choose_gpu_blocking(fp8, m_hint, p.n, p.k, groups_a, out_bytes, tma_store_ok, sms,
                                        info.smem_per_block_optin);
  const std::string forced = rt::env_string("DG_GPU_CONFIG", "");
  if (!forced.empty()) blk = forced_blocking(fn, forced, fp8, m_hint, p.n, groups_a, out_bytes, tma_store_ok, sms,
                                             info.smem_per_block_optin);

  Sm90KernelSpec spec;
  spec.fp8 = fp8;
  spec.out = out_dtype;
  spec.block_m = blk.block_m;
  spec.block_n = blk.block_n;
  spec.stages = blk.stages;
  spec.grouping = p.grouping == Grouping::MContiguous ? 1 : p.grouping == Grouping::MMasked ? 2 : 0;
  spec.has_c = p.c.present();
  spec.tma_store = blk.tma_store;
  spec.smem_bytes = blk.smem_bytes;
  const rt::CudaKernel kernel = jit_kernel(sm90_gemm_source(spec), kSm90GemmKernel, device);

  const uint32_t block_k = uint32_t(blk.block_k);
  const rt::CuTensorMap map_a = operand_map("a", a, groups_a, block_k, uint32_t(blk.block_m));
  const rt::CuTensorMap map_b = operand_map("b", b, groups_b, block_k, uint32_t(blk.block_n));
  // A's scales: BLOCK_M floats of one k-block per load; rows past M read as zeros.
  rt::CuTensorMap map_sfa = map_a;  // BF16: A's stands in (the kernel never reads it)
  if (fp8) {
    rt::TensorMapSpec spec;
    spec.name = "a_scales";
    spec.dtype = rt::DType::F32;
    spec.global_address = sfa.tensor.data();
    spec.global_dims = {uint64_t(sfa.rows), uint64_t(sfa.cols), uint64_t(groups_a)};
    const int64_t group_stride = groups_a > 1 ? sfa.s_g : sfa.cols * sfa.s_c;
    spec.global_strides = {uint64_t(sfa.s_c * 4), uint64_t(group_stride * 4)};
    spec.box_dims = {uint32_t(blk.block_m), 1, 1};
    map_sfa = rt::encode_tensor_map(spec);
  }
  // D's map serves the TMA-store epilogue only; otherwise A's stands in (the kernel never reads it).
  rt::CuTensorMap map_d = map_a;
  if (blk.tma_store) {
    rt::TensorMapSpec spec;
    spec.name = "d";
    spec.dtype = out_dtype;
    spec.global_address = p.d.tensor.data();
    spec.global_dims = {uint64_t(p.n), uint64_t(p.m), uint64_t(groups_a)};
    const int64_t group_stride = groups_a > 1 ? p.d.s_g : p.m * p.d.s_r;
    spec.global_strides = {uint64_t(p.d.s_r * out_bytes), uint64_t(group_stride * out_bytes)};
    spec.box_dims = {64, 64, 1};
    spec.swizzle = rt::TmaSwizzle::B128;
    map_d = rt::encode_tensor_map(spec);
  }

  Sm90GemmParams params;
  std::memset(&params, 0, sizeof(params));
  if (fp8) {
    params.sfb = static_cast<const float*>(sfb.tensor.data());
    params.sfb_sg = sfb.s_g;
    params.sfb_sr = sfb.s_r;
    params.sfb_sc = sfb.s_c;
  }
  params.d = p.d.tensor.data();
  params.d_sg = p.d.s_g;
  params.d_sr = p.d.s_r;
  if (p.c.present()) {
    params.c = static_cast<const float*>(p.c.tensor.data());
    params.c_sg = p.c.s_g;
    params.c_sr = p.c.s_r;
  }
  if (p.grouping == Grouping::MContiguous) params.m_indices = static_cast<const int32_t*>(p.m_indices.data());
  if (p.grouping == Grouping::MMasked) params.masked_m = static_cast<const int32_t*>(p.masked_m.data());
  params.m = int32_t(p.m);
  params.n = int32_t(p.n);
  params.k = int32_t(p.k);
  params.num_groups = int32_t(p.num_groups);
  params.sfb_rows = int32_t(ceil_div(p.n, 128));
  params.raster_group = blk.raster_group;

  const int threads = 128 * (1 + sm90_consumers(blk.block_m));
  void* args[] = {const_cast<rt::CuTensorMap*>(&map_a), const_cast<rt::CuTensorMap*>(&map_b), &map_sfa, &map_d,
                  &params};
  kernel.launch(rt::Dim3{unsigned(blk.grid), 1, 1}, rt::Dim3{unsigned(threads), 1, 1}, size_t(blk.smem_bytes), stream,
                args);

  cfg.kernel = rt::str("cuda.sm90_", fp8 ? "fp8" : "bf16", "_gemm", blk.tma_store ? ".tma_store" : "");
  cfg.block_m = blk.block_m;
  cfg.block_n = blk.block_n;
  cfg.block_k = blk.block_k;
  cfg.promotion_k = fp8 ? 128 : 0;
  cfg.num_stages = blk.stages;
  cfg.num_multicast = 1;
  cfg.num_tasks = blk.grid;
  cfg.num_threads = blk.grid;
  return cfg;
}

}  // namespace deepgemm::detail
