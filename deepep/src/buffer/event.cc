#include "deepep/event.h"

#include "rt/cuda_device.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"

namespace deepep {

Event Event::record(rt::CuStream stream, int device) {
  const int count = rt::cuda_device_count();
  RT_USER_CHECK(device >= 0 && device < count, "deepep Event::record: no CUDA device ", device, " (", count, " visible",
                rt::cuda_unavailable_reason().empty() ? "" : ": " + rt::cuda_unavailable_reason(), ")");
  auto state = std::make_shared<detail::EventState>(device);
  state->event.record(stream);
  return Event(std::move(state));
}

bool Event::query() const { return !state_ || state_->event.query(); }

void Event::wait() const {
  if (!state_) return;
  state_->event.synchronize();
  if (state_->check) state_->check();
}

void Event::stream_wait(rt::CuStream stream) const {
  if (state_) state_->event.stream_wait(stream);
}

}  // namespace deepep
