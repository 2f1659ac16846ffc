#include "collectives/nccl_collectives.h"

#include "rt/error.h"
#include "transport/nccl/nccl_plane.h"

namespace deepep {
namespace {

nccl::RedOp red_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return nccl::kSum;
    case ReduceOp::Max: return nccl::kMax;
    case ReduceOp::Min: return nccl::kMin;
  }
  RT_ICHECK(false, "reduce op ", int(op));
  return nccl::kSum;
}

// collectives.cc admits only the dtypes it can reduce, which NCCL reduces too.
nccl::DataType reduce_type(const rt::Tensor& t) {
  const nccl::DataType type = nccl::reduce_type(t.dtype());
  RT_ICHECK(type >= 0, "NCCL cannot reduce ", rt::name(t.dtype()));
  return type;
}

void* device_address(uint64_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

void all_reduce_nccl(NcclPlane& plane, const rt::Tensor& tensor, ReduceOp op) {
  const nccl::DataType type = reduce_type(tensor);
  plane.run("all_reduce", [&](nccl::Comm comm, rt::CuStream stream) {
    nccl::check(plane.library().ncclAllReduce(tensor.data(), tensor.data(), size_t(tensor.numel()), type, red_op(op),
                                              comm, stream),
                "ncclAllReduce", "all_reduce");
  });
}

void reduce_scatter_nccl(NcclPlane& plane, const rt::Tensor& output, const rt::Tensor& input, ReduceOp op) {
  if (output.numel() == 0) return;
  const nccl::DataType type = reduce_type(input);
  plane.run("reduce_scatter", [&](nccl::Comm comm, rt::CuStream stream) {
    nccl::check(plane.library().ncclReduceScatter(input.data(), output.data(), size_t(output.numel()), type,
                                                  red_op(op), comm, stream),
                "ncclReduceScatter", "reduce_scatter");
  });
}

void all_gather_nccl(NcclPlane& plane, const rt::Tensor& output, const rt::Tensor& input) {
  if (input.nbytes() == 0) return;
  plane.run("all_gather", [&](nccl::Comm comm, rt::CuStream stream) {
    nccl::check(plane.library().ncclAllGather(input.data(), output.data(), size_t(input.nbytes()), nccl::kUint8, comm,
                                              stream),
                "ncclAllGather", "all_gather");
  });
}

void broadcast_nccl(NcclPlane& plane, const rt::Tensor& tensor, int root) {
  if (tensor.nbytes() == 0) return;
  plane.run("broadcast", [&](nccl::Comm comm, rt::CuStream stream) {
    nccl::check(plane.library().ncclBroadcast(tensor.data(), tensor.data(), size_t(tensor.nbytes()), nccl::kUint8,
                                              root, comm, stream),
                "ncclBroadcast", "broadcast");
  });
}

void enqueue_exchanges(const NcclPlane& plane, nccl::Comm comm, rt::CuStream stream,
                       const std::vector<std::vector<DevicePiece>>& send,
                       const std::vector<std::vector<DevicePiece>>& recv, const char* what) {
  const int me = plane.rank(), R = plane.size();
  RT_ICHECK(send.size() == recv.size(), what, ": ", send.size(), " arrays sent, ", recv.size(), " received");
  for (size_t i = 0; i < send.size(); ++i) {
    RT_ICHECK(send[i].size() == size_t(R) && recv[i].size() == size_t(R), what, ": ", send[i].size(), " and ",
              recv[i].size(), " pieces for ", R, " ranks");
    const DevicePiece &s = send[i][size_t(me)], &r = recv[i][size_t(me)];
    RT_ICHECK(s.bytes == r.bytes, what, ": the local piece's sizes differ");
    if (s.bytes > 0)
      RT_CU_CHECK(rt::cuda_driver().cuMemcpyDtoDAsync(r.address, s.address, size_t(s.bytes), stream),
                  "cuMemcpyDtoDAsync", what, ": this rank's own piece");
  }
  const nccl::Library& l = plane.library();
  nccl::check(l.ncclGroupStart(), "ncclGroupStart", what);
  // The group is closed even when a call in it fails, so that later NCCL calls of this thread
  // are not swallowed into it. NCCL matches a pair's calls in the order they are posted: every rank
  // posts the arrays in the same order.
  nccl::Result rc = nccl::kSuccess;
  for (int j = 0; j < R && rc == nccl::kSuccess; ++j) {
    if (j == me) continue;
    for (size_t i = 0; i < send.size() && rc == nccl::kSuccess; ++i) {
      const DevicePiece& s = send[i][size_t(j)];
      const DevicePiece& r = recv[i][size_t(j)];
      if (s.bytes > 0) rc = l.ncclSend(device_address(s.address), size_t(s.bytes), nccl::kUint8, j, comm, stream);
      if (rc == nccl::kSuccess && r.bytes > 0)
        rc = l.ncclRecv(device_address(r.address), size_t(r.bytes), nccl::kUint8, j, comm, stream);
    }
  }
  const nccl::Result end = l.ncclGroupEnd();
  nccl::check(rc, "ncclSend/ncclRecv", what);
  nccl::check(end, "ncclGroupEnd", what);
}

void exchange_nccl(NcclPlane& plane, const std::vector<DevicePiece>& send, const std::vector<DevicePiece>& recv,
                   const char* what) {
  plane.run(what, [&](nccl::Comm comm, rt::CuStream stream) { enqueue_exchanges(plane, comm, stream, {send}, {recv}, what); });
}

}  // namespace deepep
