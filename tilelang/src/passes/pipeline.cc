#include "tilelang/passes/pipeline.h"

#include <iostream>

#include "rt/env.h"
#include "tilelang/ir/printer.h"
#include "tilelang/passes/check_bounds.h"
#include "tilelang/passes/lower_host_cuda.h"
#include "tilelang/passes/lower_kernel_cpu.h"
#include "tilelang/passes/lower_kernel_cuda.h"
#include "tilelang/passes/lower_tile_ops.h"
#include "tilelang/passes/pipeline_loads_cuda.h"
#include "tilelang/passes/promote_reductions.h"
#include "tilelang/passes/recognize_tile_ops.h"
#include "tilelang/passes/schedule_cpu.h"
#include "tilelang/passes/simplify.h"
#include "tilelang/passes/sink_allocations.h"
#include "tilelang/passes/verify.h"
#include "tilelang/passes/wgmma_waits.h"

namespace tilelang::passes {
namespace {

using PassFn = ir::PrimFunc (*)(const ir::PrimFunc&, const PassOptions&);

struct PassEntry {
  const char* name;
  PassFn run;
  bool cpu, cuda;  // which targets run it
};

// The single ordered list of passes.
constexpr PassEntry kPasses[] = {
    {"verify", verify, true, true},
    {"simplify", simplify, true, true},
    {"check_bounds", check_bounds, true, true},
    {"recognize_tile_ops", recognize_tile_ops, true, true},
    {"promote_reductions", promote_reductions, true, true},
    {"lower_tile_ops", lower_tile_ops, true, true},
    {"sink_allocations", sink_allocations, true, true},
    {"schedule_cpu", schedule_cpu, true, false},
    {"lower_kernel_cpu", lower_kernel_cpu, true, false},
    {"lower_host_cuda", lower_host_cuda, false, true},
    {"pipeline_loads_cuda", pipeline_loads_cuda, false, true},
    {"lower_kernel_cuda", lower_kernel_cuda, false, true},
    {"wgmma_waits", wgmma_waits, false, true},
    {"simplify", simplify, true, true},
    {"verify", verify, true, true},
};

bool runs_on(const PassEntry& p, const Target& t) { return t.kind == Target::Kind::CPU ? p.cpu : p.cuda; }

}  // namespace

std::vector<std::string> pass_names(const Target& target) {
  std::vector<std::string> out;
  for (const PassEntry& p : kPasses)
    if (runs_on(p, target)) out.push_back(p.name);
  return out;
}

ir::PrimFunc lower(const ir::PrimFunc& func, const PassOptions& options) {
  // TL_DUMP_IR: "after_each", or the name of one pass.
  std::string dump = rt::env_string("TL_DUMP_IR", "");
  ir::PrimFunc f = func;
  for (const PassEntry& p : kPasses) {
    if (!runs_on(p, options.target)) continue;
    f = p.run(f, options);
    if (dump == "after_each" || dump == p.name) std::cerr << "// ---- after " << p.name << "\n" << ir::print(f);
  }
  return f;
}

}  // namespace tilelang::passes
