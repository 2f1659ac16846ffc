// The nccl device transport: NCCL loaded at run time (a clear error without it), the options that
// select it, its dispatch and combine kernels compiled for sm_90a, and on 2 GPUs every collective of
// CUDA tensors through NCCL against a float64 reference, dispatch and combine against the CPU path,
// their errors, Group::from_nccl and a rank killed in the middle of a call. NCCL needs one GPU per
// rank: the GPU tests skip with fewer than 2 GPUs or without libnccl.so.2.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "buffer/dispatch_plan.h"
#include "gpu_dispatch_check.h"
#include "gpu_probe.h"
#include "harness.h"
#include "tl/device/numeric.h"
#include "rt/cuda_device.h"
#include "rt/nvrtc.h"
#include "testutil/environment.h"
#include "transport/cuda_ipc/device_plane.h"
#include "transport/nccl/nccl_library.h"
#include "transport/nccl/nccl_plane.h"

namespace {

using deepep_test::dispatch_combine_like_cpu;
using deepep_test::expect_all_failed_with;
using deepep_test::expect_all_ok;
using deepep_test::expect_same;
using deepep_test::expect_throws;
using deepep_test::moe_case;
using deepep_test::MoeCase;
using deepep_test::Routing;
using deepep_test::run_ranks;
using deepep_test::test_options;
using deepep_test::test_seed;
using Clock = std::chrono::steady_clock;

using testutil::ScopedEnv;

TEST(DeepEPNccl, MissingLibraryIsAClearUserError) {
  ScopedEnv missing("DEEPEP_NCCL_LIBRARY", "libnccl-absent.so.2");
  const std::string why = deepep::nccl::unavailable_reason();
  EXPECT_NE(why.find("libnccl-absent.so.2 cannot be loaded"), std::string::npos) << why;
  EXPECT_NE(why.find("DEEPEP_NCCL_LIBRARY"), std::string::npos) << why;
  try {
    deepep::nccl::library();
    ADD_FAILURE() << "loaded a library that does not exist";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), rt::ErrorKind::User) << e.what();
  }
  // From the public API: the group (before the communicator is touched) and the device plane
  // (before CUDA is: no GPU needed), the same error on every rank.
  try {
    deepep::Group::from_nccl(reinterpret_cast<void*>(uintptr_t(0x10)));
    ADD_FAILURE() << "Group::from_nccl worked without NCCL";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL is needed"), std::string::npos) << e.what();
  }
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.cuda_device = 0;
    o.device_transport = "nccl";
    deepep::Comm comm(g, o);
  }), {"the nccl device plane: rank 0", "libnccl-absent.so.2 cannot be loaded"});
}

// The library loads and names its version (the CI machine may lack NCCL: then it skips). Asked in a
// child, like everything that may touch CUDA, so that this process can still fork ranks.
TEST(DeepEPNccl, LoadsAndReportsItsVersion) {
  if (deepep_test::ask_in_child([] { return deepep::nccl::unavailable_reason().empty() ? 0 : 1; }) != 0)
    GTEST_SKIP() << "NCCL is not usable here: " << deepep::nccl::unavailable_reason();
  expect_all_ok(run_ranks(1, [](const std::shared_ptr<deepep::Group>&) {
    const deepep::nccl::Library& l = deepep::nccl::library();
    int version = 0;
    EP_CHECK(l.ncclGetVersion(&version) == deepep::nccl::kSuccess);
    EP_CHECK(version == l.version && version >= 21000, "version ", version);
    const std::string text = l.version_string();
    EP_CHECK(text.rfind("2.", 0) == 0 && std::count(text.begin(), text.end(), '.') == 2, text);
    EP_CHECK(deepep::nccl::error_text(4).find("ncclInvalidArgument") != std::string::npos,
             deepep::nccl::error_text(4));
    expect_throws([] { deepep::nccl::check(4, "ncclAllReduce", "a test"); }, "ncclAllReduce failed (a test)",
                  "an invalid argument");
    try {
      deepep::nccl::check(6, "ncclSend", "a test");  // ncclRemoteError: the group failed, not the input
      EP_CHECK(false, "ncclRemoteError did not throw");
    } catch (const deepep::CommError&) {
    }
    EP_CHECK(deepep::nccl::reduce_type(rt::DType::BF16) == deepep::nccl::kBfloat16);
    EP_CHECK(deepep::nccl::reduce_type(rt::DType::F32) == deepep::nccl::kFloat32);
    EP_CHECK(deepep::nccl::reduce_type(rt::DType::F8E4M3) == -1);
    deepep_test::note("NCCL " + text + " from " + l.path);
  }));
}

TEST(DeepEPNccl, OptionsAreChecked) {
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.device_transport = "nccl";  // without a device
    deepep::Comm comm(g, o);
  }), {"rank 0", "device_transport 'nccl' needs this rank's GPU in CommOptions::cuda_device"});
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    if (g->rank() == 1) o.device_transport = "infiniband";
    deepep::Comm comm(g, o);
  }), {"rank 1", "device_transport='infiniband' is not a device transport (cuda_ipc, nccl)"});
  try {
    deepep::Group::from_nccl(nullptr);
    ADD_FAILURE() << "a null communicator was accepted";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the NCCL communicator is null"), std::string::npos) << e.what();
  }
}

// The kernels of dispatch and combine on this plane (kernels/nccl_normal.cuh) compile for sm_90a
// (NVRTC only; no GPU needed).
TEST(DeepEPNccl, KernelsCompileForHopper) {
  if (!deepep_test::nvrtc_usable()) GTEST_SKIP() << "NVRTC is not available: " << rt::nvrtc_error();
  expect_all_ok(run_ranks(1, [](const std::shared_ptr<deepep::Group>&) {  // NVRTC out of this process
    rt::NvrtcOptions options;
    options.arch = "sm_90a";
    options.want_cubin = false;
    const auto sources = deepep::detail::nccl_kernel_sources();
    EP_CHECK(sources.size() == 10u, sources.size(), " kernels");
    for (const auto& [name, source] : sources) {
      const rt::NvrtcResult r = rt::compile_cuda(source, name + ".cu", deepep::device_kernel_headers(), options);
      EP_CHECK(r.ptx.find(name) != std::string::npos, name);
    }
  }));
}

// --- on 2 GPUs -------------------------------------------------------------------------------------

bool nccl_gpus_present(std::string* why) {
  const int gpus = deepep_test::visible_gpus();
  if (gpus < 2) {
    *why = rt::str("NCCL needs one GPU per rank: 2 GPUs, found ", gpus);
    return false;
  }
  if (deepep_test::ask_in_child([] { return deepep::nccl::unavailable_reason().empty() ? 0 : 1; }) != 0) {
    *why = "NCCL is not usable here: " + deepep::nccl::unavailable_reason();
    return false;
  }
  return true;
}

#define REQUIRE_NCCL_GPUS()                                \
  do {                                                     \
    std::string why_skipped;                               \
    if (!nccl_gpus_present(&why_skipped)) GTEST_SKIP() << why_skipped; \
  } while (0)

deepep::CommOptions nccl_options(int rank) {
  deepep::CommOptions o = test_options();
  o.cuda_device = rank;
  o.device_transport = "nccl";
  return o;
}

// Rank r's input element i of collective `salt`: random, never zero, the same on every rank that
// computes it (the references need every rank's inputs). Rounded to bf16 when the tensor is.
double input_value(int rank, int64_t i, uint64_t salt, rt::DType dtype) {
  const uint64_t h = deepep_test::mix(test_seed(), salt, uint64_t(rank), uint64_t(i));
  const double magnitude = 0.25 + 3.75 * deepep_test::unit(h);
  const double v = (h & 1) ? magnitude : -magnitude;
  return dtype == rt::DType::BF16 ? double(tl::bfloat16_t::from_float(float(v)).to_float()) : double(float(v));
}

rt::Tensor inputs(int rank, int64_t n, uint64_t salt, rt::DType dtype, int64_t first = 0) {
  rt::Tensor t = rt::Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    const double v = input_value(rank, first + i, salt, dtype);
    if (dtype == rt::DType::F32)
      t.data_as<float>()[i] = float(v);
    else
      t.data_as<tl::bfloat16_t>()[i] = tl::bfloat16_t::from_float(float(v));
  }
  return t;
}

double element(const rt::Tensor& t, int64_t i) {
  return t.dtype() == rt::DType::F32 ? double(t.data_as<float>()[i]) : double(t.data_as<tl::bfloat16_t>()[i].to_float());
}

// An output on `device` filled with NaN bytes, so that elements NCCL does not write show.
rt::Tensor poisoned(int64_t n, rt::DType dtype, rt::Device device) {
  rt::Tensor t = rt::Tensor::empty({n}, dtype);
  std::memset(t.data(), 0xff, size_t(t.nbytes()));
  return t.to(device);
}

// `got` (a CUDA tensor) against the float64 reference want(i): sums within the rounding of the
// dtype (NCCL adds in the dtype's precision), max exactly.
void expect_close(const rt::Tensor& got_device, const std::function<double(int64_t)>& want,
                  const std::function<double(int64_t)>& magnitude, bool exact, const std::string& what) {
  const rt::Tensor got = got_device.to(rt::Device::cpu());
  const double eps = got.dtype() == rt::DType::F32 ? 1e-6 : 8e-3;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = element(got, i), w = want(i);
    EP_CHECK(exact ? g == w : std::fabs(g - w) <= eps * magnitude(i), what, " element ", i, ": got ", g, ", want ", w);
  }
}

// Every collective on 2 ranks through NCCL, f32 and bf16, sum and max, odd and large sizes.
TEST(DeepEPNcclGpu, CollectivesAgainstAFloat64Reference) {
  REQUIRE_NCCL_GPUS();
  expect_all_ok(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank(), R = g->size();
    deepep::Comm comm(g, nccl_options(me));
    EP_CHECK(comm.nccl_plane() != nullptr && comm.device_plane() == nullptr);
    EP_CHECK(comm.nccl_plane()->owns_communicator());
    const rt::Device dev = rt::Device::cuda(me);
    uint64_t salt = 0;
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1 << 20) + 3}) {
      for (rt::DType dt : {rt::DType::F32, rt::DType::BF16}) {
        for (deepep::ReduceOp op : {deepep::ReduceOp::Sum, deepep::ReduceOp::Max}) {
          const bool sum = op == deepep::ReduceOp::Sum;
          auto reduced = [&](uint64_t s, int64_t i) {
            double acc = sum ? 0 : -INFINITY;
            for (int r = 0; r < R; ++r) acc = sum ? acc + input_value(r, i, s, dt) : std::max(acc, input_value(r, i, s, dt));
            return acc;
          };
          auto magnitude = [&](uint64_t s, int64_t i) {
            double m = 0;
            for (int r = 0; r < R; ++r) m += std::fabs(input_value(r, i, s, dt));
            return m;
          };
          const std::string tag = rt::str(rt::name(dt), "[", n, "] ", deepep::name(op));
          // all_reduce, in place.
          const uint64_t s1 = ++salt;
          const rt::Tensor t = inputs(me, n, s1, dt).to(dev);
          deepep::all_reduce(comm, t, op);
          expect_close(t, [&](int64_t i) { return reduced(s1, i); }, [&](int64_t i) { return magnitude(s1, i); },
                       !sum, "all_reduce " + tag);
          // reduce_scatter: rank me gets part me of the reduction of every rank's n * R elements.
          const uint64_t s2 = ++salt;
          const rt::Tensor out = poisoned(n, dt, dev);
          deepep::reduce_scatter(comm, out, inputs(me, n * R, s2, dt).to(dev), op);
          expect_close(out, [&](int64_t i) { return reduced(s2, int64_t(me) * n + i); },
                       [&](int64_t i) { return magnitude(s2, int64_t(me) * n + i); }, !sum, "reduce_scatter " + tag);
        }
        const std::string tag = rt::str(rt::name(dt), "[", n, "]");
        // all_gather: part r is rank r's input.
        const uint64_t s3 = ++salt;
        const rt::Tensor gathered = poisoned(n * R, dt, dev);
        deepep::all_gather(comm, gathered, inputs(me, n, s3, dt).to(dev));
        expect_close(gathered, [&](int64_t i) { return input_value(int(i / n), i % n, s3, dt); }, {}, true,
                     "all_gather " + tag);
        // broadcast from rank 1.
        const uint64_t s4 = ++salt;
        const rt::Tensor b = inputs(me, n, s4, dt).to(dev);
        deepep::broadcast(comm, b, 1);
        expect_close(b, [&](int64_t i) { return input_value(1, i, s4, dt); }, {}, true, "broadcast " + tag);
        // all_to_all: part j of rank i's input is part i of rank j's output.
        const uint64_t s5 = ++salt;
        const rt::Tensor a2a = poisoned(n * R, dt, dev);
        deepep::all_to_all(comm, a2a, inputs(me, n * R, s5, dt).to(dev));
        expect_close(a2a, [&](int64_t i) { return input_value(int(i / n), int64_t(me) * n + i % n, s5, dt); }, {},
                     true, "all_to_all " + tag);
        // all_to_allv, uneven: rank i sends ((i + 2 j) % 3) * n / 2 elements to rank j, so the
        // diagonal is empty and, for n = 1, rank 1 sends rank 0 nothing.
        auto count = [&](int i, int j) { return int64_t((i + 2 * j) % 3) * n / 2; };
        std::vector<int64_t> sc(static_cast<size_t>(R)), rc(static_cast<size_t>(R)), recv_first(static_cast<size_t>(R) + 1, 0);
        int64_t sent = 0;
        for (int j = 0; j < R; ++j) {
          sc[size_t(j)] = count(me, j), rc[size_t(j)] = count(j, me);
          sent += sc[size_t(j)];
          recv_first[size_t(j) + 1] = recv_first[size_t(j)] + rc[size_t(j)];
        }
        const uint64_t s6 = ++salt;
        const int64_t received = recv_first[size_t(R)];
        const rt::Tensor v = poisoned(std::max<int64_t>(received, 1), dt, dev);
        deepep::all_to_allv(comm, v, rc, inputs(me, std::max<int64_t>(sent, 1), s6, dt).to(dev), sc);
        const rt::Tensor vb = v.to(rt::Device::cpu());
        for (int src = 0; src < R; ++src) {
          int64_t offset = 0;  // where src's piece for me starts in src's input
          for (int j = 0; j < me; ++j) offset += count(src, j);
          for (int64_t k = 0; k < rc[size_t(src)]; ++k)
            EP_CHECK(element(vb, recv_first[size_t(src)] + k) == input_value(src, offset + k, s6, dt), "all_to_allv ",
                     tag, ": element ", k, " from rank ", src);
        }
        if (received == 0) EP_CHECK(std::isnan(element(vb, 0)), "all_to_allv ", tag, " wrote into an empty output");
      }
    }
    deepep::barrier(comm);
  }));
}

// Dispatch (BF16, FP8 with scales and a layout), combine (bf16 with weights, f32 without) and a cached
// dispatch through NCCL, bit for bit as the CPU path: uniform routing, then sparse routing (rank 1's
// experts never picked, so it receives nothing, and some tokens pick no expert: their combined rows
// are 0) with the gather and reduce on one SM's blocks (Buffer::set_num_sms: each block walks many
// rows), then uneven routing with rank 1 sending no tokens.
TEST(DeepEPNcclGpu, DispatchCombineLikeCpu) {
  REQUIRE_NCCL_GPUS();
  dispatch_combine_like_cpu(moe_case(0x6e63, 2, 16, 4, Routing::Uniform, 512), nccl_options);
}

TEST(DeepEPNcclGpu, DispatchCombineSparseRankReceivesNothing) {
  REQUIRE_NCCL_GPUS();
  dispatch_combine_like_cpu(moe_case(0x6e63, 2, 16, 6, Routing::Sparse, 384), nccl_options, {}, 8 << 20, 1);
}

TEST(DeepEPNcclGpu, DispatchCombineUnevenRankSendsNothing) {
  REQUIRE_NCCL_GPUS();
  MoeCase c = moe_case(0x6e63, 2, 8, 3, Routing::Uneven, 256);
  c.zero_tokens_rank = true;
  dispatch_combine_like_cpu(c, nccl_options);
}

// Bad input on the nccl plane: a top-k index out of range on rank 1 is the same clear error on
// every rank, before anything moves; a handle of the other plane and a low-latency call (which needs
// the cuda_ipc windows) are clear errors too. Then the communicator still works: a dispatch with
// int32 top-k indices and a combine against the CPU path, and an all_reduce.
// The hierarchical route (a token crosses to another node once, to its forwarder there) on emulated
// nodes, against the CPU path's hierarchical route bit for bit: with 4 GPUs two nodes of two ranks
// (forwarders hand tokens on to the other rank of their node and sum its rows in combine), with 2
// GPUs two nodes of one.
TEST(DeepEPNcclGpu, DispatchCombineHierarchicalOnEmulatedNodes) {
  REQUIRE_NCCL_GPUS();
  const int ranks = deepep_test::visible_gpus() >= 4 ? 4 : 2;
  dispatch_combine_like_cpu(moe_case(0x6e64, ranks, 8 * ranks, 6, Routing::Uniform, 384), nccl_options, {}, 8 << 20,
                            0, deepep_test::nodes_of(ranks / 2));
}

TEST(DeepEPNcclGpu, ErrorsAreSharedAndLeaveTheBufferUsable) {
  REQUIRE_NCCL_GPUS();
  const MoeCase c = moe_case(0x6e64, 2, 16, 4, Routing::Uniform, 256);
  expect_all_ok(run_ranks(2, [&](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    const rt::Device dev = rt::Device::cuda(me);
    // In low-latency mode, so that its low-latency call reaches the plane check (normal-mode calls
    // ignore the mode).
    deepep::Buffer buf(g, 8 << 20, 0, true, nccl_options(me));
    deepep::Buffer cpu(g, 8 << 20, 0, false, test_options());
    deepep::DispatchArgs a = c.dispatch_args(me, false, 1);
    deepep::DispatchArgs bad = a;
    rt::Tensor bad_topk = c.topk_tensor(me);
    if (me == 1) bad_topk.data_as<int64_t>()[5 * c.topk + 2] = c.experts + 3;
    bad.x = a.x.to(dev);
    bad.topk_idx = bad_topk.to(dev);
    bad.topk_weights = a.topk_weights.to(dev);
    expect_throws([&] { buf.dispatch(bad); }, rt::str("rank 1: topk_idx[5, 2] = ", c.experts + 3, " is out of range"),
                  "a dispatch with an expert out of range on rank 1");
    // The valid call, with int32 indices, against the CPU path.
    rt::Tensor topk32 = rt::Tensor::empty(a.topk_idx.shape(), rt::DType::I32);
    for (int64_t i = 0; i < topk32.numel(); ++i) topk32.data_as<int32_t>()[i] = int32_t(a.topk_idx.data_as<int64_t>()[i]);
    deepep::DispatchArgs good = bad;
    good.topk_idx = topk32.to(dev);
    const deepep::DispatchResult dc = cpu.dispatch(a), dg = buf.dispatch(good);
    expect_same(dc.recv_x, dg.recv_x, "recv_x");
    expect_same(dc.recv_topk_idx, dg.recv_topk_idx, "recv_topk_idx");
    expect_same(dc.recv_topk_weights, dg.recv_topk_weights, "recv_topk_weights");
    EP_CHECK(dg.handle->device_transport == "nccl", dg.handle->device_transport);
    const deepep::CombineResult cc = cpu.combine(dc.recv_x, *dc.handle, dc.recv_topk_weights);
    const deepep::CombineResult cg = buf.combine(dg.recv_x, *dg.handle, dg.recv_topk_weights);
    expect_same(cc.combined_x, cg.combined_x, "combined_x");
    expect_same(cc.combined_topk_weights, cg.combined_topk_weights, "combined_topk_weights");
    // A handle of the cuda_ipc plane on this one, and this plane's on the cuda_ipc one.
    deepep::CommOptions ipc_options = test_options();
    ipc_options.cuda_device = me;
    deepep::Buffer ipc(g, 8 << 20, 0, false, ipc_options);
    const deepep::DispatchResult di = ipc.dispatch(good);
    expect_throws([&] { buf.combine(di.recv_x, *di.handle); },
                  "the handle is from a dispatch on the cuda_ipc device plane but this communicator's is nccl",
                  "a combine on the nccl plane with a cuda_ipc dispatch's handle");
    deepep::DispatchArgs cached;
    cached.x = good.x;
    cached.handle = dg.handle;
    expect_throws([&] { ipc.dispatch(cached); },
                  "the handle is from a dispatch on the nccl device plane but this communicator's is cuda_ipc",
                  "a cached dispatch on the cuda_ipc plane with an nccl dispatch's handle");
    expect_throws([&] { buf.low_latency_dispatch(good.x, good.topk_idx, 128, c.experts, false); },
                  "low-latency calls of CUDA tensors need CommOptions::device_transport \"cuda_ipc\"",
                  "a low-latency dispatch on the nccl plane");
    const rt::Tensor t = inputs(me, 100, 2, rt::DType::F32).to(dev);
    deepep::all_reduce(buf.comm(), t);
    expect_close(t, [](int64_t i) { return input_value(0, i, 2, rt::DType::F32) + input_value(1, i, 2, rt::DType::F32); },
                 [](int64_t i) {
                   return std::fabs(input_value(0, i, 2, rt::DType::F32)) + std::fabs(input_value(1, i, 2, rt::DType::F32));
                 },
                 false, "all_reduce after the errors");
  }));
}

// A group from an NCCL communicator the caller made; its Comm reuses that communicator.
TEST(DeepEPNcclGpu, GroupFromAnNcclCommunicator) {
  REQUIRE_NCCL_GPUS();
  expect_all_ok(run_ranks(2, [](const std::shared_ptr<deepep::Group>& tcp) {
    const int me = tcp->rank();
    const deepep::nccl::Library& l = deepep::nccl::library();
    // The caller's communicator, made the usual way (the unique id through the TCP group here).
    deepep::nccl::UniqueId id{};
    if (me == 0) EP_CHECK(l.ncclGetUniqueId(&id) == deepep::nccl::kSuccess);
    const std::string root_id = tcp->allgather(std::string(id.internal, sizeof(id.internal)), "unique id")[0];
    std::copy(root_id.begin(), root_id.end(), id.internal);
    rt::cuda_context(me);
    deepep::nccl::Comm nccl_comm = nullptr;
    EP_CHECK(l.ncclCommInitRank(&nccl_comm, 2, id, me) == deepep::nccl::kSuccess);
    {
      const auto g = deepep::Group::from_nccl(nccl_comm, std::chrono::milliseconds(20000));
      EP_CHECK(g->rank() == me && g->size() == 2, "rank ", g->rank(), " of ", g->size());
      EP_CHECK(g->nccl_comm() == static_cast<void*>(nccl_comm));
      const auto all = g->allgather(rt::str("hello from ", me), "greeting");
      EP_CHECK(all.size() == 2 && all[1 - me] == rt::str("hello from ", 1 - me), all[size_t(1 - me)]);
      // Another device than the communicator's is refused on every rank.
      deepep::CommOptions wrong = nccl_options(1 - me);
      expect_throws([&] { deepep::Comm comm(g, wrong); }, "the group's NCCL communicator is on cuda:",
                    "a Comm on another GPU than the group's communicator");
      deepep::Comm comm(g, nccl_options(me));
      EP_CHECK(!comm.nccl_plane()->owns_communicator());
      const rt::Tensor t = inputs(me, 4099, 3, rt::DType::F32).to(rt::Device::cuda(me));
      deepep::all_reduce(comm, t, deepep::ReduceOp::Max);
      expect_close(t,
                   [](int64_t i) {
                     return std::max(input_value(0, i, 3, rt::DType::F32), input_value(1, i, 3, rt::DType::F32));
                   },
                   {}, true, "all_reduce through the caller's communicator");
    }
    // The Comm left the caller's communicator alive: it still works, and the caller destroys it.
    const rt::Tensor one = rt::Tensor::empty({1}, rt::DType::F32);
    one.data_as<float>()[0] = float(me + 1);
    const rt::Tensor d = one.to(rt::Device::cuda(me));
    EP_CHECK(l.ncclAllReduce(d.data(), d.data(), 1, deepep::nccl::kFloat32, deepep::nccl::kSum, nccl_comm, nullptr) ==
             deepep::nccl::kSuccess);
    EP_CHECK(d.to(rt::Device::cpu()).data_as<float>()[0] == 3.0f);
    EP_CHECK(l.ncclCommDestroy(nccl_comm) == deepep::nccl::kSuccess);
  }));
}

// Rank 1 dies once the all_reduce's agreement is done, so rank 0 is already waiting in NCCL for a
// peer that never launches its kernel: rank 0 gets a clear error within the bound, not a hang.
TEST(DeepEPNcclGpu, RankKilledMidCallIsAClearErrorWithinTheBound) {
  REQUIRE_NCCL_GPUS();
  auto outcomes = run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    const int me = g->rank();
    deepep::CommOptions o = nccl_options(me);
    o.faults.kill_rank = 1;
    o.faults.kill_at_op = 2;
    o.faults.kill_mid_op = true;
    deepep::Comm comm(g, o);
    const rt::Tensor t = inputs(me, 1 << 20, 4, rt::DType::F32).to(rt::Device::cuda(me));
    deepep::all_reduce(comm, t);  // op 1: both ranks, NCCL set up
    const auto start = Clock::now();
    try {
      deepep::all_reduce(comm, t);  // op 2: rank 1 dies after the agreement
    } catch (const deepep::CommError& e) {
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      const std::string m = e.what();
      EP_CHECK(m.find("rank 1") != std::string::npos && m.find("died") != std::string::npos, m);
      // Noticed while waiting for NCCL (a death before the agreement would be the engine's error).
      EP_CHECK(m.find("all_reduce on the nccl device plane") != std::string::npos, m);
      EP_CHECK(s < 10.0, "took ", s, " s to notice");  // liveness checks every 50 ms; the timeout is 30 s
      deepep_test::note(rt::str("noticed in ", s, " s: ", m));
      expect_throws([&] { deepep::all_reduce(comm, t); }, "broken", "a call on the broken communicator");
      return;
    }
    EP_CHECK(false, "no error although rank 1 died");
  });
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[1].killed) << outcomes[1].message;
  EXPECT_TRUE(outcomes[0].ok) << "rank 0: " << outcomes[0].message;
}

// Rank 1 dies just before it would join the NCCL communicator's creation (kill_at_op = 0), so rank 0
// waits inside NCCL's own connection setup for a peer that never comes: a clear error within the
// bound (the creation is nonblocking and polled), not a hang.
TEST(DeepEPNcclGpu, RankKilledBeforeTheCommunicatorIsCreatedIsAClearError) {
  REQUIRE_NCCL_GPUS();
  auto outcomes = run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = nccl_options(g->rank());
    o.faults.kill_rank = 1;
    o.faults.kill_at_op = 0;
    const auto start = Clock::now();
    try {
      deepep::Comm comm(g, o);
    } catch (const deepep::CommError& e) {
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      const std::string m = e.what();
      EP_CHECK(m.find("rank 1") != std::string::npos && m.find("died") != std::string::npos, m);
      EP_CHECK(m.find("creating the NCCL communicator") != std::string::npos, m);
      EP_CHECK(s < 10.0, "took ", s, " s to notice");  // liveness checks every 50 ms; the timeout is 30 s
      deepep_test::note(rt::str("noticed in ", s, " s: ", m));
      return;
    }
    EP_CHECK(false, "no error although rank 1 died");
  });
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[1].killed) << outcomes[1].message;
  EXPECT_TRUE(outcomes[0].ok) << "rank 0: " << outcomes[0].message;
}

}  // namespace
