// deepep::Event: the completion of work on a GPU -- a dispatch or combine of CUDA tensors called
// with async_finish (buffer.h), whose kernels run on the Buffer's communication stream after the
// call returns, or work the caller queued on a stream of theirs (Event::record), which a call can
// be told to wait for (previous_event).
//
// CPU calls are synchronous, and so are GPU calls without async_finish: their Event is a
// default-constructed one, complete from the start (query() true, wait() and stream_wait() do
// nothing).
#pragma once

#include <memory>

#include "rt/cuda_driver.h"

namespace deepep {

namespace detail {
struct EventState;  // transport/cuda_ipc/device_plane.h
}

class Event {
 public:
  Event() = default;  // complete
  explicit Event(std::shared_ptr<const detail::EventState> state) : state_(std::move(state)) {}

  // An event recorded now on `stream`, a CUstream of CUDA device `device` (nullptr: its legacy
  // default stream): given as previous_event, it makes a call's device work start after everything
  // queued on that stream so far (say, the kernels producing its inputs). A device that does not
  // exist is a user error.
  static Event record(rt::CuStream stream, int device);

  // Whether the work is complete. Does not raise the work's errors (wait() does).
  bool query() const;
  // Waits on the host for the work, then raises the errors its kernels reported: a CommError when a
  // peer's data did not arrive within the communicator's timeout (the communicator is then broken).
  // Nothing is raised once the Buffer that ran the work is destroyed.
  void wait() const;
  // Makes `stream` (a CUstream of any device) wait for the work before what is queued on it later,
  // without waiting on the host: how a caller's kernels consume an async call's outputs.
  void stream_wait(rt::CuStream stream) const;
  // False for a complete Event (CPU calls, synchronous GPU calls), true for one of device work.
  bool on_device() const { return state_ != nullptr; }

 private:
  std::shared_ptr<const detail::EventState> state_;
};

}  // namespace deepep
