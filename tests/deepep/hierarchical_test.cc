// The hierarchical all-reduce on groups split into several emulated nodes (a host identity per
// rank, DEEPEP_SHM_EMULATE_NODES=1 so that shm serves them), and Auto's choice of algorithm.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "harness.h"
#include "testutil/tensors.h"
#include "tl/device/numeric.h"

namespace {

using deepep::Algorithm;
using deepep::ReduceOp;
using deepep_test::expect_all_failed_with;
using deepep_test::expect_all_ok;
using deepep_test::mix;
using deepep_test::on_nodes;
using deepep_test::run_ranks;
using deepep_test::test_seed;
using deepep_test::unit;

// A group of `ranks` whose rank r lies on node host(r) (named by the node's index).
struct Layout {
  int ranks;
  std::function<int(int)> host;
  std::string what;
};

deepep::Comm emulated_nodes_comm(const std::shared_ptr<deepep::Group>& g, deepep::CommOptions o) {
  setenv("DEEPEP_SHM_EMULATE_NODES", "1", 1);  // this rank's process only
  return deepep::Comm(g, o);
}

// Rank r's input: random values of both signs (small integers for i32, so sums stay exact).
double input_value(uint64_t seed, int r, int64_t i, rt::DType dt) {
  const uint64_t h = mix(seed, uint64_t(r), uint64_t(i));
  return dt == rt::DType::I32 ? double(int64_t(h % 2001) - 1000) : 2 * unit(h) - 1;
}

rt::Tensor filled(int64_t n, rt::DType dtype, const std::function<double(int64_t)>& f) {
  rt::Tensor t = rt::Tensor::empty({n}, dtype);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = f(i);
  testutil::from_f64(t, v);
  return t;
}

double combine(ReduceOp op, double a, double b) {
  return op == ReduceOp::Sum ? a + b : op == ReduceOp::Max ? std::max(a, b) : std::min(a, b);
}

// The order collectives.h documents: each node's ranks in local-rank order in the accumulator type
// (f32 for f32 and bf16), rounded to the dtype, then those partials in node order, rounded again.
// (A float sum taken in double and rounded to float is the float sum: 53 >= 2 x 24 + 2 bits.)
double documented_order(ReduceOp op, rt::DType dt, const std::vector<std::vector<double>>& by_node) {
  const bool f32_acc = dt == rt::DType::F32 || dt == rt::DType::BF16;
  auto to_acc = [f32_acc](double v) { return f32_acc ? double(float(v)) : v; };
  auto to_dtype = [dt](double acc) {
    return dt == rt::DType::BF16 ? double(tl::bfloat16_t::from_float(float(acc)).to_float()) : acc;
  };
  auto fold = [&](const std::vector<double>& vals) {
    double acc = vals[0];
    for (size_t i = 1; i < vals.size(); ++i) acc = to_acc(combine(op, acc, vals[i]));
    return to_dtype(acc);
  };
  std::vector<double> partials;
  for (const std::vector<double>& vals : by_node) partials.push_back(fold(vals));
  return fold(partials);
}

// Every rank's bytes of `t` equal (all_gather of the result, compared with this rank's own).
void check_identical_on_every_rank(deepep::Comm& comm, const rt::Tensor& t, const std::string& what) {
  rt::Tensor all = rt::Tensor::empty({t.numel() * comm.size()}, t.dtype());
  deepep::all_gather(comm, all, t);
  const size_t bytes = size_t(t.nbytes());
  for (int r = 0; r < comm.size(); ++r)
    EP_CHECK(std::memcmp(static_cast<const uint8_t*>(all.data()) + size_t(r) * bytes, t.data(), bytes) == 0, what,
             ": rank ", r, "'s result differs from rank ", comm.rank(), "'s");
}

// Hierarchical all-reduces of every dtype, op and size; each against the documented sum order
// (exactly), a float64 reference (sums) and the other ranks' bits.
void hierarchical_exact(deepep::Comm& comm, uint64_t seed, const std::vector<int64_t>& sizes) {
  const deepep::Group& g = comm.group();
  const int R = comm.size(), me = comm.rank();
  for (rt::DType dt : {rt::DType::F32, rt::DType::BF16, rt::DType::F64, rt::DType::I32})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
      for (int64_t n : sizes) {
        const uint64_t s = mix(seed, uint64_t(dt), uint64_t(op), uint64_t(n));
        rt::Tensor t = filled(n, dt, [&](int64_t i) { return input_value(s, me, i, dt); });
        // Every rank's input as stored, for the references.
        rt::Tensor inputs = rt::Tensor::empty({n * R}, dt);
        deepep::all_gather(comm, inputs, t);
        const std::vector<double> in = testutil::to_f64(inputs);
        deepep::all_reduce(comm, t, op, Algorithm::Hierarchical);
        const std::vector<double> got = testutil::to_f64(t);
        const std::string what = rt::str("hierarchical ", deepep::name(op), " ", rt::name(dt), " n=", n);
        // Against float64: each rounding costs at most its unit roundoff times the sum of the
        // magnitudes (bf16 rounds each node's partial and the total, f32 and f64 every addition).
        const double tolerance = dt == rt::DType::BF16 ? 0x1p-7 : dt == rt::DType::F32 ? 8 * 0x1p-24 : 8 * 0x1p-53;
        for (int64_t i = 0; i < n; ++i) {
          std::vector<std::vector<double>> by_node(size_t(g.num_nodes()));
          double exact = 0, magnitude = 0;
          for (int r = 0; r < R; ++r) {
            const double v = in[size_t(r) * size_t(n) + size_t(i)];
            by_node[size_t(g.peer(r).node)].push_back(v);
            exact = r == 0 ? v : combine(op, exact, v);
            magnitude += std::fabs(v);
          }
          const double want = documented_order(op, dt, by_node);
          EP_CHECK(got[size_t(i)] == want, what, " at ", i, ": got ", got[size_t(i)], ", the documented order gives ",
                   want, " (difference ", got[size_t(i)] - want, ")");
          EP_CHECK(std::fabs(got[size_t(i)] - exact) <= tolerance * magnitude, what, " at ", i, ": got ",
                   got[size_t(i)], ", float64 gives ", exact);
        }
        check_identical_on_every_rank(comm, t, what);
      }
}

const std::vector<int64_t> kSizes = {1, 5, 3001, 40037};  // 1 and 5: fewer elements than ranks or parts

void run_layout(const Layout& l) {
  SCOPED_TRACE(l.what);
  const uint64_t seed = test_seed() ^ uint64_t(l.ranks);
  expect_all_ok(run_ranks(l.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    int nodes = 0;
    for (int r = 0; r < l.ranks; ++r) nodes = std::max(nodes, l.host(r) + 1);
    EP_CHECK(g->num_nodes() == nodes, g->num_nodes());
    deepep::Comm comm = emulated_nodes_comm(g, deepep_test::test_options());
    hierarchical_exact(comm, seed, kSizes);
  }, on_nodes(l.host)));
}

TEST(DeepEPHierarchical, TwoRanksTwoNodes) { run_layout({2, [](int r) { return r; }, "2 ranks, nodes of 1"}); }
TEST(DeepEPHierarchical, FourRanksTwoEqualNodes) { run_layout({4, [](int r) { return r / 2; }, "4 ranks, 2 + 2"}); }
TEST(DeepEPHierarchical, FourRanksUnequalNodes) {
  run_layout({4, [](int r) { return r < 3 ? 0 : 1; }, "4 ranks, 3 + 1"});
}
TEST(DeepEPHierarchical, SixRanksThreeInterleavedNodes) {
  run_layout({6, [](int r) { return r % 3; }, "6 ranks, 3 nodes of 2, interleaved"});
}
TEST(DeepEPHierarchical, SixRanksThreeUnequalNodes) {
  run_layout({6, [](int r) { return r == 0 ? 0 : r < 3 ? 1 : 2; }, "6 ranks, 1 + 2 + 3"});
}
TEST(DeepEPHierarchical, EightRanksTwoNodes) { run_layout({8, [](int r) { return r / 4; }, "8 ranks, 4 + 4"}); }
TEST(DeepEPHierarchical, EightRanksThreeUnequalInterleavedNodes) {
  run_layout({8, [](int r) { return r % 3; }, "8 ranks, 3 + 3 + 2, interleaved"});
}

// Several 64 MiB blocks (the bound of the temporaries), the last one partial.
TEST(DeepEPHierarchical, BigTensorInBlocks) {
  const uint64_t seed = test_seed();
  const Layout l{4, [](int r) { return r / 2; }, "4 ranks, 2 + 2"};
  expect_all_ok(run_ranks(l.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = deepep_test::test_options();
    o.inbound_bytes = 4 << 20;
    deepep::Comm comm = emulated_nodes_comm(g, o);
    const int64_t n = (int64_t(64) << 20) / 4 * 2 + 12345;  // f32: two full blocks and a bit
    rt::Tensor t = rt::Tensor::empty({n}, rt::DType::I32);
    for (int64_t i = 0; i < n; ++i) t.data_as<int32_t>()[i] = int32_t(input_value(seed, g->rank(), i, rt::DType::I32));
    deepep::all_reduce(comm, t, ReduceOp::Sum, Algorithm::Hierarchical);
    for (int64_t i = 0; i < n; i += 997) {
      int32_t want = 0;
      for (int r = 0; r < l.ranks; ++r) want += int32_t(input_value(seed, r, i, rt::DType::I32));
      EP_CHECK(t.data_as<int32_t>()[i] == want, "at ", i);
    }
    EP_CHECK(t.data_as<int32_t>()[n - 1] == [&] {
      int32_t want = 0;
      for (int r = 0; r < l.ranks; ++r) want += int32_t(input_value(seed, r, n - 1, rt::DType::I32));
      return want;
    }());
  }, on_nodes(l.host)));
}

// One node: the hierarchical all-reduce is Direct (the same steps, the same bits).
TEST(DeepEPHierarchical, OneNodeIsDirect) {
  const uint64_t seed = test_seed();
  expect_all_ok(run_ranks(4, [seed](const std::shared_ptr<deepep::Group>& g) {
    EP_CHECK(g->num_nodes() == 1);
    deepep::Comm comm(g, deepep_test::test_options());
    hierarchical_exact(comm, seed, kSizes);
    for (rt::DType dt : {rt::DType::F32, rt::DType::BF16}) {
      rt::Tensor a = filled(30011, dt, [&](int64_t i) { return input_value(seed, g->rank(), i, dt); });
      rt::Tensor b = filled(30011, dt, [&](int64_t i) { return input_value(seed, g->rank(), i, dt); });
      deepep::all_reduce(comm, a, ReduceOp::Sum, Algorithm::Hierarchical);
      deepep::all_reduce(comm, b, ReduceOp::Sum, Algorithm::Direct);
      EP_CHECK(std::memcmp(a.data(), b.data(), size_t(a.nbytes())) == 0, rt::name(dt), ": differs from Direct");
    }
  }));
}

// Injected loss and corruption on every link (the frames path): still the documented bits.
TEST(DeepEPHierarchical, ExactUnderLossAndCorruption) {
  const uint64_t seed = test_seed();
  const Layout l{4, [](int r) { return r / 2; }, "4 ranks, 2 + 2"};
  expect_all_ok(run_ranks(l.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = deepep_test::test_options();
    o.inbound_bytes = 3 * (20 << 10);  // 4 KiB frames: many frames, so many faults
    o.faults.drop = 0.1;
    o.faults.corrupt = 0.05;
    o.faults.seed = seed;  // every link loses about 15%: some are rerouted through relays too
    deepep::Comm comm = emulated_nodes_comm(g, o);
    hierarchical_exact(comm, seed, {40037});
    uint64_t losses = 0, retransmissions = 0, corrupt = 0;
    for (const deepep::LinkStats& s : comm.link_stats()) {
      losses += s.losses;
      retransmissions += s.retransmissions;
      corrupt += s.corrupt_received;
    }
    EP_CHECK(losses > 0 && retransmissions > 0 && corrupt > 0, "losses ", losses, ", retransmissions ",
             retransmissions, ", corrupt ", corrupt);
  }, on_nodes(l.host)));
}

// Auto on two nodes joined by a 10 GbE NIC at 1 MiB is the hierarchical all-reduce (a faster NIC is
// no bottleneck beside shared memory: auto_choice_test.cc): the same bits.
TEST(DeepEPHierarchical, AutoRunsHierarchicalAcrossNodes) {
  const uint64_t seed = test_seed();
  const Layout l{4, [](int r) { return r / 2; }, "4 ranks, 2 + 2"};
  expect_all_ok(run_ranks(l.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = deepep_test::test_options();
    o.nic_gbytes_per_s = 1.25;
    o.nic_latency_us = 10;
    o.nics_per_node = 1;  // not this host's count: with two NICs a node Ring wins here
    deepep::Comm comm = emulated_nodes_comm(g, o);
    const int64_t n = (1 << 20) / 4;
    EP_CHECK(comm.auto_all_reduce(n * 4).algorithm == Algorithm::Hierarchical, comm.auto_all_reduce(n * 4).to_string());
    auto mine = [&](int64_t i) { return input_value(seed, g->rank(), i, rt::DType::F32); };
    rt::Tensor a = filled(n, rt::DType::F32, mine);
    rt::Tensor b = filled(n, rt::DType::F32, mine);
    deepep::all_reduce(comm, a);
    deepep::all_reduce(comm, b, ReduceOp::Sum, Algorithm::Hierarchical);
    EP_CHECK(std::memcmp(a.data(), b.data(), size_t(a.nbytes())) == 0, "Auto differs from Hierarchical");
  }, on_nodes(l.host)));
}

TEST(DeepEPHierarchical, ReduceScatterRejectsIt) {
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::Comm comm(g, deepep_test::test_options());
    rt::Tensor in = filled(20, rt::DType::F32, [](int64_t) { return 1.0; });
    rt::Tensor out = rt::Tensor::empty({10}, rt::DType::F32);
    deepep::reduce_scatter(comm, out, in, ReduceOp::Sum, Algorithm::Hierarchical);
  }), {"Algorithm::Hierarchical is an all_reduce algorithm", "reduce_scatter takes Direct, Ring or Auto"});
}

}  // namespace
