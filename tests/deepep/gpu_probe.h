// What the machine has, asked in a forked child: the test process forks the ranks, so it must never
// initialize CUDA (or NCCL) itself.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "rt/cuda_device.h"
#include "rt/nvrtc.h"

namespace deepep_test {

// `probe`'s result (0-254) computed in a child process; 255 when it threw or the child died.
inline int ask_in_child(const std::function<int()>& probe) {
  const pid_t pid = fork();
  if (pid == 0) {
    int result = 255;
    try {
      result = probe();
    } catch (...) {
    }
    _exit(result);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) == 255) return 255;
  return WEXITSTATUS(status);
}

// The CUDA GPUs visible, 0 without a driver or when they are older than compute capability 7.0.
inline int visible_gpus() {
  static const int count = [] {
    const int n = ask_in_child([] { return rt::cuda_device_count() > 0 && rt::cuda_device(0).sm_major >= 7 ? rt::cuda_device_count() : 0; });
    return n == 255 ? 0 : n;
  }();
  return count;
}

// Whether NVRTC loads, asked in a child like everything else here: with a GPU driver present,
// libnvrtc loads libcuda, and a process that has loaded it forks ranks whose CUDA calls hang on the
// driver's lock (stop 24: the NCCL tests after the kernel compile tests). The compile tests compile
// in a forked rank for the same reason.
inline bool nvrtc_usable() {
  return ask_in_child([] { return rt::nvrtc_available() ? 0 : 1; }) == 0;
}

}  // namespace deepep_test
