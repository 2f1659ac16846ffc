// Collectives against references computed from every rank's inputs, on 2, 4 and 8 ranks.
#include <cmath>

#include "harness.h"
#include "testutil/tensors.h"

namespace {

using deepep::Algorithm;
using deepep::ReduceOp;
using deepep_test::expect_all_failed_with;
using deepep_test::expect_all_ok;
using deepep_test::mix;
using deepep_test::run_ranks;
using deepep_test::test_seed;
using deepep_test::unit;

deepep::CommOptions comm_options(int64_t inbound = 1 << 20) {
  deepep::CommOptions o = deepep_test::test_options();
  o.inbound_bytes = inbound;
  return o;
}

// Small integers: every sum of up to 8 of them is exact in bf16, f16, f32 and i32, in any order.
double small_int(uint64_t seed, int rank, int64_t i) { return double(int64_t(mix(seed, uint64_t(rank), uint64_t(i)) % 17) - 8); }

rt::Tensor filled(int64_t n, rt::DType dtype, const std::function<double(int64_t)>& f) {
  rt::Tensor t = rt::Tensor::empty({n}, dtype);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = f(i);
  testutil::from_f64(t, v);
  return t;
}

double reduce_ref(ReduceOp op, const std::vector<double>& vals) {
  double a = vals[0];
  for (size_t i = 1; i < vals.size(); ++i)
    a = op == ReduceOp::Sum ? a + vals[i] : op == ReduceOp::Max ? std::max(a, vals[i]) : std::min(a, vals[i]);
  return a;
}

void all_reduce_exact(int ranks) {
  const uint64_t seed = test_seed();
  expect_all_ok(run_ranks(ranks, [seed](const std::shared_ptr<deepep::Group>& g) {
    deepep::Comm comm(g, comm_options());
    const int R = g->size(), me = g->rank();
    for (Algorithm algo : {Algorithm::Direct, Algorithm::Ring, Algorithm::Tree})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
        for (rt::DType dt : {rt::DType::F32, rt::DType::BF16, rt::DType::F16, rt::DType::I32})
          for (int64_t n : {int64_t(1), int64_t(5), int64_t(3001), int64_t(40037)}) {
            const uint64_t s = mix(seed, uint64_t(op), uint64_t(dt), uint64_t(n));
            rt::Tensor t = filled(n, dt, [&](int64_t i) { return small_int(s, me, i); });
            deepep::all_reduce(comm, t, op, algo);
            const std::vector<double> got = testutil::to_f64(t);
            for (int64_t i = 0; i < n; ++i) {
              std::vector<double> vals;
              for (int r = 0; r < R; ++r) vals.push_back(small_int(s, r, i));
              const double want = reduce_ref(op, vals);
              EP_CHECK(got[size_t(i)] == want, "all_reduce ", deepep::name(algo), " ", deepep::name(op), " ",
                       rt::name(dt), " n=", n, " at ", i, ": got ", got[size_t(i)], " want ", want);
            }
          }
  }));
}

TEST(DeepEPCollectives, AllReduceExact2Ranks) { all_reduce_exact(2); }
TEST(DeepEPCollectives, AllReduceExact3Ranks) { all_reduce_exact(3); }  // a tree with a missing branch
TEST(DeepEPCollectives, AllReduceExact4Ranks) { all_reduce_exact(4); }
TEST(DeepEPCollectives, AllReduceExact8Ranks) { all_reduce_exact(8); }

TEST(DeepEPCollectives, AllReduceRandomFloatsMatchFloat64Reference) {
  const uint64_t seed = test_seed();
  expect_all_ok(run_ranks(4, [seed](const std::shared_ptr<deepep::Group>& g) {
    deepep::Comm comm(g, comm_options());
    const int R = g->size(), me = g->rank();
    auto value = [&](int r, int64_t i) { return 2 * unit(mix(seed, 77, uint64_t(r), uint64_t(i))) - 1; };
    for (Algorithm algo : {Algorithm::Direct, Algorithm::Ring, Algorithm::Tree})
      for (rt::DType dt : {rt::DType::F32, rt::DType::BF16}) {
        const int64_t n = 100003;
        rt::Tensor t = filled(n, dt, [&](int64_t i) { return value(me, i); });
        deepep::all_reduce(comm, t, ReduceOp::Sum, algo);
        const std::vector<double> got = testutil::to_f64(t);
        std::vector<double> ref(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          // The reference sums the inputs as stored (rounded to the dtype), in float64.
          for (int r = 0; r < R; ++r) {
            rt::Tensor one = filled(1, dt, [&](int64_t) { return value(r, i); });
            ref[size_t(i)] += testutil::to_f64(one)[0];
          }
        }
        const double err = testutil::rel_error(got, ref);
        // bf16 rounds once per step: once for direct, at every ring step and tree level.
        const double bound = dt == rt::DType::F32 ? 1e-6 : (algo == Algorithm::Direct ? 6e-3 : 2e-2);
        EP_CHECK(err < bound, deepep::name(algo), " ", rt::name(dt), ": relative error ", err);
      }
  }));
}

TEST(DeepEPCollectives, ReduceScatterAllGatherAllToAllBroadcastBarrier) {
  const uint64_t seed = test_seed();
  for (int ranks : {2, 4, 8}) {
    SCOPED_TRACE(ranks);
    expect_all_ok(run_ranks(ranks, [seed](const std::shared_ptr<deepep::Group>& g) {
      deepep::Comm comm(g, comm_options());
      const int R = g->size(), me = g->rank();
      // reduce_scatter, both algorithms
      for (Algorithm algo : {Algorithm::Direct, Algorithm::Ring}) {
        const int64_t n = 1237;
        rt::Tensor in = filled(n * R, rt::DType::I32, [&](int64_t i) { return small_int(seed, me, i); });
        rt::Tensor out = rt::Tensor::empty({n}, rt::DType::I32);
        testutil::poison(out);
        deepep::reduce_scatter(comm, out, in, ReduceOp::Sum, algo);
        for (int64_t i = 0; i < n; ++i) {
          double want = 0;
          for (int r = 0; r < R; ++r) want += small_int(seed, r, me * n + i);
          EP_CHECK(out.data_as<int32_t>()[i] == int32_t(want), "reduce_scatter ", deepep::name(algo), " at ", i);
        }
      }
      // all_gather
      {
        const int64_t n = 999;
        rt::Tensor in = filled(n, rt::DType::F32, [&](int64_t i) { return double(me * 100000 + i); });
        rt::Tensor out = rt::Tensor::empty({n * R}, rt::DType::F32);
        testutil::poison(out);
        deepep::all_gather(comm, out, in);
        for (int r = 0; r < R; ++r)
          for (int64_t i = 0; i < n; ++i) EP_CHECK(out.data_as<float>()[r * n + i] == float(r * 100000 + i));
      }
      // all_to_all
      {
        const int64_t n = 513;
        rt::Tensor in = filled(n * R, rt::DType::I32, [&](int64_t i) { return double(me * 1000000 + i); });
        rt::Tensor out = rt::Tensor::empty({n * R}, rt::DType::I32);
        testutil::poison(out);
        deepep::all_to_all(comm, out, in);
        for (int r = 0; r < R; ++r)
          for (int64_t i = 0; i < n; ++i)
            EP_CHECK(out.data_as<int32_t>()[r * n + i] == r * 1000000 + me * n + i, "all_to_all from ", r, " at ", i);
      }
      // all_to_allv with uneven counts, zeros included
      {
        auto count = [&](int src, int dst) { return int64_t(mix(seed, 5, uint64_t(src), uint64_t(dst)) % 4 == 0 ? 0 : mix(seed, 6, uint64_t(src), uint64_t(dst)) % 3000); };
        std::vector<int64_t> sc(static_cast<size_t>(R)), rc(static_cast<size_t>(R));
        int64_t ts = 0, tr = 0;
        for (int r = 0; r < R; ++r) ts += sc[size_t(r)] = count(me, r), tr += rc[size_t(r)] = count(r, me);
        rt::Tensor in = filled(std::max<int64_t>(ts, 1), rt::DType::I64, [&](int64_t i) { return double(me * 10000000 + i); });
        rt::Tensor out = rt::Tensor::empty({std::max<int64_t>(tr, 1)}, rt::DType::I64);
        testutil::poison(out);
        deepep::all_to_allv(comm, out, rc, in, sc);
        int64_t at = 0;
        for (int r = 0; r < R; ++r) {
          int64_t src_off = 0;
          for (int q = 0; q < me; ++q) src_off += count(r, q);
          for (int64_t i = 0; i < count(r, me); ++i, ++at)
            EP_CHECK(out.data_as<int64_t>()[at] == int64_t(r) * 10000000 + src_off + i, "all_to_allv from ", r);
        }
      }
      // broadcast from every root
      for (int root = 0; root < R; ++root) {
        const int64_t n = 4099;
        rt::Tensor t = filled(n, rt::DType::BF16, [&](int64_t i) { return me == root ? double((i * 7 + root) % 200) : -1.0; });
        deepep::broadcast(comm, t, root);
        const auto got = testutil::to_f64(t);
        for (int64_t i = 0; i < n; ++i) EP_CHECK(got[size_t(i)] == double((i * 7 + root) % 200), "broadcast root ", root);
      }
      for (int i = 0; i < 5; ++i) deepep::barrier(comm);
    }));
  }
}

TEST(DeepEPCollectives, DisagreementIsAnErrorOnEveryRankAndTheCommunicatorStaysUsable) {
  expect_all_ok(run_ranks(4, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::Comm comm(g, comm_options());
    const int me = g->rank();
    auto expect_error = [&](const std::function<void()>& f, std::vector<std::string> pieces) {
      try {
        f();
      } catch (const rt::Error& e) {
        for (const auto& p : pieces) EP_CHECK(std::string(e.what()).find(p) != std::string::npos, "'", p, "' not in: ", e.what());
        return;
      }
      EP_CHECK(false, "no error");
    };
    // dtype disagreement
    expect_error([&] {
      rt::Tensor t = filled(10, me == 2 ? rt::DType::F16 : rt::DType::F32, [](int64_t) { return 1.0; });
      deepep::all_reduce(comm, t);
    }, {"disagree", "rank 2", "float16", "float32"});
    // size disagreement
    expect_error([&] {
      rt::Tensor t = filled(me == 1 ? 11 : 10, rt::DType::F32, [](int64_t) { return 1.0; });
      deepep::all_reduce(comm, t);
    }, {"disagree", "rank 1", "float32[11]"});
    // the tree is an all_reduce algorithm
    expect_error([&] {
      rt::Tensor in = filled(40, rt::DType::F32, [](int64_t) { return 1.0; });
      rt::Tensor out = rt::Tensor::empty({10}, rt::DType::F32);
      deepep::reduce_scatter(comm, out, in, ReduceOp::Sum, Algorithm::Tree);
    }, {"Algorithm::Tree is an all_reduce algorithm"});
    // a local error (unsupported dtype on one rank only) is reported everywhere
    expect_error([&] {
      rt::Tensor t = filled(10, me == 3 ? rt::DType::U8 : rt::DType::F32, [](int64_t) { return 1.0; });
      deepep::all_reduce(comm, t);
    }, {"rank 3", "cannot reduce uint8"});
    // all_to_allv counts that do not match
    expect_error([&] {
      std::vector<int64_t> sc(4, 1), rc(4, 1);
      if (me == 0) rc[1] = 2;
      rt::Tensor in = filled(8, rt::DType::F32, [](int64_t) { return 1.0; });
      rt::Tensor out = rt::Tensor::empty({8}, rt::DType::F32);
      deepep::all_to_allv(comm, out, rc, in, sc);
    }, {"rank 1 sends 1 elements to rank 0 but rank 0 expects 2"});
    // broadcast from a root out of range
    expect_error([&] {
      rt::Tensor t = filled(3, rt::DType::F32, [](int64_t) { return 1.0; });
      deepep::broadcast(comm, t, 7);
    }, {"root 7 is out of range"});
    // still usable
    rt::Tensor t = filled(100, rt::DType::I32, [&](int64_t) { return double(me); });
    deepep::all_reduce(comm, t);
    EP_CHECK(t.data_as<int32_t>()[99] == 0 + 1 + 2 + 3);
  }));
}

}  // namespace
