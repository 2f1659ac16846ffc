// Bad input gives the same clear error on every rank, never a hang or a partial result, and leaves
// the Buffer usable.
#include "dispatch_check.h"

namespace {

using deepep_test::dispatch_and_check;
using deepep_test::expect_all_failed_with;
using deepep_test::expect_all_ok;
using deepep_test::MoeCase;
using deepep_test::run_ranks;
using deepep_test::test_options;
using deepep_test::RunOptions;
using deepep_test::test_seed;

MoeCase make() {
  MoeCase c;
  c.seed = test_seed() ^ 0xBAD;
  c.ranks = 4;
  c.experts = 16;
  c.topk = 4;
  return c;
}

// Runs `bad` on every rank (each rank may break its own inputs), expects an error on every rank
// containing every piece, then checks that a correct dispatch/combine still works.
void expect_error_everywhere(const std::function<void(deepep::Buffer&, const MoeCase&, int)>& bad,
                             const std::vector<std::string>& pieces) {
  const MoeCase c = make();
  expect_all_ok(run_ranks(c.ranks, [&](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 2 << 20, 0, false, test_options());
    std::string message;
    try {
      bad(buf, c, g->rank());
    } catch (const rt::Error& e) {
      message = e.what();
    }
    EP_CHECK(!message.empty(), "rank ", g->rank(), ": no error");
    for (const std::string& p : pieces) EP_CHECK(message.find(p) != std::string::npos, "'", p, "' not in: ", message);
    dispatch_and_check(buf, c, false, true);
  }));
}

deepep::DispatchArgs args(const MoeCase& c, int me) {
  deepep::DispatchArgs a;
  a.x = c.x_bf16(me);
  a.topk_idx = c.topk_tensor(me);
  a.topk_weights = c.weights_tensor(me);
  a.num_experts = c.experts;
  return a;
}

TEST(DeepEPBadInput, HiddenSizeDisagreesAcrossRanks) {
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    MoeCase mine = c;
    if (me == 2) mine.hidden = 128;
    deepep::DispatchArgs a = args(mine, me);
    buf.dispatch(a);
  }, {"disagree", "rank 2", "[*, 128]"});
}

TEST(DeepEPBadInput, DtypeDisagreesAcrossRanks) {
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    deepep::DispatchArgs a = args(c, me);
    if (me == 1) {
      rt::Tensor f = rt::Tensor::empty(a.x.shape(), rt::DType::F32);
      a.x = f;
    }
    buf.dispatch(a);
  }, {"disagree", "rank 1", "float32"});
}

TEST(DeepEPBadInput, TopkOutOfRange) {
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    deepep::DispatchArgs a = args(c, me);
    if (me == 3) a.topk_idx.data_as<int64_t>()[5] = 16;
    if (me == 0) a.topk_idx.data_as<int64_t>()[2] = -7;
    buf.dispatch(a);
  }, {"rank 0: topk_idx[0, 2] = -7 is out of range [-1, 16)", "rank 3: topk_idx[1, 1] = 16 is out of range"});
}

TEST(DeepEPBadInput, WrongGroupSize) {
  // Experts that do not divide over the group.
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    deepep::DispatchArgs a = args(c, me);
    a.num_experts = 18;
    buf.dispatch(a);
  }, {"num_experts=18 is not a multiple of the group size 4"});
  // A layout made for a group of another size.
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    deepep::DispatchArgs a = args(c, me);
    deepep::DispatchLayout l = buf.get_dispatch_layout(a.topk_idx, c.experts);
    l.num_tokens_per_rank = rt::Tensor::empty({8}, rt::DType::I32);
    a.layout = &l;
    buf.dispatch(a);
  }, {"num_tokens_per_rank must be a CPU int32 tensor of 4 elements"});
}

TEST(DeepEPBadInput, ShapesAndDevices) {
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    deepep::DispatchArgs a = args(c, me);
    if (me == 1) a.topk_weights = rt::Tensor::empty({3, 3}, rt::DType::F32);
    buf.dispatch(a);
  }, {"rank 1: topk_weights has shape [3, 3]"});
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    deepep::DispatchArgs a = args(c, me);
    static char fake[64];
    if (me == 2) a.x = rt::Tensor::wrap(fake, a.x.shape(), rt::DType::BF16, rt::Device::cuda(0));
    buf.dispatch(a);
  }, {"rank 2: x is on cuda:0"});
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    deepep::DispatchArgs a = args(c, me);
    a.x = c.x_fp8(me);  // FP8 without scales
    buf.dispatch(a);
  }, {"x_scales (FP8 x needs them) is undefined"});
}

TEST(DeepEPBadInput, CombineWithTheWrongRowsOrHandle) {
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    const auto d = buf.dispatch(args(c, me));
    rt::Tensor y = rt::Tensor::empty({d.recv_x.size(0) + (me == 0 ? 1 : 0), c.hidden}, rt::DType::BF16);
    buf.combine(y, *d.handle);
  }, {"rank 0: x has shape"});
  expect_error_everywhere([](deepep::Buffer& buf, const MoeCase& c, int me) {
    const auto d1 = buf.dispatch(args(c, me));
    const auto d2 = buf.dispatch(args(c, me));
    const auto& h = me == 3 ? *d1.handle : *d2.handle;  // rank 3 passes the older handle
    buf.combine(d1.recv_x, h);
  }, {"disagree", "rank 3"});
}

TEST(DeepEPBadInput, BuffersThatDisagreeOrAreTooSmall) {
  expect_all_failed_with(run_ranks(3, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, g->rank() == 1 ? (1 << 20) : (2 << 20), 0, false, test_options());
  }), {"disagree", "rank 1", "num_nvl_bytes=1048576"});
  expect_all_failed_with(run_ranks(3, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 1000, 0, false, test_options());
  }), {"buffer too small", "give at least"});
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, -5, 0, false, test_options());
  }), {"rank 0: negative sizes"});
}

// A group across hosts takes tcp by itself; shm, asked for by name, says why it cannot serve it.
TEST(DeepEPBadInput, GroupAcrossHostsTakesTcpAndShmRefusesIt) {
  RunOptions o;
  o.host_of = [](int r) { return r < 2 ? std::string("host-a") : std::string("host-b"); };
  expect_all_ok(run_ranks(4, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::Buffer buf(g, 1 << 20, 0, false, test_options());
    EP_CHECK(std::string(buf.comm().transport_name()) == "tcp", buf.comm().transport_name());
  }, o));
  expect_all_failed_with(run_ranks(4, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions c = test_options();
    c.transport = "shm";
    deepep::Buffer buf(g, 1 << 20, 0, false, c);
  }, o), {"no transport can serve", "shm: the group spans 2 hosts (host-a, host-b)"});
}

TEST(DeepEPTransport, Registry) {
  std::vector<std::string> names;
  for (const auto& e : deepep::transports()) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"shm", "tcp", "cuda_ipc", "nccl"}));
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.transport = "nccl";
    deepep::Comm comm(g, o);
  }), {"nccl: it carries CUDA tensors beside a host transport", "CommOptions::device_transport = \"nccl\""});
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.transport = "cuda_ipc";
    deepep::Comm comm(g, o);
  }), {"cuda_ipc: it carries CUDA tensors beside a host transport", "CommOptions::cuda_device"});
  expect_all_failed_with(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.transport = "carrier-pigeon";
    deepep::Comm comm(g, o);
  }), {"unknown transport 'carrier-pigeon'", "shm, tcp, cuda_ipc, nccl"});
  expect_all_ok(run_ranks(2, [](const std::shared_ptr<deepep::Group>& g) {
    deepep::CommOptions o = test_options();
    o.transport = "shm";
    deepep::Comm comm(g, o);
    EP_CHECK(std::string(comm.transport_name()) == "shm");
    EP_CHECK(comm.link_stats().size() == 2u);
  }));
}

}  // namespace
