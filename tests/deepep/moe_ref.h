// Inputs and references for the dispatch/combine tests. Every rank's inputs are a deterministic
// function of (seed, rank), so each rank computes the reference of its own outputs from all ranks'
// inputs. Token rows encode their source: row (rank, t) is drawn from a generator keyed by both.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "harness.h"
#include "tl/device/numeric.h"

namespace deepep_test {

enum class Routing {
  Uniform,  // distinct random experts, ~10% of slots empty (-1)
  Uneven,   // most picks on rank 0's experts
  Sparse,   // the last idle_ranks ranks' experts and expert 1 are never picked; some tokens pick nothing
};

struct MoeCase {
  uint64_t seed = 1;
  uint64_t data_seed = 0;  // the rows' values (0: seed); routing and token counts follow seed
  int ranks = 2;
  int hidden = 256;
  int topk = 4;
  int experts = 16;
  Routing routing = Routing::Uniform;
  int max_tokens = 0;  // 0: tokens(rank) from the default rule
  int min_tokens = 20;
  bool zero_tokens_rank = false;  // the last rank sends no tokens
  int idle_ranks = 1;             // Sparse: how many of the last ranks receive nothing

  int tokens(int rank) const {
    if (zero_tokens_rank && rank == ranks - 1) return 0;
    const int cap = max_tokens > 0 ? max_tokens : 96;
    return int(min_tokens + mix(seed, 11, uint64_t(rank)) % uint64_t(cap - min_tokens + 1));  // [min_tokens, cap]
  }
  float value(int rank, int64_t t, int64_t h) const {
    return float(2 * unit(mix(data_seed ? data_seed : seed, 1 + uint64_t(rank), uint64_t(t), uint64_t(h))) - 1);
  }
  uint16_t bf16_bits(int rank, int64_t t, int64_t h) const { return tl::bfloat16_t::from_float(value(rank, t, h)).bits; }
  uint8_t fp8_bits(int rank, int64_t t, int64_t h) const {
    return tl::float8_e4m3_t::from_float(value(rank, t, h) * 300.0f).bits;
  }
  float scale(int rank, int64_t t, int64_t b) const {
    return float(0.01 + unit(mix(data_seed ? data_seed : seed, 99, uint64_t(rank), uint64_t(t * 1000 + b))));
  }
  float weight(int rank, int64_t t, int64_t k) const {
    return float(0.05 + unit(mix(seed, 7, uint64_t(rank), uint64_t(t * 64 + k))));
  }
  // [tokens(rank) * topk], distinct experts per token, -1 for empty slots.
  std::vector<int64_t> topk_idx(int rank) const {
    const int T = tokens(rank), per_rank = experts / ranks;
    std::vector<int64_t> idx(size_t(T) * size_t(topk), -1);
    for (int t = 0; t < T; ++t) {
      if (routing == Routing::Sparse && mix(seed, 3, uint64_t(rank), uint64_t(t)) % 7 == 0) continue;  // picks nothing
      for (int k = 0; k < topk; ++k) {
        const uint64_t h = mix(seed, 5, uint64_t(rank), uint64_t(t * 64 + k));
        if (routing == Routing::Uniform && h % 10 == 0) continue;
        for (int attempt = 0; attempt < 1000; ++attempt) {
          const uint64_t g = mix(h, uint64_t(attempt));
          int64_t e;
          if (routing == Routing::Uneven && g % 4 != 0)
            e = int64_t((g >> 8) % uint64_t(per_rank));  // rank 0's experts
          else
            e = int64_t((g >> 8) % uint64_t(experts));
          if (routing == Routing::Sparse && (e / per_rank >= ranks - idle_ranks || e == 1)) continue;
          bool dup = false;
          for (int j = 0; j < k; ++j) dup |= idx[size_t(t * topk + j)] == e;
          if (dup) continue;
          idx[size_t(t * topk + k)] = e;
          break;
        }
      }
    }
    return idx;
  }
  int owner(int64_t e) const { return int(e / (experts / ranks)); }

  rt::Tensor x_bf16(int rank) const {
    const int T = tokens(rank);
    rt::Tensor x = rt::Tensor::empty({T, hidden}, rt::DType::BF16);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < hidden; ++h) x.data_as<tl::bfloat16_t>()[t * hidden + h].bits = bf16_bits(rank, t, h);
    return x;
  }
  rt::Tensor x_fp8(int rank) const {
    const int T = tokens(rank);
    rt::Tensor x = rt::Tensor::empty({T, hidden}, rt::DType::F8E4M3);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < hidden; ++h) static_cast<uint8_t*>(x.data())[t * hidden + h] = fp8_bits(rank, t, h);
    return x;
  }
  rt::Tensor x_scales(int rank) const {
    const int T = tokens(rank), S = hidden / 128;
    rt::Tensor s = rt::Tensor::empty({T, S}, rt::DType::F32);
    for (int t = 0; t < T; ++t)
      for (int b = 0; b < S; ++b) s.data_as<float>()[t * S + b] = scale(rank, t, b);
    return s;
  }
  rt::Tensor topk_tensor(int rank) const {
    const auto v = topk_idx(rank);
    rt::Tensor t = rt::Tensor::empty({tokens(rank), topk}, rt::DType::I64);
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
    return t;
  }
  rt::Tensor weights_tensor(int rank) const {
    const int T = tokens(rank);
    rt::Tensor w = rt::Tensor::empty({T, topk}, rt::DType::F32);
    for (int t = 0; t < T; ++t)
      for (int k = 0; k < topk; ++k) w.data_as<float>()[t * topk + k] = weight(rank, t, k);
    return w;
  }
  // This rank's normal-mode dispatch arguments (CPU tensors): BF16 rows, or FP8 with scales.
  deepep::DispatchArgs dispatch_args(int rank, bool fp8, int alignment) const {
    deepep::DispatchArgs a;
    a.x = fp8 ? x_fp8(rank) : x_bf16(rank);
    if (fp8) a.x_scales = x_scales(rank);
    a.topk_idx = topk_tensor(rank);
    a.topk_weights = weights_tensor(rank);
    a.num_experts = experts;
    a.expert_alignment = alignment;
    return a;
  }
};

// A case of `ranks` ranks sending to the top-`topk` of `experts` experts. `salt` keeps the cases of
// different test files apart under one DEEPEP_TEST_SEED.
inline MoeCase moe_case(uint64_t salt, int ranks, int experts, int topk, Routing routing = Routing::Uniform,
                        int hidden = 256) {
  MoeCase c;
  c.seed = test_seed() ^ (salt + uint64_t(ranks * 1000 + experts * 10 + int(routing)));
  c.ranks = ranks;
  c.experts = experts;
  c.topk = topk;
  c.routing = routing;
  c.hidden = hidden;
  return c;
}

// The tokens rank `me` receives in normal dispatch: (source rank, source token), in order.
inline std::vector<std::pair<int, int>> expected_received(const MoeCase& c, int me) {
  std::vector<std::pair<int, int>> out;
  for (int s = 0; s < c.ranks; ++s) {
    const auto idx = c.topk_idx(s);
    for (int t = 0; t < c.tokens(s); ++t) {
      bool hit = false;
      for (int k = 0; k < c.topk; ++k) hit |= idx[size_t(t * c.topk + k)] >= 0 && c.owner(idx[size_t(t * c.topk + k)]) == me;
      if (hit) out.emplace_back(s, t);
    }
  }
  return out;
}

// The test's "expert": a row scaled by a factor of the global expert.
inline float expert_factor(int64_t e) { return 1.0f + float(e % 5) * 0.25f; }

// What rank r computes for a received token (normal mode): the weighted sum of its local experts'
// outputs, in f32, rounded to bf16. Applied identically by the test and the reference.
inline float expert_output(const MoeCase& c, int r, const std::vector<int64_t>& idx_row, const float* w_row, float x) {
  float acc = 0;
  for (int k = 0; k < c.topk; ++k) {
    const int64_t e = idx_row[size_t(k)];
    if (e >= 0 && c.owner(e) == r) acc += w_row[k] * (x * expert_factor(e));
  }
  return tl::bfloat16_t::from_float(acc).to_float();
}

}  // namespace deepep_test
