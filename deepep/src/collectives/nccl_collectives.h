// The collectives on CUDA tensors through the nccl data plane (collectives.cc checks the inputs
// and agrees on the call first): NCCL's own collectives, or grouped ncclSend/ncclRecv for the
// pairwise exchanges, on the plane's stream; complete when they return.
#pragma once

#include <vector>

#include "collectives/gpu_collectives.h"
#include "deepep/collectives.h"
#include "rt/tensor.h"
#include "transport/nccl/nccl_library.h"

namespace deepep {

class NcclPlane;

// In place. NCCL's algorithms: 16-bit floats may round at every step (not the CPU path's bits).
void all_reduce_nccl(NcclPlane& plane, const rt::Tensor& tensor, ReduceOp op);
void reduce_scatter_nccl(NcclPlane& plane, const rt::Tensor& output, const rt::Tensor& input, ReduceOp op);
void all_gather_nccl(NcclPlane& plane, const rt::Tensor& output, const rt::Tensor& input);
void broadcast_nccl(NcclPlane& plane, const rt::Tensor& tensor, int root);
// Rank me's send[d] lands in rank d's recv[me] (send[me] is copied to recv[me] on the stream). Both
// sides' byte counts must agree (the callers agreed on them); empty pieces are not posted.
void exchange_nccl(NcclPlane& plane, const std::vector<DevicePiece>& send, const std::vector<DevicePiece>& recv,
                   const char* what);
// Several such exchanges (send[i], recv[i]: array i's pieces, one per rank) queued as one NCCL group
// on `stream`, inside NcclPlane::run (which passes the communicator and the stream, and waits).
void enqueue_exchanges(const NcclPlane& plane, nccl::Comm comm, rt::CuStream stream,
                       const std::vector<std::vector<DevicePiece>>& send,
                       const std::vector<std::vector<DevicePiece>>& recv, const char* what);

}  // namespace deepep
