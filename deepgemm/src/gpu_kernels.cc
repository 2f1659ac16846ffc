#include "gpu_kernels.h"

#include <map>
#include <mutex>
#include <utility>

#include "rt/env.h"
#include "rt/error.h"
#include "rt/jit_kernel.h"

const rt::EmbeddedFile* deepgemm_kernels_embedded_files(std::size_t* count);
const rt::EmbeddedFile* deepgemm_device_embedded_files(std::size_t* count);

namespace deepgemm::detail {
namespace {

const char* device_type_name(rt::DType dtype) {
  switch (dtype) {
    case rt::DType::F8E4M3: return "tl::float8_e4m3_t";
    case rt::DType::BF16: return "tl::bfloat16_t";
    case rt::DType::F32: return "float";
    case rt::DType::F16: return "tl::half_t";
    case rt::DType::UE8M0: return "tl::ue8m0_t";
    default: RT_UNREACHABLE("deepgemm gpu: no device type for ", rt::name(dtype));
  }
}

}  // namespace

namespace {

// The kSm90GemmKernel entry of `header`'s kernel for Cfg = `config`: the kernel's parameters (both
// kernels take the same, so gpu.cc launches them alike), then `body`.
std::string sm90_entry_source(const char* header, const std::string& config, int64_t smem_bytes, const char* body) {
  return rt::str(
      "#include \"deepgemm/kernels/", header, "\"\n"
      "using Cfg = ", config, ";\n"
      "static_assert(Cfg::kSmemBytes == ", smem_bytes, ", \"host and kernel disagree on shared memory\");\n"
      "extern \"C\" __global__ void __launch_bounds__(Cfg::kThreads, 1) ", kSm90GemmKernel, "(\n"
      "    const __grid_constant__ tl::cuda::TmaDescriptor a, const __grid_constant__ tl::cuda::TmaDescriptor b,\n"
      "    const __grid_constant__ tl::cuda::TmaDescriptor sfa, const __grid_constant__ tl::cuda::TmaDescriptor sfb,\n"
      "    const __grid_constant__ tl::cuda::TmaDescriptor d,\n"
      "    const __grid_constant__ deepgemm::kernels::Sm90GemmParams p) {\n  ", body, "\n}\n");
}

}  // namespace

std::string sm90_gemm_source(const Sm90KernelSpec& s) {
  if (s.fp4_registers)
    return sm90_entry_source(
        "sm90_fp4_gemm.cuh",
        rt::str("deepgemm::kernels::Sm90Fp4RegConfig<", device_type_name(s.out), ", ", s.block_m, ", ", s.block_n, ", ",
                s.stages, ", ", s.grouping, ", ", s.has_c ? "true" : "false", ", ", s.promotion_k, ", ",
                s.k_interleave ? "true" : "false", ">"),
        s.smem_bytes, "(void)d;  // its epilogue stores directly\n  deepgemm::kernels::sm90_fp4_reg_gemm_body<Cfg>(a, b, sfa, sfb, p);");
  RT_ICHECK(!s.k_interleave, "sm90_gemm.cuh has no k-interleaved consumers (only the FP4 registers kernel does)");
  const std::string config = rt::str("deepgemm::kernels::Sm90GemmConfig<", s.fp8 ? "true" : "false", ", ",
                                     device_type_name(s.out), ", ", s.block_m, ", ", s.block_n, ", ", s.stages, ", ",
                                     s.grouping, ", ", s.has_c ? "true" : "false", ", ",
                                     s.tma_store ? "true" : "false", ", ", s.sfb_per_row ? "true" : "false", ", ",
                                     s.promotion_k, ", ", s.multicast, ", ", s.epilogue_buffers, ", ",
                                     s.fp4_b ? "true" : "false", ", ", s.fold_scales ? "true" : "false", ", ",
                                     s.epilogue_whole_slice ? "true" : "false", ", ",
                                     s.ring_rounds ? "true" : "false", ">");
  return sm90_entry_source("sm90_gemm.cuh", config, s.smem_bytes,
                           "deepgemm::kernels::sm90_gemm_body<Cfg>(a, b, sfa, sfb, d, p);");
}

std::string layout_copy_source(rt::DType in, rt::DType out) {
  return rt::str("#include \"deepgemm/kernels/layout_copy.cuh\"\n"
                 "extern \"C\" __global__ void __launch_bounds__(256) ", kLayoutCopyKernel, "(const ",
                 device_type_name(in), "* in, ", device_type_name(out),
                 "* out, int rows, int cols, tl::int64_t s_g, tl::int64_t s_r, tl::int64_t s_c, tl::int64_t out_ld) {\n"
                 "  deepgemm::kernels::layout_copy_body(in, out, rows, cols, s_g, s_r, s_c, out_ld);\n}\n");
}

const std::vector<rt::EmbeddedFile>& kernel_headers() {
  static const std::vector<rt::EmbeddedFile> headers = [] {
    std::vector<rt::EmbeddedFile> all;
    for (auto* table : {&deepgemm_kernels_embedded_files, &deepgemm_device_embedded_files}) {
      size_t n = 0;
      const rt::EmbeddedFile* files = table(&n);
      all.insert(all.end(), files, files + n);
    }
    return all;
  }();
  return headers;
}

rt::NvrtcOptions jit_options(const std::string& arch) {
  rt::NvrtcOptions options;
  options.arch = arch;
  options.extra = rt::env_words("DG_JIT_FLAGS");
  return options;
}

rt::CudaKernel jit_kernel(const std::string& source, const std::string& name, int device) {
  return rt::jit_kernel(source, name, device, kernel_headers(), jit_options("").extra);
}

Sm90Kernel sm90_kernel(const Sm90KernelSpec& spec, int device) {
  using Key = std::tuple<int, decltype(spec.key()), std::vector<std::string>>;
  static std::mutex mutex;
  static std::map<Key, Sm90Kernel> loaded;
  Key key{device, spec.key(), rt::env_words("DG_JIT_FLAGS")};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  }
  Sm90Kernel k;
  k.kernel = jit_kernel(sm90_gemm_source(spec), kSm90GemmKernel, device);
  k.name = rt::str("cuda.sm90_", spec.fp8 ? "fp8" : "bf16", "_gemm", spec.sfb_per_row ? ".sfb_per_row" : "",
                   spec.fp4_b ? (spec.fp4_registers ? ".fp4_b_in_registers" : ".fp4_b") : "", spec.fold_scales ? ".folded_scales" : "",
                   spec.k_interleave ? ".k_interleave" : "", spec.ring_rounds ? ".ring_rounds" : "",
                   !spec.tma_store                ? ""
                   : spec.epilogue_whole_slice  ? ".tma_store_slice"
                   : spec.epilogue_buffers == 1 ? ".tma_store_1buf"
                                                : ".tma_store");
  std::lock_guard<std::mutex> lock(mutex);
  return loaded.emplace(std::move(key), std::move(k)).first->second;
}

std::string quant_cast_source(QuantCast cast, rt::DType in) {
  const char* t = device_type_name(in);
  const char* common = "tl::int64_t s0, tl::int64_t s1, ";
  switch (cast) {
    case QuantCast::RowBlocksFp8:
    case QuantCast::RowBlocksFp4:
      return rt::str("#include \"deepgemm/kernels/quant_cast.cuh\"\n"
                     "extern \"C\" __global__ void __launch_bounds__(256) ", kQuantCastKernel, "(const ", t,
                     "* in, tl::int64_t rows, tl::int64_t k, ", common,
                     "int block, float fmax, int ue8m0, tl::uint8_t* q, float* scales) {\n"
                     "  deepgemm::kernels::cast_row_blocks_body<", t, ", ",
                     cast == QuantCast::RowBlocksFp4 ? "true" : "false",
                     ">(in, rows, k, s0, s1, block, fmax, ue8m0, q, scales);\n}\n");
    case QuantCast::Blocks:
    case QuantCast::Columns:
      return rt::str("#include \"deepgemm/kernels/quant_cast.cuh\"\n"
                     "extern \"C\" __global__ void __launch_bounds__(256) ", kQuantCastKernel, "(const ", t,
                     "* in, tl::int64_t rows, tl::int64_t cols, ", common, "int ue8m0, tl::uint8_t* q, float* scales) {\n",
                     "  deepgemm::kernels::", cast == QuantCast::Blocks ? "cast_blocks_body" : "cast_columns_body", "<",
                     t, ">(in, rows, cols, s0, s1, ue8m0, q, scales);\n}\n");
  }
  RT_UNREACHABLE("deepgemm quant_cast_source: cast ", int(cast));
}

}  // namespace deepgemm::detail
