// TMA descriptors (CUtensorMap) for the bulk tensor copy engine of sm_90+: a thin wrapper around
// cuTensorMapEncodeTiled that checks the encoding rules first and names the tensor and the rule
// broken, as a user error (shapes and alignment come from the user's tensors).
//
// Dimensions are listed innermost (contiguous) first, as the driver and the PTX instructions take
// them; tensor_map_spec() converts from a row-major rt::Tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rt/cuda_driver.h"
#include "rt/dtype.h"

namespace rt {

class Tensor;

// CUtensorMapSwizzle: the shared-memory swizzle of the box; the value is the driver's.
enum class TmaSwizzle : int { None = 0, B32 = 1, B64 = 2, B128 = 3 };
// CUtensorMapL2promotion.
enum class TmaL2Promotion : int { None = 0, B64 = 1, B128 = 2, B256 = 3 };

struct TensorMapSpec {
  std::string name;  // the tensor, for errors ("A", "q")
  DType dtype = DType::F32;
  const void* global_address = nullptr;   // device memory
  std::vector<uint64_t> global_dims;      // elements per dimension, innermost first; rank = size (1..5)
  std::vector<uint64_t> global_strides;   // bytes between consecutive indices of dimensions 1..rank-1
                                          // (rank-1 entries: dimension 0 is contiguous)
  std::vector<uint32_t> box_dims;         // elements per dimension of the box one copy moves
  std::vector<uint32_t> element_strides;  // empty: every dimension 1
  TmaSwizzle swizzle = TmaSwizzle::None;
  TmaL2Promotion l2_promotion = TmaL2Promotion::B256;
  // Interleave is always none and out-of-bounds elements are filled with zeros.
};

// A 2-D map over a row-major matrix: `inner` contiguous elements per row, `outer` rows
// `row_stride_bytes` apart, a box of box_outer rows of box_inner elements.
TensorMapSpec tensor_map_spec_2d(std::string name, DType dtype, const void* address, uint64_t inner, uint64_t outer,
                                 uint64_t row_stride_bytes, uint32_t box_inner, uint32_t box_outer, TmaSwizzle swizzle);
// A map over a CUDA tensor whose last dimension is contiguous; `box` lists the box in the tensor's
// own (outermost-first) order.
TensorMapSpec tensor_map_spec(std::string name, const Tensor& tensor, const std::vector<uint32_t>& box,
                              TmaSwizzle swizzle);

// The CUtensorMapDataType of `dtype` (8-bit formats travel as UINT8); a user error for packed fp4.
int tensor_map_data_type(DType dtype);
// Bytes of the swizzle pattern's span (0 for none).
int swizzle_span_bytes(TmaSwizzle swizzle);

// Checks the rules of cuTensorMapEncodeTiled without the driver; a user error "tensor map '<name>':
// ..." for the first one broken: rank 1..5; address 16-byte aligned; dims 1..2^32; strides multiples
// of 16 bytes below 2^40; box dims 1..256; box inner extent a multiple of 16 bytes; with a swizzle,
// box inner extent at most the swizzle span; element strides 1..8.
void validate_tensor_map(const TensorMapSpec& spec);
// validate_tensor_map, then cuTensorMapEncodeTiled.
CuTensorMap encode_tensor_map(const TensorMapSpec& spec);

}  // namespace rt
