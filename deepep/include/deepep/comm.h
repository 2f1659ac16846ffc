// A communicator: a group of ranks with a transport and the reliable protocol engine on top of it.
// Every communication operation (collectives, Buffer's dispatch/combine) is collective over the
// communicator: all ranks call the same operations in the same order. Each operation starts with an
// agreement step (every rank checks that all ranks called the same operation with compatible
// arguments; local input errors are shared there), so bad input gives the same clear error on
// every rank and leaves the communicator usable. A failure while data moves (a rank died, a timeout)
// breaks the communicator: the other ranks get a CommError within the bound, and every later
// operation fails with the first error.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deepep/collectives.h"
#include "deepep/health.h"
#include "deepep/topology.h"

namespace deepep {

class Group;
class Engine;
class DevicePlane;
class NcclPlane;

struct CommOptions {
  // Ring memory each rank receives into, split among its inbound links (at least two frames of
  // 4 KiB per link). Larger rings let more data be in flight (low-latency sends complete without
  // the receiver when everything fits).
  int64_t inbound_bytes = 16 << 20;
  std::string transport;  // "" picks the first transport able to serve the group (shm on one host)
  // Bound on every wait for other ranks; 0: DEEPEP_TIMEOUT_MS, else 60 s (negative: an error).
  std::chrono::milliseconds timeout{0};
  // How often a waiting rank checks that its peers are alive (a dead rank is reported within about
  // this long); 0: DEEPEP_LIVENESS_MS, else 50 ms (negative: an error).
  std::chrono::milliseconds liveness_interval{0};
  FaultConfig faults;  // DEEPEP_FAULTS overrides it when set
  double reroute_threshold = 0.10;
  int health_window = 64;
  bool log_reroutes = true;  // one line on stderr when a route changes
  // The GPU data plane (cuda_ipc): with a CUDA device, every rank allocates device_window_bytes on
  // it and maps every other rank's, and operations on CUDA tensors of that device move through
  // these windows by kernels (the host transport keeps the control plane). -1: CPU tensors only.
  // Each rank names its own device (ranks may share one).
  int cuda_device = -1;
  int64_t device_window_bytes = 256 << 20;
  // Which data plane moves the CUDA tensors: "cuda_ipc" (the windows above; every operation, one
  // host) or "nccl" (an NCCL communicator, loaded at run time, and no windows: the collectives and
  // normal-mode dispatch and combine, on GPUs of any hosts; not the low-latency calls, which write
  // into the windows). Ranks must agree.
  std::string device_transport = "cuda_ipc";
  // The most a Buffer's shared arena (Buffer::alloc_shared_tensor) may hold on this rank: reserved
  // as address space when the Buffer is created, memory committed as tensors take it. 0: none.
  int64_t shared_arena_bytes = int64_t(16) << 30;
  // Each NIC between nodes as the collectives' Auto models it (Comm::network): bandwidth in GB/s
  // (10^9 bytes per second, each direction) and latency in microseconds. 0: the default, 25 GB/s
  // and 2 us (default_nic_speed, topology.h). Ranks must agree (checked).
  double nic_gbytes_per_s = 0;
  double nic_latency_us = 0;
  // NICs per node in that model. 0: what hwloc finds on each node's first rank (at least one; it
  // counts every network function, management ports included). Ranks must agree (checked).
  int nics_per_node = 0;
};

class Comm {
 public:
  // Collective over the group. Ranks must agree on the options (checked).
  Comm(std::shared_ptr<Group> group, const CommOptions& options = {});
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const;
  int size() const;
  Group& group() const { return *group_; }
  const CommOptions& options() const { return options_; }
  const char* transport_name() const;

  // Statistics of every link of the group (any rank can read all of them).
  std::vector<LinkStats> link_stats() const;
  LinkStats link_stats(int src, int dst) const;

  // Collective: returns when every rank has called it.
  void barrier();

  // The group's network as Auto models it (topology.h): the ranks' nodes, shared memory inside a
  // node (Auto decides for CPU tensors: the device path has one algorithm), each node's NICs as its
  // first rank's hwloc found them (at least one; on one node none are looked for), the NIC speed
  // of the options. Gathered at creation: the same on every rank.
  const GroupNetwork& network() const { return network_; }
  // Auto's choice (collectives.h, choose_all_reduce and choose_reduce_scatter on network()) for
  // `bytes` per rank: made the first time a size of its choice_key is asked, then kept.
  const AlgorithmChoice& auto_all_reduce(int64_t bytes);
  const AlgorithmChoice& auto_reduce_scatter(int64_t bytes);

  Engine& engine() const { return *engine_; }
  // The GPU data plane: one of these two with options.cuda_device (device_transport picks it),
  // neither without.
  DevicePlane* device_plane() const { return device_plane_.get(); }
  NcclPlane* nccl_plane() const { return nccl_plane_.get(); }

 private:
  std::shared_ptr<Group> group_;
  CommOptions options_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<DevicePlane> device_plane_;
  std::unique_ptr<NcclPlane> nccl_plane_;
  GroupNetwork network_;
  std::map<std::pair<bool, int64_t>, AlgorithmChoice> choices_;  // (all_reduce?, bucket bytes) -> choice
};

}  // namespace deepep
