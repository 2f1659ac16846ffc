// What Group::from_nccl needs of an existing NCCL communicator (NCCL loaded at run time): its rank,
// size and device, and a broadcast of a few bytes (the rendezvous address), bounded like every wait.
#pragma once

#include <chrono>

#include "transport/nccl/nccl_library.h"

namespace deepep::nccl {

struct World {
  int rank = 0;
  int size = 0;
  int device = 0;
};

World world(Comm comm);
// ncclBroadcast of `bytes` host bytes from `root` through a device buffer on the communicator's
// device (collective). A CommError when it does not complete within `timeout`; the communicator
// is then aborted, which is what ends its kernels.
void broadcast(Comm comm, void* data, int bytes, int root, std::chrono::milliseconds timeout);

}  // namespace deepep::nccl
