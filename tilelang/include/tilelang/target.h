// Where a kernel runs: the CPU (C++ through the host compiler) or a CUDA GPU (NVRTC).
#pragma once

#include <string>

namespace tilelang {

struct Target {
  enum class Kind { CPU, CUDA };
  Kind kind = Kind::CPU;
  std::string arch;  // CUDA: "sm_90a", "sm_80"; CPU: empty (the host's own)

  static Target cpu() { return {Kind::CPU, ""}; }
  static Target cuda(std::string arch = "sm_90a") { return {Kind::CUDA, std::move(arch)}; }
  // "cpu", "cuda", "cuda:sm_80"; a user error for anything else.
  static Target parse(const std::string& text);
  // The best target present: the first GPU when the CUDA driver reports one (for its architecture),
  // else the CPU; TL_DEVICE=cpu|cuda|cuda:N overrides.
  static Target best();
  std::string name() const;  // "cpu", "cuda:sm_90a"
  int sm() const;            // CUDA: the architecture's number ("sm_90a" -> 90); CPU: 0
};

}  // namespace tilelang
