#include "bootstrap/nccl_world.h"

#include <cstring>

#include "deepep/error.h"
#include "rt/cuda_device.h"
#include "rt/cuda_stream.h"
#include "rt/tensor.h"
#include "transport/nccl/nccl_wait.h"

namespace deepep::nccl {

World world(Comm comm) {
  const Library& l = library();
  World w;
  check(l.ncclCommUserRank(comm, &w.rank), "ncclCommUserRank", "Group::from_nccl");
  check(l.ncclCommCount(comm, &w.size), "ncclCommCount", "Group::from_nccl");
  check(l.ncclCommCuDevice(comm, &w.device), "ncclCommCuDevice", "Group::from_nccl");
  return w;
}

void broadcast(Comm comm, void* data, int bytes, int root, std::chrono::milliseconds timeout) {
  const Library& l = library();
  const World w = world(comm);
  rt::cuda_context(w.device);  // NCCL enqueues on the current context's device
  rt::Tensor host = rt::Tensor::empty({bytes}, rt::DType::U8);
  std::memcpy(host.data(), data, size_t(bytes));
  const rt::Tensor staged = host.to(rt::Device::cuda(w.device));
  const rt::CudaStream stream(w.device);  // blocking: ordered after the copy above
  check(l.ncclBroadcast(staged.data(), staged.data(), size_t(bytes), kUint8, root, comm, stream.handle()),
        "ncclBroadcast", rt::str("Group::from_nccl, rank ", w.rank, ": the rendezvous address"));
  const std::string error = wait_for_nccl(l, comm, stream.handle(), timeout, timeout, [] {});
  if (!error.empty()) {
    l.ncclCommAbort(comm);
    throw_comm_error(rt::str("deepep Group::from_nccl (rank ", w.rank, " of ", w.size,
                             "): broadcasting the rendezvous address: ", error,
                             "; the NCCL communicator was aborted (do not destroy it)"));
  }
  std::memcpy(data, staged.to(rt::Device::cpu()).data(), size_t(bytes));
}

}  // namespace deepep::nccl
