// The cuda_ipc data plane's memory: one device buffer per rank (its window), shared with every
// other rank of the host through CUDA IPC, so a kernel on any rank reads or writes any rank's
// window directly (peer access over NVLink or PCIe between GPUs; the same memory between processes
// that share a GPU). What goes where is decided on the host; when a phase is complete, by the
// communicator's barriers or by flags the kernels raise in the signal area (docs/deepep.md "The
// GPU path").
#pragma once

#include <cstdint>
#include <vector>

#include "rt/cuda_driver.h"

namespace deepep {

class Group;

class IpcWindow {
 public:
  // Collective over the group (one host): every rank allocates `bytes` on its CUDA device `device`
  // and maps every other rank's window. The same user error on every rank when any rank cannot
  // (no GPU, out of memory, no peer access between two GPUs).
  IpcWindow(Group& group, int device, int64_t bytes);
  ~IpcWindow();
  IpcWindow(const IpcWindow&) = delete;
  IpcWindow& operator=(const IpcWindow&) = delete;

  int device() const { return device_; }
  int64_t bytes() const { return bytes_; }
  // Past the `bytes` of data, every window has kSignalBytes of signal words (zeroed at creation),
  // at this offset: flags that kernels raise in each other's windows (kernels/low_latency.cuh, then
  // the normal mode's, kernels/intranode.cuh).
  static constexpr int64_t kSignalBytes = 256 << 10;
  int64_t signal_offset() const { return (bytes_ + 255) / 256 * 256; }
  // Rank r's window as mapped in this process (this rank's own for r = rank).
  rt::CuDevicePtr window(int r) const { return windows_.at(size_t(r)); }
  // The same addresses in device memory, [size] u64, for kernels.
  rt::CuDevicePtr window_table() const { return table_; }

 private:
  void release() noexcept;  // unmaps the peers' windows, frees this rank's

  int device_ = 0;
  int rank_ = 0;
  int64_t bytes_ = 0;
  rt::CuDevicePtr own_ = 0;
  rt::CuDevicePtr table_ = 0;
  std::vector<rt::CuDevicePtr> windows_;
};

}  // namespace deepep
