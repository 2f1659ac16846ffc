// Randomized checks of deepep's public API on the CPU, against float64 references computed from
// every rank's inputs: normal dispatch/combine (dtypes, hidden sizes, top-k with empty slots, zero and
// uneven token counts, layouts, cached dispatch, expert alignment, shm and tcp), low-latency
// dispatch/combine (BF16 and FP8, hooks), the collectives (every op, algorithm and reducible dtype,
// empty and odd sizes), and bad inputs, each of which must be a user error naming the argument on
// every rank with the Buffer still usable after it. Deterministic: a fixed seed (DEEPEP_FUZZ_SEED
// and DEEPEP_FUZZ_CASES widen a local run; a failure prints its case).
#include <cmath>
#include <map>
#include <set>
#include "harness.h"
#include "tl/device/numeric.h"

namespace {
using namespace deepep_test;
using rt::DType;

int cases() { const char* e = getenv("DEEPEP_FUZZ_CASES"); return e ? atoi(e) : 40; }
uint64_t fseed() { const char* e = getenv("DEEPEP_FUZZ_SEED"); return e ? strtoull(e, nullptr, 10) : 1; }

struct Rng { uint64_t s; uint64_t next() { s += 0x9E3779B97F4A7C15ull; return mix(s); } int in(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); } bool p(double q) { return unit(next()) < q; } };

double to_d(DType d, const void* p, int64_t i) {
  switch (d) {
    case DType::F32: return ((const float*)p)[i];
    case DType::F64: return ((const double*)p)[i];
    case DType::BF16: return tl::bfloat16_t::from_bits(((const uint16_t*)p)[i]).to_float();
    case DType::F16: { tl::half_t h; h.bits = ((const uint16_t*)p)[i]; return h.to_float(); }
    case DType::I32: return ((const int32_t*)p)[i];
    case DType::I64: return double(((const int64_t*)p)[i]);
    case DType::F8E4M3: { tl::float8_e4m3_t f; f.bits = ((const uint8_t*)p)[i]; return f.to_float(); }
    default: throw std::runtime_error("dtype");
  }
}
void from_d(DType d, void* p, int64_t i, double v) {
  switch (d) {
    case DType::F32: ((float*)p)[i] = float(v); break;
    case DType::F64: ((double*)p)[i] = v; break;
    case DType::BF16: ((uint16_t*)p)[i] = tl::bfloat16_t::from_float(float(v)).bits; break;
    case DType::F16: ((uint16_t*)p)[i] = tl::half_t::from_float(float(v)).bits; break;
    case DType::I32: ((int32_t*)p)[i] = int32_t(v); break;
    case DType::I64: ((int64_t*)p)[i] = int64_t(v); break;
    case DType::F8E4M3: ((uint8_t*)p)[i] = tl::float8_e4m3_t::from_float(float(v)).bits; break;
    default: throw std::runtime_error("dtype");
  }
}
double eps(DType d) { return d == DType::BF16 ? 1.0 / 128 : d == DType::F16 ? 1.0 / 1024 : d == DType::F8E4M3 ? 1.0 / 8 : 1e-6; }

// ---------- normal-mode case
struct NCase {
  uint64_t seed; int R, E, K, H; DType dt; bool weights, layout, cached, tcp; int align; int maxT; double empty; int zero_rank;
  int T(int r) const { return r == zero_rank ? 0 : int(mix(seed, 1, r) % uint64_t(maxT + 1)); }
  std::vector<int64_t> idx(int r) const {
    std::vector<int64_t> v(size_t(T(r)) * K, -1);
    for (int t = 0; t < T(r); ++t) {
      std::vector<int64_t> used;
      for (int k = 0; k < K; ++k) {
        uint64_t h = mix(seed, 2, r, uint64_t(t) * 64 + k);
        if (unit(h) < empty) continue;
        int64_t e = int64_t((h >> 7) % uint64_t(E));
        bool dup = false; for (auto u : used) dup |= u == e;
        if (dup) continue;
        used.push_back(e); v[size_t(t) * K + k] = e;
      }
    }
    return v;
  }
  double xv(int r, int t, int h) const { return 2 * unit(mix(seed, 3, r, uint64_t(t) * 100003 + h)) - 1; }
  float wv(int r, int t, int k) const { return float(0.1 + unit(mix(seed, 4, r, uint64_t(t) * 64 + k))); }
  int owner(int64_t e) const { return int(e / (E / R)); }
};

NCase random_ncase(Rng& g) {
  NCase c{};
  c.seed = g.next(); c.R = g.in(1, 4); c.E = c.R * g.in(1, 5); c.K = g.in(1, std::min(c.E + 1, 9));
  const DType dts[] = {DType::BF16, DType::F16, DType::F32, DType::F8E4M3};
  c.dt = dts[g.in(0, 3)];
  const int hs[] = {1, 2, 3, 7, 64, 128, 256, 384, 1000};
  c.H = c.dt == DType::F8E4M3 ? 128 * g.in(1, 3) : hs[g.in(0, 8)];
  c.weights = g.p(0.7); c.layout = g.p(0.5); c.cached = g.p(0.3); c.tcp = g.p(0.3); c.align = g.p(0.5) ? 1 : g.in(1, 9);
  c.maxT = g.p(0.2) ? 0 : g.in(1, 60); c.empty = g.p(0.3) ? 0.0 : unit(g.next()) * 0.6;
  c.zero_rank = g.p(0.3) ? g.in(0, c.R - 1) : -1;
  return c;
}

std::string describe(const NCase& c) {
  return rt::str("R=", c.R, " E=", c.E, " K=", c.K, " H=", c.H, " dt=", rt::name(c.dt), " w=", c.weights, " layout=", c.layout,
                 " cached=", c.cached, " tcp=", c.tcp, " align=", c.align, " maxT=", c.maxT, " zero=", c.zero_rank, " seed=", c.seed);
}

deepep::CommOptions fopts(bool tcp) {
  deepep::CommOptions o; o.timeout = std::chrono::milliseconds(8000); if (tcp) o.transport = "tcp"; return o;
}

rt::Tensor make_x(const NCase& c, int r) {
  rt::Tensor x = rt::Tensor::empty({c.T(r), c.H}, c.dt);
  for (int t = 0; t < c.T(r); ++t) for (int h = 0; h < c.H; ++h) from_d(c.dt, x.data(), int64_t(t) * c.H + h, c.xv(r, t, h) * (c.dt == DType::F8E4M3 ? 100 : 1));
  return x;
}
rt::Tensor make_scales(const NCase& c, int r) {
  rt::Tensor s = rt::Tensor::empty({c.T(r), c.H / 128}, DType::F32);
  for (int64_t i = 0; i < s.numel(); ++i) s.data_as<float>()[i] = float(0.01 + unit(mix(c.seed, 9, r, i)));
  return s;
}
rt::Tensor make_idx(const NCase& c, int r, DType d = DType::I64) {
  auto v = c.idx(r);
  rt::Tensor t = rt::Tensor::empty({c.T(r), c.K}, d);
  for (size_t i = 0; i < v.size(); ++i) { if (d == DType::I64) t.data_as<int64_t>()[i] = v[i]; else t.data_as<int32_t>()[i] = int32_t(v[i]); }
  return t;
}
rt::Tensor make_w(const NCase& c, int r) {
  rt::Tensor w = rt::Tensor::empty({c.T(r), c.K}, DType::F32);
  for (int t = 0; t < c.T(r); ++t) for (int k = 0; k < c.K; ++k) w.data_as<float>()[t * c.K + k] = c.wv(r, t, k);
  return w;
}
deepep::DispatchArgs nargs(const NCase& c, int r) {
  deepep::DispatchArgs a;
  a.x = make_x(c, r);
  if (c.dt == DType::F8E4M3) a.x_scales = make_scales(c, r);
  a.topk_idx = make_idx(c, r, mix(c.seed, 77, r) % 2 ? DType::I64 : DType::I32);
  if (c.weights) a.topk_weights = make_w(c, r);
  a.num_experts = c.E; a.expert_alignment = c.align;
  return a;
}

// Checks one dispatch+combine against the reference. Throws on mismatch.
void check_normal(deepep::Buffer& buf, const NCase& c) {
  const int me = buf.rank(), R = c.R, K = c.K, H = c.H, Le = c.E / R;
  deepep::DispatchArgs a = nargs(c, me);
  deepep::DispatchLayout lay;
  if (c.layout) { lay = buf.get_dispatch_layout(a.topk_idx, c.E); a.layout = &lay; }
  auto d = buf.dispatch(a);
  // expected received: (s,t) in order
  std::vector<std::pair<int, int>> exp;
  std::vector<std::vector<int64_t>> idx(R);
  for (int s = 0; s < R; ++s) idx[s] = c.idx(s);
  std::vector<int> per_exp(Le, 0);
  for (int s = 0; s < R; ++s) for (int t = 0; t < c.T(s); ++t) {
    bool hit = false;
    for (int k = 0; k < K; ++k) { int64_t e = idx[s][size_t(t) * K + k]; if (e >= 0 && c.owner(e) == me) { hit = true; per_exp[e - me * Le]++; } }
    if (hit) exp.emplace_back(s, t);
  }
  const int64_t N = int64_t(exp.size());
  EP_CHECK(d.recv_x.dim() == 2 && d.recv_x.size(0) == N && d.recv_x.size(1) == H, "recv_x ", d.recv_x.shape_string(), " expected ", N);
  EP_CHECK(d.recv_x.dtype() == c.dt);
  EP_CHECK(d.handle && d.handle->num_recv_tokens == N);
  // Exact bit check of rows
  std::vector<rt::Tensor> xs(R);
  for (int s = 0; s < R; ++s) xs[s] = make_x(c, s);
  const int64_t eb = (rt::Tensor::empty({1}, c.dt).element_size_bits() / 8);
  for (int64_t i = 0; i < N; ++i) {
    auto [s, t] = exp[size_t(i)];
    EP_CHECK(std::memcmp((char*)d.recv_x.data() + i * H * eb, (char*)xs[s].data() + int64_t(t) * H * eb, size_t(H * eb)) == 0, "row ", i, " from (", s, ",", t, ") differs");
    EP_CHECK(d.handle->recv_src_idx.data_as<int32_t>()[i] == t, "recv_src_idx ", i);
    if (c.dt == DType::F8E4M3) {
      rt::Tensor sc = make_scales(c, s);
      for (int b = 0; b < H / 128; ++b) EP_CHECK(d.recv_x_scales.data_as<float>()[i * (H / 128) + b] == sc.data_as<float>()[t * (H / 128) + b], "scale");
    }
    for (int k = 0; k < K; ++k) {
      int64_t e = idx[s][size_t(t) * K + k];
      int64_t want = e >= 0 && c.owner(e) == me ? e - me * Le : -1;
      EP_CHECK(d.recv_topk_idx.data_as<int64_t>()[i * K + k] == want, "recv_topk_idx[", i, ",", k, "]=", d.recv_topk_idx.data_as<int64_t>()[i * K + k], " want ", want);
      if (c.weights) {
        float ww = want >= 0 ? c.wv(s, t, k) : 0.f;
        EP_CHECK(d.recv_topk_weights.data_as<float>()[i * K + k] == ww, "recv weight");
      }
    }
  }
  EP_CHECK(int(d.num_recv_tokens_per_expert.size()) == Le);
  for (int l = 0; l < Le; ++l) {
    int want = (per_exp[l] + c.align - 1) / c.align * c.align;
    EP_CHECK(d.num_recv_tokens_per_expert[l] == want, "per expert ", l, " got ", d.num_recv_tokens_per_expert[l], " want ", want);
  }
  if (c.cached) {
    deepep::DispatchArgs ca; ca.x = make_x(c, me); if (c.dt == DType::F8E4M3) ca.x_scales = make_scales(c, me); ca.handle = d.handle;
    auto d2 = buf.dispatch(ca);
    EP_CHECK(d2.recv_x.size(0) == N && std::memcmp(d2.recv_x.data(), d.recv_x.data(), size_t(N * H * eb)) == 0, "cached dispatch differs");
  }
  if (c.dt == DType::F8E4M3) return;  // combine takes bf16/f16/f32
  // combine: rank r scales rows by (r+1)
  rt::Tensor y = rt::Tensor::empty({N, H}, c.dt);
  for (int64_t i = 0; i < N * H; ++i) from_d(c.dt, y.data(), i, to_d(c.dt, d.recv_x.data(), i) * (me + 1));
  auto cr = buf.combine(y, *d.handle, c.weights ? d.recv_topk_weights : rt::Tensor());
  const int T = c.T(me);
  EP_CHECK(cr.combined_x.dim() == 2 && cr.combined_x.size(0) == T && cr.combined_x.size(1) == H && cr.combined_x.dtype() == c.dt, "combined shape ", cr.combined_x.shape_string());
  for (int t = 0; t < T; ++t) {
    std::set<int> dest;
    for (int k = 0; k < K; ++k) { int64_t e = idx[me][size_t(t) * K + k]; if (e >= 0) dest.insert(c.owner(e)); }
    for (int h = 0; h < H; ++h) {
      double ref = 0, mag = 0;
      const double xv = to_d(c.dt, xs[me].data(), int64_t(t) * H + h);
      for (int r : dest) {
        rt::Tensor tmp = rt::Tensor::empty({1}, c.dt); from_d(c.dt, tmp.data(), 0, xv * (r + 1)); double v = to_d(c.dt, tmp.data(), 0);
        ref += v; mag += std::fabs(v); }
      const double got = to_d(c.dt, cr.combined_x.data(), int64_t(t) * H + h);
      EP_CHECK(std::fabs(got - ref) <= 2 * eps(c.dt) * mag + 1e-30, "combined[", t, ",", h, "]=", got, " ref ", ref, " dest ", dest.size());
    }
    if (c.weights) for (int k = 0; k < K; ++k) {
      int64_t e = idx[me][size_t(t) * K + k];
      float want = e >= 0 ? c.wv(me, t, k) : 0.f;
      EP_CHECK(std::fabs(cr.combined_topk_weights.data_as<float>()[t * K + k] - want) <= 1e-6f, "combined weight [", t, ",", k, "]=", cr.combined_topk_weights.data_as<float>()[t * K + k], " want ", want);
    }
  }
}

void report(const std::vector<RankOutcome>& out, const std::string& what, int& fails) {
  bool bad = false; for (auto& o : out) bad |= !o.ok;
  if (!bad) return;
  ++fails; std::string m = "CASE " + what;
  for (auto& o : out) m += rt::str("\n  rank ", o.rank, o.ok ? " ok" : "", o.timed_out ? " TIMEOUT" : "", o.killed ? " KILLED" : "", ": ", o.message.substr(0, 600));
  ADD_FAILURE() << m;
}

TEST(DeepEPFuzz, NormalValid) {
  Rng g{fseed() * 31 + 1}; int fails = 0;
  for (int i = 0; i < cases(); ++i) {
    NCase c = random_ncase(g);
    RunOptions ro; ro.timeout_s = 40;
    report(run_ranks(c.R, [&](const std::shared_ptr<deepep::Group>& gr) {
      deepep::Buffer buf(gr, 1 << 20, 0, false, fopts(c.tcp));
      check_normal(buf, c);
      check_normal(buf, c);  // twice: reuse
    }, ro), describe(c), fails);
  }
}

// ---------- low latency
TEST(DeepEPFuzz, LowLatencyValid) {
  Rng g{fseed() * 37 + 2}; int fails = 0;
  for (int i = 0; i < cases(); ++i) {
    NCase c = random_ncase(g);
    c.dt = DType::BF16; const bool fp8 = g.p(0.5);
    if (fp8) c.H = 128 * g.in(1, 2); else c.H = std::max(1, c.H);
    const int maxT = std::max(1, c.maxT + g.in(0, 3));
    const bool hook = g.p(0.4);
    RunOptions ro; ro.timeout_s = 40;
    report(run_ranks(c.R, [&](const std::shared_ptr<deepep::Group>& gr) {
      const int64_t need = deepep::Buffer::low_latency_size_hint(maxT, c.H, c.R, c.E);
      deepep::Buffer buf(gr, need, 0, true, fopts(c.tcp));
      const int me = gr->rank(), R = c.R, K = c.K, H = c.H, Le = c.E / R; const int64_t M = int64_t(R) * maxT;
      for (int rep = 0; rep < 2; ++rep) {
        rt::Tensor x = make_x(c, me); rt::Tensor idx = make_idx(c, me);
        auto d = buf.low_latency_dispatch(x, idx, maxT, c.E, fp8, hook);
        if (hook) d.hook();
        EP_CHECK(d.recv_x.dim() == 3 && d.recv_x.size(0) == Le && d.recv_x.size(1) == M && d.recv_x.size(2) == H, d.recv_x.shape_string());
        std::vector<std::vector<int64_t>> ix(R); for (int s = 0; s < R; ++s) ix[s] = c.idx(s);
        for (int l = 0; l < Le; ++l) {
          const int64_t e = me * Le + l; int64_t row = 0;
          for (int s = 0; s < R; ++s) { rt::Tensor xs = make_x(c, s);
            for (int t = 0; t < c.T(s); ++t) { bool hit = false; for (int k = 0; k < K; ++k) hit |= ix[s][size_t(t) * K + k] == e;
              if (!hit) continue;
              EP_CHECK(d.handle->recv_src_info.data_as<int32_t>()[l * M + row] == t, "src_info");
              for (int h = 0; h < H; ++h) {
                double want = to_d(DType::BF16, xs.data(), int64_t(t) * H + h), got;
                const int64_t at = (int64_t(l) * M + row) * H + h;
                if (fp8) got = to_d(DType::F8E4M3, d.recv_x.data(), at) * d.recv_x_scales.data_as<float>()[(int64_t(l) * M + row) * (H / 128) + h / 128];
                else got = to_d(DType::BF16, d.recv_x.data(), at);
                EP_CHECK(std::fabs(got - want) <= (fp8 ? 0.07 : 0.0) * 1.0 + 1e-9, "ll recv e=", e, " row ", row, " h ", h, " got ", got, " want ", want);
              }
              ++row; } }
          EP_CHECK(d.recv_count.data_as<int32_t>()[l] == row, "recv_count[", l, "]=", d.recv_count.data_as<int32_t>()[l], " want ", row);
        }
        // combine: y row for expert e = x * (1 + e%5 * 0.25)
        rt::Tensor y = rt::Tensor::empty({Le, M, H}, DType::BF16);
        for (int l = 0; l < Le; ++l) for (int64_t m = 0; m < M; ++m) for (int h = 0; h < H; ++h) {
          const int64_t at = (int64_t(l) * M + m) * H + h;
          double v = fp8 ? to_d(DType::F8E4M3, d.recv_x.data(), at) * d.recv_x_scales.data_as<float>()[(int64_t(l) * M + m) * (H / 128) + h / 128] : to_d(DType::BF16, d.recv_x.data(), at);
          from_d(DType::BF16, y.data(), at, v * (1 + ((me * Le + l) % 5) * 0.25));
        }
        rt::Tensor w = make_w(c, me);
        auto cb = buf.low_latency_combine(y, idx, w, *d.handle, hook);
        if (hook) cb.hook();
        const int T = c.T(me);
        EP_CHECK(cb.combined_x.size(0) == T && cb.combined_x.size(1) == H);
        for (int t = 0; t < T; ++t) for (int h = 0; h < H; ++h) {
          double ref = 0, mag = 0;
          for (int k = 0; k < K; ++k) { int64_t e = ix[me][size_t(t) * K + k]; if (e < 0) continue;
            double xv = to_d(DType::BF16, x.data(), int64_t(t) * H + h);
            double v = xv * (1 + (e % 5) * 0.25) * c.wv(me, t, k); ref += v; mag += std::fabs(v); }
          double got = to_d(DType::BF16, cb.combined_x.data(), int64_t(t) * H + h);
          EP_CHECK(std::fabs(got - ref) <= (fp8 ? 0.1 * (mag / std::max(1e-30, std::fabs(to_d(DType::BF16, x.data(), int64_t(t) * H + h)))) : 0.02 * mag) + 1e-6, "ll combined[", t, ",", h, "]=", got, " ref ", ref);
        }
      }
    }, ro), describe(c) + rt::str(" fp8=", fp8, " maxT=", maxT, " hook=", hook), fails);
  }
}

// ---------- collectives
TEST(DeepEPFuzz, Collectives) {
  Rng g{fseed() * 41 + 3}; int fails = 0;
  for (int i = 0; i < cases(); ++i) {
    const int R = g.in(1, 5); const bool tcp = g.p(0.3);
    const DType dts[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::F64};
    const DType dt = dts[g.in(0, 5)];
    const int n = g.p(0.1) ? 0 : g.p(0.5) ? g.in(1, 9) : g.in(10, 70000);
    const int op = g.in(0, 2), alg = g.in(0, 4); const int kind = g.in(0, 5); const uint64_t seed = g.next();
    const int root = g.in(0, R - 1);
    auto val = [&](int r, int64_t j) { double u = unit(mix(seed, r, j)); return dt == DType::I32 || dt == DType::I64 ? std::floor(u * 200 - 100) : 2 * u - 1; };
    RunOptions ro; ro.timeout_s = 40;
    std::string what = rt::str("coll kind=", kind, " R=", R, " dt=", rt::name(dt), " n=", n, " op=", op, " alg=", alg, " tcp=", tcp);
    report(run_ranks(R, [&](const std::shared_ptr<deepep::Group>& gr) {
      deepep::Comm comm(gr, fopts(tcp)); const int me = gr->rank();
      auto fill = [&](int r, int64_t len) { rt::Tensor t = rt::Tensor::empty({len}, dt); for (int64_t j = 0; j < len; ++j) from_d(dt, t.data(), j, val(r, j)); return t; };
      auto rd = [&](const rt::Tensor& t, int r, int64_t j) { rt::Tensor tmp = rt::Tensor::empty({1}, dt); from_d(dt, tmp.data(), 0, val(r, j)); return to_d(dt, tmp.data(), 0); };
      auto red = [&](int64_t j, double& mag) { double acc = op == 1 ? -1e300 : op == 2 ? 1e300 : 0; mag = 0;
        for (int r = 0; r < R; ++r) { double v = rd({}, r, j); mag += std::fabs(v); acc = op == 0 ? acc + v : op == 1 ? std::max(acc, v) : std::min(acc, v); } return acc; };
      const double tol = dt == DType::BF16 ? 1.0 / 64 : dt == DType::F16 ? 1.0 / 256 : 1e-6;
      if (kind == 0) {
        rt::Tensor t = fill(me, n);
        deepep::all_reduce(comm, t, deepep::ReduceOp(op), deepep::Algorithm(alg));
        for (int64_t j = 0; j < n; ++j) { double mag; double ref = red(j, mag); double got = to_d(dt, t.data(), j);
          EP_CHECK(std::fabs(got - ref) <= tol * mag + 1e-12, "all_reduce[", j, "]=", got, " ref ", ref); }
      } else if (kind == 1) {
        rt::Tensor in = fill(me, int64_t(n) * R), out = rt::Tensor::empty({n}, dt);
        deepep::reduce_scatter(comm, out, in, deepep::ReduceOp(op), deepep::Algorithm(alg % 3));
        for (int64_t j = 0; j < n; ++j) { double mag; double ref = red(int64_t(me) * n + j, mag); double got = to_d(dt, out.data(), j);
          EP_CHECK(std::fabs(got - ref) <= tol * mag + 1e-12, "reduce_scatter[", j, "]=", got, " ref ", ref); }
      } else if (kind == 2) {
        rt::Tensor in = fill(me, n), out = rt::Tensor::empty({int64_t(n) * R}, dt);
        deepep::all_gather(comm, out, in);
        for (int r = 0; r < R; ++r) for (int64_t j = 0; j < n; ++j) EP_CHECK(to_d(dt, out.data(), int64_t(r) * n + j) == rd({}, r, j), "all_gather");
      } else if (kind == 3) {
        rt::Tensor in = fill(me, int64_t(n) * R), out = rt::Tensor::empty({int64_t(n) * R}, dt);
        deepep::all_to_all(comm, out, in);
        for (int r = 0; r < R; ++r) for (int64_t j = 0; j < n; ++j) EP_CHECK(to_d(dt, out.data(), int64_t(r) * n + j) == rd({}, r, int64_t(me) * n + j), "all_to_all");
      } else if (kind == 4) {
        auto cnt = [&](int s, int d) { return int64_t(mix(seed, 50, s, d) % uint64_t(n + 1)); };
        std::vector<int64_t> sc(R), rc(R); int64_t ins = 0, outs = 0;
        for (int r = 0; r < R; ++r) { sc[r] = cnt(me, r); rc[r] = cnt(r, me); ins += sc[r]; outs += rc[r]; }
        rt::Tensor in = fill(me, ins), out = rt::Tensor::empty({outs}, dt);
        deepep::all_to_allv(comm, out, rc, in, sc);
        int64_t at = 0;
        for (int r = 0; r < R; ++r) { int64_t off = 0; for (int d = 0; d < me; ++d) off += cnt(r, d);
          for (int64_t j = 0; j < rc[r]; ++j) EP_CHECK(to_d(dt, out.data(), at + j) == rd({}, r, off + j), "all_to_allv"); at += rc[r]; }
      } else {
        rt::Tensor t = fill(me, n);
        deepep::broadcast(comm, t, root);
        for (int64_t j = 0; j < n; ++j) EP_CHECK(to_d(dt, t.data(), j) == rd({}, root, j), "broadcast");
      }
      deepep::barrier(comm);
    }, ro), what, fails);
  }
}

// ---------- bad inputs: every rank must fail with an rt::Error naming the argument, then the Buffer still works.
struct Bad { std::string name; std::vector<std::string> pieces; std::function<void(deepep::Buffer&, const NCase&, int, int)> run; };

std::vector<Bad> bads() {
  std::vector<Bad> v;
  auto D = [](deepep::Buffer& b, deepep::DispatchArgs a) { b.dispatch(a); };
  v.push_back({"x wrong dtype i32", {"x"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.x = rt::Tensor::empty({c.T(me), c.H}, DType::I32); D(b, a); }});
  v.push_back({"x 3-d", {"x"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.x = rt::Tensor::empty({c.T(me), 1, c.H}, c.dt); D(b, a); }});
  v.push_back({"x rows mismatch topk", {"rank"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.x = rt::Tensor::empty({c.T(me) + 1, c.H}, c.dt); D(b, a); }});
  v.push_back({"x undefined", {"x"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.x = rt::Tensor(); D(b, a); }});
  v.push_back({"x non-contiguous", {"x", "contiguous"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me);
    if (me == who) { static std::vector<char> mem(1 << 20); a.x = rt::Tensor::wrap(mem.data(), {c.T(me), c.H}, c.dt, rt::Device::cpu(), {1, std::max<int64_t>(1, c.T(me))}); } D(b, a); }});
  v.push_back({"topk_idx f32", {"topk_idx"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.topk_idx = rt::Tensor::empty({c.T(me), c.K}, DType::F32); D(b, a); }});
  v.push_back({"topk_idx 1-d", {"topk_idx"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.topk_idx = rt::Tensor::empty({c.T(me)}, DType::I64); D(b, a); }});
  v.push_back({"topk_idx k=0", {"topk_idx"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); a.topk_idx = rt::Tensor::empty({c.T(me), 0}, DType::I64); a.topk_weights = c.weights ? rt::Tensor::empty({c.T(me), 0}, DType::F32) : rt::Tensor(); D(b, a); }});
  v.push_back({"topk_idx = E", {"topk_idx", "out of range"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me);
    if (me == who) { a.x = make_x(c, me); if (c.T(me) == 0) throw rt::Error(rt::ErrorKind::User, "skip"); } if (me == who) { if (a.topk_idx.dtype() == DType::I64) a.topk_idx.data_as<int64_t>()[0] = c.E; else a.topk_idx.data_as<int32_t>()[0] = c.E; } D(b, a); }});
  v.push_back({"topk_idx huge", {"topk_idx", "out of range"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me);
    if (me == who) { if (c.T(me) == 0) throw rt::Error(rt::ErrorKind::User, "skip"); if (a.topk_idx.dtype() == DType::I64) a.topk_idx.data_as<int64_t>()[a.topk_idx.numel() - 1] = int64_t(1) << 40; else a.topk_idx.data_as<int32_t>()[a.topk_idx.numel() - 1] = INT32_MIN; } D(b, a); }});
  v.push_back({"num_experts 0", {"num_experts"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); a.num_experts = 0; D(b, a); }});
  v.push_back({"num_experts negative", {"num_experts"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); a.num_experts = -c.E; D(b, a); }});
  v.push_back({"num_experts mismatch", {"rank"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.num_experts = c.E * 2; D(b, a); }});
  v.push_back({"weights wrong shape", {"topk_weights"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.topk_weights = rt::Tensor::empty({c.T(me), c.K + 1}, DType::F32); D(b, a); }});
  v.push_back({"weights bf16", {"topk_weights"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.topk_weights = rt::Tensor::empty({c.T(me), c.K}, DType::BF16); D(b, a); }});
  v.push_back({"weights on some ranks only", {"weights"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); a.topk_weights = me == who ? rt::Tensor() : make_w(c, me); D(b, a); }});
  v.push_back({"alignment 0", {"expert_alignment"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.expert_alignment = 0; D(b, a); }});
  v.push_back({"alignment negative", {"expert_alignment"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); a.expert_alignment = -4; D(b, a); }});
  v.push_back({"alignment mismatch", {"alignment"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.expert_alignment = 7; else a.expert_alignment = 3; D(b, a); }});
  v.push_back({"scales on bf16", {"x_scales"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); if (me == who) a.x_scales = rt::Tensor::empty({c.T(me), 1}, DType::F32); D(b, a); }});
  v.push_back({"fp8 bad scales shape", {"x_scales"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); a.x = rt::Tensor::empty({c.T(me), 128}, DType::F8E4M3); a.x_scales = rt::Tensor::empty({c.T(me), me == who ? 2 : 1}, DType::F32); D(b, a); }});
  v.push_back({"fp8 hidden 100", {"hidden"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); a.x = rt::Tensor::empty({c.T(me), 100}, DType::F8E4M3); a.x_scales = rt::Tensor::empty({c.T(me), 1}, DType::F32); D(b, a); }});
  v.push_back({"layout wrong experts", {"layout"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me);
    NCase c2 = c; c2.E = c.E * 2; deepep::DispatchLayout l = b.get_dispatch_layout(a.topk_idx, c2.E); if (me == who) a.layout = &l; else { static deepep::DispatchLayout l2; l2 = b.get_dispatch_layout(a.topk_idx, c.E); a.layout = &l2; } D(b, a); }});
  v.push_back({"layout inconsistent", {"layout"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me);
    static deepep::DispatchLayout l; l = b.get_dispatch_layout(a.topk_idx, c.E); if (me == who) l.num_tokens_per_rank.data_as<int32_t>()[0] += 5; a.layout = &l; D(b, a); }});
  v.push_back({"cached with topk", {"cached"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); auto d = b.dispatch(a); deepep::DispatchArgs ca = nargs(c, me); ca.handle = d.handle; if (me != who) { ca.topk_idx = {}; ca.topk_weights = {}; } D(b, ca); }});
  v.push_back({"cached wrong rows", {"x"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); auto d = b.dispatch(a); deepep::DispatchArgs ca; ca.x = me == who ? rt::Tensor::empty({c.T(me) + 2, c.H}, c.dt) : make_x(c, me); ca.handle = d.handle; D(b, ca); }});
  v.push_back({"cached other hidden", {"rank"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); auto d = b.dispatch(a); deepep::DispatchArgs ca; ca.x = rt::Tensor::empty({c.T(me), me == who ? c.H + 1 : c.H}, c.dt); ca.handle = d.handle; D(b, ca); }});
  v.push_back({"combine wrong dtype", {"x"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto d = b.dispatch(nargs(c, me)); rt::Tensor y = rt::Tensor::empty({d.recv_x.size(0), c.H}, me == who ? DType::I32 : DType::BF16); b.combine(y, *d.handle); }});
  v.push_back({"combine wrong hidden", {"x"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto d = b.dispatch(nargs(c, me)); rt::Tensor y = rt::Tensor::empty({d.recv_x.size(0), me == who ? c.H + 3 : c.H}, DType::BF16); b.combine(y, *d.handle); }});
  v.push_back({"combine weights wrong", {"weights"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto d = b.dispatch(nargs(c, me)); rt::Tensor y = rt::Tensor::empty({d.recv_x.size(0), c.H}, DType::BF16); rt::Tensor w = rt::Tensor::empty({d.recv_x.size(0), me == who ? c.K + 1 : c.K}, DType::F32); b.combine(y, *d.handle, w); }});
  v.push_back({"combine fake handle", {"handle"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto d = b.dispatch(nargs(c, me)); deepep::DispatchHandle h = *d.handle; if (me == who) h.num_recv_tokens += 3; rt::Tensor y = rt::Tensor::empty({h.num_recv_tokens, c.H}, DType::BF16); b.combine(y, h); }});
  v.push_back({"combine handle of other group size", {"handle"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto d = b.dispatch(nargs(c, me)); deepep::DispatchHandle h = *d.handle; if (me == who) h.num_ranks += 1; rt::Tensor y = rt::Tensor::empty({h.num_recv_tokens, c.H}, DType::BF16); b.combine(y, h); }});
  v.push_back({"combine default handle", {"handle"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { deepep::DispatchHandle h; rt::Tensor y = rt::Tensor::empty({0, c.H}, DType::BF16); b.combine(y, h); }});
  v.push_back({"huge hidden empty x", {"buffer too small"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); a.x = rt::Tensor::empty({0, int64_t(1) << 40}, DType::BF16); a.topk_idx = rt::Tensor::empty({0, c.K}, DType::I64); a.topk_weights = {}; D(b, a); }});
  v.push_back({"ll on normal buffer", {"low_latency_mode"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { auto a = nargs(c, me); b.low_latency_dispatch(rt::Tensor::empty({c.T(me), c.H}, DType::BF16), a.topk_idx, 64, c.E); }});
  v.push_back({"layout wrong topk", {"topk_idx"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { b.get_dispatch_layout(rt::Tensor::empty({3, 2}, DType::F32), c.E); }});
  v.push_back({"layout E not multiple", {"num_experts"}, [=](deepep::Buffer& b, const NCase& c, int me, int who) { b.get_dispatch_layout(make_idx(c, me), c.R > 1 ? c.E + 1 : -1); }});
  return v;
}

TEST(DeepEPFuzz, BadInputs) {
  Rng g{fseed() * 43 + 4}; int fails = 0;
  const auto all = bads();
  const char* only = getenv("DEEPEP_FUZZ_BAD");  // one bad input by name
  for (int i = 0; i < cases() * 2; ++i) {
    const Bad& b = all[size_t(i) % all.size()];
    if (only && b.name != only) continue;
    NCase c = random_ncase(g); c.R = std::max(2, c.R); c.E = c.R * g.in(1, 4); c.K = std::min(c.K, c.E); c.cached = false; c.layout = false;
    if (c.dt == DType::F8E4M3) c.dt = DType::BF16;
    int who = g.in(0, c.R - 1);
    if (c.T(who) == 0) { if (c.zero_rank == who) c.zero_rank = -1; if (c.maxT == 0) c.maxT = 5; }
    if (c.T(who) == 0) continue;
    if (b.name == "x non-contiguous" && c.H == 1) c.H = 7;
    RunOptions ro; ro.timeout_s = 40;
    report(run_ranks(c.R, [&](const std::shared_ptr<deepep::Group>& gr) {
      deepep::Buffer buf(gr, 1 << 20, 0, false, fopts(c.tcp));
      std::string msg; bool other = false;
      try { b.run(buf, c, gr->rank(), who); } catch (const rt::Error& e) { msg = e.what(); } catch (const std::exception& e) { msg = e.what(); other = true; }
      if (msg == "skip") return;
      EP_CHECK(!other, "non-rt exception: ", msg);
      EP_CHECK(!msg.empty(), "no error on rank ", gr->rank());
      for (auto& p : b.pieces) EP_CHECK(msg.find(p) != std::string::npos, "'", p, "' not in: ", msg);
      NCase ok = c; ok.layout = false; ok.cached = false;
      check_normal(buf, ok);
    }, ro), b.name + " who=" + std::to_string(who) + " " + describe(c), fails);
  }
}

}  // namespace
