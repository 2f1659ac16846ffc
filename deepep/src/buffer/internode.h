// The hierarchical route of dispatch and combine of CPU tensors, for a group spanning several nodes
// (DeepEP's internode normal mode). Dispatch: a token crosses to another node once per destination
// node, to its forwarder there (the rank with the sender's local index); the forwarder hands it to
// every rank of its node that holds one of its experts. Ranks of the sender's own node get it
// straight. Combine runs the route backwards: the ranks of a node return their rows of a token to
// its forwarder, which reduces them and sends one row per token back to the source.
//
// Two exchanges each (dispatch.cc, combine.cc): dispatch's first moves the direct rows and the
// crossing legs, its second the forwards inside each node; combine's first gathers rows at the
// forwarders, its second sends the reduced rows across and the direct rows back. Every count is
// known to every rank from the dispatch's agreement (tokens per destination rank and per
// destination node), so each message's size is known on both sides, as on the flat route.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepep {

class Group;

namespace detail {

// The group's nodes as the route sees them.
struct NodeMap {
  explicit NodeMap(const Group& group);
  int num_nodes() const { return int(ranks.size()); }
  // The rank of `node` that receives and forwards src's tokens there: the one with src's local
  // index (DeepEP's rule), modulo the node's size when the nodes are unequal.
  int forwarder(int src, int node) const;
  // Whether `f` forwards src's tokens in f's node (src lies on another node).
  bool forwards_for(int f, int src) const {
    return node_of[size_t(f)] != node_of[size_t(src)] && forwarder(src, node_of[size_t(f)]) == f;
  }
  std::vector<int> node_of, local_of;   // per rank
  std::vector<std::vector<int>> ranks;  // per node, in rank order
};

// One rank's part of a hierarchical dispatch, kept in its handle for combine and cached dispatches.
struct InternodeRoute {
  // As a source: per node, this rank's tokens with a destination there, in token order (its own
  // node's list is empty: those tokens go straight to each rank).
  std::vector<std::vector<int32_t>> node_lists;
  // As a source in combine: per token, its first slot among the rows returned by the ranks of this
  // rank's node (one per rank it went to there, in rank order); [tokens + 1].
  std::vector<int64_t> own_offset;
  // As a forwarder: the tokens this rank stages for the sources it forwards for, source by source
  // in rank order, each source's in its token order. stage_offset[s]: the first of source s's; [size + 1].
  std::vector<int64_t> stage_offset;
  // Per rank of this node (indexed by rank; other ranks' lists are empty): the staged tokens
  // forwarded there, in staging order, and each one's slot in combine's reduction here.
  std::vector<std::vector<int32_t>> forward_lists;
  std::vector<std::vector<int64_t>> forward_slots;
  // Per staged token: its first slot (one per rank of this node it went to, in rank order); [staged + 1].
  std::vector<int64_t> slot_offset;
};

// The source side: node_lists and own_offset from in_rank ([tokens, size]: token t goes to rank r).
void route_sources(InternodeRoute& route, const NodeMap& nodes, int me, const std::vector<uint8_t>& in_rank, int64_t tokens);
// The forwarder side, once the staged tokens are known: `staged_from[s]` tokens staged for each
// source, and `goes_to(j, r)` whether staged token j goes to rank r of this node.
template <class GoesTo>
void route_forwards(InternodeRoute& route, const NodeMap& nodes, int me, const std::vector<int64_t>& staged_from,
                    GoesTo&& goes_to) {
  const int R = int(nodes.node_of.size());
  route.stage_offset.assign(size_t(R) + 1, 0);
  for (int s = 0; s < R; ++s) route.stage_offset[size_t(s) + 1] = route.stage_offset[size_t(s)] + staged_from[size_t(s)];
  const int64_t staged = route.stage_offset[size_t(R)];
  route.forward_lists.assign(size_t(R), {});
  route.forward_slots.assign(size_t(R), {});
  route.slot_offset.assign(size_t(staged) + 1, 0);
  int64_t slot = 0;
  for (int64_t j = 0; j < staged; ++j) {
    for (int r : nodes.ranks[size_t(nodes.node_of[size_t(me)])])
      if (goes_to(j, r)) {
        route.forward_lists[size_t(r)].push_back(int32_t(j));
        route.forward_slots[size_t(r)].push_back(slot++);
      }
    route.slot_offset[size_t(j) + 1] = slot;
  }
}

}  // namespace detail
}  // namespace deepep
