// Auto's choice of algorithm (collectives.h, choose_all_reduce): the candidates run in the
// simulator on the group's own network, or the rule measured on one host.
#include <cstdio>
#include <sstream>

#include "deepep/collectives.h"
#include "deepep/simulator.h"
#include "rt/error.h"

namespace deepep {
namespace {

// One node on shared memory: Direct (2 steps) below 4 MiB, where latency dominates; Ring from 4 MiB,
// faster here because it reduces on receive with no temporaries (bench_deepep, docs/perf.md).
constexpr int64_t kRingFromBytes = 4 << 20;

// Chunks of the simulated transfers: at least 64 KiB, at most 4 per transfer. Coarse enough that a
// decision on 256 ranks simulates in well under a second; the pipeline error (a chunk crosses each
// hop whole) is the same for every candidate.
constexpr double kChunkBytes = 64 << 10;
constexpr int kMaxChunks = 4;

std::vector<sim::Transfer> workload(Algorithm a, bool all_reduce, const GroupNetwork& net, double bytes) {
  const int ranks = net.ranks();
  switch (a) {
    case Algorithm::Direct: return all_reduce ? sim::direct_all_reduce(ranks, bytes) : sim::direct_reduce_scatter(ranks, bytes);
    case Algorithm::Ring: return all_reduce ? sim::ring_all_reduce(ranks, bytes) : sim::ring_reduce_scatter(ranks, bytes);
    case Algorithm::Tree: return sim::tree_all_reduce(ranks, bytes);
    case Algorithm::Hierarchical: {
      std::vector<std::vector<int>> nodes(size_t(net.nodes()));
      for (int r = 0; r < ranks; ++r) nodes[size_t(net.node_of_rank[size_t(r)])].push_back(r);  // local-rank order
      return sim::hierarchical_all_reduce(nodes, bytes);
    }
    case Algorithm::Auto: break;
  }
  RT_ICHECK(false, "no workload for Algorithm::", name(a));
  return {};
}

AlgorithmChoice choose(const GroupNetwork& network, int64_t bytes, bool all_reduce) {
  const char* what = all_reduce ? "choose_all_reduce" : "choose_reduce_scatter";
  const std::string err = network.check();
  RT_USER_CHECK(err.empty(), "deepep ", what, ": the network cannot describe a group: ", err);
  RT_USER_CHECK(bytes >= 0 && bytes <= (int64_t(1) << 62), "deepep ", what, ": bytes (", bytes,
                ") must be between 0 and 2^62");
  AlgorithmChoice c;
  c.bucket_bytes = size_bucket(bytes);
  if (network.ranks() == 1) return c;  // Direct: nothing moves
  if (measured_rule_applies(network)) {  // decided by the exact size, nothing simulated
    c.measured_rule = true;
    c.algorithm = bytes >= kRingFromBytes && network.ranks() > 2 ? Algorithm::Ring : Algorithm::Direct;
    return c;
  }
  c.candidates = {Algorithm::Direct, Algorithm::Ring};
  if (all_reduce) c.candidates.push_back(Algorithm::Tree);
  if (all_reduce && network.nodes() > 1) c.candidates.push_back(Algorithm::Hierarchical);
  const sim::Network net = sim::group_network(network.node_of_rank, network.nics_per_node, network.link.bandwidth,
                                              network.link.latency, network.nic.bandwidth, network.nic.latency);
  size_t best = 0;
  for (size_t i = 0; i < c.candidates.size(); ++i) {
    const std::vector<sim::Transfer> transfers = workload(c.candidates[i], all_reduce, network, double(c.bucket_bytes));
    c.predicted_seconds.push_back(sim::simulate(net, transfers, kChunkBytes, kMaxChunks).seconds);
    if (c.predicted_seconds[i] < c.predicted_seconds[best]) best = i;
  }
  c.algorithm = c.candidates[best];
  return c;
}

}  // namespace

int64_t size_bucket(int64_t bytes) {
  int64_t b = 1;
  while (b < bytes && b < (int64_t(1) << 62)) b <<= 1;
  return b;
}

bool measured_rule_applies(const GroupNetwork& network) {
  return network.nodes() == 1 && network.fabric == Fabric::SharedMemory && network.ranks() > 1;
}

int64_t choice_key(const GroupNetwork& network, int64_t bytes) {
  if (measured_rule_applies(network)) return bytes >= kRingFromBytes ? -2 : -1;
  return size_bucket(bytes);
}

std::string AlgorithmChoice::to_string() const {
  std::ostringstream os;
  os << name(algorithm) << " (";
  if (measured_rule) os << "the rule measured on one host";
  else if (candidates.empty()) os << "one rank";
  else os << "predicted:";
  for (size_t i = 0; i < candidates.size(); ++i) {
    char t[32];
    std::snprintf(t, sizeof(t), "%.1f", predicted_seconds[i] * 1e6);
    os << (i ? ", " : " ") << name(candidates[i]) << " " << t << " us";
  }
  os << ")";
  return os.str();
}

AlgorithmChoice choose_all_reduce(const GroupNetwork& network, int64_t bytes) { return choose(network, bytes, true); }

AlgorithmChoice choose_reduce_scatter(const GroupNetwork& network, int64_t bytes) {
  return choose(network, bytes, false);
}

}  // namespace deepep
