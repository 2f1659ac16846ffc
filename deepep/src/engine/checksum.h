// Frame checksums: a Fletcher-style sum over 64-bit words in eight lanes (vectorizes),
// mixed at the end. Any single flipped bit changes it; it runs far faster than memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepep {

uint64_t checksum(const void* data, size_t bytes);

}  // namespace deepep
