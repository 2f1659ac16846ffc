// Auto's choice of algorithm from the group's network (collectives.h choose_all_reduce, Comm's
// cached choices): synthetic topologies against the simulator's fastest candidate, the crossover a
// slow NIC moves, the measured rule on one host, agreement and results on emulated nodes, bad input.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>

#include "deepep/simulator.h"
#include "harness.h"

namespace {

using deepep::Algorithm;
using deepep::AlgorithmChoice;
using deepep::Fabric;
using deepep::GroupNetwork;
using deepep::LinkSpeed;
using deepep::uniform_network;
using deepep_test::expect_all_failed_with;
using deepep_test::expect_all_ok;
using deepep_test::run_ranks;

constexpr int64_t KiB = 1024, MiB = 1024 * KiB;
const LinkSpeed kSlowNic{1.25e9, 10e-6};  // 10 GbE
const LinkSpeed kFastNic{50e9, 2e-6};     // 400 Gb/s, the simulator's fat-tree NIC

// The candidate with the least predicted time (the earlier on a tie), as Auto must pick it.
Algorithm fastest(const AlgorithmChoice& c) {
  size_t best = 0;
  for (size_t i = 1; i < c.candidates.size(); ++i)
    if (c.predicted_seconds[i] < c.predicted_seconds[best]) best = i;
  return c.candidates[best];
}

// The smallest power of two from 1 KiB at which Auto picks Hierarchical (0: none up to 64 MiB).
int64_t hierarchical_from(const GroupNetwork& net) {
  for (int64_t b = KiB; b <= 64 * MiB; b *= 4)
    if (deepep::choose_all_reduce(net, b).algorithm == Algorithm::Hierarchical) return b;
  return 0;
}

TEST(DeepEPAutoChoice, SyntheticTopologiesPickTheSimulatorsFastest) {
  struct Case {
    GroupNetwork net;
    std::vector<int64_t> sizes;
  };
  std::vector<Case> cases = {
      {uniform_network(1, 8, Fabric::NVLink, 8), {4 * KiB, 1 * MiB, 64 * MiB}},
      {uniform_network(1, 8, Fabric::PCIe, 1), {4 * KiB, 1 * MiB, 64 * MiB}},
      {uniform_network(2, 8, Fabric::NVLink, 8, kFastNic), {4 * KiB, 256 * KiB, 16 * MiB}},
      {uniform_network(2, 8, Fabric::NVLink, 8, kSlowNic), {4 * KiB, 256 * KiB, 16 * MiB}},
      {uniform_network(8, 8, Fabric::NVLink, 8, kFastNic), {4 * KiB, 1 * MiB}},
      {uniform_network(32, 8, Fabric::NVLink, 8, kSlowNic), {4 * KiB}},
  };
  for (const Case& c : cases)
    for (int64_t bytes : c.sizes) {
      const AlgorithmChoice choice = deepep::choose_all_reduce(c.net, bytes);
      SCOPED_TRACE(c.net.to_string() + ", " + std::to_string(bytes) + " bytes: " + choice.to_string());
      EXPECT_FALSE(choice.measured_rule);
      ASSERT_EQ(choice.predicted_seconds.size(), choice.candidates.size());
      EXPECT_EQ(choice.candidates.size(), c.net.nodes() > 1 ? 4u : 3u);
      EXPECT_EQ(choice.algorithm, fastest(choice));
      // Every candidate pays at least one latency of the links it crosses.
      for (double t : choice.predicted_seconds) EXPECT_GE(t, c.net.link.latency);
    }
}

TEST(DeepEPAutoChoice, ChoicesChangeWithTheNetwork) {
  // One node: Direct for small messages, Ring for big ones (the simulated direct step sends to the
  // ranks in order, so the lowest ranks' links receive from all at once; docs/deepep.md).
  EXPECT_EQ(deepep::choose_all_reduce(uniform_network(1, 8, Fabric::NVLink, 8), 4 * KiB).algorithm, Algorithm::Direct);
  EXPECT_EQ(deepep::choose_all_reduce(uniform_network(1, 8, Fabric::NVLink, 8), 64 * MiB).algorithm, Algorithm::Ring);
  EXPECT_EQ(deepep::choose_all_reduce(uniform_network(1, 8, Fabric::PCIe, 1), 4 * KiB).algorithm, Algorithm::Direct);
  EXPECT_EQ(deepep::choose_all_reduce(uniform_network(1, 8, Fabric::PCIe, 1), 64 * MiB).algorithm, Algorithm::Ring);
  // Several nodes: the hierarchical all-reduce from some size on, earlier the slower the NIC.
  const int64_t fast = hierarchical_from(uniform_network(2, 8, Fabric::NVLink, 8, kFastNic));
  const int64_t slow = hierarchical_from(uniform_network(2, 8, Fabric::NVLink, 8, kSlowNic));
  EXPECT_EQ(fast, 256 * KiB);  // the crossover the simulator's fat-tree gave the former constant
  EXPECT_EQ(slow, 4 * KiB);
  EXPECT_EQ(deepep::choose_all_reduce(uniform_network(2, 8, Fabric::NVLink, 8, kSlowNic), 1 * KiB).algorithm,
            Algorithm::Direct);
  EXPECT_EQ(deepep::choose_all_reduce(uniform_network(2, 8, Fabric::NVLink, 8, kFastNic), 4 * KiB).algorithm,
            Algorithm::Direct);
  // Shared memory across nodes: a NIC faster than the ranks' memory copies is no bottleneck, and the
  // hierarchical all-reduce's two extra in-node steps lose; a 10 GbE NIC makes it win from 1 MiB.
  EXPECT_EQ(deepep::choose_all_reduce(uniform_network(2, 2, Fabric::SharedMemory, 1), 1 * MiB).algorithm,
            Algorithm::Ring);
  EXPECT_EQ(deepep::choose_all_reduce(uniform_network(2, 2, Fabric::SharedMemory, 1, kSlowNic), 1 * MiB).algorithm,
            Algorithm::Hierarchical);
  // reduce_scatter: Direct or Ring only.
  const AlgorithmChoice rs = deepep::choose_reduce_scatter(uniform_network(1, 8, Fabric::PCIe, 1), 64 * MiB);
  EXPECT_EQ(rs.candidates, (std::vector<Algorithm>{Algorithm::Direct, Algorithm::Ring}));
  EXPECT_EQ(rs.algorithm, fastest(rs));
}

TEST(DeepEPAutoChoice, OneHostOnSharedMemoryKeepsTheMeasuredRule) {
  auto pick = [](int ranks, int64_t bytes) {
    const AlgorithmChoice c = deepep::choose_all_reduce(uniform_network(1, ranks, Fabric::SharedMemory, 1), bytes);
    EXPECT_TRUE(c.measured_rule || ranks == 1) << c.to_string();
    return c.algorithm;
  };
  EXPECT_EQ(pick(4, 0), Algorithm::Direct);
  EXPECT_EQ(pick(4, 4 * KiB), Algorithm::Direct);
  EXPECT_EQ(pick(4, 4 * MiB - 1), Algorithm::Direct);  // the exact size decides (docs/perf.md)
  EXPECT_EQ(pick(4, 2 * MiB), Algorithm::Direct);
  EXPECT_EQ(pick(4, 4 * MiB), Algorithm::Ring);
  EXPECT_EQ(pick(2, 64 * MiB), Algorithm::Direct);
  EXPECT_EQ(pick(64, 1 * KiB), Algorithm::Direct);
  EXPECT_EQ(pick(1, 64 * MiB), Algorithm::Direct);
  EXPECT_EQ(deepep::choose_reduce_scatter(uniform_network(1, 4, Fabric::SharedMemory, 1), 8 * MiB).algorithm,
            Algorithm::Ring);
  EXPECT_EQ(deepep::size_bucket(0), 1);
  EXPECT_EQ(deepep::size_bucket(1000), 1024);
  EXPECT_EQ(deepep::size_bucket(1024), 1024);
}

// The simulated hierarchical all-reduce on unequal nodes follows the library's: parts for the first
// L = 2 local ranks of nodes {0, 1, 2} and {3, 4}; rank 2 takes part inside its node only.
TEST(DeepEPAutoChoice, HierarchicalWorkloadOnUnequalNodes) {
  const std::vector<deepep::sim::Transfer> t = deepep::sim::hierarchical_all_reduce({{0, 1, 2}, {3, 4}}, 1000);
  ASSERT_EQ(t.size(), 20u);  // in node 4 + 2, across 2 x 2 twice, back in node 4 + 2
  double from_rank2 = 0, to_rank2 = 0;
  for (const deepep::sim::Transfer& x : t) {
    if (x.src == 2) from_rank2 += x.bytes;
    if (x.dst == 2) to_rank2 += x.bytes;
    EXPECT_FALSE((x.src == 2 && x.dst >= 3) || (x.dst == 2 && x.src >= 3)) << x.src << " -> " << x.dst;
  }
  EXPECT_DOUBLE_EQ(from_rank2, 1000);  // its two halves to local ranks 0 and 1
  EXPECT_DOUBLE_EQ(to_rank2, 1000);    // the two reduced halves back
  const deepep::sim::Network net = deepep::sim::group_network({0, 0, 0, 1, 1}, {1, 2}, 5e9, 10e-6, 25e9, 2e-6);
  EXPECT_GT(deepep::sim::simulate(net, t).seconds, 0);
  EXPECT_THROW(deepep::sim::hierarchical_all_reduce({{0, 1}, {1, 2}}, 1000), rt::Error);
}

TEST(DeepEPAutoChoice, BadNetworksAndSizesAreClearErrors) {
  auto expect_error = [](const GroupNetwork& net, int64_t bytes, const std::string& piece) {
    try {
      (void)deepep::choose_all_reduce(net, bytes);
      ADD_FAILURE() << "no error for " << net.to_string() << ", " << bytes << " bytes";
    } catch (const rt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("choose_all_reduce"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
    }
  };
  GroupNetwork net = uniform_network(2, 2, Fabric::SharedMemory, 1);
  expect_error(net, -1, "must be between 0 and 2^62");
  GroupNetwork bad = net;
  bad.nic.bandwidth = -5;
  expect_error(bad, 1, "the NIC bandwidth -5 B/s must be positive");
  bad = net;
  bad.link.latency = std::numeric_limits<double>::quiet_NaN();
  expect_error(bad, 1, "the link latency");
  bad = net;
  bad.nics_per_node[1] = 0;
  expect_error(bad, 1, "node 1 has 0 NICs");
  bad = net;
  bad.node_of_rank = {0, 0, 0, 0};
  expect_error(bad, 1, "node 1 has no rank");
  bad.node_of_rank = {0, 0, 2, 1};
  expect_error(bad, 1, "rank 2 is on node 2 of 2");
  EXPECT_THROW(uniform_network(0, 8, Fabric::NVLink, 8), rt::Error);
  EXPECT_THROW(deepep::host_gpu_network(deepep::Topology{}), rt::Error);
}

// A Comm made on 2 ranks with the options `set` adjusts (per rank) fails on every rank with `pieces`.
void expect_comm_rejects(const std::function<void(deepep::CommOptions&, int rank)>& set,
                         const std::vector<std::string>& pieces) {
  expect_all_failed_with(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = deepep_test::test_options();
    set(o, g->rank());
    deepep::Comm comm(g, o);
  }), pieces);
}

TEST(DeepEPAutoChoice, CommRejectsBadOrDisagreeingNicOptions) {
  expect_comm_rejects([](deepep::CommOptions& o, int) { o.nic_gbytes_per_s = -1; },
                      {"nic_gbytes_per_s=-1 must be positive (0: the default, 25 GB/s)"});
  expect_comm_rejects([](deepep::CommOptions& o, int) { o.nic_latency_us = std::numeric_limits<double>::infinity(); },
                      {"nic_latency_us=inf must be positive or zero"});
  expect_comm_rejects([](deepep::CommOptions& o, int rank) { o.nic_gbytes_per_s = rank == 0 ? 10 : 20; },
                      {"the ranks disagree", "NIC 10 GB/s", "NIC 20 GB/s"});
  expect_comm_rejects([](deepep::CommOptions& o, int) { o.nics_per_node = -1; }, {"nics_per_node=-1 must be >= 0"});
  // Speeds that print alike (6 digits) but differ: still a disagreement, raised on every rank.
  expect_comm_rejects([](deepep::CommOptions& o, int rank) { o.nic_gbytes_per_s = rank == 0 ? 25.0000001 : 25.0000002; },
                      {"the ranks disagree on the NIC speed"});
}

// Four ranks on two emulated nodes: every rank holds the same network and makes the same choice;
// the choice follows the NIC option; Auto's results are the chosen algorithm's bits.
TEST(DeepEPAutoChoice, RanksAgreeOnEmulatedNodes) {
  deepep_test::RunOptions ro;
  ro.host_of = [](int r) { return rt::str("node-", r / 2); };
  expect_all_ok(run_ranks(4, [](const std::shared_ptr<deepep::Group>& g) {
    setenv("DEEPEP_SHM_EMULATE_NODES", "1", 1);  // this rank's process only
    for (const double nic_gbytes : {0.0, 1.25}) {
      deepep::CommOptions o = deepep_test::test_options();
      o.nic_gbytes_per_s = nic_gbytes;
      o.nics_per_node = 1;  // not this host's count: the expected choices assume one NIC a node
      deepep::Comm comm(g, o);
      EP_CHECK(comm.network().nodes() == 2 && comm.network().fabric == Fabric::SharedMemory,
               comm.network().to_string());
      const int64_t n = (1 << 20) / 4;
      const AlgorithmChoice& choice = comm.auto_all_reduce(n * 4);
      EP_CHECK(&comm.auto_all_reduce(n * 4 - 100) == &choice, "the same bucket is not one cached choice");
      const Algorithm expected = nic_gbytes > 0 ? Algorithm::Hierarchical : Algorithm::Ring;
      EP_CHECK(choice.algorithm == expected, choice.to_string());
      const std::string mine = comm.network().to_string() + " | " + choice.to_string();
      for (const std::string& other : g->allgather(mine, "auto choice"))
        EP_CHECK(other == mine, "rank ", g->rank(), " has ", mine, " but another has ", other);
      rt::Tensor a = rt::Tensor::empty({n}, rt::DType::F32), b = rt::Tensor::empty({n}, rt::DType::F32);
      for (int64_t i = 0; i < n; ++i)
        a.data_as<float>()[i] = b.data_as<float>()[i] = float((i * 7 + g->rank() * 13) % 101) * 0.25f - 12.0f;
      deepep::all_reduce(comm, a);
      deepep::all_reduce(comm, b, deepep::ReduceOp::Sum, expected);
      EP_CHECK(std::memcmp(a.data(), b.data(), size_t(a.nbytes())) == 0, "Auto differs from ", deepep::name(expected));
      for (int64_t i = 0; i < n; i += 4099) {
        double sum = 0;
        for (int r = 0; r < 4; ++r) sum += double((i * 7 + r * 13) % 101) * 0.25 - 12.0;
        EP_CHECK(a.data_as<float>()[i] == float(sum), "element ", i, ": ", a.data_as<float>()[i], " != ", sum);
      }
    }
  }, ro));
}

}  // namespace
