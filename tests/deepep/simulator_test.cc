// The simulator against closed forms on small networks: pipelined transfers, link contention, ring
// and torus all-reduce, routing lengths, the hierarchical dispatch plan, and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "deepep/simulator.h"
#include "rt/error.h"

namespace {

using namespace deepep::sim;

TEST(Simulator, PipelinedTransferMatchesTheClosedForm) {
  const double bw = 100e9, lat = 1e-6, bytes = 64e6, chunk = 1e6;
  const Network net = nvlink_domain(8, bw, lat);
  const Result r = simulate(net, {{0, 5, bytes, {}}}, chunk);
  // Two hops (GPU -> NVSwitch -> GPU): the last chunk leaves the first link at bytes/bw and needs
  // one more chunk time on the second, plus both latencies.
  EXPECT_NEAR(r.seconds, bytes / bw + chunk / bw + 2 * lat, 1e-12);
  EXPECT_EQ(r.chunk_hops, 2 * 64);
}

TEST(Simulator, SharedLinksSerialize) {
  const double bw = 100e9, bytes = 64e6;
  const Network net = nvlink_domain(8, bw, 0.0);
  const Result one = simulate(net, {{1, 0, bytes, {}}});
  const Result two = simulate(net, {{1, 0, bytes, {}}, {2, 0, bytes, {}}});  // both into GPU 0
  const Result apart = simulate(net, {{1, 0, bytes, {}}, {2, 3, bytes, {}}});
  EXPECT_NEAR(two.seconds, 2 * bytes / bw + double(1 << 20) / bw, 1e-9);  // the switch -> GPU 0 link is shared
  EXPECT_NEAR(apart.seconds, one.seconds, 1e-12);            // disjoint links do not interfere
  EXPECT_NEAR(two.max_link_busy, 2 * bytes / bw, 1e-12);
}

TEST(Simulator, DependenciesOrderTransfers) {
  const Network net = nvlink_domain(4, 100e9, 1e-6);
  const Result chain = simulate(net, {{0, 1, 1e6, {}}, {1, 2, 1e6, {0}}, {2, 3, 1e6, {1}}});
  const Result alone = simulate(net, {{0, 1, 1e6, {}}});
  EXPECT_NEAR(chain.seconds, 3 * alone.seconds, 1e-12);
}

TEST(Simulator, RingAllReduceApproachesTheBandwidthBound) {
  // A ring of 8 (torus 8x1x1): bidirectional halves, each GPU sends 2 (n-1)/n of the data over two
  // links.
  const int n = 8;
  const double bw = 100e9, bytes = 1e9;
  const Network net = torus3d(n, 1, 1, bw, 1e-6);
  const Result r = simulate(net, ring_all_reduce(n, bytes), 256e3);
  const double bound = 2.0 * (n - 1) / n * bytes / (2 * bw);
  EXPECT_GT(r.seconds, bound);
  EXPECT_LT(r.seconds, bound * 1.05) << "ring all-reduce should be within 5% of the bound for 1 GB";
}

// The tree's 2 ceil(log2 n) steps against the ring's 2 (n - 1): latency-bound small messages go
// faster by the tree, bandwidth-bound large ones by the ring (the tree moves the whole tensor at
// every step).
TEST(Simulator, TreeAllReduceWinsSmallMessagesAndLosesLargeOnes) {
  const Network net = fat_tree(256);
  const double small = 4096, large = 256e6;
  const Result tree_small = simulate(net, tree_all_reduce(256, small), 256e3);
  const Result ring_small = simulate(net, ring_all_reduce(256, small), 256e3);
  EXPECT_LT(tree_small.seconds * 10, ring_small.seconds) << tree_small.seconds << " vs " << ring_small.seconds;
  const Result tree_large = simulate(net, tree_all_reduce(256, large), 1 << 20);
  const Result ring_large = simulate(net, ring_all_reduce(256, large), 1 << 20);
  EXPECT_LT(ring_large.seconds * 2, tree_large.seconds) << ring_large.seconds << " vs " << tree_large.seconds;
  // Two GPUs: one transfer each way, no more.
  const auto two = tree_all_reduce(2, small);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].src, 1);
  EXPECT_EQ(two[1].after, std::vector<int>{0});
  // Every GPU but 0 sends once up and receives once down (5 GPUs: a tree with a missing branch).
  std::vector<int> up(5), down(5);
  for (const Transfer& t : tree_all_reduce(5, small)) (t.dst < t.src ? up[size_t(t.src)] : down[size_t(t.dst)])++;
  EXPECT_EQ(up, (std::vector<int>{0, 1, 1, 1, 1}));
  EXPECT_EQ(down, (std::vector<int>{0, 1, 1, 1, 1}));
}

// On a fat-tree the flat ring crosses the network through one NIC per node and direction; the
// hierarchical all-reduce sends each GPU's 1/8 of the data through its own NIC: the inter-node
// phase carries 1/8 as much per NIC. (Bound: each NIC moves 2 (nodes - 1) / nodes of bytes / 8 at
// 50 GB/s each way; the 8 rings' flows share spine links by static ECMP, so it stays well above.)
TEST(Simulator, HierarchicalAllReduceUsesEveryNic) {
  const Network net = fat_tree(64);
  const double bytes = 1e9;
  const Result flat = simulate(net, ring_all_reduce(64, bytes), 1 << 20);
  const Result hier = simulate(net, hierarchical_all_reduce(64, 8, bytes), 1 << 20);
  EXPECT_LT(hier.seconds * 2, flat.seconds) << hier.seconds << " vs " << flat.seconds;
  const double nic_bound = 2.0 * 7 / 8 * bytes / 8 / (2 * 50e9);
  EXPECT_GT(hier.seconds, nic_bound);
  EXPECT_THROW(hierarchical_all_reduce(60, 8, bytes), rt::Error);  // not whole nodes
}

// The library's direct-step variants: the flat direct all-reduce sends bytes / n from every GPU to
// every other twice; the hierarchical one does so inside each node (its whole data) and across nodes
// per local rank (1 / 8 of it). Auto's threshold rests on them: from 256 KiB the hierarchical one
// beats the tree and the flat direct on 2 and 8 nodes of 8.
TEST(Simulator, DirectStepVariants) {
  const double bytes = 256 << 10;
  const auto flat = direct_all_reduce(16, bytes);
  ASSERT_EQ(flat.size(), size_t(2 * 16 * 15));
  double flat_bytes = 0;
  for (const Transfer& t : flat) flat_bytes += t.bytes;
  EXPECT_NEAR(flat_bytes, 2.0 * 16 * 15 * bytes / 16, 1e-6 * bytes);
  const auto hier = hierarchical_all_reduce(16, 8, bytes, true);
  ASSERT_EQ(hier.size(), size_t(2 * 2 * 8 * 7 + 2 * 8 * 2 * 1));
  double hier_bytes = 0;
  for (const Transfer& t : hier) hier_bytes += t.bytes;
  EXPECT_NEAR(hier_bytes, 2.0 * (2 * 8 * 7 * bytes / 8 + 8 * 2 * 1 * (bytes / 8) / 2), 1e-6 * bytes);
  for (int n : {16, 64}) {
    const Network net = fat_tree(n);
    const double tree = simulate(net, tree_all_reduce(n, bytes), 1 << 20).seconds;
    const double direct = simulate(net, direct_all_reduce(n, bytes), 1 << 20).seconds;
    const double library = simulate(net, hierarchical_all_reduce(n, 8, bytes, true), 1 << 20).seconds;
    EXPECT_LT(library, tree) << n << " GPUs";
    EXPECT_LT(library, direct) << n << " GPUs";
  }
}

TEST(Simulator, TorusAllReduceUsesAllSixLinks) {
  const double bw = 100e9, bytes = 1e9;
  const Network net = torus3d(4, 4, 4, bw, 1e-6);
  const Result r = simulate(net, torus_all_reduce(4, 4, 4, bytes), 256e3);
  const int n = 64;
  const double bound = 2.0 * (n - 1) / n * bytes / (6 * bw);  // six links out of every GPU
  EXPECT_GT(r.seconds, bound);
  EXPECT_LT(r.seconds, bound * 1.25) << "utilization " << bound / r.seconds;
}

TEST(Simulator, RoutesTakeTheShortestWays) {
  const Network torus = torus3d(8, 4, 2);
  auto hops = [&](const Network& n, int s, int d) { return int(n.route(s, d).size()); };
  EXPECT_EQ(hops(torus, 0, 0), 0);
  EXPECT_EQ(hops(torus, 0, 7), 1);                  // wraps round in x
  EXPECT_EQ(hops(torus, 0, 4), 4);                  // x distance 4 either way
  EXPECT_EQ(hops(torus, 0, 8 * 2 + 3 + 32), 3 + 2 + 1);  // x 3, y 2, z 1
  const Network tree = fat_tree(128, 8, 32, 4);
  EXPECT_EQ(hops(tree, 0, 7), 2);    // same node: NVSwitch
  EXPECT_EQ(hops(tree, 0, 9), 2);    // same leaf
  EXPECT_EQ(hops(tree, 0, 100), 4);  // through a spine
  const std::vector<int> r = tree.route(0, 100);
  EXPECT_EQ(tree.links()[size_t(r.front())].from, 0);
  EXPECT_EQ(tree.links()[size_t(r.back())].to, 100);
}

TEST(Simulator, HierarchicalPlanCrossesTheNetworkOncePerNode) {
  // Ranks of 4 per node; rank 1 sends 2 tokens: token 0 to ranks 5, 6 (node 1) and 2 (own node),
  // token 1 to ranks 6, 9 (nodes 1 and 2) and itself.
  const std::vector<int> dest = {5, 6, 2, 6, 9, 1};
  std::map<std::tuple<int, int, int>, int64_t> got;
  for (const PlannedSend& s : plan_hierarchical_dispatch(1, dest, 3, 4)) got[{s.stage, s.from, s.to}] = s.tokens;
  const std::map<std::tuple<int, int, int>, int64_t> want = {
      {{0, 1, 2}, 1},                  // inside the node: straight
      {{0, 1, 5}, 2},                  // node 1's forwarder (local index 1): both tokens, once each
      {{1, 5, 6}, 2},                  // forwarded to rank 6
      {{0, 1, 9}, 1},                  // node 2's forwarder is rank 9 itself: no forward
  };
  EXPECT_EQ(got, want);
  // A whole dispatch simulates; forwards wait for their first leg.
  const Network net = fat_tree(32, 8, 16, 2);
  const std::vector<Transfer> w = dispatch_workload(32, 8, 64, 7168, 8, 64, 1);
  EXPECT_FALSE(w.empty());
  EXPECT_GT(simulate(net, w).seconds, 0.0);
  // Combine mirrors it: the same sends reversed, so the same bytes (per token) travel.
  const std::vector<Transfer> back = combine_workload(32, 8, 64, 7168, 8, 64, 1);
  ASSERT_EQ(back.size(), w.size());
  double there = 0, back_bytes = 0;
  for (const Transfer& t : w) there += t.bytes;
  for (const Transfer& t : back) back_bytes += t.bytes;
  EXPECT_DOUBLE_EQ(there, back_bytes);
  EXPECT_GT(simulate(net, back).seconds, 0.0);
}

// The flows of the hierarchical plan (expected counts, forwards in batches) against the sampled
// per-source plans at a size both run: within 3% in time (sampling noise and batching), within 1%
// in bytes.
TEST(Simulator, FlowsAgreeWithSampledPlans) {
  const Network net = fat_tree(64);
  const FlowAggregation per_rank{8, 8};
  auto bytes = [](const std::vector<Transfer>& w) {
    double sum = 0;
    for (const Transfer& t : w) sum += t.bytes;
    return sum;
  };
  const std::vector<Transfer> sampled = dispatch_workload(64, 8, 1024, 7392, 8, 256, 7);
  const std::vector<Transfer> flows = dispatch_flows(64, 8, 1024, 7392, 8, 256, per_rank);
  EXPECT_NEAR(bytes(flows) / bytes(sampled), 1.0, 0.01);
  const double d = simulate(net, sampled, 256 << 10).seconds, df = simulate(net, flows, 256 << 10).seconds;
  EXPECT_NEAR(df / d, 1.0, 0.03) << d << " vs " << df;
  const double c = simulate(net, combine_workload(64, 8, 1024, 14336, 8, 256, 7), 256 << 10).seconds;
  const double cf = simulate(net, combine_flows(64, 8, 1024, 14336, 8, 256, per_rank), 256 << 10).seconds;
  EXPECT_NEAR(cf / c, 1.0, 0.03) << c << " vs " << cf;
  // One lane per node pair moves the same bytes, from rails that rotate with the pair: a NIC
  // carries at most one more of its node's 7 legs (each 8 ranks' worth) than the even share.
  double off_node_total = 0;
  std::vector<double> off_node(64, 0.0);
  for (const Transfer& t : dispatch_flows(64, 8, 1024, 7392, 8, 256, {1, 8})) {
    if (t.src / 8 != t.dst / 8) off_node[size_t(t.src)] += t.bytes;
    if (t.src / 8 != t.dst / 8) off_node_total += t.bytes;
  }
  for (double b : off_node) EXPECT_LE(b, off_node_total / 64 * 8 / 7 * (1 + 1e-9));
  EXPECT_NEAR(bytes(dispatch_flows(64, 8, 1024, 7392, 8, 256, {1, 8})) / bytes(flows), 1.0, 1e-9);
  EXPECT_THROW(dispatch_flows(64, 8, 1024, 7392, 8, 256, {3, 8}), rt::Error);  // lanes must divide a node
}

// 10,000 GPUs of normal dispatch run, between two bounds: below, the expected bytes a GPU sends off
// its node over its off-node links (a token reaches another node with probability
// 1 - C(E - e, 8) / C(E, 8), e the node's experts); above, every chunk waiting at each link of its
// longest chain (leg then forward) for at most the busiest link's whole work (FIFO links never idle
// while work waits).
void expect_within_bounds(const Network& net, int ranks_per_node, double off_node_bandwidth, int longest_chain_hops) {
  const int n = net.gpus(), nodes = n / ranks_per_node, experts = n;
  const double token_bytes = 7392, tokens = 4096;
  const Result r = simulate(net, dispatch_flows(n, ranks_per_node, tokens, token_bytes, 8, experts, {1, 1}), 16 << 20);
  double miss = 1;
  for (int i = 0; i < 8; ++i) miss *= double(experts - ranks_per_node - i) / (experts - i);
  const double lower = (nodes - 1) * tokens * (1 - miss) * token_bytes / off_node_bandwidth;
  EXPECT_GT(r.seconds, lower) << net.name();
  EXPECT_GE(r.seconds, r.max_link_busy) << net.name();
  EXPECT_LT(r.seconds, longest_chain_hops * (r.max_link_busy + 2e-6)) << net.name();
}

TEST(Simulator, TenThousandGpuDispatchStaysWithinBounds) {
  // NVL72 racks on a fat-tree: a 50 GB/s NIC per GPU; chains of 4 network + 2 NVLink hops.
  expect_within_bounds(fat_tree(10008, 72), 72, 50e9, 6);
  // A 25 x 25 x 16 torus whose x rings are the nodes: legs leave over the y and z links (4 of
  // them), at most 12 + 8 hops, then forwards along the ring, at most 12.
  expect_within_bounds(torus3d(25, 25, 16), 25, 4 * 100e9, 32);
}

TEST(Simulator, BadInputIsAClearError) {
  const Network net = nvlink_domain(4);
  try {
    simulate(net, {{0, 1, 1e6, {1}}, {1, 2, 1e6, {0}}});
    ADD_FAILURE() << "a dependency cycle ran";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("dependency cycle"), std::string::npos) << e.what();
  }
  try {
    simulate(net, {{0, 4, 1e6, {}}});
    ADD_FAILURE() << "a transfer to a GPU that does not exist ran";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not on"), std::string::npos) << e.what();
  }
}

}  // namespace
