// The cuda_ipc data plane: dispatch, combine and all_reduce of CUDA tensors, with several processes
// per GPU when the machine has one (the windows are then shared through CUDA IPC on one device).
// Dispatch and combine must give the CPU path's bits (that path is checked against the reference
// in dispatch_test.cc); all_reduce is checked against a float64 reference. Skipped without a GPU.
// The parent never touches CUDA (its children fork from it): a probe process looks for the GPU
// (gpu_probe.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <tuple>

#include "buffer/dispatch_plan.h"
#include "gpu_dispatch_check.h"
#include "gpu_probe.h"
#include "moe_ref.h"
#include "rt/cuda_device.h"
#include "rt/cuda_memory.h"
#include "rt/cuda_stream.h"
#include "rt/jit_kernel.h"
#include "transport/cuda_ipc/device_plane.h"
#include "rt/nvrtc.h"

namespace {

using deepep_test::expect_all_failed_with;
using deepep_test::dispatch_combine_like_cpu;
using deepep_test::expect_all_ok;
using deepep_test::expect_same;
using deepep_test::expect_throws;
using deepep_test::MoeCase;
using deepep_test::random_bf16;
using deepep_test::Routing;
using deepep_test::run_ranks;
using deepep_test::test_options;
using deepep_test::test_seed;

#define REQUIRE_GPU() \
  if (deepep_test::visible_gpus() == 0) GTEST_SKIP() << "no CUDA GPU (sm_70+) visible"

// This rank's device: ranks spread over the visible GPUs, several per GPU when there are more ranks.
deepep::CommOptions gpu_options(int rank) {
  deepep::CommOptions o = test_options();
  o.cuda_device = rank % rt::cuda_device_count();
  return o;
}

rt::Device device_of(int rank) { return rt::Device::cuda(rank % rt::cuda_device_count()); }

MoeCase make(int ranks, int experts, int topk, Routing routing, int hidden) {
  return moe_case(0x6770, ranks, experts, topk, routing, hidden);
}

TEST(DeepEPGpu, DispatchCombineTwoRanks) {
  REQUIRE_GPU();
  dispatch_combine_like_cpu(make(2, 16, 4, Routing::Uniform, 512), gpu_options);
}

// Four ranks, uneven, the last sending no tokens (and, Sparse, receiving none): the GPU case below
// and the signalling models further down, which replay its traffic.
MoeCase four_ranks_with_empty_rank() {
  MoeCase c = make(4, 32, 6, Routing::Sparse, 384);
  c.zero_tokens_rank = true;
  return c;
}

TEST(DeepEPGpu, DispatchCombineFourRanksUnevenWithEmptyRank) {
  REQUIRE_GPU();
  dispatch_combine_like_cpu(four_ranks_with_empty_rank(), gpu_options);
}

// Eight ranks (DeepEP's intranode size; four processes a GPU on two GPUs): every rank a source and a
// destination of every other, top-8.
TEST(DeepEPGpu, DispatchCombineEightRanks) {
  REQUIRE_GPU();
  dispatch_combine_like_cpu(make(8, 64, 8, Routing::Uniform, 256), gpu_options);
}

// Many chunks of 256 tokens per rank (the routing kernel's scan walks back over the chunks before
// each one, 32 at a time), routings of different lengths on the ranks, several calls (its scratch
// is left zeroed for the next).
TEST(DeepEPGpu, DispatchCombineManyTokens) {
  REQUIRE_GPU();
  MoeCase c = make(2, 16, 4, Routing::Uniform, 128);
  c.min_tokens = 33 * 256 + 1;  // 34 to 36 chunks a rank
  c.max_tokens = 36 * 256;
  dispatch_combine_like_cpu(c, gpu_options, {}, 32 << 20);
}

// The normal-mode kernels sized for 3 SMs (Buffer::set_num_sms): a few blocks take every chunk.
TEST(DeepEPGpu, DispatchCombineOnFewSms) {
  REQUIRE_GPU();
  MoeCase c = make(3, 24, 4, Routing::Uniform, 256);
  c.max_tokens = 600;
  dispatch_combine_like_cpu(c, gpu_options, {}, 8 << 20, 3);
}

// Lost and corrupted frames on the host transport (the control plane; the device data moves by
// stores into the windows, with no frames to lose): the results do not change.
TEST(DeepEPGpu, DispatchCombineWithInjectedLoss) {
  REQUIRE_GPU();
  deepep::FaultConfig faults;
  faults.drop = 0.10;
  faults.corrupt = 0.05;
  faults.seed = test_seed();
  dispatch_combine_like_cpu(make(3, 24, 4, Routing::Uniform, 256), gpu_options, faults);
}

// A rank killed as it starts the combine: the others get the clear error within the bound.
TEST(DeepEPGpu, KilledRankIsAClearErrorOnTheOthers) {
  REQUIRE_GPU();
  MoeCase c = make(3, 12, 4, Routing::Uniform, 256);
  auto outcomes = run_ranks(3, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    deepep::CommOptions o = gpu_options(me);
    o.faults.kill_rank = 1;
    o.faults.kill_at_op = 2;
    deepep::Buffer buf(g, 8 << 20, 0, false, o);
    deepep::DispatchArgs a;
    a.x = c.x_bf16(me).to(device_of(me));
    a.topk_idx = c.topk_tensor(me).to(device_of(me));
    a.num_experts = c.experts;
    const deepep::DispatchResult d = buf.dispatch(a);  // op 1
    try {
      buf.combine(d.recv_x, *d.handle);  // op 2: rank 1 dies as it starts
    } catch (const deepep::CommError& e) {
      EP_CHECK(std::string(e.what()).find("rank 1") != std::string::npos, e.what());
      return;
    }
    EP_CHECK(false, "no error although rank 1 died");
  });
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(outcomes[1].killed) << outcomes[1].message;
  for (int r : {0, 2}) EXPECT_TRUE(outcomes[size_t(r)].ok) << "rank " << r << ": " << outcomes[size_t(r)].message;
}

// Keeps `stream` busy for about `ms` milliseconds (one thread spinning on the global timer), so
// that work ordered after it on another stream visibly waits, or visibly does not.
void spin(rt::CuStream stream, int device, int ms) {
  const char* source =
      "extern \"C\" __global__ void deepep_test_spin(unsigned long long ns) {\n"
      "  unsigned long long start, now;\n"
      "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(start));\n"
      "  do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(now)); } while (now - start < ns);\n"
      "}\n";
  const rt::CudaKernel k = rt::jit_kernel(source, "deepep_test_spin", device, {});
  const unsigned long long ns = static_cast<unsigned long long>(ms) * 1000000ull;
  k.launch_with({1, 1, 1}, {1, 1, 1}, 0, stream, ns);
}

// Copies src's bytes into dst on `stream` (asynchronously).
void copy_on(rt::CuStream stream, int device, const rt::Tensor& dst, const rt::Tensor& src) {
  EP_CHECK(dst.nbytes() == src.nbytes(), "copy of ", src.nbytes(), " bytes into ", dst.nbytes());
  rt::cuda_context(device);
  RT_CU_CHECK(rt::cuda_driver().cuMemcpyDtoDAsync(reinterpret_cast<rt::CuDevicePtr>(dst.data()),
                                                  reinterpret_cast<rt::CuDevicePtr>(src.data()), size_t(src.nbytes()),
                                                  stream),
              "cuMemcpyDtoDAsync");
}

// Async dispatch and combine, rounds back to back with no host synchronization between them, on a
// stream of the caller's that only events order with the communication stream: each round's x is
// written on that stream after a spin (previous_event makes the dispatch wait for it), the "expert"
// copies the received rows into y after the dispatch's event and another spin (the combine waits for
// it), and a snapshot of recv_x is taken there too. Round 1 has an all_reduce between its dispatch
// and combine (it waits for the queued work: they share the windows), round 2 is a cached dispatch,
// round 3's dispatch is synchronous. Everything, checked at the end, matches the CPU path bit for bit.
void async_rounds_like_cpu(int ranks) {
  const MoeCase base = make(ranks, 8 * ranks, 4, Routing::Uniform, 512);
  expect_all_ok(run_ranks(ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    const rt::Device dev = device_of(me);
    deepep::Buffer cpu(g, 8 << 20, 0, false, test_options()), gpu(g, 8 << 20, 0, false, gpu_options(me));
    rt::CudaStream compute(dev.id, true);  // non-blocking: not ordered with the communication stream
    constexpr int kRounds = 4;
    auto round_case = [&](int r) {
      MoeCase c = base;
      c.seed = base.seed + uint64_t(r == 2 ? 1 : r);  // round 2 reuses round 1's routing (cached)
      c.data_seed = base.seed * 7 + uint64_t(r);
      return c;
    };
    // Inputs: the values (on the device, ready), and the tensors the calls read, written late.
    std::vector<rt::Tensor> x_ready, x_in, idx, w;
    for (int r = 0; r < kRounds; ++r) {
      const MoeCase c = round_case(r);
      x_ready.push_back(c.x_bf16(me).to(dev));
      rt::Tensor in = rt::Tensor::empty(x_ready.back().shape(), rt::DType::BF16, dev);
      in.zero_();
      x_in.push_back(in);
      idx.push_back(c.topk_tensor(me).to(dev));
      w.push_back(c.weights_tensor(me).to(dev));
    }
    rt::Tensor sum = rt::Tensor::empty({64}, rt::DType::F32);
    for (int i = 0; i < 64; ++i) sum.data_as<float>()[i] = float(me * 100 + i);
    const rt::Tensor sum_d = sum.to(dev);

    std::vector<deepep::DispatchResult> d(kRounds);
    std::vector<deepep::CombineResult> cmb(kRounds);
    std::vector<rt::Tensor> y(kRounds), snap(kRounds);
    for (int r = 0; r < kRounds; ++r) {
      spin(compute.handle(), dev.id, 20);
      copy_on(compute.handle(), dev.id, x_in[size_t(r)], x_ready[size_t(r)]);
      deepep::DispatchArgs a;
      a.x = x_in[size_t(r)];
      if (r == 2) {
        a.handle = d[1].handle;
      } else {
        a.topk_idx = idx[size_t(r)];
        a.topk_weights = w[size_t(r)];
        a.num_experts = base.experts;
      }
      a.previous_event = deepep::Event::record(compute.handle(), dev.id);
      a.async_finish = r != 3;
      d[size_t(r)] = gpu.dispatch(a);
      EP_CHECK(d[size_t(r)].event.on_device() == a.async_finish, "round ", r, ": the dispatch's event");
      if (r == 1) deepep::all_reduce(gpu.comm(), sum_d);
      // The expert: after the dispatch, on the caller's stream.
      const rt::Tensor& recv = d[size_t(r)].recv_x;
      d[size_t(r)].event.stream_wait(compute.handle());
      snap[size_t(r)] = rt::Tensor::empty(recv.shape(), recv.dtype(), dev);
      copy_on(compute.handle(), dev.id, snap[size_t(r)], recv);
      spin(compute.handle(), dev.id, 5);
      y[size_t(r)] = rt::Tensor::empty(recv.shape(), recv.dtype(), dev);
      copy_on(compute.handle(), dev.id, y[size_t(r)], recv);
      const deepep::DispatchResult& routed = r == 2 ? d[1] : d[size_t(r)];
      cmb[size_t(r)] = gpu.combine(y[size_t(r)], *routed.handle, routed.recv_topk_weights,
                                   deepep::Event::record(compute.handle(), dev.id), true);
      EP_CHECK(cmb[size_t(r)].event.on_device(), "round ", r, ": the combine's event");
    }
    cmb.back().event.wait();
    EP_CHECK(cmb.back().event.query(), "a waited event is complete");
    compute.synchronize();

    const rt::Tensor sum_back = sum_d.to(rt::Device::cpu());
    for (int i = 0; i < 64; ++i) {
      float want = 0;
      for (int q = 0; q < ranks; ++q) want += float(q * 100 + i);
      EP_CHECK(sum_back.data_as<float>()[i] == want, "all_reduce element ", i);
    }
    std::vector<deepep::DispatchResult> dc(kRounds);
    for (int r = 0; r < kRounds; ++r) {
      const MoeCase c = round_case(r);
      deepep::DispatchArgs a;
      a.x = c.x_bf16(me);
      if (r == 2) {
        a.handle = dc[1].handle;
      } else {
        a.topk_idx = c.topk_tensor(me);
        a.topk_weights = c.weights_tensor(me);
        a.num_experts = base.experts;
      }
      dc[size_t(r)] = cpu.dispatch(a);
      expect_same(dc[size_t(r)].recv_x, d[size_t(r)].recv_x, "recv_x");
      expect_same(dc[size_t(r)].recv_x, snap[size_t(r)], "recv_x as the caller's stream saw it after the event");
      expect_same(dc[size_t(r)].recv_topk_idx, d[size_t(r)].recv_topk_idx, "recv_topk_idx");
      expect_same(dc[size_t(r)].recv_topk_weights, d[size_t(r)].recv_topk_weights, "recv_topk_weights");
      const deepep::DispatchResult& routed = r == 2 ? dc[1] : dc[size_t(r)];
      const deepep::CombineResult cc = cpu.combine(dc[size_t(r)].recv_x, *routed.handle, routed.recv_topk_weights);
      expect_same(cc.combined_x, cmb[size_t(r)].combined_x, "combined_x");
      expect_same(cc.combined_topk_weights, cmb[size_t(r)].combined_topk_weights, "combined_topk_weights");
    }
  }));
}

TEST(DeepEPGpu, AsyncDispatchCombineWithEventsTwoRanks) {
  REQUIRE_GPU();
  async_rounds_like_cpu(2);
}

TEST(DeepEPGpu, AsyncDispatchCombineWithEventsThreeRanks) {
  REQUIRE_GPU();
  async_rounds_like_cpu(3);
}

// The device-timeout tests' setting on each rank: a GPU Buffer with a 1.5 s timeout, a stream for
// holding work back, and a dispatch and a combine done (the handle serves the combines).
struct TimeoutCase {
  rt::Device dev;
  deepep::Buffer gpu;
  rt::CudaStream compute;
  deepep::DispatchArgs a;
  deepep::DispatchResult d;
  TimeoutCase(const std::shared_ptr<deepep::Group>& g, const MoeCase& c)
      : dev(device_of(g->rank())), gpu(g, 8 << 20, 0, false, short_timeout(g->rank())), compute(dev.id, true) {
    a.x = c.x_bf16(g->rank()).to(dev);
    a.topk_idx = c.topk_tensor(g->rank()).to(dev);
    a.num_experts = c.experts;
    d = gpu.dispatch(a);
    // Loads the combine kernels now: loading a module waits for the device's queued work (CUDA's
    // implicit synchronization), so a first combine behind the tests' spin would hold its caller.
    gpu.combine(d.recv_x, *d.handle);
  }
  static deepep::CommOptions short_timeout(int rank) {
    deepep::CommOptions o = gpu_options(rank);
    o.timeout = std::chrono::milliseconds(1500);
    return o;
  }
};

// A rank whose combine is held back on its device (previous_event after a spin longer than the
// timeout) while the other's waits for its rows: that one gets the clear timeout error from the
// device wait, naming the late rank, and its communicator is broken. The late rank's combine
// completes (its peer's rows were in its window before the peer gave up) and neither the call nor
// its event waits for the peer; its next operation raises the peer's failure.
TEST(DeepEPGpu, LateRankIsADeviceTimeout) {
  REQUIRE_GPU();
  const MoeCase c = make(2, 8, 4, Routing::Uniform, 256);
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    TimeoutCase t(g, c);
    if (g->rank() == 1) {
      spin(t.compute.handle(), t.dev.id, 4000);
      const auto start = std::chrono::steady_clock::now();
      const deepep::CombineResult late =
          t.gpu.combine(t.d.recv_x, *t.d.handle, {}, deepep::Event::record(t.compute.handle(), t.dev.id), true);
      EP_CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1000),
               "the late rank's call queues its work without waiting for it");
      late.event.wait();
      // Each token comes back once from every rank it went to: x times that count (exact in bf16, at most 2).
      const rt::Tensor got = late.combined_x.to(rt::Device::cpu());
      const std::vector<int64_t> idx = c.topk_idx(1);
      for (int64_t tok = 0; tok < c.tokens(1); ++tok) {
        std::vector<bool> went(2, false);
        for (int k = 0; k < c.topk; ++k)
          if (const int64_t e = idx[size_t(tok * c.topk + k)]; e >= 0) went[size_t(c.owner(e))] = true;
        const float copies = float(went[0]) + float(went[1]);
        for (int h = 0; h < c.hidden; ++h) {
          const float x = tl::bfloat16_t::from_float(c.value(1, tok, h)).to_float();
          EP_CHECK(got.data_as<tl::bfloat16_t>()[tok * c.hidden + h].to_float() == copies * x,
                   "the late rank's combined row ", tok, " column ", h);
        }
      }
      g->barrier("the late rank's combine is done");
      expect_throws([&] { t.gpu.comm().barrier(); }, "rank 1's data did not arrive",
                    "the late rank's next operation");
    } else {
      expect_throws([&] { t.gpu.combine(t.d.recv_x, *t.d.handle); }, "rank 1's data did not arrive",
                    "a combine whose peer is held back beyond the timeout");
      g->barrier("the late rank's combine is done");  // it still writes into this rank's window until then
      expect_throws([&] { t.gpu.dispatch(t.a); }, "broken", "a dispatch on the broken communicator");
    }
  }));
}

// Work queued after a call that timed out on the device: that rank's later kernels skip their
// waits and write nothing, so none of its events may report success -- each wait raises the timeout
// (sticky). Rank 1 holds its three combines back past the timeout; rank 0 queues three without
// waiting. Rank 1's first combine finds rank 0's rows there; its second waits in vain for rank 0 to
// read the first (rank 0 gave up) and times out too.
TEST(DeepEPGpu, DeviceTimeoutIsStickyForQueuedWork) {
  REQUIRE_GPU();
  const MoeCase c = make(2, 8, 4, Routing::Uniform, 256);
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    TimeoutCase t(g, c);
    deepep::Event after;
    if (me == 1) {
      spin(t.compute.handle(), t.dev.id, 4000);
      after = deepep::Event::record(t.compute.handle(), t.dev.id);
    }
    std::vector<deepep::Event> events;
    for (int i = 0; i < 3; ++i) events.push_back(t.gpu.combine(t.d.recv_x, *t.d.handle, {}, after, true).event);
    for (int i = me == 1 ? 1 : 0; i < 3; ++i)
      expect_throws([&] { events[size_t(i)].wait(); }, "data did not arrive",
                    rt::str("rank ", me, "'s combine ", i, " after the timeout"));
    g->barrier("every rank's queued work has run");
  }));
}

// The collectives' phases meet at device barriers (DevicePlane::device_barrier), with no host step
// between them: a rank whose all_reduce is held back on its device (a spin on the legacy default
// stream, which the communication stream follows) past the timeout gives the punctual rank the
// clear device timeout, naming it, well before the late rank's work runs; the late rank then times
// out at its next barrier (the punctual one gave up and raises no more) with the same error. Nothing
// hangs, and neither result is taken as valid.
TEST(DeepEPGpu, LateRankInAllReduceIsADeviceTimeout) {
  REQUIRE_GPU();
  const MoeCase c = make(2, 8, 4, Routing::Uniform, 256);
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    TimeoutCase t(g, c);
    rt::Tensor v = rt::Tensor::empty({4096}, rt::DType::F32);
    for (int64_t i = 0; i < 4096; ++i) v.data_as<float>()[i] = float(i + g->rank());
    const rt::Tensor d = v.to(t.dev);
    deepep::all_reduce(t.gpu.comm(), d);  // loads the collectives' kernels (a load waits for the device)
    spin(t.compute.handle(), t.dev.id, 1);  // and the spin's
    t.compute.synchronize();
    g->barrier("kernels loaded");
    if (g->rank() == 1) spin(rt::CuStream{}, t.dev.id, 4000);
    const auto start = std::chrono::steady_clock::now();
    expect_throws([&] { deepep::all_reduce(t.gpu.comm(), d); }, "data did not arrive",
                  rt::str("rank ", g->rank(), "'s all_reduce with rank 1 held back"));
    if (g->rank() == 0)
      EP_CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(3500),
               "the punctual rank's error comes from its device timeout (1.5 s), not after the late rank's spin");
  }));
}

// The Event API without device work: CPU calls return complete events (async_finish changes
// nothing there) with the synchronous calls' results; a device that does not exist is a clear error
// (runs without a GPU; with one, a recorded event completes).
TEST(DeepEPGpu, EventsOfCpuCallsAreComplete) {
  const deepep::Event none;
  EXPECT_FALSE(none.on_device());
  EXPECT_TRUE(none.query());
  none.wait();
  none.stream_wait(nullptr);
  const MoeCase c = make(2, 8, 4, Routing::Uniform, 64);
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    deepep::Buffer cpu(g, 8 << 20, 0, false, test_options());
    deepep::DispatchArgs a = c.dispatch_args(me, false, 1);
    const deepep::DispatchResult sync = cpu.dispatch(a);
    a.async_finish = true;
    a.previous_event = deepep::Event();
    const deepep::DispatchResult async = cpu.dispatch(a);
    EP_CHECK(!async.event.on_device() && async.event.query(), "a CPU dispatch's event is complete");
    EP_CHECK(std::memcmp(sync.recv_x.data(), async.recv_x.data(), size_t(sync.recv_x.nbytes())) == 0, "recv_x");
    const deepep::CombineResult cs = cpu.combine(sync.recv_x, *sync.handle, sync.recv_topk_weights);
    const deepep::CombineResult ca =
        cpu.combine(async.recv_x, *async.handle, async.recv_topk_weights, deepep::Event(), true);
    EP_CHECK(!ca.event.on_device() && ca.event.query(), "a CPU combine's event is complete");
    EP_CHECK(std::memcmp(cs.combined_x.data(), ca.combined_x.data(), size_t(cs.combined_x.nbytes())) == 0,
             "combined_x");
    expect_throws([] { deepep::Event::record(nullptr, -1); }, "no CUDA device -1", "an event on device -1");
    if (deepep_test::visible_gpus() == 0) {
      expect_throws([] { deepep::Event::record(nullptr, 0); }, "no CUDA device 0", "an event without a GPU");
    } else {
      const deepep::Event e = deepep::Event::record(nullptr, 0);
      e.wait();
      EP_CHECK(e.on_device() && e.query(), "a recorded event on an idle stream completes");
    }
  }));
}

// A GPU low-latency dispatch against the CPU path's, bit for bit (rows past an expert's count are
// undefined on both paths: only the received ones are compared).
void expect_dispatch_like_cpu(const MoeCase& c, bool fp8, const deepep::LowLatencyDispatchResult& dc,
                              const deepep::LowLatencyDispatchResult& dg) {
  const int Le = c.experts / c.ranks, M = c.ranks * c.max_tokens;
  expect_same(dc.recv_count, dg.recv_count, "recv_count");
  expect_same(dc.handle->recv_layout_range, dg.handle->recv_layout_range, "recv_layout_range");
  expect_same(dc.handle->recv_src_info, dg.handle->recv_src_info, "recv_src_info");
  const rt::Tensor gx = dg.recv_x.to(rt::Device::cpu());
  const rt::Tensor gs = fp8 ? dg.recv_x_scales.to(rt::Device::cpu()) : rt::Tensor();
  const int64_t row = dc.recv_x.nbytes() / (int64_t(Le) * M), srow = fp8 ? c.hidden / 128 * 4 : 0;
  for (int le = 0; le < Le; ++le)
    for (int64_t i = 0; i < dc.recv_count.data_as<int32_t>()[le]; ++i) {
      const int64_t at = int64_t(le) * M + i;
      EP_CHECK(std::memcmp(static_cast<const uint8_t*>(dc.recv_x.data()) + at * row,
                           static_cast<const uint8_t*>(gx.data()) + at * row, size_t(row)) == 0,
               "recv_x of expert ", le, " row ", i);
      if (fp8)
        EP_CHECK(std::memcmp(static_cast<const uint8_t*>(dc.recv_x_scales.data()) + at * srow,
                             static_cast<const uint8_t*>(gs.data()) + at * srow, size_t(srow)) == 0,
                 "recv_x_scales of expert ", le, " row ", i);
    }
}

// One round's inputs of a rank: routing and rows (data_seed moves with the round), the expert
// outputs combine sends back, and their copies on the rank's device.
struct LowLatencyRound {
  rt::Tensor x, idx, w, y, xd, idxd, wd, yd;
  LowLatencyRound(const MoeCase& c, int me, int round, const rt::Device& dev) {
    MoeCase cr = c;
    cr.data_seed = c.seed + uint64_t(round) * 13;
    x = cr.x_bf16(me);
    idx = cr.topk_tensor(me);
    w = cr.weights_tensor(me);
    y = random_bf16({c.experts / c.ranks, c.ranks * c.max_tokens, c.hidden}, test_seed() + uint64_t(me * 31 + round));
    xd = x.to(dev);
    idxd = idx.to(dev);
    wd = w.to(dev);
    yd = y.to(dev);
  }
};

// The low-latency tests' usual case: 2 ranks, 8 experts, top-3, hidden 256, up to 40 tokens.
MoeCase two_rank_low_latency_case() {
  MoeCase c = make(2, 8, 3, Routing::Uniform, 256);
  c.max_tokens = 40;
  return c;
}

// A rank's Buffers for comparing the GPU low-latency path with the CPU one, sized for c, and a
// stream for queued calls (destroyed before the Buffers, on purpose: their destructor must not use it).
struct LowLatencyBuffers {
  deepep::Buffer cpu, gpu;
  rt::CudaStream stream;
  LowLatencyBuffers(const std::shared_ptr<deepep::Group>& g, const MoeCase& c)
      : cpu(g, 0, deepep::Buffer::low_latency_size_hint(c.max_tokens, c.hidden, c.ranks, c.experts), true,
            test_options()),
        gpu(g, 0, deepep::Buffer::low_latency_size_hint(c.max_tokens, c.hidden, c.ranks, c.experts), true,
            gpu_options(g->rank())),
        stream(device_of(g->rank()).id, true) {}
};

// Runs `body` on c.ranks ranks, each with its rank, its device and its LowLatencyBuffers.
void on_low_latency_ranks(const MoeCase& c,
                          const std::function<void(LowLatencyBuffers& b, int me, const rt::Device& dev)>& body) {
  expect_all_ok(run_ranks(c.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    LowLatencyBuffers b(g, c);
    body(b, g->rank(), device_of(g->rank()));
  }));
}

// Low-latency dispatch and combine on the GPU (kernels signalling through the windows) against the
// CPU path (checked against the reference in low_latency_test.cc), bit for bit: every round a
// dispatch (FP8 or BF16, with or without the receive hook) and a combine of the same rows. Queued:
// the GPU calls go on a user stream (Buffer::set_low_latency_stream), every round's dispatch and
// combine back to back without a host step, then one synchronization and the comparisons.
void low_latency_like_cpu(const MoeCase& c, bool fp8, bool hook, int rounds, bool queued = false) {
  on_low_latency_ranks(c, [&](LowLatencyBuffers& b, int me, const rt::Device& dev) {
    deepep::Buffer &cpu = b.cpu, &gpu = b.gpu;
    if (queued) gpu.set_low_latency_stream(b.stream.handle());
    std::vector<LowLatencyRound> in;
    std::vector<deepep::LowLatencyDispatchResult> dgs;
    std::vector<deepep::LowLatencyCombineResult> cgs;
    for (int round = 0; round < rounds; ++round) {
      in.emplace_back(c, me, round, dev);
      const LowLatencyRound& r = in.back();
      dgs.push_back(gpu.low_latency_dispatch(r.xd, r.idxd, c.max_tokens, c.experts, fp8, hook));
      EP_CHECK(bool(dgs.back().hook) == hook, "hook returned: ", bool(dgs.back().hook));
      if (hook) {
        dgs.back().hook();
        dgs.back().hook();  // idempotent
      }
      cgs.push_back(gpu.low_latency_combine(r.yd, r.idxd, r.wd, *dgs.back().handle, hook));
      if (hook) cgs.back().hook();
      if (!queued) gpu.synchronize_low_latency();  // a no-op wait: the calls were synchronous
    }
    if (queued) gpu.synchronize_low_latency();
    for (int round = 0; round < rounds; ++round) {
      const LowLatencyRound& r = in[size_t(round)];
      const deepep::LowLatencyDispatchResult dc = cpu.low_latency_dispatch(r.x, r.idx, c.max_tokens, c.experts, fp8);
      expect_dispatch_like_cpu(c, fp8, dc, dgs[size_t(round)]);
      const deepep::LowLatencyCombineResult cc = cpu.low_latency_combine(r.y, r.idx, r.w, *dc.handle);
      expect_same(cc.combined_x, cgs[size_t(round)].combined_x, "combined_x");
    }
  });
}

TEST(DeepEPGpu, LowLatencyBf16TwoRanks) {
  REQUIRE_GPU();
  const MoeCase c = two_rank_low_latency_case();
  low_latency_like_cpu(c, false, false, 2);
}

TEST(DeepEPGpu, LowLatencyFp8FourRanksWithEmptyRankAndHook) {
  REQUIRE_GPU();
  MoeCase c = make(4, 16, 4, Routing::Uniform, 384);
  c.max_tokens = 40;
  c.zero_tokens_rank = true;
  low_latency_like_cpu(c, true, true, 2);
}

TEST(DeepEPGpu, LowLatencyFp8EightRanks) {
  REQUIRE_GPU();
  MoeCase c = make(8, 32, 8, Routing::Uniform, 256);
  c.max_tokens = 32;
  low_latency_like_cpu(c, true, false, 2);
}

TEST(DeepEPGpu, LowLatencyQueuedOnAStream) {
  REQUIRE_GPU();
  const MoeCase c = two_rank_low_latency_case();
  low_latency_like_cpu(c, true, false, 4, true);
}

TEST(DeepEPGpu, LowLatencyQueuedThreeRanksWithHooks) {
  REQUIRE_GPU();
  MoeCase c = make(3, 12, 4, Routing::Uniform, 256);
  c.max_tokens = 40;
  c.zero_tokens_rank = true;
  low_latency_like_cpu(c, false, true, 3, true);
}

// A dispatch and a combine captured in a CUDA graph and replayed with new rows written in place:
// each replay numbers its operations anew on the device and matches the CPU path. Then an invalid
// top-k index on one rank, queued: every rank raises it at the synchronization, and the Buffer
// still works.
TEST(DeepEPGpu, LowLatencyCapturedInACudaGraph) {
  REQUIRE_GPU();
  const MoeCase c = two_rank_low_latency_case();
  on_low_latency_ranks(c, [&](LowLatencyBuffers& b, int me, const rt::Device& dev) {
    deepep::Buffer &cpu = b.cpu, &gpu = b.gpu;
    const rt::CudaStream& stream = b.stream;
    gpu.set_low_latency_stream(stream.handle());
    const LowLatencyRound r0(c, me, 0, dev);
    {  // the first calls compile the kernels and fill the output pool
      const auto d = gpu.low_latency_dispatch(r0.xd, r0.idxd, c.max_tokens, c.experts, true);
      gpu.low_latency_combine(r0.yd, r0.idxd, r0.wd, *d.handle);
      gpu.synchronize_low_latency();
    }
    deepep::LowLatencyDispatchResult d;
    deepep::LowLatencyCombineResult cmb;
    const rt::CudaGraph graph(stream.handle(), dev.id, [&] {
      d = gpu.low_latency_dispatch(r0.xd, r0.idxd, c.max_tokens, c.experts, true);
      cmb = gpu.low_latency_combine(r0.yd, r0.idxd, r0.wd, *d.handle);
    });
    for (int round = 1; round <= 3; ++round) {
      const LowLatencyRound r(c, me, round, dev);
      rt::cuda_copy_to_device(dev.id, reinterpret_cast<rt::CuDevicePtr>(r0.xd.data()), r.x.data(), size_t(r.x.nbytes()));
      rt::cuda_copy_to_device(dev.id, reinterpret_cast<rt::CuDevicePtr>(r0.idxd.data()), r.idx.data(),
                              size_t(r.idx.nbytes()));
      rt::cuda_copy_to_device(dev.id, reinterpret_cast<rt::CuDevicePtr>(r0.wd.data()), r.w.data(), size_t(r.w.nbytes()));
      rt::cuda_copy_to_device(dev.id, reinterpret_cast<rt::CuDevicePtr>(r0.yd.data()), r.y.data(), size_t(r.y.nbytes()));
      graph.launch(stream.handle());
      gpu.synchronize_low_latency();
      const deepep::LowLatencyDispatchResult dc = cpu.low_latency_dispatch(r.x, r.idx, c.max_tokens, c.experts, true);
      expect_dispatch_like_cpu(c, true, dc, d);
      expect_same(cpu.low_latency_combine(r.y, r.idx, r.w, *dc.handle).combined_x, cmb.combined_x, "combined_x");
    }

    rt::Tensor bad = c.topk_tensor(me);
    if (me == 1) bad.data_as<int64_t>()[4] = c.experts;
    const rt::Tensor bad_d = bad.to(dev);  // alive until the stream has run the call
    gpu.low_latency_dispatch(r0.xd, bad_d, c.max_tokens, c.experts, true);  // returns: queued
    expect_throws([&] { gpu.synchronize_low_latency(); }, "rank 1 passed an invalid topk_idx",
                  "a queued dispatch with an invalid expert on rank 1");
    const LowLatencyRound r(c, me, 0, dev);
    const auto again = gpu.low_latency_dispatch(r.xd, r.idxd, c.max_tokens, c.experts, true);
    gpu.synchronize_low_latency();
    expect_dispatch_like_cpu(c, true, cpu.low_latency_dispatch(r.x, r.idx, c.max_tokens, c.experts, true), again);
  });
}

// Queued calls of the same kind back to back (two dispatches, then a combine of the second): a rank
// one call ahead must not overwrite flags its peer has not read (the flags alternate like the
// stagings). Every call against the CPU path.
TEST(DeepEPGpu, LowLatencyQueuedTwoDispatchesInARow) {
  REQUIRE_GPU();
  const MoeCase c = two_rank_low_latency_case();
  on_low_latency_ranks(c, [&](LowLatencyBuffers& b, int me, const rt::Device& dev) {
    b.gpu.set_low_latency_stream(b.stream.handle());
    std::vector<LowLatencyRound> in;
    std::vector<deepep::LowLatencyDispatchResult> first, second;
    std::vector<deepep::LowLatencyCombineResult> combined;
    for (int round = 0; round < 3; ++round) {
      in.emplace_back(c, me, 2 * round, dev);
      in.emplace_back(c, me, 2 * round + 1, dev);
      const LowLatencyRound &r1 = in[in.size() - 2], &r2 = in.back();
      first.push_back(b.gpu.low_latency_dispatch(r1.xd, r1.idxd, c.max_tokens, c.experts, true));
      second.push_back(b.gpu.low_latency_dispatch(r2.xd, r2.idxd, c.max_tokens, c.experts, false));
      combined.push_back(b.gpu.low_latency_combine(r2.yd, r2.idxd, r2.wd, *second.back().handle));
    }
    b.gpu.synchronize_low_latency();
    for (int round = 0; round < 3; ++round) {
      const LowLatencyRound &r1 = in[size_t(2 * round)], &r2 = in[size_t(2 * round + 1)];
      expect_dispatch_like_cpu(c, true, b.cpu.low_latency_dispatch(r1.x, r1.idx, c.max_tokens, c.experts, true),
                               first[size_t(round)]);
      const deepep::LowLatencyDispatchResult d2 = b.cpu.low_latency_dispatch(r2.x, r2.idx, c.max_tokens, c.experts, false);
      expect_dispatch_like_cpu(c, false, d2, second[size_t(round)]);
      expect_same(b.cpu.low_latency_combine(r2.y, r2.idx, r2.w, *d2.handle).combined_x, combined[size_t(round)].combined_x,
                  "combined_x");
    }
  });
}

// A queued call that a rank's own input check rejects: that rank raises at once and its queued path
// is broken from then on (its calls no longer match its peers'): the next call says so; the peer,
// whose call waits for it, gets the timeout error at its synchronization.
TEST(DeepEPGpu, LowLatencyQueuedInputErrorBreaksThePath) {
  REQUIRE_GPU();
  const MoeCase c = two_rank_low_latency_case();
  expect_all_ok(run_ranks(c.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    const rt::Device dev = device_of(me);
    deepep::CommOptions o = gpu_options(me);
    o.timeout = std::chrono::milliseconds(3000);
    deepep::Buffer gpu(g, 0, deepep::Buffer::low_latency_size_hint(c.max_tokens, c.hidden, c.ranks, c.experts), true, o);
    rt::CudaStream stream(dev.id, true);
    gpu.set_low_latency_stream(stream.handle());
    const LowLatencyRound r(c, me, 0, dev);
    gpu.low_latency_dispatch(r.xd, r.idxd, c.max_tokens, c.experts, true);  // the first call agrees
    gpu.synchronize_low_latency();
    if (me == 1) {
      expect_throws([&] { gpu.low_latency_dispatch(r.xd, r.idxd, 1, c.experts, true); }, "max_tokens_per_rank=1",
                    "a dispatch with more tokens than max_tokens_per_rank");
      expect_throws([&] { gpu.low_latency_dispatch(r.xd, r.idxd, c.max_tokens, c.experts, true); },
                    "no longer match its peers", "the call after the broken one");
    } else {
      gpu.low_latency_dispatch(r.xd, r.idxd, c.max_tokens, c.experts, true);
      expect_throws([&] { gpu.synchronize_low_latency(); }, "rank 1's data did not arrive",
                    "a queued dispatch whose peer never sent");
    }
  }));
}

// Invalid top-k indices on one rank: every rank reports that rank, and the Buffer still works; a
// window too small for the call is the same error everywhere before anything moves.
TEST(DeepEPGpu, LowLatencyErrors) {
  REQUIRE_GPU();
  const MoeCase c = two_rank_low_latency_case();
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    const rt::Device dev = device_of(me);
    const rt::Tensor x = c.x_bf16(me).to(dev);
    deepep::Buffer buf(g, 0, 8 << 20, true, gpu_options(me));
    rt::Tensor idx = c.topk_tensor(me);
    if (me == 1) idx.data_as<int64_t>()[4] = c.experts;
    expect_throws([&] { buf.low_latency_dispatch(x, idx.to(dev), c.max_tokens, c.experts, true); },
                  "rank 1 passed an invalid topk_idx",
                  rt::str("a low-latency dispatch with expert ", c.experts, " of ", c.experts));
    // Still usable: the next dispatch's counts are every rank's (token, expert) pairs for this rank.
    const deepep::LowLatencyDispatchResult d =
        buf.low_latency_dispatch(x, c.topk_tensor(me).to(dev), c.max_tokens, c.experts, false);
    const int Le = c.experts / c.ranks;
    const rt::Tensor counts = d.recv_count.to(rt::Device::cpu());
    for (int le = 0; le < Le; ++le) {
      int want = 0;
      for (int s = 0; s < c.ranks; ++s)
        for (int64_t e : c.topk_idx(s)) want += e == int64_t(me) * Le + le;
      EP_CHECK(counts.data_as<int32_t>()[le] == want, "recv_count[", le, "] = ", counts.data_as<int32_t>()[le],
               ", want ", want);
    }
    deepep::Buffer small(g, 0, 4096, true, gpu_options(me));
    expect_throws([&] { small.low_latency_dispatch(x, c.topk_tensor(me).to(dev), c.max_tokens, c.experts, false); },
                  "device window (4096 bytes per rank", "a low-latency dispatch through a 4 KiB window");
  }));
}

// all_reduce against a float64 reference, with a window small enough to take several chunks; 3 and
// 8 ranks push to their peers in rotated orders (gpu_collectives.cc).
void all_reduce_in_chunks(int ranks) {
  expect_all_ok(run_ranks(ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank(), R = g->size();
    deepep::CommOptions o = gpu_options(me);
    o.device_window_bytes = 64 << 10;  // 32 KiB per chunk
    deepep::Comm comm(g, o);
    const rt::Device dev = device_of(me);
    auto value = [](int r, int64_t i) { return float(std::sin(double(i) * 0.37 + r * 1.3) * (r + 1)); };
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(50001)}) {
      for (rt::DType dt : {rt::DType::F32, rt::DType::BF16}) {
        rt::Tensor t = rt::Tensor::empty({n}, dt);
        for (int64_t i = 0; i < n; ++i) {
          if (dt == rt::DType::F32)
            t.data_as<float>()[i] = value(me, i);
          else
            t.data_as<tl::bfloat16_t>()[i] = tl::bfloat16_t::from_float(value(me, i));
        }
        const rt::Tensor d = t.to(dev);
        deepep::all_reduce(comm, d);
        const rt::Tensor back = d.to(rt::Device::cpu());
        for (int64_t i = 0; i < n; ++i) {
          double want = 0, mag = 0;
          for (int r = 0; r < R; ++r) {
            const double v = dt == rt::DType::F32 ? value(r, i) : tl::bfloat16_t::from_float(value(r, i)).to_float();
            want += v;
            mag += std::fabs(v);
          }
          const double got = dt == rt::DType::F32 ? back.data_as<float>()[i] : back.data_as<tl::bfloat16_t>()[i].to_float();
          const double tol = (dt == rt::DType::F32 ? 1e-6 : 8e-3) * (mag + 1e-3);
          EP_CHECK(std::fabs(got - want) <= tol, rt::name(dt), "[", n, "] element ", i, ": got ", got, " want ", want);
        }
      }
    }
    // Max over int32, exact.
    rt::Tensor m = rt::Tensor::empty({777}, rt::DType::I32);
    for (int64_t i = 0; i < 777; ++i) m.data_as<int32_t>()[i] = int32_t((i * 31 + me * 977) % 1013) - 500;
    const rt::Tensor md = m.to(dev);
    deepep::all_reduce(comm, md, deepep::ReduceOp::Max);
    const rt::Tensor mb = md.to(rt::Device::cpu());
    for (int64_t i = 0; i < 777; ++i) {
      int32_t want = INT32_MIN;
      for (int r = 0; r < R; ++r) want = std::max(want, int32_t((i * 31 + r * 977) % 1013) - 500);
      EP_CHECK(mb.data_as<int32_t>()[i] == want, "max element ", i);
    }
  }));
}

TEST(DeepEPGpu, AllReduceInChunks) {
  REQUIRE_GPU();
  for (int ranks : {2, 3}) all_reduce_in_chunks(ranks);
}

// Apart, so that the memory checker's run (gpu_check.sh) can leave it out: eight ranks under it start
// slower than the tests' 20 s communicator timeout (stop 25).
TEST(DeepEPGpu, AllReduceInChunksEightRanks) {
  REQUIRE_GPU();
  all_reduce_in_chunks(8);
}

// The other collectives of CUDA tensors against the CPU path on the same inputs, bit for bit
// (reduce_scatter against the CPU's direct algorithm, which also reduces in rank order), through a
// 64 KiB window so that the larger sizes take many rounds.
TEST(DeepEPGpu, CollectivesLikeCpu) {
  REQUIRE_GPU();
  for (int ranks : {2, 3, 8}) {
    expect_all_ok(run_ranks(ranks, [&](const std::shared_ptr<deepep::Group>& g) {
      const int me = g->rank(), R = g->size();
      deepep::CommOptions o = gpu_options(me);
      o.device_window_bytes = 64 << 10;
      deepep::Comm gpu(g, o), cpu(g, test_options());
      const rt::Device dev = device_of(me);
      auto filled = [&](int64_t n, rt::DType dt, uint64_t salt) {
        rt::Tensor t = rt::Tensor::empty({n}, dt);
        std::mt19937_64 gen(test_seed() + salt * 1000003 + uint64_t(me));
        for (int64_t i = 0; i < t.nbytes(); ++i) static_cast<uint8_t*>(t.data())[i] = uint8_t(gen() >> 56);
        if (dt == rt::DType::F32)  // finite values, so the reductions compare bit for bit
          for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = float(int64_t(gen() % 20001) - 10000) / 64.0f;
        if (dt == rt::DType::BF16)
          for (int64_t i = 0; i < n; ++i)
            t.data_as<tl::bfloat16_t>()[i] = tl::bfloat16_t::from_float(float(int64_t(gen() % 2001) - 1000) / 8.0f);
        return t;
      };
      auto empty_like = [&](int64_t n, rt::DType dt) { return rt::Tensor::empty({n}, dt); };
      for (int64_t n : {int64_t(1), int64_t(1000), int64_t(50001)}) {
        // all_gather, all_to_all, broadcast of int32 (any bytes move).
        const rt::Tensor in = filled(n * R, rt::DType::I32, uint64_t(n));
        rt::Tensor out_c = empty_like(n * R, rt::DType::I32), out_g = out_c.to(dev);
        const rt::Tensor part = filled(n, rt::DType::I32, uint64_t(n) + 1);
        deepep::all_gather(cpu, out_c, part);
        deepep::all_gather(gpu, out_g, part.to(dev));
        expect_same(out_c, out_g, "all_gather");
        rt::Tensor a2a_c = empty_like(n * R, rt::DType::I32), a2a_g = a2a_c.to(dev);
        deepep::all_to_all(cpu, a2a_c, in);
        deepep::all_to_all(gpu, a2a_g, in.to(dev));
        expect_same(a2a_c, a2a_g, "all_to_all");
        rt::Tensor b_c = in.to(rt::Device::cpu()), b_g = in.to(dev);
        deepep::broadcast(cpu, b_c, R - 1);
        deepep::broadcast(gpu, b_g, R - 1);
        expect_same(b_c, b_g, "broadcast");
        // all_to_allv: rank i sends (i + 2 j) % 3 * n / 2 elements to rank j (some zero).
        auto count = [&](int i, int j) { return int64_t((i + 2 * j) % 3) * n / 2; };
        std::vector<int64_t> sc(static_cast<size_t>(R)), rc(static_cast<size_t>(R));
        int64_t st = 0, rtot = 0;
        for (int j = 0; j < R; ++j) {
          sc[size_t(j)] = count(me, j), rc[size_t(j)] = count(j, me);
          st += sc[size_t(j)], rtot += rc[size_t(j)];
        }
        const rt::Tensor vin = filled(std::max<int64_t>(st, 1), rt::DType::I32, uint64_t(n) + 2);
        rt::Tensor v_c = empty_like(std::max<int64_t>(rtot, 1), rt::DType::I32), v_g = v_c.to(dev);
        deepep::all_to_allv(cpu, v_c, rc, vin, sc);
        deepep::all_to_allv(gpu, v_g, rc, vin.to(dev), sc);
        const rt::Tensor v_back = v_g.to(rt::Device::cpu());
        EP_CHECK(std::memcmp(v_c.data(), v_back.data(), size_t(rtot) * 4) == 0, "all_to_allv");
        // reduce_scatter: sum and max of f32 and bf16.
        for (rt::DType dt : {rt::DType::F32, rt::DType::BF16})
          for (deepep::ReduceOp op : {deepep::ReduceOp::Sum, deepep::ReduceOp::Max}) {
            const rt::Tensor rin = filled(n * R, dt, uint64_t(n) + 3 + uint64_t(op));
            rt::Tensor r_c = empty_like(n, dt), r_g = r_c.to(dev);
            deepep::reduce_scatter(cpu, r_c, rin, op, deepep::Algorithm::Direct);
            deepep::reduce_scatter(gpu, r_g, rin.to(dev), op);
            expect_same(r_c, r_g, "reduce_scatter");
          }
      }
    }));
  }
}

// Bad input on the GPU path: the same clear error on every rank, and the communicator still works.
TEST(DeepEPGpu, ErrorsAreSharedAndLeaveTheBufferUsable) {
  REQUIRE_GPU();
  MoeCase c = make(2, 8, 4, Routing::Uniform, 256);
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    const rt::Device dev = device_of(me);
    // A window too small for the traffic.
    deepep::Buffer small(g, 4096, 0, false, gpu_options(me));
    deepep::DispatchArgs a;
    a.x = c.x_bf16(me).to(dev);
    a.topk_idx = c.topk_tensor(me).to(dev);
    a.num_experts = c.experts;
    expect_throws([&] { small.dispatch(a); },
                  "device window (4096 bytes per rank", "a dispatch through a 4 KiB window");
    // topk_idx on the CPU while x is on the GPU.
    deepep::DispatchArgs b = a;
    b.topk_idx = c.topk_tensor(me);
    expect_throws([&] { small.dispatch(b); }, "topk_idx is on cpu; expected cuda", "a CPU topk_idx with CUDA x");
    // Expert indices out of range, found by the routing kernel: the first in token order is named.
    deepep::Buffer buf(g, 8 << 20, 0, false, gpu_options(me));
    rt::Tensor bad = c.topk_tensor(me);
    bad.data_as<int64_t>()[9 * c.topk + 0] = -5;
    bad.data_as<int64_t>()[5 * c.topk + 2] = c.experts + 3;
    deepep::DispatchArgs e = a;
    e.topk_idx = bad.to(dev);
    expect_throws([&] { buf.dispatch(e); }, rt::str("topk_idx[5, 2] = ", c.experts + 3, " is out of range"),
                  rt::str("a dispatch with expert ", c.experts + 3, " of ", c.experts));
    // A layout of other tokens (ones that pick no expert; nearly all of these pick one).
    deepep::Buffer cpu_buf(g, 8 << 20, 0, false, test_options());
    rt::Tensor other = c.topk_tensor(me);
    std::fill_n(other.data_as<int64_t>(), other.numel(), int64_t(-1));
    const deepep::DispatchLayout wrong = cpu_buf.get_dispatch_layout(other, c.experts);
    deepep::DispatchArgs l = a;
    l.layout = &wrong;
    expect_throws([&] { buf.dispatch(l); }, "does not match topk_idx", "a dispatch with the layout of other tokens");
    // Handles used across paths: a CPU dispatch's handle with CUDA x, a GPU dispatch's with CPU x.
    deepep::DispatchArgs on_cpu = a;
    on_cpu.x = c.x_bf16(me);
    on_cpu.topk_idx = c.topk_tensor(me);
    const deepep::DispatchResult dc = cpu_buf.dispatch(on_cpu), dg = buf.dispatch(a);
    // The right layout passes its check (against the mask the routing kernel leaves in host memory).
    const deepep::DispatchLayout right = cpu_buf.get_dispatch_layout(on_cpu.topk_idx, c.experts);
    deepep::DispatchArgs with_layout = a;
    with_layout.layout = &right;
    expect_same(dc.recv_x, buf.dispatch(with_layout).recv_x, "recv_x of a dispatch with its layout");
    deepep::DispatchArgs cached;
    cached.x = a.x;
    cached.handle = dc.handle;
    expect_throws([&] { buf.dispatch(cached); },
                  "handle is from a dispatch of CPU tensors", "a GPU dispatch with a CPU dispatch's handle");
    expect_throws([&] { cpu_buf.combine(dg.recv_x.to(rt::Device::cpu()), *dg.handle); },
                  "handle is from a dispatch of GPU tensors", "a CPU combine with a GPU dispatch's handle");
    // Still usable: a small all_reduce through the same communicator.
    rt::Tensor t = rt::Tensor::empty({8}, rt::DType::F32);
    for (int i = 0; i < 8; ++i) t.data_as<float>()[i] = float(me + i);
    const rt::Tensor d = t.to(dev);
    deepep::all_reduce(small.comm(), d);
    EP_CHECK(d.to(rt::Device::cpu()).data_as<float>()[3] == 7.0f);
  }));
  // One rank passes CUDA tensors, the other CPU tensors: the ranks disagree.
  expect_all_failed_with(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
                           const int me = g->rank();
                           deepep::Buffer buf(g, 1 << 20, 0, false, gpu_options(me));
                           deepep::DispatchArgs a;
                           a.x = me == 0 ? c.x_bf16(me).to(device_of(me)) : c.x_bf16(me);
                           a.topk_idx = me == 0 ? c.topk_tensor(me).to(device_of(me)) : c.topk_tensor(me);
                           a.num_experts = c.experts;
                           buf.dispatch(a);
                         }),
                         {"disagree", "on the GPU"});
}

// The routing kernel's in_rank bits as the host reads them (runs without a GPU): bits written as a
// warp's ballot per 32 tokens and destination, unpacked to [tokens, ranks] bytes, over token counts
// that end inside a word and ranks from 1 to 8.
TEST(DeepEPGpu, RoutingMaskBitsUnpack) {
  std::mt19937 rng(20261201);
  for (int ranks : {1, 2, 3, 8}) {
    for (int64_t tokens : {int64_t(0), int64_t(1), int64_t(31), int64_t(32), int64_t(33), int64_t(1000)}) {
      const int64_t words = (tokens + 31) / 32;
      std::vector<uint8_t> want(size_t(tokens * ranks));
      for (auto& b : want) b = uint8_t(rng() % 2);
      std::vector<uint32_t> bits(size_t(ranks * words), 0);
      for (int d = 0; d < ranks; ++d)  // lane t % 32 of the ballot of the warp holding token t
        for (int64_t t = 0; t < tokens; ++t)
          if (want[size_t(t * ranks + d)]) bits[size_t(d * words + t / 32)] |= 1u << (t % 32);
      EXPECT_EQ(deepep::detail::unpack_in_rank(bits.data(), tokens, ranks), want) << ranks << " ranks, " << tokens
                                                                                 << " tokens";
    }
  }
}

// A CUDA tensor given to a communicator without a device plane (runs without a GPU: the check
// comes before any device access).
TEST(DeepEPGpu, CudaTensorsNeedADevicePlane) {
  expect_all_failed_with(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
                           deepep::Comm comm(g, test_options());
                           static float fake[4];
                           const rt::Tensor t = rt::Tensor::wrap(fake, {4}, rt::DType::F32, rt::Device::cuda(0));
                           deepep::all_reduce(comm, t);
                         }),
                         {"is on cuda:0", "CommOptions::cuda_device"});
}

// Buffer::set_num_sms: a negative count, or a Buffer without a GPU data plane, is a user error.
TEST(DeepEPGpu, NumSmsErrors) {
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
    expect_throws([&] { buf.set_num_sms(-1); }, "num_sms=-1 must be >= 0", "a negative SM count");
    expect_throws([&] { buf.set_num_sms(8); }, "has no GPU data plane", "set_num_sms on a CPU Buffer");
  }));
}

// The window regions of normal-mode dispatch and combine (kernels/normal_layout.h, shared by the
// kernels and the host's size checks): arrays one after another, 256-byte aligned, absent ones -1;
// the ranks' regions, 256-byte aligned, fit the window together (runs without a GPU).
TEST(DeepEPGpu, NormalRegionsHoldEveryArray) {
  using deepep::kernels::region_bytes;
  using deepep::kernels::region_offsets;
  EXPECT_EQ(region_bytes(8 << 20, 3) % 256, 0);
  EXPECT_LE(3 * region_bytes(8 << 20, 3), 8 << 20);
  EXPECT_GT(4 * region_bytes(8 << 20, 3), 8 << 20);
  EXPECT_EQ(region_bytes(4096, 2), 2048);
  const deepep::kernels::RegionRows dispatch = {{7168, 56 * 4, 8 * 8, 8 * 4, 4}};
  long long off[deepep::kernels::kRegionArrays];
  const long long rows = 1001, used = region_offsets(dispatch, rows, off);
  long long end = 0;
  for (int i = 0; i < deepep::kernels::kRegionArrays; ++i) {
    EXPECT_EQ(off[i] % 256, 0) << i;
    EXPECT_GE(off[i], end) << i;
    end = off[i] + rows * dispatch.bytes[i];
  }
  EXPECT_EQ(used, (end + 255) / 256 * 256);
  const deepep::kernels::RegionRows combine = {{7168 * 2, 0, 0, 0, 0}};  // bf16 rows, no weights
  EXPECT_EQ(region_offsets(combine, rows, off), (rows * 7168 * 2 + 255) / 256 * 256);
  EXPECT_EQ(off[0], 0);
  for (int i = 1; i < deepep::kernels::kRegionArrays; ++i) EXPECT_EQ(off[i], -1) << i;
  EXPECT_EQ(region_offsets(dispatch, 0, off), 0);
}

// The chunks a normal-mode operation moves rows in (normal_layout.h): every row in exactly one
// chunk, the operation's rows per chunk while they fit, and never more chunks than a source's
// share of the chunk flags (signal_layout.h) at any rank count and row count (runs without a GPU).
TEST(DeepEPGpu, NormalChunksFitTheirFlags) {
  using deepep::kernels::chunk_count;
  using deepep::kernels::chunk_rows;
  using deepep::kernels::kCombineChunkRows;
  using deepep::kernels::kDispatchChunkRows;
  EXPECT_EQ(chunk_rows(4080, 2, 8), 8);
  EXPECT_EQ(chunk_count(4080, 2, 8), 510);
  EXPECT_EQ(chunk_count(4081, 2, 8), 511);
  EXPECT_EQ(chunk_count(4081, 2, 32), 128);
  EXPECT_EQ(chunk_count(0, 2, 8), 0);
  for (long long least : {kDispatchChunkRows, kCombineChunkRows})
    for (int ranks : {1, 2, 3, 8, 72, deepep::kernels::kNormalMaxRanks})
      for (long long rows : {1ll, 7ll, 8ll, 9ll, 33ll, 4096ll, 100003ll, 1ll << 20, (1ll << 31) - 1}) {
        const long long per = chunk_rows(rows, ranks, least), chunks = chunk_count(rows, ranks, least);
        EXPECT_LE(chunks, deepep::kernels::kNormalChunkWords / ranks) << ranks << " ranks, " << rows << " rows";
        EXPECT_GE(per, least);
        EXPECT_GE(chunks * per, rows);
        EXPECT_LT((chunks - 1) * per, rows);
      }
}

// The dispatch receive's units (normal_layout.h: receive_unit) take every chunk of every source
// once, the own ones first, with sources that send nothing (the empty rank) too; and at 2 ranks
// with a grid of one block per SM (132) and more chunks of each source than blocks, every block
// gets chunks of both sources (dealt chunk-major over all ranks, each block got one source's
// only). Runs without a GPU.
TEST(DeepEPGpu, NormalReceiveUnitsTakeEveryChunkOnce) {
  using deepep::kernels::chunk_count;
  using deepep::kernels::receive_unit;
  constexpr long long kRows = deepep::kernels::kDispatchChunkRows;
  const std::vector<std::vector<long long>> cases = {
      {4096, 4096}, {0, 37}, {5, 0, 9, 0}, {1, 2, 3, 4, 5, 6, 7, 8000}, {3}};
  for (const auto& count : cases) {
    const int ranks = int(count.size());
    long long max_chunks = 0;
    for (long long n : count) max_chunks = std::max(max_chunks, chunk_count(n, ranks, kRows));
    for (int me = 0; me < ranks; ++me) {
      const long long own = chunk_count(count[size_t(me)], ranks, kRows);
      std::map<std::pair<int, long long>, int> taken;
      for (long long u = 0; u < own + max_chunks * (ranks - 1); ++u) {
        const auto unit = receive_unit(u, own, ranks, me);
        ASSERT_TRUE(unit.source >= 0 && unit.source < ranks);
        EXPECT_EQ(unit.source == me, u < own) << u;
        if (unit.chunk < chunk_count(count[size_t(unit.source)], ranks, kRows)) ++taken[{unit.source, unit.chunk}];
      }
      long long chunks = 0;
      for (int s = 0; s < ranks; ++s) chunks += chunk_count(count[size_t(s)], ranks, kRows);
      EXPECT_EQ(int64_t(taken.size()), chunks) << ranks << " ranks, rank " << me;
      for (const auto& [chunk, times] : taken) EXPECT_EQ(times, 1) << chunk.first << " " << chunk.second;
    }
  }
  const long long own = chunk_count(4096, 2, 8), units = own + chunk_count(4096, 2, 8);
  for (long long b = 0; b < 132; ++b) {
    bool mine = false, peer = false;
    for (long long u = b; u < units; u += 132) (receive_unit(u, own, 2, 0).source == 0 ? mine : peer) = true;
    EXPECT_TRUE(mine && peer) << "block " << b;
  }
}

// Operation numbers (normal_layout.h: op_reached): the same or a later one, past the wrap too, and
// never a fresh signal area's 0.
TEST(DeepEPGpu, NormalOperationNumbersOrder) {
  using deepep::kernels::op_reached;
  EXPECT_TRUE(op_reached(5, 5));
  EXPECT_TRUE(op_reached(6, 5));
  EXPECT_TRUE(op_reached(40, 5));  // agreements of other kinds in between
  EXPECT_FALSE(op_reached(4, 5));
  EXPECT_FALSE(op_reached(0, 5));
  EXPECT_TRUE(op_reached(1, 0xffffffffull));  // numbers wrap from 2^32 - 1 to 1
  EXPECT_FALSE(op_reached(0xffffffffull, 1));
  EXPECT_FALSE(op_reached(0xfffffff0ull, 3));
}

// A host model of the normal-mode signalling (kernels/intranode.cuh, "normal-mode signalling" and
// "dispatch and combine in chunks"): every rank runs dispatch_combine_like_cpu's calls, each as a
// scatter of two blocks and a receive that overlaps it, in steps any interleaving of which the GPU
// may run. A block first checks every peer's consumed word against `prev` (normal_send_begin, by
// `reached`); a dispatch's block 0 then raises its count flag in every peer; each chunk (chunk_count
// of the rows a pair moves) goes as its rows then its flag. A receive reads a chunk once its flag
// (and a dispatch's count flag) carries the call's number -- the rows there must be that call's --
// and records the number in its consumed word once it read everything, had every peer's count
// flag (a dispatch) and its scatter ended; the rows it read must still be that call's then (no
// sender overwrote them while it read). A call whose agreement failed (received = false) is a
// scatter alone: no receive follows it, so neither the consumed word nor `prev` moves, and the
// rank's next call starts once the scatter ended (stream order). Rows read as another call's, or
// overwritten before the end, count in bad_reads. run() returns false when no step can go and
// calls are left: a rank waits for good.
struct NormalSignalModel {
  struct Call {
    bool dispatch;
    uint64_t seq;
    bool received = true;  // false: the agreement failed after the scatter went out
  };
  struct Unit {
    int to;
    long long chunk;
  };
  struct Rank {
    size_t call = 0;
    uint64_t prev = 0;
    std::vector<bool> checked, counted;
    std::vector<size_t> next;                      // per block: its next unit
    std::vector<std::vector<Unit>> units;          // per block
    std::vector<std::pair<int, long long>> unread;  // (source, chunk)
  };
  static constexpr int kBlocks = 2;
  int ranks;
  std::vector<std::vector<long long>> sent;  // sent[s][d]: a dispatch's rows from s to d
  std::vector<Call> calls;
  bool (*reached)(unsigned long long have, unsigned long long want);
  std::vector<Rank> rank;
  std::vector<uint64_t> consumed;
  std::vector<std::vector<uint64_t>> count;                    // [receiver][source]
  std::map<std::tuple<int, int, long long>, uint64_t> flag, data;  // [receiver, source, chunk]
  int bad_reads = 0;

  // Rows call c moves from s into d's window: a dispatch's own rows touch no window; a combine
  // returns what d received from s, its own rows too.
  long long moved(const Call& c, int s, int d) const { return c.dispatch ? (s == d ? 0 : sent[s][d]) : sent[d][s]; }
  long long chunks(const Call& c, int s, int d) const {
    return deepep::kernels::chunk_count(
        moved(c, s, d), ranks, c.dispatch ? deepep::kernels::kDispatchChunkRows : deepep::kernels::kCombineChunkRows);
  }

  void begin(int r) {
    Rank& k = rank[size_t(r)];
    k.checked.assign(kBlocks, false);
    k.counted.assign(kBlocks, false);
    k.next.assign(kBlocks, 0);
    k.units.assign(kBlocks, {});
    k.unread.clear();
    if (k.call == calls.size()) return;
    const Call& c = calls[k.call];
    long long most = 0;
    for (int d = 0; d < ranks; ++d) most = std::max(most, chunks(c, r, d));
    int u = 0;  // chunk-major over the receivers, dealt round the blocks
    for (long long j = 0; j < most; ++j)
      for (int d = 0; d < ranks; ++d)
        if (j < chunks(c, r, d)) k.units[size_t(u++ % kBlocks)].push_back({d, j});
    if (c.received)
      for (int s = 0; s < ranks; ++s)
        for (long long j = 0; j < chunks(c, s, r); ++j) k.unread.push_back({s, j});
  }

  // One step of rank r if one can go (applied when `go`).
  bool step(int r, int which, bool go) {
    Rank& k = rank[size_t(r)];
    if (k.call == calls.size()) return false;
    const Call& c = calls[k.call];
    if (which < kBlocks) {  // a scatter block's next step
      const size_t b = size_t(which);
      if (!k.checked[b]) {
        for (int p = 0; p < ranks; ++p)
          if (p != r && k.prev != 0 && !reached(consumed[size_t(p)], k.prev)) return false;
        if (go) k.checked[b] = true;
        return true;
      }
      if (c.dispatch && b == 0 && !k.counted[b]) {
        if (go) {
          for (int d = 0; d < ranks; ++d)
            if (d != r) count[size_t(d)][size_t(r)] = c.seq;
          k.counted[b] = true;
        }
        return true;
      }
      if (k.next[b] == k.units[b].size()) return false;
      if (go) {
        const Unit u = k.units[b][k.next[b]++];
        data[{u.to, r, u.chunk}] = c.seq;
        flag[{u.to, r, u.chunk}] = c.seq;
      }
      return true;
    }
    if (which < kBlocks + int(k.unread.size())) {  // the receive reads a chunk
      const auto [s, j] = k.unread[size_t(which - kBlocks)];
      if (c.dispatch && count[size_t(r)][size_t(s)] != c.seq) return false;
      if (flag[{r, s, j}] != c.seq) return false;
      if (go) {
        if (data[std::make_tuple(r, s, j)] != c.seq) ++bad_reads;  // another call's rows
        k.unread[size_t(which - kBlocks)] = k.unread.back();
        k.unread.pop_back();
      }
      return true;
    }
    // The receive's end.
    for (size_t b = 0; b < kBlocks; ++b)
      if (!k.checked[b] || (c.dispatch && b == 0 && !k.counted[b]) || k.next[b] < k.units[b].size()) return false;
    if (!c.received) {  // the scatter alone: the next call follows it on the stream
      if (go) {
        ++k.call;
        begin(r);
      }
      return true;
    }
    if (!k.unread.empty()) return false;
    for (int s = 0; s < ranks; ++s)
      if (c.dispatch && s != r && count[size_t(r)][size_t(s)] != c.seq) return false;
    if (go) {
      for (int s = 0; s < ranks; ++s)  // what it read is still this call's: nobody overwrote it meanwhile
        for (long long j = 0; j < chunks(c, s, r); ++j)
          if (data[std::make_tuple(r, s, j)] != c.seq) ++bad_reads;
      consumed[size_t(r)] = c.seq;
      k.prev = c.seq;
      ++k.call;
      begin(r);
    }
    return true;
  }

  // Runs every call from fresh signal areas; `pick` chooses among the steps that can go, as (rank,
  // step) pairs.
  bool run(const std::function<size_t(const std::vector<std::pair<int, int>>&)>& pick) {
    rank.assign(size_t(ranks), {});
    consumed.assign(size_t(ranks), 0);
    count.assign(size_t(ranks), std::vector<uint64_t>(size_t(ranks), 0));
    flag.clear();
    data.clear();
    bad_reads = 0;
    for (int r = 0; r < ranks; ++r) begin(r);
    for (;;) {
      std::vector<std::pair<int, int>> can;
      for (int r = 0; r < ranks; ++r)
        for (int w = 0; w <= kBlocks + int(rank[size_t(r)].unread.size()); ++w)
          if (step(r, w, false)) can.push_back({r, w});
      if (can.empty()) {
        for (const Rank& k : rank)
          if (k.call < calls.size()) return false;
        return true;
      }
      const auto [r, w] = can[pick(can)];
      step(r, w, true);
    }
  }
};

// Rows rank s sends rank d in a dispatch of case c, [s][d] (what the signal model moves).
std::vector<std::vector<long long>> rows_between_ranks(const MoeCase& c) {
  std::vector<std::vector<long long>> sent(size_t(c.ranks), std::vector<long long>(size_t(c.ranks), 0));
  for (int d = 0; d < c.ranks; ++d)
    for (const auto& [s, t] : deepep_test::expected_received(c, d)) ++sent[size_t(s)][size_t(d)];
  return sent;
}

// A schedule for the signal model: which of the runnable steps goes next, drawn from the test's
// seed plus `seed`.
constexpr uint64_t kModelSchedules = 200;
std::function<size_t(const std::vector<std::pair<int, int>>&)> random_schedule(uint64_t seed) {
  auto gen = std::make_shared<std::mt19937_64>(test_seed() + seed);
  return [gen](const std::vector<std::pair<int, int>>& can) { return size_t((*gen)() % can.size()); };
}

// Every one of kModelSchedules random schedules finishes and no receive reads another call's rows.
void expect_random_schedules_finish_safely(NormalSignalModel& m) {
  for (uint64_t seed = 0; seed < kModelSchedules; ++seed) {
    EXPECT_TRUE(m.run(random_schedule(seed))) << m.ranks << " ranks, schedule " << seed;
    EXPECT_EQ(m.bad_reads, 0) << m.ranks << " ranks, schedule " << seed;
  }
}

// The 4-rank case with an empty rank (DispatchCombineFourRanksUnevenWithEmptyRank: rank 3 sends
// and receives nothing) and a 3-rank one where every pair moves rows, under random schedules and
// the one the GPU run took when it hung: rank 0 only runs when no other rank can, so rank 3, which
// waits for nobody's rows in a combine, records the combine as read before rank 0's scatter checks
// its consumed word. A check for exactly `prev` (what the scatter did) then waits for good; the
// check for `prev` or later (op_reached) finishes every schedule without a rank reading rows of
// another call. Runs without a GPU.
TEST(DeepEPGpu, NormalSignalsFinishInEverySchedule) {
  NormalSignalModel model;
  model.ranks = 4;
  model.sent = rows_between_ranks(four_ranks_with_empty_rank());
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(model.sent[3][size_t(r)], 0);
    EXPECT_EQ(model.sent[size_t(r)][3], 0);
  }
  // dispatch_combine_like_cpu's calls (dispatch, combine, combine, cached dispatch; BF16 then FP8),
  // numbered with gaps as agreements of other kinds leave them.
  for (int i = 0; i < 8; ++i) model.calls.push_back({i % 4 == 0 || i % 4 == 3, uint64_t(1 + 2 * i)});
  auto rank0_last = [](const std::vector<std::pair<int, int>>& can) {
    size_t best = 0;
    for (size_t i = 1; i < can.size(); ++i)
      if (can[i].first > can[best].first) best = i;
    return best;
  };
  model.reached = [](unsigned long long have, unsigned long long want) { return have == want; };
  EXPECT_FALSE(model.run(rank0_last)) << "the model does not hang where the GPU did";
  model.reached = deepep::kernels::op_reached;
  EXPECT_TRUE(model.run(rank0_last));
  EXPECT_EQ(model.bad_reads, 0);

  NormalSignalModel every = model;
  every.ranks = 3;
  every.sent = rows_between_ranks(make(3, 24, 4, Routing::Uniform, 256));
  for (NormalSignalModel* m : {&model, &every}) expect_random_schedules_finish_safely(*m);
}

// The same model with calls whose agreement failed after their scatter went out (a scatter alone:
// no receive, the consumed words and `prev` stay; kernels/intranode.cuh "normal-mode signalling"),
// between received ones, at 4 ranks with the empty rank and at 3: every schedule finishes, and no
// receive reads rows of another call or has them overwritten before it records the call as read.
// The check has teeth: a scatter that does not wait for the consumed words at all overwrites rows a
// receive still reads in some schedule. Runs without a GPU.
TEST(DeepEPGpu, NormalSignalsSurviveFailedAgreements) {
  NormalSignalModel four;
  four.ranks = 4;
  four.sent = rows_between_ranks(four_ranks_with_empty_rank());
  // dispatch, dispatch (failed), combine, combine (failed), combine, dispatch (failed), cached
  // dispatch, combine: numbered as the engine counts agreements, failed ones included.
  const bool kinds[] = {true, true, false, false, false, true, true, false};
  const bool received[] = {true, false, true, false, true, false, true, true};
  for (int i = 0; i < 8; ++i) four.calls.push_back({kinds[i], uint64_t(3 + i), received[i]});
  four.reached = deepep::kernels::op_reached;
  NormalSignalModel three = four;
  three.ranks = 3;
  three.sent = rows_between_ranks(make(3, 24, 4, Routing::Uniform, 256));
  for (NormalSignalModel* m : {&four, &three}) expect_random_schedules_finish_safely(*m);
  three.reached = [](unsigned long long, unsigned long long) { return true; };
  int unsafe = 0;
  for (uint64_t seed = 0; seed < kModelSchedules; ++seed) {
    three.run(random_schedule(seed));
    unsafe += three.bad_reads > 0;
  }
  EXPECT_GT(unsafe, 0) << "the model finds no overwrite even without the consumed words";
}

// Every kernel of the data plane compiles for sm_90a (NVRTC only; no GPU needed), also with the
// normal-mode timeline built in (kernels/timeline.h: bench_deepep --timeline), whose stamps then
// reach the baked-in address.
TEST(DeepEPGpu, KernelsCompileForHopper) {
  if (!deepep_test::nvrtc_usable()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  expect_all_ok(run_ranks(1, [](const std::shared_ptr<deepep::Group>&) {  // NVRTC out of this process
    rt::NvrtcOptions options;
    options.arch = "sm_90a";
    options.want_cubin = false;
    const auto sources = deepep::device_kernel_sources();
    EP_CHECK(sources.size() >= 20u, sources.size(), " kernels");
    for (const auto& [name, source] : sources) {
      const rt::NvrtcResult r = rt::compile_cuda(source, name + ".cu", deepep::device_kernel_headers(), options);
      EP_CHECK(r.ptx.find(name) != std::string::npos, name);
    }
    options.extra = {"-DDEEPEP_TIMELINE=123456789008ull"};
    for (const auto& [name, source] : sources) {
      if (name.find("scatter") == std::string::npos && name.find("receive") == std::string::npos) continue;
      const rt::NvrtcResult r = rt::compile_cuda(source, name + ".cu", deepep::device_kernel_headers(), options);
      EP_CHECK(r.ptx.find("123456789008") != std::string::npos, name, " stamps no timeline record");
    }
  }));
}

}  // namespace
