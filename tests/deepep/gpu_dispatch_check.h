// Dispatch and combine of CUDA tensors checked against the CPU path, bit for bit, on either device
// plane (gpu_test.cc: cuda_ipc; nccl_test.cc: nccl). The CPU path is checked against the reference in
// dispatch_test.cc. Runs in the ranks that harness.h forks.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>

#include "moe_ref.h"

namespace deepep_test {

inline void expect_same(const rt::Tensor& cpu, const rt::Tensor& gpu, const char* what) {
  EP_CHECK(cpu.defined() == gpu.defined(), what, ": defined on one path only");
  if (!cpu.defined()) return;
  EP_CHECK(gpu.device().is_cuda(), what, " is on ", gpu.device().to_string());
  EP_CHECK(cpu.shape() == gpu.shape() && cpu.dtype() == gpu.dtype(), what, ": ", cpu.shape_string(), " vs ",
           gpu.shape_string());
  const rt::Tensor back = gpu.to(rt::Device::cpu());
  const auto* a = static_cast<const uint8_t*>(cpu.data());
  const auto* b = static_cast<const uint8_t*>(back.data());
  for (int64_t i = 0; i < cpu.nbytes(); ++i)
    EP_CHECK(a[i] == b[i], what, ": byte ", i, " differs (cpu ", int(a[i]), ", gpu ", int(b[i]), ")");
}

// Random bf16 rows, the same on both paths.
inline rt::Tensor random_bf16(const rt::Shape& shape, uint64_t seed) {
  rt::Tensor t = rt::Tensor::empty(shape, rt::DType::BF16);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<tl::bfloat16_t>()[i] = tl::bfloat16_t::from_float(u(gen));
  return t;
}

// Dispatch (BF16 or FP8), combine, a second combine in f32 and a cached dispatch, on the CPU path
// and on a GPU Buffer of `device_options(rank)`'s communicator (its cuda_device and device plane),
// with `faults` injected on both communicators, through Buffers of `window_bytes`, the GPU one's
// normal-mode kernels sized for `num_sms` SMs (0: all). Every result must match the CPU path's bit
// for bit. `run` with host identities (on_nodes): the ranks on emulated nodes, where both paths take
// the hierarchical route.
inline void dispatch_combine_like_cpu(const MoeCase& c,
                                      const std::function<deepep::CommOptions(int rank)>& device_options,
                                      const deepep::FaultConfig& faults = {}, int64_t window_bytes = 8 << 20,
                                      int num_sms = 0, const RunOptions& run = {}) {
  expect_all_ok(run_ranks(c.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    if (run.host_of) setenv("DEEPEP_SHM_EMULATE_NODES", "1", 1);  // this rank's process only
    deepep::CommOptions cpu_options = test_options(), gpu_options = device_options(me);
    const rt::Device dev = rt::Device::cuda(gpu_options.cuda_device);
    cpu_options.faults = gpu_options.faults = faults;
    deepep::Buffer cpu(g, window_bytes, 0, false, cpu_options);
    deepep::Buffer gpu(g, window_bytes, 0, false, gpu_options);
    gpu.set_num_sms(num_sms);
    for (bool fp8 : {false, true}) {
      const deepep::DispatchArgs a = c.dispatch_args(me, fp8, 4);
      deepep::DispatchArgs ag = a;
      ag.x = a.x.to(dev);
      if (fp8) ag.x_scales = a.x_scales.to(dev);
      ag.topk_idx = a.topk_idx.to(dev);
      ag.topk_weights = a.topk_weights.to(dev);
      // With FP8 the GPU dispatch also gets a layout (checked against its routing on the device).
      const deepep::DispatchLayout layout = cpu.get_dispatch_layout(a.topk_idx, c.experts);
      if (fp8) ag.layout = &layout;
      const deepep::DispatchResult dc = cpu.dispatch(a), dg = gpu.dispatch(ag);
      expect_same(dc.recv_x, dg.recv_x, "recv_x");
      expect_same(dc.recv_x_scales, dg.recv_x_scales, "recv_x_scales");
      expect_same(dc.recv_topk_idx, dg.recv_topk_idx, "recv_topk_idx");
      expect_same(dc.recv_topk_weights, dg.recv_topk_weights, "recv_topk_weights");
      expect_same(dc.handle->recv_src_idx, dg.handle->recv_src_idx, "recv_src_idx");
      EP_CHECK(dc.num_recv_tokens_per_expert == dg.num_recv_tokens_per_expert, "num_recv_tokens_per_expert");
      expect_same(dc.handle->rank_prefix_matrix, dg.handle->rank_prefix_matrix.to(dev), "rank_prefix_matrix");
      expect_same(dc.handle->is_token_in_rank, dg.handle->is_token_in_rank, "is_token_in_rank");
      EP_CHECK((dg.handle->internode != nullptr) == (dc.handle->internode != nullptr),
               "the GPU dispatch took the other route (hierarchical on the CPU path: ", dc.handle->internode != nullptr, ")");

      const int64_t N = dc.recv_x.size(0);
      const rt::Tensor y = random_bf16({N, c.hidden}, test_seed() + uint64_t(me) * 7 + fp8);
      const deepep::CombineResult cc = cpu.combine(y, *dc.handle, dc.recv_topk_weights);
      const deepep::CombineResult cg = gpu.combine(y.to(dev), *dg.handle, dg.recv_topk_weights);
      expect_same(cc.combined_x, cg.combined_x, "combined_x");
      expect_same(cc.combined_topk_weights, cg.combined_topk_weights, "combined_topk_weights");

      // f32 rows, no weights, the same handle again.
      rt::Tensor y32 = rt::Tensor::empty({N, c.hidden}, rt::DType::F32);
      for (int64_t i = 0; i < y32.numel(); ++i) y32.data_as<float>()[i] = y.data_as<tl::bfloat16_t>()[i].to_float() * 3;
      expect_same(cpu.combine(y32, *dc.handle).combined_x, gpu.combine(y32.to(dev), *dg.handle).combined_x,
                  "combined_x (f32)");

      // Cached: new rows along the same routing.
      MoeCase c2 = c;
      c2.data_seed = c.seed + 11;
      deepep::DispatchArgs cached;
      cached.x = fp8 ? c2.x_fp8(me) : c2.x_bf16(me);
      if (fp8) cached.x_scales = c2.x_scales(me);
      cached.handle = dc.handle;
      deepep::DispatchArgs cached_g;
      cached_g.x = cached.x.to(dev);
      if (fp8) cached_g.x_scales = cached.x_scales.to(dev);
      cached_g.handle = dg.handle;
      const deepep::DispatchResult kc = cpu.dispatch(cached), kg = gpu.dispatch(cached_g);
      expect_same(kc.recv_x, kg.recv_x, "cached recv_x");
      expect_same(kc.recv_x_scales, kg.recv_x_scales, "cached recv_x_scales");
    }
    // Across nodes, the same rows crossed on both paths: once per token and destination node in
    // dispatch, one partial per token and node in combine.
    EP_CHECK(cpu.internode_traffic().dispatch_rows == gpu.internode_traffic().dispatch_rows, "dispatch rows across nodes: ",
             cpu.internode_traffic().dispatch_rows, " on the CPU path, ", gpu.internode_traffic().dispatch_rows, " on the GPU");
    EP_CHECK(cpu.internode_traffic().combine_rows == gpu.internode_traffic().combine_rows, "combine rows across nodes: ",
             cpu.internode_traffic().combine_rows, " on the CPU path, ", gpu.internode_traffic().combine_rows, " on the GPU");
  }, run));
}

}  // namespace deepep_test
