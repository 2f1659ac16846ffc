// What this host is made of, as communication cares: NUMA nodes and their CPUs, the GPUs and NICs on
// PCIe with the NUMA node each hangs off, and the NVLink connections between the GPUs.
//
// Sources: hwloc (loaded at run time, libhwloc.so.15) for NUMA and PCIe, NVML (loaded at run time,
// libnvidia-ml.so.1) for NVLink. Either may be missing on a machine: the topology then says why in
// `hwloc_status` / `nvml_status` and leaves that part empty; nothing throws for a missing library.
// GroupNetwork below is what the collectives' Auto decides on (collectives.h, choose_all_reduce):
// a Comm builds it at creation from the group's nodes and each node's NICs as discovered here.
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

// What joins the ranks of one node: host memory (the shm transport, CPU tensors), or GPUs' NVLink
// or PCIe.
enum class Fabric { SharedMemory, NVLink, PCIe };
const char* name(Fabric fabric);

struct LinkSpeed {
  double bandwidth = 0;  // bytes per second, each direction
  double latency = 0;    // seconds
};

// Assumed speeds, used where nothing better is known (docs/deepep.md, "How Auto decides"):
// SharedMemory 5 GB/s per rank, 10 us (every byte is copied into a ring and out of it: half of one
// core's memcpy here; a futex wake-up per message); NVLink 450 GB/s per GPU, 1 us (H100/H200: 18
// links of 25 GB/s); PCIe 25 GB/s per GPU, 2 us (gen4 x16); a NIC 25 GB/s (200 Gb/s), 2 us (RDMA).
LinkSpeed default_speed(Fabric fabric);
LinkSpeed default_nic_speed();

// The group's own network as Auto models it: each rank's node, the fabric inside the nodes (one
// link per rank to the node's switch), and per node the NICs its ranks share between nodes (the
// rank of local index l uses NIC l % nics; one non-blocking switch joins all NICs). The simulator
// runs the candidate algorithms on it (sim::group_network). Every rank of a Comm holds the same one.
struct GroupNetwork {
  std::vector<int> node_of_rank;   // Group::node of each rank: nodes numbered 0.. in order of first rank
  std::vector<int> nics_per_node;  // one entry per node, at least 1
  Fabric fabric = Fabric::SharedMemory;
  LinkSpeed link = default_speed(Fabric::SharedMemory);  // each rank's link inside its node
  LinkSpeed nic = default_nic_speed();                     // each NIC

  int ranks() const { return int(node_of_rank.size()); }
  int nodes() const { return int(nics_per_node.size()); }
  // Why this cannot describe a group ("" when it can): no ranks, a node number out of range or with
  // no rank, fewer than one NIC, a bandwidth not positive or a latency negative (or not finite).
  std::string check() const;
  // One line: "2 nodes x 8 ranks (NVLink 450 GB/s, 1 us), 8 NICs per node (25 GB/s, 2 us)".
  std::string to_string() const;
};

// `nodes` nodes of `ranks_per_node` consecutive ranks joined by `fabric` at its default speed, with
// `nics_per_node` NICs of speed `nic` each (synthetic topologies: tests, tables, tools).
GroupNetwork uniform_network(int nodes, int ranks_per_node, Fabric fabric, int nics_per_node,
                             LinkSpeed nic = default_nic_speed());
// This host's GPUs as one node: NVLink when NVML reports every pair connected (25 GB/s per link,
// the GPU with the fewest links deciding; NVSwitch links counted), PCIe otherwise. Its NICs as
// hwloc found them (at least one). User error when the topology has no GPU.
GroupNetwork host_gpu_network(const Topology& topology);

}  // namespace deepep
