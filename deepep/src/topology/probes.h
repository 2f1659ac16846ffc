// The two halves of discover_topology() (topology.cc): each fills its part of the Topology, or
// leaves it empty and says why in its status.
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "deepep/topology.h"

namespace deepep::detail {

// Opens a library loaded at run time; on failure, `why` is "<what> not found (<file>: <dlerror>)".
inline void* open_library(const char* file, const char* what, std::string& why) {
  void* lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    why = std::string(what) + " not found (" + file + ": " + (e ? e : "?") + ")";
  }
  return lib;
}

// Resolves `name` into the function pointer `fn`; false (and fn null) when the library lacks it.
template <class Fn>
bool load_symbol(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

// NUMA nodes, GPUs and NICs through hwloc (libhwloc.so.15, loaded at run time).
void probe_hwloc(Topology& topology);
// The NVLink matrix through NVML (libnvidia-ml.so.1, loaded at run time).
void probe_nvml(Topology& topology);

}  // namespace deepep::detail
