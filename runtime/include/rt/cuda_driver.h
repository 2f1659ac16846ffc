// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1") (DESIGN "Rules of the
// layering": every binary runs on machines with no GPU and no driver). This is the one place that
// loads the driver; everything else goes through cuda_driver().
//
// cuda.h is never included: the few types and constants we use are declared below under our own
// names, ABI-compatible with the driver API (CUresult is int, handles are pointers, CUdeviceptr is
// a 64-bit integer). Values are from the CUDA driver API reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "rt/error.h"

namespace rt {

using CuResult = int;                         // CUresult
using CuDevice = int;                         // CUdevice
using CuDevicePtr = uint64_t;                 // CUdeviceptr
using CuContext = struct CuContextOpaque*;    // CUcontext
using CuModule = struct CuModuleOpaque*;      // CUmodule
using CuFunction = struct CuFunctionOpaque*;  // CUfunction
using CuStream = struct CuStreamOpaque*;      // CUstream (nullptr: the legacy default stream)
using CuEvent = struct CuEventOpaque*;        // CUevent
using CuGraph = struct CuGraphOpaque*;        // CUgraph
using CuGraphExec = struct CuGraphExecOpaque*;  // CUgraphExec

// CUtensorMap: an opaque 128-byte TMA descriptor, 64-byte aligned.
struct alignas(64) CuTensorMap {
  uint64_t opaque[16];
};
static_assert(sizeof(CuTensorMap) == 128 && alignof(CuTensorMap) == 64);

// CUipcMemHandle: an opaque 64-byte handle to device memory another process can map.
struct CuIpcMemHandle {
  char reserved[64];
};
static_assert(sizeof(CuIpcMemHandle) == 64);

// CUlaunchAttribute: an id, padding to 8 bytes, then a 64-byte value union.
struct CuLaunchAttribute {
  int id;  // a cu::kLaunchAttribute* value
  int pad;
  union alignas(8) Value {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster_dim;  // for cu::kLaunchAttributeClusterDimension
    int i;  // e.g. for cu::kLaunchAttributeProgrammaticStreamSerialization
  } value;
};
static_assert(sizeof(CuLaunchAttribute) == 72 && offsetof(CuLaunchAttribute, value) == 8);

// CUlaunchConfig.
struct CuLaunchConfig {
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_mem_bytes;
  CuStream stream;
  CuLaunchAttribute* attrs;
  unsigned num_attrs;
};
static_assert(offsetof(CuLaunchConfig, stream) == 32 && offsetof(CuLaunchConfig, attrs) == 40 &&
              offsetof(CuLaunchConfig, num_attrs) == 48 && sizeof(CuLaunchConfig) == 56);

namespace cu {
// CUresult values we name in code.
inline constexpr CuResult kSuccess = 0;
inline constexpr CuResult kErrorInvalidValue = 1;
inline constexpr CuResult kErrorOutOfMemory = 2;
inline constexpr CuResult kErrorNotInitialized = 3;
inline constexpr CuResult kErrorDeinitialized = 4;
inline constexpr CuResult kErrorStubLibrary = 34;
inline constexpr CuResult kErrorCallRequiresNewerDriver = 36;
inline constexpr CuResult kErrorDeviceUnavailable = 46;
inline constexpr CuResult kErrorNoDevice = 100;
inline constexpr CuResult kErrorInvalidDevice = 101;
inline constexpr CuResult kErrorInvalidContext = 201;
inline constexpr CuResult kErrorNoBinaryForGpu = 209;
inline constexpr CuResult kErrorEccUncorrectable = 214;
inline constexpr CuResult kErrorInvalidPtx = 218;
inline constexpr CuResult kErrorNvlinkUncorrectable = 220;
inline constexpr CuResult kErrorJitCompilerNotFound = 221;
inline constexpr CuResult kErrorUnsupportedPtxVersion = 222;
inline constexpr CuResult kErrorNotFound = 500;
inline constexpr CuResult kErrorNotReady = 600;
inline constexpr CuResult kErrorIllegalAddress = 700;
inline constexpr CuResult kErrorLaunchOutOfResources = 701;
inline constexpr CuResult kErrorLaunchTimeout = 702;
inline constexpr CuResult kErrorHardwareStackError = 714;
inline constexpr CuResult kErrorIllegalInstruction = 715;
inline constexpr CuResult kErrorMisalignedAddress = 716;
inline constexpr CuResult kErrorInvalidAddressSpace = 717;
inline constexpr CuResult kErrorInvalidPc = 718;
inline constexpr CuResult kErrorLaunchFailed = 719;
inline constexpr CuResult kErrorSystemNotReady = 802;
inline constexpr CuResult kErrorSystemDriverMismatch = 803;
inline constexpr CuResult kErrorCompatNotSupportedOnDevice = 804;
inline constexpr CuResult kErrorInvalidClusterSize = 912;

// CUdevice_attribute.
inline constexpr int kDevAttrMaxThreadsPerBlock = 1;
inline constexpr int kDevAttrMaxSharedMemoryPerBlock = 8;
inline constexpr int kDevAttrWarpSize = 10;
inline constexpr int kDevAttrClockRate = 13;  // kHz
inline constexpr int kDevAttrMultiprocessorCount = 16;
inline constexpr int kDevAttrMemoryClockRate = 36;       // kHz
inline constexpr int kDevAttrGlobalMemoryBusWidth = 37;  // bits
inline constexpr int kDevAttrL2CacheSize = 38;           // bytes
inline constexpr int kDevAttrUnifiedAddressing = 41;
inline constexpr int kDevAttrComputeCapabilityMajor = 75;
inline constexpr int kDevAttrComputeCapabilityMinor = 76;
inline constexpr int kDevAttrMaxSharedMemoryPerMultiprocessor = 81;
inline constexpr int kDevAttrMaxRegistersPerMultiprocessor = 82;
inline constexpr int kDevAttrMaxSharedMemoryPerBlockOptin = 97;
inline constexpr int kDevAttrMaxBlocksPerMultiprocessor = 106;
inline constexpr int kDevAttrClusterLaunch = 120;

// CUfunction_attribute.
inline constexpr int kFuncAttrMaxThreadsPerBlock = 0;
inline constexpr int kFuncAttrSharedSizeBytes = 1;  // static shared memory
inline constexpr int kFuncAttrLocalSizeBytes = 3;
inline constexpr int kFuncAttrNumRegs = 4;
inline constexpr int kFuncAttrMaxDynamicSharedSizeBytes = 8;
inline constexpr int kFuncAttrNonPortableClusterSizeAllowed = 14;

// CUlaunchAttributeID.
inline constexpr int kLaunchAttributeClusterDimension = 4;
inline constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;  // value.i: 1 allows the overlap

// CUstream_flags, CUevent_flags.
inline constexpr unsigned kStreamDefault = 0;
inline constexpr unsigned kStreamNonBlocking = 1;
inline constexpr unsigned kEventDefault = 0;
inline constexpr unsigned kEventDisableTiming = 2;

// CUipcMem_flags.
inline constexpr unsigned kIpcMemLazyEnablePeerAccess = 1;

// CUjit_option (for cuModuleLoadDataEx).
inline constexpr int kJitInfoLogBuffer = 3;
inline constexpr int kJitInfoLogBufferSizeBytes = 4;
inline constexpr int kJitErrorLogBuffer = 5;
inline constexpr int kJitErrorLogBufferSizeBytes = 6;
}  // namespace cu

// The driver's entry points. Members are named after the API functions; where the ABI is versioned
// the versioned symbol is resolved (cuMemAlloc is cuMemAlloc_v2, cuStreamDestroy is
// cuStreamDestroy_v2, ...), always the legacy-default-stream flavour (never _ptds/_ptsz).
// Members marked optional may be null on an old driver; callers check.
struct CudaDriver {
  std::string library_path;  // where libcuda.so.1 was found
  int version = 0;           // cuDriverGetVersion: 1000 * major + 10 * minor (12080 is 12.8)

  CuResult (*cuGetErrorName)(CuResult, const char**);
  CuResult (*cuGetErrorString)(CuResult, const char**);
  CuResult (*cuInit)(unsigned flags);
  CuResult (*cuDriverGetVersion)(int*);
  CuResult (*cuDeviceGet)(CuDevice*, int ordinal);
  CuResult (*cuDeviceGetCount)(int*);
  CuResult (*cuDeviceGetName)(char*, int, CuDevice);
  CuResult (*cuDeviceTotalMem)(size_t*, CuDevice);  // _v2
  CuResult (*cuDeviceGetAttribute)(int*, int attribute, CuDevice);
  CuResult (*cuDevicePrimaryCtxRetain)(CuContext*, CuDevice);
  CuResult (*cuDevicePrimaryCtxRelease)(CuDevice);  // _v2
  CuResult (*cuCtxSetCurrent)(CuContext);
  CuResult (*cuCtxGetCurrent)(CuContext*);
  CuResult (*cuCtxSynchronize)();
  CuResult (*cuMemAlloc)(CuDevicePtr*, size_t);                // _v2
  CuResult (*cuMemFree)(CuDevicePtr);                          // _v2
  CuResult (*cuMemGetInfo)(size_t* free, size_t* total);       // _v2
  CuResult (*cuMemHostAlloc)(void**, size_t, unsigned flags);
  CuResult (*cuMemFreeHost)(void*);
  CuResult (*cuMemcpyHtoD)(CuDevicePtr, const void*, size_t);  // _v2
  CuResult (*cuMemcpyDtoH)(void*, CuDevicePtr, size_t);        // _v2
  CuResult (*cuMemcpyDtoD)(CuDevicePtr, CuDevicePtr, size_t);  // _v2
  CuResult (*cuMemcpyPeer)(CuDevicePtr, CuContext, CuDevicePtr, CuContext, size_t);
  CuResult (*cuMemcpyHtoDAsync)(CuDevicePtr, const void*, size_t, CuStream);  // _v2
  CuResult (*cuMemcpyDtoHAsync)(void*, CuDevicePtr, size_t, CuStream);        // _v2
  CuResult (*cuMemsetD8)(CuDevicePtr, unsigned char, size_t);                 // _v2
  CuResult (*cuMemsetD8Async)(CuDevicePtr, unsigned char, size_t, CuStream);
  CuResult (*cuMemcpyDtoDAsync)(CuDevicePtr, CuDevicePtr, size_t, CuStream);  // _v2
  CuResult (*cuIpcGetMemHandle)(CuIpcMemHandle*, CuDevicePtr);
  CuResult (*cuIpcOpenMemHandle)(CuDevicePtr*, CuIpcMemHandle, unsigned flags);  // _v2
  CuResult (*cuIpcCloseMemHandle)(CuDevicePtr);
  CuResult (*cuModuleLoadData)(CuModule*, const void* image);
  CuResult (*cuModuleLoadDataEx)(CuModule*, const void* image, unsigned num_options, int* options, void** values);
  CuResult (*cuModuleUnload)(CuModule);
  CuResult (*cuModuleGetFunction)(CuFunction*, CuModule, const char* name);
  CuResult (*cuFuncSetAttribute)(CuFunction, int attribute, int value);
  CuResult (*cuFuncGetAttribute)(int*, int attribute, CuFunction);
  CuResult (*cuLaunchKernel)(CuFunction, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             unsigned shared_mem_bytes, CuStream, void** params, void** extra);
  CuResult (*cuLaunchKernelEx)(const CuLaunchConfig*, CuFunction, void** params, void** extra);  // optional (12.0)
  CuResult (*cuStreamCreate)(CuStream*, unsigned flags);
  CuResult (*cuStreamSynchronize)(CuStream);
  CuResult (*cuStreamQuery)(CuStream);  // kSuccess when done, kErrorNotReady while work is queued
  CuResult (*cuStreamDestroy)(CuStream);  // _v2
  CuResult (*cuEventCreate)(CuEvent*, unsigned flags);
  CuResult (*cuEventRecord)(CuEvent, CuStream);
  CuResult (*cuEventSynchronize)(CuEvent);
  CuResult (*cuEventQuery)(CuEvent);  // kSuccess when complete, kErrorNotReady while work before it is queued
  CuResult (*cuStreamWaitEvent)(CuStream, CuEvent, unsigned flags);
  CuResult (*cuEventElapsedTime)(float* ms, CuEvent start, CuEvent end);  // _v2 when the driver has it
  CuResult (*cuEventDestroy)(CuEvent);                                    // _v2
  // optional (11.4): stream capture and graphs (rt::CudaGraph)
  CuResult (*cuStreamBeginCapture)(CuStream, int mode);                   // _v2
  CuResult (*cuStreamEndCapture)(CuStream, CuGraph*);
  CuResult (*cuGraphInstantiateWithFlags)(CuGraphExec*, CuGraph, unsigned long long flags);
  CuResult (*cuGraphLaunch)(CuGraphExec, CuStream);
  CuResult (*cuGraphExecDestroy)(CuGraphExec);
  CuResult (*cuGraphDestroy)(CuGraph);
  // optional (12.0): dtype, rank, address, dims, strides, box, element strides, interleave, swizzle,
  // L2 promotion, OOB fill.
  CuResult (*cuTensorMapEncodeTiled)(CuTensorMap*, int data_type, uint32_t rank, void* global_address,
                                     const uint64_t* global_dim, const uint64_t* global_strides,
                                     const uint32_t* box_dim, const uint32_t* element_strides, int interleave,
                                     int swizzle, int l2_promotion, int oob_fill);

  std::string version_string() const;  // "12.8"
};

// The driver, loaded and initialized (cuInit(0)) on first use, once per process (thread-safe). A
// user error when it cannot be: no libcuda.so.1 ("CUDA driver (libcuda.so.1) not found: no NVIDIA
// driver on this machine; use --target cpu"), a library lacking entry points, or cuInit failing
// (no device, driver/kernel-module mismatch, ...). Later calls throw the same error again.
const CudaDriver& cuda_driver();
// Whether cuda_driver() succeeds. Never throws.
bool cuda_driver_available();
// Why the driver is unusable ("" when it is usable). Never throws.
std::string cuda_driver_error();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or "CUresult 2" when the driver cannot name it.
std::string cuda_error_text(CuResult result);
// True for the errors after which the context is unusable (illegal address, launch failure, ...).
bool cuda_error_is_sticky(CuResult result);

// Throws for a failed driver call: "CUDA error in <call> (<context>): <name> (<string>)". User
// errors are those the user acts on (out of memory, no device, an unusable driver, a binary for
// another GPU); everything else is an internal error located at file:line. Kernel faults add the
// last kernel launched and that the context is now unusable.
[[noreturn]] void throw_cuda_error(CuResult result, const char* call, const std::string& context, const char* file,
                                   int line);

// Remembers the kernel most recently launched (named in errors of kernel faults, which the driver
// reports at a later synchronization). Thread-safe.
void note_cuda_launch(const std::string& kernel_name);
std::string last_cuda_launch();

}  // namespace rt

// RT_CU_CHECK(expr, "cuCall", context parts...): throws through rt::throw_cuda_error when the
// driver call `expr` returns non-zero. The context is built only on failure.
#define RT_CU_CHECK(expr, call, ...)                                                                             \
  do {                                                                                                           \
    const ::rt::CuResult rt_cu_result_ = (expr);                                                                 \
    if (rt_cu_result_ != 0)                                                                                      \
      ::rt::throw_cuda_error(rt_cu_result_, call, ::rt::str("" __VA_OPT__(, ) __VA_ARGS__), __FILE__, __LINE__); \
  } while (0)
