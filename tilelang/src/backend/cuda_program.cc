#include "backend/cuda_program.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>

#include "rt/cuda_device.h"
#include "rt/cuda_module.h"
#include "rt/env.h"
#include "rt/error.h"
#include "rt/nvrtc.h"
#include "rt/tensor_map.h"
#include "tilelang/analysis/bounds.h"
#include "tilelang/codegen/codegen_cuda.h"
#include "tilelang/ir/printer.h"
#include "tl/device/round_sync_plan.h"
#include "tl/device/split_k.h"

namespace tilelang::backend {
namespace {

constexpr int kRasterGroup = 8;  // tile-columns per band of the Hopper GEMM's tile order

rt::NvrtcResult compile(const codegen::CudaSource& source, const std::string& name, const Target& target) {
  rt::NvrtcOptions options;
  options.arch = target.arch;
  // Code for an older architecture than the GPU's (--target cuda:sm_80 on an H200) loads as PTX,
  // which the driver compiles for the GPU; a cubin runs only on its own architecture.
  options.want_cubin = rt::cuda_device_count() == 0 || rt::cuda_device(0).arch_name() == target.arch;
  try {
    return rt::compile_cuda(source.code, name + ".cu", device_headers(), options);
  } catch (const rt::Error& e) {
    if (source.user_code.empty() || e.kind() == rt::ErrorKind::User) throw;
    report_user_code_failure(source.user_code, e.what(), "CUDA compiler (NVRTC)");
  }
}

int64_t value_of(const ir::Expr& e, const analysis::VarRanges& dims, const SourceLoc& loc) {
  analysis::Interval i = analysis::bound_of(e, dims);
  if (!i.known() || *i.lo != *i.hi) error_at(loc, rt::str("cannot evaluate ", ir::print(e), " for a launch"));
  return *i.lo;
}

class CudaProgram : public Program {
 public:
  CudaProgram(const ir::PrimFunc& lowered, const Target& target) : source_(codegen::generate_cuda(lowered, target)) {
    rt::NvrtcResult compiled = compile(source_, lowered.name, target);
    module_ = rt::CudaModule::load(compiled, lowered.name);
    for (const codegen::CudaLaunch& l : source_.launches) {
      kernels_.push_back(module_.function(l.kernel));
      if (l.smem_bytes > 48 * 1024) kernels_.back().set_max_dynamic_smem(l.smem_bytes);
    }
  }

  const std::vector<ir::Var>& dim_vars() const override { return source_.dim_vars; }

  void run(const std::vector<rt::Tensor>& params, const std::vector<int64_t>& dims) const override {
    analysis::VarRanges known;
    for (size_t i = 0; i < dims.size(); ++i) known[source_.dim_vars[i].get()] = analysis::Interval::point(dims[i]);
    // Every kernel takes all buffers: the parameters, then the temporaries (allocated per run).
    std::vector<rt::Tensor> buffers = params;
    for (size_t i = source_.num_params; i < source_.buffers.size(); ++i) {
      const ir::Buffer& b = source_.buffers[i];
      std::vector<int64_t> shape;
      for (const ir::Expr& d : b->shape) shape.push_back(value_of(d, known, b->loc));
      buffers.push_back(rt::Tensor::empty(shape, b->dtype, params.empty() ? rt::Device::cuda(0) : params[0].device()));
    }
    std::vector<void*> pointers;
    std::vector<long long> dim_values(dims.begin(), dims.end());
    for (const rt::Tensor& t : buffers) pointers.push_back(t.data());
    for (size_t i = 0; i < source_.launches.size(); ++i) {
      const codegen::CudaLaunch& l = source_.launches[i];
      if (l.kind == codegen::CudaLaunch::Kind::HopperGemm) {
        launch_gemm(l, kernels_[i], buffers, known);
        continue;
      }
      std::vector<void*> args;
      for (void*& p : pointers) args.push_back(&p);
      for (long long& d : dim_values) args.push_back(&d);
      // The bulk copies' descriptors, over this run's tensors.
      std::vector<rt::CuTensorMap> maps;
      maps.reserve(l.tensor_maps.size());
      for (const codegen::TensorMapUse& u : l.tensor_maps)
        maps.push_back(rt::encode_tensor_map(rt::tensor_map_spec(source_.buffers[u.buffer]->name, buffers[u.buffer], u.box, u.swizzle)));
      for (rt::CuTensorMap& m : maps) args.push_back(&m);
      rt::Dim3 grid;
      unsigned* g[] = {&grid.x, &grid.y, &grid.z};
      bool empty = false;
      int64_t blocks = 1;
      for (size_t d = 0; d < l.grid.size(); ++d) {
        int64_t v = value_of(l.grid[d], known, l.loc);
        // (A constant grid was checked when the kernel was compiled; this one depends on the inputs.)
        if (d > 0 && v > codegen::kMaxGridYZ && l.persistent_blocks_per_sm == 0)
          error_at(l.loc, rt::str("grid dimension ", d + 1, " of this T.Kernel is ", v, " for these inputs; CUDA allows at most ", codegen::kMaxGridYZ,
                                  " in the second and third"));
        empty |= v <= 0;
        *g[d] = static_cast<unsigned>(std::max<int64_t>(v, 0));
        blocks = std::min<int64_t>(blocks * std::max<int64_t>(v, 0), int64_t(1) << 40);
      }
      if (empty) continue;  // nothing to do for an empty grid
      if (l.persistent_blocks_per_sm > 0) {
        // A persistent kernel: as many blocks as the GPU runs at once, each walking the kernel's
        // blocks in rounds (their index an int on the device).
        if (blocks > INT32_MAX)
          error_at(l.loc, rt::str("this T.Kernel has ", blocks, " blocks for these inputs; a persistent kernel handles at most ", INT32_MAX));
        const int64_t resident = int64_t(rt::cuda_device(buffers.empty() ? 0 : buffers[0].device().id).sm_count) * l.persistent_blocks_per_sm;
        grid = rt::Dim3{static_cast<unsigned>(std::min(blocks, resident)), 1, 1};
      }
      kernels_[i].launch(grid, rt::Dim3{static_cast<unsigned>(l.threads), 1, 1}, static_cast<size_t>(l.smem_bytes), nullptr, args.data());
    }
  }

 private:
  void launch_gemm(const codegen::CudaLaunch& l, const rt::CudaKernel& kernel, const std::vector<rt::Tensor>& buffers,
                   const analysis::VarRanges& known) const {
    int m = static_cast<int>(value_of(l.m, known, l.loc)), n = static_cast<int>(value_of(l.n, known, l.loc));
    int k = static_cast<int>(value_of(l.k, known, l.loc));
    if (m <= 0 || n <= 0) return;
    const rt::Tensor &a = buffers[l.a], &b = buffers[l.b], &c = buffers[l.c];
    int64_t elem = 2;
    rt::CuTensorMap ma = rt::encode_tensor_map(rt::tensor_map_spec_2d("A", a.dtype(), a.data(), k, m, k * elem, l.box_a[0], l.box_a[1], rt::TmaSwizzle::B128));
    rt::CuTensorMap mb = l.b_n_major ? rt::encode_tensor_map(rt::tensor_map_spec_2d("B", b.dtype(), b.data(), n, k, n * elem, l.box_b[0], l.box_b[1], rt::TmaSwizzle::B128))
                                     : rt::encode_tensor_map(rt::tensor_map_spec_2d("B", b.dtype(), b.data(), k, n, k * elem, l.box_b[0], l.box_b[1], rt::TmaSwizzle::B128));
    rt::CuTensorMap mc{};
    if (l.tma_store) mc = rt::encode_tensor_map(rt::tensor_map_spec_2d("C", c.dtype(), c.data(), n, m, n * elem, l.box_c[0], l.box_c[1], rt::TmaSwizzle::B128));
    void* cp = c.data();
    int64_t ldc = n;
    int raster = kRasterGroup;
    const int tiles = ((m + l.block_m - 1) / l.block_m) * ((n + l.block_n - 1) / l.block_n);
    const int k_blocks = (k + l.block_k - 1) / l.block_k;
    const rt::CudaDeviceInfo& device = rt::cuda_device(c.device().id);
    const tl::SplitKPlan plan = tl::plan_split_k(tiles, k_blocks, device.sm_count);
    tl::SplitK sk{plan.dp_tiles, plan.splits, nullptr, nullptr};
    // Without split-K, large operands keep the CTAs in step over the rounds of tiles (the rule of
    // tl/device/round_sync_plan.h). TL_GEMM_ROUND_SYNC: unset or "auto" for the rule, 0 for never, R
    // for a barrier every R rounds wherever one can go (A/B runs).
    const int64_t full_rounds = plan.splits <= 1 && plan.grid > 0 ? tiles / plan.grid : 0;
    const int sync_every = gemm_round_sync_every(full_rounds, k_blocks, (int64_t(m) + n) * k * elem, device.l2_bytes);
    // Held until the launch is queued: a later run that needs a larger workspace frees this one, and
    // cuMemFree waits for the queued kernels that use it.
    std::unique_lock<std::mutex> lock(scratch_mutex_);
    GemmScratch& s = scratch_[c.device().id];
    if (plan.splits > 1) {
      s.grow_split_k(c.device(), plan.workspace_floats(l.block_m * l.block_n), plan.counters(l.consumers));
      sk.workspace = s.workspace.data_as<float>();
      sk.counters = s.counters.data_as<int32_t>();
    }
    tl::RoundSync rs;
    if (tl::round_sync_barriers(full_rounds, sync_every) > 0) {
      rs.words = s.round_sync_words(c.device());
      rs.every = sync_every;
    }
    unsigned grid = static_cast<unsigned>(plan.grid);
    void* args[] = {&ma, &mb, &mc, &cp, &m, &n, &k, &ldc, &raster, &sk, &rs};
    // Overlapping the kernel before it on the stream: the GEMM waits for it before touching global
    // memory (gemm_sm90.h), so its launch and setup hide under that kernel's tail.
    kernel.launch_overlapping(rt::Dim3{grid, 1, 1}, rt::Dim3{static_cast<unsigned>(l.threads), 1, 1}, static_cast<size_t>(l.smem_bytes), nullptr, args);
  }

  // Every how many rounds the launch's CTAs meet (0: never): TL_GEMM_ROUND_SYNC, else the rule.
  static int gemm_round_sync_every(int64_t full_rounds, int k_blocks, int64_t operand_bytes, int64_t l2_bytes) {
    const std::string env = rt::env_string("TL_GEMM_ROUND_SYNC", "auto");
    if (env == "auto") return tl::round_sync_every(full_rounds, k_blocks, operand_bytes, l2_bytes);
    const int64_t forced = rt::env_int("TL_GEMM_ROUND_SYNC", 0);
    RT_USER_CHECK(forced >= 0 && forced <= 1000000, "TL_GEMM_ROUND_SYNC='", env,
                  "' must be auto, 0 or a number of rounds between barriers");
    return int(forced);
  }

  // Scratch of the Hopper GEMM launches of this program on one device: split-K's FP32 partial tiles
  // and per-tile counters, and the two words of the barrier between rounds (all counters zero, and
  // left zero by every launch). Launches go to one stream in order, so they can share it. Grows,
  // never shrinks.
  struct GemmScratch {
    rt::Tensor workspace, counters, round_sync;
    void grow_split_k(rt::Device device, int64_t floats, int64_t counter_count) {
      if (!workspace.defined() || workspace.numel() < floats) workspace = rt::Tensor::empty({floats}, rt::DType::F32, device);
      if (!counters.defined() || counters.numel() < counter_count) {
        counters = rt::Tensor::empty({counter_count}, rt::DType::I32, device);
        counters.zero_();
      }
    }
    uint32_t* round_sync_words(rt::Device device) {
      if (!round_sync.defined()) {
        round_sync = rt::Tensor::empty({2}, rt::DType::I32, device);
        round_sync.zero_();
      }
      return static_cast<uint32_t*>(round_sync.data());
    }
  };

  codegen::CudaSource source_;
  rt::CudaModule module_;
  std::vector<rt::CudaKernel> kernels_;
  mutable std::mutex scratch_mutex_;
  mutable std::map<int, GemmScratch> scratch_;  // by device id
};

}  // namespace

std::unique_ptr<Program> build_cuda_program(const ir::PrimFunc& lowered, const Target& target) {
  return std::make_unique<CudaProgram>(lowered, target);
}

std::string cuda_source(const ir::PrimFunc& lowered, const Target& target) { return codegen::generate_cuda(lowered, target).code; }

std::string cuda_ptx(const ir::PrimFunc& lowered, const Target& target) {
  codegen::CudaSource source = codegen::generate_cuda(lowered, target);
  return compile(source, lowered.name, target).ptx;
}

}  // namespace tilelang::backend
