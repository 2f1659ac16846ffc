// GroupNetwork (topology.h): the model of a group's network that the collectives' Auto simulates.
#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "deepep/topology.h"
#include "rt/error.h"

namespace deepep {

const char* name(Fabric fabric) {
  switch (fabric) {
    case Fabric::SharedMemory: return "shared memory";
    case Fabric::NVLink: return "NVLink";
    case Fabric::PCIe: return "PCIe";
  }
  return "?";
}

LinkSpeed default_speed(Fabric fabric) {
  switch (fabric) {
    case Fabric::SharedMemory: return {5e9, 10e-6};
    case Fabric::NVLink: return {450e9, 1e-6};
    case Fabric::PCIe: return {25e9, 2e-6};
  }
  return {};
}

LinkSpeed default_nic_speed() { return {25e9, 2e-6}; }

namespace {

std::string check_speed(const LinkSpeed& s, const char* what) {
  if (!(std::isfinite(s.bandwidth) && s.bandwidth > 0))
    return rt::str(what, " bandwidth ", s.bandwidth, " B/s must be positive and finite");
  if (!(std::isfinite(s.latency) && s.latency >= 0))
    return rt::str(what, " latency ", s.latency, " s must be finite and not negative");
  return "";
}

// "25 GB/s, 2 us"
std::string speed_string(const LinkSpeed& s) {
  std::ostringstream os;
  os << s.bandwidth * 1e-9 << " GB/s, " << s.latency * 1e6 << " us";
  return os.str();
}

}  // namespace

std::string GroupNetwork::check() const {
  if (node_of_rank.empty()) return "no ranks";
  if (nics_per_node.empty()) return "no nodes";
  std::vector<int> ranks_on(nics_per_node.size(), 0);
  for (size_t r = 0; r < node_of_rank.size(); ++r) {
    const int n = node_of_rank[r];
    if (n < 0 || n >= nodes()) return rt::str("rank ", r, " is on node ", n, " of ", nodes());
    ++ranks_on[size_t(n)];
  }
  for (int n = 0; n < nodes(); ++n) {
    if (ranks_on[size_t(n)] == 0) return rt::str("node ", n, " has no rank");
    if (nics_per_node[size_t(n)] < 1) return rt::str("node ", n, " has ", nics_per_node[size_t(n)], " NICs (at least 1)");
  }
  std::string err = check_speed(link, "the link");
  if (err.empty()) err = check_speed(nic, "the NIC");
  return err;
}

std::string GroupNetwork::to_string() const {
  std::vector<int> ranks_on(nics_per_node.size(), 0);
  for (int n : node_of_rank)
    if (n >= 0 && n < nodes()) ++ranks_on[size_t(n)];
  const bool even_ranks = std::adjacent_find(ranks_on.begin(), ranks_on.end(), std::not_equal_to<>()) == ranks_on.end();
  const bool even_nics =
      std::adjacent_find(nics_per_node.begin(), nics_per_node.end(), std::not_equal_to<>()) == nics_per_node.end();
  std::ostringstream os;
  os << nodes() << (nodes() == 1 ? " node" : " nodes");
  if (even_ranks && !ranks_on.empty()) {
    os << " x " << ranks_on[0] << " ranks";
  } else {
    os << " of";
    for (int k : ranks_on) os << " " << k;
    os << " ranks";
  }
  os << " (" << name(fabric) << " " << speed_string(link) << ")";
  if (nodes() > 1) {
    if (even_nics) {
      os << ", " << nics_per_node[0] << (nics_per_node[0] == 1 ? " NIC" : " NICs") << " per node";
    } else {
      os << ", NICs per node";
      for (int k : nics_per_node) os << " " << k;
    }
    os << " (" << speed_string(nic) << ")";
  }
  return os.str();
}

GroupNetwork uniform_network(int nodes, int ranks_per_node, Fabric fabric, int nics_per_node, LinkSpeed nic) {
  RT_USER_CHECK(nodes >= 1 && ranks_per_node >= 1 && nics_per_node >= 1, "deepep uniform_network: ", nodes,
                " nodes of ", ranks_per_node, " ranks with ", nics_per_node, " NICs each (at least 1 of each)");
  GroupNetwork net;
  for (int r = 0; r < nodes * ranks_per_node; ++r) net.node_of_rank.push_back(r / ranks_per_node);
  net.nics_per_node.assign(size_t(nodes), nics_per_node);
  net.fabric = fabric;
  net.link = default_speed(fabric);
  net.nic = nic;
  const std::string err = net.check();
  RT_USER_CHECK(err.empty(), "deepep uniform_network: ", err);
  return net;
}

GroupNetwork host_gpu_network(const Topology& topology) {
  const int gpus = std::max(int(topology.gpus.size()), int(topology.nvml_bus_ids.size()));
  RT_USER_CHECK(gpus > 0, "deepep host_gpu_network: this host has no GPU (", topology.nvml_status, ")");
  GroupNetwork net = uniform_network(1, gpus, Fabric::PCIe, std::max<int>(1, int(topology.nics.size())));
  // NVLink when NVML knows every pair connected; the bandwidth of the GPU with the fewest links.
  const int known = int(topology.links.size());
  bool all_connected = known == gpus && gpus > 1;
  int fewest_links = 0;
  for (int i = 0; i < known && all_connected; ++i) {
    int links = topology.switch_links[size_t(i)];
    for (int j = 0; j < known; ++j) {
      if (j != i && !topology.nvlink_connected(i, j)) all_connected = false;
      links += topology.links[size_t(i)][size_t(j)];
    }
    fewest_links = i == 0 ? links : std::min(fewest_links, links);
  }
  if (all_connected) {
    net.fabric = Fabric::NVLink;
    net.link = {25e9 * fewest_links, default_speed(Fabric::NVLink).latency};
  }
  return net;
}

}  // namespace deepep
