// Workloads for the simulator: ring, tree, hierarchical and torus all-reduce, and MoE dispatch
// through the hierarchical plan.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "deepep/simulator.h"
#include "rt/error.h"

namespace deepep::sim {
namespace {

// One ring phase (a reduce-scatter or an all-gather) on every ring in `rings`: k - 1 steps of
// `data / k` per member, half of it each way round. A member's first send waits for what it last
// received (`last[g]`: transfer ids), each later one for its previous receive in that direction;
// `last` becomes this phase's final receives.
void ring_phase(std::vector<Transfer>& out, const std::vector<std::vector<int>>& rings, double data,
                std::vector<std::vector<int>>& last) {
  std::vector<std::vector<int>> next = last;
  for (const std::vector<int>& ring : rings) {
    const int k = int(ring.size());
    if (k < 2) continue;
    for (int g : ring) next[size_t(g)].clear();
    for (int dir : {1, -1}) {
      std::vector<int> prev(static_cast<size_t>(k), -1);  // per member: what it received at the previous step
      for (int step = 0; step + 1 < k; ++step) {
        std::vector<int> now(static_cast<size_t>(k), -1);
        for (int i = 0; i < k; ++i) {
          const int to = ((i + dir) % k + k) % k;
          Transfer t;
          t.src = ring[size_t(i)];
          t.dst = ring[size_t(to)];
          t.bytes = data / 2 / k;
          t.after = step == 0 ? last[size_t(t.src)] : std::vector<int>{prev[size_t(i)]};
          now[size_t(to)] = int(out.size());
          out.push_back(std::move(t));
        }
        prev = now;
      }
      for (int i = 0; i < k; ++i) next[size_t(ring[size_t(i)])].push_back(prev[size_t(i)]);
    }
  }
  last = std::move(next);
}

// A direct phase in every group of `groups` between its first `owners` members (all of them when
// `owners` is 0 or the group is smaller) and the rest, as the library's direct steps run it: a
// reduce-scatter (`to_owners`: each member sends `data / owners` to each owner other than itself)
// or the matching all-gather (each owner sends its `data / owners` to every other member), all at
// once, each after what its sender last received (`last[g]`); `last` becomes this phase's receives
// (empty for a member that received nothing).
void direct_owners_phase(std::vector<Transfer>& out, const std::vector<std::vector<int>>& groups, double data,
                         int owners, bool to_owners, std::vector<std::vector<int>>& last) {
  std::vector<std::vector<int>> next = last;
  for (const std::vector<int>& group : groups) {
    const int k = int(group.size());
    if (k < 2) continue;
    const int o = owners <= 0 ? k : std::min(owners, k);
    for (int g : group) next[size_t(g)].clear();
    // (source, destination) in the order the phase posts them.
    std::vector<std::pair<int, int>> pairs;
    for (int a = 0; a < (to_owners ? k : o); ++a)
      for (int b = 0; b < (to_owners ? o : k); ++b)
        pairs.emplace_back(group[size_t(a)], group[size_t(b)]);
    for (const auto& [src, dst] : pairs) {
      if (dst == src) continue;
      Transfer t;
      t.src = src;
      t.dst = dst;
      t.bytes = data / o;
      t.after = last[size_t(src)];
      next[size_t(dst)].push_back(int(out.size()));
      out.push_back(std::move(t));
    }
  }
  last = std::move(next);
}

// One direct phase among all members of every group (a reduce-scatter and an all-gather move the
// same transfers).
void direct_phase(std::vector<Transfer>& out, const std::vector<std::vector<int>>& groups, double data,
                  std::vector<std::vector<int>>& last) {
  direct_owners_phase(out, groups, data, 0, true, last);
}

// An all-reduce over all GPUs in index order as two phases of `phase` (a reduce-scatter, then an
// all-gather), or only the reduce-scatter.
using Phase = void (*)(std::vector<Transfer>&, const std::vector<std::vector<int>>&, double,
                       std::vector<std::vector<int>>&);
std::vector<Transfer> flat_phases(Phase phase, const char* name, int gpus, double bytes, bool with_all_gather) {
  RT_USER_CHECK(gpus >= 1 && bytes >= 0, "deepep::sim::", name, ": ", gpus, " GPUs, ", bytes, " bytes");
  std::vector<Transfer> out;
  std::vector<int> all(static_cast<size_t>(gpus));
  for (int g = 0; g < gpus; ++g) all[size_t(g)] = g;
  std::vector<std::vector<int>> last(static_cast<size_t>(gpus));
  phase(out, {all}, bytes, last);                      // reduce-scatter
  if (with_all_gather) phase(out, {all}, bytes, last);  // all-gather
  return out;
}

}  // namespace

std::vector<Transfer> ring_all_reduce(int gpus, double bytes) {
  return flat_phases(ring_phase, "ring_all_reduce", gpus, bytes, true);
}

std::vector<Transfer> direct_all_reduce(int gpus, double bytes) {
  return flat_phases(direct_phase, "direct_all_reduce", gpus, bytes, true);
}

std::vector<Transfer> ring_reduce_scatter(int gpus, double bytes) {
  return flat_phases(ring_phase, "ring_reduce_scatter", gpus, bytes, false);
}

std::vector<Transfer> direct_reduce_scatter(int gpus, double bytes) {
  return flat_phases(direct_phase, "direct_reduce_scatter", gpus, bytes, false);
}

std::vector<Transfer> tree_all_reduce(int gpus, double bytes) {
  RT_USER_CHECK(gpus >= 1 && bytes >= 0, "deepep::sim::tree_all_reduce: ", gpus, " GPUs, ", bytes, " bytes");
  std::vector<Transfer> out;
  std::vector<std::vector<int>> received(static_cast<size_t>(gpus));  // per GPU: transfers it waits for
  int top = 1;
  while (top < gpus) top <<= 1;
  for (int mask = 1; mask < top; mask <<= 1)  // up: g sends its partial sum once its children's arrived
    for (int g = mask; g < gpus; g += 2 * mask) {
      Transfer t;
      t.src = g;
      t.dst = g - mask;
      t.bytes = bytes;
      t.after = received[size_t(g)];
      received[size_t(g - mask)].push_back(int(out.size()));
      out.push_back(std::move(t));
    }
  for (int mask = top / 2; mask >= 1; mask >>= 1)  // down: the result, once g has it
    for (int g = 0; g + mask < gpus; g += 2 * mask) {
      Transfer t;
      t.src = g;
      t.dst = g + mask;
      t.bytes = bytes;
      t.after = received[size_t(g)];
      received[size_t(g + mask)] = {int(out.size())};
      out.push_back(std::move(t));
    }
  return out;
}

std::vector<Transfer> hierarchical_all_reduce(int gpus, int gpus_per_node, double bytes, bool direct_steps) {
  RT_USER_CHECK(gpus >= 1 && gpus_per_node >= 1 && gpus % gpus_per_node == 0 && bytes >= 0,
                "deepep::sim::hierarchical_all_reduce: ", gpus, " GPUs in nodes of ", gpus_per_node, ", ", bytes,
                " bytes (the GPUs must fill whole nodes)");
  const int nodes = gpus / gpus_per_node;
  std::vector<std::vector<int>> in_node, across;
  for (int n = 0; n < nodes; ++n) {
    in_node.emplace_back();
    for (int l = 0; l < gpus_per_node; ++l) in_node.back().push_back(n * gpus_per_node + l);
  }
  for (int l = 0; l < gpus_per_node; ++l) {
    across.emplace_back();
    for (int n = 0; n < nodes; ++n) across.back().push_back(n * gpus_per_node + l);
  }
  if (direct_steps) return hierarchical_all_reduce(in_node, bytes);
  std::vector<Transfer> out;
  std::vector<std::vector<int>> last(static_cast<size_t>(gpus));
  ring_phase(out, in_node, bytes, last);                  // reduce-scatter in the node
  ring_phase(out, across, bytes / gpus_per_node, last);  // all-reduce of each part across nodes
  ring_phase(out, across, bytes / gpus_per_node, last);
  ring_phase(out, in_node, bytes, last);                  // all-gather in the node
  return out;
}

std::vector<Transfer> hierarchical_all_reduce(const std::vector<std::vector<int>>& nodes, double bytes) {
  RT_USER_CHECK(!nodes.empty() && bytes >= 0, "deepep::sim::hierarchical_all_reduce: ", nodes.size(), " nodes, ", bytes,
                " bytes");
  size_t parts = nodes[0].size();
  int gpus = 0;
  std::vector<int> seen;
  for (const std::vector<int>& node : nodes) {
    RT_USER_CHECK(!node.empty(), "deepep::sim::hierarchical_all_reduce: an empty node");
    parts = std::min(parts, node.size());
    for (int g : node) {
      RT_USER_CHECK(g >= 0, "deepep::sim::hierarchical_all_reduce: GPU ", g);
      gpus = std::max(gpus, g + 1);
      seen.push_back(g);
    }
  }
  std::sort(seen.begin(), seen.end());
  RT_USER_CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end(),
                "deepep::sim::hierarchical_all_reduce: a GPU on two nodes (or twice on one)");
  std::vector<std::vector<int>> across(parts);  // local index l < parts: one GPU per node
  for (size_t l = 0; l < parts; ++l)
    for (const std::vector<int>& node : nodes) across[l].push_back(node[l]);
  const int owners = int(parts);
  std::vector<Transfer> out;
  std::vector<std::vector<int>> last(static_cast<size_t>(gpus));
  direct_owners_phase(out, nodes, bytes, owners, true, last);          // part l to local index l of the node
  direct_owners_phase(out, across, bytes / double(parts), 0, true, last);  // all-reduce of each part across nodes
  direct_owners_phase(out, across, bytes / double(parts), 0, false, last);
  direct_owners_phase(out, nodes, bytes, owners, false, last);           // the parts to the rest of the node
  return out;
}

std::vector<Transfer> torus_all_reduce(int x, int y, int z, double bytes) {
  RT_USER_CHECK(x >= 1 && y >= 1 && z >= 1 && bytes >= 0, "deepep::sim::torus_all_reduce: bad shape");
  const int dims[3] = {x, y, z};
  const int n = x * y * z;
  auto id = [=](const int c[3]) { return (c[2] * y + c[1]) * x + c[0]; };
  // The rings along dimension d: every line of the torus in that direction.
  auto rings_along = [&](int d) {
    std::vector<std::vector<int>> rings;
    const int a = (d + 1) % 3, b = (d + 2) % 3;
    for (int i = 0; i < dims[a]; ++i)
      for (int j = 0; j < dims[b]; ++j) {
        std::vector<int> ring;
        for (int t = 0; t < dims[d]; ++t) {
          int c[3];
          c[d] = t;
          c[a] = i;
          c[b] = j;
          ring.push_back(id(c));
        }
        rings.push_back(std::move(ring));
      }
    return rings;
  };
  std::vector<Transfer> out;
  // Three thirds of the data, each reducing its dimensions in a rotated order, so all six links of
  // every GPU carry traffic at once.
  for (int part = 0; part < 3; ++part) {
    const int order[3] = {part, (part + 1) % 3, (part + 2) % 3};
    std::vector<std::vector<int>> last(static_cast<size_t>(n));
    double data = bytes / 3;
    for (int d : order) {  // reduce-scatter: each dimension leaves 1/size of the data
      ring_phase(out, rings_along(d), data, last);
      data /= dims[d];
    }
    for (int i = 2; i >= 0; --i) {  // all-gather, the other way
      data *= dims[order[i]];
      ring_phase(out, rings_along(order[i]), data, last);
    }
  }
  return out;
}

std::vector<PlannedSend> plan_hierarchical_dispatch(int src_rank, const std::vector<int>& dest, int topk,
                                                    int ranks_per_node) {
  RT_USER_CHECK(topk >= 1 && ranks_per_node >= 1 && dest.size() % size_t(topk) == 0,
                "deepep::sim::plan_hierarchical_dispatch: ", dest.size(), " destinations for top-", topk);
  const int src_node = src_rank / ranks_per_node, local = src_rank % ranks_per_node;
  std::map<std::tuple<int, int, int>, int64_t> sends;  // (stage, from, to) -> tokens
  for (size_t t = 0; t < dest.size() / size_t(topk); ++t) {
    std::set<int> ranks, nodes;
    for (int j = 0; j < topk; ++j) {
      const int r = dest[t * size_t(topk) + size_t(j)];
      if (r < 0) continue;
      ranks.insert(r);
      nodes.insert(r / ranks_per_node);
    }
    for (int node : nodes) {
      if (node == src_node) {
        for (int r : ranks)
          if (r / ranks_per_node == node && r != src_rank) ++sends[{0, src_rank, r}];
        continue;
      }
      const int forwarder = node * ranks_per_node + local;  // the token crosses the network once
      ++sends[{0, src_rank, forwarder}];
      for (int r : ranks)
        if (r / ranks_per_node == node && r != forwarder) ++sends[{1, forwarder, r}];
    }
  }
  std::vector<PlannedSend> plan;
  for (const auto& [key, tokens] : sends) plan.push_back({std::get<1>(key), std::get<2>(key), tokens, std::get<0>(key)});
  return plan;
}

namespace {

// Every GPU's hierarchical plan for `tokens_per_rank` tokens routed to top-k distinct experts at
// random (seeded): the routing dispatch and combine share.
template <class Fn>
void for_each_plan(int gpus, int ranks_per_node, int tokens_per_rank, int topk, int experts, uint64_t seed, Fn&& fn) {
  RT_USER_CHECK(gpus >= 1 && tokens_per_rank >= 0 && topk >= 1 && topk <= experts && experts >= 1,
                "deepep::sim: bad MoE workload shape (", gpus, " GPUs, ", tokens_per_rank, " tokens, top-", topk, " of ",
                experts, " experts)");
  std::mt19937_64 rng(seed);
  std::vector<int> dest(static_cast<size_t>(tokens_per_rank) * static_cast<size_t>(topk));
  std::vector<int> pick(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) pick[size_t(e)] = e;
  for (int src = 0; src < gpus; ++src) {
    for (int t = 0; t < tokens_per_rank; ++t) {
      for (int j = 0; j < topk; ++j) {  // top-k distinct experts: a partial shuffle
        std::uniform_int_distribution<int> u(j, experts - 1);
        std::swap(pick[size_t(j)], pick[size_t(u(rng))]);
        dest[size_t(t) * size_t(topk) + size_t(j)] = int(int64_t(pick[size_t(j)]) * gpus / experts);
      }
    }
    fn(src, plan_hierarchical_dispatch(src, dest, topk, ranks_per_node));
  }
}

}  // namespace

std::vector<Transfer> dispatch_workload(int gpus, int ranks_per_node, int tokens_per_rank, double token_bytes,
                                        int topk, int experts, uint64_t seed) {
  std::vector<Transfer> out;
  for_each_plan(gpus, ranks_per_node, tokens_per_rank, topk, experts, seed,
                [&](int, const std::vector<PlannedSend>& plan) {
                  std::map<int, int> first_leg;  // forwarder -> the stage-0 transfer that reaches it
                  for (const PlannedSend& s : plan) {
                    Transfer t{s.from, s.to, double(s.tokens) * token_bytes, {}};
                    if (s.stage == 0)
                      first_leg[s.to] = int(out.size());
                    else
                      t.after = {first_leg.at(s.from)};
                    out.push_back(std::move(t));
                  }
                });
  return out;
}

std::vector<Transfer> combine_workload(int gpus, int ranks_per_node, int tokens_per_rank, double token_bytes,
                                       int topk, int experts, uint64_t seed) {
  std::vector<Transfer> out;
  for_each_plan(gpus, ranks_per_node, tokens_per_rank, topk, experts, seed,
                [&](int, const std::vector<PlannedSend>& plan) {
                  // The forwards come back first (experts -> forwarder, reduced there), then one
                  // transfer per node to the source once all of that node's results are in.
                  std::map<int, std::vector<int>> into_forwarder;
                  for (const PlannedSend& s : plan)
                    if (s.stage == 1) {
                      into_forwarder[s.from].push_back(int(out.size()));
                      out.push_back({s.to, s.from, double(s.tokens) * token_bytes, {}});
                    }
                  for (const PlannedSend& s : plan)
                    if (s.stage == 0) {
                      auto it = into_forwarder.find(s.to);
                      out.push_back({s.to, s.from, double(s.tokens) * token_bytes,
                                     it == into_forwarder.end() ? std::vector<int>{} : it->second});
                    }
                });
  return out;
}

}  // namespace deepep::sim
