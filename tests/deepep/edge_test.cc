// Edge cases: a group of one, no tokens anywhere, odd row sizes; and waiting ranks that block
// instead of spinning (the machine has fewer cores than ranks).
#include <sys/resource.h>

#include <chrono>
#include <thread>

#include "dispatch_check.h"

namespace {

using deepep_test::dispatch_and_check;
using deepep_test::expect_all_ok;
using deepep_test::MoeCase;
using deepep_test::note;
using deepep_test::run_ranks;
using deepep_test::test_options;
using deepep_test::test_seed;

TEST(DeepEPEdge, GroupOfOneRank) {
  MoeCase c;
  c.seed = test_seed();
  c.ranks = 1;
  c.experts = 4;
  c.topk = 2;
  expect_all_ok(run_ranks(1, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
    dispatch_and_check(buf, c, false, true);
    rt::Tensor t = rt::Tensor::empty({5}, rt::DType::F32);
    for (int i = 0; i < 5; ++i) t.data_as<float>()[i] = float(i);
    deepep::all_reduce(buf.comm(), t);
    EP_CHECK(t.data_as<float>()[4] == 4.0f);
    deepep::barrier(buf.comm());
  }));
}

TEST(DeepEPEdge, NoTokensAnywhereAndOddHiddenSizes) {
  expect_all_ok(run_ranks(3, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
    // No tokens on any rank.
    deepep::DispatchArgs a;
    a.x = rt::Tensor::empty({0, 64}, rt::DType::BF16);
    a.topk_idx = rt::Tensor::empty({0, 2}, rt::DType::I64);
    a.num_experts = 6;
    const auto d = buf.dispatch(a);
    EP_CHECK(d.recv_x.size(0) == 0 && d.num_recv_tokens_per_expert == std::vector<int>(2, 0));
    const auto c = buf.combine(d.recv_x, *d.handle);
    EP_CHECK(c.combined_x.size(0) == 0);
    // Odd row sizes (hidden 37, bf16: 74-byte rows) and int32 top-k indices.
    for (int hidden : {37, 1}) {
      MoeCase mc;
      mc.seed = test_seed() + uint64_t(hidden);
      mc.ranks = 3;
      mc.experts = 6;
      mc.topk = 2;
      mc.hidden = hidden;
      dispatch_and_check(buf, mc, false, false);
    }
    MoeCase mc;
    mc.seed = test_seed();
    mc.ranks = 3;
    mc.experts = 6;
    mc.topk = 3;
    deepep::DispatchArgs b;
    b.x = mc.x_bf16(g->rank());
    const rt::Tensor idx64 = mc.topk_tensor(g->rank());
    b.topk_idx = rt::Tensor::empty(idx64.shape(), rt::DType::I32);
    for (int64_t i = 0; i < idx64.numel(); ++i) b.topk_idx.data_as<int32_t>()[i] = int32_t(idx64.data_as<int64_t>()[i]);
    b.num_experts = mc.experts;
    const auto d32 = buf.dispatch(b);
    EP_CHECK(d32.recv_x.size(0) == int64_t(deepep_test::expected_received(mc, g->rank()).size()));
  }));
}

// Ranks waiting for a late one sleep: their CPU time stays far below the time they wait.
TEST(DeepEPEdge, WaitingRanksBlockInsteadOfSpinning) {
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Comm comm(g, test_options());
    rt::Tensor t = rt::Tensor::empty({1000}, rt::DType::F32);
    std::fill_n(t.data_as<float>(), 1000, 1.0f);
    deepep::all_reduce(comm, t);
    if (g->rank() == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      deepep::all_reduce(comm, t);
      return;
    }
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const auto start = std::chrono::steady_clock::now();
    deepep::all_reduce(comm, t);  // waits about 1.5 s for rank 3
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    getrusage(RUSAGE_SELF, &after);
    auto secs = [](const timeval& tv) { return double(tv.tv_sec) + 1e-6 * double(tv.tv_usec); };
    const double cpu = secs(after.ru_utime) - secs(before.ru_utime) + secs(after.ru_stime) - secs(before.ru_stime);
    note(rt::str("waited ", wall, " s using ", cpu, " s of CPU"));
    EP_CHECK(wall > 1.0, wall);
    EP_CHECK(cpu < 0.25 * wall, "a waiting rank used ", cpu, " s of CPU in ", wall, " s");
  }));
}


// The shm transport's segment ("/deepep-<rank 0's pid>-...") of a group whose rank 0 dies after
// creating it (an OOM kill while populating, in the fuzzing that found it) is removed by the
// survivors: before, its name stayed in /dev/shm, and two such leftovers of 275 GB filled it.
// (Populating 256 MiB leaves the kill ample time to land before the setup's last step.)
TEST(DeepEPEdge, SegmentOfARankKilledInSetupIsRemoved) {
  const auto results = run_ranks(3, [&](const std::shared_ptr<deepep::Group>& g) {
    const std::string prefix = rt::str("deepep-", g->peer(0).pid, "-");
    deepep::CommOptions o = test_options();
    o.inbound_bytes = int64_t(256) << 20;
    if (g->rank() == 0) {
      deepep_test::die_once_shm_name_created(prefix);  // after creating it, before the peers attach
      deepep::Comm comm(g, o);
      std::this_thread::sleep_for(std::chrono::seconds(30));  // not reached unless the watch missed it
      return;
    }
    std::string outcome = "created";
    try {
      deepep::Comm comm(g, o);
    } catch (const std::exception& e) {
      outcome = e.what();
    }
    EP_CHECK(!deepep_test::shm_name_exists(prefix), "the dead rank's segment is still in /dev/shm after: ", outcome);
    note(outcome);
  });
  for (const auto& o : results) {
    if (o.rank == 0)
      EXPECT_TRUE(o.killed) << "rank 0 was not killed: " << o.message;
    else
      EXPECT_TRUE(o.ok) << "rank " << o.rank << ": " << o.message;
  }
}

}  // namespace
