// Bad options and knobs (found by fuzzing the public API): each gives a user error that names it,
// on every rank and at once -- never a hang, a crash or a silently different setting.
#include <cmath>

#include "harness.h"

namespace {

using deepep_test::expect_all_failed_with;
using deepep_test::run_ranks;
using deepep_test::RunOptions;
using deepep_test::test_options;

// A communicator with `faults` set in its options (not parsed from text), then an all-reduce.
void comm_with_faults(const std::shared_ptr<deepep::Group>& g, const deepep::FaultConfig& faults) {
  deepep::CommOptions o = test_options();
  o.faults = faults;
  deepep::Comm comm(g, o);
  rt::Tensor t = rt::Tensor::empty({16}, rt::DType::F32);
  for (int i = 0; i < 16; ++i) t.data_as<float>()[i] = 1;
  deepep::all_reduce(comm, t);
}

// The bound of these runs is far below the communicator's timeout: an option that is not checked
// shows as a hang (drop = 1 retransmits until the timeout) rather than passing.
RunOptions quick() {
  RunOptions o;
  o.timeout_s = 20;
  return o;
}

TEST(DeepEPBadOptions, FaultsGivenInOptionsAreChecked) {
  auto with = [](auto set) {
    deepep::FaultConfig f;
    set(f);
    return [f](const std::shared_ptr<deepep::Group>& g) { comm_with_faults(g, f); };
  };
  expect_all_failed_with(run_ranks(2, with([](deepep::FaultConfig& f) { f.drop = 1.0; }), quick()),
                         {"CommOptions::faults", "drop=1 must be in [0, 1)"});
  expect_all_failed_with(run_ranks(2, with([](deepep::FaultConfig& f) { f.drop = std::nan(""); }), quick()),
                         {"CommOptions::faults", "drop=nan"});
  expect_all_failed_with(run_ranks(2, with([](deepep::FaultConfig& f) { f.corrupt = -0.5; }), quick()),
                         {"corrupt=-0.5 must be in [0, 1)"});
  expect_all_failed_with(run_ranks(2, with([](deepep::FaultConfig& f) { f.delay_us = -5; }), quick()),
                         {"delay_us=-5"});
  expect_all_failed_with(run_ranks(2, with([](deepep::FaultConfig& f) { f.kill_rank = 1, f.kill_at_op = -3; }), quick()),
                         {"kill_at_op=-3"});
  expect_all_failed_with(run_ranks(2, with([](deepep::FaultConfig& f) { f.kill_rank = 2; }), quick()),
                         {"kill_rank=2 is not a rank of this group of 2"});
  expect_all_failed_with(run_ranks(2, with([](deepep::FaultConfig& f) { f.links = {{0, 1}, {1, 5}}; }), quick()),
                         {"link 1>5 is not between ranks of this group of 2"});
}

TEST(DeepEPBadOptions, FaultTextWithIntegersBeyondIntIsAnError) {
  // 2^32 used to wrap to 0: "kill_rank=4294967296" killed rank 0, a kill_at_op of 2^32 + 1 was 1.
  for (const char* text : {"kill_rank=4294967296", "kill_at_op=4294967297", "links=4294967296>1", "kill_rank=-2147483649"}) {
    try {
      deepep::FaultConfig::parse(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const rt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << text << ": " << e.what();
    }
  }
  EXPECT_EQ(deepep::FaultConfig::parse("kill_rank=3,kill_at_op=2").kill_rank, 3);
}

}  // namespace
