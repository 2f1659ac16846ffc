#include "transport/cuda_ipc/ipc_window.h"

#include <cstring>

#include "bootstrap/setup_check.h"
#include "deepep/group.h"
#include "rt/cuda_device.h"
#include "rt/cuda_memory.h"
#include "rt/error.h"

namespace deepep {
namespace {

void agree_or_throw(Group& group, const std::string& mine, const std::string& what) {
  gather_setup(group, mine, "", rt::str("deepep cuda_ipc (", what, "): "), what);
}

}  // namespace

IpcWindow::IpcWindow(Group& group, int device, int64_t bytes)
    : device_(device), rank_(group.rank()), bytes_(bytes), windows_(size_t(group.size()), 0) {
  std::string err;
  rt::CuIpcMemHandle handle{};
  try {
    if (group.num_nodes() != 1)
      err = rt::str("the group spans ", group.num_nodes(), " hosts; CUDA IPC shares memory within one host");
    else if (bytes <= 0)
      err = rt::str("window size ", bytes, " must be positive");
    else if (rt::cuda_device_count() <= device || device < 0)
      err = rt::str("no CUDA device ", device, " (", rt::cuda_device_count(), " visible",
                    rt::cuda_unavailable_reason().empty() ? "" : ": " + rt::cuda_unavailable_reason(), ")");
    if (err.empty()) {
      const rt::CudaDriver& d = rt::cuda_driver();
      const size_t total = size_t(signal_offset() + kSignalBytes);
      own_ = rt::cuda_malloc(device, total, "the deepep device window");
      rt::cuda_memset(device, own_, 0, total);
      RT_CU_CHECK(d.cuIpcGetMemHandle(&handle, own_), "cuIpcGetMemHandle", "window of ", bytes, " bytes");
    }
  } catch (const rt::Error& e) {
    err = e.what();
  }
  std::string mine(1, err.empty() ? '\1' : '\0');
  mine += err.empty() ? std::string(handle.reserved, sizeof(handle.reserved)) : err;
  const std::vector<std::string> all = group.allgather(mine, "device window exchange");
  auto fail = [&](const std::string& message) {
    release();
    rt::throw_user_error(message);
  };
  for (int r = 0; r < group.size(); ++r)
    if (all[size_t(r)].empty() || all[size_t(r)][0] != '\1')
      fail(rt::str("deepep cuda_ipc: rank ", r, " cannot create its device window: ", all[size_t(r)].substr(1)));
  // Map every peer's window; a failure anywhere (two GPUs without peer access) fails every rank.
  err.clear();
  try {
    const rt::CudaDriver& d = rt::cuda_driver();
    rt::cuda_context(device);
    for (int r = 0; r < group.size() && err.empty(); ++r) {
      if (r == rank_) {
        windows_[size_t(r)] = own_;
        continue;
      }
      rt::CuIpcMemHandle peer{};
      std::memcpy(peer.reserved, all[size_t(r)].data() + 1, sizeof(peer.reserved));
      const rt::CuResult rc = d.cuIpcOpenMemHandle(&windows_[size_t(r)], peer, rt::cu::kIpcMemLazyEnablePeerAccess);
      if (rc != rt::cu::kSuccess)
        err = rt::str("cannot map rank ", r, "'s window on cuda:", device, ": ", rt::cuda_error_text(rc),
                      " (GPUs without peer access to each other?)");
    }
    if (err.empty()) {
      table_ = rt::cuda_malloc(device, windows_.size() * 8, "the deepep window table");
      rt::cuda_copy_to_device(device, table_, windows_.data(), windows_.size() * 8);
    }
  } catch (const rt::Error& e) {
    err = e.what();
  }
  try {
    agree_or_throw(group, err, "mapping the device windows");
  } catch (...) {
    release();
    throw;
  }
}

IpcWindow::~IpcWindow() { release(); }

void IpcWindow::release() noexcept {
  if (rt::cuda_driver_available()) {
    const rt::CudaDriver& d = rt::cuda_driver();
    for (size_t r = 0; r < windows_.size(); ++r)
      if (int(r) != rank_ && windows_[r] != 0) {
        try {
          rt::cuda_context(device_);
          d.cuIpcCloseMemHandle(windows_[r]);
        } catch (...) {
        }
        windows_[r] = 0;
      }
  }
  rt::cuda_free(device_, table_);
  rt::cuda_free(device_, own_);
  table_ = own_ = 0;
}

}  // namespace deepep
