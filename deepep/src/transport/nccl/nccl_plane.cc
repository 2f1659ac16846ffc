#include "transport/nccl/nccl_plane.h"

#include "bootstrap/setup_check.h"
#include "deepep/error.h"
#include "deepep/group.h"
#include "engine/engine.h"
#include "rt/cuda_device.h"
#include "rt/error.h"
#include "transport/nccl/nccl_wait.h"

namespace deepep {

NcclPlane::NcclPlane(Group& group, Engine& engine, int device) : engine_(engine), device_(device) {
  const auto adopted = static_cast<nccl::Comm>(group.nccl_comm());
  std::string error;
  nccl::UniqueId id{};
  try {
    lib_ = &nccl::library();
    const nccl::Library& l = *lib_;
    rt::cuda_context(device);  // NCCL works on the current context's device
    if (adopted) {
      int comm_device = -1;
      nccl::check(l.ncclCommCuDevice(adopted, &comm_device), "ncclCommCuDevice", "the group's NCCL communicator");
      if (comm_device != device)
        error = rt::str("the group's NCCL communicator is on cuda:", comm_device, " but CommOptions::cuda_device is ",
                        device);
    } else if (group.rank() == 0) {
      nccl::check(l.ncclGetUniqueId(&id), "ncclGetUniqueId", "the nccl device plane");
    }
    if (error.empty()) stream_.emplace(device);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const std::vector<std::string> ids = gather_setup(group, error, std::string(id.internal, sizeof(id.internal)),
                                                    "deepep Comm: the nccl device plane: ", "the nccl device plane");
  if (adopted) {
    comm_ = adopted;
    return;
  }
  std::copy(ids[0].begin(), ids[0].end(), id.internal);  // rank 0's
  // Every rank reached this point with a working device, so every rank joins ncclCommInitRank.
  const nccl::Result rc = lib_->ncclCommInitRank(&comm_, group.size(), id, group.rank());
  if (rc != nccl::kSuccess) comm_ = nullptr;
  owned_ = true;
  try {
    gather_setup(group, rc == nccl::kSuccess ? "" : "ncclCommInitRank failed: " + nccl::error_text(rc), "",
                 "deepep Comm: creating the NCCL communicator: ", "creating the NCCL communicator", true);
  } catch (...) {
    abort();
    throw;
  }
}

NcclPlane::~NcclPlane() {
  if (comm_ == nullptr || !owned_) return;
  try {
    rt::cuda_context(device_);
    lib_->ncclCommDestroy(comm_);
  } catch (...) {  // the library and the device were usable when the communicator was made
  }
}

int NcclPlane::rank() const { return engine_.rank(); }
int NcclPlane::size() const { return engine_.size(); }

void NcclPlane::abort() noexcept {
  if (comm_ == nullptr) return;
  // Ends the communicator's kernels, so that the stream drains; NCCL frees the communicator.
  lib_->ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclPlane::run(const std::string& what, const std::function<void(nccl::Comm, rt::CuStream)>& enqueue) {
  RT_ICHECK(comm_ != nullptr, "the nccl device plane was aborted but its communicator is not broken");
  const std::string where = what + " on the nccl device plane";  // errors say the wait was NCCL's
  bool peer_failed = false;  // the engine found it (and is broken already)
  auto check_peers = [&] {
    try {
      engine_.check_peers_alive(where);
    } catch (...) {
      peer_failed = true;
      throw;
    }
  };
  std::string error;
  try {
    rt::cuda_context(device_);
    enqueue(comm_, stream());
    error = nccl::wait_for_stream(*lib_, comm_, stream(), engine_.timeout(), engine_.liveness(), check_peers);
  } catch (const std::exception& e) {
    if (peer_failed) {
      abort();
      throw;
    }
    error = e.what();
  }
  if (error.empty()) return;
  abort();
  // A peer that died or aborted is the root cause when there is one (the engine looks first).
  engine_.fail_peer_read(where, rt::str(where, ": ", error, "; the NCCL communicator was aborted"));
}

}  // namespace deepep
