// Autotuning of tile programs: a kernel factory's free parameters (block sizes, stages, threads)
// are tried on the target device and the fastest configuration is kept, per program, fixed
// parameters, input shapes and device, in the disk cache, so a later call (or process) compiles
// only the winner.
//
//   tilelang::TuneSpace space{{"block_M", {"64", "128"}}, {"block_N", {"128", "256"}}};
//   tilelang::TuneResult r = tilelang::autotune(module, "matmul", options, space, {a, b});
//   tilelang::Kernel best = module.kernel("matmul", r.options);
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rt/tensor.h"
#include "tilelang/module.h"

namespace tilelang {

// Each free parameter with its candidate values (factory arguments, as --param takes them). Every
// combination is a candidate.
using TuneSpace = std::vector<std::pair<std::string, std::vector<std::string>>>;

struct TuneTrial {
  std::map<std::string, std::string> params;  // the free parameters' values
  double ms = -1;                             // median time of one call; -1 when it failed
  std::string error;                          // why it failed (did not compile, does not fit, ...)
};

struct TuneResult {
  std::map<std::string, std::string> best;  // the fastest candidate's free parameters
  double best_ms = 0;
  CompileOptions options;                   // the fixed options with the best parameters added
  bool from_cache = false;                  // nothing was run: an earlier tuning decided
  std::vector<TuneTrial> trials;            // every candidate, in order (empty from the cache)
};

struct TuneOptions {
  int warmup = 2;
  int repeat = 10;
  bool use_cache = true;  // read and write the decision in the disk cache
};

// Times every candidate of `space` on `inputs` (the kernel's inputs, on the target's device; the
// outputs are allocated once per candidate) and returns the fastest. Candidates that fail to
// compile or run are recorded and skipped; a user error when all fail, when the space is empty or
// a parameter has no values, or when a parameter is both fixed in `options` and free.
TuneResult autotune(const Module& module, const std::string& kernel, const CompileOptions& options, const TuneSpace& space,
                    const std::vector<rt::Tensor>& inputs, const TuneOptions& tune = {});

}  // namespace tilelang
