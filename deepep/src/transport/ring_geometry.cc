#include "transport/ring_geometry.h"

#include <algorithm>

#include "rt/error.h"

namespace deepep {
namespace {

constexpr size_t kMinFrame = 4096;
constexpr size_t kMaxFrame = 128 << 10;  // keeps a frame in L2 between copy and checksum

size_t floor_pow2(size_t v) {
  size_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

uint32_t ceil_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

RingGeometry ring_geometry(int64_t inbound_bytes, int size) {
  RingGeometry g;
  const size_t links = size_t(std::max(1, size - 1));
  const size_t min_bytes = links * 2 * (kMinFrame + kFrameSlotHeader);
  RT_USER_CHECK(inbound_bytes >= 0 && size_t(inbound_bytes) >= min_bytes, "deepep: buffer too small: ", inbound_bytes,
                " bytes of rings per rank cannot hold two ", kMinFrame, "-byte frames on each of the ", links,
                " inbound links of a group of ", size, " ranks; give at least ", min_bytes, " bytes");
  const size_t per_link = size_t(inbound_bytes) / links;
  g.frame_capacity = std::clamp(
      floor_pow2(per_link / 4 > kFrameSlotHeader ? per_link / 4 - kFrameSlotHeader : 0), kMinFrame, kMaxFrame);
  g.slots = uint32_t(std::min<size_t>(per_link / (g.frame_capacity + kFrameSlotHeader), 1u << 20));
  g.ack_slots = std::min<uint32_t>(ceil_pow2(std::max<uint32_t>(64, g.slots * 2)), 1u << 21);
  return g;
}

}  // namespace deepep
