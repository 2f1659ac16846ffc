// The casts of deepgemm/quant.h: CPU (OpenMP over rows or blocks), or CUDA tensors by the kernels
// of kernels/quant_cast.cuh, which give the same bits.
#include "deepgemm/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "deepgemm/config.h"
#include "gpu_kernels.h"
#include "rt/error.h"
#include "tl/device/numeric.h"

namespace deepgemm {
namespace {

constexpr int64_t kBlock = 128;
constexpr float kMinAmax = 1e-4f;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The scale of a block whose largest magnitude is amax, for a format whose largest value is fmax.
inline float block_scale(float amax, float fmax, bool use_ue8m0) {
  const float s = std::max(amax, kMinAmax) / fmax;
  return use_ue8m0 ? tl::ue8m0_t::from_float_ceil(s).to_float() : s;
}

// Reads the input as float; x is 2-D with any strides.
struct Input {
  const void* data;
  rt::DType dtype;
  int64_t s0, s1;
  float operator()(int64_t i, int64_t j) const {
    const int64_t o = i * s0 + j * s1;
    switch (dtype) {
      case rt::DType::F32: return static_cast<const float*>(data)[o];
      case rt::DType::BF16: return static_cast<const tl::bfloat16_t*>(data)[o].to_float();
      default: return static_cast<const tl::half_t*>(data)[o].to_float();
    }
  }
};

Input check_input(const char* fn, const rt::Tensor& x) {
  RT_USER_CHECK(x.defined(), "deepgemm::", fn, ": x is an undefined tensor");
  RT_USER_CHECK(x.dtype() == rt::DType::F32 || x.dtype() == rt::DType::BF16 || x.dtype() == rt::DType::F16,
                "deepgemm::", fn, ": x must be float32, bfloat16 or float16 (got ", rt::name(x.dtype()), ")");
  RT_USER_CHECK(x.dim() == 2, "deepgemm::", fn, ": x must be a 2-d tensor (got shape ", x.shape_string(), ")");
  for (int64_t s : x.strides())
    RT_USER_CHECK(s >= 0, "deepgemm::", fn, ": x has a negative stride; not supported");
  return Input{x.data(), x.dtype(), x.stride(0), x.stride(1)};
}

inline uint8_t to_e4m3(float v) { return tl::float8_e4m3_t::from_float(v).bits; }

// The GPU form of a cast: `items` work items (grid-stride), `per_block` of them per thread block;
// `args` after (in, rows, cols, s0, s1) as the kernel of quant_cast_source(cast) takes them.
template <class... Args>
void launch_cast(detail::QuantCast cast, const rt::Tensor& x, int64_t items, int64_t per_block, const Args&... args) {
  if (items == 0) return;
  const rt::CudaKernel kernel =
      detail::jit_kernel(detail::quant_cast_source(cast, x.dtype()), detail::kQuantCastKernel, x.device().id);
  const unsigned grid = unsigned(std::min<int64_t>(ceil_div(items, per_block), 4096));
  const void* in = x.data();
  kernel.launch_with(rt::Dim3{grid, 1, 1}, rt::Dim3{256, 1, 1}, 0, get_stream(), in, x.size(0), x.size(1), x.stride(0),
                     x.stride(1), args...);
}

// Per row, per block of `block` columns: the block's scale for a format whose largest value is
// fmax goes to scales[row * blocks + b], and store(row, k0, k1, 1 / scale) quantizes its columns.
template <class Store>
void quantize_rows(const Input& in, int64_t rows, int64_t k, int64_t block, float fmax, bool use_ue8m0, float* scales, Store store) {
  const int64_t kb = ceil_div(k, block);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t b = 0; b < kb; ++b) {
      const int64_t k0 = b * block, k1 = std::min(k, k0 + block);
      float amax = 0.0f;
      for (int64_t j = k0; j < k1; ++j) amax = std::max(amax, std::fabs(in(i, j)));
      const float s = block_scale(amax, fmax, use_ue8m0);
      scales[i * kb + b] = s;
      store(i, k0, k1, 1.0f / s);
    }
  }
}

}  // namespace

std::pair<rt::Tensor, rt::Tensor> per_token_cast_to_fp8(const rt::Tensor& x, bool use_ue8m0) {
  const Input in = check_input("per_token_cast_to_fp8", x);
  const int64_t m = x.size(0), k = x.size(1), kb = ceil_div(k, kBlock);
  rt::Tensor q = rt::Tensor::empty({m, k}, rt::DType::F8E4M3, x.device());
  rt::Tensor sf = rt::Tensor::empty({m, kb}, rt::DType::F32, x.device());
  uint8_t* qp = static_cast<uint8_t*>(q.data());
  if (x.device().is_cuda()) {
    launch_cast(detail::QuantCast::RowBlocksFp8, x, m * kb, 8, int(kBlock), 448.0f, int(use_ue8m0), qp,
                sf.data_as<float>());
    return {q, sf};
  }
  quantize_rows(in, m, k, kBlock, 448.0f, use_ue8m0, sf.data_as<float>(), [&](int64_t i, int64_t k0, int64_t k1, float inv) {
    for (int64_t j = k0; j < k1; ++j) qp[i * k + j] = to_e4m3(in(i, j) * inv);
  });
  return {q, sf};
}

std::pair<rt::Tensor, rt::Tensor> per_block_cast_to_fp8(const rt::Tensor& x, bool use_ue8m0) {
  const Input in = check_input("per_block_cast_to_fp8", x);
  const int64_t m = x.size(0), n = x.size(1), mb = ceil_div(m, kBlock), nb = ceil_div(n, kBlock);
  rt::Tensor q = rt::Tensor::empty({m, n}, rt::DType::F8E4M3, x.device());
  rt::Tensor sf = rt::Tensor::empty({mb, nb}, rt::DType::F32, x.device());
  uint8_t* qp = static_cast<uint8_t*>(q.data());
  float* sp = sf.data_as<float>();
  if (x.device().is_cuda()) {
    launch_cast(detail::QuantCast::Blocks, x, mb * nb, 1, int(use_ue8m0), qp, sp);
    return {q, sf};
  }
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < mb; ++bi) {
    for (int64_t bj = 0; bj < nb; ++bj) {
      const int64_t i0 = bi * kBlock, i1 = std::min(m, i0 + kBlock);
      const int64_t j0 = bj * kBlock, j1 = std::min(n, j0 + kBlock);
      float amax = 0.0f;
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) amax = std::max(amax, std::fabs(in(i, j)));
      const float s = block_scale(amax, 448.0f, use_ue8m0), inv = 1.0f / s;
      sp[bi * nb + bj] = s;
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) qp[i * n + j] = to_e4m3(in(i, j) * inv);
    }
  }
  return {q, sf};
}

std::pair<rt::Tensor, rt::Tensor> per_channel_cast_to_fp8(const rt::Tensor& x, bool use_ue8m0) {
  const Input in = check_input("per_channel_cast_to_fp8", x);
  const int64_t k = x.size(0), n = x.size(1), kb = ceil_div(k, kBlock);
  rt::Tensor q = rt::Tensor::empty({k, n}, rt::DType::F8E4M3, x.device());
  rt::Tensor sf = rt::Tensor::empty({kb, n}, rt::DType::F32, x.device());
  uint8_t* qp = static_cast<uint8_t*>(q.data());
  float* sp = sf.data_as<float>();
  if (x.device().is_cuda()) {
    launch_cast(detail::QuantCast::Columns, x, kb * n, 256, int(use_ue8m0), qp, sp);
    return {q, sf};
  }
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < kb; ++b) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i0 = b * kBlock, i1 = std::min(k, i0 + kBlock);
      float amax = 0.0f;
      for (int64_t i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(in(i, j)));
      const float s = block_scale(amax, 448.0f, use_ue8m0), inv = 1.0f / s;
      sp[b * n + j] = s;
      for (int64_t i = i0; i < i1; ++i) qp[i * n + j] = to_e4m3(in(i, j) * inv);
    }
  }
  return {q, sf};
}

std::pair<rt::Tensor, rt::Tensor> per_token_cast_to_fp4(const rt::Tensor& x, int64_t gran_k, bool use_ue8m0) {
  const Input in = check_input("per_token_cast_to_fp4", x);
  RT_USER_CHECK(gran_k == 32 || gran_k == 128, "deepgemm::per_token_cast_to_fp4: gran_k = ", gran_k,
                " must be 32 or 128 (the FP4 scale blocks the GEMMs read)");
  const int64_t n = x.size(0), k = x.size(1), kb = ceil_div(k, gran_k);
  RT_USER_CHECK(k % 2 == 0, "deepgemm::per_token_cast_to_fp4: K = ", k,
                " must be even (two float4_e2m1 values per byte along K)");
  rt::Tensor q = rt::Tensor::empty({n, k}, rt::DType::F4E2M1, x.device());
  rt::Tensor sf = rt::Tensor::empty({n, kb}, rt::DType::F32, x.device());
  uint8_t* qp = static_cast<uint8_t*>(q.data());
  if (x.device().is_cuda()) {
    launch_cast(detail::QuantCast::RowBlocksFp4, x, n * kb, 8, int(gran_k), 6.0f, int(use_ue8m0), qp,
                sf.data_as<float>());
    return {q, sf};
  }
  quantize_rows(in, n, k, gran_k, 6.0f, use_ue8m0, sf.data_as<float>(), [&](int64_t i, int64_t k0, int64_t k1, float inv) {
    for (int64_t j = k0; j < k1; j += 2)  // k0 and k1 are even
      qp[(i * k + j) / 2] = tl::float4_e2m1x2_t::from_float(in(i, j) * inv, in(i, j + 1) * inv).bits;
  });
  return {q, sf};
}

rt::Tensor cast_scales_to_ue8m0(const rt::Tensor& scales) {
  RT_USER_CHECK(scales.defined(), "deepgemm::cast_scales_to_ue8m0: scales is an undefined tensor");
  RT_USER_CHECK(scales.device().is_cpu(), "deepgemm::cast_scales_to_ue8m0: runs on CPU tensors only (no GPU kernel ",
                "for it yet; scales is on ", scales.device().to_string(), "); the GEMMs take float32 scales directly");
  RT_USER_CHECK(scales.dtype() == rt::DType::F32, "deepgemm::cast_scales_to_ue8m0: scales must be float32 (got ",
                rt::name(scales.dtype()), ")");
  RT_USER_CHECK(scales.is_contiguous(), "deepgemm::cast_scales_to_ue8m0: scales must be contiguous (shape ",
                scales.shape_string(), ")");
  rt::Tensor out = rt::Tensor::empty(scales.shape(), rt::DType::UE8M0);
  const float* src = scales.data_as<float>();
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (int64_t i = 0; i < scales.numel(); ++i) {
    const uint32_t u = tl::detail::float_to_bits(src[i]);
    const uint32_t exp = u >> 23;  // sign bit included: must be 0
    RT_USER_CHECK((u & 0x7fffffu) == 0 && exp >= 1 && exp <= 254, "deepgemm::cast_scales_to_ue8m0: scales[", i,
                  "] = ", src[i], " is not a positive power of two in [2^-126, 2^127] (cast with use_ue8m0 = true)");
    dst[i] = uint8_t(exp);
  }
  return out;
}

}  // namespace deepgemm
