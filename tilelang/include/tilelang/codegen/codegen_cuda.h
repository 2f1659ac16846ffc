// CUDA C++ for NVRTC from lowered IR: one kernel per T.Kernel launch (and per whole-tensor launch
// the host lowering made), plus the launch plan the runtime follows, in program order.
#pragma once

#include <string>
#include <vector>

#include "rt/tensor_map.h"
#include "tilelang/ir/ir.h"
#include "tilelang/target.h"

namespace tilelang::codegen {

// CUDA's limit on gridDim.y and gridDim.z (checked when a kernel is compiled, and at the launch for
// grid sizes that depend on the inputs).
constexpr int64_t kMaxGridYZ = 65535;

// A TMA descriptor a kernel takes (after the dimensions, in order): over buffer `buffer` (an index
// into CudaSource::buffers), boxes of `box` elements (the tensor's order, outermost first).
struct TensorMapUse {
  int buffer = -1;
  std::vector<uint32_t> box;
  rt::TmaSwizzle swizzle = rt::TmaSwizzle::None;
  bool operator==(const TensorMapUse&) const = default;
};

struct CudaLaunch {
  enum class Kind { Kernel, HopperGemm };
  Kind kind = Kind::Kernel;
  std::string kernel;           // the entry's name in the module
  std::vector<ir::Expr> grid;   // blocks in x, y, z (1 to 3 of them; may use symbolic dimensions)
  int64_t threads = 1;
  int64_t smem_bytes = 0;       // dynamic shared memory
  // HopperGemm: C[M,N] = A[M,K] * B with B [K,N] (b_n_major) or [N,K]; indices into CudaSource::buffers.
  // The TMA boxes (innermost first) and the epilogue kind match the kernel's configuration (the
  // generated source asserts it).
  int a = -1, b = -1, c = -1;
  ir::Expr m, n, k;
  bool b_n_major = true;
  int block_m = 0, block_n = 0, block_k = 0;
  int consumers = 0;  // consumer warpgroups, each with its split-K counter per tile (tl/device/split_k.h)
  uint32_t box_a[2] = {0, 0}, box_b[2] = {0, 0}, box_c[2] = {0, 0};
  bool tma_store = false;  // C written through TMA (else plain stores)
  std::vector<TensorMapUse> tensor_maps;  // Kernel: the bulk copies' descriptors
  // Kernel: > 0 when persistent (ir::kPersistentRounds): `grid` is the kernel's blocks, and the
  // launch takes min(their number, SMs x this) blocks in x.
  int64_t persistent_blocks_per_sm = 0;
  SourceLoc loc;
};

struct CudaSource {
  std::string code;
  std::vector<ir::Var> dim_vars;   // symbolic dimensions, passed to every kernel after the buffers
  std::vector<ir::Buffer> buffers;  // every kernel's buffer arguments: the parameters, then temporaries
  size_t num_params = 0;           // buffers[num_params..] are temporaries the runtime allocates
  std::vector<CudaLaunch> launches;
  std::vector<SourceLoc> user_code;  // T.inline_code and T.call_extern sites
};

// Kernels take (buffers..., dims...) as `T* __restrict__` pointers and `long long` values.
CudaSource generate_cuda(const ir::PrimFunc& func, const Target& target);

}  // namespace tilelang::codegen
