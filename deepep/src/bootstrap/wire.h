// A tiny byte serializer for control messages (little-endian host order: all ranks run the same build).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "rt/error.h"

namespace deepep::wire {

class Writer {
 public:
  template <class T>
  Writer& put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
    return *this;
  }
  Writer& put_str(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_ += s;
    return *this;
  }
  template <class T>
  Writer& put_vec(const std::vector<T>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
    return *this;
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : data_(in.data()), size_(in.size()) {}
  Reader(const void* data, size_t size) : data_(static_cast<const char*>(data)), size_(size) {}
  template <class T>
  T get() {
    T value;
    need(sizeof(T));
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string get_str() {
    const uint32_t n = get<uint32_t>();
    need(n);
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }
  template <class T>
  std::vector<T> get_vec() {
    const uint32_t n = get<uint32_t>();
    need(size_t(n) * sizeof(T));
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), data_ + pos_, size_t(n) * sizeof(T));
    pos_ += size_t(n) * sizeof(T);
    return v;
  }
  bool done() const { return pos_ == size_; }

 private:
  void need(size_t n) const { RT_ICHECK(pos_ + n <= size_, "truncated control message (", size_, " bytes)"); }
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace deepep::wire
