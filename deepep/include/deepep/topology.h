// What this host is made of, as communication cares: NUMA nodes and their CPUs, the GPUs and NICs on
// PCIe with the NUMA node each hangs off, and the NVLink connections between the GPUs.
//
// Sources: hwloc (loaded at run time, libhwloc.so.15) for NUMA and PCIe, NVML (loaded at run time,
// libnvidia-ml.so.1) for NVLink. Either may be missing on a machine: the topology then says why in
// `hwloc_status` / `nvml_status` and leaves that part empty; nothing throws for a missing library.
// Routes and collective algorithms are to be chosen from this (not done yet: every transport is
// still the shm ring).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepep {

struct NumaNode {
  int os_index = 0;
  std::vector<int> cpus;      // OS indices of the processing units
  int64_t memory_bytes = 0;   // local memory (0 when hwloc does not know)
};

struct PciDevice {
  enum class Kind { Gpu, Nic };
  Kind kind = Kind::Gpu;
  std::string bus_id;  // "0000:3b:00.0"
  int vendor_id = 0, device_id = 0, class_id = 0;
  int numa_node = -1;  // OS index of the closest NUMA node; -1 when unknown
};

struct Topology {
  std::vector<NumaNode> numa_nodes;
  std::vector<PciDevice> gpus;  // NVIDIA display/3D controllers, in PCI bus order
  std::vector<PciDevice> nics;  // Ethernet and InfiniBand controllers
  std::string hwloc_status;     // "hwloc 2.9.0", or why NUMA/PCIe are unknown
  // NVLink (NVML): links[i][j] = links from GPU i straight to GPU j; switch_links[i] = links from
  // GPU i to NVSwitches (GPUs both with switch links reach each other through the switch fabric).
  // Indices follow NVML's device order; nvml_bus_ids[i] is that GPU's bus id.
  std::vector<std::string> nvml_bus_ids;
  std::vector<std::vector<int>> links;
  std::vector<int> switch_links;
  std::string nvml_status;  // "NVML 12.x, 8 GPUs", or why NVLink is unknown

  // Whether GPU i and GPU j (NVML order) talk over NVLink, directly or through NVSwitches.
  bool nvlink_connected(int i, int j) const;
  // A readable report: NUMA nodes, GPUs and NICs with their NUMA node, the NVLink matrix.
  std::string to_string() const;
};

// Reads the host's topology (hwloc and NVML, each when present). Never throws for a missing
// library; an internal error only when a present library misbehaves.
Topology discover_topology();

}  // namespace deepep
