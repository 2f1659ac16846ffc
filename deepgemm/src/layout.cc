// Scale layouts and alignment helpers of deepgemm/quant.h.
#include <cstdint>
#include <cstring>

#include "deepgemm/quant.h"
#include "rt/error.h"

namespace deepgemm {

int64_t get_mk_alignment_for_contiguous_layout() { return 128; }

int64_t get_tma_aligned_size(int64_t x, int64_t element_size) {
  RT_USER_CHECK(element_size > 0 && 16 % element_size == 0, "deepgemm::get_tma_aligned_size: element_size ",
                element_size, " must divide 16");
  RT_USER_CHECK(x >= 0, "deepgemm::get_tma_aligned_size: negative size ", x);
  const int64_t align = 16 / element_size;
  RT_USER_CHECK(x <= INT64_MAX / align * align, "deepgemm::get_tma_aligned_size: ", x,
                " rounded up to a multiple of ", align, " does not fit in int64");
  return (x + align - 1) / align * align;
}

rt::Tensor get_mn_major_tma_aligned_tensor(const rt::Tensor& scales) {
  const char* fn = "deepgemm::get_mn_major_tma_aligned_tensor";
  RT_USER_CHECK(scales.defined(), fn, ": scales is an undefined tensor");
  RT_USER_CHECK(scales.device().is_cpu(), fn, ": runs on CPU tensors only (scales is on ", scales.device().to_string(),
                "); the GPU GEMMs take scales in any layout and make this form themselves");
  RT_USER_CHECK(scales.dtype() == rt::DType::F32 || scales.dtype() == rt::DType::UE8M0, fn,
                ": scales must be float32 or ue8m0 (got ", rt::name(scales.dtype()), ")");
  RT_USER_CHECK(scales.dim() == 2 || scales.dim() == 3, fn, ": scales must be [MN, K/128] or [G, MN, K/128] (got ",
                scales.shape_string(), ")");
  for (int64_t s : scales.strides()) RT_USER_CHECK(s >= 0, fn, ": scales has a negative stride; not supported");
  const bool grouped = scales.dim() == 3;
  const int64_t g = grouped ? scales.size(0) : 1, mn = scales.size(-2), kb = scales.size(-1);
  const int64_t esize = rt::bits(scales.dtype()) / 8;
  const int64_t ld = get_tma_aligned_size(mn, esize);
  rt::Tensor flat = rt::Tensor::empty({g * kb * ld}, scales.dtype());
  flat.zero_();
  const char* src = static_cast<const char*>(scales.data());
  char* dst = static_cast<char*>(flat.data());
  const int64_t sg = grouped ? scales.stride(0) : 0, sm = scales.stride(-2), sk = scales.stride(-1);
  for (int64_t gi = 0; gi < g; ++gi)
    for (int64_t j = 0; j < kb; ++j)
      for (int64_t i = 0; i < mn; ++i)
        std::memcpy(dst + ((gi * kb + j) * ld + i) * esize, src + (gi * sg + i * sm + j * sk) * esize, size_t(esize));
  rt::Shape shape = scales.shape();
  rt::Shape strides = grouped ? rt::Shape{kb * ld, 1, ld} : rt::Shape{1, ld};
  return rt::Tensor::wrap(flat.data(), shape, scales.dtype(), rt::Device::cpu(), strides, flat.storage());
}

}  // namespace deepgemm
