#pragma once
// Which copies between a global tensor and a shared tile TMA can move as one bulk tensor copy
// (pipeline_loads_cuda's loads ahead, lower_kernel_cuda's epilogue stores).

#include "tilelang/ir/ir.h"

namespace tilelang::passes {

// Whether TMA can move the box `global` of a global tensor to or from the whole 2-D shared `tile`:
// same dtype (TMA does not convert), a tensor of constant shape with rows of whole 16-byte units at
// an aligned base (`tensors_aligned`), the tile's rows and columns the box's two non-unit sides
// (the columns the tensor's contiguous dimension), at most 256 elements a side and whole 16-byte
// units a row, and each stage of the tile a multiple of 128 bytes (TMA's shared memory is 128-byte
// aligned).
bool tma_box_allowed(const ir::Region& global, const ir::Region& tile, bool tensors_aligned);

}  // namespace tilelang::passes
