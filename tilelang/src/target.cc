#include "tilelang/target.h"

#include "rt/cuda_device.h"
#include "rt/device.h"
#include "rt/error.h"

namespace tilelang {

Target Target::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda();
  if (text.starts_with("cuda:")) {
    std::string arch = text.substr(5);
    if (arch == "sm_90a" || arch == "sm_90" || arch == "sm_80" || arch == "sm_89" || arch == "sm_86") return cuda(arch);
    rt::throw_user_error(rt::str("unknown CUDA architecture '", arch, "' (supported: sm_90a, sm_90, sm_89, sm_86, sm_80)"));
  }
  rt::throw_user_error(rt::str("unknown target '", text, "' (use cpu, cuda or cuda:sm_80)"));
}

Target Target::best() {
  rt::Device d = rt::best_device();
  return d.is_cuda() ? cuda(rt::cuda_device(d.id).arch_name()) : cpu();
}

int Target::sm() const {
  int v = 0;
  for (char c : arch)
    if (c >= '0' && c <= '9') v = v * 10 + (c - '0');
  return v;
}

std::string Target::name() const { return kind == Kind::CPU ? "cpu" : "cuda:" + arch; }

}  // namespace tilelang
