// The collectives on CUDA tensors, through the device plane's windows (collectives.cc checks the
// inputs and agrees on the call first). Phases are separated by the plane's device barriers
// (DevicePlane::device_barrier): kernels write into the peers' windows, then every rank reads its
// own; a one-chunk all_reduce signals block by block inside one kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "deepep/collectives.h"
#include "rt/tensor.h"

namespace deepep {

class DevicePlane;

// In place, every rank's tensor becomes the reduction (rank order, f32 for 16-bit floats).
void all_reduce_on_device(DevicePlane& plane, const rt::Tensor& tensor, ReduceOp op);
// output (n elements) = reduction over ranks of part `rank` of every rank's input (size * n).
void reduce_scatter_on_device(DevicePlane& plane, const rt::Tensor& output, const rt::Tensor& input, ReduceOp op);

// One side of a pairwise exchange: a device address and a byte count.
struct DevicePiece {
  uint64_t address = 0;
  int64_t bytes = 0;
};
// Rank me's send[d] lands in rank d's recv[me] (send[me] is copied to recv[me] locally).
// pair_bytes[i * size + j]: the bytes rank i sends rank j, the same table on every rank (what each
// side's pieces say), so that every rank runs the same number of rounds.
void exchange_on_device(DevicePlane& plane, const std::vector<DevicePiece>& send, const std::vector<DevicePiece>& recv,
                        const std::vector<int64_t>& pair_bytes, const char* what);

}  // namespace deepep
