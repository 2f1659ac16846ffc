#include "deepep/comm.h"

#include "bootstrap/setup_check.h"
#include "deepep/error.h"
#include "deepep/group.h"
#include "deepep/transport.h"
#include "engine/engine.h"
#include "rt/env.h"
#include "rt/error.h"
#include "transport/cuda_ipc/device_plane.h"
#include "transport/nccl/nccl_plane.h"

namespace deepep {

Comm::Comm(std::shared_ptr<Group> group, const CommOptions& options) : group_(std::move(group)), options_(options) {
  RT_USER_CHECK(group_ != nullptr, "deepep Comm: null group");
  if (options_.timeout.count() <= 0)
    options_.timeout = std::chrono::milliseconds(rt::env_int("DEEPEP_TIMEOUT_MS", 60000));
  if (options_.liveness_interval.count() <= 0)
    options_.liveness_interval = std::chrono::milliseconds(rt::env_int("DEEPEP_LIVENESS_MS", 50));
  options_.faults = FaultConfig::from_env(options_.faults);
  std::string error;
  if (options_.inbound_bytes <= 0) error = rt::str("inbound bytes must be positive, not ", options_.inbound_bytes);
  if (options_.timeout.count() <= 0) error = "the timeout must be positive";
  if (!(options_.reroute_threshold > 0 && options_.reroute_threshold < 1))
    error = rt::str("reroute_threshold=", options_.reroute_threshold, " must be in (0, 1)");
  if (options_.health_window < 8) error = rt::str("health_window=", options_.health_window, " must be at least 8");
  // Every rank must use the same sizes and transport; a mismatch is an error on every rank.
  const bool nccl = options_.device_transport == "nccl";
  if (!nccl && options_.device_transport != "cuda_ipc")
    error = rt::str("device_transport='", options_.device_transport, "' is not a device transport (cuda_ipc, nccl)");
  else if (nccl && options_.cuda_device < 0)
    error = "device_transport 'nccl' needs this rank's GPU in CommOptions::cuda_device";
  else if (!nccl && options_.cuda_device >= 0 && options_.device_window_bytes <= 0)
    error = rt::str("device_window_bytes=", options_.device_window_bytes, " must be positive");
  // The device number is each rank's own; which device plane there is, and its size, are shared.
  const std::string device_plane =
      options_.cuda_device < 0 ? std::string(" no device plane")
      : nccl                   ? std::string(" the nccl device plane")
                               : rt::str(" a cuda_ipc device window of ", options_.device_window_bytes, " bytes");
  const std::vector<std::string> descs = gather_setup(
      *group_, error,
      rt::str("inbound_bytes=", options_.inbound_bytes, " transport='", options_.transport, "'", device_plane),
      "deepep Comm: ", "communicator creation");
  for (int r = 0; r < group_->size(); ++r)
    if (descs[size_t(r)] != descs[0])
      rt::throw_user_error(rt::str("deepep Comm: the ranks disagree: rank 0 has ", descs[0], " but rank ", r, " has ",
                                   descs[size_t(r)]));
  const TransportEntry& entry = find_transport(options_.transport, *group_);
  TransportConfig tc;
  tc.inbound_bytes = options_.inbound_bytes;
  tc.faults = options_.faults;
  tc.timeout = options_.timeout;
  EngineOptions eo;
  eo.timeout = options_.timeout;
  eo.liveness = options_.liveness_interval;
  eo.reroute_threshold = options_.reroute_threshold;
  eo.health_window = options_.health_window;
  eo.log_reroutes = options_.log_reroutes;
  eo.faults = options_.faults;
  engine_ = std::make_unique<Engine>(entry.create(*group_, tc), eo);
  if (nccl) {
    nccl_plane_ = std::make_unique<NcclPlane>(*group_, *engine_, options_.cuda_device);
  } else if (options_.cuda_device >= 0) {
    device_plane_ = std::make_unique<DevicePlane>(*group_, *engine_, options_.cuda_device, options_.device_window_bytes);
    engine_->set_before_agreement([plane = device_plane_.get()] { plane->before_agreement(); });
  }
}

// The device planes go first: they use the engine (windows unmapped, the group's agreement).
Comm::~Comm() {
  if (engine_) engine_->set_before_agreement(nullptr);
  device_plane_.reset();
  nccl_plane_.reset();
}

int Comm::rank() const { return group_->rank(); }
int Comm::size() const { return group_->size(); }
const char* Comm::transport_name() const { return engine_->transport().name(); }
std::vector<LinkStats> Comm::link_stats() const { return engine_->link_stats(); }
LinkStats Comm::link_stats(int src, int dst) const { return engine_->link_stats(src, dst); }

void Comm::barrier() {
  engine_->begin_op("barrier");
  engine_->barrier("barrier");
}

}  // namespace deepep
