#include "rt/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>

#include "rt/cuda_driver.h"
#include "test_util.h"

namespace {

using rt::Device;
using rt::DType;
using rt::ErrorKind;
using rt::Tensor;
using rt_test::expect_error;

TEST(Device, Names) {
  EXPECT_EQ(Device::cpu().to_string(), "cpu");
  EXPECT_EQ(Device::cuda(0).to_string(), "cuda:0");
  EXPECT_EQ(Device::cuda(3).to_string(), "cuda:3");
  EXPECT_NE(Device::cpu(), Device::cuda(0));
  EXPECT_NE(Device::cuda(0), Device::cuda(1));
}

TEST(Tensor, EmptyIsContiguousAndAligned) {
  Tensor t = Tensor::empty({64, 32}, DType::F32);
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), (rt::Shape{64, 32}));
  EXPECT_EQ(t.strides(), (rt::Shape{32, 1}));
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(0), 64);
  EXPECT_EQ(t.size(-1), 32);
  EXPECT_EQ(t.stride(0), 32);
  EXPECT_EQ(t.numel(), 2048);
  EXPECT_EQ(t.nbytes(), 8192);
  EXPECT_EQ(t.element_size_bits(), 32);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.shape_string(), "[64, 32]");
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  // The memory is writable over its whole extent.
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  EXPECT_EQ(p[2047], 2047.0f);
}

TEST(Tensor, ScalarAndEmptyShapes) {
  Tensor scalar = Tensor::empty({}, DType::F64);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.nbytes(), 8);
  EXPECT_EQ(scalar.shape_string(), "[]");
  EXPECT_TRUE(scalar.is_contiguous());
  Tensor none = Tensor::empty({4, 0, 3}, DType::I32);
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.nbytes(), 0);
  EXPECT_TRUE(none.is_contiguous());
  EXPECT_NE(none.data(), nullptr);
}

TEST(Tensor, NbytesPerDtype) {
  EXPECT_EQ(Tensor::empty({3, 5}, DType::F16).nbytes(), 30);
  EXPECT_EQ(Tensor::empty({3, 5}, DType::BF16).nbytes(), 30);
  EXPECT_EQ(Tensor::empty({3, 5}, DType::F8E4M3).nbytes(), 15);
  EXPECT_EQ(Tensor::empty({3, 5}, DType::I64).nbytes(), 120);
  // F4E2M1 packs two elements a byte; an odd count rounds up.
  Tensor f4 = Tensor::empty({3, 5}, DType::F4E2M1);
  EXPECT_EQ(f4.element_size_bits(), 4);
  EXPECT_EQ(f4.numel(), 15);
  EXPECT_EQ(f4.nbytes(), 8);
  EXPECT_EQ(Tensor::empty({128, 64}, DType::F4E2M1).nbytes(), 4096);
}

TEST(Tensor, StridedViewsAreNotContiguous) {
  std::vector<float> buffer(6);
  // A transposed view of a 2x3 row-major matrix: shape [3, 2], strides [1, 3].
  Tensor t = Tensor::wrap(buffer.data(), {3, 2}, DType::F32, Device::cpu(), {1, 3});
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (rt::Shape{1, 3}));
  EXPECT_EQ(t.nbytes(), 24);
  // Every other column: shape [2, 2], strides [3, 2].
  EXPECT_FALSE(Tensor::wrap(buffer.data(), {2, 2}, DType::F32, Device::cpu(), {3, 2}).is_contiguous());
  // The stride of a size-1 dimension does not matter.
  EXPECT_TRUE(Tensor::wrap(buffer.data(), {1, 6}, DType::F32, Device::cpu(), {100, 1}).is_contiguous());
  EXPECT_TRUE(Tensor::wrap(buffer.data(), {2, 1, 3}, DType::F32, Device::cpu(), {3, 7, 1}).is_contiguous());
  // Empty strides mean row-major.
  Tensor c = Tensor::wrap(buffer.data(), {2, 3}, DType::F32, Device::cpu());
  EXPECT_EQ(c.strides(), (rt::Shape{3, 1}));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.data(), buffer.data());
}

TEST(Tensor, WrapKeepsItsOwnerAlive) {
  int released = 0;
  std::vector<float> buffer(8);
  {
    std::shared_ptr<void> owner(buffer.data(), [&](void*) { ++released; });
    Tensor t = Tensor::wrap(buffer.data(), {8}, DType::F32, Device::cpu(), {}, owner);
    owner.reset();
    Tensor copy = t;
    t = Tensor();
    EXPECT_EQ(released, 0);
    EXPECT_EQ(copy.data(), buffer.data());
  }
  EXPECT_EQ(released, 1);
}

TEST(Tensor, UserErrors) {
  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  expect_error([&] { undefined.dim(); }, ErrorKind::User, "undefined tensor");
  expect_error([&] { undefined.to_dlpack(); }, ErrorKind::User, "to_dlpack", "undefined");
  expect_error(
      [] {
        Tensor::empty({2, -1}, DType::F32);
      },
      ErrorKind::User, "Tensor::empty", "negative dimension", "[2, -1]");
  expect_error([] { Tensor::empty({1 << 30, 1 << 30, 1 << 30}, DType::F32); }, ErrorKind::User, "Tensor::empty");
  Tensor t = Tensor::empty({4, 8}, DType::F32);
  expect_error([&] { t.size(2); }, ErrorKind::User, "dimension 2 is out of range", "[4, 8]");
  expect_error([&] { t.size(-3); }, ErrorKind::User, "dimension -3");
  expect_error([&] { t.data_as<double>(); }, ErrorKind::User, "data_as", "float32", "32 bits, not 64");
  float x = 0;
  expect_error(
      [&] {
        Tensor::wrap(&x, {4, 8}, DType::F32, Device::cpu(), {1});
      },
      ErrorKind::User, "1 strides", "[4, 8]");
  expect_error([] { Tensor::wrap(nullptr, {4}, DType::F32, Device::cpu()); }, ErrorKind::User, "null data");
  EXPECT_TRUE(Tensor::wrap(nullptr, {0}, DType::F32, Device::cpu()).defined());
  // Packed F4 is reached through its bytes.
  EXPECT_NE(Tensor::empty({2, 4}, DType::F4E2M1).data_as<uint8_t>(), nullptr);
}

TEST(Tensor, CudaAllocationNeedsTheDriver) {
  // With a driver, CUDA allocation is tested in cuda_gpu_test.cc.
  if (!rt::cuda_driver_available())
    expect_error([] { Tensor::empty({4}, DType::F16, Device::cuda(0)); }, ErrorKind::User, "Tensor::empty on cuda:0: ",
                 rt::cuda_driver_error());
  // Wrapping device memory works without a GPU: the pointer is never dereferenced.
  auto fake_device_pointer = reinterpret_cast<void*>(uintptr_t{0x7f0000000000});
  Tensor t = Tensor::wrap(fake_device_pointer, {16}, DType::F16, Device::cuda(1));
  EXPECT_EQ(t.device(), Device::cuda(1));
}

// A DLManagedTensor as a foreign framework would hand it over, counting deleter calls.
struct Foreign {
  std::vector<float> data;
  int64_t shape[2];
  int64_t strides[2];
  int* deletes;
  rt::DLManagedTensor managed;
};

rt::DLManagedTensor* make_foreign(int* deletes, rt::DLDataType dtype = {rt::kDLFloat, 32, 1}) {
  auto* f = new Foreign{std::vector<float>(2 + 3 * 4), {3, 4}, {4, 1}, deletes, {}};
  std::iota(f->data.begin(), f->data.end(), 100.0f);
  rt::DLTensor& t = f->managed.dl_tensor;
  t.data = f->data.data();
  t.device = {rt::kDLCPU, 0};
  t.ndim = 2;
  t.dtype = dtype;
  t.shape = f->shape;
  t.strides = f->strides;
  t.byte_offset = 2 * sizeof(float);  // the first element is data[2]
  f->managed.manager_ctx = f;
  f->managed.deleter = [](rt::DLManagedTensor* self) {
    auto* owner = static_cast<Foreign*>(self->manager_ctx);
    ++*owner->deletes;
    delete owner;
  };
  return &f->managed;
}

TEST(DLPack, ImportFoldsByteOffsetAndDeletesOnce) {
  int deletes = 0;
  {
    Tensor t = Tensor::from_dlpack(make_foreign(&deletes));
    EXPECT_EQ(t.shape(), (rt::Shape{3, 4}));
    EXPECT_EQ(t.strides(), (rt::Shape{4, 1}));
    EXPECT_EQ(t.dtype(), DType::F32);
    EXPECT_EQ(t.device(), Device::cpu());
    EXPECT_EQ(t.data_as<float>()[0], 102.0f);  // byte_offset folded in
    EXPECT_EQ(t.data_as<float>()[11], 113.0f);
    Tensor copy = t;
    t = Tensor();
    EXPECT_EQ(deletes, 0);
    // Re-export and re-import: still one owner chain, one delete at the end.
    rt::DLManagedTensor* exported = copy.to_dlpack();
    Tensor again = Tensor::from_dlpack(exported);
    copy = Tensor();
    EXPECT_EQ(deletes, 0);
    EXPECT_EQ(again.data_as<float>()[5], 107.0f);
  }
  EXPECT_EQ(deletes, 1);
}

TEST(DLPack, ExportSharesDataAndOutlivesTheTensor) {
  int released = 0;
  std::vector<int32_t> buffer(24);
  std::iota(buffer.begin(), buffer.end(), 7);
  rt::DLManagedTensor* m = nullptr;
  {
    std::shared_ptr<void> owner(buffer.data(), [&](void*) { ++released; });
    // A strided view [4, 3] over a [3, 8] buffer: strides are exported as they are.
    Tensor t = Tensor::wrap(buffer.data() + 1, {4, 3}, DType::I32, Device::cpu(), {1, 8}, owner);
    m = t.to_dlpack();
  }
  EXPECT_EQ(released, 0);  // the DLManagedTensor holds the storage
  const rt::DLTensor& d = m->dl_tensor;
  EXPECT_EQ(d.data, buffer.data() + 1);
  EXPECT_EQ(d.byte_offset, 0u);
  EXPECT_EQ(d.device.device_type, rt::kDLCPU);
  EXPECT_EQ(d.ndim, 2);
  EXPECT_EQ(d.shape[0], 4);
  EXPECT_EQ(d.shape[1], 3);
  EXPECT_EQ(d.strides[0], 1);
  EXPECT_EQ(d.strides[1], 8);
  EXPECT_EQ(d.dtype.code, rt::kDLInt);
  EXPECT_EQ(d.dtype.bits, 32);
  EXPECT_EQ(d.dtype.lanes, 1);
  {
    Tensor back = Tensor::from_dlpack(m);
    EXPECT_EQ(back.data(), buffer.data() + 1);
    EXPECT_FALSE(back.is_contiguous());
    EXPECT_EQ(back.data_as<int32_t>()[back.stride(1)], 16);  // element [0, 1] = buffer[9]
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
}

TEST(DLPack, DtypeCodesFollowTheSpec) {
  auto code_of = [](DType dtype) {
    rt::DLManagedTensor* m = Tensor::empty({2}, dtype).to_dlpack();
    const rt::DLDataType t = m->dl_tensor.dtype;
    m->deleter(m);
    return std::pair{int(t.code), int(t.bits)};
  };
  EXPECT_EQ(code_of(DType::F16), (std::pair{2, 16}));
  EXPECT_EQ(code_of(DType::BF16), (std::pair{4, 16}));
  EXPECT_EQ(code_of(DType::Bool), (std::pair{6, 8}));
  EXPECT_EQ(code_of(DType::U8), (std::pair{1, 8}));
  EXPECT_EQ(code_of(DType::F8E4M3), (std::pair{10, 8}));
  EXPECT_EQ(code_of(DType::F8E5M2), (std::pair{12, 8}));
  EXPECT_EQ(code_of(DType::UE8M0), (std::pair{14, 8}));  // kDLFloat8_e8m0fnu
  EXPECT_EQ(code_of(DType::F4E2M1), (std::pair{17, 4}));
  for (DType dtype : {DType::Bool, DType::I8, DType::U8, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32,
                      DType::F64, DType::F8E4M3, DType::F8E5M2, DType::F4E2M1, DType::UE8M0}) {
    rt::DLManagedTensor* m = Tensor::empty({3}, dtype).to_dlpack();
    EXPECT_EQ(Tensor::from_dlpack(m).dtype(), dtype) << rt::name(dtype);
  }
}

TEST(DLPack, RejectsWhatItCannotRepresentAndStillDeletes) {
  int deletes = 0;
  expect_error(
      [&] {
        Tensor::from_dlpack(make_foreign(&deletes, {rt::kDLFloat, 32, 4}));
      },
      ErrorKind::User, "from_dlpack", "lanes = 4");
  EXPECT_EQ(deletes, 1);
  expect_error(
      [&] {
        Tensor::from_dlpack(make_foreign(&deletes, {rt::kDLComplex, 64, 1}));
      },
      ErrorKind::User, "unsupported DLPack dtype (code 5, bits 64)");
  EXPECT_EQ(deletes, 2);
  expect_error(
      [&] {
        Tensor::from_dlpack(make_foreign(&deletes, {rt::kDLInt, 16, 1}));
      },
      ErrorKind::User, "code 0, bits 16");
  EXPECT_EQ(deletes, 3);
  rt::DLManagedTensor* rocm = make_foreign(&deletes);
  rocm->dl_tensor.device = {rt::kDLROCM, 0};
  expect_error([&] { Tensor::from_dlpack(rocm); }, ErrorKind::User, "device type 10 (ROCm)");
  EXPECT_EQ(deletes, 4);
  expect_error([] { Tensor::from_dlpack(nullptr); }, ErrorKind::User, "null DLManagedTensor");
}

TEST(DLPack, NullStridesMeanRowMajorAndCudaMapsToDevice) {
  int deletes = 0;
  rt::DLManagedTensor* m = make_foreign(&deletes);
  m->dl_tensor.strides = nullptr;
  m->dl_tensor.device = {rt::kDLCUDA, 2};
  Tensor t = Tensor::from_dlpack(m);
  EXPECT_EQ(t.strides(), (rt::Shape{4, 1}));
  EXPECT_EQ(t.device(), Device::cuda(2));
  rt::DLManagedTensor* out = t.to_dlpack();
  EXPECT_EQ(out->dl_tensor.device.device_type, rt::kDLCUDA);
  EXPECT_EQ(out->dl_tensor.device.device_id, 2);
  out->deleter(out);
}

}  // namespace

// Large host blocks come back from a cache when freed: the next tensor of about the same size reuses
// the block (no fresh pages to fault in), one twice as large does not take a small block, and a
// block held by a live tensor is never handed out twice.
TEST(Tensor, LargeHostBlocksAreReused) {
  const int64_t n = 8 << 20;  // 32 MiB of float32
  void* first = nullptr;
  {
    rt::Tensor t = rt::Tensor::empty({n}, rt::DType::F32);
    first = t.data();
    static_cast<float*>(t.data())[n - 1] = 1.0f;
  }
  rt::Tensor again = rt::Tensor::empty({n - 1000}, rt::DType::F32);
  EXPECT_EQ(again.data(), first) << "a freed 32 MiB block was not reused for 32 MiB - 4000 bytes";
  rt::Tensor other = rt::Tensor::empty({n}, rt::DType::F32);
  EXPECT_NE(other.data(), first) << "a block in use was handed out again";
  rt::Tensor big = rt::Tensor::empty({4 * n}, rt::DType::F32);
  EXPECT_NE(big.data(), first);
  // Every element of a reused block is writable and readable through the new tensor.
  float* p = static_cast<float*>(again.data());
  for (int64_t i = 0; i < again.numel(); i += 4096) p[i] = float(i);
  for (int64_t i = 0; i < again.numel(); i += 4096) ASSERT_EQ(p[i], float(i));
}
