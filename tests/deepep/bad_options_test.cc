// Bad options and knobs (found by fuzzing the public API): each gives a user error that names it,
// on every rank and at once -- never a hang, a crash or a silently different setting.
#include <cmath>
#include <cstring>

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

// low_latency_size_hint wrapped past int64 to a negative need, which every Buffer passed: an
// empty x of a huge hidden then went on to an allocation of 2^64 - 2^42 bytes ("out of host
// memory") instead of the size check's message.
TEST(DeepEPBadOptions, LowLatencySizesPastInt64) {
  EXPECT_EQ(deepep::Buffer::low_latency_size_hint(INT32_MAX, int64_t(1) << 40, 2, 1 << 20), INT64_MAX);
  EXPECT_EQ(deepep::Buffer::low_latency_size_hint(INT32_MAX, INT64_MAX / 2, 4096, 4096), INT64_MAX);
  EXPECT_GT(deepep::Buffer::low_latency_size_hint(128, 7168, 8, 256), 0);
  const int64_t hint = deepep::Buffer::low_latency_size_hint(8, 128, 2, 4);
  expect_all_failed_with(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, hint, 0, true, test_options());
    buf.low_latency_dispatch(rt::Tensor::empty({0, int64_t(1) << 40}, rt::DType::BF16),
                             rt::Tensor::empty({0, 2}, rt::DType::I64), INT32_MAX, 4, true);
  }, quick()), {"buffer too small", "hidden=1099511627776", "needs num_nvl_bytes + num_rdma_bytes >= 9223372036854775807"});
}

// Ring memory beyond the host's used to reach mmap(MAP_POPULATE): the OOM killer ended the rank
// and its peers waited out the setup timeout. A health window of INT32_MAX took 2 GiB per link.
TEST(DeepEPBadOptions, SizesBeyondTheHost) {
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, int64_t(1) << 62, 0, false, test_options());
  }, quick()), {"num_nvl_bytes + num_rdma_bytes = 4611686018427387904 + 0 is more than this host's memory"});
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, INT64_MAX, INT64_MAX, false, test_options());
  }, quick()), {"is more than this host's memory"});
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.inbound_bytes = int64_t(1) << 50;
    deepep::Comm comm(g, o);
  }, quick()), {"inbound_bytes=1125899906842624 is more than this host's memory"});
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.health_window = INT32_MAX;
    deepep::Comm comm(g, o);
  }, quick()), {"health_window=2147483647 must be in [8, 2^20]"});
}

// A negative timeout or liveness interval ran as the default (0 means that): a sign mistake went
// unnoticed.
TEST(DeepEPBadOptions, NegativeTimeoutsAreErrors) {
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.timeout = std::chrono::milliseconds(-5);
    deepep::Comm comm(g, o);
  }, quick()), {"timeout=-5 ms must be positive"});
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.liveness_interval = std::chrono::milliseconds(-1);
    deepep::Comm comm(g, o);
  }, quick()), {"liveness_interval=-1 ms must be positive"});
}

// A ReduceOp or Algorithm outside its enum (a cast from an integer) used to run as some reduction.
TEST(DeepEPBadOptions, ReduceOpAndAlgorithmOutsideTheirEnums) {
  auto run = [](deepep::ReduceOp op, deepep::Algorithm algorithm, bool scatter) {
    return [=](const std::shared_ptr<deepep::Group>& g) {
      deepep::Comm comm(g, test_options());
      rt::Tensor t = rt::Tensor::empty({8}, rt::DType::F32), out = rt::Tensor::empty({4}, rt::DType::F32);
      for (int i = 0; i < 8; ++i) t.data_as<float>()[i] = float(i);
      if (scatter)
        deepep::reduce_scatter(comm, out, t, op, algorithm);
      else
        deepep::all_reduce(comm, t, op, algorithm);
    };
  };
  for (bool scatter : {false, true}) {
    expect_all_failed_with(run_ranks(2, run(deepep::ReduceOp(7), deepep::Algorithm::Direct, scatter), quick()),
                           {"op=7 is not a ReduceOp"});
    expect_all_failed_with(run_ranks(2, run(deepep::ReduceOp::Sum, deepep::Algorithm(9), scatter), quick()),
                           {"algorithm=9 is not an Algorithm"});
  }
}

// A layout made for another num_experts passed when this rank's tokens happened to reach the same
// ranks under both (its num_tokens_per_expert, of the wrong size, was not looked at).
TEST(DeepEPBadOptions, LayoutForAnotherNumberOfExperts) {
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
    deepep::DispatchArgs a;
    a.x = rt::Tensor::empty({2, 64}, rt::DType::BF16);
    std::memset(a.x.data(), 0, size_t(a.x.nbytes()));
    a.topk_idx = rt::Tensor::empty({2, 1}, rt::DType::I64);
    a.topk_idx.data_as<int64_t>()[0] = 0;  // experts 0 and 1: rank 0's with 4 experts and with 8
    a.topk_idx.data_as<int64_t>()[1] = 1;
    a.num_experts = 4;
    const deepep::DispatchLayout layout = buf.get_dispatch_layout(a.topk_idx, 8);
    a.layout = &layout;
    buf.dispatch(a);
  }, quick()), {"layout.num_tokens_per_expert must be a CPU int32 tensor of 4 elements (num_experts), not int32[8]"});
}

// combine checked x's rows against the handle's num_recv_tokens but read them by its recv_counts:
// a copy of the handle with num_recv_tokens edited (or a default handle) read past x.
TEST(DeepEPBadOptions, CombineWithAnEditedHandle) {
  for (int edit = 0; edit < 3; ++edit) {
    expect_all_failed_with(run_ranks(2, [edit](const std::shared_ptr<deepep::Group>& g) {
      deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
      deepep::DispatchArgs a;
      a.x = rt::Tensor::empty({4, 64}, rt::DType::BF16);
      std::memset(a.x.data(), 0, size_t(a.x.nbytes()));
      a.topk_idx = rt::Tensor::empty({4, 1}, rt::DType::I64);
      for (int t = 0; t < 4; ++t) a.topk_idx.data_as<int64_t>()[t] = t % 2;
      a.num_experts = 2;
      const auto d = buf.dispatch(a);
      deepep::DispatchHandle h = *d.handle;
      if (edit == 0) h.num_recv_tokens = 0;
      if (edit == 1) h.num_recv_tokens += 3;
      if (edit == 2) h = deepep::DispatchHandle{}, h.num_ranks = 2;
      buf.combine(rt::Tensor::empty({h.num_recv_tokens, 64}, rt::DType::BF16), h);
    }, quick()), {"the handle is not one a dispatch of this Buffer returned"});
  }
}

// Group::allgather beyond the control plane's frame limit: the receiver dropped the frame as "not a
// deepep peer" and both sides reported a lost connection instead of the reason.
TEST(DeepEPBadOptions, ControlPlaneMessagesBeyondItsLimit) {
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    g->allgather(std::string(size_t(40) << 20, 'x'), "big step");  // 80 MiB gathered
  }, quick()), {"big step of 83886", "the control plane carries at most 67108864 bytes"});
  expect_all_failed_with(run_ranks(3, [](const std::shared_ptr<deepep::Group>& g) {
    g->allgather(g->rank() == 2 ? std::string(size_t(65) << 20, 'x') : std::string("small"), "big step");
  }, quick()), {"rank 2 of 3", "big step of 68157440 bytes", "the control plane carries at most"});
}

}  // namespace
