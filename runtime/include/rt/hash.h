// Content hashes for content-addressed caches (JIT binaries, headers): SHA-256 (FIPS 180-4), so a
// key collision is never a practical concern. Written here to keep runtime free of dependencies.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace rt {

class Hasher {
 public:
  Hasher();
  // Appends raw bytes.
  Hasher& update(std::string_view bytes);
  // Appends a length-prefixed field, so a sequence of fields hashes unambiguously ("ab","c" != "a","bc").
  Hasher& field(std::string_view bytes);
  // The SHA-256 of everything appended so far; the hasher can keep going afterwards.
  std::array<uint8_t, 32> digest() const;
  std::string hex() const;  // 64 lowercase hex digits

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// SHA-256 of `bytes` in lowercase hex.
std::string content_hash(std::string_view bytes);

}  // namespace rt
