// Helpers the CPU code generator's output calls beyond tl/device/scalar.h (which host and device
// share): atomic accumulation into any element type, aligned heap buffers for tensors and tiles
// too large for the stack, and the failure record through which a kernel's entry reports errors.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tl/device/numeric.h"
#include "tl/device/scalar.h"

namespace tl::cpu {

// *p += v, atomically with respect to other threads; any element type (narrow floats through
// their bits with a compare-and-swap loop).
template <class T>
inline void atomic_add(T* p, float v) {
  if constexpr (std::is_arithmetic_v<T>) {
    std::atomic_ref<T>(*p).fetch_add(static_cast<T>(v), std::memory_order_relaxed);
  } else {
    using Bits = decltype(p->bits);
    std::atomic_ref<Bits> bits(p->bits);
    Bits expected = bits.load(std::memory_order_relaxed);
    while (!bits.compare_exchange_weak(expected, tl::from_float<T>(T::from_bits(expected).to_float() + v).bits, std::memory_order_relaxed)) {
    }
  }
}

// An error of generated code at one of its sites: the code generator's number for a statement
// (CpuSource::sites), which the caller turns into a source location.
class SiteError : public std::runtime_error {
 public:
  SiteError(int site, const std::string& message) : std::runtime_error(message), site_(site) {}
  int site() const { return site_; }

 private:
  int site_;
};

// How a kernel's entry reports what stopped it to its caller. A C++ exception must not leave an
// OpenMP region (std::terminate) nor the extern "C" entry: the generated code catches each one
// and records it here, at the site of the region or entry that caught it (a SiteError has its own).
class Failure {
 public:
  // Thrown after a region once a failure is recorded, so that the code after the region does not
  // run on what the region left unfinished.
  struct Stop {};

  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  int site() const { return site_; }
  const char* message() const { return message_; }

  // In a catch block: records the exception being handled, unless a failure is recorded already
  // (the first one of concurrent blocks wins; a Stop comes after one).
  void record(int site) noexcept {
    if (failed_.exchange(true)) return;
    try {
      throw;
    } catch (const SiteError& e) {
      set(e.site(), "", e.what());
    } catch (const std::exception& e) {
      set(site, "a C++ exception was thrown: ", e.what());
    } catch (...) {
      set(site, "a C++ exception that is not a std::exception was thrown", "");
    }
  }
  void check() const {
    if (failed()) throw Stop{};
  }

 private:
  void set(int site, const char* prefix, const char* what) {
    site_ = site;
    std::snprintf(message_, sizeof message_, "%s%s", prefix, what);
  }

  std::atomic<bool> failed_{false};
  int site_ = -1;
  char message_[512] = {};
};

// A run-time integer divisor of //, % or T.truncdiv / T.truncmod, checked: 0 fails at site (x86 would trap the process).
template <class T>
inline T divisor(T b, int site) {
  if (b == T(0)) throw SiteError(site, "integer division by zero");
  return b;
}

// a * b for the size of a buffer sized by run-time extents: a product past int64 (which C++ leaves
// undefined; it would wrap to a wrong size) fails at site, naming the buffer (what, as for alloc).
inline int64_t size_mul(int64_t a, int64_t b, int site, const char* what) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product)) {
    char message[256];
    std::snprintf(message, sizeof message, "allocating %s failed: %lld x %lld elements is more than int64 holds", what, static_cast<long long>(a),
                  static_cast<long long>(b));
    throw SiteError(site, message);
  }
  return product;
}

// A 64-byte aligned array of n elements, freed at the end of its scope. what: the buffer, for the
// error when the allocation fails ("shared tile 'S'") at site.
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
inline std::unique_ptr<T[], AlignedFree> alloc(int64_t n, int site, const char* what) {
  char message[256];
  // A count from run-time sizes may be negative or past what size_t holds: that fails too.
  if (static_cast<uint64_t>(n) > (SIZE_MAX - 63) / sizeof(T)) {
    std::snprintf(message, sizeof message, "allocating %lld elements of %zu bytes for %s failed", static_cast<long long>(n), sizeof(T), what);
    throw SiteError(site, message);
  }
  size_t bytes = static_cast<size_t>(n > 0 ? n : 1) * sizeof(T);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) {
    std::snprintf(message, sizeof message, "allocating %zu bytes for %s failed", bytes, what);
    throw SiteError(site, message);
  }
  return std::unique_ptr<T[], AlignedFree>(static_cast<T*>(p));
}

}  // namespace tl::cpu
