// Networks and their routing: NVLink domains, 3-D tori, two-level fat-trees.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "deepep/simulator.h"
#include "rt/error.h"

namespace deepep::sim {

Network::Network(int gpus, std::string name) : gpus_(gpus), nodes_(gpus), name_(std::move(name)), out_(size_t(gpus)) {
  RT_USER_CHECK(gpus >= 1, "deepep::sim::Network: ", gpus, " GPUs");
}

int Network::add_switch() {
  out_.emplace_back();
  return nodes_++;
}

void Network::connect(int a, int b, double bandwidth, double latency) {
  RT_ICHECK(a >= 0 && b >= 0 && a < nodes_ && b < nodes_ && a != b, "link ", a, " - ", b);
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    out_[size_t(from)].push_back({to, int(links_.size())});
    links_.push_back({from, to, bandwidth, latency});
  }
}

int Network::link(int a, int b) const {
  for (auto [to, id] : out_[size_t(a)])
    if (to == b) return id;
  return -1;
}

std::vector<int> Network::route(int src, int dst) const {
  if (src == dst) return {};
  return router_(*this, src, dst);
}

// A path given as the nodes it visits, as the links it crosses.
static std::vector<int> path_links(const Network& net, const std::vector<int>& nodes) {
  std::vector<int> links;
  for (size_t i = 0; i + 1 < nodes.size(); ++i) {
    const int l = net.link(nodes[i], nodes[i + 1]);
    RT_ICHECK(l >= 0, "no link ", nodes[i], " -> ", nodes[i + 1], " in ", net.name());
    links.push_back(l);
  }
  return links;
}

Network nvlink_domain(int gpus, double bandwidth, double latency) {
  Network net(gpus, "NVLink domain of " + std::to_string(gpus));
  const int sw = net.add_switch();
  for (int g = 0; g < gpus; ++g) net.connect(g, sw, bandwidth, latency);
  net.set_router([sw](const Network& n, int s, int d) { return path_links(n, {s, sw, d}); });
  return net;
}

Network torus3d(int x, int y, int z, double bandwidth, double latency) {
  RT_USER_CHECK(x >= 1 && y >= 1 && z >= 1, "deepep::sim::torus3d: ", x, " x ", y, " x ", z);
  Network net(x * y * z, "3-D torus " + std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z));
  const int dims[3] = {x, y, z};
  auto id = [=](int i, int j, int k) { return (k * y + j) * x + i; };
  for (int k = 0; k < z; ++k)
    for (int j = 0; j < y; ++j)
      for (int i = 0; i < x; ++i) {
        const int me = id(i, j, k);
        // One link per neighbour and dimension (a ring of 2 has one neighbour, not two links).
        if (x > 1 && (x > 2 || i == 0)) net.connect(me, id((i + 1) % x, j, k), bandwidth, latency);
        if (y > 1 && (y > 2 || j == 0)) net.connect(me, id(i, (j + 1) % y, k), bandwidth, latency);
        if (z > 1 && (z > 2 || k == 0)) net.connect(me, id(i, j, (k + 1) % z), bandwidth, latency);
      }
  net.set_router([=](const Network& n, int s, int d) {
    int c[3] = {s % x, (s / x) % y, s / (x * y)};
    const int t[3] = {d % x, (d / x) % y, d / (x * y)};
    std::vector<int> nodes = {s};
    for (int dim = 0; dim < 3; ++dim) {
      const int size = dims[dim];
      const int fwd = ((t[dim] - c[dim]) % size + size) % size;
      const int step = fwd <= size - fwd ? 1 : size - 1;  // the shorter way round
      while (c[dim] != t[dim]) {
        c[dim] = (c[dim] + step) % size;
        nodes.push_back(id(c[0], c[1], c[2]));
      }
    }
    return path_links(n, nodes);
  });
  return net;
}

Network fat_tree(int gpus, int gpus_per_node, int leaf_radix, int spines, double nic_bandwidth,
                 double nvlink_bandwidth, double latency) {
  RT_USER_CHECK(gpus_per_node >= 1 && leaf_radix >= 1 && spines >= 1, "deepep::sim::fat_tree: bad shape");
  Network net(gpus, "fat-tree of " + std::to_string(gpus) + " GPUs (nodes of " + std::to_string(gpus_per_node) + ")");
  const int nodes = (gpus + gpus_per_node - 1) / gpus_per_node;
  const int leaves = (gpus + leaf_radix - 1) / leaf_radix;
  std::vector<int> nvswitch(static_cast<size_t>(nodes)), leaf(static_cast<size_t>(leaves)), spine(static_cast<size_t>(spines));
  for (int& s : nvswitch) s = net.add_switch();
  for (int& s : leaf) s = net.add_switch();
  for (int& s : spine) s = net.add_switch();
  for (int g = 0; g < gpus; ++g) {
    net.connect(g, nvswitch[size_t(g / gpus_per_node)], nvlink_bandwidth, latency / 2);
    net.connect(g, leaf[size_t(g / leaf_radix)], nic_bandwidth, latency);
  }
  // Each leaf has as much bandwidth up as down (non-blocking), spread over the spines.
  const double up = nic_bandwidth * leaf_radix / spines;
  for (int l = 0; l < leaves; ++l)
    for (int s = 0; s < spines; ++s) net.connect(leaf[size_t(l)], spine[size_t(s)], up, latency);
  net.set_router([=](const Network& n, int s, int d) {
    if (s / gpus_per_node == d / gpus_per_node) return path_links(n, {s, nvswitch[size_t(s / gpus_per_node)], d});
    const int ls = leaf[size_t(s / leaf_radix)], ld = leaf[size_t(d / leaf_radix)];
    if (ls == ld) return path_links(n, {s, ls, d});
    // Spread flows over the spines by a hash of their endpoints (static ECMP). A well-mixed hash
    // matters: hierarchical dispatch pairs every source with the same local index on each node,
    // which a linear one (s * 31 + d) folds onto two spines.
    uint32_t h = uint32_t(s) * 0x9E3779B1u + uint32_t(d) * 0x85EBCA77u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    const int sp = spine[size_t(h % uint32_t(spines))];
    return path_links(n, {s, ls, sp, ld, d});
  });
  return net;
}

Network group_network(const std::vector<int>& node_of, const std::vector<int>& nics, double link_bandwidth,
                      double link_latency, double nic_bandwidth, double nic_latency) {
  RT_USER_CHECK(link_bandwidth > 0 && nic_bandwidth > 0 && link_latency >= 0 && nic_latency >= 0,
                "deepep::sim::group_network: bandwidths must be positive and latencies not negative (link ",
                link_bandwidth, " B/s ", link_latency, " s, NIC ", nic_bandwidth, " B/s ", nic_latency, " s)");
  const int gpus = int(node_of.size()), nodes = int(nics.size());
  Network net(gpus, "group network of " + std::to_string(gpus) + " ranks on " + std::to_string(nodes) + " nodes");
  std::vector<int> node_switch(static_cast<size_t>(nodes)), local(static_cast<size_t>(gpus));
  std::vector<int> in_node(static_cast<size_t>(nodes), 0);
  std::vector<std::vector<int>> nic_switch(static_cast<size_t>(nodes));
  for (int g = 0; g < gpus; ++g) {
    const int n = node_of[size_t(g)];
    RT_USER_CHECK(n >= 0 && n < nodes, "deepep::sim::group_network: rank ", g, " on node ", n, " of ", nodes);
    local[size_t(g)] = in_node[size_t(n)]++;
  }
  for (int n = 0; n < nodes; ++n)
    RT_USER_CHECK(in_node[size_t(n)] > 0 && nics[size_t(n)] >= 1, "deepep::sim::group_network: node ", n, " has ",
                  in_node[size_t(n)], " ranks and ", nics[size_t(n)], " NICs (at least one of each)");
  for (int& s : node_switch) s = net.add_switch();
  const int core = nodes > 1 ? net.add_switch() : -1;
  for (int n = 0; n < nodes && nodes > 1; ++n)
    for (int k = 0; k < nics[size_t(n)]; ++k) {
      nic_switch[size_t(n)].push_back(net.add_switch());
      net.connect(nic_switch[size_t(n)].back(), core, nic_bandwidth, nic_latency / 2);
    }
  auto nic_of = [=](int g) {  // copies: the router outlives this function
    const int n = node_of[size_t(g)];
    return nic_switch[size_t(n)][size_t(local[size_t(g)] % nics[size_t(n)])];
  };
  for (int g = 0; g < gpus; ++g) {
    net.connect(g, node_switch[size_t(node_of[size_t(g)])], link_bandwidth, link_latency / 2);
    if (nodes > 1) net.connect(g, nic_of(g), link_bandwidth, 0);
  }
  net.set_router([=](const Network& n, int s, int d) {
    if (node_of[size_t(s)] == node_of[size_t(d)]) return path_links(n, {s, node_switch[size_t(node_of[size_t(s)])], d});
    return path_links(n, {s, nic_of(s), core, nic_of(d), d});
  });
  return net;
}

}  // namespace deepep::sim
