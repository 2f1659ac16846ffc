// bench_sim_deepep: deepep's network simulator (deepep/simulator.h) on the cluster shapes the issue
// asks about, printed as the tables of docs/deepep.md ("Simulator"). Deterministic (fixed seeds);
// runs on the CPU.
//
//   bench_sim_deepep [--quick]     --quick: the smaller sizes only
//
// Chunks (the store-and-forward unit) are 1 MiB for all-reduce, 256 KiB for dispatch and 16 KiB for
// low-latency dispatch: small enough to pipeline the messages of each, few enough events to run.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "deepep/simulator.h"

namespace {

using namespace deepep::sim;

double wall_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const double gib = 1024.0 * 1024 * 1024;

  // 1. All-reduce on 3-D tori: 100 GB/s per link and direction, 1 us per hop; the bound is the
  //    injection bandwidth of a GPU's links (busbw = algbw * 2 (n-1) / n, as nccl-tests defines it).
  std::printf("## All-reduce of 1 GiB on 3-D tori (100 GB/s links, 1 us)\n\n");
  std::printf("| GPUs | torus | time ms | algbw GB/s | busbw GB/s | bound GB/s | utilization | events | sim s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  const int sides[][3] = {{2, 2, 2}, {4, 4, 4}, {8, 8, 8}, {16, 16, 16}, {22, 22, 22}};
  for (const auto& s : sides) {
    const int n = s[0] * s[1] * s[2];
    if (quick && n > 512) break;
    const auto t0 = std::chrono::steady_clock::now();
    const Network net = torus3d(s[0], s[1], s[2], 100e9, 1e-6);
    const Result r = simulate(net, torus_all_reduce(s[0], s[1], s[2], gib), 1 << 20);
    int links = 0;  // out of GPU 0: 6, fewer where a side is 2 (one neighbour) or 1
    for (const Link& l : net.links()) links += l.from == 0;
    const double algbw = gib / r.seconds, busbw = algbw * 2.0 * (n - 1) / n, bound = links * 100e9;
    std::printf("| %d | %dx%dx%d | %.2f | %.0f | %.0f | %.0f | %.2f | %lld | %.1f |\n", n, s[0], s[1], s[2],
                r.seconds * 1e3, algbw / 1e9, busbw / 1e9, bound / 1e9, busbw / bound, (long long)r.chunk_hops,
                wall_since(t0));
    std::fflush(stdout);
  }

  // 2. Ring all-reduce in NVLink domains and on fat-trees (nodes of 8, 50 GB/s NICs); on the
  //    fat-trees also the hierarchical one (every GPU's NIC carries an inter-node ring).
  std::printf("\n## Ring and hierarchical all-reduce of 1 GiB\n\n| network | GPUs | ring ms | ring busbw GB/s | "
              "hierarchical ms | hierarchical busbw GB/s | events (ring) |\n|---|---|---|---|---|---|---|\n");
  struct RingCase {
    Network net;
    bool nodes_of_8;  // a fat-tree: the hierarchical all-reduce applies
  };
  std::vector<RingCase> rings = {{nvlink_domain(8), false}, {nvlink_domain(72), false}, {fat_tree(64), true},
                                 {fat_tree(256), true}};
  if (!quick) rings.push_back({fat_tree(1024), true});
  for (const RingCase& c : rings) {
    const Network& net = c.net;
    const int n = net.gpus();
    auto busbw = [&](const Result& r) { return gib / r.seconds * 2.0 * (n - 1) / n / 1e9; };
    const Result r = simulate(net, ring_all_reduce(n, gib), 1 << 20);
    std::printf("| %s | %d | %.2f | %.0f |", net.name().c_str(), n, r.seconds * 1e3, busbw(r));
    if (c.nodes_of_8) {
      const Result h = simulate(net, hierarchical_all_reduce(n, 8, gib), 1 << 20);
      std::printf(" %.2f | %.0f |", h.seconds * 1e3, busbw(h));
    } else {
      std::printf(" - | - |");
    }
    std::printf(" %lld |\n", (long long)r.chunk_hops);
    std::fflush(stdout);
  }

  // 2b. Tree against ring all-reduce by message size on fat-trees: the tree's 2 ceil(log2 n) steps
  //     against the ring's 2 (n - 1).
  std::printf("\n## Tree and ring all-reduce by size (fat-trees, nodes of 8, 50 GB/s NICs)\n\n");
  std::printf("| GPUs | bytes | ring us | tree us | tree / ring |\n|---|---|---|---|---|\n");
  for (int n : {64, 256, 1024}) {
    if (quick && n > 256) break;
    const Network net = fat_tree(n);
    for (double bytes : {4096.0, 1048576.0, 67108864.0}) {
      const Result ring = simulate(net, ring_all_reduce(n, bytes), 1 << 20);
      const Result tree = simulate(net, tree_all_reduce(n, bytes), 1 << 20);
      std::printf("| %d | %.0f | %.1f | %.1f | %.2f |\n", n, bytes, ring.seconds * 1e6, tree.seconds * 1e6,
                  tree.seconds / ring.seconds);
      std::fflush(stdout);
    }
  }

  // 2c. Where the hierarchical all-reduce overtakes the others across nodes (Auto simulates the
  //     group's own network at run time: collectives.h, choose_all_reduce): the tree, the flat direct
  //     and both hierarchical variants by size on
  //     fat-trees of 2 to 32 nodes of 8.
  std::printf("\n## Tree and hierarchical all-reduce by size (fat-trees, nodes of 8, 50 GB/s NICs)\n\n");
  std::printf("| GPUs | bytes | tree us | flat direct us | hierarchical, rings across nodes, us | hierarchical, direct "
              "steps (the library's), us | library's hierarchical / tree | / flat direct |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (int n : {16, 64, 256}) {
    const Network net = fat_tree(n);
    for (double bytes : {16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0}) {
      const Result tree = simulate(net, tree_all_reduce(n, bytes), 1 << 20);
      const Result flat = simulate(net, direct_all_reduce(n, bytes), 1 << 20);
      const Result rings = simulate(net, hierarchical_all_reduce(n, 8, bytes), 1 << 20);
      const Result direct = simulate(net, hierarchical_all_reduce(n, 8, bytes, true), 1 << 20);
      std::printf("| %d | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", n, bytes, tree.seconds * 1e6,
                  flat.seconds * 1e6, rings.seconds * 1e6, direct.seconds * 1e6, direct.seconds / tree.seconds,
                  direct.seconds / flat.seconds);
      std::fflush(stdout);
    }
  }

  // 3. Dispatch with DeepEP's settings: 4096 tokens per GPU of 7168 FP8 values plus 56 FP32 scales,
  //    top-8 of max(256, GPUs) experts (one expert or more per GPU, as deployments spread them),
  //    hierarchical plan (nodes of 8, or the whole NVLink domain). First the per-source plans
  //    (sampled tokens) against the flows of the same plan (expected counts, one lane per rank,
  //    forwards in 8 batches), where both run.
  const double token_bytes = 7168 + 56 * 4, combined_bytes = 7168 * 2;
  auto experts = [](int n) { return std::max(256, n); };
  std::printf("\n## Dispatch, 4096 tokens per GPU (7392 bytes each), top-8: sampled plans against flows\n\n");
  std::printf("| network | GPUs | dispatch ms (sampled) | dispatch ms (flows) | combine ms (sampled) | combine ms (flows) | "
              "events (sampled) | events (flows) |\n|---|---|---|---|---|---|---|---|\n");
  struct Case {
    Network net;
    int ranks_per_node;
  };
  std::vector<Case> cases;
  cases.push_back({nvlink_domain(8), 8});
  cases.push_back({nvlink_domain(72), 72});
  cases.push_back({fat_tree(64), 8});
  if (!quick) cases.push_back({fat_tree(512), 8});
  for (const Case& c : cases) {
    const int n = c.net.gpus(), rpn = c.ranks_per_node;
    const FlowAggregation per_rank{rpn, 8};
    const Result d = simulate(c.net, dispatch_workload(n, rpn, 4096, token_bytes, 8, experts(n), 7), 256 << 10);
    const Result b = simulate(c.net, combine_workload(n, rpn, 4096, combined_bytes, 8, experts(n), 7), 256 << 10);
    const Result df = simulate(c.net, dispatch_flows(n, rpn, 4096, token_bytes, 8, experts(n), per_rank), 256 << 10);
    const Result bf = simulate(c.net, combine_flows(n, rpn, 4096, combined_bytes, 8, experts(n), per_rank), 256 << 10);
    std::printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %lld | %lld |\n", c.net.name().c_str(), n, d.seconds * 1e3,
                df.seconds * 1e3, b.seconds * 1e3, bf.seconds * 1e3, (long long)(d.chunk_hops + b.chunk_hops),
                (long long)(df.chunk_hops + bf.chunk_hops));
    std::fflush(stdout);
  }

  // 3b. The flows up to 10,000 GPUs: one lane per node pair, 2 MiB chunks (a node pair's message
  //     is about one chunk). Lower bounds: the bytes a GPU sends off its node (expected, per token
  //     that reaches another node) over its NIC, or on the torus over its four y and z links (the x
  //     ring is the node); and the busiest link's busy time.
  std::printf("\n## Dispatch and combine up to 10,000 GPUs (flows: one lane per node pair, forwards in 8 batches)\n\n");
  std::printf("| network | GPUs | ranks per node | dispatch ms | off-node bound ms | busiest link ms | combine ms (BF16) | "
              "events | sim s |\n|---|---|---|---|---|---|---|---|---|\n");
  struct ScaleCase {
    Network net;
    int ranks_per_node;
    double off_node_bandwidth;  // per GPU: its NIC, or its links out of the x ring
  };
  std::vector<ScaleCase> scale;
  scale.push_back({fat_tree(512), 8, 50e9});
  scale.push_back({torus3d(8, 8, 8), 8, 4 * 100e9});
  if (!quick) {
    scale.push_back({fat_tree(4096), 8, 50e9});
    scale.push_back({fat_tree(10000), 8, 50e9});
    scale.push_back({fat_tree(10008, 72), 72, 50e9});
    scale.push_back({torus3d(16, 16, 16), 16, 4 * 100e9});
    scale.push_back({torus3d(16, 25, 25), 16, 4 * 100e9});
  }
  for (const ScaleCase& c : scale) {
    const auto t0 = std::chrono::steady_clock::now();
    const int n = c.net.gpus(), rpn = c.ranks_per_node, nodes = n / rpn;
    const FlowAggregation one_lane{1, 8};
    const Result d = simulate(c.net, dispatch_flows(n, rpn, 4096, token_bytes, 8, experts(n), one_lane), 2 << 20);
    const Result b = simulate(c.net, combine_flows(n, rpn, 4096, combined_bytes, 8, experts(n), one_lane), 2 << 20);
    // A token reaches a given other node with probability 1 - C(E - e, 8) / C(E, 8), e = the
    // node's experts.
    const double e = double(experts(n)) / nodes;
    double miss = 1;
    for (int i = 0; i < 8; ++i) miss *= (experts(n) - e - i) / (experts(n) - i);
    const double bound = (nodes - 1) * 4096 * (1 - miss) * token_bytes / c.off_node_bandwidth;
    std::printf("| %s | %d | %d | %.3f | %.3f | %.2f | %.3f | %lld | %.1f |\n", c.net.name().c_str(), n, rpn,
                d.seconds * 1e3, bound * 1e3, d.max_link_busy * 1e3, b.seconds * 1e3, (long long)(d.chunk_hops + b.chunk_hops),
                wall_since(t0));
    std::fflush(stdout);
  }

  // 4. Low-latency dispatch (128 tokens per GPU) as the cluster grows, and the latency of one hop:
  //    flows with one lane per rank up to 4096 GPUs, one per node pair at 10,000.
  std::printf("\n## Low-latency dispatch, 128 tokens per GPU, top-8 (fat-tree, nodes of 8)\n\n");
  std::printf("| GPUs | lanes per node pair | time us | events |\n|---|---|---|---|\n");
  for (int n : {8, 64, 512, 2048, 4096, 10000}) {
    if (quick && n > 512) break;
    const Network net = n == 8 ? nvlink_domain(8) : fat_tree(n);
    const FlowAggregation agg{n > 4096 ? 1 : 8, 8};
    const Result r = simulate(net, dispatch_flows(n, 8, 128, token_bytes, 8, experts(n), agg), 16 << 10);
    std::printf("| %d | %d | %.1f | %lld |\n", n, agg.lanes, r.seconds * 1e6, (long long)r.chunk_hops);
    std::fflush(stdout);
  }
  // One token through each kind of path: what a hop costs (latency plus one token's serialization).
  const Network tree = fat_tree(64);
  const double one = simulate(tree, {{0, 1, token_bytes, {}}}).seconds;       // NVLink: 2 hops
  const double across = simulate(tree, {{0, 40, token_bytes, {}}}).seconds;   // NIC, spine: 4 hops
  const std::vector<Transfer> forwarded = {{0, 40, token_bytes, {}}, {40, 41, token_bytes, {0}}};
  const double fwd = simulate(tree, forwarded).seconds;                      // 4 + 2 hops
  std::printf("\none token: 2 NVLink hops %.2f us (%.2f us per hop); 4 network hops %.2f us (%.2f us per hop); "
              "across and forwarded (4 + 2 hops) %.2f us\n",
              one * 1e6, one / 2 * 1e6, across * 1e6, across / 4 * 1e6, fwd * 1e6);
  return 0;
}
