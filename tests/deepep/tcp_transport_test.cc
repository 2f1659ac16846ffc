// The tcp transport: its own behaviour (flow control through a tiny window, full-size frames in
// flight both ways, the control plane's mirrors, abort and goodbye), then every multi-node scenario
// over it on loopback -- ranks given different host identities, so that the group spans "hosts"
// and picks tcp by itself -- against the references and, bit for bit, against the shm transport
// serving the same emulated nodes (DEEPEP_SHM_EMULATE_NODES=1) on the same inputs; then a killed
// rank, an abort, a timeout and injected drops and corruption.
#include <dirent.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "deepep/transport.h"
#include "dispatch_check.h"
#include "testutil/tensors.h"

namespace {

using deepep::Algorithm;
using deepep::Counter;
using deepep::ReduceOp;
using deepep_test::dispatch_and_check;
using deepep_test::expect_all_ok;
using deepep_test::mix;
using deepep_test::moe_case;
using deepep_test::MoeCase;
using deepep_test::nodes_of;
using deepep_test::note;
using deepep_test::Routing;
using deepep_test::run_ranks;
using deepep_test::same_bytes;
using deepep_test::test_options;
using deepep_test::test_seed;
using deepep_test::unit;
using Clock = std::chrono::steady_clock;

// --- the transport alone -------------------------------------------------------------------------

std::unique_ptr<deepep::Transport> tcp_transport(deepep::Group& g, int64_t inbound_bytes) {
  deepep::TransportConfig c;
  c.inbound_bytes = inbound_bytes;
  c.timeout = std::chrono::milliseconds(20000);
  return deepep::find_transport("tcp", g).create(g, c);
}

// Waits (on the transport's doorbell) until `done`, for at most 20 s.
template <class F>
void wait_until(deepep::Transport& t, F&& done, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (true) {
    const uint32_t token = t.wait_token();
    if (done()) return;
    EP_CHECK(Clock::now() < deadline, "rank ", t.rank(), ": waited 20 s for ", what);
    t.wait(token, std::chrono::milliseconds(100));
  }
}

uint8_t frame_byte(int src, uint64_t frame, size_t i) { return uint8_t(mix(uint64_t(src), frame, i / 8) >> (8 * (i % 8))); }

// Two ranks, the smallest budget (two 4 KiB frames in flight): the third frame finds the window
// full until the receiver consumes, and 300 frames of varied sizes arrive whole and in order.
TEST(DeepEPTcp, FlowControlThroughATinyWindow) {
  expect_all_ok(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    auto t = tcp_transport(*g, 2 * (4096 + 64));
    EP_CHECK(std::string(t->name()) == "tcp" && t->frame_capacity() == 4096, t->frame_capacity());
    const int N = 300;
    auto size_of = [](int i) { return size_t(1 + (uint64_t(i) * 1237) % 4096); };
    if (g->rank() == 0) {
      for (int i = 0; i < N; ++i) {
        if (i == 2) {
          EP_CHECK(t->reserve(1) == nullptr, "a third frame found room in a window of two");
          t->counter(0, Counter::Done).store(1);  // now the receiver starts consuming
          t->notify(1);
        }
        uint8_t* f = nullptr;
        wait_until(*t, [&] { return (f = static_cast<uint8_t*>(t->reserve(1))) != nullptr; }, "room on link 0->1");
        for (size_t b = 0; b < size_of(i); ++b) f[b] = frame_byte(0, uint64_t(i), b);
        t->publish(1, size_of(i));
        t->notify(1);
      }
      EP_CHECK(t->published(1) == uint64_t(N));
      wait_until(*t, [&] { return t->consumed(1) == uint64_t(N); }, "every frame consumed");
    } else {
      wait_until(*t, [&] { return t->counter(0, Counter::Done).load() == 1; }, "rank 0's signal");
      for (int i = 0; i < N; ++i) {
        const uint8_t* f = nullptr;
        size_t bytes = 0;
        wait_until(*t, [&] { return (f = static_cast<const uint8_t*>(t->peek(0, &bytes))) != nullptr; }, "a frame");
        EP_CHECK(bytes == size_of(i), "frame ", i, ": ", bytes, " bytes, sent ", size_of(i));
        for (size_t b = 0; b < bytes; ++b) EP_CHECK(f[b] == frame_byte(0, uint64_t(i), b), "frame ", i, " byte ", b);
        t->consume(0);
        t->notify(0);
      }
      EP_CHECK(t->peek(0, nullptr) == nullptr, "a frame beyond those sent");
    }
  }));
}

// Three ranks each send 150 frames of the full 128 KiB to both others at once (a window of 63
// frames per link: many in flight, both directions of every connection busy), all checked.
TEST(DeepEPTcp, FullSizeFramesInFlightBothWays) {
  expect_all_ok(run_ranks(3, [](const std::shared_ptr<deepep::Group>& g) {
    auto t = tcp_transport(*g, 16 << 20);
    const size_t cap = t->frame_capacity();
    EP_CHECK(cap == (128u << 10), cap);
    const int me = g->rank(), N = 150;
    std::vector<int> sent(3, 0), got(3, 0);
    auto done = [&] {
      for (int r = 0; r < 3; ++r)
        if (r != me && (sent[size_t(r)] < N || got[size_t(r)] < N)) return false;
      return true;
    };
    size_t max_in_flight = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!done()) {
      const uint32_t token = t->wait_token();
      bool moved = false;
      for (int r = 0; r < 3; ++r) {
        if (r == me) continue;
        while (sent[size_t(r)] < N) {
          auto* f = static_cast<uint8_t*>(t->reserve(r));
          if (!f) break;
          for (size_t b = 0; b < cap; b += 8) {
            const uint64_t w = mix(uint64_t(me), uint64_t(sent[size_t(r)]), b / 8);
            std::memcpy(f + b, &w, 8);
          }
          t->publish(r, cap);
          t->notify(r);
          ++sent[size_t(r)];
          moved = true;
          max_in_flight = std::max<size_t>(max_in_flight, t->published(r) - t->consumed(r));
        }
        size_t bytes = 0;
        while (const auto* f = static_cast<const uint8_t*>(t->peek(r, &bytes))) {
          EP_CHECK(bytes == cap, "frame ", got[size_t(r)], " from rank ", r, ": ", bytes, " bytes");
          for (size_t b = 0; b < cap; b += 8) {
            uint64_t w;
            std::memcpy(&w, f + b, 8);
            EP_CHECK(w == mix(uint64_t(r), uint64_t(got[size_t(r)]), b / 8), "frame ", got[size_t(r)], " from rank ",
                     r, " differs at byte ", b);
          }
          t->consume(r);
          t->notify(r);
          ++got[size_t(r)];
          moved = true;
        }
      }
      EP_CHECK(Clock::now() < deadline, "rank ", me, ": frames did not move within 30 s");
      if (!moved) t->wait(token, std::chrono::milliseconds(100));
    }
    EP_CHECK(max_in_flight > 2, "at most ", max_in_flight, " frames were ever in flight");
    // Every peer's frames consumed before leaving (their consumption comes back with notify).
    for (int r = 0; r < 3; ++r)
      if (r != me) wait_until(*t, [&] { return t->consumed(r) == uint64_t(N); }, "frames consumed");
    note(rt::str("rank ", me, ": up to ", max_in_flight, " frames in flight"));
  }));
}

// What the engine writes for its peers reaches them with notify: the board, counters,
// acknowledgements and link counters; then an abort, and a goodbye ("left").
TEST(DeepEPTcp, ControlPlaneMirrorsAbortAndGoodbye) {
  expect_all_ok(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    auto t = tcp_transport(*g, 1 << 20);
    const int me = g->rank(), peer = 1 - me;
    const size_t n = std::min<size_t>(t->board_bytes(), 5000);
    auto* mine = static_cast<uint8_t*>(t->board(1, me));
    for (size_t i = 0; i < n; ++i) mine[i] = uint8_t(i * 7 + size_t(me));
    t->post_board(1, n);
    t->ack(peer, 3, 77 + uint64_t(me));
    t->link(me, peer).losses.store(5 + uint64_t(me));
    t->link(peer, me).corrupt_received.store(9 + uint64_t(me));
    t->counter(me, Counter::Board).store(1);
    t->notify(peer);
    wait_until(*t, [&] { return t->counter(peer, Counter::Board).load() == 1; }, "the peer's Board counter");
    const auto* theirs = static_cast<const uint8_t*>(t->board(1, peer));
    for (size_t i = 0; i < n; ++i) EP_CHECK(theirs[i] == uint8_t(i * 7 + size_t(peer)), "board byte ", i);
    EP_CHECK(t->acked(peer, 3) == 77 + uint64_t(peer), t->acked(peer, 3));
    EP_CHECK(t->link(peer, me).losses.load() == 5 + uint64_t(peer), t->link(peer, me).losses.load());
    EP_CHECK(t->link(me, peer).corrupt_received.load() == 9 + uint64_t(peer));
    EP_CHECK(!t->peer_failure(peer) && !t->aborted());
    t->counter(me, Counter::Done).store(1);  // checked: the peer may abort now
    t->notify(peer);
    wait_until(*t, [&] { return t->counter(peer, Counter::Done).load() == 1; }, "the peer's checks");
    if (me == 0) {
      t->set_abort("rank 0 gave up on purpose");
      wait_until(*t, [&] { return t->peer_failure(1).has_value(); }, "rank 1's goodbye");
      const std::string why = *t->peer_failure(1);
      EP_CHECK(why.find("rank 1 (pid ") != std::string::npos && why.find(" left: it destroyed its communicator") !=
                                                                     std::string::npos, why);
    } else {
      wait_until(*t, [&] { return t->aborted().has_value(); }, "rank 0's abort");
      EP_CHECK(*t->aborted() == "rank 0 gave up on purpose", *t->aborted());
    }
  }));
}

// A rank that cannot listen (DEEPEP_TCP_ADDRESS names an address of no interface here): every
// rank fails creating the communicator, naming that rank and the address.
TEST(DeepEPTcp, SetupErrorIsReportedOnEveryRank) {
  deepep_test::expect_all_failed_with(run_ranks(3, [](const std::shared_ptr<deepep::Group>& g) {
    if (g->rank() == 1) setenv("DEEPEP_TCP_ADDRESS", "203.0.113.1", 1);  // TEST-NET-3: not this host's
    deepep::CommOptions o = test_options();
    o.transport = "tcp";
    deepep::Comm comm(g, o);
  }), {"deepep tcp transport (rank ", "listening): rank 1: ", "cannot listen on 203.0.113.1"});
}

// --- the scenarios over tcp against shm ---------------------------------------------------------

// The process's listening sockets.
int listening_sockets() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  EP_CHECK(d != nullptr, "/proc/self/fd");
  while (const dirent* e = readdir(d)) {
    int on = 0;
    socklen_t len = sizeof(on);
    n += e->d_name[0] != '.' && getsockopt(std::atoi(e->d_name), SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on;
  }
  closedir(d);
  return n;
}

// A setup that fails in one of the group's exchanges (here the peer is gone before the first)
// leaves none of its sockets open: no destructor runs for a constructor that throws.
TEST(DeepEPTcp, FailedSetupClosesItsSockets) {
  expect_all_ok(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    if (g->rank() == 1) return;
    const int before = listening_sockets();
    bool threw = false;
    try {
      tcp_transport(*g, 1 << 20);
    } catch (const std::exception&) {
      threw = true;
    }
    EP_CHECK(threw, "the setup went through without rank 1");
    EP_CHECK(listening_sockets() == before, listening_sockets(), " listening sockets, ", before, " before the setup");
  }));
}

// A Buffer on `transport` over the group's nodes (shm serves them as emulated nodes); `flat` takes
// the flat route (DEEPEP_HIERARCHICAL_DISPATCH=0; both settings in this process only).
std::unique_ptr<deepep::Buffer> make_buffer(const std::shared_ptr<deepep::Group>& g, const std::string& transport,
                                            bool flat, int64_t nvl_bytes, int64_t ll_bytes = 0,
                                            deepep::CommOptions o = test_options()) {
  o.transport = transport;
  if (transport == "shm") setenv("DEEPEP_SHM_EMULATE_NODES", "1", 1);
  if (flat) setenv("DEEPEP_HIERARCHICAL_DISPATCH", "0", 1);
  auto b = std::make_unique<deepep::Buffer>(g, nvl_bytes, ll_bytes, ll_bytes > 0, o);
  unsetenv("DEEPEP_SHM_EMULATE_NODES");
  unsetenv("DEEPEP_HIERARCHICAL_DISPATCH");
  EP_CHECK(std::string(b->comm().transport_name()) == transport, b->comm().transport_name());
  EP_CHECK(ll_bytes > 0 || b->hierarchical() == !flat, "hierarchical() ", b->hierarchical());
  return b;
}

void expect_same_dispatch(const deepep::DispatchResult& a, const deepep::DispatchResult& b) {
  EP_CHECK(same_bytes(a.recv_x, b.recv_x), "recv_x differs from shm's");
  EP_CHECK(same_bytes(a.recv_x_scales, b.recv_x_scales), "recv_x_scales differ");
  EP_CHECK(same_bytes(a.recv_topk_idx, b.recv_topk_idx), "recv_topk_idx differs");
  EP_CHECK(same_bytes(a.recv_topk_weights, b.recv_topk_weights), "recv_topk_weights differ");
  EP_CHECK(a.num_recv_tokens_per_expert == b.num_recv_tokens_per_expert, "num_recv_tokens_per_expert differs");
  EP_CHECK(same_bytes(a.handle->rank_prefix_matrix, b.handle->rank_prefix_matrix), "rank_prefix_matrix differs");
  EP_CHECK(same_bytes(a.handle->recv_src_idx, b.handle->recv_src_idx), "recv_src_idx differs");
  EP_CHECK(same_bytes(a.handle->is_token_in_rank, b.handle->is_token_in_rank), "is_token_in_rank differs");
}

// Dispatch and combine, BF16 and FP8, on both routes: over tcp against the reference
// (dispatch_and_check: rows, layout, combine's order, two combines, cached dispatch), then tcp
// against shm bit for bit, dispatch and combine.
void dispatch_combine_match_shm(int ranks, int per_node) {
  const MoeCase c = moe_case(0x7c9, ranks, ranks * 4, 4, Routing::Uneven);
  expect_all_ok(run_ranks(ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    for (bool flat : {false, true}) {
      auto tcp = make_buffer(g, "tcp", flat, 1 << 20);
      auto shm = make_buffer(g, "shm", flat, 1 << 20);
      for (bool fp8 : {false, true}) {
        dispatch_and_check(*tcp, c, fp8, true);
        const deepep::DispatchArgs a = c.dispatch_args(me, fp8, 1);
        const deepep::DispatchResult dt = tcp->dispatch(a), ds = shm->dispatch(a);
        expect_same_dispatch(dt, ds);
        rt::Tensor y = rt::Tensor::empty({dt.recv_x.size(0), c.hidden}, rt::DType::BF16);
        deepep_test::expert_outputs(c, me, y);
        const deepep::CombineResult ct = tcp->combine(y, *dt.handle, dt.recv_topk_weights);
        const deepep::CombineResult cs = shm->combine(y, *ds.handle, ds.recv_topk_weights);
        EP_CHECK(same_bytes(ct.combined_x, cs.combined_x), flat ? "flat" : "hierarchical", " combine differs from shm's");
        EP_CHECK(same_bytes(ct.combined_topk_weights, cs.combined_topk_weights), "combined weights differ");
      }
    }
  }, nodes_of(per_node)));
}

TEST(DeepEPTcp, DispatchCombineTwoNodesOfTwo) { dispatch_combine_match_shm(4, 2); }
TEST(DeepEPTcp, DispatchCombineFourNodesOfTwo) { dispatch_combine_match_shm(8, 2); }

rt::Tensor filled(int64_t n, rt::DType dtype, uint64_t seed, int rank) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = mix(seed, uint64_t(rank), uint64_t(i));
    v[size_t(i)] = dtype == rt::DType::I32 ? double(int64_t(h % 2001) - 1000) : 2 * unit(h) - 1;
  }
  rt::Tensor t = rt::Tensor::empty({n}, dtype);
  testutil::from_f64(t, v);
  return t;
}

rt::Tensor copy_of(const rt::Tensor& t) {
  rt::Tensor c = rt::Tensor::empty(t.shape(), t.dtype());
  std::memcpy(c.data(), t.data(), size_t(t.nbytes()));
  return c;
}

// Every all_reduce algorithm (hierarchical included), f32 sums against a float64 reference, bf16
// sums and i32 max, then reduce_scatter, all_gather, all_to_all, broadcast and barrier: over tcp
// bit for bit what shm gives.
void collectives_match_shm(int ranks, int per_node) {
  const uint64_t seed = test_seed() ^ 0x7c9c011;
  expect_all_ok(run_ranks(ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.inbound_bytes = 1 << 20;
    o.transport = "tcp";
    deepep::Comm tcp(g, o);
    setenv("DEEPEP_SHM_EMULATE_NODES", "1", 1);
    o.transport = "shm";
    deepep::Comm shm(g, o);
    unsetenv("DEEPEP_SHM_EMULATE_NODES");
    const int me = g->rank();
    for (Algorithm alg : {Algorithm::Direct, Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical, Algorithm::Auto})
      for (int64_t n : {int64_t(1), int64_t(1000), int64_t(70001)}) {
        for (rt::DType dt : {rt::DType::F32, rt::DType::BF16, rt::DType::I32}) {
          const ReduceOp op = dt == rt::DType::I32 ? ReduceOp::Max : ReduceOp::Sum;
          rt::Tensor a = filled(n, dt, seed + uint64_t(n), me), b = copy_of(a);
          deepep::all_reduce(tcp, a, op, alg);
          deepep::all_reduce(shm, b, op, alg);
          EP_CHECK(same_bytes(a, b), deepep::name(alg), " all_reduce of ", n, " ", rt::name(dt), " differs from shm's");
          if (dt != rt::DType::F32) continue;
          const std::vector<double> got = testutil::to_f64(a);
          for (int64_t i = 0; i < n; ++i) {
            double ref = 0, mag = 0;
            for (int r = 0; r < ranks; ++r) {
              const double v = double(float(2 * unit(mix(seed + uint64_t(n), uint64_t(r), uint64_t(i))) - 1));
              ref += v, mag += std::fabs(v);
            }
            EP_CHECK(std::fabs(got[size_t(i)] - ref) <= ranks * 0x1p-23 * mag, deepep::name(alg), " element ", i, ": ",
                     got[size_t(i)], " against ", ref);
          }
        }
      }
    const int64_t n = 4099;
    rt::Tensor in = filled(n * ranks, rt::DType::F32, seed, me);
    rt::Tensor rs_t = rt::Tensor::empty({n}, rt::DType::F32), rs_s = rt::Tensor::empty({n}, rt::DType::F32);
    deepep::reduce_scatter(tcp, rs_t, in);
    deepep::reduce_scatter(shm, rs_s, in);
    EP_CHECK(same_bytes(rs_t, rs_s), "reduce_scatter differs from shm's");
    rt::Tensor part = filled(n, rt::DType::BF16, seed + 1, me);
    rt::Tensor ag_t = rt::Tensor::empty({n * ranks}, rt::DType::BF16), ag_s = rt::Tensor::empty({n * ranks}, rt::DType::BF16);
    deepep::all_gather(tcp, ag_t, part);
    deepep::all_gather(shm, ag_s, part);
    EP_CHECK(same_bytes(ag_t, ag_s), "all_gather differs from shm's");
    for (int r = 0; r < ranks; ++r)
      EP_CHECK(std::memcmp(ag_t.data_as<uint16_t>() + r * n, filled(n, rt::DType::BF16, seed + 1, r).data(), size_t(n) * 2) == 0,
               "all_gather: rank ", r, "'s part");
    rt::Tensor a2a_t = rt::Tensor::empty({n * ranks}, rt::DType::F32), a2a_s = rt::Tensor::empty({n * ranks}, rt::DType::F32);
    deepep::all_to_all(tcp, a2a_t, in);
    deepep::all_to_all(shm, a2a_s, in);
    EP_CHECK(same_bytes(a2a_t, a2a_s), "all_to_all differs from shm's");
    for (int root : {0, ranks - 1}) {
      rt::Tensor bt = filled(n, rt::DType::F32, seed + 2, me), bs = copy_of(bt);
      deepep::broadcast(tcp, bt, root);
      deepep::broadcast(shm, bs, root);
      EP_CHECK(same_bytes(bt, bs) && same_bytes(bt, filled(n, rt::DType::F32, seed + 2, root)), "broadcast from ", root);
    }
    deepep::barrier(tcp);
    deepep::barrier(shm);
  }, nodes_of(per_node)));
}

TEST(DeepEPTcp, CollectivesTwoNodesOfTwo) { collectives_match_shm(4, 2); }
TEST(DeepEPTcp, CollectivesFourNodesOfTwo) { collectives_match_shm(8, 2); }

// Low-latency dispatch (FP8, then BF16 with the receive hooks) and combine: the counts against the
// routing, and over tcp bit for bit what shm gives, every output. Each Buffer runs its calls and a
// barrier before the other's: a hook's receive may need its sender to resend a lost frame, which
// the sender does only inside a call on that Buffer (docs/deepep.md, "Background progress").
void low_latency_matches_shm(int ranks, int per_node) {
  MoeCase c = moe_case(0x7c911, ranks, ranks * 2, 3, Routing::Uniform);
  c.max_tokens = 24;
  const int64_t ll = deepep::Buffer::low_latency_size_hint(c.max_tokens, c.hidden, c.ranks, c.experts);
  expect_all_ok(run_ranks(ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank(), Le = c.experts / ranks, M = ranks * c.max_tokens, H = c.hidden;
    rt::Tensor y = rt::Tensor::empty({Le, M, H}, rt::DType::BF16);
    for (int64_t i = 0; i < y.numel(); ++i)
      y.data_as<tl::bfloat16_t>()[i] = tl::bfloat16_t::from_float(float(2 * unit(mix(uint64_t(me), uint64_t(i))) - 1));
    const rt::Tensor w = c.weights_tensor(me);
    struct Round {
      deepep::LowLatencyDispatchResult d;
      deepep::LowLatencyCombineResult c;
    };
    auto run = [&](deepep::Buffer& b) {
      std::vector<Round> rounds;
      for (bool fp8 : {true, false}) {
        const bool hook = !fp8;
        Round r;
        r.d = b.low_latency_dispatch(c.x_bf16(me), c.topk_tensor(me), c.max_tokens, c.experts, fp8, hook);
        if (hook) r.d.hook();
        r.c = b.low_latency_combine(y, c.topk_tensor(me), w, *r.d.handle, hook);
        if (hook) r.c.hook();
        rounds.push_back(std::move(r));
      }
      b.comm().barrier();
      return rounds;
    };
    auto tcp = make_buffer(g, "tcp", false, 0, ll);
    auto shm = make_buffer(g, "shm", false, 0, ll);
    const std::vector<Round> rt_ = run(*tcp), rs = run(*shm);
    std::vector<int32_t> expect(size_t(Le), 0);  // tokens routed to each local expert
    for (int s = 0; s < ranks; ++s) {
      const auto idx = c.topk_idx(s);
      for (int64_t e : idx)
        if (e >= 0 && e / Le == me) ++expect[size_t(e % Le)];
    }
    for (size_t k = 0; k < rt_.size(); ++k) {
      const bool fp8 = k == 0;
      const auto &dt = rt_[k].d, &ds = rs[k].d;
      for (int le = 0; le < Le; ++le)
        EP_CHECK(dt.recv_count.data_as<int32_t>()[le] == expect[size_t(le)], "expert ", le, " received ",
                 dt.recv_count.data_as<int32_t>()[le], " rows, routed ", expect[size_t(le)]);
      EP_CHECK(same_bytes(dt.recv_count, ds.recv_count), "recv_count differs from shm's");
      // Rows past each expert's count are unspecified: compare the counted ones.
      const size_t row = size_t(H) * (fp8 ? 1 : 2), srow = size_t(H / 128) * 4;
      for (int le = 0; le < Le; ++le) {
        const size_t count = size_t(expect[size_t(le)]), at = size_t(le) * size_t(M);
        EP_CHECK(std::memcmp(static_cast<const uint8_t*>(dt.recv_x.data()) + at * row,
                             static_cast<const uint8_t*>(ds.recv_x.data()) + at * row, count * row) == 0,
                 "expert ", le, ": rows differ from shm's");
        if (fp8)
          EP_CHECK(std::memcmp(static_cast<const uint8_t*>(dt.recv_x_scales.data()) + at * srow,
                               static_cast<const uint8_t*>(ds.recv_x_scales.data()) + at * srow, count * srow) == 0,
                   "expert ", le, ": scales differ");
      }
      EP_CHECK(same_bytes(dt.handle->recv_src_info, ds.handle->recv_src_info), "recv_src_info differs");
      EP_CHECK(same_bytes(dt.handle->recv_layout_range, ds.handle->recv_layout_range), "recv_layout_range differs");
      EP_CHECK(same_bytes(rt_[k].c.combined_x, rs[k].c.combined_x), "low-latency combine differs from shm's");
    }
  }, nodes_of(per_node)));
}

TEST(DeepEPTcp, LowLatencyTwoNodesOfTwo) { low_latency_matches_shm(4, 2); }
TEST(DeepEPTcp, LowLatencyFourNodesOfTwo) { low_latency_matches_shm(8, 2); }

// --- failures over tcp ------------------------------------------------------------------------------

// A rank killed after a dispatch's agreement (the others already sending to it): every other rank
// names it within the bound; the connection's end is how tcp sees a death.
TEST(DeepEPTcp, KilledRankIsNamedOnEveryOtherRank) {
  const MoeCase c = moe_case(0x7c9d, 4, 16, 4, Routing::Uniform);
  auto outcomes = run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.faults.kill_rank = 2;
    o.faults.kill_at_op = 2;
    o.faults.kill_mid_op = true;
    auto b = make_buffer(g, "tcp", false, 1 << 20, 0, o);
    const auto start = Clock::now();
    try {
      for (int i = 0; i < 3; ++i) b->dispatch(c.dispatch_args(g->rank(), i % 2 == 1, 1));  // rank 2 dies in op 2
    } catch (const deepep::CommError& e) {
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      const std::string m = e.what();
      EP_CHECK(m.find("rank 2 (pid ") != std::string::npos && m.find("died") != std::string::npos, m);
      EP_CHECK(s < 10.0, "took ", s, " s to notice");
      note(rt::str("noticed in ", s, " s: ", m));
      return;
    }
    EP_CHECK(false, "no error although rank 2 died");
  }, nodes_of(2));
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes[2].killed) << outcomes[2].message;
  for (int r : {0, 1, 3}) EXPECT_TRUE(outcomes[size_t(r)].ok) << "rank " << r << ": " << outcomes[size_t(r)].message;
}

// A rank that stops taking part: the others time out within the bound with the timeout's message,
// and their abort reaches the late rank, which reports it with its text.
TEST(DeepEPTcp, TimeoutAndAbortReachEveryRank) {
  auto outcomes = run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o;
    o.inbound_bytes = 1 << 20;
    o.timeout = std::chrono::milliseconds(800);
    deepep::Comm comm(g, o);
    EP_CHECK(std::string(comm.transport_name()) == "tcp");
    rt::Tensor t = rt::Tensor::empty({1000}, rt::DType::F32);
    std::fill_n(t.data_as<float>(), 1000, 1.0f);
    deepep::all_reduce(comm, t);
    // Alive, but absent: five timeouts, so that the others time out first even on a loaded machine.
    if (g->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(4000));
    const auto start = Clock::now();
    try {
      deepep::all_reduce(comm, t);
    } catch (const deepep::CommError& e) {
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      if (g->rank() != 1) EP_CHECK(s < 5.0, "timed out after ", s, " s with a timeout of 0.8 s");
      throw;
    }
  }, nodes_of(2));
  for (int r : {0, 2, 3}) {
    EXPECT_FALSE(outcomes[size_t(r)].ok);
    const std::string& m = outcomes[size_t(r)].message;
    // The first to time out says so; the others may report its abort first.
    EXPECT_NE(m.find("no progress for 800 ms"), std::string::npos) << m;
  }
  EXPECT_FALSE(outcomes[1].ok);
  EXPECT_NE(outcomes[1].message.find("the communicator was aborted"), std::string::npos) << outcomes[1].message;
  EXPECT_NE(outcomes[1].message.find("no progress for 800 ms"), std::string::npos) << outcomes[1].message;
}

// Injected drops, corruption and delays on every link (the transport's frames, as shm injects
// them): dispatch, combine and all_reduce give shm's fault-free bits; losses and corrupt frames
// were counted.
TEST(DeepEPTcp, DropsAndCorruptionGiveTheSameBits) {
  const MoeCase c = moe_case(0x7c9f, 4, 16, 4, Routing::Uniform);
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    deepep::CommOptions o = test_options();
    o.faults.drop = 0.1;
    o.faults.corrupt = 0.05;
    o.faults.delay_us = 20;
    o.log_reroutes = false;
    auto tcp = make_buffer(g, "tcp", false, 1 << 20, 0, o);
    auto shm = make_buffer(g, "shm", false, 1 << 20);
    for (bool fp8 : {false, true}) {
      const deepep::DispatchArgs a = c.dispatch_args(me, fp8, 1);
      const deepep::DispatchResult dt = tcp->dispatch(a), ds = shm->dispatch(a);
      expect_same_dispatch(dt, ds);
      rt::Tensor y = rt::Tensor::empty({dt.recv_x.size(0), c.hidden}, rt::DType::BF16);
      deepep_test::expert_outputs(c, me, y);
      EP_CHECK(same_bytes(tcp->combine(y, *dt.handle, dt.recv_topk_weights).combined_x,
                          shm->combine(y, *ds.handle, ds.recv_topk_weights).combined_x),
               "combine under faults differs from shm's");
    }
    for (Algorithm alg : {Algorithm::Ring, Algorithm::Hierarchical}) {
      rt::Tensor a = filled(300000, rt::DType::F32, test_seed(), me), b = copy_of(a);
      deepep::all_reduce(tcp->comm(), a, ReduceOp::Sum, alg);
      deepep::all_reduce(shm->comm(), b, ReduceOp::Sum, alg);
      EP_CHECK(same_bytes(a, b), deepep::name(alg), " all_reduce under faults differs from shm's");
    }
    // Over the group (through shm): what the faults did, as the engine counted it.
    rt::Tensor counts = rt::Tensor::empty({3}, rt::DType::I64);
    std::fill_n(counts.data_as<int64_t>(), 3, 0);
    for (const deepep::LinkStats& l : tcp->comm().link_stats()) {
      if (l.src == me) counts.data_as<int64_t>()[0] += int64_t(l.losses), counts.data_as<int64_t>()[2] += int64_t(l.retransmissions);
      if (l.dst == me) counts.data_as<int64_t>()[1] += int64_t(l.corrupt_received);
    }
    deepep::all_reduce(shm->comm(), counts);
    const int64_t* n = counts.data_as<int64_t>();
    EP_CHECK(n[0] > 0 && n[1] > 0 && n[2] >= n[0], "losses ", n[0], ", corrupt ", n[1], ", resent ", n[2]);
    note(rt::str(n[0], " losses, ", n[1], " corrupt frames received, ", n[2], " resent"));
  }, nodes_of(2)));
}

}  // namespace
