#include "deepep/topology.h"

#include <cstdio>
#include <sstream>

#include "topology/probes.h"

namespace deepep {

bool Topology::nvlink_connected(int i, int j) const {
  const int n = int(links.size());
  if (i < 0 || j < 0 || i >= n || j >= n || i == j) return false;
  return links[size_t(i)][size_t(j)] > 0 || (switch_links[size_t(i)] > 0 && switch_links[size_t(j)] > 0);
}

std::string Topology::to_string() const {
  std::ostringstream os;
  os << "topology (" << hwloc_status << "; " << nvml_status << ")\n";
  for (const NumaNode& n : numa_nodes) {
    os << "  NUMA node " << n.os_index << ": " << n.cpus.size() << " CPUs";
    if (!n.cpus.empty()) os << " (" << n.cpus.front() << ".." << n.cpus.back() << ")";
    if (n.memory_bytes > 0) os << ", " << (n.memory_bytes >> 20) << " MiB";
    os << "\n";
  }
  auto devices = [&](const char* what, const std::vector<PciDevice>& list) {
    for (const PciDevice& d : list) {
      char ids[32];
      std::snprintf(ids, sizeof(ids), "%04x:%04x class %04x", unsigned(d.vendor_id), unsigned(d.device_id),
                    unsigned(d.class_id));
      os << "  " << what << " " << d.bus_id << " [" << ids << "] NUMA " << d.numa_node << "\n";
    }
  };
  devices("GPU", gpus);
  devices("NIC", nics);
  if (!links.empty()) {
    os << "  NVLink (links to each GPU, NVML order; S: links to NVSwitches)\n";
    for (size_t i = 0; i < links.size(); ++i) {
      os << "    GPU" << i << " " << nvml_bus_ids[i] << ":";
      for (int l : links[i]) os << " " << l;
      os << "  S " << switch_links[i] << "\n";
    }
  }
  return os.str();
}

Topology discover_topology() {
  Topology t;
  detail::probe_hwloc(t);
  detail::probe_nvml(t);
  return t;
}

}  // namespace deepep
