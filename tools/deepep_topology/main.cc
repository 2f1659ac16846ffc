// deepep_topology: prints the host's topology as deepep discovers it (NUMA nodes, GPUs and NICs with
// their NUMA node, the NVLink matrix), with what hwloc and NVML could or could not say, then what
// the collectives' Auto picks by size on this host's GPUs (when it has some) and, with --table, on
// synthetic topologies (the table of docs/deepep.md, "How Auto decides").
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "deepep/collectives.h"
#include "deepep/topology.h"

namespace {

std::string human(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + " " + units[u];
}

// One row per size: the all-reduce's choice and every candidate's predicted time.
void print_decisions(const deepep::GroupNetwork& net, const std::vector<int64_t>& sizes) {
  std::printf("\nall_reduce Auto on %s\n", net.to_string().c_str());
  for (int64_t bytes : sizes)
    std::printf("  %8s  %s\n", human(bytes).c_str(), deepep::choose_all_reduce(net, bytes).to_string().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const bool table = argc > 1 && std::strcmp(argv[1], "--table") == 0;
  if (argc > 2 || (argc == 2 && !table)) {
    std::fprintf(stderr, "usage: %s [--table]\n", argv[0]);
    return 2;
  }
  const deepep::Topology topology = deepep::discover_topology();
  std::fputs(topology.to_string().c_str(), stdout);
  const std::vector<int64_t> sizes = {4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 64 << 20, 1 << 30};
  if (!topology.gpus.empty() || !topology.nvml_bus_ids.empty())
    print_decisions(deepep::host_gpu_network(topology), sizes);
  if (!table) return 0;
  using deepep::Fabric;
  const deepep::LinkSpeed slow_nic{1.25e9, 10e-6}, fast_nic{50e9, 2e-6};
  print_decisions(deepep::uniform_network(1, 4, Fabric::SharedMemory, 1), sizes);
  print_decisions(deepep::uniform_network(1, 8, Fabric::NVLink, 8), sizes);
  print_decisions(deepep::uniform_network(1, 8, Fabric::PCIe, 8), sizes);
  for (int nodes : {2, 8, 32})
    for (const deepep::LinkSpeed& nic : {fast_nic, deepep::default_nic_speed(), slow_nic})
      print_decisions(deepep::uniform_network(nodes, 8, Fabric::NVLink, 8, nic), sizes);
  print_decisions(deepep::uniform_network(2, 2, Fabric::SharedMemory, 1), sizes);
  print_decisions(deepep::uniform_network(2, 2, Fabric::SharedMemory, 1, slow_nic), sizes);
  return 0;
}
