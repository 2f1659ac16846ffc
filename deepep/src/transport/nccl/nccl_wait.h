// Waiting for NCCL work on a stream without hanging. A collective whose peer died never completes
// (NCCL reports nothing for peers on this host, and over the network only after its own long
// timeouts), and cuStreamSynchronize would block forever: so the stream is polled, with NCCL's
// asynchronous error and the caller's peer check between polls, until the caller's bound. On a
// failure the caller aborts the communicator (ncclCommAbort), which ends its kernels.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "transport/nccl/nccl_library.h"

namespace deepep::nccl {

// Returns "" once the work queued on `stream` (a stream of the current context) is done, else why
// it is not: NCCL's asynchronous error on `comm` (asked through `lib`, the library `comm` came
// from), or no completion within `timeout`. `check_peers`
// runs about every `check_interval` and may throw (a peer died); CUDA errors of the stream throw.
std::string wait_for_stream(const Library& lib, Comm comm, rt::CuStream stream, std::chrono::milliseconds timeout,
                            std::chrono::milliseconds check_interval, const std::function<void()>& check_peers);

}  // namespace deepep::nccl
