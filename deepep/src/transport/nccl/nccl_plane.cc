#include "transport/nccl/nccl_plane.h"

#include "bootstrap/setup_check.h"
#include "deepep/error.h"
#include "deepep/group.h"
#include "engine/engine.h"
#include "rt/cuda_device.h"
#include "rt/error.h"
#include "transport/nccl/nccl_wait.h"

namespace deepep {

NcclPlane::NcclPlane(Group& group, Engine& engine, int device)
    : engine_(engine), device_(device), pool_(rt::Device::cuda(device)) {
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
  owned_ = true;
  // Every rank reached this point with a working device, so every rank joins the creation.
  const std::string failed = create(group, id);
  try {
    gather_setup(group, failed, "", "deepep Comm: creating the NCCL communicator: ", "creating the NCCL communicator",
                 true);
  } catch (...) {
    abort();
    throw;
  }
}

std::string NcclPlane::create(Group& group, const nccl::UniqueId& id) {
  const std::string what = "creating the NCCL communicator";
  engine_.kill_if_due_in_setup(what);
  const nccl::Library& l = *lib_;
  if (!nonblocking()) {  // NCCL before 2.14: unbounded, as NCCL itself is
    const nccl::Result rc = l.ncclCommInitRank(&comm_, group.size(), id, group.rank());
    if (rc == nccl::kSuccess) return "";
    comm_ = nullptr;
    return "ncclCommInitRank failed: " + nccl::error_text(rc);
  }
  // Nonblocking: NCCL connects to the peers in the background while this rank polls, so a peer that
  // never joins (dead, or stuck before this point) is an error within the timeout, not a hang.
  nccl::ConfigV214 config;
  config.blocking = 0;
  const nccl::Result rc = l.ncclCommInitRankConfig(&comm_, group.size(), id, group.rank(), &config);
  if (rc != nccl::kSuccess && rc != nccl::kInProgress) {
    abort();
    return "ncclCommInitRankConfig failed: " + nccl::error_text(rc);
  }
  std::string error;
  try {
    error = nccl::wait_for_nccl(l, comm_, nullptr, engine_.timeout(), engine_.liveness(),
                                [&] { engine_.check_peers_alive(what); });
  } catch (...) {  // a peer died: the engine's error says which
    abort();
    throw;
  }
  if (!error.empty()) abort();
  return error;
}

NcclPlane::~NcclPlane() {
  if (comm_ == nullptr || !owned_) return;
  try {
    rt::cuda_context(device_);
    // A nonblocking communicator is finalized first (NCCL flushes its work in the background and
    // answers ncclInProgress), and aborted when that fails or does not end within the timeout.
    if (nonblocking()) {
      const nccl::Result rc = lib_->ncclCommFinalize(comm_);
      if ((rc != nccl::kSuccess && rc != nccl::kInProgress) ||
          !nccl::wait_for_nccl(*lib_, comm_, nullptr, engine_.timeout(), engine_.timeout(), [] {}).empty()) {
        abort();
        return;
      }
    }
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
    error = nccl::wait_for_nccl(*lib_, comm_, stream(), engine_.timeout(), engine_.liveness(), check_peers);
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
