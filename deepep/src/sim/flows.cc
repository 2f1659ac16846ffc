// MoE dispatch and combine as aggregated flows: the hierarchical plan of workloads.cc with the
// routing distribution's expected token counts instead of sampled tokens, and messages merged per
// node pair (lanes) and per forwarder (batches), so 10,000 GPUs simulate in seconds.
#include <algorithm>
#include <cstdint>

#include "deepep/simulator.h"
#include "rt/error.h"

namespace deepep::sim {
namespace {

// The probability that a token routed to `topk` distinct experts drawn uniformly from `experts`
// picks at least one of `held` given experts: 1 - C(experts - held, topk) / C(experts, topk).
double hit_probability(int experts, int topk, int held) {
  double miss = 1;
  for (int i = 0; i < topk; ++i) miss *= double(std::max(0, experts - held - i)) / double(experts - i);
  return 1 - miss;
}

// The shared shape of dispatch and combine flows: who sends what to whom, before directions and
// dependencies are applied.
struct FlowPlan {
  struct Leg {
    int from, to;  // a sender on the source node, its rail's rank on the destination node
    double bytes;
    int batch;     // the forwarder's batch this leg belongs to
  };
  struct Forward {
    int forwarder, to, batch;
    double bytes;
  };
  std::vector<Transfer> inside;  // straight to the ranks of the source's own node
  std::vector<Leg> legs;         // in the order each source sends them
  std::vector<Forward> forwards;
};

FlowPlan plan_flows(int gpus, int ranks_per_node, double tokens_per_rank, double token_bytes, int topk, int experts,
                    const FlowAggregation& agg) {
  RT_USER_CHECK(gpus >= 1 && ranks_per_node >= 1 && gpus % ranks_per_node == 0 && tokens_per_rank >= 0 && topk >= 1 &&
                    topk <= experts,
                "deepep::sim: bad MoE flow shape (", gpus, " GPUs in nodes of ", ranks_per_node, ", ", tokens_per_rank,
                " tokens, top-", topk, " of ", experts, " experts)");
  RT_USER_CHECK(agg.lanes >= 1 && ranks_per_node % agg.lanes == 0 && agg.batches >= 1,
                "deepep::sim: ", agg.lanes, " lanes per node pair must divide the ", ranks_per_node,
                " ranks of a node, and batches (", agg.batches, ") must be positive");
  const int nodes = gpus / ranks_per_node, rails_per_lane = ranks_per_node / agg.lanes;
  // Expert e lives on rank e * gpus / experts (dispatch_workload's placement); a token reaches a
  // rank (or a node) when it picks one of the experts held there.
  std::vector<int> held(static_cast<size_t>(gpus), 0);
  for (int e = 0; e < experts; ++e) ++held[size_t(int64_t(e) * gpus / experts)];
  std::vector<double> rank_tokens(static_cast<size_t>(gpus)), node_tokens(static_cast<size_t>(nodes));
  for (int n = 0; n < nodes; ++n) {
    int node_held = 0;
    for (int r = n * ranks_per_node; r < (n + 1) * ranks_per_node; ++r) {
      rank_tokens[size_t(r)] = tokens_per_rank * hit_probability(experts, topk, held[size_t(r)]);
      node_held += held[size_t(r)];
    }
    node_tokens[size_t(n)] = tokens_per_rank * hit_probability(experts, topk, node_held);
  }
  // Lane j of the pair (a, b) leaves from rail (a + b + j * rails_per_lane) mod ranks_per_node of
  // node a for the same rail of node b, carrying the tokens of rails_per_lane sources: rotating the
  // rail with the pair keeps every NIC's expected bytes those of the per-rank plan.
  auto carries = [&](int a, int b, int rail) {
    const int offset = ((rail - a - b) % ranks_per_node + ranks_per_node) % ranks_per_node;
    return offset % rails_per_lane == 0;
  };
  FlowPlan plan;
  std::vector<int> legs_into(static_cast<size_t>(gpus), 0);  // per forwarder, for its batches
  for (int a = 0; a < nodes; ++a)
    for (int b = 0; b < nodes; ++b)
      if (a != b)
        for (int rail = 0; rail < ranks_per_node; ++rail) legs_into[size_t(b * ranks_per_node + rail)] += carries(a, b, rail);
  std::vector<int> legs_seen(static_cast<size_t>(gpus), 0);
  for (int src = 0; src < gpus; ++src) {
    const int a = src / ranks_per_node, rail = src % ranks_per_node;
    for (int r = a * ranks_per_node; r < (a + 1) * ranks_per_node; ++r)
      if (r != src) plan.inside.push_back({src, r, rank_tokens[size_t(r)] * token_bytes, {}});
    for (int b = 0; b < nodes; ++b) {
      if (b == a || !carries(a, b, rail)) continue;
      const int forwarder = b * ranks_per_node + rail;
      // Batches split the forwarder's incoming legs into contiguous runs of source nodes.
      const int batches = std::min(agg.batches, legs_into[size_t(forwarder)]);
      const int batch = int(int64_t(legs_seen[size_t(forwarder)]++) * batches / legs_into[size_t(forwarder)]);
      plan.legs.push_back({src, forwarder, node_tokens[size_t(b)] * rails_per_lane * token_bytes, batch});
    }
  }
  // Batch by batch across forwarders: a rank's port serves the forwarders of its node in turn,
  // as the per-source plan interleaves them.
  for (int k = 0; k < agg.batches; ++k)
    for (int f = 0; f < gpus; ++f) {
      const int node = f / ranks_per_node, batches = std::min(agg.batches, legs_into[size_t(f)]);
      if (k >= batches) continue;
      // The legs of batch k carry this many sources' tokens (each leg rails_per_lane sources).
      const int64_t legs = (int64_t(k + 1) * legs_into[size_t(f)] + batches - 1) / batches -
                           (int64_t(k) * legs_into[size_t(f)] + batches - 1) / batches;
      for (int r = node * ranks_per_node; r < (node + 1) * ranks_per_node; ++r)
        if (r != f) plan.forwards.push_back({f, r, k, rank_tokens[size_t(r)] * double(legs * rails_per_lane) * token_bytes});
    }
  return plan;
}

// The index of each (forwarder, batch)'s transfers list: legs in and forwards out of a forwarder's
// batch wait on each other.
size_t batch_slot(int forwarder, int batch, int batches) { return size_t(forwarder) * size_t(batches) + size_t(batch); }

}  // namespace

std::vector<Transfer> dispatch_flows(int gpus, int ranks_per_node, double tokens_per_rank, double token_bytes, int topk,
                                     int experts, const FlowAggregation& agg) {
  FlowPlan plan = plan_flows(gpus, ranks_per_node, tokens_per_rank, token_bytes, topk, experts, agg);
  std::vector<Transfer> out = std::move(plan.inside);
  std::vector<std::vector<int>> arrived(size_t(gpus) * size_t(agg.batches));  // legs into each batch
  for (const FlowPlan::Leg& l : plan.legs) {
    arrived[batch_slot(l.to, l.batch, agg.batches)].push_back(int(out.size()));
    out.push_back({l.from, l.to, l.bytes, {}});
  }
  for (const FlowPlan::Forward& f : plan.forwards)
    out.push_back({f.forwarder, f.to, f.bytes, arrived[batch_slot(f.forwarder, f.batch, agg.batches)]});
  return out;
}

std::vector<Transfer> combine_flows(int gpus, int ranks_per_node, double tokens_per_rank, double token_bytes, int topk,
                                    int experts, const FlowAggregation& agg) {
  FlowPlan plan = plan_flows(gpus, ranks_per_node, tokens_per_rank, token_bytes, topk, experts, agg);
  std::vector<Transfer> out;
  std::vector<std::vector<int>> reduced(size_t(gpus) * size_t(agg.batches));  // results back at each batch
  for (const FlowPlan::Forward& f : plan.forwards) {
    reduced[batch_slot(f.forwarder, f.batch, agg.batches)].push_back(int(out.size()));
    out.push_back({f.to, f.forwarder, f.bytes, {}});
  }
  for (const Transfer& t : plan.inside) out.push_back({t.dst, t.src, t.bytes, {}});
  for (const FlowPlan::Leg& l : plan.legs)
    out.push_back({l.to, l.from, l.bytes, reduced[batch_slot(l.to, l.batch, agg.batches)]});
  return out;
}

}  // namespace deepep::sim
