// The two halves of discover_topology() (topology.cc): each fills its part of the Topology, or
// leaves it empty and says why in its status.
#pragma once

#include "deepep/topology.h"

namespace deepep::detail {

// NUMA nodes, GPUs and NICs through hwloc (libhwloc.so.15, loaded at run time).
void probe_hwloc(Topology& topology);
// The NVLink matrix through NVML (libnvidia-ml.so.1, loaded at run time).
void probe_nvml(Topology& topology);

}  // namespace deepep::detail
