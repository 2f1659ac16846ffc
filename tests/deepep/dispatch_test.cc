// Normal-mode dispatch and combine against references computed from every rank's inputs.
#include <string>
#include <utility>

#include "dispatch_check.h"
#include "testutil/environment.h"

namespace {

using deepep_test::dispatch_and_check;
using deepep_test::expect_all_failed_with;
using deepep_test::expect_all_ok;
using deepep_test::MoeCase;
using deepep_test::Routing;
using deepep_test::run_ranks;
using deepep_test::test_options;
using deepep_test::test_seed;

void run_case(const MoeCase& c, bool fp8, bool with_layout, int alignment = 1) {
  expect_all_ok(run_ranks(c.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 4 << 20, 0, false, test_options());
    dispatch_and_check(buf, c, fp8, with_layout, alignment);
  }));
}

MoeCase make(int ranks, int experts, int topk, Routing routing) { return moe_case(0, ranks, experts, topk, routing); }

TEST(DeepEPDispatch, Bf16TwoRanks) { run_case(make(2, 8, 4, Routing::Uniform), false, true); }
TEST(DeepEPDispatch, Bf16FourRanksWithoutLayout) { run_case(make(4, 16, 4, Routing::Uniform), false, false); }
TEST(DeepEPDispatch, Bf16EightRanks) { run_case(make(8, 32, 8, Routing::Uniform), false, true); }
TEST(DeepEPDispatch, Fp8WithScales) {
  MoeCase c = make(4, 16, 4, Routing::Uniform);
  c.hidden = 384;
  run_case(c, true, true);
}
// BF16 rows that the combine sums in two whole 512-column chunks and a partial third.
TEST(DeepEPDispatch, Bf16RowsOfSeveralReduceChunks) {
  MoeCase c = make(4, 16, 4, Routing::Uneven);
  c.hidden = 1160;
  run_case(c, false, true);
}
TEST(DeepEPDispatch, UnevenRoutingAndExpertAlignment) { run_case(make(4, 16, 3, Routing::Uneven), false, true, 4); }
TEST(DeepEPDispatch, RanksAndExpertsReceivingNothingAndARankSendingNothing) {
  MoeCase c = make(4, 16, 4, Routing::Sparse);
  c.zero_tokens_rank = true;
  run_case(c, false, true);
}

// Every data path gives the same results: the frames of the shm transport (DEEPEP_SINGLE_COPY=0,
// fault injection, or a machine that forbids reading other processes), the single copy reading
// private inputs in place (process_vm_readv; DEEPEP_COPY_INTO_ARENA=0), and the single copy reading
// them from copies in the senders' arenas (the default).
TEST(DeepEPDispatch, FramePathAndSingleCopyPaths) {
  MoeCase c = make(4, 16, 4, Routing::Uneven);
  c.hidden = 384;
  const bool readable = deepep_test::peer_memory_readable();
  for (const auto& [single, copy] : {std::pair{"0", "1"}, {"1", "0"}, {"1", "1"}}) {
    SCOPED_TRACE(std::string("DEEPEP_SINGLE_COPY=") + single + " DEEPEP_COPY_INTO_ARENA=" + copy);
    testutil::ScopedEnv single_copy("DEEPEP_SINGLE_COPY", single), copy_in("DEEPEP_COPY_INTO_ARENA", copy);
    expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
      deepep::Buffer buf(g, 4 << 20, 0, false, test_options());
      // (On a machine that forbids process_vm_readv the single copy is off whatever the setting.)
      EP_CHECK(buf.single_copy() == (std::string(single) == "1" && readable));
      for (bool fp8 : {false, true}) dispatch_and_check(buf, c, fp8, true, 2);
      // Private inputs copied into the arena are read from the mappings; read in place, never.
      EP_CHECK((buf.shared_bytes_read() > 0) == (buf.single_copy() && std::string(copy) == "1"), "read ",
               buf.shared_bytes_read(), " bytes from the arenas");
    }));
  }
}

// Rows wider than the single-copy combine's block takes a few of (7168 bf16: 73 rows per MiB), and
// enough of them for several blocks: each block stages every rank's run of rows together (read in
// place: the arena's reads over several blocks are shared_arena_test's).
TEST(DeepEPDispatch, SingleCopyCombineOverSeveralBlocks) {
  if (!deepep_test::peer_memory_readable()) GTEST_SKIP() << "processes may not read each other's memory here";
  testutil::ScopedEnv in_place("DEEPEP_COPY_INTO_ARENA", "0");
  MoeCase c = make(4, 16, 4, Routing::Uneven);
  c.hidden = 7168;
  c.max_tokens = 96;
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 4 << 20, 0, false, test_options());
    dispatch_and_check(buf, c, false, true);
  }));
}

// A rank dying while the others read its rows on the single-copy path (in place, with
// process_vm_readv; from its arena: shared_arena_test): a clear error on every other rank within
// the liveness bound, no hang (as on the frame path, healing_test.cc).
TEST(DeepEPDispatch, RankDyingDuringSingleCopyDispatchIsAClearError) {
  if (!deepep_test::peer_memory_readable()) GTEST_SKIP() << "processes may not read each other's memory here";
  testutil::ScopedEnv in_place("DEEPEP_COPY_INTO_ARENA", "0");
  MoeCase c = make(4, 16, 4, Routing::Uniform);
  c.hidden = 7168;
  deepep_test::expect_dying_rank_noticed_during_dispatch(c, [&](deepep::Buffer& buf) {
    EP_CHECK(buf.single_copy(), "the single-copy path is off on this machine");
    return c.dispatch_args(buf.rank(), false, 1);
  });
}

TEST(DeepEPDispatch, HandleReuseCachedDispatch) {
  MoeCase c = make(4, 16, 4, Routing::Uniform);
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 4 << 20, 0, false, test_options());
    const auto handle = dispatch_and_check(buf, c, false, false);
    // Cached: new data (another seed) along the same routing.
    MoeCase c2 = c;
    c2.data_seed = c.seed + 1;
    for (bool fp8 : {false, true}) {
      deepep::DispatchArgs a;
      a.x = fp8 ? c2.x_fp8(buf.rank()) : c2.x_bf16(buf.rank());
      if (fp8) a.x_scales = c2.x_scales(buf.rank());
      a.handle = handle;
      const auto d = buf.dispatch(a);
      const auto expect = deepep_test::expected_received(c, buf.rank());
      EP_CHECK(d.recv_x.size(0) == int64_t(expect.size()));
      EP_CHECK(!d.recv_topk_idx.defined());
      for (size_t i = 0; i < expect.size(); ++i)
        for (int h = 0; h < c.hidden; ++h) {
          const auto [s, t] = expect[i];
          if (fp8)
            EP_CHECK(static_cast<const uint8_t*>(d.recv_x.data())[i * size_t(c.hidden) + size_t(h)] == c2.fp8_bits(s, t, h));
          else
            EP_CHECK(d.recv_x.data_as<tl::bfloat16_t>()[i * size_t(c.hidden) + size_t(h)].bits == c2.bf16_bits(s, t, h));
        }
    }
  }));
}

TEST(DeepEPDispatch, TokensLargerThanOneFrame) {
  // 4 KiB frames: a 7168-wide bf16 row (14 KiB) cannot be sent; the error says the buffer is too small.
  MoeCase c = make(2, 4, 2, Routing::Uniform);
  c.hidden = 7168;
  c.max_tokens = 24;
  expect_all_failed_with(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 2 * 8320, 0, false, test_options());
    deepep::DispatchArgs a;
    a.x = c.x_bf16(buf.rank());
    a.topk_idx = c.topk_tensor(buf.rank());
    a.num_experts = c.experts;
    buf.dispatch(a);
  }), {"buffer too small"});
  // A large enough buffer moves them.
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
    dispatch_and_check(buf, c, false, true);
  }));
}

}  // namespace
