// Self-healing: injected loss, corruption and delay leave results identical; a bad link is
// rerouted; a dead or absent rank gives every other rank a clear error within the bound.
#include <signal.h>

#include <chrono>
#include <thread>

#include "dispatch_check.h"

namespace {

using deepep_test::dispatch_and_check;
using deepep_test::expect_all_ok;
using deepep_test::MoeCase;
using deepep_test::mix;
using deepep_test::note;
using deepep_test::Routing;
using deepep_test::run_ranks;
using deepep_test::RunOptions;
using deepep_test::test_seed;
using Clock = std::chrono::steady_clock;

deepep::CommOptions faulty(double drop, double corrupt, int64_t delay_us = 0) {
  deepep::CommOptions o;
  o.timeout = std::chrono::milliseconds(30000);
  o.faults.drop = drop;
  o.faults.corrupt = corrupt;
  o.faults.delay_us = delay_us;
  o.faults.seed = test_seed();
  o.log_reroutes = false;
  return o;
}

// Dispatch + combine, low-latency dispatch + combine and an all-reduce under the given faults; all
// exact. Checks that faults happened and were repaired.
void run_under_faults(int ranks, const deepep::CommOptions& opts) {
  MoeCase c;
  c.seed = test_seed() ^ 0xFA17;
  c.ranks = ranks;
  c.experts = 4 * ranks;
  c.topk = 4;
  c.hidden = 512;
  expect_all_ok(run_ranks(ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    // Small rings (4 KiB frames): many frames, so many faults.
    deepep::Buffer buf(g, (ranks - 1) * (20 << 10), 0, false, opts);
    for (int round = 0; round < 2; ++round) dispatch_and_check(buf, c, round == 1, true);
    const int64_t n = 50001;
    rt::Tensor t = rt::Tensor::empty({n}, rt::DType::I32);
    for (int64_t i = 0; i < n; ++i) t.data_as<int32_t>()[i] = int32_t(mix(c.seed, uint64_t(g->rank()), uint64_t(i)) % 1000);
    for (deepep::Algorithm a : {deepep::Algorithm::Direct, deepep::Algorithm::Ring}) {
      rt::Tensor u = rt::Tensor::empty({n}, rt::DType::I32);
      std::copy_n(t.data_as<int32_t>(), n, u.data_as<int32_t>());
      deepep::all_reduce(buf.comm(), u, deepep::ReduceOp::Sum, a);
      for (int64_t i = 0; i < n; ++i) {
        int32_t want = 0;
        for (int r = 0; r < ranks; ++r) want += int32_t(mix(c.seed, uint64_t(r), uint64_t(i)) % 1000);
        EP_CHECK(u.data_as<int32_t>()[i] == want, deepep::name(a), " all_reduce at ", i);
      }
    }
    deepep::barrier(buf.comm());
    uint64_t losses = 0, retx = 0, corrupt = 0, sent = 0;
    for (const deepep::LinkStats& s : buf.link_stats()) {
      losses += s.losses;
      retx += s.retransmissions;
      corrupt += s.corrupt_received;
      sent += s.frames_sent;
    }
    note(rt::str("frames ", sent, ", losses ", losses, ", retransmissions ", retx, ", corrupt received ", corrupt));
    EP_CHECK(sent > 100u * unsigned(ranks), sent);
    if (opts.faults.drop > 0) EP_CHECK(losses > 0 && retx > 0, "losses ", losses, " retransmissions ", retx);
    if (opts.faults.corrupt > 0) EP_CHECK(corrupt > 0);
  }));
}

TEST(DeepEPHealing, TenPercentLossAndCorruptionResultsIdentical) { run_under_faults(4, faulty(0.07, 0.03)); }
TEST(DeepEPHealing, ThirtyPercentLossAndCorruptionResultsIdentical) { run_under_faults(4, faulty(0.2, 0.1)); }
TEST(DeepEPHealing, LossOnEightRanks) { run_under_faults(8, faulty(0.1, 0.05)); }
TEST(DeepEPHealing, DelayedFramesResultsIdentical) { run_under_faults(2, faulty(0.05, 0, 300)); }

// `rounds` all_to_alls of n int32 values per destination, each checked exactly.
void all_to_all_rounds(deepep::Comm& comm, int64_t n, int rounds) {
  const int R = comm.size(), me = comm.rank();
  for (int round = 0; round < rounds; ++round) {
    rt::Tensor in = rt::Tensor::empty({n * R}, rt::DType::I32), out = rt::Tensor::empty({n * R}, rt::DType::I32);
    for (int64_t i = 0; i < n * R; ++i) in.data_as<int32_t>()[i] = int32_t(me * 1000003 + i + round);
    deepep::all_to_all(comm, out, in);
    for (int r = 0; r < R; ++r)
      for (int64_t i = 0; i < n; ++i)
        EP_CHECK(out.data_as<int32_t>()[r * n + i] == int32_t(r * 1000003 + me * n + i + round), "from ", r);
  }
}

// Link 0->1 loses half its frames: its traffic moves to a relay whose links the other traffic
// measured (their loss rates, as every rank reads them: over tcp, the peers' mirrors).
void expect_bad_link_rerouted(const std::string& transport, const deepep_test::RunOptions& where) {
  deepep::CommOptions o = faulty(0.5, 0.1);
  o.faults.links = {{0, 1}};
  o.log_reroutes = true;
  o.transport = transport;
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Comm comm(g, [&] {
      deepep::CommOptions c = o;
      c.inbound_bytes = 96 << 10;  // 4 KiB frames
      return c;
    }());
    EP_CHECK(std::string(comm.transport_name()) == transport, comm.transport_name());
    all_to_all_rounds(comm, 300000, 3);  // per destination: ~300 frames a round
    deepep::barrier(comm);
    const deepep::LinkStats bad = comm.link_stats(0, 1);
    uint64_t relayed = 0;
    for (int m : {2, 3}) relayed += comm.link_stats(m, 1).frames_forwarded;
    note(rt::str("link 0->1: loss rate ", bad.loss_rate, ", reroutes ", bad.reroutes, ", via ", bad.via, ", relayed ",
                 relayed));
    EP_CHECK(bad.reroutes >= 1, "link 0->1 was not rerouted (loss rate ", bad.loss_rate, ")");
    EP_CHECK(relayed > 0, "no frame was relayed to rank 1");
    EP_CHECK(comm.link_stats(2, 3).reroutes == 0);
    EP_CHECK(bad.loss_rate > 0.1);
  }, where));
}

TEST(DeepEPHealing, BadLinkIsReroutedThroughAnotherRank) { expect_bad_link_rerouted("shm", {}); }
// Over tcp, on 2 x 2 loopback "hosts".
TEST(DeepEPHealing, BadLinkIsReroutedOverTcp) { expect_bad_link_rerouted("tcp", deepep_test::nodes_of(2)); }

// Three bad links whose only relays form a cycle (3 ranks: 0 -> 2 goes through 1, 1 -> 0 through 2,
// 2 -> 1 through 0) and rings of a few frames: every ring fills with frames to forward. Relays that
// waited for room on the next link stalled every rank until the timeout (in a third of the runs of
// this test); they drop instead, and the senders resend on the direct link. Exact, within seconds.
TEST(DeepEPHealing, RelaysInACycleDoNotStall) {
  deepep::CommOptions o = faulty(0.5, 0);
  o.faults.links = {{0, 2}, {1, 0}, {2, 1}};
  o.timeout = std::chrono::milliseconds(10000);
  o.inbound_bytes = 2 * (12 << 10);  // 3 frames of 4 KiB per inbound link
  expect_all_ok(run_ranks(3, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Comm comm(g, o);
    const int me = g->rank();
    // ~400 frames per destination and round. A stall needs all three rings full of frames to forward
    // at once: without the drop, about one round in forty stalled here.
    const auto start = Clock::now();
    all_to_all_rounds(comm, 400000, 16);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    deepep::barrier(comm);
    const int bad_dst = (me + 2) % 3;  // this rank's lossy link: 0 -> 2, 1 -> 0, 2 -> 1
    const deepep::LinkStats bad = comm.link_stats(me, bad_dst);
    note(rt::str("rank ", me, ": link ", me, "->", bad_dst, " reroutes ", bad.reroutes, ", forwarded by rank ",
                 (me + 1) % 3, ": ", comm.link_stats((me + 1) % 3, bad_dst).frames_forwarded, ", ", s, " s"));
    EP_CHECK(bad.reroutes >= 1, "link ", me, "->", bad_dst, " was not rerouted (loss rate ", bad.loss_rate, ")");
    EP_CHECK(s < 8.0, "16 all_to_alls took ", s, " s");
  }));
}

// A rank killed at operation 3 (an all_reduce): every other rank gets "rank 2 ... died" within the
// bound and the communicator is broken. Killed at the start, the others never pass the operation's
// agreement; killed after it (kill_mid_op), they have started sending to it.
void expect_dead_rank_reported(const deepep::CommOptions& o, bool via_env) {
  auto outcomes = run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    if (via_env) setenv("DEEPEP_FAULTS", "kill_rank=2,kill_at_op=3", 1);
    deepep::CommOptions c = o;
    c.inbound_bytes = 1 << 20;
    deepep::Comm comm(g, c);
    rt::Tensor t = rt::Tensor::empty({100000}, rt::DType::F32);
    std::fill_n(t.data_as<float>(), 100000, 1.0f);
    deepep::all_reduce(comm, t);  // op 1
    deepep::barrier(comm);        // op 2
    const uint64_t sent_before = g->rank() == 2 ? 0 : comm.link_stats(g->rank(), 2).frames_sent;
    const auto start = Clock::now();
    try {
      deepep::all_reduce(comm, t);  // op 3: rank 2 dies as it starts (or after its agreement: kill_mid_op)
    } catch (const deepep::CommError& e) {
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      const std::string m = e.what();
      EP_CHECK(m.find("rank 2") != std::string::npos && m.find("died") != std::string::npos, m);
      EP_CHECK(s < 10.0, "took ", s, " s to notice");  // the bound: liveness checks every 50 ms
      const uint64_t sent = comm.link_stats(g->rank(), 2).frames_sent - sent_before;
      EP_CHECK((sent > 0) == o.faults.kill_mid_op, sent, " frames sent to rank 2 in the operation it died in",
               o.faults.kill_mid_op ? " (killed after the agreement: some expected)" : " (killed at its start: none)");
      note(rt::str("noticed in ", s, " s: ", m));
      // The communicator is broken now: later calls fail at once.
      try {
        deepep::barrier(comm);
      } catch (const deepep::CommError& e2) {
        EP_CHECK(std::string(e2.what()).find("broken") != std::string::npos, e2.what());
        return;
      }
      EP_CHECK(false, "a broken communicator still worked");
    }
    EP_CHECK(false, "no error although rank 2 died");
  });
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes[2].killed) << outcomes[2].message;
  for (int r : {0, 1, 3}) EXPECT_TRUE(outcomes[size_t(r)].ok) << "rank " << r << ": " << outcomes[size_t(r)].message;
}

TEST(DeepEPHealing, KilledRankIsAClearErrorOnEveryOtherRankWithinTheBound) {
  deepep::CommOptions o = faulty(0, 0);
  o.faults.kill_rank = 2;
  o.faults.kill_at_op = 3;
  expect_dead_rank_reported(o, false);
}

TEST(DeepEPHealing, KillThroughTheEnvironment) { expect_dead_rank_reported(faulty(0, 0), true); }

// Killed once the all_reduce's agreement is done: the others are already exchanging data with it.
TEST(DeepEPHealing, KilledAfterTheAgreementIsAClearErrorOnTheOthers) {
  deepep::CommOptions o = faulty(0, 0);
  o.faults.kill_rank = 2;
  o.faults.kill_at_op = 3;
  o.faults.kill_mid_op = true;
  expect_dead_rank_reported(o, false);
}

// A rank killed while data is moving (a thread of its own sends SIGKILL mid-transfer).
void expect_death_mid_transfer_reported(const std::string& transport, const deepep_test::RunOptions& where) {
  auto outcomes = run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions c = faulty(0, 0);
    c.inbound_bytes = 3 * (64 << 10);  // small rings: the transfer takes many round trips
    c.transport = transport;
    deepep::Comm comm(g, c);
    const int64_t n = 16 << 20;
    rt::Tensor t = rt::Tensor::empty({n}, rt::DType::F32);
    std::fill_n(t.data_as<float>(), n, 1.0f);
    deepep::all_reduce(comm, t);  // warm-up: every rank is in the steady state
    if (g->rank() == 1) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        kill(getpid(), SIGKILL);
      }).detach();
    }
    const auto start = Clock::now();
    try {
      for (int i = 0; i < 100; ++i) deepep::all_reduce(comm, t, deepep::ReduceOp::Max, deepep::Algorithm::Ring);
    } catch (const deepep::CommError& e) {
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      const std::string m = e.what();
      EP_CHECK(m.find("rank 1") != std::string::npos, m);
      EP_CHECK(m.find("died") != std::string::npos || m.find("aborted") != std::string::npos, m);
      note(rt::str("noticed after ", s, " s: ", m));
      return;
    }
    EP_CHECK(false, "no error although rank 1 died");
  }, where);
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes[1].killed) << outcomes[1].message;
  for (int r : {0, 2, 3}) EXPECT_TRUE(outcomes[size_t(r)].ok) << "rank " << r << ": " << outcomes[size_t(r)].message;
}

TEST(DeepEPHealing, RankDyingMidTransferIsAClearErrorOnTheOthers) { expect_death_mid_transfer_reported("shm", {}); }
// Over tcp, on 2 x 2 loopback "hosts": the peers' sends to it fail and their connections end.
TEST(DeepEPHealing, RankDyingMidTransferOverTcp) { expect_death_mid_transfer_reported("tcp", deepep_test::nodes_of(2)); }

TEST(DeepEPHealing, RankThatStopsTakingPartTimesOutWithAClearError) {
  auto outcomes = run_ranks(3, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o;
    o.inbound_bytes = 1 << 20;
    o.timeout = std::chrono::milliseconds(800);
    deepep::Comm comm(g, o);
    rt::Tensor t = rt::Tensor::empty({1000}, rt::DType::F32);
    std::fill_n(t.data_as<float>(), 1000, 1.0f);
    if (g->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // alive, but absent
    deepep::all_reduce(comm, t);
  });
  for (int r : {0, 2}) {
    EXPECT_FALSE(outcomes[size_t(r)].ok);
    EXPECT_NE(outcomes[size_t(r)].message.find("no progress for 800 ms"), std::string::npos) << outcomes[size_t(r)].message;
    EXPECT_NE(outcomes[size_t(r)].message.find("rank 1"), std::string::npos) << outcomes[size_t(r)].message;
  }
  // The late rank finds the communicator aborted by the others.
  EXPECT_FALSE(outcomes[1].ok);
  EXPECT_NE(outcomes[1].message.find("aborted"), std::string::npos) << outcomes[1].message;
}

TEST(DeepEPHealing, FaultConfigParsing) {
  const auto f = deepep::FaultConfig::parse("drop=0.1, corrupt=0.05,delay_us=7,links=0>1;2>3,kill_rank=2,kill_at_op=4,seed=9");
  EXPECT_DOUBLE_EQ(f.drop, 0.1);
  EXPECT_DOUBLE_EQ(f.corrupt, 0.05);
  EXPECT_EQ(f.delay_us, 7);
  ASSERT_EQ(f.links.size(), 2u);
  EXPECT_TRUE(f.applies(2, 3));
  EXPECT_FALSE(f.applies(1, 0));
  EXPECT_EQ(f.kill_rank, 2);
  EXPECT_EQ(f.kill_at_op, 4);
  EXPECT_EQ(f.seed, 9u);
  EXPECT_FALSE(f.kill_mid_op);
  const auto mid = deepep::FaultConfig::parse("kill_rank=1,kill_at_op=2,kill_mid_op=1");
  EXPECT_TRUE(mid.kill_mid_op);
  EXPECT_NE(mid.to_string().find(",kill_mid_op=1"), std::string::npos) << mid.to_string();
  EXPECT_TRUE(deepep::FaultConfig::parse(mid.to_string()).kill_mid_op);
  EXPECT_TRUE(deepep::FaultConfig().applies(5, 6));
  EXPECT_EQ(deepep::FaultConfig::parse("kill_rank=1,kill_at_op=0").kill_at_op, 0);  // in setup
  for (const char* bad : {"drop=2", "nonsense=1", "drop", "links=0-1", "corrupt=x", "kill_mid_op=2", "kill_at_op=-1"}) {
    try {
      deepep::FaultConfig::parse(bad);
      ADD_FAILURE() << bad;
    } catch (const rt::Error& e) {
      EXPECT_EQ(e.kind(), rt::ErrorKind::User) << bad;
    }
  }
}

}  // namespace
