// The GPU backend's entry point. The CUDA kernels (warp-specialized TMA + wgmma with FP32 promotion,
// docs/deepgemm.md "GPU design") are not in this build yet: a call on CUDA tensors is a user error
// that names the function, after the same argument checks as on the CPU.
#include "backend.h"
#include "rt/error.h"

namespace deepgemm::detail {

GemmConfig run_gpu(const Problem& p) {
  rt::throw_user_error(rt::str("deepgemm::", p.function, ": the GPU kernels are not in this build yet (the tensors are on ",
                               p.device.to_string(), "); pass CPU tensors to use the CPU path"));
}

}  // namespace deepgemm::detail
