// What every pass receives. A pass is one free function `ir::PrimFunc name(const ir::PrimFunc&,
// const PassOptions&)` in its own .h/.cc pair; passes/pipeline.cc lists them in order.
#pragma once

#include "tilelang/ir/ir.h"
#include "tilelang/target.h"

namespace tilelang::passes {

struct PassOptions {
  Target target;
  // Every tensor parameter's data is 16-byte aligned (as fresh allocations are), so CUDA code may
  // move 16 bytes per access and use TMA. Kernels are specialized on it: an offset view gets code
  // built without the assumption.
  bool tensors_aligned = true;
  // sm_90a: a 16- or 8-bit fragment that is a wgmma gemm's A operand (a cast accumulator, as attention's
  // P) stays in registers and wgmma reads it from there (the RS form); false stages it through a
  // shared tile (the SS form), to compare the two.
  bool wgmma_register_a = true;
};

}  // namespace tilelang::passes
