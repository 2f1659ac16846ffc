// How the collectives cut n elements into one part per rank: the first n % parts parts get one
// element more.
#pragma once

#include <cstddef>
#include <vector>

namespace deepep {

struct Parts {
  std::vector<size_t> off, len;
};

inline Parts split(size_t n, int parts) {
  Parts p;
  size_t at = 0;
  for (int r = 0; r < parts; ++r) {
    const size_t len = n / size_t(parts) + (size_t(r) < n % size_t(parts) ? 1 : 0);
    p.off.push_back(at);
    p.len.push_back(len);
    at += len;
  }
  return p;
}

}  // namespace deepep
