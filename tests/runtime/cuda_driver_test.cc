// The CUDA driver loader, devices and CUDA memory on a machine with or without a GPU. Without a
// driver (CI) every entry point must fail with the one clear user error; with one (the lent H200)
// the same tests check that the driver works. GPU-only behaviour is in cuda_gpu_test.cc.
#include "rt/cuda_driver.h"

#include <gtest/gtest.h>

#include "rt/cuda_device.h"
#include "rt/cuda_module.h"
#include "rt/cuda_stream.h"
#include "rt/device.h"
#include "rt/tensor.h"
#include "test_util.h"

namespace {

using rt::Device;
using rt::DType;
using rt::ErrorKind;
using rt::Tensor;
using rt_test::expect_error;

constexpr const char* kNoDriver =
    "CUDA driver (libcuda.so.1) not found: no NVIDIA driver on this machine; use --target cpu";

TEST(CudaDriver, AvailabilityNeverThrowsAndAgreesWithTheLoader) {
  const bool available = rt::cuda_driver_available();
  EXPECT_EQ(available, rt::cuda_driver_available());  // cached, stable
  EXPECT_EQ(available, rt::cuda_driver_error().empty()) << rt::cuda_driver_error();
  if (available) {
    const rt::CudaDriver& d = rt::cuda_driver();
    EXPECT_GE(d.version, 12000) << d.version_string();
    EXPECT_FALSE(d.library_path.empty());
    EXPECT_NE(d.cuMemAlloc, nullptr);
    EXPECT_NE(d.cuLaunchKernelEx, nullptr);
    EXPECT_NE(d.cuTensorMapEncodeTiled, nullptr);
  }
}

TEST(CudaDriver, MissingDriverIsAClearUserError) {
  if (rt::cuda_driver_available()) GTEST_SKIP() << "a CUDA driver is present";
  const std::string why = rt::cuda_driver_error();
  // On a machine without libcuda.so.1 (CI); a machine with a driver but no GPU fails in cuInit.
  if (why.find("libcuda.so.1) not found") == std::string::npos) GTEST_SKIP() << "driver present but unusable: " << why;
  EXPECT_EQ(why.rfind(kNoDriver, 0), 0u) << why;
  expect_error([] { rt::cuda_driver(); }, ErrorKind::User, kNoDriver);
  // Every entry point that needs the driver reports the same error.
  EXPECT_EQ(rt::cuda_device_count(), 0);
  EXPECT_EQ(rt::cuda_unavailable_reason(), why);
  expect_error([] { rt::cuda_device(0); }, ErrorKind::User, kNoDriver);
  expect_error([] { rt::cuda_context(0); }, ErrorKind::User, kNoDriver);
  expect_error([] { Tensor::empty({4, 4}, DType::F32, Device::cuda(0)); }, ErrorKind::User, kNoDriver);
  expect_error([] { rt::CudaStream stream; }, ErrorKind::User, kNoDriver);
  expect_error([] { rt::CudaEvent event; }, ErrorKind::User, kNoDriver);
  expect_error([] { rt::CudaModule module("not an image", "m"); }, ErrorKind::User, kNoDriver);
  Tensor host = Tensor::empty({8}, DType::F32);
  expect_error([&] { host.to(Device::cuda(0)); }, ErrorKind::User, kNoDriver);
  // The CPU stays usable and is all there is.
  EXPECT_EQ(rt::available_devices(), std::vector<Device>{Device::cpu()});
}

TEST(CudaDriver, ErrorsNameTheCallAndAreClassified) {
  // Out of memory: the user can act (smaller shapes).
  expect_error([] { rt::throw_cuda_error(rt::cu::kErrorOutOfMemory, "cuMemAlloc", "1024 bytes", "f.cc", 1); },
               ErrorKind::User, "CUDA error in cuMemAlloc (1024 bytes): ", "out of memory");
  expect_error([] { rt::throw_cuda_error(rt::cu::kErrorNoDevice, "cuInit", "", "f.cc", 1); }, ErrorKind::User,
               "CUDA error in cuInit: ", "CUDA_VISIBLE_DEVICES");
  expect_error([] { rt::throw_cuda_error(rt::cu::kErrorUnsupportedPtxVersion, "cuModuleLoadData", "m", "f.cc", 1); },
               ErrorKind::User, "update the NVIDIA driver");
  // A kernel fault is ours to fix, names the last kernel launched and says the context is lost.
  rt::note_cuda_launch("gemm_128x128");
  EXPECT_EQ(rt::last_cuda_launch(), "gemm_128x128");
  expect_error([] { rt::throw_cuda_error(rt::cu::kErrorIllegalAddress, "cuStreamSynchronize", "", "file.cc", 42); },
               ErrorKind::Internal, "internal error at file.cc:42", "CUDA error in cuStreamSynchronize",
               "'gemm_128x128'", "restart the process", "TL_CUDA_SYNC=1");
  EXPECT_TRUE(rt::cuda_error_is_sticky(rt::cu::kErrorLaunchFailed));
  EXPECT_TRUE(rt::cuda_error_is_sticky(rt::cu::kErrorMisalignedAddress));
  EXPECT_FALSE(rt::cuda_error_is_sticky(rt::cu::kErrorOutOfMemory));
  EXPECT_FALSE(rt::cuda_error_is_sticky(rt::cu::kErrorInvalidValue));
  // Other failures are internal errors.
  expect_error([] { rt::throw_cuda_error(rt::cu::kErrorInvalidValue, "cuLaunchKernel", "kernel 'k'", "x.cc", 7); },
               ErrorKind::Internal, "CUDA error in cuLaunchKernel (kernel 'k')");
  // The driver's names when it is loaded; the number otherwise.
  const std::string text = rt::cuda_error_text(rt::cu::kErrorOutOfMemory);
  if (rt::cuda_driver_available())
    EXPECT_NE(text.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << text;
  else
    EXPECT_EQ(text, "CUresult 2");
}

TEST(CudaDriver, CheckMacroBuildsTheContextOnlyOnFailure) {
  int built = 0;
  auto context = [&] {
    ++built;
    return std::string("ctx");
  };
  RT_CU_CHECK(rt::cu::kSuccess, "cuNothing", context());
  EXPECT_EQ(built, 0);
  expect_error([&] { RT_CU_CHECK(rt::cu::kErrorInvalidValue, "cuSomething", context(), " #", 3); }, ErrorKind::Internal,
               "CUDA error in cuSomething (ctx #3)");
  EXPECT_EQ(built, 1);
  expect_error([&] { RT_CU_CHECK(rt::cu::kErrorInvalidValue, "cuBare"); }, ErrorKind::Internal,
               "CUDA error in cuBare: ");
}

TEST(CudaDevice, ArchNames) {
  EXPECT_EQ(rt::cuda_arch_name(9, 0), "sm_90a");  // always the arch-specific variant on Hopper
  EXPECT_EQ(rt::cuda_arch_name(8, 0), "sm_80");
  EXPECT_EQ(rt::cuda_arch_name(8, 6), "sm_86");
  EXPECT_EQ(rt::cuda_arch_name(8, 9), "sm_89");
  EXPECT_EQ(rt::cuda_arch_name(10, 0), "sm_100");
  rt::CudaDeviceInfo info;
  info.sm_major = 9;
  EXPECT_EQ(info.arch_name(), "sm_90a");
}

TEST(CudaDevice, CountAndOrdinals) {
  const int n = rt::cuda_device_count();
  EXPECT_EQ(n == 0, !rt::cuda_unavailable_reason().empty());
  EXPECT_EQ(rt::available_devices().size(), static_cast<size_t>(n) + 1);
  if (n == 0) GTEST_SKIP() << rt::cuda_unavailable_reason();
  expect_error([&] { rt::cuda_device(n); }, ErrorKind::User, "cuda:" + std::to_string(n) + " does not exist");
  expect_error([] { rt::cuda_context(-1); }, ErrorKind::User, "cuda:-1 does not exist");
}

TEST(CudaLaunchAbi, Dim3Text) { EXPECT_EQ((rt::Dim3{4, 2, 1}).to_string(), "(4, 2, 1)"); }

TEST(TensorTo, SameDeviceIsTheTensorItself) {
  Tensor t = Tensor::empty({3, 4}, DType::F32);
  Tensor same = t.to(Device::cpu());
  EXPECT_EQ(same.data(), t.data());
  EXPECT_EQ(same.storage(), t.storage());
}

TEST(TensorTo, StridedViewsAreRefusedBeforeAnyCopy) {
  std::vector<float> buffer(6);
  Tensor transposed = Tensor::wrap(buffer.data(), {3, 2}, DType::F32, Device::cpu(), {1, 3});
  expect_error([&] { transposed.to(Device::cuda(0)); }, ErrorKind::User, "Tensor::to(cuda:0)", "float32[3, 2]",
               "strides [1, 3]", "not contiguous");
}

TEST(TensorZero, HostTensors) {
  Tensor t = Tensor::empty({5, 7}, DType::I32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<int32_t>()[i] = 0x5a5a5a5a;
  t.zero_();
  for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.data_as<int32_t>()[i], 0) << i;
  Tensor f4 = Tensor::empty({3}, DType::F4E2M1);  // 2 bytes
  f4.data_as<uint8_t>()[0] = f4.data_as<uint8_t>()[1] = 0xff;
  f4.zero_();
  EXPECT_EQ(f4.data_as<uint8_t>()[1], 0);
  std::vector<float> buffer(6, 1.0f);
  Tensor strided = Tensor::wrap(buffer.data(), {3, 2}, DType::F32, Device::cpu(), {1, 3});
  expect_error([&] { strided.zero_(); }, ErrorKind::User, "Tensor::zero_", "not contiguous");
}

}  // namespace
