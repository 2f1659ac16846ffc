#include "transport/frame_faults.h"

namespace deepep {
namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

FrameFaults::FrameFaults(const FaultConfig& faults, int rank)
    : faults_(faults), rank_(rank), rng_(faults.seed * 0x9E3779B97F4A7C15ull + uint64_t(rank) * 0xD1B54A32D192ED03ull + 1) {}

bool FrameFaults::deliver(int dst, uint8_t* frame, size_t bytes, int64_t* delay_ns) {
  *delay_ns = 0;
  const FaultConfig& f = faults_;
  if (!(f.drop > 0 || f.corrupt > 0 || f.delay_us > 0) || !f.applies(rank_, dst)) return true;
  const double u = double(splitmix(rng_) >> 11) * 0x1.0p-53;
  if (u < f.drop) return false;
  if (u < f.drop + f.corrupt && bytes > 0) {
    const uint64_t bit = splitmix(rng_) % (uint64_t(bytes) * 8);
    frame[bit / 8] ^= uint8_t(1u << (bit % 8));
  }
  *delay_ns = f.delay_us * 1000;
  return true;
}

}  // namespace deepep
