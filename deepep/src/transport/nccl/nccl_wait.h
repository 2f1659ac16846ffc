// Waiting for NCCL without hanging. A collective whose peer died never completes (NCCL reports
// nothing for peers on this host, and over the network only after its own long timeouts), and
// cuStreamSynchronize would block forever; a communicator's creation waits the same way for peers
// that never join. So the communicator's state and the stream are polled, with NCCL's asynchronous
// error and the caller's peer check between polls, until the caller's bound. On a failure the
// caller aborts the communicator (ncclCommAbort), which ends its kernels and its own waits.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "transport/nccl/nccl_library.h"

namespace deepep::nccl {

// Returns "" once `comm` has finished what it was still carrying out (a nonblocking communicator
// answers ncclInProgress to its creation and its calls and goes on in the background) and, unless
// `stream` is null, the work queued on `stream` (a stream of the current context) is done; else
// why not: NCCL's asynchronous error on `comm` (asked through `lib`, the library `comm` came from),
// or no completion within `timeout`. `check_peers` runs about every `check_interval` and may throw
// (a peer died); CUDA errors of the stream throw.
std::string wait_for_nccl(const Library& lib, Comm comm, rt::CuStream stream, std::chrono::milliseconds timeout,
                          std::chrono::milliseconds check_interval, const std::function<void()>& check_peers);

}  // namespace deepep::nccl
