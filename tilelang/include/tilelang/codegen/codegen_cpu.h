// C++ for the CPU backend from lowered IR: one extern "C" entry point per kernel, OpenMP for
// threads, tl/device/cpu headers for gemm tiles and numeric formats.
#pragma once

#include <string>
#include <vector>

#include "tilelang/ir/ir.h"

namespace tilelang::codegen {

struct CpuSource {
  std::string code;
  std::string entry;                 // the symbol to call
  std::vector<ir::Var> dim_vars;     // symbolic dimensions, in the order the entry takes them
  std::vector<SourceLoc> user_code;  // where user-written code (T.inline_code, T.call_extern) went in
  std::vector<SourceLoc> sites;      // what may fail at run time (the kernel, its parallel regions, heap allocations)
};

// The entry's signature:
//   extern "C" void <entry>(void* const* buffers, const int64_t* dims, int num_threads, tl::cpu::Failure* failure)
// buffers: one data pointer per parameter, in order; dims: values of dim_vars; num_threads: the
// OpenMP team size (0: OpenMP's default); failure (tl/device/cpu/kernel.h): where the entry records
// what stopped it, an allocation that failed or any C++ exception, at an index into sites. The
// entry throws nothing.
CpuSource generate_cpu(const ir::PrimFunc& func);

}  // namespace tilelang::codegen
