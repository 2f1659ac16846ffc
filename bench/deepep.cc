// bench_deepep: deepep between several processes of this machine: CPU tensors over the shm
// transport, or with --gpu CUDA tensors over the cuda_ipc device windows (rank r on GPU
// r % visible GPUs, so several ranks share a GPU when there are fewer GPUs than ranks).
//
//   bench_deepep [--gpu] [--ranks 4] [--tokens 4096] [--hidden 7168] [--topk 8] [--experts 256]
//                [--ll-tokens 128] [--moe-hidden N] [--iters 5] [--ar-min 1K] [--ar-max 1G] [--window 1G] [--num-sms N]
//                [--timeline] [--device-transport cuda_ipc|nccl]
//                [--skip memcpy,dispatch,ll,moe,allreduce] [--nodes 1] [--transport shm|tcp]
//
// Forks --ranks processes that rendezvous over TCP on 127.0.0.1 (or, when DEEPEP_RANK and
// DEEPEP_RENDEZVOUS are set, runs as that one rank under any launcher). Measures, in the same run:
//   memcpy    single-thread memcpy bandwidth, and the aggregate of --ranks concurrent copies
//             (the figure the "50% of memcpy" target compares with), 256 MiB buffers;
//   dispatch  normal mode at DeepEP's settings: FP8 e4m3 rows with per-128-channel scales, top-k of
//   combine   the experts, then a BF16 combine; bandwidth as DeepEP reports it (bytes received by a
//             rank in dispatch, bytes it sends in combine, divided by the time) and the aggregate of
//             all ranks; time = the slowest rank's, median over --iters after one warm-up; on the
//             CPU also, interleaved with it, the same calls with x, its scales, top-k, weights and
//             combine's input in the Buffer's shared arena (alloc_shared_tensor: peers read them
//             with memcpy from their mapping), checked bit for bit against the other run; with
//             --nodes K > 1 also the route (hierarchical, or flat with DEEPEP_HIERARCHICAL_DISPATCH=0)
//             and the rows and bytes that crossed the emulated nodes per call (CPU tensors and the
//             nccl plane: --gpu --device-transport nccl --nodes K);
//   ll        low-latency dispatch (FP8) and combine (BF16) with --ll-tokens per rank (with --gpu
//             also queued on a stream: dispatches alone, dispatch + combine pairs, a CUDA graph);
//   moe       a decode MoE layer step: --ll-tokens tokens per rank as two micro-batches, each through
//             low-latency dispatch (FP8), one FP8 expert GEMM per local expert
//             (deepgemm::m_grouped_fp8_gemm_nt_masked, --moe-hidden square: 7168 with --gpu, 1024
//             on the CPU) and low-latency combine; without overlap (each micro-batch's three steps
//             in turn) and with overlap (two Buffers, both dispatches issued with receive hooks,
//             each micro-batch's GEMM while the other's tokens move; DeepEP's two-batch decode
//             overlap); reports the step, the GEMMs alone, and the exposed communication share
//             (step - GEMMs) / step;
//   allreduce f32 sum, 1 KiB .. 1 GiB per rank, direct, ring and tree (--gpu: the device path); algbw =
//             bytes / time and busbw = algbw * 2 (n - 1) / n, as nccl-tests defines them. With
//             --nodes K > 1 (forked ranks only) the ranks form K emulated nodes of consecutive ranks
//             (a host identity each, DEEPEP_SHM_EMULATE_NODES=1): also hierarchical, and which one
//             Auto picks. --transport tcp carries the frames over the tcp transport on loopback
//             instead (the nodes are then hosts to it: no DEEPEP_SHM_EMULATE_NODES); with one node
//             it is named in CommOptions::transport.
// With --gpu, memcpy is not run, every call's
// time includes its host synchronization (the GPU path is synchronous), the device windows are
// --window bytes per rank (--num-sms N: dispatch and combine's kernels sized for N SMs,
// Buffer::set_num_sms), and the first dispatch and combine are checked bit for bit against the
// CPU path on the same inputs. --gpu --timeline builds the normal-mode kernels with their timeline
// (deepep/kernels/timeline.h) and, after the timed calls, prints per rank when each scatter block
// started and ended, how long its chunks took from first row to raised flag, and when the receive
// saw them, for one more dispatch and one more combine. --device-transport nccl moves the CUDA
// tensors over the nccl plane instead (CommOptions::device_transport; one GPU per rank; no
// low-latency calls there: skip ll and moe).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "deepep/deepep.h"
#include "deepep/kernels/timeline.h"
#include "deepgemm/deepgemm.h"
#include "rt/cuda_device.h"
#include "rt/cuda_memory.h"
#include "rt/cuda_stream.h"
#include "rt/error.h"
#include "tl/device/numeric.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int ranks = 4;
  int tokens = 4096;
  int hidden = 7168;
  int topk = 8;
  int experts = 256;
  int ll_tokens = 128;
  int moe_hidden = 0;  // 0: 7168 with --gpu, 1024 on the CPU
  int iters = 5;
  int64_t ar_min = 1 << 10;
  int64_t ar_max = int64_t(1) << 30;
  int64_t window = int64_t(1) << 30;
  int num_sms = 0;  // --num-sms: the GPU dispatch/combine kernels sized for this many SMs (0: all)
  bool gpu = false;
  bool timeline = false;  // --timeline: dispatch/combine kernels built with their timeline (GPU)
  std::string skip;
  int nodes = 1;
  std::string transport;  // CommOptions::transport ("": shm on one host, emulated nodes or not)
  std::string device_transport = "cuda_ipc";  // CommOptions::device_transport (with --gpu)
};

int64_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  const std::string unit = end ? end : "";
  if (unit == "K" || unit == "k") v *= 1024;
  if (unit == "M" || unit == "m") v *= 1024 * 1024;
  if (unit == "G" || unit == "g") v *= 1024.0 * 1024 * 1024;
  return int64_t(v);
}

bool skipped(const Options& o, const std::string& what) {
  return ("," + o.skip + ",").find("," + what + ",") != std::string::npos;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) bytes /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f %s", bytes, units[u]);
  return buf;
}

// memcpy bandwidth (bytes copied per second; each byte is read once and written once).
double memcpy_bandwidth(int threads, size_t bytes) {
  std::vector<std::vector<char>> src(size_t(threads), std::vector<char>(bytes, 1)), dst(size_t(threads), std::vector<char>(bytes, 2));
  std::vector<double> best(size_t(threads), 0);
  auto work = [&](int t) {
    for (int rep = 0; rep < 6; ++rep) {
      const auto s = Clock::now();
      std::memcpy(dst[size_t(t)].data(), src[size_t(t)].data(), bytes);
      const double sec = std::chrono::duration<double>(Clock::now() - s).count();
      if (rep > 0) best[size_t(t)] = std::max(best[size_t(t)], double(bytes) / sec);
    }
  };
  if (threads == 1) {
    work(0);
    return best[0];
  }
  // Concurrent copies, timed together.
  std::vector<std::thread> pool;
  std::vector<double> rates;
  for (int rep = 0; rep < 5; ++rep) {
    const auto s = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { std::memcpy(dst[size_t(t)].data(), src[size_t(t)].data(), bytes); });
    for (auto& th : pool) th.join();
    pool.clear();
    const double sec = std::chrono::duration<double>(Clock::now() - s).count();
    if (rep > 0) rates.push_back(double(bytes) * threads / sec);
  }
  return *std::max_element(rates.begin(), rates.end());
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Top-k distinct random experts per token.
rt::Tensor random_topk(int rank, int tokens, int topk, int experts) {
  rt::Tensor t = rt::Tensor::empty({tokens, topk}, rt::DType::I64);
  std::mt19937_64 g(uint64_t(rank) * 7919 + 17);
  std::vector<int> pool(static_cast<size_t>(experts));
  for (int i = 0; i < experts; ++i) pool[size_t(i)] = i;
  for (int i = 0; i < tokens; ++i) {
    for (int k = 0; k < topk; ++k) std::swap(pool[size_t(k)], pool[size_t(k) + g() % size_t(experts - k)]);
    for (int k = 0; k < topk; ++k) t.data_as<int64_t>()[i * topk + k] = pool[size_t(k)];
  }
  return t;
}

rt::Tensor random_fill(rt::Shape shape, rt::DType dt, uint64_t seed) {
  rt::Tensor t = rt::Tensor::empty(shape, dt);
  uint8_t* p = static_cast<uint8_t*>(t.data());
  const int64_t n = t.nbytes();
  if (dt == rt::DType::BF16) {
    auto* b = t.data_as<tl::bfloat16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) b[i] = tl::bfloat16_t::from_float(float(int64_t(mix(seed, uint64_t(i)) % 2001) - 1000) * 1e-3f);
  } else if (dt == rt::DType::F32) {
    float* f = t.data_as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) f[i] = float(int64_t(mix(seed, uint64_t(i)) % 2001) - 1000) * 1e-3f;
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] = uint8_t(mix(seed, uint64_t(i)) & 0x77);  // finite e4m3
  }
  return t;
}

// Max over ranks of each rank's samples (collective over the group's control plane).
std::vector<double> slowest(deepep::Group& g, const std::vector<double>& mine) {
  std::string bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double));
  const auto all = g.allgather(bytes, "bench timings");
  std::vector<double> out(mine.size(), 0);
  for (const std::string& s : all)
    for (size_t i = 0; i < mine.size(); ++i) out[i] = std::max(out[i], reinterpret_cast<const double*>(s.data())[i]);
  return out;
}

// With --gpu, this rank's device: ranks spread over the visible GPUs.
rt::Device data_device(const Options& o, int rank) {
  if (!o.gpu) return rt::Device::cpu();
  const int n = rt::cuda_device_count();
  if (n == 0) throw std::runtime_error("--gpu: no CUDA device is visible: " + rt::cuda_unavailable_reason());
  return rt::Device::cuda(rank % n);
}

deepep::CommOptions comm_options(const Options& o, int rank) {
  deepep::CommOptions co;
  co.log_reroutes = false;
  co.transport = o.transport;
  if (o.gpu) {
    co.cuda_device = data_device(o, rank).id;
    co.device_window_bytes = o.window;
    co.device_transport = o.device_transport;
  }
  return co;
}

// A copy of the CPU tensor t in buf's shared arena.
rt::Tensor shared_copy(deepep::Buffer& buf, const rt::Tensor& t) {
  const rt::Tensor s = buf.alloc_shared_tensor(t.shape(), t.dtype());
  std::memcpy(s.data(), t.data(), size_t(t.nbytes()));
  return s;
}

// Whether two results hold the same bytes (either may be on the GPU).
bool same_bytes(const rt::Tensor& a, const rt::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  const rt::Tensor x = a.to(rt::Device::cpu()), y = b.to(rt::Device::cpu());
  return x.nbytes() == y.nbytes() && std::memcmp(x.data(), y.data(), size_t(x.nbytes())) == 0;
}

// Throws unless, on every rank, two dispatch + combine runs of the same inputs gave the same bytes;
// `what` says what the second run was.
void check_same_results(deepep::Group& g, const deepep::DispatchResult& d1, const deepep::CombineResult& c1,
                        const deepep::DispatchResult& d2, const deepep::CombineResult& c2, const std::string& what) {
  const bool ok = same_bytes(d1.recv_x, d2.recv_x) && same_bytes(d1.recv_x_scales, d2.recv_x_scales) &&
                  same_bytes(d1.recv_topk_idx, d2.recv_topk_idx) &&
                  same_bytes(d1.recv_topk_weights, d2.recv_topk_weights) && same_bytes(c1.combined_x, c2.combined_x) &&
                  same_bytes(c1.combined_topk_weights, c2.combined_topk_weights);
  const auto all = g.allgather(ok ? "1" : "0", "check: " + what);
  for (int r = 0; r < g.size(); ++r)
    if (all[size_t(r)] != "1") throw std::runtime_error(rt::str("rank ", r, ": ", what, " differs"));
}

template <class F>
double timed(deepep::Comm& comm, F&& f) {
  deepep::barrier(comm);
  const auto s = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - s).count();
}

// The MoE layer step (see "moe" at the top): two micro-batches of --ll-tokens / 2 tokens.
void run_moe_step(const std::shared_ptr<deepep::Group>& g, const Options& o) {
  const int R = g->size(), me = g->rank();
  const rt::Device dev = data_device(o, me);
  const int64_t H = o.moe_hidden > 0 ? o.moe_hidden : (o.gpu ? 7168 : 1024), S = H / 128;
  const int mb = std::max(o.ll_tokens / 2, 1), local = o.experts / R;
  if (H % 128 != 0 || o.experts % R != 0) throw std::runtime_error("moe: --moe-hidden must be a multiple of 128 and --experts of --ranks");
  const int64_t bytes = deepep::Buffer::low_latency_size_hint(mb, H, R, o.experts);
  deepep::Buffer buf_a(g, 0, bytes, true, comm_options(o, me)), buf_b(g, 0, bytes, true, comm_options(o, me));
  struct Batch {
    rt::Tensor x, idx, w, y;
    deepep::LowLatencyDispatchResult d;
    deepep::LowLatencyCombineResult c;
  } batch[2];
  for (int i = 0; i < 2; ++i) {
    batch[i].x = random_fill({mb, H}, rt::DType::BF16, uint64_t(me) * 2 + uint64_t(i) + 500).to(dev);
    batch[i].idx = random_topk(me * 2 + i + 2000, mb, o.topk, o.experts).to(dev);
    batch[i].w = random_fill({mb, o.topk}, rt::DType::F32, uint64_t(me) * 2 + uint64_t(i) + 600).to(dev);
    batch[i].y = rt::Tensor::empty({local, int64_t(R) * mb, H}, rt::DType::BF16, dev);
  }
  const rt::Tensor wt = random_fill({local, H, H}, rt::DType::F8E4M3, uint64_t(me) + 700).to(dev);
  const rt::Tensor ws = random_fill({local, S, S}, rt::DType::F32, uint64_t(me) + 800).to(dev);
  const int64_t expected_m = std::max<int64_t>(1, int64_t(R) * mb * o.topk / o.experts);
  deepep::Buffer* bufs[2] = {&buf_a, &buf_b};
  auto gemm = [&](Batch& b) {
    deepgemm::m_grouped_fp8_gemm_nt_masked(b.d.recv_x, b.d.recv_x_scales, wt, ws, b.y, b.d.recv_count, expected_m);
  };
  // The step's end: the GPU's queued work done (deepep's calls return with their results ready).
  auto drain = [&] {
    if (!o.gpu) return;
    rt::CudaEvent e(dev.id, false);
    e.record();
    e.synchronize();
  };
  auto serial = [&] {
    for (int i = 0; i < 2; ++i) {
      Batch& b = batch[i];
      b.d = bufs[i]->low_latency_dispatch(b.x, b.idx, mb, o.experts, true, false);
      gemm(b);
      b.c = bufs[i]->low_latency_combine(b.y, b.idx, b.w, *b.d.handle, false);
    }
    drain();
  };
  auto overlapped = [&] {
    Batch &a = batch[0], &b = batch[1];
    a.d = buf_a.low_latency_dispatch(a.x, a.idx, mb, o.experts, true, true);
    b.d = buf_b.low_latency_dispatch(b.x, b.idx, mb, o.experts, true, true);
    a.d.hook();
    gemm(a);  // b's tokens move meanwhile
    a.c = buf_a.low_latency_combine(a.y, a.idx, a.w, *a.d.handle, true);
    b.d.hook();
    gemm(b);  // a's results move back meanwhile
    b.c = buf_b.low_latency_combine(b.y, b.idx, b.w, *b.d.handle, true);
    a.c.hook();
    b.c.hook();
    drain();
  };
  auto gemms_only = [&] {
    gemm(batch[0]);
    gemm(batch[1]);
    drain();
  };
  std::vector<double> ts, to, tg;
  for (int it = 0; it <= o.iters; ++it) {
    const double a = timed(buf_a.comm(), serial), b = timed(buf_a.comm(), overlapped), c = timed(buf_a.comm(), gemms_only);
    if (it > 0) ts.push_back(a), to.push_back(b), tg.push_back(c);
  }
  ts = slowest(*g, ts), to = slowest(*g, to), tg = slowest(*g, tg);
  if (me == 0) {
    const double s = median(ts), ov = median(to), gm = median(tg);
    std::printf("\n== MoE decode step%s: %d ranks, 2 micro-batches of %d tokens/rank, top-%d of %d experts, expert GEMM %lld x %lld FP8 (%d per rank)\n",
                o.gpu ? " on the GPU" : "", R, mb, o.topk, o.experts, (long long)H, (long long)H, local);
    std::printf("   GEMMs alone:       %9.1f us\n", gm * 1e6);
    std::printf("   without overlap:   %9.1f us   communication exposed %5.1f%%\n", s * 1e6, 100 * std::max(0.0, s - gm) / s);
    std::printf("   with overlap:      %9.1f us   communication exposed %5.1f%%\n", ov * 1e6, 100 * std::max(0.0, ov - gm) / ov);
    std::fflush(stdout);
  }
}

// One operation's timeline (deepep/kernels/timeline.h), summarized: microseconds from its first
// record.
std::string timeline_summary(const std::vector<uint64_t>& words) {
  using namespace deepep::kernels;
  const uint64_t n = std::min<uint64_t>(words[0], kTimelineRecords);
  if (n == 0) return "   no records\n";
  uint64_t t0 = ~0ull;
  for (uint64_t i = 0; i < n; ++i) t0 = std::min(t0, words[1 + 2 * i]);
  auto us = [&](uint64_t ns) { return double(ns - t0) * 1e-3; };
  struct Span {
    double first = 1e30, last = -1;
    int64_t count = 0;
    void add(double t) { first = std::min(first, t), last = std::max(last, t), ++count; }
  };
  Span span[kTimelineEvents];
  std::map<uint64_t, double> begun;  // (peer, block, chunk) -> when its rows began
  std::vector<double> took;          // each chunk: first row to raised flag
  std::vector<int64_t> flags_per_10us;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t tag = words[2 + 2 * i];
    const unsigned e = timeline_event(tag);
    if (e == 0 || e >= kTimelineEvents) continue;
    const double t = us(words[1 + 2 * i]);
    span[e].add(t);
    const uint64_t key = tag & ((1ull << 56) - 1);
    if (e == kChunkBegin) begun[key] = t;
    if (e == kChunkFlagged) {
      if (auto it = begun.find(key); it != begun.end()) took.push_back(t - it->second);
      const size_t bucket = size_t(t / 10);
      if (flags_per_10us.size() <= bucket) flags_per_10us.resize(bucket + 1);
      ++flags_per_10us[bucket];
    }
  }
  std::sort(took.begin(), took.end());
  auto range = [&](const Span& s) {
    return s.count ? rt::str(s.count, " at ", int64_t(s.first), "..", int64_t(s.last), " us") : std::string("none");
  };
  std::string out = rt::str("   scatter blocks start ", range(span[kScatterStart]), ", end ", range(span[kScatterEnd]),
                            "\n   chunks ", took.size());
  if (!took.empty())
    out += rt::str(": first row to flag ", int64_t(took.front()), " / ", int64_t(took[took.size() / 2]), " / ",
                   int64_t(took.back()), " us (min / median / max); flags ", range(span[kChunkFlagged]));
  out += "\n   flags per 10 us:";
  for (int64_t f : flags_per_10us) out += rt::str(" ", f);
  out += rt::str("\n   receive blocks start ", range(span[kReceiveStart]), ", chunks seen ", range(span[kChunkArrived]),
                 ", end ", range(span[kReceiveEnd]), "\n");
  if (words[0] > n) out += rt::str("   (", words[0] - n, " records dropped)\n");
  return out;
}

void run_rank(const std::shared_ptr<deepep::Group>& g, const Options& o, double memcpy_bw) {
  const int R = g->size(), me = g->rank();
  const bool lead = me == 0;
  auto want = [&](const char* what) { return !skipped(o, what); };

  const rt::Device dev = data_device(o, me);
  if (want("dispatch")) {
    // --timeline: the stamps' buffer, its address baked into the kernels the Buffer builds.
    rt::Tensor stamps;
    const char* const flags = std::getenv("DEEPEP_JIT_FLAGS");
    const std::string user_flags = flags ? flags : "";
    if (o.gpu && o.timeline) {
      stamps = rt::Tensor::empty({int64_t(deepep::kernels::kTimelineWords)}, rt::DType::I64, dev);
      setenv("DEEPEP_JIT_FLAGS",
             rt::str(user_flags, " -DDEEPEP_TIMELINE=", reinterpret_cast<uintptr_t>(stamps.data()), "ull").c_str(), 1);
    }
    deepep::Buffer buf(g, o.gpu ? o.window : int64_t(R - 1) * (2 << 20), 0, false, comm_options(o, me));
    if (stamps.defined()) setenv("DEEPEP_JIT_FLAGS", user_flags.c_str(), 1);  // later Buffers build without it
    if (o.gpu) buf.set_num_sms(o.num_sms);
    const int64_t T = o.tokens, H = o.hidden, S = H / 128;
    deepep::DispatchArgs a;  // on the CPU; `on` is the same on the benchmark's device
    a.x = random_fill({T, H}, rt::DType::F8E4M3, uint64_t(me) + 1);
    a.x_scales = random_fill({T, S}, rt::DType::F32, uint64_t(me) + 100);
    a.topk_idx = random_topk(me, o.tokens, o.topk, o.experts);
    a.topk_weights = random_fill({T, o.topk}, rt::DType::F32, uint64_t(me) + 200);
    a.num_experts = o.experts;
    const deepep::DispatchLayout layout = buf.get_dispatch_layout(a.topk_idx, o.experts);
    a.layout = &layout;
    deepep::DispatchArgs on = a;
    on.x = a.x.to(dev), on.x_scales = a.x_scales.to(dev), on.topk_idx = a.topk_idx.to(dev);
    on.topk_weights = a.topk_weights.to(dev);
    // The arena variant (CPU only): the same inputs, and combine's input, in the shared arena.
    const bool arena = !o.gpu;
    deepep::DispatchArgs shared = a;
    if (arena) {
      shared.x = shared_copy(buf, a.x), shared.x_scales = shared_copy(buf, a.x_scales);
      shared.topk_idx = shared_copy(buf, a.topk_idx), shared.topk_weights = shared_copy(buf, a.topk_weights);
    }
    std::vector<double> td, tc, tds, tcs;
    int64_t recv_rows = 0;
    rt::Tensor y, y_shared;
    for (int it = 0; it <= o.iters; ++it) {
      deepep::DispatchResult d;
      const double t1 = timed(buf.comm(), [&] { d = buf.dispatch(on); });
      if (!y.defined()) y = random_fill({d.recv_x.size(0), H}, rt::DType::BF16, uint64_t(me) + 300).to(dev);
      deepep::CombineResult c;
      const double t2 = timed(buf.comm(), [&] { c = buf.combine(y, *d.handle, d.recv_topk_weights); });
      recv_rows = d.recv_x.size(0);
      if (it > 0) td.push_back(t1), tc.push_back(t2);
      if (arena) {
        if (!y_shared.defined()) y_shared = shared_copy(buf, y);
        deepep::DispatchResult ds;
        const double t3 = timed(buf.comm(), [&] { ds = buf.dispatch(shared); });
        deepep::CombineResult cs;
        const double t4 = timed(buf.comm(), [&] { cs = buf.combine(y_shared, *ds.handle, ds.recv_topk_weights); });
        if (it > 0) tds.push_back(t3), tcs.push_back(t4);
        if (it == 0) {
          check_same_results(*g, d, c, ds, cs, "dispatch/combine from the shared arena");
          if (lead)
            std::printf("\n   check: dispatch and combine from the shared arena equal the other run bit for bit; "
                        "rank 0 read %.1f MB from its peers' arenas%s\n",
                        double(buf.shared_bytes_read()) * 1e-6, buf.single_copy() ? "" : " (single copy off: frames)");
        }
      }
      if (it == 0 && o.gpu) {  // the device path against the CPU path, on the same inputs
        deepep::Buffer cpu(g, int64_t(R - 1) * (2 << 20), 0, false);
        const deepep::DispatchResult dc = cpu.dispatch(a);
        const deepep::CombineResult cc = cpu.combine(y.to(rt::Device::cpu()), *dc.handle, dc.recv_topk_weights);
        check_same_results(*g, dc, cc, d, c, "the GPU dispatch/combine (against the CPU path)");
        if (lead) std::printf("\n   check: GPU dispatch and combine equal the CPU path bit for bit on every rank\n");
      }
    }
    if (stamps.defined()) {  // one more dispatch and combine, each with the stamps zeroed before it
      deepep::DispatchResult d;
      for (const char* op : {"dispatch", "combine"}) {
        rt::cuda_memset(dev.id, reinterpret_cast<rt::CuDevicePtr>(stamps.data()), 0, size_t(stamps.nbytes()));
        deepep::barrier(buf.comm());
        if (op[0] == 'd')
          d = buf.dispatch(on);
        else
          buf.combine(y, *d.handle, d.recv_topk_weights);
        const rt::Tensor host = stamps.to(rt::Device::cpu());
        const uint64_t* w = static_cast<const uint64_t*>(host.data());
        const auto all = g->allgather(timeline_summary(std::vector<uint64_t>(w, w + host.numel())), "timeline");
        if (lead)
          for (int r = 0; r < R; ++r) std::printf("\n== %s timeline, rank %d\n%s", op, r, all[size_t(r)].c_str());
      }
    }
    td = slowest(*g, td);
    tc = slowest(*g, tc);
    tds = slowest(*g, tds);
    tcs = slowest(*g, tcs);
    // Across emulated nodes: the route and the rows it sent between nodes, all ranks and iterations.
    const deepep::InternodeTraffic crossed = buf.internode_traffic();
    const auto crossings = g->allgather(rt::str(crossed.dispatch_rows, " ", crossed.combine_rows, " ", crossed.bytes),
                                        "internode traffic");
    const auto rows = g->allgather(std::to_string(recv_rows), "rows");
    int64_t total_rows = 0;
    for (const auto& r : rows) total_rows += std::stoll(r);
    if (lead) {
      const double dbytes = double(total_rows) * double(H + S * 4), cbytes = double(total_rows) * double(H * 2);
      const double md = median(td), mc = median(tc);
      std::printf("\n== dispatch (FP8 e4m3 + scales) and combine (BF16)%s: %d ranks, %d tokens/rank, hidden %d, top-%d of %d experts\n",
                  o.gpu ? (" on the GPU (" + o.device_transport + ")").c_str() : "", R, o.tokens, o.hidden, o.topk, o.experts);
      std::printf("   received rows: %.0f per rank (each token to %.2f ranks on average)\n", double(total_rows) / R,
                  double(total_rows) / (double(R) * o.tokens));
      if (o.gpu && o.num_sms > 0) std::printf("   kernels sized for %d SMs (Buffer::set_num_sms)\n", o.num_sms);
      std::printf("   dispatch: %8.2f ms   per rank %6.2f GB/s   aggregate %6.2f GB/s\n", md * 1e3, dbytes / R / md * 1e-9,
                  dbytes / md * 1e-9);
      std::printf("   combine:  %8.2f ms   per rank %6.2f GB/s   aggregate %6.2f GB/s\n", mc * 1e3, cbytes / R / mc * 1e-9,
                  cbytes / mc * 1e-9);
      if (g->num_nodes() > 1 && (!o.gpu || o.device_transport == "nccl")) {  // the routes that know nodes
        int64_t dr = 0, cr = 0, b = 0;
        for (const std::string& c : crossings) {
          int64_t x, y, z;
          std::sscanf(c.c_str(), "%lld %lld %lld", (long long*)&x, (long long*)&y, (long long*)&z);
          dr += x, cr += y, b += z;
        }
        const double calls = double(o.iters + 1) * (arena ? 2 : 1);
        std::printf("   %s route across %d emulated nodes: per call %.0f dispatch rows and %.0f combine rows "
                    "crossed nodes (%.1f MB)\n",
                    buf.hierarchical() ? "hierarchical" : "flat", g->num_nodes(), double(dr) / calls, double(cr) / calls,
                    double(b) / calls * 1e-6);
      }
      const double agg = (dbytes + cbytes) / (md + mc);
      if (!o.gpu && !skipped(o, "memcpy"))
        std::printf("   dispatch+combine aggregate: %.2f GB/s = %.0f%% of the %d-way memcpy bandwidth (%.2f GB/s)\n",
                  agg * 1e-9, 100 * agg / memcpy_bw, R, memcpy_bw * 1e-9);
      if (arena) {
        const double mds = median(tds), mcs = median(tcs), aggs = (dbytes + cbytes) / (mds + mcs);
        std::printf("   inputs in the shared arena (alloc_shared_tensor):\n");
        std::printf("   dispatch: %8.2f ms   per rank %6.2f GB/s   aggregate %6.2f GB/s\n", mds * 1e3,
                    dbytes / R / mds * 1e-9, dbytes / mds * 1e-9);
        std::printf("   combine:  %8.2f ms   per rank %6.2f GB/s   aggregate %6.2f GB/s\n", mcs * 1e3,
                    cbytes / R / mcs * 1e-9, cbytes / mcs * 1e-9);
        if (!skipped(o, "memcpy"))
          std::printf("   dispatch+combine aggregate: %.2f GB/s = %.0f%% of the %d-way memcpy bandwidth (%.2f GB/s)\n",
                      aggs * 1e-9, 100 * aggs / memcpy_bw, R, memcpy_bw * 1e-9);
      }
      std::fflush(stdout);
    }
  }

  if (want("ll")) {
    const int64_t bytes = deepep::Buffer::low_latency_size_hint(o.ll_tokens, o.hidden, R, o.experts);
    deepep::Buffer buf(g, 0, bytes, true, comm_options(o, me));
    const int64_t T = o.ll_tokens, H = o.hidden;
    const rt::Tensor x = random_fill({T, H}, rt::DType::BF16, uint64_t(me) + 7);
    const rt::Tensor idx = random_topk(me + 1000, o.ll_tokens, o.topk, o.experts);
    const rt::Tensor w = random_fill({T, o.topk}, rt::DType::F32, uint64_t(me) + 9);
    const rt::Tensor xd = x.to(dev), idxd = idx.to(dev), wd = w.to(dev);
    std::vector<double> td, tc;
    rt::Tensor y;
    for (int it = 0; it <= o.iters; ++it) {
      deepep::LowLatencyDispatchResult d;
      const double t1 = timed(buf.comm(), [&] { d = buf.low_latency_dispatch(xd, idxd, o.ll_tokens, o.experts, true, false); });
      if (!y.defined()) y = random_fill(d.recv_x.shape(), rt::DType::BF16, uint64_t(me) + 11).to(dev);
      deepep::LowLatencyCombineResult c;
      const double t2 = timed(buf.comm(), [&] { c = buf.low_latency_combine(y, idxd, wd, *d.handle); });
      if (it > 0) td.push_back(t1), tc.push_back(t2);
      if (it == 0 && o.gpu) {  // the device path against the CPU path, on the same inputs
        deepep::Buffer cpu(g, 0, bytes, true);
        const deepep::LowLatencyDispatchResult dc = cpu.low_latency_dispatch(x, idx, o.ll_tokens, o.experts, true, false);
        const deepep::LowLatencyCombineResult cc = cpu.low_latency_combine(y.to(rt::Device::cpu()), idx, w, *dc.handle);
        const bool ok = same_bytes(d.recv_count, dc.recv_count) && same_bytes(c.combined_x, cc.combined_x);
        const auto all = g->allgather(ok ? "1" : "0", "ll check");
        for (int r = 0; r < R; ++r)
          if (all[size_t(r)] != "1")
            throw std::runtime_error(rt::str("rank ", r, ": the GPU low-latency dispatch/combine differs from the CPU path"));
        if (lead) std::printf("\n   check: GPU low-latency counts and combine equal the CPU path bit for bit on every rank\n");
      }
    }
    td = slowest(*g, td);
    tc = slowest(*g, tc);
    if (lead) {
      const double msgs = double(T) * o.topk * R;  // (token, expert) pairs in the group
      const double dbytes = msgs * double(H + H / 128 * 4), cbytes = msgs * double(H * 2);
      std::printf("\n== low-latency dispatch (FP8) and combine (BF16)%s: %d ranks, %d tokens/rank, hidden %d, top-%d of %d; %s %s per rank\n",
                  o.gpu ? " on the GPU (cuda_ipc)" : "", R, o.ll_tokens, o.hidden, o.topk, o.experts,
                  o.gpu ? "window" : "rings", human(double(bytes)).c_str());
      std::printf("   dispatch: %8.1f us   aggregate %6.2f GB/s\n", median(td) * 1e6, dbytes / median(td) * 1e-9);
      std::printf("   combine:  %8.1f us   aggregate %6.2f GB/s\n", median(tc) * 1e6, cbytes / median(tc) * 1e-9);
      std::fflush(stdout);
    }
    if (o.gpu) {
      // Queued on a stream (Buffer::set_low_latency_stream): batches of dispatches alone, then of
      // dispatch + combine pairs, back to back and one synchronization each, then the pair captured
      // in a CUDA graph and replayed.
      rt::CudaStream stream(dev.id, true);
      buf.set_low_latency_stream(stream.handle());
      deepep::LowLatencyDispatchResult d;
      deepep::LowLatencyCombineResult c;
      auto pair = [&] {
        d = buf.low_latency_dispatch(xd, idxd, o.ll_tokens, o.experts, true, false);
        c = buf.low_latency_combine(y, idxd, wd, *d.handle);
      };
      constexpr int kBatch = 50;
      auto per_call = [&](const std::function<void()>& one) {
        std::vector<double> ts;
        for (int it = 0; it <= o.iters; ++it) {
          const double t = timed(buf.comm(), [&] {
            for (int i = 0; i < kBatch; ++i) one();
            buf.synchronize_low_latency();
          });
          if (it > 0) ts.push_back(t / kBatch);
        }
        return median(slowest(*g, ts));
      };
      const double dispatches = per_call([&] { d = buf.low_latency_dispatch(xd, idxd, o.ll_tokens, o.experts, true, false); });
      const double queued = per_call(pair);
      const rt::CudaGraph graph(stream.handle(), dev.id, pair);
      const double replayed = per_call([&] { graph.launch(stream.handle()); });
      buf.reset_low_latency_stream();
      if (lead) {
        std::printf("   queued on a stream, dispatch alone:     %8.1f us per call (%d calls per synchronization)\n",
                    dispatches * 1e6, kBatch);
        std::printf("   queued on a stream, dispatch + combine: %8.1f us per pair (%d pairs per synchronization)\n",
                    queued * 1e6, kBatch);
        std::printf("   the pair as a CUDA graph, replayed:     %8.1f us per pair\n", replayed * 1e6);
        std::fflush(stdout);
      }
    }
  }

  if (want("moe")) run_moe_step(g, o);

  if (want("allreduce")) {
    deepep::CommOptions co = comm_options(o, me);
    co.inbound_bytes = int64_t(R - 1) * (8 << 20);
    deepep::Comm comm(g, co);
    if (lead) {
      std::printf("\n== Auto's model of this group: %s\n", comm.network().to_string().c_str());
      std::printf("\n== all_reduce f32 sum%s, %d ranks (nccl-tests: algbw = size / time, busbw = algbw * 2(n-1)/n)\n",
                  o.gpu ? (" on the GPU (" + o.device_transport + ")").c_str() : "", R);
      std::printf("   %10s  %12s %9s %9s  %12s %9s %9s  %12s %9s %9s", "size", o.gpu ? "device us" : "direct us",
                  "algbw", "busbw", "ring us", "algbw", "busbw", "tree us", "algbw", "busbw");
      if (g->num_nodes() > 1) std::printf("  %12s %9s %9s", "hier. us", "algbw", "busbw");
      std::printf(o.gpu ? "\n" : "          auto\n");  // Auto's choice; the device path has one algorithm
    }
    using deepep::Algorithm;
    std::vector<Algorithm> algos = {Algorithm::Direct, Algorithm::Ring, Algorithm::Tree};
    if (o.gpu) algos = {Algorithm::Direct};  // the device path has one algorithm
    if (g->num_nodes() > 1) algos.push_back(Algorithm::Hierarchical);
    for (int64_t bytes = o.ar_min; bytes <= o.ar_max; bytes *= 4) {
      const int64_t n = bytes / 4;
      const rt::Tensor t = random_fill({n}, rt::DType::F32, uint64_t(me)).to(dev);
      std::vector<double> res;
      for (Algorithm algo : algos) {
        // Enough repetitions for ~0.3 s, at least 3, after one warm-up.
        std::vector<double> ts;
        deepep::all_reduce(comm, t, deepep::ReduceOp::Sum, algo);
        const double first = timed(comm, [&] { deepep::all_reduce(comm, t, deepep::ReduceOp::Sum, algo); });
        const int reps = int(std::clamp(0.3 / std::max(first, 1e-6), 3.0, 200.0));
        const auto agreed = g->allgather(std::to_string(reps), "reps");
        int r_all = 0;
        for (const auto& s : agreed) r_all = std::max(r_all, std::stoi(s));
        for (int i = 0; i < r_all; ++i) ts.push_back(timed(comm, [&] { deepep::all_reduce(comm, t, deepep::ReduceOp::Sum, algo); }));
        res.push_back(median(slowest(*g, ts)));
      }
      if (lead) {
        const double f = 2.0 * (R - 1) / R;
        std::printf("   %10s", human(double(bytes)).c_str());
        for (double sec : res)
          std::printf("  %12.1f %8.2fG %8.2fG", sec * 1e6, double(bytes) / sec * 1e-9, double(bytes) / sec * f * 1e-9);
        if (o.gpu)
          std::printf("\n");
        else
          std::printf("  %12s\n", deepep::name(comm.auto_all_reduce(bytes).algorithm));
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ranks") o.ranks = std::stoi(next());
    else if (a == "--tokens") o.tokens = std::stoi(next());
    else if (a == "--hidden") o.hidden = std::stoi(next());
    else if (a == "--topk") o.topk = std::stoi(next());
    else if (a == "--experts") o.experts = std::stoi(next());
    else if (a == "--ll-tokens") o.ll_tokens = std::stoi(next());
    else if (a == "--moe-hidden") o.moe_hidden = std::stoi(next());
    else if (a == "--iters") o.iters = std::stoi(next());
    else if (a == "--ar-min") o.ar_min = parse_size(next());
    else if (a == "--ar-max") o.ar_max = parse_size(next());
    else if (a == "--skip") o.skip = next();
    else if (a == "--window") o.window = parse_size(next());
    else if (a == "--num-sms") o.num_sms = std::stoi(next());
    else if (a == "--gpu") o.gpu = true;
    else if (a == "--timeline") o.timeline = true;
    else if (a == "--nodes") o.nodes = std::stoi(next());
    else if (a == "--transport") o.transport = next();
    else if (a == "--device-transport") o.device_transport = next();
    else {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of bench/deepep.cc)\n", a.c_str());
      return 2;
    }
  }
  if (o.device_transport == "nccl" && (!o.gpu || !skipped(o, "ll") || !skipped(o, "moe"))) {
    std::fprintf(stderr, "--device-transport nccl: give --gpu, and --skip ll,moe (low-latency calls need cuda_ipc)\n");
    return 2;
  }
  if (o.nodes < 1 || o.nodes > o.ranks) {
    std::fprintf(stderr, "--nodes %d: give 1 to --ranks (%d)\n", o.nodes, o.ranks);
    return 2;
  }
  try {
    if (std::getenv("DEEPEP_RANK")) {  // one rank under an external launcher
      auto g = deepep::Group::create(deepep::TcpRendezvous::from_env());
      const double bw = memcpy_bandwidth(1, 256 << 20) * std::min<int>(g->size(), int(std::thread::hardware_concurrency()));
      run_rank(g, o, bw);
      return 0;
    }
    const bool skip_memcpy = o.gpu || skipped(o, "memcpy");
    const double bw1 = skip_memcpy ? 0 : memcpy_bandwidth(1, 256 << 20);
    const double bwn = skip_memcpy ? 1 : memcpy_bandwidth(o.ranks, 256 << 20);
    if (o.gpu)
      std::printf("deepep GPU benchmark: %d ranks over the %s device plane%s\n", o.ranks, o.device_transport.c_str(),
                  o.device_transport == "cuda_ipc" ? (" (windows of " + human(double(o.window)) + " each)").c_str() : "");
    else if (skip_memcpy)
      std::printf("deepep CPU benchmark: %u cores, transport %s; memcpy not measured (ratios below are meaningless)\n",
                  std::thread::hardware_concurrency(), o.transport.empty() ? "shm" : o.transport.c_str());
    else
      std::printf("deepep CPU benchmark: %u cores, transport %s; memcpy %.2f GB/s (1 thread), %.2f GB/s (%d concurrent "
                  "copies)\n",
                  std::thread::hardware_concurrency(), o.transport.empty() ? "shm" : o.transport.c_str(), bw1 * 1e-9,
                  bwn * 1e-9, o.ranks);
    std::fflush(stdout);
    // The rendezvous socket is made here and inherited by rank 0.
    int port = 0;
    int lfd = -1;
    {
      lfd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(lfd, 64) != 0) {
        std::perror("listen");
        return 1;
      }
      socklen_t len = sizeof(addr);
      getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
      port = ntohs(addr.sin_port);
    }
    std::vector<pid_t> pids;
    for (int r = 0; r < o.ranks; ++r) {
      const pid_t pid = fork();
      if (pid == 0) {
        int rc = 0;
        try {
          deepep::TcpRendezvous rv;
          rv.port = port;
          rv.rank = r;
          rv.size = o.ranks;
          if (r == 0) rv.listen_fd = lfd; else close(lfd);
          if (o.nodes > 1) {  // emulated nodes of consecutive ranks (hosts to tcp)
            rv.host_id = "node-" + std::to_string(r * o.nodes / o.ranks);
            if (o.transport != "tcp") setenv("DEEPEP_SHM_EMULATE_NODES", "1", 1);
          }
          run_rank(deepep::Group::create(rv), o, bwn);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d: %s\n", r, e.what());
          rc = 1;
        }
        std::fflush(stdout);
        _exit(rc);
      }
      pids.push_back(pid);
    }
    close(lfd);
    int failed = 0;
    for (pid_t p : pids) {
      int st = 0;
      waitpid(p, &st, 0);
      failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_deepep: %s\n", e.what());
    return 1;
  }
}
