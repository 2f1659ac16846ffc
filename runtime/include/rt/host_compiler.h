// JIT of C++ for the CPU backend: generated source -> the host compiler -> a shared library, cached
// on disk by content (DESIGN: "shape-specialized JIT with a content-addressed disk cache").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rt/embedded_file.h"

namespace rt {

struct HostCompileOptions {
  std::vector<std::string> extra_flags;  // after the defaults, before TL_CXXFLAGS
  bool openmp = true;
};

// An open shared library (dlopen); closed when the last owner lets go. Closing a library that ran
// OpenMP code can unload libgomp under its worker threads, so compile_cxx never closes its own.
class SharedLibrary {
 public:
  explicit SharedLibrary(const std::string& path);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The address of `name`; an internal error when the library lacks it (generated code and its
  // caller disagree).
  void* symbol(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* handle_;
};

// Compiles `source` (which may #include the `headers`, by their paths) into a shared library and
// loads it, or loads the cached one. Flags: -std=c++20 -O3 -march=native -fPIC -shared [-fopenmp].
// A library is loaded once per process and stays loaded: unloading code that started OpenMP
// threads is unsafe. A compile error is an internal error carrying the compiler's output.
std::shared_ptr<SharedLibrary> compile_cxx(const std::string& source, const std::vector<EmbeddedFile>& headers,
                                           const HostCompileOptions& options = {});

// `--version` output of the compiler compile_cxx uses (run once per compiler and process).
const std::string& host_compiler_version();
// How many times this process has run the compiler on a source: a cache hit leaves it unchanged.
int64_t host_compile_count();

}  // namespace rt
