// The Buffer's shared arena (Buffer::alloc_shared_tensor): dispatch and combine exact when their
// inputs lie there (read by the peers from their mappings), on every rank or only some; the frame
// path still taken under fault injection and DEEPEP_SINGLE_COPY=0; the allocation's errors; a
// tensor of another Buffer's arena; a rank dying while the others read its arena.
#include <sys/statvfs.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "dispatch_check.h"
#include "testutil/environment.h"

namespace {

using deepep_test::dispatch_and_check;
using deepep_test::expect_all_ok;
using deepep_test::expect_throws;
using deepep_test::MoeCase;
using deepep_test::Routing;
using deepep_test::run_ranks;
using deepep_test::shared_copy;
using deepep_test::test_options;
using deepep_test::test_seed;

MoeCase make(int ranks, int experts, int topk, Routing routing) {
  MoeCase c;
  c.seed = test_seed() ^ uint64_t(ranks * 7919 + experts) ^ 0xA4E7A;
  c.ranks = ranks;
  c.experts = experts;
  c.topk = topk;
  c.routing = routing;
  return c;
}

// Whether the Buffers of this run should take the single copy (the arena's reads live there):
// processes may read each other here, and the environment turns neither faults nor it off.
bool single_copy_expected() {
  const char* faults = std::getenv("DEEPEP_FAULTS");
  const char* setting = std::getenv("DEEPEP_SINGLE_COPY");
  return deepep_test::peer_memory_readable() && (!faults || !*faults) && (!setting || std::string(setting) != "0");
}

// The bytes rank `me` reads from its peers' arenas in dispatch_and_check (one dispatch; with BF16
// two combines) when the ranks for which `shared` holds placed their inputs there.
int64_t expected_shared_bytes(const MoeCase& c, int me, bool fp8, const std::function<bool(int)>& shared) {
  const int64_t H = c.hidden, K = c.topk;
  // A received row: x, its scales, its top-k (int64) and weights (f32).
  const int64_t dispatch_row = (fp8 ? H + H / 128 * 4 : H * 2) + K * 8 + K * 4;
  int64_t bytes = 0;
  for (const auto& [s, t] : deepep_test::expected_received(c, me))
    if (shared(s)) bytes += dispatch_row;
  for (int r = 0; !fp8 && r < c.ranks; ++r) {
    if (!shared(r)) continue;
    int64_t rows = 0;  // the rows rank r returns to this rank: the tokens this rank sent it
    for (const auto& [s, t] : deepep_test::expected_received(c, r)) rows += s == me;
    bytes += 2 * rows * (H * 2 + K * 4);
  }
  return bytes;
}

// Whether dispatch and combine copy private inputs into the arena first (DEEPEP_COPY_INTO_ARENA):
// then every source is read from the arenas.
bool copy_into_arena() {
  const char* setting = std::getenv("DEEPEP_COPY_INTO_ARENA");
  return !setting || std::string(setting) != "0";
}

// Dispatch and combine checked exactly, the ranks for which `shared` holds with every input in the
// arena; every rank's reads from the arenas counted to the byte (0 without the single copy).
void run_case(const MoeCase& c, bool fp8, const std::function<bool(int)>& shared,
              deepep::CommOptions options = test_options()) {
  expect_all_ok(run_ranks(c.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 4 << 20, 0, false, options);
    const bool frame_faults = options.faults.drop > 0 || options.faults.corrupt > 0 || options.faults.delay_us > 0;
    EP_CHECK(buf.single_copy() == (single_copy_expected() && !frame_faults));
    dispatch_and_check(buf, c, fp8, true, 1, shared(buf.rank()));
    const bool copied = copy_into_arena();
    const int64_t want = buf.single_copy()
                             ? expected_shared_bytes(c, buf.rank(), fp8, [&](int r) { return copied || shared(r); })
                             : 0;
    EP_CHECK(buf.shared_bytes_read() == want, "read ", buf.shared_bytes_read(), " bytes from the arenas, expected ", want);
  }));
}

const auto every_rank = [](int) { return true; };

TEST(DeepEPSharedArena, Bf16TwoFourAndEightRanks) {
  run_case(make(2, 8, 4, Routing::Uniform), false, every_rank);
  run_case(make(4, 16, 4, Routing::Uniform), false, every_rank);
  run_case(make(8, 32, 8, Routing::Uniform), false, every_rank);
}

TEST(DeepEPSharedArena, Fp8WithScalesTwoFourAndEightRanks) {
  for (const auto& [ranks, experts] : {std::pair{2, 8}, {4, 16}, {8, 32}}) {
    MoeCase c = make(ranks, experts, 4, Routing::Uniform);
    c.hidden = 384;
    run_case(c, true, every_rank);
  }
}

TEST(DeepEPSharedArena, UnevenRoutingAndRanksReceivingNothing) {
  MoeCase uneven = make(4, 16, 3, Routing::Uneven);
  uneven.hidden = 256;
  MoeCase sparse = make(4, 16, 4, Routing::Sparse);  // the last rank receives and sends nothing
  sparse.hidden = 256;
  sparse.zero_tokens_rank = true;
  for (const MoeCase* c : {&uneven, &sparse})
    for (bool fp8 : {false, true}) run_case(*c, fp8, every_rank);
}

// Rows of 7168 BF16: combine reduces them from the mappings over several of its blocks.
TEST(DeepEPSharedArena, WideRowsOverSeveralCombineBlocks) {
  MoeCase c = make(4, 16, 4, Routing::Uneven);
  c.hidden = 7168;
  c.max_tokens = 96;
  run_case(c, false, every_rank);
}

// Some ranks' inputs in their arenas, the others' not: with DEEPEP_COPY_INTO_ARENA=0 each source
// is read its own way (the private ones with process_vm_readv); by default the private ones are
// copied into their arenas first and every source is read from the mappings.
TEST(DeepEPSharedArena, MixedArenaAndPrivateInputs) {
  MoeCase four = make(4, 16, 4, Routing::Uneven);
  four.hidden = 256;
  MoeCase eight = make(8, 32, 8, Routing::Uniform);
  eight.hidden = 256;
  for (const char* setting : {"0", "1"}) {
    SCOPED_TRACE(std::string("DEEPEP_COPY_INTO_ARENA=") + setting);
    testutil::ScopedEnv copy("DEEPEP_COPY_INTO_ARENA", setting);
    for (bool fp8 : {false, true}) run_case(four, fp8, [](int r) { return r % 2 == 0; });
    run_case(eight, false, [](int r) { return r < 3; });
  }
}

// Fault injection and DEEPEP_SINGLE_COPY=0 keep the frame path: arena inputs move through it.
TEST(DeepEPSharedArena, FramePathWithArenaInputs) {
  MoeCase c = make(4, 16, 4, Routing::Uneven);
  c.hidden = 256;
  deepep::CommOptions faulty = test_options();
  faulty.faults.drop = 0.1;
  faulty.faults.seed = 5;
  for (bool fp8 : {false, true}) run_case(c, fp8, every_rank, faulty);
  testutil::ScopedEnv frames("DEEPEP_SINGLE_COPY", "0");
  run_case(c, false, every_rank);
}

TEST(DeepEPSharedArena, AllocationErrorsAndReuse) {
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions small = test_options();
    small.shared_arena_bytes = 1 << 20;
    deepep::Buffer buf(g, 1 << 20, 0, false, small);
    expect_throws([&] { buf.alloc_shared_tensor({1025, 1024}, rt::DType::U8); },
                  "does not fit in the shared arena: 1048576 bytes per rank", "a tensor larger than the arena");
    expect_throws([&] { buf.alloc_shared_tensor({-1, 4}, rt::DType::F32); }, "negative dimension", "a negative shape");
    {
      // Four quarters fill it; with the third still held, 768 KiB does not fit (the first two
      // merged: 512 KiB); freed, all merge again.
      std::vector<rt::Tensor> quarters;
      for (int i = 0; i < 4; ++i) quarters.push_back(buf.alloc_shared_tensor({256, 256}, rt::DType::F32));
      EP_CHECK(quarters[0].data() != quarters[1].data());
      expect_throws([&] { buf.alloc_shared_tensor({1}, rt::DType::U8); }, "the largest free range 0 bytes",
                    "an allocation in a full arena");
      quarters.erase(quarters.begin(), quarters.begin() + 2);
      quarters.pop_back();
      expect_throws([&] { buf.alloc_shared_tensor({192, 1024}, rt::DType::F32); }, "the largest free range 524288",
                    "768 KiB beside a held quarter");
    }
    const rt::Tensor whole = buf.alloc_shared_tensor({1 << 20}, rt::DType::U8);
    EP_CHECK(whole.numel() == 1 << 20 && whole.is_contiguous() && whole.device().is_cpu());

    deepep::CommOptions none = test_options();
    none.shared_arena_bytes = 0;
    deepep::Buffer without(g, 1 << 20, 0, false, none);
    expect_throws([&] { without.alloc_shared_tensor({4}, rt::DType::F32); }, "shared_arena_bytes is 0",
                  "an allocation without an arena");
  }));
}

TEST(DeepEPSharedArena, NegativeSizeIsAnErrorOnEveryRank) {
  deepep_test::expect_all_failed_with(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
                                        deepep::CommOptions o = test_options();
                                        if (g->rank() == 1) o.shared_arena_bytes = -1;
                                        deepep::Buffer buf(g, 1 << 20, 0, false, o);
                                      }),
                                      {"rank 1", "negative shared_arena_bytes"});
}

// A rank that dies right after creating its arena's segment: its name does not outlive the group
// (it stayed in /dev/shm). Whether the kill lands before the setup's last step (the others fail)
// or after it (they succeed) is a race; either way the survivors leave no name behind.
TEST(DeepEPSharedArena, SegmentOfARankKilledInSetupIsRemoved) {
  const auto results = run_ranks(3, [&](const std::shared_ptr<deepep::Group>& g) {
    const std::string prefix = rt::str("deepep-arena-", g->peer(1).pid, "-");
    if (g->rank() == 1) {
      deepep_test::die_once_shm_name_created(prefix);
      deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
      std::this_thread::sleep_for(std::chrono::seconds(30));  // not reached unless the watch missed it
      return;
    }
    std::string outcome = "created";
    try {
      deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
    } catch (const std::exception& e) {
      outcome = e.what();
    }
    EP_CHECK(!deepep_test::shm_name_exists(prefix), "rank 1's arena is still in /dev/shm after: ", outcome);
  });
  for (const auto& o : results) {
    if (o.rank == 1)
      EXPECT_TRUE(o.killed) << "rank 1 was not killed: " << o.message;
    else
      EXPECT_TRUE(o.ok) << "rank " << o.rank << ": " << o.message;
  }
}

// Memory the system will not commit is a clear error at allocation (not a SIGBUS at first touch):
// more than /dev/shm holds, which tmpfs refuses at once.
TEST(DeepEPSharedArena, MemoryTheSystemRefusesIsAClearError) {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0 || fs.f_blocks == 0) GTEST_SKIP() << "/dev/shm has no size limit here";
  const int64_t shm_bytes = int64_t(fs.f_blocks) * int64_t(fs.f_frsize);
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.shared_arena_bytes = 2 * shm_bytes + (int64_t(1) << 30);
    deepep::Buffer buf(g, 1 << 20, 0, false, o);
    expect_throws([&] { buf.alloc_shared_tensor({shm_bytes + (int64_t(1) << 30)}, rt::DType::U8); },
                  "the system refused more", "more than /dev/shm holds");
    const rt::Tensor t = buf.alloc_shared_tensor({1024}, rt::DType::F32);  // the arena still serves
    EP_CHECK(t.numel() == 1024);
  }));
}

// Peers map only the Buffer's own arena: a tensor of another Buffer's is the same error on every
// rank, and the Buffer stays usable.
TEST(DeepEPSharedArena, TensorOfAnotherBuffersArenaIsAnError) {
  const MoeCase c = make(4, 16, 4, Routing::Uniform);
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 4 << 20, 0, false, test_options());
    deepep::Buffer other(g, 4 << 20, 0, false, test_options());
    const int me = g->rank();
    deepep::DispatchArgs a = c.dispatch_args(me, false, 1);
    deepep::DispatchArgs bad = a;
    if (me == 1) bad.x = shared_copy(other, a.x);
    if (me == 2) bad.topk_weights = shared_copy(other, a.topk_weights);
    std::string message;
    try {
      buf.dispatch(bad);
    } catch (const rt::Error& e) {
      message = e.what();
    }
    EP_CHECK(message.find("rank 1: x lies in the shared arena of another Buffer") != std::string::npos &&
                 message.find("rank 2: topk_weights lies in the shared arena of another Buffer") != std::string::npos,
             "dispatch: '", message, "'");
    const deepep::DispatchResult d = buf.dispatch(a);
    rt::Tensor y = d.recv_x;
    if (me == 3) y = shared_copy(other, d.recv_x);
    expect_throws([&] { buf.combine(y, *d.handle, d.recv_topk_weights); },
                  "rank 3: x lies in the shared arena of another Buffer", "combine");
    dispatch_and_check(buf, c, false, true, 1, true);
  }));
}

// A rank overwrites its arena inputs as soon as its call returns: the call's closing barrier must
// keep every reader ahead of that, or it receives the poison or the next round's rows.
TEST(DeepEPSharedArena, InputsOverwrittenRightAfterEachCall) {
  MoeCase c = make(4, 16, 4, Routing::Uniform);
  c.hidden = 2048;
  constexpr int kRounds = 6;
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 4 << 20, 0, false, test_options());
    const int me = g->rank(), H = c.hidden;
    std::vector<MoeCase> rounds(kRounds, c);
    std::vector<rt::Tensor> inputs;
    for (int i = 0; i < kRounds; ++i) {
      rounds[size_t(i)].data_seed = c.seed + 1 + uint64_t(i);
      inputs.push_back(rounds[size_t(i)].x_bf16(me));
    }
    deepep::DispatchArgs a = c.dispatch_args(me, false, 1);
    a.x = shared_copy(buf, a.x);
    const int64_t N = buf.dispatch(a).handle->num_recv_tokens;
    rt::Tensor y = buf.alloc_shared_tensor({N, H}, rt::DType::BF16);
    std::vector<rt::Tensor> received, combined;
    for (int i = 0; i < kRounds; ++i) {
      std::memcpy(a.x.data(), inputs[size_t(i)].data(), size_t(a.x.nbytes()));
      const deepep::DispatchResult d = buf.dispatch(a);
      testutil::poison(a.x);
      std::memcpy(y.data(), d.recv_x.data(), size_t(y.nbytes()));  // the identity expert
      combined.push_back(buf.combine(y, *d.handle).combined_x);
      testutil::poison(y);
      received.push_back(d.recv_x);
    }
    const auto expect = deepep_test::expected_received(c, me);
    const auto idx = c.topk_idx(me);
    for (int i = 0; i < kRounds; ++i) {
      const MoeCase& r = rounds[size_t(i)];
      for (size_t j = 0; j < expect.size(); ++j)
        for (int h = 0; h < H; ++h)
          EP_CHECK(received[size_t(i)].data_as<tl::bfloat16_t>()[j * size_t(H) + size_t(h)].bits ==
                       r.bf16_bits(expect[j].first, expect[j].second, h),
                   "round ", i, " row ", j, " channel ", h);
      // Each token comes back once from every rank it went to: n copies summed in f32 (exact).
      for (int t = 0; t < c.tokens(me); ++t) {
        int n = 0;
        for (int q = 0; q < c.ranks; ++q) {
          bool went = false;
          for (int k = 0; k < c.topk; ++k) went |= idx[size_t(t * c.topk + k)] >= 0 && c.owner(idx[size_t(t * c.topk + k)]) == q;
          n += went;
        }
        for (int h = 0; h < H; ++h) {
          const float v = tl::bfloat16_t::from_bits(r.bf16_bits(me, t, h)).to_float();
          EP_CHECK(combined[size_t(i)].data_as<tl::bfloat16_t>()[t * H + h].bits ==
                       (n ? tl::bfloat16_t::from_float(float(n) * v).bits : uint16_t(0)),
                   "round ", i, " combined token ", t, " channel ", h);
        }
      }
    }
  }));
}

// A tensor keeps its arena mapped: it may outlive its Buffer.
TEST(DeepEPSharedArena, TensorOutlivesItsBuffer) {
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    rt::Tensor t;
    {
      deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
      t = buf.alloc_shared_tensor({4096}, rt::DType::I32);
      for (int i = 0; i < 4096; ++i) t.data_as<int32_t>()[i] = i * 3;
    }
    for (int i = 0; i < 4096; ++i) EP_CHECK(t.data_as<int32_t>()[i] == i * 3, "element ", i);
  }));
}

// A rank dying while the others read its arena: the others report it by rank within the liveness
// bound (its mapping stays readable, so nothing crashes; the call's closing barrier notices).
TEST(DeepEPSharedArena, RankDyingDuringArenaDispatchIsAClearError) {
  if (!single_copy_expected()) GTEST_SKIP() << "the single copy is off here";
  MoeCase c = make(4, 16, 4, Routing::Uniform);
  c.hidden = 7168;
  deepep_test::expect_dying_rank_noticed_during_dispatch(c, [&](deepep::Buffer& buf) {
    deepep::DispatchArgs a = c.dispatch_args(buf.rank(), false, 1);
    a.x = shared_copy(buf, a.x);
    return a;
  }, [](deepep::Buffer& buf) { EP_CHECK(buf.shared_bytes_read() > 0, "the warm-up read nothing from the arenas"); });
}

}  // namespace
