#include "rt/tensor_map.h"

#include <algorithm>

#include "rt/cuda_device.h"
#include "rt/error.h"
#include "rt/tensor.h"

namespace rt {
namespace {

constexpr int kMaxRank = 5;
constexpr uint64_t kMaxGlobalDim = uint64_t(1) << 32;
constexpr uint64_t kMaxGlobalStride = uint64_t(1) << 40;
constexpr uint32_t kMaxBoxDim = 256;
constexpr uint32_t kMaxElementStride = 8;
constexpr uint64_t kAlignment = 16;

// CUtensorMapDataType values.
constexpr int kTmaUint8 = 0;
constexpr int kTmaInt32 = 3;
constexpr int kTmaInt64 = 5;
constexpr int kTmaFloat16 = 6;
constexpr int kTmaFloat32 = 7;
constexpr int kTmaFloat64 = 8;
constexpr int kTmaBfloat16 = 9;

template <class T>
std::string list(const std::vector<T>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

}  // namespace

int tensor_map_data_type(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::I8:
    case DType::U8:
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::UE8M0:
      return kTmaUint8;
    case DType::I32:
      return kTmaInt32;
    case DType::I64:
      return kTmaInt64;
    case DType::F16:
      return kTmaFloat16;
    case DType::BF16:
      return kTmaBfloat16;
    case DType::F32:
      return kTmaFloat32;
    case DType::F64:
      return kTmaFloat64;
    case DType::F4E2M1:
      throw_user_error(
          "tensor maps of packed float4_e2m1 are not supported; describe the packed bytes as uint8 "
          "(inner dimension halved)");
  }
  RT_UNREACHABLE("dtype ", static_cast<int>(dtype));
}

int swizzle_span_bytes(TmaSwizzle swizzle) {
  switch (swizzle) {
    case TmaSwizzle::None:
      return 0;
    case TmaSwizzle::B32:
      return 32;
    case TmaSwizzle::B64:
      return 64;
    case TmaSwizzle::B128:
      return 128;
  }
  RT_UNREACHABLE("swizzle ", static_cast<int>(swizzle));
}

void validate_tensor_map(const TensorMapSpec& s) {
  // Named in messages only (built on failure: maps are encoded on every GEMM call).
  const auto who = [&s] { return str("tensor map '", s.name, "' (", name(s.dtype), list(s.global_dims), ")"); };
  const int rank = static_cast<int>(s.global_dims.size());
  RT_USER_CHECK(rank >= 1 && rank <= kMaxRank, who(), ": rank ", rank, " is out of range; TMA takes 1 to ", kMaxRank,
                " dimensions");
  RT_USER_CHECK(s.global_strides.size() == static_cast<size_t>(rank - 1), who(), ": ", s.global_strides.size(),
                " global strides for rank ", rank, "; give the byte strides of dimensions 1..rank-1 (", rank - 1,
                " entries)");
  RT_USER_CHECK(s.box_dims.size() == static_cast<size_t>(rank), who(), ": box ", list(s.box_dims), " has ",
                s.box_dims.size(), " dimensions, the tensor ", rank);
  RT_USER_CHECK(s.element_strides.empty() || s.element_strides.size() == static_cast<size_t>(rank), who(),
                ": element strides ", list(s.element_strides), " have ", s.element_strides.size(),
                " dimensions, the tensor ", rank);
  const int elem_bytes = bits(s.dtype) / 8;
  tensor_map_data_type(s.dtype);  // rejects packed fp4
  const auto address = reinterpret_cast<uintptr_t>(s.global_address);
  RT_USER_CHECK(address != 0, who(), ": null global address");
  RT_USER_CHECK(address % kAlignment == 0, who(), ": the global address 0x", std::hex, address, std::dec,
                " is not 16-byte aligned (TMA needs a 16-byte aligned base)");
  for (int i = 0; i < rank; ++i)
    RT_USER_CHECK(s.global_dims[i] >= 1 && s.global_dims[i] <= kMaxGlobalDim, who(), ": dimension ", i, " has size ",
                  s.global_dims[i], "; TMA takes sizes 1 to 2^32");
  for (int i = 0; i < rank - 1; ++i) {
    const uint64_t stride = s.global_strides[i];
    RT_USER_CHECK(stride % kAlignment == 0, who(), ": the stride of dimension ", i + 1, " is ", stride,
                  " bytes, not a multiple of 16 (TMA needs 16-byte multiples; pad the rows)");
    RT_USER_CHECK(stride < kMaxGlobalStride, who(), ": the stride of dimension ", i + 1, " is ", stride,
                  " bytes; TMA takes strides below 2^40");
  }
  for (int i = 0; i < rank; ++i)
    RT_USER_CHECK(s.box_dims[i] >= 1 && s.box_dims[i] <= kMaxBoxDim, who(), ": box dimension ", i, " is ", s.box_dims[i],
                  "; TMA boxes are 1 to 256 elements in each dimension");
  const uint64_t inner_bytes = uint64_t(s.box_dims[0]) * elem_bytes;
  RT_USER_CHECK(inner_bytes % kAlignment == 0, who(), ": the box's inner dimension is ", s.box_dims[0], " x ", elem_bytes,
                " = ", inner_bytes, " bytes, not a multiple of 16");
  if (const int span = swizzle_span_bytes(s.swizzle); span > 0)
    RT_USER_CHECK(inner_bytes <= static_cast<uint64_t>(span), who(), ": the box's inner dimension is ", s.box_dims[0],
                  " x ", elem_bytes, " = ", inner_bytes, " bytes, more than the ", span, "B swizzle span; use at most ",
                  span / elem_bytes, " elements or a wider swizzle");
  for (size_t i = 0; i < s.element_strides.size(); ++i)
    RT_USER_CHECK(s.element_strides[i] >= 1 && s.element_strides[i] <= kMaxElementStride, who(),
                  ": element stride of dimension ", i, " is ", s.element_strides[i], "; TMA takes 1 to 8");
}

CuTensorMap encode_tensor_map(const TensorMapSpec& s) {
  validate_tensor_map(s);
  const CudaDriver& d = cuda_driver();
  RT_USER_CHECK(d.cuTensorMapEncodeTiled != nullptr, "tensor map '", s.name, "': the CUDA driver ", d.version_string(),
                " lacks cuTensorMapEncodeTiled (TMA needs a CUDA 12 driver)");
  const int rank = static_cast<int>(s.global_dims.size());
  std::vector<uint32_t> element_strides = s.element_strides;
  if (element_strides.empty()) element_strides.assign(rank, 1);
  CuTensorMap map{};
  RT_CU_CHECK(d.cuTensorMapEncodeTiled(&map, tensor_map_data_type(s.dtype), static_cast<uint32_t>(rank),
                                       const_cast<void*>(s.global_address), s.global_dims.data(),
                                       s.global_strides.data(), s.box_dims.data(), element_strides.data(),
                                       /*interleave none*/ 0, static_cast<int>(s.swizzle),
                                       static_cast<int>(s.l2_promotion), /*OOB fill zeros*/ 0),
              "cuTensorMapEncodeTiled", "tensor map '", s.name, "' ", name(s.dtype), list(s.global_dims), " strides ",
              list(s.global_strides), " box ", list(s.box_dims), " swizzle ", swizzle_span_bytes(s.swizzle), "B");
  return map;
}

TensorMapSpec tensor_map_spec_2d(std::string name, DType dtype, const void* address, uint64_t inner, uint64_t outer,
                                 uint64_t row_stride_bytes, uint32_t box_inner, uint32_t box_outer,
                                 TmaSwizzle swizzle) {
  TensorMapSpec s;
  s.name = std::move(name);
  s.dtype = dtype;
  s.global_address = address;
  s.global_dims = {inner, outer};
  s.global_strides = {row_stride_bytes};
  s.box_dims = {box_inner, box_outer};
  s.swizzle = swizzle;
  return s;
}

TensorMapSpec tensor_map_spec(std::string name, const Tensor& tensor, const std::vector<uint32_t>& box,
                              TmaSwizzle swizzle) {
  RT_USER_CHECK(tensor.device().is_cuda(), "tensor map '", name, "': the tensor is on ", tensor.device().to_string(),
                "; TMA reads GPU memory");
  const int64_t rank = tensor.dim();
  RT_USER_CHECK(rank >= 1, "tensor map '", name, "': a 0-d tensor has no tensor map");
  RT_USER_CHECK(box.size() == static_cast<size_t>(rank), "tensor map '", name, "': box ", list(box), " has ",
                box.size(), " dimensions, the tensor ", tensor.shape_string(), " ", rank);
  RT_USER_CHECK(tensor.stride(-1) == 1 || tensor.size(-1) == 1, "tensor map '", name,
                "': the last dimension must be contiguous (stride 1), not ", tensor.stride(-1));
  const int elem_bytes = std::max(1, bits(tensor.dtype()) / 8);
  TensorMapSpec s;
  s.name = std::move(name);
  s.dtype = tensor.dtype();
  s.global_address = tensor.data();
  for (int64_t i = rank; i-- > 0;) {
    s.global_dims.push_back(static_cast<uint64_t>(tensor.size(i)));
    s.box_dims.push_back(box[i]);
    if (i < rank - 1) s.global_strides.push_back(static_cast<uint64_t>(tensor.stride(i)) * elem_bytes);
  }
  s.swizzle = swizzle;
  return s;
}

}  // namespace rt
