#include "buffer/internode.h"

#include <algorithm>

#include "deepep/group.h"

namespace deepep::detail {

NodeMap::NodeMap(const Group& group) : ranks(size_t(group.num_nodes())) {
  for (const PeerInfo& p : group.peers()) {
    node_of.push_back(p.node);
    local_of.push_back(p.local_rank);
    ranks[size_t(p.node)].push_back(p.rank);  // peers are in rank order, so local ranks follow
  }
}

int NodeMap::forwarder(int src, int node) const {
  const std::vector<int>& in_node = ranks[size_t(node)];
  return in_node[size_t(local_of[size_t(src)]) % in_node.size()];
}

void route_sources(InternodeRoute& route, const NodeMap& nodes, int me, const std::vector<uint8_t>& in_rank, int64_t tokens) {
  const int R = int(nodes.node_of.size()), mine = nodes.node_of[size_t(me)];
  route.node_lists.assign(size_t(nodes.num_nodes()), {});
  route.own_offset.assign(size_t(tokens) + 1, 0);
  std::vector<uint8_t> hit(size_t(nodes.num_nodes()));
  for (int64_t t = 0; t < tokens; ++t) {
    std::fill(hit.begin(), hit.end(), 0);
    int64_t own = 0;
    for (int r = 0; r < R; ++r)
      if (in_rank[size_t(t * R + r)]) {
        hit[size_t(nodes.node_of[size_t(r)])] = 1;
        own += nodes.node_of[size_t(r)] == mine;
      }
    for (int n = 0; n < nodes.num_nodes(); ++n)
      if (hit[size_t(n)] && n != mine) route.node_lists[size_t(n)].push_back(int32_t(t));
    route.own_offset[size_t(t) + 1] = route.own_offset[size_t(t)] + own;
  }
}

}  // namespace deepep::detail
