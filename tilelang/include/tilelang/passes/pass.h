// What every pass receives. A pass is one free function `ir::PrimFunc name(const ir::PrimFunc&,
// const PassOptions&)` in its own .h/.cc pair; passes/pipeline.cc lists them in order.
#pragma once

#include "tilelang/ir/ir.h"
#include "tilelang/target.h"

namespace tilelang::passes {

struct PassOptions {
  Target target;
};

}  // namespace tilelang::passes
