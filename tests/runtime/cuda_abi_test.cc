// Our declarations of the driver API's types and constants (rt/cuda_driver.h) against the
// toolkit's cuda.h, where a toolkit is installed. Only this test includes cuda.h, after ours (its
// macros rename API functions, so nothing of ours is used by name after it).
#include <gtest/gtest.h>

#include <cstddef>

#include "rt/cuda_driver.h"
#include "rt/tensor_map.h"

#if __has_include("/usr/local/cuda/include/cuda.h")
#include "/usr/local/cuda/include/cuda.h"
#define TL_HAVE_CUDA_H 1
#endif

namespace {

#ifdef TL_HAVE_CUDA_H
static_assert(sizeof(CUresult) == sizeof(rt::CuResult) && sizeof(CUdevice) == sizeof(rt::CuDevice));
static_assert(sizeof(CUdeviceptr) == sizeof(rt::CuDevicePtr) && sizeof(CUcontext) == sizeof(rt::CuContext));
// The API reference requires 64-byte alignment of a tensor map; CUDA 13's cuda.h declares 128 (12.x
// declared 64). Ours stays 64, the layout device code declares for __grid_constant__ parameters.
static_assert(sizeof(CUtensorMap) == sizeof(rt::CuTensorMap) && alignof(rt::CuTensorMap) == 64);
static_assert(sizeof(CUlaunchAttribute) == sizeof(rt::CuLaunchAttribute) &&
              offsetof(CUlaunchAttribute, value) == offsetof(rt::CuLaunchAttribute, value));
static_assert(sizeof(CUlaunchConfig) == sizeof(rt::CuLaunchConfig) &&
              offsetof(CUlaunchConfig, hStream) == offsetof(rt::CuLaunchConfig, stream) &&
              offsetof(CUlaunchConfig, attrs) == offsetof(rt::CuLaunchConfig, attrs) &&
              offsetof(CUlaunchConfig, numAttrs) == offsetof(rt::CuLaunchConfig, num_attrs) &&
              offsetof(CUlaunchConfig, sharedMemBytes) == offsetof(rt::CuLaunchConfig, shared_mem_bytes));

#define TL_SAME(ours, theirs) static_assert(static_cast<int>(ours) == static_cast<int>(theirs), #ours " != " #theirs)
TL_SAME(rt::cu::kErrorOutOfMemory, CUDA_ERROR_OUT_OF_MEMORY);
TL_SAME(rt::cu::kErrorStubLibrary, CUDA_ERROR_STUB_LIBRARY);
TL_SAME(rt::cu::kErrorCallRequiresNewerDriver, CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER);
TL_SAME(rt::cu::kErrorDeviceUnavailable, CUDA_ERROR_DEVICE_UNAVAILABLE);
TL_SAME(rt::cu::kErrorNoDevice, CUDA_ERROR_NO_DEVICE);
TL_SAME(rt::cu::kErrorInvalidDevice, CUDA_ERROR_INVALID_DEVICE);
TL_SAME(rt::cu::kErrorInvalidContext, CUDA_ERROR_INVALID_CONTEXT);
TL_SAME(rt::cu::kErrorNoBinaryForGpu, CUDA_ERROR_NO_BINARY_FOR_GPU);
TL_SAME(rt::cu::kErrorInvalidPtx, CUDA_ERROR_INVALID_PTX);
TL_SAME(rt::cu::kErrorUnsupportedPtxVersion, CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
TL_SAME(rt::cu::kErrorNotFound, CUDA_ERROR_NOT_FOUND);
TL_SAME(rt::cu::kErrorIllegalAddress, CUDA_ERROR_ILLEGAL_ADDRESS);
TL_SAME(rt::cu::kErrorLaunchOutOfResources, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
TL_SAME(rt::cu::kErrorLaunchFailed, CUDA_ERROR_LAUNCH_FAILED);
TL_SAME(rt::cu::kErrorMisalignedAddress, CUDA_ERROR_MISALIGNED_ADDRESS);
TL_SAME(rt::cu::kErrorSystemDriverMismatch, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
TL_SAME(rt::cu::kErrorInvalidClusterSize, CUDA_ERROR_INVALID_CLUSTER_SIZE);
TL_SAME(rt::cu::kDevAttrMaxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
TL_SAME(rt::cu::kDevAttrClockRate, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
TL_SAME(rt::cu::kDevAttrMultiprocessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
TL_SAME(rt::cu::kDevAttrMemoryClockRate, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
TL_SAME(rt::cu::kDevAttrGlobalMemoryBusWidth, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
TL_SAME(rt::cu::kDevAttrL2CacheSize, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
TL_SAME(rt::cu::kDevAttrComputeCapabilityMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
TL_SAME(rt::cu::kDevAttrComputeCapabilityMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
TL_SAME(rt::cu::kDevAttrMaxSharedMemoryPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
TL_SAME(rt::cu::kDevAttrMaxSharedMemoryPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
TL_SAME(rt::cu::kDevAttrClusterLaunch, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH);
TL_SAME(rt::cu::kFuncAttrSharedSizeBytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
TL_SAME(rt::cu::kFuncAttrNumRegs, CU_FUNC_ATTRIBUTE_NUM_REGS);
TL_SAME(rt::cu::kFuncAttrMaxDynamicSharedSizeBytes, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
TL_SAME(rt::cu::kFuncAttrNonPortableClusterSizeAllowed, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
TL_SAME(rt::cu::kLaunchAttributeClusterDimension, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
TL_SAME(rt::cu::kStreamNonBlocking, CU_STREAM_NON_BLOCKING);
TL_SAME(rt::cu::kEventDisableTiming, CU_EVENT_DISABLE_TIMING);
TL_SAME(rt::cu::kJitInfoLogBuffer, CU_JIT_INFO_LOG_BUFFER);
TL_SAME(rt::cu::kJitInfoLogBufferSizeBytes, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
TL_SAME(rt::cu::kJitErrorLogBuffer, CU_JIT_ERROR_LOG_BUFFER);
TL_SAME(rt::cu::kJitErrorLogBufferSizeBytes, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
TL_SAME(rt::TmaSwizzle::B32, CU_TENSOR_MAP_SWIZZLE_32B);
TL_SAME(rt::TmaSwizzle::B128, CU_TENSOR_MAP_SWIZZLE_128B);
TL_SAME(rt::TmaL2Promotion::B256, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
#undef TL_SAME
#endif

TEST(CudaAbi, DataTypesOfTensorMaps) {
#ifndef TL_HAVE_CUDA_H
  GTEST_SKIP() << "no /usr/local/cuda/include/cuda.h to compare with";
#else
  EXPECT_EQ(rt::tensor_map_data_type(rt::DType::BF16), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(rt::tensor_map_data_type(rt::DType::F16), CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  EXPECT_EQ(rt::tensor_map_data_type(rt::DType::F32), CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(rt::tensor_map_data_type(rt::DType::F64), CU_TENSOR_MAP_DATA_TYPE_FLOAT64);
  EXPECT_EQ(rt::tensor_map_data_type(rt::DType::I32), CU_TENSOR_MAP_DATA_TYPE_INT32);
  EXPECT_EQ(rt::tensor_map_data_type(rt::DType::I64), CU_TENSOR_MAP_DATA_TYPE_INT64);
  EXPECT_EQ(rt::tensor_map_data_type(rt::DType::F8E4M3), CU_TENSOR_MAP_DATA_TYPE_UINT8);
#endif
}

}  // namespace
