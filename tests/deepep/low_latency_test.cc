// Low-latency dispatch/combine: the fixed [local_experts, ranks * max_tokens, hidden] layout, FP8
// quantization, the top-k-weighted combine, and the receive hook.
#include <algorithm>
#include <cstring>
#include <map>

#include "moe_ref.h"
#include "testutil/tensors.h"

namespace {

using deepep_test::expect_all_failed_with;
using deepep_test::expect_all_ok;
using deepep_test::MoeCase;
using deepep_test::Routing;
using deepep_test::run_ranks;
using deepep_test::test_options;
using deepep_test::test_seed;

// The reference quantization (the documented rule): scale = max(amax, 1e-4) / 448 per 128 channels.
void quantize(const std::vector<float>& row, std::vector<uint8_t>& q, std::vector<float>& scales) {
  const size_t H = row.size();
  q.resize(H);
  scales.resize(H / 128);
  for (size_t b = 0; b < H / 128; ++b) {
    float amax = 0;
    for (size_t c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(row[b * 128 + c]));
    amax = std::max(amax, 1e-4f);
    const float mul = 448.0f / amax;
    for (size_t c = 0; c < 128; ++c) q[b * 128 + c] = tl::float8_e4m3_t::from_float(row[b * 128 + c] * mul).bits;
    scales[b] = amax / 448.0f;
  }
}

struct LlRun {
  deepep::LowLatencyDispatchResult d;
  std::vector<std::vector<std::pair<int, int>>> expect;  // per local expert: (source rank, token) in row order
};

LlRun dispatch(deepep::Buffer& buf, const MoeCase& c, bool fp8, bool hook) {
  const int me = buf.rank();
  LlRun run;
  run.d = buf.low_latency_dispatch(c.x_bf16(me), c.topk_tensor(me), c.max_tokens, c.experts, fp8, hook);
  const int Le = c.experts / c.ranks;
  run.expect.resize(static_cast<size_t>(Le));
  for (int le = 0; le < Le; ++le) {
    const int64_t e = int64_t(me) * Le + le;
    for (int s = 0; s < c.ranks; ++s) {
      const auto idx = c.topk_idx(s);
      for (int t = 0; t < c.tokens(s); ++t)
        for (int k = 0; k < c.topk; ++k)
          if (idx[size_t(t * c.topk + k)] == e) run.expect[size_t(le)].emplace_back(s, t);
    }
  }
  return run;
}

void check_dispatch(const LlRun& run, const MoeCase& c, bool fp8, int me) {
  const int Le = c.experts / c.ranks, H = c.hidden, M = c.ranks * c.max_tokens;
  const auto& d = run.d;
  EP_CHECK(d.recv_x.dim() == 3 && d.recv_x.size(0) == Le && d.recv_x.size(1) == M && d.recv_x.size(2) == H,
           d.recv_x.shape_string());
  for (int le = 0; le < Le; ++le) {
    const auto& rows = run.expect[size_t(le)];
    EP_CHECK(d.recv_count.data_as<int32_t>()[le] == int32_t(rows.size()), "recv_count[", le, "]");
    int64_t begin = 0;
    for (int s = 0; s < c.ranks; ++s) {
      int64_t n = 0;
      for (const auto& p : rows) n += p.first == s;
      EP_CHECK(d.handle->recv_layout_range.data_as<int64_t>()[le * c.ranks + s] == ((begin << 32) | n), "layout_range");
      begin += n;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto [s, t] = rows[i];
      const size_t row = size_t(le) * size_t(M) + i;
      EP_CHECK(d.handle->recv_src_info.data_as<int32_t>()[row] == t, "src_info");
      if (!fp8) {
        for (int h = 0; h < H; ++h)
          EP_CHECK(d.recv_x.data_as<tl::bfloat16_t>()[row * size_t(H) + size_t(h)].bits == c.bf16_bits(s, t, h),
                   "expert ", le, " row ", i, " channel ", h);
      } else {
        std::vector<float> x(static_cast<size_t>(H));
        for (int h = 0; h < H; ++h) x[size_t(h)] = tl::bfloat16_t::from_bits(c.bf16_bits(s, t, h)).to_float();
        std::vector<uint8_t> q;
        std::vector<float> sc;
        quantize(x, q, sc);
        for (int h = 0; h < H; ++h)
          EP_CHECK(static_cast<const uint8_t*>(d.recv_x.data())[row * size_t(H) + size_t(h)] == q[size_t(h)], "fp8");
        for (int b = 0; b < H / 128; ++b)
          EP_CHECK(d.recv_x_scales.data_as<float>()[row * size_t(H / 128) + size_t(b)] == sc[size_t(b)], "scale");
      }
    }
  }
}

// The test's experts on the received rows (BF16 output), then combine and check exactly.
void combine_and_check(deepep::Buffer& buf, const LlRun& run, const MoeCase& c, bool fp8, bool hook, int me) {
  const int Le = c.experts / c.ranks, H = c.hidden, M = c.ranks * c.max_tokens;
  rt::Tensor y = rt::Tensor::empty({Le, M, H}, rt::DType::BF16);
  testutil::poison(y);
  std::map<std::pair<int, int>, std::pair<std::vector<uint8_t>, std::vector<float>>> quantized;
  auto row_value = [&](int s, int t, int h) {
    if (!fp8) return tl::bfloat16_t::from_bits(c.bf16_bits(s, t, h)).to_float();
    auto it = quantized.find({s, t});
    if (it == quantized.end()) {
      std::vector<float> x(static_cast<size_t>(H));
      for (int j = 0; j < H; ++j) x[size_t(j)] = tl::bfloat16_t::from_bits(c.bf16_bits(s, t, j)).to_float();
      it = quantized.emplace(std::make_pair(s, t), std::make_pair(std::vector<uint8_t>(), std::vector<float>())).first;
      quantize(x, it->second.first, it->second.second);
    }
    return tl::float8_e4m3_t::from_bits(it->second.first[size_t(h)]).to_float() * it->second.second[size_t(h / 128)];
  };
  auto expert_out = [&](int64_t e, int s, int t, int h) {
    return tl::bfloat16_t::from_float(row_value(s, t, h) * deepep_test::expert_factor(e));
  };
  for (int le = 0; le < Le; ++le) {
    const auto& rows = run.expect[size_t(le)];
    for (size_t i = 0; i < rows.size(); ++i)
      for (int h = 0; h < H; ++h)
        y.data_as<tl::bfloat16_t>()[(size_t(le) * size_t(M) + i) * size_t(H) + size_t(h)] =
            expert_out(int64_t(me) * Le + le, rows[i].first, rows[i].second, h);
  }
  const rt::Tensor w = c.weights_tensor(me);
  auto cr = buf.low_latency_combine(y, c.topk_tensor(me), w, *run.d.handle, hook);
  if (hook) {
    EP_CHECK(bool(cr.hook));
    cr.hook();
    cr.hook();  // idempotent
  }
  const auto idx = c.topk_idx(me);
  for (int t = 0; t < c.tokens(me); ++t)
    for (int h = 0; h < H; ++h) {
      float acc = 0;
      for (int k = 0; k < c.topk; ++k) {
        const int64_t e = idx[size_t(t * c.topk + k)];
        if (e >= 0) acc += c.weight(me, t, k) * expert_out(e, me, t, h).to_float();
      }
      EP_CHECK(cr.combined_x.data_as<tl::bfloat16_t>()[size_t(t) * size_t(H) + size_t(h)].bits ==
                   tl::bfloat16_t::from_float(acc).bits,
               "combined token ", t, " channel ", h);
    }
}

MoeCase make(int ranks, int experts, int topk, bool zero_rank = false) {
  MoeCase c;
  c.seed = test_seed() ^ uint64_t(ranks * 77 + experts);
  c.ranks = ranks;
  c.experts = experts;
  c.topk = topk;
  c.max_tokens = 40;
  c.zero_tokens_rank = zero_rank;
  return c;
}

int64_t ll_bytes(const MoeCase& c) {
  return deepep::Buffer::low_latency_size_hint(c.max_tokens, c.hidden, c.ranks, c.experts);
}

void run_case(const MoeCase& c, bool fp8, bool hook, int rounds = 1) {
  expect_all_ok(run_ranks(c.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 0, ll_bytes(c), true, test_options());
    for (int round = 0; round < rounds; ++round) {
      MoeCase cr = c;
      cr.data_seed = c.seed + uint64_t(round);
      LlRun run = dispatch(buf, cr, fp8, hook);
      if (hook) {
        EP_CHECK(bool(run.d.hook));
        run.d.hook();
      }
      check_dispatch(run, cr, fp8, buf.rank());
      combine_and_check(buf, run, cr, fp8, hook, buf.rank());
    }
  }));
}

TEST(DeepEPLowLatency, Bf16TwoRanks) { run_case(make(2, 8, 3), false, false); }
TEST(DeepEPLowLatency, Bf16FourRanksTwoRounds) { run_case(make(4, 16, 4, true), false, false, 2); }
TEST(DeepEPLowLatency, Fp8FourRanks) { run_case(make(4, 16, 4), true, false); }
TEST(DeepEPLowLatency, Fp8EightRanks) { run_case(make(8, 32, 6), true, false); }
TEST(DeepEPLowLatency, HookFourRanks) { run_case(make(4, 16, 4), false, true, 2); }

// "Send now, receive when the hook is called": rank 0 dispatches and does not call its hook until
// every other rank has completed its receive through its hook (they learn nothing from rank 0 in
// between, so its data must have been sent by the dispatch call).
TEST(DeepEPLowLatency, HookReceivesWithoutTheSenderProgressing) {
  MoeCase c = make(4, 16, 4);
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 0, ll_bytes(c), true, test_options());
    LlRun run = dispatch(buf, c, true, true);
    if (g->rank() == 0) {
      g->barrier("others received");
      run.d.hook();
    } else {
      run.d.hook();
      check_dispatch(run, c, true, g->rank());
      g->barrier("others received");
    }
    check_dispatch(run, c, true, g->rank());
    combine_and_check(buf, run, c, true, true, g->rank());
  }));
}

TEST(DeepEPLowLatency, ErrorsOnEveryRank) {
  MoeCase c = make(4, 16, 4);
  // A buffer smaller than the size hint.
  expect_all_failed_with(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 0, ll_bytes(c) / 2, true, test_options());
    dispatch(buf, c, false, false);
  }), {"buffer too small", "low_latency_size_hint"});
  // A Buffer not made for low latency.
  expect_all_failed_with(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 1 << 22, 0, false, test_options());
    MoeCase c2 = make(2, 8, 2);
    dispatch(buf, c2, false, false);
  }), {"low_latency_mode = false"});
  // More tokens than max_tokens_per_rank on one rank, and an expert twice in one row on another.
  expect_all_ok(run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 0, ll_bytes(c), true, test_options());
    const int me = g->rank();
    rt::Tensor x = c.x_bf16(me);
    rt::Tensor idx = c.topk_tensor(me);
    if (me == 2) idx.data_as<int64_t>()[1] = idx.data_as<int64_t>()[0] = 3;
    try {
      buf.low_latency_dispatch(x, idx, me == 1 ? 5 : c.max_tokens, c.experts, false, false);
      EP_CHECK(false, "no error");
    } catch (const rt::Error& e) {
      const std::string m = e.what();
      EP_CHECK(m.find("selects expert 3 twice") != std::string::npos || m.find("disagree") != std::string::npos, m);
    }
    // The Buffer still works.
    LlRun run = dispatch(buf, c, false, false);
    check_dispatch(run, c, false, me);
  }));
}


// The handle is a plain struct a caller can copy and edit. A combine given an edited one on one rank
// fails on every rank with an error that names the handle -- not an internal error, a read past x
// or its routing, or a hang (found by fuzzing the API: edited counts were an internal error).
TEST(DeepEPLowLatency, EditedHandleIsAUserError) {
  MoeCase c = make(4, 16, 4);
  using Edit = void (*)(deepep::LowLatencyHandle&);
  const std::vector<std::pair<const char*, Edit>> edits = {
      // What rank 1 sent to rank 2's first expert (rank 2 edits it; 16 experts, 4 a rank).
      {"counts", [](deepep::LowLatencyHandle& h) { h.counts[size_t(h.num_experts) + 8] += 1; }},
      // The same with the layout edited to match: only the other ranks' counts can tell.
      {"counts", [](deepep::LowLatencyHandle& h) {
         h.counts[size_t(h.num_experts) + 8] += 1;
         for (int s = 2; s < 4; ++s) h.recv_layout_range.data_as<int64_t>()[s] += int64_t(1) << 32;
         h.recv_layout_range.data_as<int64_t>()[1] += 1;
       }},
      // Rank 2's own row, which its routing tallies.
      {"counts", [](deepep::LowLatencyHandle& h) { h.counts[size_t(2 * h.num_experts) + 5] += 1; }},
      {"counts", [](deepep::LowLatencyHandle& h) { h.counts[size_t(h.num_experts) + 1] += 1; }},
      {"counts", [](deepep::LowLatencyHandle& h) { h.counts[0] = -3; }},
      {"counts", [](deepep::LowLatencyHandle& h) { h.counts.pop_back(); }},
      {"counts", [](deepep::LowLatencyHandle& h) { h.counts[1] = 1 << 30; }},
      {"recv_layout_range", [](deepep::LowLatencyHandle& h) { h.recv_layout_range.data_as<int64_t>()[1] += int64_t(1) << 40; }},
      {"recv_layout_range", [](deepep::LowLatencyHandle& h) { h.recv_layout_range = rt::Tensor(); }},
      {"num_tokens", [](deepep::LowLatencyHandle& h) { h.num_tokens += 1000; }},
      {"max_tokens_per_rank", [](deepep::LowLatencyHandle& h) { h.max_tokens_per_rank = 1; }},
      {"topk_idx", [](deepep::LowLatencyHandle& h) { h.topk_idx = rt::Tensor::empty({1, 1}, rt::DType::I64); }},
  };
  for (const auto& [field, edit] : edits) {
    const auto results = run_ranks(4, [&](const std::shared_ptr<deepep::Group>& g) {
      deepep::Buffer buf(g, 0, ll_bytes(c), true, test_options());
      LlRun run = dispatch(buf, c, false, false);
      deepep::LowLatencyHandle h = *run.d.handle;
      // A copy of the layout, so an edit stays in this rank's handle.
      const rt::Tensor layout = rt::Tensor::empty(h.recv_layout_range.shape(), h.recv_layout_range.dtype());
      std::memcpy(layout.data(), h.recv_layout_range.data(), size_t(layout.nbytes()));
      h.recv_layout_range = layout;
      if (g->rank() == 2) edit(h);
      run.d.handle = std::make_shared<const deepep::LowLatencyHandle>(h);
      combine_and_check(buf, run, c, false, false, g->rank());
    });
    SCOPED_TRACE(field);
    expect_all_failed_with(results, {"handle", field});
  }
}

}  // namespace
