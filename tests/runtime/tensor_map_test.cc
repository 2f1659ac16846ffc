// The encoding rules of TMA descriptors, checked without a GPU (validate_tensor_map does not touch
// the driver). Encoding itself is tested in cuda_gpu_test.cc.
#include "rt/tensor_map.h"

#include <gtest/gtest.h>

#include "rt/tensor.h"
#include "test_util.h"

namespace {

using rt::DType;
using rt::ErrorKind;
using rt::TensorMapSpec;
using rt::TmaSwizzle;
using rt_test::expect_error;

// A fake device address: validation looks at its value only.
const void* address(uintptr_t a) { return reinterpret_cast<const void*>(a); }

// The GEMM operand of the GPU test: 1024x1024 bf16, 64x64 box, 128B swizzle.
TensorMapSpec good() {
  return rt::tensor_map_spec_2d("A", DType::BF16, address(0x7f0000000000), 1024, 1024, 2048, 64, 64, TmaSwizzle::B128);
}

TEST(TensorMap, ValidSpecsPass) {
  EXPECT_NO_THROW(rt::validate_tensor_map(good()));
  TensorMapSpec s = good();
  s.swizzle = TmaSwizzle::None;
  s.box_dims = {256, 256};  // no swizzle: any 16-byte multiple up to 256 elements
  EXPECT_NO_THROW(rt::validate_tensor_map(s));
  // fp8 with a 128-element (128-byte) inner box, 3-D, element strides.
  TensorMapSpec f8;
  f8.name = "B";
  f8.dtype = DType::F8E4M3;
  f8.global_address = address(0x1000);
  f8.global_dims = {4096, 512, 8};
  f8.global_strides = {4096, 4096 * 512};
  f8.box_dims = {128, 64, 1};
  f8.element_strides = {1, 1, 1};
  f8.swizzle = TmaSwizzle::B128;
  EXPECT_NO_THROW(rt::validate_tensor_map(f8));
}

TEST(TensorMap, RankAndShapesOfTheLists) {
  TensorMapSpec s = good();
  s.global_dims = {1, 2, 3, 4, 5, 6};
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "tensor map 'A'", "rank 6 is out of range");
  s = good();
  s.global_dims.clear();
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "rank 0 is out of range");
  s = good();
  s.global_strides = {2048, 4096};
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "2 global strides for rank 2",
               "dimensions 1..rank-1");
  s = good();
  s.box_dims = {64};
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "box [64] has 1 dimensions, the tensor 2");
  s = good();
  s.element_strides = {1};
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "element strides [1]");
}

TEST(TensorMap, GlobalAddressMustBe16ByteAligned) {
  TensorMapSpec s = good();
  s.global_address = address(0x7f0000000008);
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "tensor map 'A' (bfloat16[1024, 1024])",
               "global address 0x7f0000000008 is not 16-byte aligned");
  s.global_address = nullptr;
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "null global address");
}

TEST(TensorMap, StridesMustBe16ByteMultiplesBelow2To40) {
  TensorMapSpec s = rt::tensor_map_spec_2d("C", DType::BF16, address(0x1000), 1001, 64, 2002, 64, 64, TmaSwizzle::B128);
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "tensor map 'C'",
               "stride of dimension 1 is 2002 bytes, not a multiple of 16");
  s.global_strides = {uint64_t(1) << 40};
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "below 2^40");
}

TEST(TensorMap, DimensionSizes) {
  TensorMapSpec s = good();
  s.global_dims[1] = 0;
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "dimension 1 has size 0");
  s.global_dims[1] = (uint64_t(1) << 32) + 1;
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "sizes 1 to 2^32");
}

TEST(TensorMap, BoxDimensionsAtMost256) {
  TensorMapSpec s = good();
  s.box_dims = {64, 512};
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "box dimension 1 is 512", "1 to 256 elements");
  s.box_dims = {64, 0};
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "box dimension 1 is 0");
}

TEST(TensorMap, BoxInnerExtentIs16ByteMultiple) {
  TensorMapSpec s = good();
  s.box_dims = {4, 64};  // 8 bytes
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "inner dimension is 4 x 2 = 8 bytes",
               "not a multiple of 16");
}

TEST(TensorMap, BoxInnerExtentFitsTheSwizzleSpan) {
  TensorMapSpec s = good();
  s.box_dims = {128, 64};  // 256 bytes > 128
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "tensor map 'A'",
               "inner dimension is 128 x 2 = 256 bytes, more than the 128B swizzle span", "at most 64 elements");
  s.swizzle = TmaSwizzle::B64;
  s.box_dims = {64, 64};  // 128 bytes > 64
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "more than the 64B swizzle span",
               "at most 32 elements");
  s.swizzle = TmaSwizzle::B32;
  s.box_dims = {16, 64};  // 32 bytes: fits
  EXPECT_NO_THROW(rt::validate_tensor_map(s));
  EXPECT_EQ(rt::swizzle_span_bytes(TmaSwizzle::None), 0);
  EXPECT_EQ(rt::swizzle_span_bytes(TmaSwizzle::B128), 128);
}

TEST(TensorMap, ElementStrides) {
  TensorMapSpec s = good();
  s.element_strides = {1, 9};
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "element stride of dimension 1 is 9");
}

TEST(TensorMap, PackedFp4IsRefused) {
  TensorMapSpec s = good();
  s.dtype = DType::F4E2M1;
  expect_error([&] { rt::validate_tensor_map(s); }, ErrorKind::User, "float4_e2m1", "as uint8");
}

TEST(TensorMap, SpecFromATensorReversesTheDimensions) {
  // A CUDA tensor over a fake address (never dereferenced): shape [8, 1024, 512] row-major bf16.
  rt::Tensor t =
      rt::Tensor::wrap(const_cast<void*>(address(0x10000)), {8, 1024, 512}, DType::BF16, rt::Device::cuda(0));
  const TensorMapSpec s = rt::tensor_map_spec("q", t, {1, 64, 64}, TmaSwizzle::B128);
  EXPECT_EQ(s.global_dims, (std::vector<uint64_t>{512, 1024, 8}));
  EXPECT_EQ(s.global_strides, (std::vector<uint64_t>{1024, 1024 * 1024}));
  EXPECT_EQ(s.box_dims, (std::vector<uint32_t>{64, 64, 1}));
  EXPECT_NO_THROW(rt::validate_tensor_map(s));
  expect_error(
      [&] {
        rt::tensor_map_spec("q", t, {64, 64}, TmaSwizzle::B128);
      },
      ErrorKind::User, "box [64, 64] has 2 dimensions");
  rt::Tensor host = rt::Tensor::empty({4, 4}, DType::F32);
  expect_error(
      [&] {
        rt::tensor_map_spec("h", host, {4, 4}, TmaSwizzle::None);
      },
      ErrorKind::User, "tensor map 'h': the tensor is on cpu");
  rt::Tensor transposed =
      rt::Tensor::wrap(const_cast<void*>(address(0x10000)), {64, 64}, DType::BF16, rt::Device::cuda(0), {1, 64});
  expect_error(
      [&] {
        rt::tensor_map_spec("t", transposed, {64, 64}, TmaSwizzle::None);
      },
      ErrorKind::User, "last dimension must be contiguous");
}

}  // namespace
