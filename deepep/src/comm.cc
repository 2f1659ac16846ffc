#include "deepep/comm.h"

#include <algorithm>
#include <cmath>

#include "bootstrap/setup_check.h"
#include "bootstrap/wire.h"
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
  // 0 means "the default"; a negative bound is a mistake, not a request for the default.
  const int64_t given_timeout = options_.timeout.count(), given_liveness = options_.liveness_interval.count();
  if (options_.timeout.count() <= 0)
    options_.timeout = std::chrono::milliseconds(rt::env_int("DEEPEP_TIMEOUT_MS", 60000));
  if (options_.liveness_interval.count() <= 0)
    options_.liveness_interval = std::chrono::milliseconds(rt::env_int("DEEPEP_LIVENESS_MS", 50));
  options_.faults = FaultConfig::from_env(options_.faults);
  std::string error;
  if (options_.inbound_bytes <= 0) error = rt::str("inbound bytes must be positive, not ", options_.inbound_bytes);
  // The rings are mapped populated: more than the host has is an OOM kill, not an error, later.
  if (options_.inbound_bytes > detail::host_memory_bytes())
    error = rt::str("inbound_bytes=", options_.inbound_bytes, " is more than this host's memory (",
                    detail::host_memory_bytes(), " bytes)");
  if (options_.timeout.count() <= 0) error = "the timeout must be positive";
  if (given_timeout < 0)
    error = rt::str("timeout=", given_timeout, " ms must be positive (0: DEEPEP_TIMEOUT_MS, else 60 s)");
  if (given_liveness < 0)
    error = rt::str("liveness_interval=", given_liveness, " ms must be positive (0: DEEPEP_LIVENESS_MS, else 50 ms)");
  if (!(options_.reroute_threshold > 0 && options_.reroute_threshold < 1))
    error = rt::str("reroute_threshold=", options_.reroute_threshold, " must be in (0, 1)");
  // Each link keeps a window of that many entries: INT32_MAX took 2 GiB per link and seconds.
  if (options_.health_window < 8 || options_.health_window > (1 << 20))
    error = rt::str("health_window=", options_.health_window, " must be in [8, 2^20]");
  // The faults are checked here too: a FaultConfig set in the options (not parsed) with drop = 1,
  // say, would make every operation wait out its timeout instead of saying why.
  if (const std::string bad = options_.faults.check(group_->size()); !bad.empty()) error = "CommOptions::faults: " + bad;
  // The NIC speed Auto models (0: the default); what is left must be a usable speed.
  LinkSpeed nic = default_nic_speed();
  if (!(std::isfinite(options_.nic_gbytes_per_s) && options_.nic_gbytes_per_s >= 0))
    error = rt::str("nic_gbytes_per_s=", options_.nic_gbytes_per_s, " must be positive (0: the default, ",
                    nic.bandwidth * 1e-9, " GB/s)");
  else if (!(std::isfinite(options_.nic_latency_us) && options_.nic_latency_us >= 0))
    error = rt::str("nic_latency_us=", options_.nic_latency_us, " must be positive or zero (0: the default, ",
                    nic.latency * 1e6, " us)");
  if (options_.nic_gbytes_per_s > 0) nic.bandwidth = options_.nic_gbytes_per_s * 1e9;
  if (options_.nic_latency_us > 0) nic.latency = options_.nic_latency_us * 1e-6;
  if (options_.nics_per_node < 0) error = rt::str("nics_per_node=", options_.nics_per_node, " must be >= 0 (0: found)");
  // Each node's NICs for Auto's model between nodes, from its first rank (one node, or a count in
  // the options: not looked for). A probe that fails is this rank's error, raised on every rank.
  int32_t nics = options_.nics_per_node;
  if (nics == 0 && group_->num_nodes() > 1 && group_->local_rank() == 0) {
    try {
      nics = int32_t(discover_topology().nics.size());
    } catch (const std::exception& e) {
      if (error.empty()) error = rt::str("discovering the NICs: ", e.what());
    }
  }
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
  const std::string desc = rt::str("inbound_bytes=", options_.inbound_bytes, " transport='", options_.transport, "'",
                                   device_plane, " NIC ", nic.bandwidth * 1e-9, " GB/s ", nic.latency * 1e6, " us",
                                   options_.nics_per_node ? rt::str(", ", options_.nics_per_node, " per node") : "");
  wire::Writer mine;
  mine.put_str(desc).put<int32_t>(nics).put<double>(nic.bandwidth).put<double>(nic.latency);
  const std::vector<std::string> payloads =
      gather_setup(*group_, error, mine.str(), "deepep Comm: ", "communicator creation");
  std::vector<std::string> descs;
  std::vector<int32_t> nics_of_rank;
  std::vector<std::pair<double, double>> nic_of_rank;  // exactly: the text rounds to 6 digits
  for (const std::string& p : payloads) {
    wire::Reader rd(p);
    descs.push_back(rd.get_str());
    nics_of_rank.push_back(rd.get<int32_t>());
    const double bandwidth = rd.get<double>();
    nic_of_rank.emplace_back(bandwidth, rd.get<double>());
  }
  for (int r = 0; r < group_->size(); ++r) {
    if (descs[size_t(r)] != descs[0])
      rt::throw_user_error(rt::str("deepep Comm: the ranks disagree: rank 0 has ", descs[0], " but rank ", r, " has ",
                                   descs[size_t(r)]));
    if (nic_of_rank[size_t(r)] != nic_of_rank[0])
      rt::throw_user_error(rt::str("deepep Comm: the ranks disagree on the NIC speed beyond its 6th digit: rank 0 and ",
                                   "rank ", r, " differ (nic_gbytes_per_s, nic_latency_us)"));
  }
  // Auto's model, from what every rank now holds alike: nodes, each node's first rank's NICs.
  network_.nics_per_node.assign(size_t(group_->num_nodes()), 0);
  for (const PeerInfo& peer : group_->peers()) {
    network_.node_of_rank.push_back(peer.node);
    if (peer.local_rank == 0) network_.nics_per_node[size_t(peer.node)] = std::max(1, nics_of_rank[size_t(peer.rank)]);
  }
  network_.fabric = Fabric::SharedMemory;
  network_.link = default_speed(Fabric::SharedMemory);
  network_.nic = nic;
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

const AlgorithmChoice& Comm::auto_all_reduce(int64_t bytes) {
  const auto key = std::make_pair(true, choice_key(network_, bytes));
  auto it = choices_.find(key);
  if (it == choices_.end()) it = choices_.emplace(key, choose_all_reduce(network_, bytes)).first;
  return it->second;
}

const AlgorithmChoice& Comm::auto_reduce_scatter(int64_t bytes) {
  const auto key = std::make_pair(false, choice_key(network_, bytes));
  auto it = choices_.find(key);
  if (it == choices_.end()) it = choices_.emplace(key, choose_reduce_scatter(network_, bytes)).first;
  return it->second;
}

void Comm::barrier() {
  engine_->begin_op("barrier");
  engine_->barrier("barrier");
  if (device_plane_) device_plane_->note_barrier();
}

}  // namespace deepep
