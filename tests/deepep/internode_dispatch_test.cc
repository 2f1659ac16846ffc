// Hierarchical dispatch and combine on groups split into emulated nodes (a host identity per rank,
// DEEPEP_SHM_EMULATE_NODES=1 so that shm serves them): results against the references and, bit for
// bit, against the flat route on the same inputs (a second Buffer with
// DEEPEP_HIERARCHICAL_DISPATCH=0); what crosses nodes counted per token and node, and tied to the
// frames on the links between nodes; loss and a killed rank on the hierarchical route.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "dispatch_check.h"

namespace {

using deepep_test::dispatch_and_check;
using deepep_test::expect_all_ok;
using deepep_test::MoeCase;
using deepep_test::nodes_of;
using deepep_test::note;
using deepep_test::on_nodes;
using deepep_test::Routing;
using deepep_test::run_ranks;
using deepep_test::RunOptions;
using deepep_test::same_bytes;
using deepep_test::test_seed;

// Inside a rank: a Buffer on the emulated nodes; `flat` takes the flat route
// (DEEPEP_HIERARCHICAL_DISPATCH=0, this process only).
std::unique_ptr<deepep::Buffer> make_buffer(const std::shared_ptr<deepep::Group>& g, bool flat,
                                            deepep::CommOptions o = deepep_test::test_options(),
                                            int64_t bytes = 1 << 20) {
  setenv("DEEPEP_SHM_EMULATE_NODES", "1", 1);
  if (flat) setenv("DEEPEP_HIERARCHICAL_DISPATCH", "0", 1);
  auto b = std::make_unique<deepep::Buffer>(g, bytes, 0, false, o);
  unsetenv("DEEPEP_HIERARCHICAL_DISPATCH");
  EP_CHECK(b->hierarchical() == !flat, "hierarchical() ", b->hierarchical());
  EP_CHECK(!b->single_copy(), "a group across nodes took the single copy");
  return b;
}

MoeCase make(int ranks, int experts, int topk, Routing routing, int hidden = 256) {
  return moe_case(0x1d0de, ranks, experts, topk, routing, hidden);
}

// Everything a dispatch returns, bit for bit (the handle's routing included).
void expect_same_dispatch(const deepep::DispatchResult& hier, const deepep::DispatchResult& flat, bool cached) {
  EP_CHECK(same_bytes(hier.recv_x, flat.recv_x), "recv_x differs from the flat route's");
  EP_CHECK(same_bytes(hier.recv_x_scales, flat.recv_x_scales), "recv_x_scales differ");
  EP_CHECK(same_bytes(hier.recv_topk_idx, flat.recv_topk_idx), "recv_topk_idx differs");
  EP_CHECK(same_bytes(hier.recv_topk_weights, flat.recv_topk_weights), "recv_topk_weights differ");
  EP_CHECK(hier.num_recv_tokens_per_expert == flat.num_recv_tokens_per_expert, "num_recv_tokens_per_expert differs");
  if (cached) return;  // a cached dispatch returns its handle
  const deepep::DispatchHandle &a = *hier.handle, &b = *flat.handle;
  EP_CHECK(a.num_recv_tokens == b.num_recv_tokens && a.num_tokens == b.num_tokens, "handle sizes differ");
  EP_CHECK(same_bytes(a.rank_prefix_matrix, b.rank_prefix_matrix), "rank_prefix_matrix differs");
  EP_CHECK(same_bytes(a.recv_src_idx, b.recv_src_idx), "recv_src_idx differs");
  EP_CHECK(same_bytes(a.is_token_in_rank, b.is_token_in_rank), "is_token_in_rank differs");
  EP_CHECK(a.recv_counts == b.recv_counts && a.send_lists == b.send_lists && a.token_offset == b.token_offset,
           "the handles' routing differs");
  EP_CHECK(a.internode != nullptr && b.internode == nullptr, "the handles do not record their routes");
}

// Rank s's tokens crossing to other nodes: once per destination node (hierarchical) and once per
// destination rank (flat).
struct Crossings {
  int64_t hierarchical = 0, flat = 0;
};
Crossings crossings(const MoeCase& c, const deepep::Group& g, int s) {
  Crossings x;
  const auto idx = c.topk_idx(s);
  for (int t = 0; t < c.tokens(s); ++t) {
    std::vector<uint8_t> rank_hit(size_t(c.ranks), 0), node_hit(size_t(g.num_nodes()), 0);
    for (int k = 0; k < c.topk; ++k) {
      const int64_t e = idx[size_t(t * c.topk + k)];
      if (e < 0) continue;
      const int r = c.owner(e), n = g.peer(r).node;
      if (n == g.peer(s).node) continue;
      x.flat += !rank_hit[size_t(r)];
      x.hierarchical += !node_hit[size_t(n)];
      rank_hit[size_t(r)] = node_hit[size_t(n)] = 1;
    }
  }
  return x;
}

// The frames this rank put on its links to other nodes (LinkStats), payload bytes apart from the
// 64-byte frame headers (docs/deepep.md, "Reliable exchange").
struct Sent {
  uint64_t frames = 0, bytes = 0;
  uint64_t payload() const { return bytes - 64 * frames; }
};
Sent sent_across(const deepep::Buffer& b) {
  const deepep::Group& g = b.comm().group();
  Sent s;
  for (int r = 0; r < g.size(); ++r)
    if (g.peer(r).node != g.node()) {
      const deepep::LinkStats l = b.comm().link_stats(g.rank(), r);
      s.frames += l.frames_sent;
      s.bytes += l.bytes_sent;
    }
  return s;
}

int64_t sum_over_ranks(deepep::Buffer& b, int64_t v) {
  rt::Tensor t = rt::Tensor::empty({1}, rt::DType::I64);
  t.data_as<int64_t>()[0] = v;
  deepep::all_reduce(b.comm(), t);
  return t.data_as<int64_t>()[0];
}

// A value of the expert row rank r returns for token t of rank s, channel h: both signs, magnitudes
// over 2^-10..2^10, so that f32 sums of a few of them round and their order matters.
double wide_value(uint64_t seed, int r, int s, int t, int h) {
  const uint64_t k = deepep_test::mix(seed, uint64_t(r), uint64_t(s), uint64_t(t) * 65536 + uint64_t(h));
  return (2 * deepep_test::unit(k) - 1) * std::ldexp(1.0, int(k % 21) - 10);
}

// An f32 and an f16 combine of wide-ranged rows on both routes (the handles of one dispatch on
// each): each exactly in its documented sum order, and the two within f32 reassociation of each
// other. BF16 rows of similar magnitudes, as the other cases have, sum exactly in f32 in any order;
// these do not, so the orders differ here. Returns how many values differed between the routes.
int64_t combine_wide_rows(deepep::Buffer& hier, deepep::Buffer& flat, const MoeCase& c,
                          const deepep::DispatchHandle& hh, const deepep::DispatchHandle& fh) {
  const deepep::Group& g = hier.comm().group();
  const int me = g.rank(), H = c.hidden, T = c.tokens(me);
  const auto received = deepep_test::expected_received(c, me);
  const auto idx = c.topk_idx(me);
  int64_t differing = 0;
  for (rt::DType dt : {rt::DType::F32, rt::DType::F16}) {
    auto stored = [dt](double v) {  // as the dtype holds it
      return dt == rt::DType::F32 ? double(float(v)) : double(tl::half_t::from_float(tl::to_float_odd(v)).to_float());
    };
    std::vector<double> rows;
    for (const auto& [s, t] : received)
      for (int h = 0; h < H; ++h) rows.push_back(wide_value(c.seed, me, s, t, h));
    rt::Tensor y = rt::Tensor::empty({int64_t(received.size()), H}, dt);
    testutil::from_f64(y, rows);
    const std::vector<double> got_h = testutil::to_f64(hier.combine(y, hh).combined_x);
    const std::vector<double> got_f = testutil::to_f64(flat.combine(y, fh).combined_x);
    for (int t = 0; t < T; ++t) {
      std::vector<int> went;  // the ranks token t went to, in rank order
      for (int r = 0; r < c.ranks; ++r) {
        bool hit = false;
        for (int k = 0; k < c.topk; ++k) hit |= idx[size_t(t * c.topk + k)] >= 0 && c.owner(idx[size_t(t * c.topk + k)]) == r;
        if (hit) went.push_back(r);
      }
      for (int h = 0; h < H; ++h) {
        float flat_sum = 0, hier_sum = 0;
        double magnitude = 0;
        for (int r : went) {
          const float v = float(stored(wide_value(c.seed, r, me, t, h)));
          flat_sum += v;
          magnitude += std::fabs(v);
        }
        for (int n = 0; n < g.num_nodes(); ++n) {
          float partial = 0;
          for (int r : went)
            if (g.peer(r).node == n) partial += float(stored(wide_value(c.seed, r, me, t, h)));
          hier_sum += partial;
        }
        const size_t at = size_t(t) * size_t(H) + size_t(h);
        EP_CHECK(got_h[at] == stored(hier_sum), rt::name(dt), " token ", t, " channel ", h, ": ", got_h[at],
                 ", the node-grouped order gives ", stored(hier_sum));
        EP_CHECK(got_f[at] == stored(flat_sum), rt::name(dt), " flat route, token ", t, " channel ", h);
        // Two f32 orders of the same sum, each rounded once to the dtype (half an ulp each).
        const double rounding = dt == rt::DType::F16 ? 0x1p-10 * std::max(std::fabs(got_h[at]), std::fabs(got_f[at])) : 0;
        EP_CHECK(std::fabs(got_h[at] - got_f[at]) <= rounding + 2 * double(went.size()) * 0x1p-24 * magnitude,
                 rt::name(dt), " token ", t, " channel ", h, ": ", got_h[at], " against the flat ", got_f[at]);
        differing += got_h[at] != got_f[at];
      }
    }
  }
  return differing;
}

// One dispatch and combine on each route: the results against the flat route's (and dispatch's
// against the reference), and what crossed nodes, counted and on the links.
void compare_routes(deepep::Buffer& hier, deepep::Buffer& flat, const MoeCase& c, bool fp8) {
  const deepep::Group& g = hier.comm().group();
  const int me = g.rank();
  const deepep::DispatchArgs a = c.dispatch_args(me, fp8, 1);
  const deepep::InternodeTraffic h0 = hier.internode_traffic(), f0 = flat.internode_traffic();
  const Sent hs0 = sent_across(hier), fs0 = sent_across(flat);
  std::vector<uint64_t> frames_to(size_t(g.size()));
  for (int r = 0; r < g.size(); ++r)
    if (r != me) frames_to[size_t(r)] = hier.comm().link_stats(me, r).frames_sent;
  const deepep::DispatchResult hd = hier.dispatch(a), fd = flat.dispatch(a);
  expect_same_dispatch(hd, fd, false);
  // Across nodes, the hierarchical dispatch sends only to its forwarders: in each other node the
  // rank of this rank's local index (modulo the node's size).
  for (int r = 0; r < g.size(); ++r) {
    if (g.peer(r).node == g.node()) continue;
    const int node_size = int(std::count_if(g.peers().begin(), g.peers().end(),
                                            [&](const deepep::PeerInfo& p) { return p.node == g.peer(r).node; }));
    const bool forwarder = g.peer(r).local_rank == g.local_rank() % node_size;
    const uint64_t sent = hier.comm().link_stats(me, r).frames_sent - frames_to[size_t(r)];
    EP_CHECK(forwarder || sent == 0, sent, " frames to rank ", r, ", which is not this rank's forwarder in its node");
  }
  const deepep::InternodeTraffic h1 = hier.internode_traffic(), f1 = flat.internode_traffic();
  const Sent hs1 = sent_across(hier), fs1 = sent_across(flat);
  const Crossings x = crossings(c, g, me);
  EP_CHECK(h1.dispatch_rows - h0.dispatch_rows == x.hierarchical, "dispatch sent ", h1.dispatch_rows - h0.dispatch_rows,
           " rows across nodes; once per token and destination node is ", x.hierarchical);
  EP_CHECK(f1.dispatch_rows - f0.dispatch_rows == x.flat, "the flat dispatch sent ", f1.dispatch_rows - f0.dispatch_rows,
           " rows across nodes, once per token and destination rank is ", x.flat);
  // The counts are what went on the links between nodes.
  EP_CHECK(int64_t(hs1.payload() - hs0.payload()) == h1.bytes - h0.bytes, "hierarchical dispatch: ",
           hs1.payload() - hs0.payload(), " payload bytes on the links across nodes, counted ", h1.bytes - h0.bytes);
  EP_CHECK(int64_t(fs1.payload() - fs0.payload()) == f1.bytes - f0.bytes, "flat dispatch: ",
           fs1.payload() - fs0.payload(), " payload bytes on the links across nodes, counted ", f1.bytes - f0.bytes);

  // Combine: each route's documented sum order exactly; the hierarchical result against the flat one.
  const int64_t N = hd.recv_x.size(0);
  rt::Tensor y = rt::Tensor::empty({N, c.hidden}, rt::DType::BF16);
  deepep_test::expert_outputs(c, me, y);
  const deepep::CombineResult hc = hier.combine(y, *hd.handle, hd.recv_topk_weights);
  const deepep::CombineResult fc = flat.combine(y, *fd.handle, fd.recv_topk_weights);
  const deepep::InternodeTraffic h2 = hier.internode_traffic(), f2 = flat.internode_traffic();
  const Sent hs2 = sent_across(hier), fs2 = sent_across(flat);
  EP_CHECK(same_bytes(hc.combined_topk_weights, fc.combined_topk_weights), "combined_topk_weights differ");
  const int T = c.tokens(me), H = c.hidden;
  const auto idx = c.topk_idx(me);
  int64_t differing = 0, multi_node_tokens = 0;
  for (int t = 0; t < T; ++t) {
    std::vector<uint8_t> node_hit(size_t(g.num_nodes()), 0);
    for (int k = 0; k < c.topk; ++k)
      if (idx[size_t(t * c.topk + k)] >= 0) node_hit[size_t(g.peer(c.owner(idx[size_t(t * c.topk + k)])).node)] = 1;
    const bool one_node = std::count(node_hit.begin(), node_hit.end(), 1) <= 1;
    multi_node_tokens += !one_node;
    for (int h = 0; h < H; ++h) {
      const uint16_t hb = hc.combined_x.data_as<tl::bfloat16_t>()[t * H + h].bits;
      const uint16_t fb = fc.combined_x.data_as<tl::bfloat16_t>()[t * H + h].bits;
      const float hier_sum = deepep_test::combined_sum(c, me, idx, t, h, &g);
      EP_CHECK(hb == tl::bfloat16_t::from_float(hier_sum).bits, "token ", t, " channel ", h,
               ": not the documented node-grouped sum");
      EP_CHECK(fb == tl::bfloat16_t::from_float(deepep_test::combined_sum(c, me, idx, t, h, nullptr)).bits, "flat route");
      if (one_node) EP_CHECK(hb == fb, "token ", t, " lies in one node: the flat route's bits expected");
      // Otherwise: f32 reassociation of at most `ranks` rows, then one rounding to bf16 each.
      const float hv = tl::bfloat16_t::from_bits(hb).to_float(), fv = tl::bfloat16_t::from_bits(fb).to_float();
      double magnitude = 0;
      const float x_th = tl::bfloat16_t::from_bits(c.bf16_bits(me, t, h)).to_float();
      std::vector<int64_t> row(idx.begin() + t * c.topk, idx.begin() + (t + 1) * c.topk);
      std::vector<float> w(size_t(c.topk));
      for (int k = 0; k < c.topk; ++k) w[size_t(k)] = c.weight(me, t, k);
      for (int r = 0; r < c.ranks; ++r) magnitude += std::fabs(deepep_test::expert_output(c, r, row, w.data(), x_th));
      const double bound = 0x1p-8 * std::max(std::fabs(hv), std::fabs(fv)) + 2 * c.ranks * 0x1p-24 * magnitude;
      EP_CHECK(std::fabs(double(hv) - double(fv)) <= bound, "token ", t, " channel ", h, ": ", hv, " against the flat ",
               fv);
      differing += hb != fb;
    }
  }
  note(rt::str("rank ", me, ": ", x.hierarchical, " rows across nodes (flat: ", x.flat, "); combine: ", differing,
               " of ", int64_t(T) * H, " values differ from the flat route by rounding (", multi_node_tokens,
               " tokens on several nodes)"));
  // Combine crosses back once per token and node: over all ranks, as many rows as dispatch sent.
  EP_CHECK(int64_t(hs2.payload() - hs1.payload()) == h2.bytes - h1.bytes, "hierarchical combine: ",
           hs2.payload() - hs1.payload(), " payload bytes across nodes, counted ", h2.bytes - h1.bytes);
  EP_CHECK(int64_t(fs2.payload() - fs1.payload()) == f2.bytes - f1.bytes, "flat combine bytes");
  int64_t flat_back = 0;  // the flat route returns every row received from another node
  for (const auto& [s, t] : deepep_test::expected_received(c, me)) flat_back += g.peer(s).node != g.node();
  EP_CHECK(f2.combine_rows - f1.combine_rows == flat_back, "flat combine rows ", f2.combine_rows - f1.combine_rows);
  const int64_t crossed_back = sum_over_ranks(hier, h2.combine_rows - h1.combine_rows);
  const int64_t crossed_out = sum_over_ranks(hier, x.hierarchical), flat_out = sum_over_ranks(hier, x.flat);
  EP_CHECK(crossed_back == crossed_out, "combine sent ", crossed_back, " rows across nodes, dispatch ", crossed_out);
  // A node's partial is one row, or an f32 row for a token that reached several ranks there: never
  // more bytes across nodes than the flat route's rows.
  const int64_t combine_bytes = sum_over_ranks(hier, h2.bytes - h1.bytes);
  const int64_t flat_combine_bytes = sum_over_ranks(hier, f2.bytes - f1.bytes);
  EP_CHECK(combine_bytes <= flat_combine_bytes, "combine sent ", combine_bytes, " bytes across nodes, the flat route ",
           flat_combine_bytes);
  // The case must tell the routes apart (tokens reaching two ranks of one other node).
  EP_CHECK(flat_out > crossed_out, "the flat route would cross as often: ", flat_out);

  const int64_t wide_differing = sum_over_ranks(hier, combine_wide_rows(hier, flat, c, *hd.handle, *fd.handle));
  EP_CHECK(wide_differing > 0, "no f32 or f16 sum differed between the routes: the check of the sum order is idle");
  note(rt::str("f32 and f16 combines of wide-ranged rows: ", wide_differing, " values differ between the routes"));

  // Cached dispatch with new rows, on both routes.
  const deepep::DispatchArgs full = c.dispatch_args(me, fp8, 1);
  deepep::DispatchArgs ca;
  ca.x = full.x;
  ca.x_scales = full.x_scales;
  ca.handle = hd.handle;
  const deepep::DispatchResult hcached = hier.dispatch(ca);
  ca.handle = fd.handle;
  const deepep::DispatchResult fcached = flat.dispatch(ca);
  expect_same_dispatch(hcached, fcached, true);
  EP_CHECK(same_bytes(hcached.recv_x, hd.recv_x), "the cached dispatch's rows differ from the first dispatch's");
  EP_CHECK(hier.internode_traffic().dispatch_rows - h2.dispatch_rows == x.hierarchical, "cached dispatch crossings");
}

// The usual checks (dispatch_and_check: the reference, layout per node, combine in the documented
// order, two combines per handle, cached dispatch), then the routes compared.
void hierarchical_case(int ranks, const RunOptions& nodes, const MoeCase& c, int alignment) {
  expect_all_ok(run_ranks(ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    auto hier = make_buffer(g, false);
    auto flat = make_buffer(g, true);
    for (bool fp8 : {false, true}) {
      const auto handle = dispatch_and_check(*hier, c, fp8, true, alignment);
      deepep::DispatchArgs cached;
      cached.x = fp8 ? c.x_fp8(g->rank()) : c.x_bf16(g->rank());
      if (fp8) cached.x_scales = c.x_scales(g->rank());
      cached.handle = handle;
      const deepep::DispatchResult d = hier->dispatch(cached);
      const auto expect = deepep_test::expected_received(c, g->rank());
      for (size_t i = 0; i < expect.size(); ++i)
        for (int h = 0; h < c.hidden; ++h) {
          const auto [s, t] = expect[i];
          const size_t at = i * size_t(c.hidden) + size_t(h);
          EP_CHECK(fp8 ? static_cast<const uint8_t*>(d.recv_x.data())[at] == c.fp8_bits(s, t, h)
                       : d.recv_x.data_as<tl::bfloat16_t>()[at].bits == c.bf16_bits(s, t, h),
                   "cached row ", i);
        }
      compare_routes(*hier, *flat, c, fp8);
    }
  }, nodes));
}

TEST(DeepEPInternode, TwoNodesOfTwo) { hierarchical_case(4, nodes_of(2), make(4, 16, 4, Routing::Uniform), 1); }

TEST(DeepEPInternode, TwoNodesOfFourUnevenRouting) {
  hierarchical_case(8, nodes_of(4), make(8, 32, 6, Routing::Uneven), 4);
}

// Node 3 (ranks 6 and 7) receives nothing, rank 7 sends nothing, some tokens pick no expert.
TEST(DeepEPInternode, FourNodesOfTwoOneReceivingNothing) {
  MoeCase c = make(8, 32, 6, Routing::Sparse);
  c.idle_ranks = 2;
  c.zero_tokens_rank = true;
  hierarchical_case(8, nodes_of(2), c, 1);
}

// Unequal, interleaved nodes: node 0 holds ranks 0, 2 and 4, node 1 ranks 1 and 3, so rank 4's
// forwarder in node 1 is the one of local index 2 mod 2.
TEST(DeepEPInternode, UnequalInterleavedNodes) {
  hierarchical_case(5, on_nodes([](int r) { return r % 2; }), make(5, 20, 5, Routing::Uniform), 1);
}

TEST(DeepEPInternode, OneNodeKeepsTheFlatRoute) {
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 1 << 20, 0, false, deepep_test::test_options());
    EP_CHECK(!buf.hierarchical());
    const MoeCase c = make(2, 8, 3, Routing::Uniform);
    dispatch_and_check(buf, c, false, true);
    EP_CHECK(buf.internode_traffic().dispatch_rows == 0 && buf.internode_traffic().combine_rows == 0);
  }));
}

// A layout whose per-node counts do not match topk_idx: the same error on every rank.
TEST(DeepEPInternode, LayoutWithWrongNodeCountsIsAnError) {
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    auto buf = make_buffer(g, false);
    const MoeCase c = make(4, 16, 4, Routing::Uniform);
    deepep::DispatchArgs a = c.dispatch_args(g->rank(), false, 1);
    deepep::DispatchLayout layout = buf->get_dispatch_layout(a.topk_idx, c.experts);
    if (g->rank() == 2) layout.num_tokens_per_rdma_rank.data_as<int32_t>()[1] += 1;
    a.layout = &layout;
    deepep_test::expect_throws([&] { buf->dispatch(a); }, "rank 2: layout.num_tokens_per_rdma_rank[1]", "dispatch");
    dispatch_and_check(*buf, c, false, true);  // still usable
  }, nodes_of(2)));
}

// 10% loss and 5% corruption on every link: the results stay exact (dispatch_and_check), the same
// rows cross, and the frames were repaired.
TEST(DeepEPInternode, LossAndCorruptionResultsIdentical) {
  const MoeCase c = make(4, 16, 4, Routing::Uniform, 512);
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = deepep_test::test_options();
    o.faults.drop = 0.1;
    o.faults.corrupt = 0.05;
    o.faults.seed = test_seed();
    o.log_reroutes = false;
    auto buf = make_buffer(g, false, o, 3 * (20 << 10));  // small rings: many frames, so many faults
    for (bool fp8 : {false, true}) dispatch_and_check(*buf, c, fp8, true);
    EP_CHECK(buf->internode_traffic().dispatch_rows == 2 * crossings(c, *g, g->rank()).hierarchical);
    deepep::barrier(buf->comm());
    uint64_t losses = 0, retransmissions = 0, corrupt = 0;
    for (const deepep::LinkStats& s : buf->link_stats()) {
      losses += s.losses;
      retransmissions += s.retransmissions;
      corrupt += s.corrupt_received;
    }
    note(rt::str("losses ", losses, ", retransmissions ", retransmissions, ", corrupt received ", corrupt));
    EP_CHECK(losses > 0 && retransmissions > 0 && corrupt > 0, losses, " ", retransmissions, " ", corrupt);
  }, nodes_of(2)));
}

// Rank 0's one link to node 1 (to its forwarder there, rank 2) loses half its frames: it is
// rerouted through another rank, whose hierarchical frames are then relayed, and the results stay
// exact. A relay needs both its links measured, and the route alone never uses 0->3 or 1->2 (it
// crosses between ranks of one local index): an all_to_all measures every link first.
TEST(DeepEPInternode, BadLinkAcrossNodesIsRerouted) {
  MoeCase c = make(4, 16, 4, Routing::Uniform, 512);
  c.max_tokens = 200;
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = deepep_test::test_options();
    o.faults.drop = 0.5;
    o.faults.corrupt = 0.1;
    o.faults.links = {{0, 2}};
    o.faults.seed = test_seed();
    o.log_reroutes = false;
    auto buf = make_buffer(g, false, o, 3 * (20 << 10));  // 4 KiB frames: many of them
    const int64_t n = 4 * 65536;  // 256 KiB to each rank: 64 frames a link
    rt::Tensor in = rt::Tensor::empty({n}, rt::DType::F32), out = rt::Tensor::empty({n}, rt::DType::F32);
    for (int64_t i = 0; i < n; ++i) in.data_as<float>()[i] = float(g->rank() * n + i);
    for (int round = 0; round < 2; ++round) deepep::all_to_all(buf->comm(), out, in);
    for (int64_t i = 0; i < n; ++i)
      EP_CHECK(out.data_as<float>()[i] == float((i / (n / 4)) * n + g->rank() * (n / 4) + i % (n / 4)), "all_to_all");
    auto relayed_to_2 = [&] {
      uint64_t frames = 0;
      for (int m : {1, 3}) frames += buf->comm().link_stats(m, 2).frames_forwarded;
      return frames;
    };
    const uint64_t relayed_before = relayed_to_2();
    for (int round = 0; round < 4; ++round) dispatch_and_check(*buf, c, round % 2 == 1, true);
    deepep::barrier(buf->comm());
    const deepep::LinkStats bad = buf->comm().link_stats(0, 2);
    const uint64_t relayed = relayed_to_2() - relayed_before;
    note(rt::str("link 0->2: loss rate ", bad.loss_rate, ", reroutes ", bad.reroutes, ", via ", bad.via,
                 ", relayed in dispatch and combine ", relayed));
    EP_CHECK(bad.reroutes >= 1, "link 0->2 was not rerouted (loss rate ", bad.loss_rate, ")");
    EP_CHECK(relayed > 0, "no frame of dispatch or combine was relayed to rank 2");
  }, nodes_of(2)));
}

// Rank 1 (rank 3's forwarder in node 0) killed as the combine starts, or once the dispatch's
// agreement is done (the others already sending): every other rank gets "rank 1 ... died".
void expect_killed_forwarder_reported(int kill_at_op, bool mid_op) {
  const MoeCase c = make(4, 16, 4, Routing::Uniform);
  auto outcomes = run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = deepep_test::test_options();
    o.faults.kill_rank = 1;
    o.faults.kill_at_op = kill_at_op;
    o.faults.kill_mid_op = mid_op;
    auto buf = make_buffer(g, false, o);
    const deepep::DispatchArgs a = c.dispatch_args(g->rank(), false, 1);
    const auto start = std::chrono::steady_clock::now();
    try {
      const deepep::DispatchResult d = buf->dispatch(a);  // op 1
      buf->combine(d.recv_x, *d.handle, d.recv_topk_weights);  // op 2
    } catch (const deepep::CommError& e) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string m = e.what();
      EP_CHECK(m.find("rank 1") != std::string::npos && m.find("died") != std::string::npos, m);
      EP_CHECK(s < 10.0, "took ", s, " s to notice");
      return;
    }
    EP_CHECK(false, "no error although rank 1 died");
  }, nodes_of(2));
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes[1].killed) << outcomes[1].message;
  for (int r : {0, 2, 3}) EXPECT_TRUE(outcomes[size_t(r)].ok) << "rank " << r << ": " << outcomes[size_t(r)].message;
}

TEST(DeepEPInternode, ForwarderKilledAtCombineIsAClearError) { expect_killed_forwarder_reported(2, false); }
TEST(DeepEPInternode, ForwarderKilledMidDispatchIsAClearError) { expect_killed_forwarder_reported(1, true); }

}  // namespace
