// NCCL loaded at run time (libnccl.so.2, or the library DEEPEP_NCCL_LIBRARY names): nothing links
// it, so binaries run where it is absent and only asking for NCCL fails, with a user error saying
// what is missing. The types and values below are NCCL's documented C ABI, declared here so that
// the build needs no NCCL header.
#pragma once

#include <cstddef>
#include <string>

#include "rt/cuda_driver.h"
#include "rt/dtype.h"

namespace deepep::nccl {

using Comm = struct NcclCommOpaque*;  // ncclComm_t
using Result = int;                    // ncclResult_t
using DataType = int;                  // ncclDataType_t
using RedOp = int;                     // ncclRedOp_t

struct UniqueId {  // ncclUniqueId: opaque bytes, passed by value to ncclCommInitRank
  char internal[128];
};
static_assert(sizeof(UniqueId) == 128);

// ncclConfig_t as NCCL 2.14 defined it (later versions append fields and accept this prefix: the
// size and version say which fields are present). Fields left at NCCL's "undefined" take its
// defaults; only `blocking` is set here.
struct ConfigV214 {
  size_t size = sizeof(ConfigV214);
  unsigned int magic = 0xcafebeef;
  unsigned int version = 21400;
  int blocking = -2147483647 - 1;  // NCCL_CONFIG_UNDEF_INT
  int cga_cluster_size = -2147483647 - 1;
  int min_ctas = -2147483647 - 1;
  int max_ctas = -2147483647 - 1;
  const char* net_name = nullptr;
};

inline constexpr Result kSuccess = 0;
inline constexpr Result kInProgress = 7;  // a nonblocking communicator still initializing

inline constexpr DataType kUint8 = 1, kInt32 = 2, kInt64 = 4, kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9;
inline constexpr RedOp kSum = 0, kMax = 2, kMin = 3;

// The entry points, named after the API functions. Streams are CUDA streams (rt::CuStream).
struct Library {
  std::string path;  // what was loaded
  Result (*ncclGetVersion)(int*);
  Result (*ncclGetUniqueId)(UniqueId*);
  Result (*ncclCommInitRank)(Comm*, int nranks, UniqueId id, int rank);
  // NCCL 2.14+; null before (communicator creation then blocks without a bound).
  Result (*ncclCommInitRankConfig)(Comm*, int nranks, UniqueId id, int rank, ConfigV214* config) = nullptr;
  Result (*ncclCommFinalize)(Comm) = nullptr;  // NCCL 2.14+
  Result (*ncclCommDestroy)(Comm);
  Result (*ncclCommAbort)(Comm);
  Result (*ncclCommCount)(Comm, int*);
  Result (*ncclCommUserRank)(Comm, int*);
  Result (*ncclCommCuDevice)(Comm, int*);
  Result (*ncclCommGetAsyncError)(Comm, Result*);
  const char* (*ncclGetErrorString)(Result);
  Result (*ncclAllReduce)(const void* send, void* recv, size_t count, DataType, RedOp, Comm, rt::CuStream);
  Result (*ncclReduceScatter)(const void* send, void* recv, size_t recv_count, DataType, RedOp, Comm, rt::CuStream);
  Result (*ncclAllGather)(const void* send, void* recv, size_t send_count, DataType, Comm, rt::CuStream);
  Result (*ncclBroadcast)(const void* send, void* recv, size_t count, DataType, int root, Comm, rt::CuStream);
  Result (*ncclSend)(const void* send, size_t count, DataType, int peer, Comm, rt::CuStream);
  Result (*ncclRecv)(void* recv, size_t count, DataType, int peer, Comm, rt::CuStream);
  Result (*ncclGroupStart)();
  Result (*ncclGroupEnd)();

  int version = 0;  // ncclGetVersion: 22809 is 2.28.9
  std::string version_string() const;
};

// Loaded once per process (thread-safe). A user error naming the library and what to do when it
// cannot be loaded or lacks an entry point; later calls throw the same error again.
const Library& library();
// Why NCCL cannot be used ("" when it can). Never throws.
std::string unavailable_reason();

// "ncclInvalidArgument (invalid argument)"-like text for a result.
std::string error_text(Result result);
// Throws for a failed NCCL call: a user error for invalid arguments or usage, else a CommError
// (the communicator or a peer failed); `context` says what was being done. ncclInProgress (a
// nonblocking communicator still carrying the call out) passes: wait_for_nccl follows every call.
void check(Result result, const char* call, const std::string& context);

// NCCL's element type for reducing `dtype` (f32, f16, bf16, f64, i32, i64); -1 for the others.
// Data that only moves goes as bytes (kUint8).
DataType reduce_type(rt::DType dtype);

}  // namespace deepep::nccl
