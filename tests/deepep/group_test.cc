// Group creation over TCP: topology, the control plane, and the failures of a rendezvous.
#include <chrono>

#include "harness.h"

namespace {

using deepep_test::expect_all_failed_with;
using deepep_test::expect_all_ok;
using deepep_test::note;
using deepep_test::run_ranks;
using deepep_test::RunOptions;

TEST(DeepEPGroup, RanksLearnRankSizeNodeAndLocalRank) {
  RunOptions o;
  o.host_of = [](int r) { return r < 3 ? std::string("node-a") : std::string("node-b"); };
  auto outcomes = run_ranks(5, [](const std::shared_ptr<deepep::Group>& g) {
    EP_CHECK(g->size() == 5);
    EP_CHECK(g->num_nodes() == 2, g->num_nodes());
    const int r = g->rank();
    EP_CHECK(g->node() == (r < 3 ? 0 : 1), "rank ", r, " node ", g->node());
    EP_CHECK(g->local_rank() == (r < 3 ? r : r - 3), "rank ", r, " local ", g->local_rank());
    EP_CHECK(g->local_size() == (r < 3 ? 3 : 2));
    for (int q = 0; q < 5; ++q) EP_CHECK(g->peer(q).pid > 0 && g->peer(q).rank == q);
    EP_CHECK(g->peer(4).host == "node-b");
  }, o);
  expect_all_ok(outcomes);
}

TEST(DeepEPGroup, HostNameIsTheDefaultNode) {
  expect_all_ok(run_ranks(3, [](const std::shared_ptr<deepep::Group>& g) {
    EP_CHECK(g->num_nodes() == 1 && g->local_rank() == g->rank() && g->local_size() == 3);
  }));
}

TEST(DeepEPGroup, AllgatherAndBarrier) {
  expect_all_ok(run_ranks(4, [](const std::shared_ptr<deepep::Group>& g) {
    for (int round = 0; round < 3; ++round) {
      const auto all = g->allgather(rt::str("rank ", g->rank(), " round ", round, std::string(size_t(g->rank()) * 1000, 'x')));
      for (int r = 0; r < 4; ++r)
        EP_CHECK(all[size_t(r)].rfind(rt::str("rank ", r, " round ", round), 0) == 0 &&
                 all[size_t(r)].size() == rt::str("rank ", r, " round ", round).size() + size_t(r) * 1000);
      g->barrier();
    }
  }));
}

TEST(DeepEPGroup, RankThatNeverJoinsIsAnErrorOnEveryOtherRankWithinTheTimeout) {
  RunOptions o;
  o.absent = {3};
  o.group_timeout = std::chrono::milliseconds(1500);
  const auto start = std::chrono::steady_clock::now();
  auto outcomes = run_ranks(4, [](const std::shared_ptr<deepep::Group>&) {}, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(outcomes.size(), 3u);
  expect_all_failed_with(outcomes, {"rank 3 never joined", "3 of 4"});
  EXPECT_LT(s, 15.0);
}

TEST(DeepEPGroup, MissingRootIsAnErrorWithinTheTimeout) {
  RunOptions o;
  o.absent = {0};
  o.group_timeout = std::chrono::milliseconds(1000);
  auto outcomes = run_ranks(2, [](const std::shared_ptr<deepep::Group>&) {}, o);
  expect_all_failed_with(outcomes, {"could not reach the rendezvous root"});
}

TEST(DeepEPGroup, WrongWorldSizeIsAnErrorOnEveryRank) {
  RunOptions o;
  o.size_of = [](int r) { return r == 2 ? 3 : 4; };
  o.group_timeout = std::chrono::milliseconds(3000);
  auto outcomes = run_ranks(4, [](const std::shared_ptr<deepep::Group>&) {}, o);
  expect_all_failed_with(outcomes, {"wrong group size", "rank 2", "world size 3", "world size 4"});
}

TEST(DeepEPGroup, DeadRankDuringAllgatherIsAnErrorOnTheOthers) {
  auto outcomes = run_ranks(3, [](const std::shared_ptr<deepep::Group>& g) {
    if (g->rank() == 1) _exit(3);  // dies without a word
    g->allgather("x", "test step");
  });
  ASSERT_EQ(outcomes.size(), 3u);
  for (int r : {0, 2}) {
    EXPECT_FALSE(outcomes[size_t(r)].ok);
    EXPECT_NE(outcomes[size_t(r)].message.find("rank 1"), std::string::npos) << outcomes[size_t(r)].message;
    EXPECT_NE(outcomes[size_t(r)].message.find("test step"), std::string::npos) << outcomes[size_t(r)].message;
  }
}

TEST(DeepEPGroup, OptionsFromTheEnvironment) {
  setenv("DEEPEP_RENDEZVOUS", "10.1.2.3:2345", 1);
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  const auto r = deepep::TcpRendezvous::from_env();
  EXPECT_EQ(r.address, "10.1.2.3");
  EXPECT_EQ(r.port, 2345);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.size, 8);
  unsetenv("DEEPEP_RENDEZVOUS");
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("MASTER_PORT");
  try {
    deepep::TcpRendezvous::from_env();
    FAIL() << "expected an error";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("DEEPEP_RENDEZVOUS"), std::string::npos) << e.what();
  }
}

TEST(DeepEPGroup, BadOptionsAreUserErrors) {
  deepep::TcpRendezvous r;
  r.rank = 4;
  r.size = 4;
  r.port = 1;
  try {
    deepep::Group::create(r);
    FAIL();
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), rt::ErrorKind::User);
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos);
  }
}

// Group::from_mpi without OpenMPI, or with a library that is not OpenMPI: a user error that says so
// (in a child process: the library is loaded once per process). The group itself is tested under
// mpirun (tests/deepep/mpi/group_from_mpi.cc).
TEST(DeepEPGroup, FromMpiWithoutOpenMpiIsAUserError) {
  for (const auto& [library, expected] : {std::pair<std::string, std::string>{"/nonexistent/libmpi.so.40", "cannot load"},
                                          {"libm.so.6", "has no ompi_mpi_comm_world"}}) {
    expect_all_failed_with(run_ranks(1,
                                     [&](const std::shared_ptr<deepep::Group>&) {
                                       setenv("DEEPEP_MPI_LIBRARY", library.c_str(), 1);
                                       deepep::Group::from_mpi();
                                     }),
                           {expected, "TcpRendezvous"});
  }
}

}  // namespace
