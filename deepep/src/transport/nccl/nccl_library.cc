#include "transport/nccl/nccl_library.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "deepep/error.h"
#include "rt/env.h"
#include "rt/error.h"

namespace deepep::nccl {
namespace {

template <class F>
void resolve(void* handle, const char* name, const std::string& path, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  RT_USER_CHECK(*out != nullptr, "deepep: ", path, " has no ", name,
                " (NCCL 2.10 or newer is needed; set DEEPEP_NCCL_LIBRARY to another libnccl.so.2)");
}

Library load(const std::string& path) {
  // RTLD_LOCAL: NCCL's symbols stay out of the way of a framework that links its own NCCL.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    rt::throw_user_error(rt::str("deepep: NCCL is needed (the nccl device transport, Group::from_nccl) but ", path,
                                 " cannot be loaded: ", why ? why : "?",
                                 "; install NCCL (libnccl2) or set DEEPEP_NCCL_LIBRARY to its libnccl.so.2, or use "
                                 "the cuda_ipc device transport"));
  }
  Library l;
  l.path = path;
  resolve(handle, "ncclGetVersion", path, &l.ncclGetVersion);
  resolve(handle, "ncclGetUniqueId", path, &l.ncclGetUniqueId);
  resolve(handle, "ncclCommInitRank", path, &l.ncclCommInitRank);
  l.ncclCommInitRankConfig = reinterpret_cast<decltype(l.ncclCommInitRankConfig)>(dlsym(handle, "ncclCommInitRankConfig"));
  l.ncclCommFinalize = reinterpret_cast<decltype(l.ncclCommFinalize)>(dlsym(handle, "ncclCommFinalize"));
  resolve(handle, "ncclCommDestroy", path, &l.ncclCommDestroy);
  resolve(handle, "ncclCommAbort", path, &l.ncclCommAbort);
  resolve(handle, "ncclCommCount", path, &l.ncclCommCount);
  resolve(handle, "ncclCommUserRank", path, &l.ncclCommUserRank);
  resolve(handle, "ncclCommCuDevice", path, &l.ncclCommCuDevice);
  resolve(handle, "ncclCommGetAsyncError", path, &l.ncclCommGetAsyncError);
  resolve(handle, "ncclGetErrorString", path, &l.ncclGetErrorString);
  resolve(handle, "ncclAllReduce", path, &l.ncclAllReduce);
  resolve(handle, "ncclReduceScatter", path, &l.ncclReduceScatter);
  resolve(handle, "ncclAllGather", path, &l.ncclAllGather);
  resolve(handle, "ncclBroadcast", path, &l.ncclBroadcast);
  resolve(handle, "ncclSend", path, &l.ncclSend);
  resolve(handle, "ncclRecv", path, &l.ncclRecv);
  resolve(handle, "ncclGroupStart", path, &l.ncclGroupStart);
  resolve(handle, "ncclGroupEnd", path, &l.ncclGroupEnd);
  const Result rc = l.ncclGetVersion(&l.version);
  RT_USER_CHECK(rc == kSuccess, "deepep: ncclGetVersion of ", path, " failed (ncclResult_t ", rc, ")");
  // bfloat16 reductions came with 2.10.
  RT_USER_CHECK(l.version >= 21000, "deepep: ", path, " is NCCL ", l.version_string(),
                "; 2.10 or newer is needed (set DEEPEP_NCCL_LIBRARY to another libnccl.so.2)");
  return l;
}

}  // namespace

std::string Library::version_string() const {
  // NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z since 2.9, X * 1000 + Y * 100 + Z before.
  const int major = version >= 10000 ? version / 10000 : version / 1000;
  const int minor = version >= 10000 ? version / 100 % 100 : version / 100 % 10;
  return rt::str(major, ".", minor, ".", version % 100);
}

// Per path, so that DEEPEP_NCCL_LIBRARY can name another library later in the process (tests). A
// failed load is not kept: the next call tries again and raises the same error.
const Library& library() {
  static std::mutex mutex;
  static std::map<std::string, Library> loaded;
  const std::string path = rt::env_string("DEEPEP_NCCL_LIBRARY", "libnccl.so.2");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(path);
  if (it == loaded.end()) it = loaded.emplace(path, load(path)).first;
  return it->second;
}

std::string unavailable_reason() {
  try {
    library();
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string error_text(Result result) {
  static const char* const names[] = {"ncclSuccess",      "ncclUnhandledCudaError", "ncclSystemError",
                                      "ncclInternalError", "ncclInvalidArgument",   "ncclInvalidUsage",
                                      "ncclRemoteError",  "ncclInProgress"};
  const std::string name = result >= 0 && result < 8 ? names[result] : rt::str("ncclResult_t ", result);
  const char* text = nullptr;
  try {  // an error path: a library that cannot be loaded now must not hide the error being reported
    text = library().ncclGetErrorString(result);
  } catch (const std::exception&) {
  }
  return text ? rt::str(name, " (", text, ")") : name;
}

void check(Result result, const char* call, const std::string& context) {
  if (result == kSuccess || result == kInProgress) return;  // in progress: the wait that follows polls it
  const std::string message = rt::str("deepep: ", call, " failed (", context, "): ", error_text(result));
  constexpr Result kInvalidArgument = 4, kInvalidUsage = 5;
  if (result == kInvalidArgument || result == kInvalidUsage) rt::throw_user_error(message);
  throw_comm_error(message);
}

DataType reduce_type(rt::DType dtype) {
  switch (dtype) {
    case rt::DType::F32: return kFloat32;
    case rt::DType::F16: return kFloat16;
    case rt::DType::BF16: return kBfloat16;
    case rt::DType::F64: return kFloat64;
    case rt::DType::I32: return kInt32;
    case rt::DType::I64: return kInt64;
    default: return -1;
  }
}

}  // namespace deepep::nccl
