#include "transport/nccl/nccl_wait.h"

#include <algorithm>
#include <thread>

#include "rt/error.h"

namespace deepep::nccl {

std::string wait_for_nccl(const Library& l, Comm comm, rt::CuStream stream, std::chrono::milliseconds timeout,
                          std::chrono::milliseconds check_interval, const std::function<void()>& check_peers) {
  using Clock = std::chrono::steady_clock;
  const rt::CudaDriver& d = rt::cuda_driver();
  const auto start = Clock::now();
  auto last_check = start;
  // An operation on a stream is polled without sleeping for its first 2 ms: a sleep lasts at least
  // ~50 us on Linux, late by as much for an operation of a fraction of a millisecond (the nccl
  // plane's combine waits twice a call: 0.51-0.58 -> 0.47-0.51 ms on the H200 x2, docs/perf.md). After
  // that, and for a communicator's creation (seconds), the pause doubles to 1 ms so that a long
  // wait does not take a core from the ranks sharing it.
  const auto spin_until = stream != nullptr ? start + std::chrono::milliseconds(2) : start;
  std::chrono::microseconds pause{0};
  while (true) {
    Result async = kSuccess;
    const Result rc = l.ncclCommGetAsyncError(comm, &async);
    if (rc != kSuccess) return rt::str("ncclCommGetAsyncError failed: ", error_text(rc));
    if (async != kSuccess && async != kInProgress) return rt::str("NCCL reported an error: ", error_text(async));
    // The stream only counts once NCCL has queued everything on it.
    if (async == kSuccess) {
      if (stream == nullptr) return "";
      const rt::CuResult q = d.cuStreamQuery(stream);
      if (q == rt::cu::kSuccess) return "";
      if (q != rt::cu::kErrorNotReady) RT_CU_CHECK(q, "cuStreamQuery", "waiting for NCCL");
    }
    const auto now = Clock::now();
    if (now - last_check >= check_interval) {
      check_peers();
      last_check = now;
    }
    if (now - start >= timeout)
      return rt::str("the NCCL ", stream ? "operation" : "communicator's creation", " did not complete within ",
                     timeout.count(), " ms (the communicator's timeout); a peer is stuck or gone");
    if (now < spin_until) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(std::chrono::microseconds(1000), pause * 2 + std::chrono::microseconds(1));
  }
}

}  // namespace deepep::nccl
