// The normal-mode dispatch/combine check shared by the dispatch and self-healing tests.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "moe_ref.h"
#include "testutil/tensors.h"

namespace deepep_test {

// What rank `me`'s experts return for the tokens it received (expected_received's order): each
// row's local experts applied and weighted (expert_output), written into y [received, hidden] bf16.
inline void expert_outputs(const MoeCase& c, int me, rt::Tensor& y) {
  const auto expect = expected_received(c, me);
  const int H = c.hidden, K = c.topk;
  std::vector<std::vector<int64_t>> idx(static_cast<size_t>(c.ranks));
  for (int s = 0; s < c.ranks; ++s) idx[size_t(s)] = c.topk_idx(s);
  for (size_t i = 0; i < expect.size(); ++i) {
    const auto [s, t] = expect[i];
    const std::vector<int64_t>& src_idx = idx[size_t(s)];
    std::vector<int64_t> row(src_idx.begin() + t * K, src_idx.begin() + (t + 1) * K);
    std::vector<float> w(static_cast<size_t>(K));
    for (int k = 0; k < K; ++k) w[size_t(k)] = c.weight(s, t, k);
    for (int h = 0; h < H; ++h)
      y.data_as<tl::bfloat16_t>()[int64_t(i) * H + h] = tl::bfloat16_t::from_float(
          expert_output(c, me, row, w.data(), tl::bfloat16_t::from_bits(c.bf16_bits(s, t, h)).to_float()));
  }
}

// What combine returns for channel h of rank me's token t (before rounding to bf16): the f32 sum of
// the rows of the ranks the token went to. The flat route sums them in rank order; the hierarchical
// one (`nodes` given) sums each node's rows in rank order, then those node partials in node order.
// idx: c.topk_idx(me).
inline float combined_sum(const MoeCase& c, int me, const std::vector<int64_t>& idx, int t, int h,
                          const deepep::Group* nodes) {
  const int K = c.topk;
  std::vector<int64_t> row(idx.begin() + t * K, idx.begin() + (t + 1) * K);
  std::vector<float> w(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) w[size_t(k)] = c.weight(me, t, k);
  const float x = tl::bfloat16_t::from_bits(c.bf16_bits(me, t, h)).to_float();
  auto went = [&](int r) {
    bool hit = false;
    for (int64_t e : row) hit |= e >= 0 && c.owner(e) == r;
    return hit;
  };
  float acc = 0;
  for (int n = 0; n < (nodes ? nodes->num_nodes() : 1); ++n) {
    float partial = 0;
    for (int r = 0; r < c.ranks; ++r)
      if (went(r) && (!nodes || nodes->peer(r).node == n)) partial += expert_output(c, r, row, w.data(), x);
    acc += partial;
  }
  return acc;
}

// Same shape, dtype and bytes (or both undefined).
inline bool same_bytes(const rt::Tensor& a, const rt::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), size_t(a.nbytes())) == 0;
}

// A copy of the CPU tensor t in buf's shared arena.
inline rt::Tensor shared_copy(deepep::Buffer& buf, const rt::Tensor& t) {
  const rt::Tensor s = buf.alloc_shared_tensor(t.shape(), t.dtype());
  std::memcpy(s.data(), t.data(), size_t(t.nbytes()));
  return s;
}

// Dispatches c's inputs on this rank and checks everything against the reference; then runs the
// test's experts on the received tokens, combines, and checks the result exactly (and against the
// top-k-weighted sum). With fp8, x is e4m3 with scales. With `shared`, every input of dispatch and
// combine lies in the Buffer's shared arena. Returns the handle for reuse.
inline std::shared_ptr<const deepep::DispatchHandle> dispatch_and_check(deepep::Buffer& buf, const MoeCase& c, bool fp8,
                                                                 bool with_layout, int alignment = 1,
                                                                 bool shared = false) {
  const int me = buf.rank(), R = c.ranks, T = c.tokens(me), H = c.hidden, K = c.topk;
  const int per_rank = c.experts / R;
  deepep::DispatchArgs a = c.dispatch_args(me, fp8, alignment);
  if (shared) {
    a.x = shared_copy(buf, a.x);
    if (fp8) a.x_scales = shared_copy(buf, a.x_scales);
    a.topk_idx = shared_copy(buf, a.topk_idx);
    a.topk_weights = shared_copy(buf, a.topk_weights);
  }
  deepep::DispatchLayout layout;
  if (with_layout) {
    layout = buf.get_dispatch_layout(a.topk_idx, c.experts);
    a.layout = &layout;
    // The layout against its definition.
    const auto idx = c.topk_idx(me);
    for (int r = 0; r < R; ++r) {
      int n = 0;
      for (int t = 0; t < T; ++t) {
        bool hit = false;
        for (int k = 0; k < K; ++k) hit |= idx[size_t(t * K + k)] >= 0 && c.owner(idx[size_t(t * K + k)]) == r;
        EP_CHECK(static_cast<const uint8_t*>(layout.is_token_in_rank.data())[t * R + r] == hit);
        n += hit;
      }
      EP_CHECK(layout.num_tokens_per_rank.data_as<int32_t>()[r] == n, "num_tokens_per_rank[", r, "]");
    }
    for (int e = 0; e < c.experts; ++e) {
      int n = 0;
      for (int64_t v : idx) n += v == e;
      EP_CHECK(layout.num_tokens_per_expert.data_as<int32_t>()[e] == n, "num_tokens_per_expert[", e, "]");
    }
    // num_tokens_per_rdma_rank: the tokens with a destination on each node.
    const deepep::Group& g = buf.comm().group();
    EP_CHECK(layout.num_tokens_per_rdma_rank.numel() == g.num_nodes());
    for (int n = 0; n < g.num_nodes(); ++n) {
      int want = 0;
      for (int t = 0; t < T; ++t) {
        bool hit = false;
        for (int k = 0; k < K; ++k) {
          const int64_t e = idx[size_t(t * K + k)];
          hit |= e >= 0 && g.peer(c.owner(e)).node == n;
        }
        want += hit;
      }
      EP_CHECK(layout.num_tokens_per_rdma_rank.data_as<int32_t>()[n] == want, "num_tokens_per_rdma_rank[", n, "]");
    }
  }
  const deepep::DispatchResult d = buf.dispatch(a);
  const auto expect = deepep_test::expected_received(c, me);
  const int64_t N = int64_t(expect.size());
  EP_CHECK(d.recv_x.size(0) == N && d.recv_x.size(1) == H, "recv_x ", d.recv_x.shape_string(), " expected ", N, " rows");
  EP_CHECK(d.handle->num_recv_tokens == N);
  std::vector<int> per_expert(static_cast<size_t>(per_rank), 0);
  for (int64_t i = 0; i < N; ++i) {
    const auto [s, t] = expect[size_t(i)];
    EP_CHECK(d.handle->recv_src_idx.data_as<int32_t>()[i] == t, "recv_src_idx[", i, "]");
    for (int h = 0; h < H; ++h) {
      if (fp8)
        EP_CHECK(static_cast<const uint8_t*>(d.recv_x.data())[i * H + h] == c.fp8_bits(s, t, h), "fp8 row ", i);
      else
        EP_CHECK(d.recv_x.data_as<tl::bfloat16_t>()[i * H + h].bits == c.bf16_bits(s, t, h), "row ", i, " from rank ",
                 s, " token ", t, " channel ", h);
    }
    if (fp8)
      for (int b = 0; b < H / 128; ++b) EP_CHECK(d.recv_x_scales.data_as<float>()[i * (H / 128) + b] == c.scale(s, t, b));
    const auto src_idx = c.topk_idx(s);
    for (int k = 0; k < K; ++k) {
      const int64_t e = src_idx[size_t(t * K + k)];
      const bool local = e >= 0 && c.owner(e) == me;
      EP_CHECK(d.recv_topk_idx.data_as<int64_t>()[i * K + k] == (local ? e - me * per_rank : -1), "recv_topk_idx");
      EP_CHECK(d.recv_topk_weights.data_as<float>()[i * K + k] == (local ? c.weight(s, t, k) : 0.0f), "weights");
      if (local) ++per_expert[size_t(e - me * per_rank)];
    }
  }
  for (int le = 0; le < per_rank; ++le)
    EP_CHECK(d.num_recv_tokens_per_expert[size_t(le)] == (per_expert[size_t(le)] + alignment - 1) / alignment * alignment,
             "num_recv_tokens_per_expert[", le, "] = ", d.num_recv_tokens_per_expert[size_t(le)]);
  // rank_prefix_matrix[i][me] = tokens ranks 0..i sent here
  int64_t cum = 0;
  for (int s = 0; s < R; ++s) {
    for (const auto& p : expect) cum += p.first == s;
    EP_CHECK(d.handle->rank_prefix_matrix.data_as<int32_t>()[s * R + me] == cum);
  }

  // Experts (BF16 only: dequantized FP8 would need its own reference) and combine.
  if (!fp8) {
    rt::Tensor y = shared ? buf.alloc_shared_tensor({N, H}, rt::DType::BF16) : rt::Tensor::empty({N, H}, rt::DType::BF16);
    testutil::poison(y);
    expert_outputs(c, me, y);
    for (int round = 0; round < 2; ++round) {  // the handle serves any number of combines
      const deepep::CombineResult cr =
          buf.combine(y, *d.handle, shared ? shared_copy(buf, d.recv_topk_weights) : d.recv_topk_weights);
      EP_CHECK(cr.combined_x.size(0) == T && cr.combined_x.size(1) == H);
      const auto idx = c.topk_idx(me);
      std::vector<double> got, want;
      for (int t = 0; t < T; ++t) {
        std::vector<int64_t> row(idx.begin() + t * K, idx.begin() + (t + 1) * K);
        std::vector<float> w(static_cast<size_t>(K));
        for (int k = 0; k < K; ++k) w[size_t(k)] = c.weight(me, t, k);
        for (int h = 0; h < H; ++h) {
          const float x = tl::bfloat16_t::from_bits(c.bf16_bits(me, t, h)).to_float();
          const float acc = combined_sum(c, me, idx, t, h, buf.hierarchical() ? &buf.comm().group() : nullptr);
          double exact = 0;
          for (int k = 0; k < K; ++k)
            if (row[size_t(k)] >= 0) exact += double(w[size_t(k)]) * double(x) * deepep_test::expert_factor(row[size_t(k)]);
          const uint16_t want_bits = tl::bfloat16_t::from_float(acc).bits;
          const uint16_t got_bits = cr.combined_x.data_as<tl::bfloat16_t>()[t * H + h].bits;
          EP_CHECK(got_bits == want_bits, "combined token ", t, " channel ", h, ": got ",
                   tl::bfloat16_t::from_bits(got_bits).to_float(), " want ", acc);
          got.push_back(tl::bfloat16_t::from_bits(got_bits).to_float());
          want.push_back(exact);
        }
        for (int k = 0; k < K; ++k)
          EP_CHECK(cr.combined_topk_weights.data_as<float>()[t * K + k] == (row[size_t(k)] >= 0 ? w[size_t(k)] : 0.0f),
                   "combined_topk_weights");
      }
      // combine(dispatch(x)) is the top-k-weighted sum of the experts' outputs (up to bf16 rounding).
      if (!want.empty()) EP_CHECK(testutil::rel_error(got, want) < 1e-2, "rel error ", testutil::rel_error(got, want));
    }
  }
  return d.handle;
}

// Rank 1 of 4 kills itself (SIGKILL from a thread, 30 ms in) while every rank dispatches c's rows in
// a loop: every other rank must get a CommError naming rank 1 within 10 s, and rank 1 must have
// died. `prepare` makes the dispatch's arguments on a rank's Buffer; `after_warmup` may check the
// path the first dispatch took.
inline void expect_dying_rank_noticed_during_dispatch(
    const MoeCase& c, const std::function<deepep::DispatchArgs(deepep::Buffer&)>& prepare,
    const std::function<void(deepep::Buffer&)>& after_warmup = {}) {
  auto outcomes = run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 4 << 20, 0, false, test_options());
    const deepep::DispatchArgs a = prepare(buf);
    buf.dispatch(a);  // warm-up: every rank on the path
    if (after_warmup) after_warmup(buf);
    if (g->rank() == 1) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        kill(getpid(), SIGKILL);
      }).detach();
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      for (int i = 0; i < 100000; ++i) buf.dispatch(a);
    } catch (const deepep::CommError& e) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EP_CHECK(std::string(e.what()).find("rank 1") != std::string::npos, e.what());
      EP_CHECK(s < 10.0, "took ", s, " s to notice");
      return;
    }
    EP_CHECK(false, "no error although rank 1 died");
  });
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes[1].killed) << outcomes[1].message;
  for (int r : {0, 2, 3}) EXPECT_TRUE(outcomes[size_t(r)].ok) << "rank " << r << ": " << outcomes[size_t(r)].message;
}

}  // namespace deepep_test
