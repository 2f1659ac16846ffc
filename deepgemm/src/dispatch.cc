#include "backend.h"

namespace deepgemm::detail {

void run(const Problem& p) {
  const GemmConfig config = p.device.is_cuda() ? run_gpu(p) : run_cpu(p);
  record_config(config);
}

}  // namespace deepgemm::detail
