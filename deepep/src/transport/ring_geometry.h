// How a frame transport cuts a rank's inbound bytes (TransportConfig::inbound_bytes) into frames:
// shared by the transports so that one CommOptions gives the same frames and window on each.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepep {

// Bytes a transport may keep beside each frame (the shm ring slot's header); counted in the budget.
constexpr size_t kFrameSlotHeader = 64;

struct RingGeometry {
  size_t frame_capacity = 0;  // bytes per frame (engine header included)
  uint32_t slots = 0;         // frames in flight per link (the ring, or the window over a network)
  uint32_t ack_slots = 0;
};
// The budget is split among the size - 1 inbound links; user error when it cannot hold two
// 4 KiB frames on each.
RingGeometry ring_geometry(int64_t inbound_bytes, int size);

}  // namespace deepep
