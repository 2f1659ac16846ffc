// The nccl data plane of a communicator (CommOptions::device_transport = "nccl"): an NCCL
// communicator, a private stream and a pool of device memory on the rank's device. The collectives
// of CUDA tensors (collectives/nccl_collectives.cc) and normal-mode dispatch and combine
// (buffer/nccl_dispatch.cc) queue NCCL calls and kernels here after the engine's agreement, and
// complete() waits for them with a bound: NCCL's asynchronous errors, a peer that died or the
// communicator's timeout end the wait with a CommError (the communicator aborted), never a hang.
// The stream synchronizes with the legacy default stream, where rt::Tensor's copies run.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "engine/tensor_pool.h"
#include "rt/cuda_stream.h"
#include "transport/nccl/nccl_library.h"

namespace deepep {

class Engine;
class Group;

class NcclPlane {
 public:
  // Collective over the group: the group's own NCCL communicator when it has one
  // (Group::from_nccl; it must be on `device`), else a new one (rank 0's unique id goes round the
  // group's control plane). Every rank raises the same error when any rank cannot take part.
  NcclPlane(Group& group, Engine& engine, int device);
  ~NcclPlane();
  NcclPlane(const NcclPlane&) = delete;
  NcclPlane& operator=(const NcclPlane&) = delete;

  int rank() const;
  int size() const;
  int device() const { return device_; }
  rt::CuStream stream() const { return stream_->handle(); }
  bool owns_communicator() const { return owned_; }
  // Outputs and staging of dispatch and combine (a caching pool on this device). Every operation
  // on this plane completes before it returns, so a block given back is free for the next one.
  TensorPool& pool() { return pool_; }
  // Buffer::set_num_sms: the SMs dispatch's gather and combine's reduce are sized for (0: every SM).
  void set_num_sms(int num_sms) { num_sms_ = num_sms; }
  int num_sms() const { return num_sms_; }

  // The library the communicator was made with (DEEPEP_NCCL_LIBRARY may name another later).
  const nccl::Library& library() const { return *lib_; }
  // Queues NCCL work (`enqueue` gets the communicator and the stream; its NCCL calls go through
  // nccl::check) and waits for it, bounded. After a failure the communicator is aborted and the
  // engine broken: later operations fail at once.
  void run(const std::string& what, const std::function<void(nccl::Comm, rt::CuStream)>& enqueue);

 private:
  // Joins the new communicator (every rank of `group` with rank 0's `id`); "" or why it failed (the
  // communicator then aborted). Bounded by the timeout where NCCL can create nonblocking ones.
  std::string create(Group& group, const nccl::UniqueId& id);
  bool nonblocking() const { return lib_->ncclCommInitRankConfig && lib_->ncclCommFinalize; }
  void abort() noexcept;

  Engine& engine_;
  const nccl::Library* lib_ = nullptr;  // set once the constructor got it (else it throws)
  int device_ = 0;
  nccl::Comm comm_ = nullptr;  // nullptr once aborted
  bool owned_ = false;         // created here (destroyed here), or the group's
  std::optional<rt::CudaStream> stream_;  // made once every rank's device is known to work
  TensorPool pool_;
  int num_sms_ = 0;
};

}  // namespace deepep
