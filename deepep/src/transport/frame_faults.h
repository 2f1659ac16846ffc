// Fault injection on the frames a rank publishes (FaultConfig's drop, corrupt and delay), shared
// by the frame transports so that one configuration and seed hit the same frames on each.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deepep/health.h"

namespace deepep {

class FrameFaults {
 public:
  FrameFaults(const FaultConfig& faults, int rank);
  // The fate of the frame of `bytes` bytes at `frame`, about to go on link rank -> dst: false when
  // it is lost; otherwise one of its bits is flipped when it is corrupted, and *delay_ns (0 when
  // not delayed) says how much later its receiver may see it.
  bool deliver(int dst, uint8_t* frame, size_t bytes, int64_t* delay_ns);
  bool delays() const { return faults_.delay_us > 0; }

 private:
  FaultConfig faults_;
  int rank_ = 0;
  uint64_t rng_ = 0;
};

}  // namespace deepep
