// The GPU backend: runs a validated Problem on the Hopper kernel (kernels/sm90_gemm.cuh), compiled
// at run time (gpu_kernels.h) for the configuration plan_sm90 picks (plan.h), on the stream of
// set_stream(); the K-grouped GEMM as one launch per group.
//
// Operands the kernel cannot read as they are get a device copy first (kernels/layout_copy.cuh):
// MN-major A or B (the nn/tn/tt layouts and the K-grouped GEMM; FP8 wgmma reads K-major tiles
// only), FP4 B (converted to e4m3, exactly), the scales TMA loads (A's, and B's per-row ones)
// unless FP32, MN-major and TMA-aligned (get_mn_major_tma_aligned_tensor), and UE8M0 block scales
// of B.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "backend.h"
#include "deepgemm/kernels/sm90_params.h"
#include "gpu_kernels.h"
#include "heuristics.h"
#include "plan.h"
#include "rt/cuda_device.h"
#include "rt/env.h"
#include "rt/error.h"
#include "rt/tensor_map.h"

namespace deepgemm::detail {
namespace {

using kernels::Sm90GemmParams;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A [shape] tensor of `dtype` in device scratch memory that outlives the call. Allocating device
// memory on every call would cost more than a GEMM (cuMemAlloc, and cuMemFree synchronizes the
// device): one grow-only buffer per purpose is kept per calling thread, device and stream, so the
// calls that reuse a buffer are ordered on that stream -- the next call's copy into it runs after
// the previous call's kernel has read it. zero_when_allocated: zeroed when (re)allocated.
rt::Tensor stream_scratch(const std::string& purpose, const rt::Shape& shape, rt::DType dtype, int device,
                          rt::CuStream stream, bool zero_when_allocated = false) {
  thread_local std::map<std::tuple<std::string, int, rt::CuStream>, rt::Tensor> buffers;
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  const int64_t bytes = std::max<int64_t>((elements * rt::bits(dtype) + 7) / 8, 1);
  rt::Tensor& buf = buffers[{purpose, device, stream}];
  if (!buf.defined() || buf.numel() < bytes) {
    buf = rt::Tensor::empty({bytes}, rt::DType::U8, rt::Device::cuda(device));
    if (zero_when_allocated) buf.zero_();
  }
  return rt::Tensor::wrap(buf.data(), shape, dtype, buf.device(), {}, buf.storage());
}

// Copies the logical [groups, rows, cols] view v (element (g, r, c) at g*s_g + r*s_r + c*s_c) into
// `what`'s scratch tensor of `out_dtype` on the same device (stream_scratch), rows `out_ld` >= cols
// elements apart (the padding is left unwritten); returns it, [groups, rows, out_ld].
template <class Arg>
rt::Tensor layout_copy(const Arg& v, int64_t groups, rt::DType out_dtype, int64_t out_ld, rt::CuStream stream,
                       const char* what, const std::string& function) {
  const rt::Device device = v.tensor.device();
  RT_USER_CHECK(v.rows <= 65535 * 32 && groups <= 65535, "deepgemm::", function, ": ", what, " (", groups, " x ",
                v.rows, " x ", v.cols, ") is too large for the GPU layout copy");
  const rt::Tensor out = stream_scratch(what, {groups, v.rows, out_ld}, out_dtype, device.id, stream);
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
ScaleArg mn_major_scales(const ScaleArg& v, int64_t groups, rt::CuStream stream, const char* what,
                         const std::string& function) {
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
  r.tensor = layout_copy(t, groups, rt::DType::F32, ld, stream, what, function);
  r.s_g = v.cols * ld;
  r.s_r = 1;
  r.s_c = ld;
  return r;
}

// The byte stride a TMA map gets for a dimension of `extent` indices: the tensor's own, or where the
// dimension has a single index -- any stride addresses it, and validation accepts any, odd ones
// included -- the 16-byte multiple TMA needs past the `inner_bytes` of the dimensions inside it.
uint64_t tma_stride_bytes(int64_t extent, int64_t stride_bytes, int64_t inner_bytes) {
  return uint64_t(extent > 1 ? stride_bytes : (inner_bytes + 15) / 16 * 16);
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
  const uint64_t row = tma_stride_bytes(v.rows, v.s_r * esize, v.cols * esize);
  spec.global_strides = {row, tma_stride_bytes(groups, v.s_g * esize, int64_t(row) * v.rows)};
  spec.box_dims = {box_cols, box_rows, 1};
  spec.swizzle = rt::TmaSwizzle::B128;
  return rt::encode_tensor_map(spec);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// FP4 B that the kernel can load packed by TMA: K contiguous, rows and groups 16 bytes apart (32
// e2m1 values), 16-byte aligned.
bool fp4_loadable_packed(const MatrixArg& v, int64_t groups) {
  return v.s_c == 1 && (v.rows <= 1 || v.s_r % 32 == 0) && (groups == 1 || v.s_g % 32 == 0) &&
         aligned16(v.tensor.data());
}

// A 3-D TMA map over packed FP4 B [groups, rows, cols e2m1] as bytes {cols / 2, rows, groups}, box
// {64 bytes = one k-block of 128 values, box_rows, 1}, no swizzle (the kernel expands it).
rt::CuTensorMap packed_fp4_map(const MatrixArg& v, int64_t groups, uint32_t box_rows) {
  rt::TensorMapSpec spec;
  spec.name = "b";
  spec.dtype = rt::DType::U8;
  spec.global_address = v.tensor.data();
  spec.global_dims = {uint64_t(v.cols / 2), uint64_t(v.rows), uint64_t(groups)};
  const uint64_t row = tma_stride_bytes(v.rows, v.s_r / 2, v.cols / 2);  // strides in e2m1 values
  spec.global_strides = {row, tma_stride_bytes(groups, v.s_g / 2, int64_t(row) * v.rows)};
  spec.box_dims = {64, box_rows, 1};
  spec.swizzle = rt::TmaSwizzle::None;
  return rt::encode_tensor_map(spec);
}



// A 3-D TMA map over per-row scales in the MN-major form (rows along dimension 0), a box of
// `box_rows` rows x `box_blocks` k-blocks.
rt::CuTensorMap scale_map(const std::string& name, const ScaleArg& v, int64_t groups, uint32_t box_rows,
                          uint32_t box_blocks) {
  rt::TensorMapSpec spec;
  spec.name = name;
  spec.dtype = rt::DType::F32;
  spec.global_address = v.tensor.data();
  spec.global_dims = {uint64_t(v.rows), uint64_t(v.cols), uint64_t(groups)};
  const uint64_t col = tma_stride_bytes(v.cols, v.s_c * 4, v.rows * 4);
  spec.global_strides = {col, tma_stride_bytes(groups, v.s_g * 4, int64_t(col) * v.cols)};
  spec.box_dims = {box_rows, box_blocks, 1};
  return rt::encode_tensor_map(spec);
}

// A view of columns [c0, c0 + cols) of `v` (K-major operands and MN-major scales: columns run along
// K), and of group g of a [G, rows, cols] output.
template <class Arg>
Arg columns(const Arg& v, int64_t c0, int64_t cols) {
  Arg r = v;
  const int64_t bits = rt::bits(v.tensor.dtype());
  r.tensor = rt::Tensor::wrap(static_cast<char*>(v.tensor.data()) + c0 * v.s_c * bits / 8, {v.rows, cols},
                              v.tensor.dtype(), v.tensor.device(), {v.s_r, v.s_c}, v.tensor.storage());
  r.cols = cols;
  return r;
}
MatrixArg group_of(const MatrixArg& v, int64_t g) {
  MatrixArg r = v;
  r.tensor = rt::Tensor::wrap(static_cast<char*>(v.tensor.data()) + g * v.s_g * rt::bits(v.tensor.dtype()) / 8,
                              {v.rows, v.cols}, v.tensor.dtype(), v.tensor.device(), {v.s_r, v.s_c},
                              v.tensor.storage());
  r.s_g = 0;
  return r;
}

// One kernel launch over operands already in the kernel's forms.
struct Sm90Call {
  bool fp8 = true;
  bool sfb_per_row = false;
  bool fp4_b = false;  // b is packed e2m1, loaded as such and expanded in the kernel
  bool sfb_ue8m0 = false;  // B's scales given as UE8M0 (FP4 B's may then be folded: plan_sm90)
  int promotion_k = 128;
  Grouping grouping = Grouping::None;
  int64_t m = 0, n = 0, k = 0, num_groups = 1, expected_m = 0;
  int64_t groups_a = 1, groups_b = 1;
  MatrixArg a, b, d, c;
  ScaleArg sfa, sfb;
  rt::Tensor m_indices, masked_m;
};

// DG_GPU_SPLIT_K: unset or "auto" for the plan's choice (0 here), 1 for none, S to force S pieces.
int64_t forced_split_k() {
  const std::string split_env = rt::env_string("DG_GPU_SPLIT_K", "auto");
  return split_env == "auto" ? 0 : rt::env_int("DG_GPU_SPLIT_K", 0);
}

// The tuning knobs as the environment sets them now (deepgemm/config.h).
Sm90Knobs knobs_from_env() {
  Sm90Knobs k;
  k.config = rt::env_string("DG_GPU_CONFIG", "");
  k.fp4 = rt::env_string("DG_GPU_FP4", "auto");
  k.split_k = forced_split_k();
  const std::string sync_env = rt::env_string("DG_GPU_ROUND_SYNC", "auto");
  k.round_sync = sync_env == "auto" ? -1 : rt::env_int("DG_GPU_ROUND_SYNC", 0);
  return k;
}

// What plan_sm90 needs to know of a launch of x on `info`'s device.
Sm90Facts facts_of(const std::string& fn, const Sm90Call& x, const rt::CudaDeviceInfo& info) {
  Sm90Facts f;
  f.function = fn;
  f.fp8 = x.fp8;
  f.fp4_b = x.fp4_b;
  f.sfb_per_row = x.sfb_per_row;
  f.sfb_ue8m0 = x.sfb_ue8m0;
  f.promotion_k = x.promotion_k;
  f.grouping = x.grouping;
  f.m = x.m;
  f.n = x.n;
  f.k = x.k;
  f.expected_m = x.expected_m;
  f.groups_a = x.groups_a;
  f.a_bits = rt::bits(x.a.tensor.dtype());
  f.b_bits = rt::bits(x.b.tensor.dtype());
  f.out = x.d.tensor.dtype();
  f.has_c = x.c.present();
  f.d_aligned16 = aligned16(x.d.tensor.data()) && (x.d.s_r * f.out_bytes()) % 16 == 0 &&
                  (x.groups_a == 1 || (x.d.s_g * f.out_bytes()) % 16 == 0);
  f.sms = get_num_sms();
  f.smem_limit = info.smem_per_block_optin;
  f.l2_bytes = info.l2_bytes;
  f.cluster_launch = info.cluster_launch;
  f.knobs = knobs_from_env();
  return f;
}

GemmConfig launch_sm90(const std::string& fn, const Sm90Call& x, int device, rt::CuStream stream) {
  const Sm90Facts facts = facts_of(fn, x, rt::cuda_device(device));
  const Sm90Plan plan = plan_sm90(facts);
  const GpuBlocking& blk = plan.blocking;
  const bool fp4_registers = plan.fp4_registers;
  const rt::DType out_dtype = facts.out;
  const int out_bytes = facts.out_bytes();
  const int sfb_rows = facts.sfb_rows();

  // Split-K's partial tiles and the counters its pieces meet at, where the plan splits K.
  tl::SplitK split_k;
  rt::Tensor workspace, counters;
  if (blk.splits > 1) {
    workspace = stream_scratch("split_k", {plan.split_k.workspace_floats(blk.block_m * blk.block_n)}, rt::DType::F32,
                               device, stream);
    // Zero when allocated; every launch leaves them zero.
    counters = stream_scratch("split_k_counters", {plan.split_k.counters(sm90_consumers(blk.block_m))},
                              rt::DType::I32, device, stream, true);
    split_k = tl::SplitK{plan.split_k.dp_tiles, plan.split_k.splits, static_cast<float*>(workspace.data()),
                         static_cast<int*>(counters.data())};
  }
  rt::Tensor round_sync;  // only where a barrier happens; zero when allocated, kept zero
  if (plan.round_sync) round_sync = stream_scratch("round_sync", {2}, rt::DType::I32, device, stream, true);

  const Sm90Kernel gemm = sm90_kernel(sm90_kernel_spec(facts, plan), device);

  // With K = 0 the kernel reads neither operand (D = C, or zeros), but the maps must still be valid:
  // they then cover a small scratch buffer.
  rt::Tensor scratch;
  MatrixArg a = x.a, b = x.b;
  ScaleArg sfa = x.sfa, sfb = x.sfb;
  int64_t groups_a = x.groups_a, groups_b = x.groups_b;
  if (x.k == 0) {
    scratch = rt::Tensor::empty({512}, rt::DType::F32, x.d.tensor.device());
    MatrixArg dummy;
    dummy.tensor = rt::Tensor::wrap(scratch.data(), {1, 128}, a.tensor.dtype(), scratch.device(), {}, scratch.storage());
    dummy.rows = 1;
    dummy.cols = 128;
    dummy.s_r = 128;
    dummy.s_c = 1;
    a = b = dummy;
    groups_a = groups_b = 1;
    static_cast<MatrixArg&>(sfa) = dummy;
    static_cast<MatrixArg&>(sfb) = dummy;
    sfa.tensor = sfb.tensor = rt::Tensor::wrap(scratch.data(), {1, 128}, rt::DType::F32, scratch.device(), {},
                                               scratch.storage());
    sfa.s_c = sfb.s_c = 128;
    sfa.s_r = sfb.s_r = 1;
    sfa.rows = sfb.rows = 128;
    sfa.cols = sfb.cols = 1;
  }
  const uint32_t block_k = uint32_t(blk.block_k);
  const rt::CuTensorMap map_a = operand_map("a", a, groups_a, block_k, uint32_t(blk.block_m));
  // With multicast each CTA of a cluster loads half of B's tile.
  const rt::CuTensorMap map_b = x.fp4_b ? packed_fp4_map(b, groups_b, uint32_t(blk.block_n))
                                        : operand_map("b", b, groups_b, block_k, uint32_t(blk.block_n / blk.multicast));
  // Scales: BLOCK_M (A) or BLOCK_N (per-row B) floats per k-block or promotion block; rows past the
  // end read as zeros. Unused maps are A's, which the kernel then never reads.
  const rt::CuTensorMap map_sfa = x.fp8 ? scale_map("a_scales", sfa, groups_a, uint32_t(blk.block_m), 1) : map_a;
  const rt::CuTensorMap map_sfb =
      x.sfb_per_row ? scale_map("b_scales", sfb, groups_b, uint32_t(blk.block_n), uint32_t(sfb_rows)) : map_a;
  // D's map serves the TMA-store epilogue only.
  rt::CuTensorMap map_d = map_a;
  if (blk.tma_store) {
    rt::TensorMapSpec spec;
    spec.name = "d";
    spec.dtype = out_dtype;
    spec.global_address = x.d.tensor.data();
    spec.global_dims = {uint64_t(x.n), uint64_t(x.m), uint64_t(x.groups_a)};
    const int64_t group_stride = x.groups_a > 1 ? x.d.s_g : x.m * x.d.s_r;
    spec.global_strides = {uint64_t(x.d.s_r * out_bytes), uint64_t(group_stride * out_bytes)};
    spec.box_dims = {64, 64, 1};
    spec.swizzle = rt::TmaSwizzle::B128;
    map_d = rt::encode_tensor_map(spec);
  }

  Sm90GemmParams params{};
  if (x.fp8 && !x.sfb_per_row) {
    params.sfb = static_cast<const float*>(sfb.tensor.data());
    params.sfb_sg = sfb.s_g;
    params.sfb_sr = sfb.s_r;
    params.sfb_sc = sfb.s_c;
  }
  params.d = x.d.tensor.data();
  params.d_sg = x.d.s_g;
  params.d_sr = x.d.s_r;
  if (x.c.present()) {
    params.c = static_cast<const float*>(x.c.tensor.data());
    params.c_sg = x.c.s_g;
    params.c_sr = x.c.s_r;
  }
  if (x.grouping == Grouping::MContiguous) params.m_indices = static_cast<const int32_t*>(x.m_indices.data());
  if (x.grouping == Grouping::MMasked) params.masked_m = static_cast<const int32_t*>(x.masked_m.data());
  params.m = int32_t(x.m);
  params.n = int32_t(x.n);
  params.k = int32_t(x.k);
  params.num_groups = int32_t(x.num_groups);
  params.sfb_rows = int32_t(ceil_div(x.n, 128));
  params.raster_group = blk.raster_group;
  params.split_k = split_k;
  params.round_sync = round_sync.defined() ? static_cast<uint32_t*>(round_sync.data()) : nullptr;
  params.round_sync_every = std::max(plan.round_sync_every, 1);

  const int threads = 128 * (1 + (fp4_registers ? fp4_register_consumers(blk.block_n, blk.k_interleave)
                                                : sm90_consumers(blk.block_m)));
  void* args[] = {const_cast<rt::CuTensorMap*>(&map_a),   const_cast<rt::CuTensorMap*>(&map_b),
                  const_cast<rt::CuTensorMap*>(&map_sfa), const_cast<rt::CuTensorMap*>(&map_sfb),
                  &map_d,                                 &params};
  // Launched overlapping the kernel before it on the stream (programmatic dependent launch): its
  // launch and setup hide under that kernel's tail, since the kernel waits for it before touching
  // global memory (sm90_gemm.cuh). DG_GPU_PDL=0: a plain launch. Multicast launches take clusters.
  if (blk.multicast > 1)
    gemm.kernel.launch_cluster(rt::Dim3{unsigned(blk.grid), 1, 1}, rt::Dim3{unsigned(threads), 1, 1},
                          rt::Dim3{unsigned(blk.multicast), 1, 1}, size_t(blk.smem_bytes), stream, args);
  else if (rt::env_int("DG_GPU_PDL", 1) != 0)
    gemm.kernel.launch_overlapping(rt::Dim3{unsigned(blk.grid), 1, 1}, rt::Dim3{unsigned(threads), 1, 1},
                              size_t(blk.smem_bytes), stream, args);
  else
    gemm.kernel.launch(rt::Dim3{unsigned(blk.grid), 1, 1}, rt::Dim3{unsigned(threads), 1, 1}, size_t(blk.smem_bytes),
                  stream, args);

  GemmConfig cfg;
  cfg.kernel = gemm.name;
  cfg.split_k = blk.splits;
  cfg.block_m = blk.block_m;
  cfg.block_n = blk.block_n;
  cfg.block_k = blk.block_k;
  cfg.promotion_k = x.fp8 ? (plan.fold_scales ? 128 : x.promotion_k) : 0;
  cfg.num_stages = blk.stages;
  cfg.num_multicast = blk.multicast;
  cfg.round_sync = round_sync.defined();
  cfg.num_tasks = blk.grid;
  cfg.num_threads = blk.grid;
  return cfg;
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

  const rt::CuStream stream = get_stream();
  GemmConfig cfg;
  if (p.m == 0 || p.n == 0) {
    cfg.kernel = "none (empty output)";
  } else {
    // Operands in the forms the kernel reads: copies into per-stream scratch (stream_scratch), the
    // launches ordered on `stream`.
    Sm90Call x;
    x.fp8 = p.kind != Kind::Bf16;
    x.grouping = p.grouping == Grouping::KContiguous ? Grouping::None : p.grouping;
    x.m = p.m;
    x.n = p.n;
    x.k = p.k;
    x.num_groups = p.num_groups;
    x.expected_m = p.expected_m;
    x.groups_a = p.grouping == Grouping::MMasked ? p.num_groups : 1;
    x.groups_b = p.grouping == Grouping::MContiguous || p.grouping == Grouping::MMasked ? p.num_groups : 1;
    x.a = k_major(p.a, x.groups_a, p.a.tensor.dtype(), stream, "a", fn);
    // FP4 B: loaded packed and expanded in the kernel (validation guarantees TMA can read it).
    x.fp4_b = p.kind == Kind::Fp8Fp4 && p.k > 0;
    RT_ICHECK(!x.fp4_b || fp4_loadable_packed(p.b, x.groups_b), "deepgemm::", fn, ": FP4 b passed validation but TMA ",
              "cannot load it packed");
    x.b = p.kind == Kind::Fp8Fp4 ? p.b : k_major(p.b, x.groups_b, p.b.tensor.dtype(), stream, "b", fn);
    x.d = p.d;
    x.c = p.c;
    x.m_indices = p.m_indices;
    x.masked_m = p.masked_m;
    if (x.fp8) {
      // A's scales, and per-row B scales (FP4, K-grouped), go through TMA in the MN-major form; block
      // scales of B (two per k-block) are read directly, in any layout, as FP32.
      x.sfa = mn_major_scales(p.sfa, x.groups_a, stream, "a_scales", fn);
      x.sfb_per_row = p.sfb.gran_r == 1;
      x.promotion_k = p.promotion_k();
      x.sfb_ue8m0 = p.sfb.tensor.dtype() == rt::DType::UE8M0;
      x.sfb = x.sfb_per_row ? mn_major_scales(p.sfb, x.groups_b, stream, "b_scales", fn)
              : p.sfb.tensor.dtype() == rt::DType::UE8M0 ? k_major(p.sfb, x.groups_b, rt::DType::F32, stream, "b_scales", fn)
                                                         : p.sfb;
    }
    if (p.grouping != Grouping::KContiguous) {
      cfg = launch_sm90(fn, x, device, stream);
    } else {
      // K-grouped: one launch per group over its K range, D[g] = C[g] + A_g B_g^T. A split every
      // group cannot take is refused before the first launch (not after some groups' D is written).
      const int64_t forced_split = forced_split_k();
      for (int64_t g = 0; g < p.num_groups && forced_split > 1; ++g)
        RT_USER_CHECK(p.ks[size_t(g)] >= forced_split * 128, "deepgemm::", fn, ": DG_GPU_SPLIT_K=", forced_split,
                      " needs at least that many blocks of 128 in every group's K; group ", g, " has K = ", p.ks[size_t(g)]);
      int64_t k0 = 0;
      for (int64_t g = 0; g < p.num_groups; ++g) {
        const int64_t kg = p.ks[size_t(g)];
        Sm90Call xg = x;
        xg.k = kg;
        xg.num_groups = 1;
        xg.a = columns(x.a, k0, kg);
        xg.b = columns(x.b, k0, kg);
        xg.sfa = columns(x.sfa, k0 / 128, kg / 128);
        xg.sfb = columns(x.sfb, k0 / 128, kg / 128);
        xg.d = group_of(p.d, g);
        if (p.c.present()) xg.c = group_of(p.c, g);
        cfg = launch_sm90(fn, xg, device, stream);
        k0 += kg;
      }
    }
  }
  cfg.function = fn;
  cfg.backend = "cuda";
  cfg.m = p.m;
  cfg.n = p.n;
  cfg.k = p.k;
  cfg.num_groups = p.num_groups;
  return cfg;
}

}  // namespace deepgemm::detail
