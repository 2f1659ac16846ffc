// deepep_topology: prints the host's topology as deepep discovers it (NUMA nodes, GPUs and NICs with
// their NUMA node, the NVLink matrix), with what hwloc and NVML could or could not say.
#include <cstdio>

#include "deepep/topology.h"

int main() {
  std::fputs(deepep::discover_topology().to_string().c_str(), stdout);
  return 0;
}
