// The transport interface: how a communicator's protocol engine moves frames between ranks. A
// transport is a small table of operations (this abstract class) with one folder per transport
// under src/transport/<name>/ and a registry mapping names to factories.
//
//   shm       processes of one host through POSIX shared memory rings (implemented)
//   tcp       processes of any hosts through one TCP connection per pair of ranks (implemented)
//   cuda_ipc  GPUs of one host through CUDA IPC buffers: not a frame transport but a data plane
//             beside one (src/transport/cuda_ipc/, CommOptions::cuda_device)
//   nccl      GPUs through an NCCL communicator (NCCL loaded at run time): also a data plane beside a
//             frame transport, for the collectives (src/transport/nccl/, CommOptions::device_transport)
//
// Model: every ordered pair of ranks (src, dst) is a link carrying frames in order, each at most
// frame_capacity() bytes. A frame can be lost or corrupted (fault injection, or a real lossy
// transport); the engine above detects that with per-frame checksums and end-to-end
// acknowledgements and retransmits. Acknowledgements are words the receiver writes and the sender
// reads (`ack`, `acked`); a small board per rank carries the control plane (agreements, barriers).
// Waiting never spins hot: wait() blocks until a peer calls notify() (or the timeout passes).
//
// Visibility: what this rank writes for its peers (its counters, its board slot after post_board,
// acknowledgements, consumed frames, its LinkCounters words) is visible to a peer once this rank
// has called notify(peer) after writing it, in the order written; shared memory shows it at once,
// a network transport sends it then (and a frame at publish). LinkCounters of another rank are as
// of its last notification to this one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deepep/health.h"

namespace deepep {

class Group;

// What a transport instance is created with (derived from CommOptions by the communicator).
struct TransportConfig {
  int64_t inbound_bytes = 0;  // ring memory each rank receives into (split among its inbound links)
  int64_t board_bytes = 64 << 10;
  FaultConfig faults;
  std::chrono::milliseconds timeout{60000};
};

// Per-link statistics words, shared with every rank (written by the link's sender unless noted).
struct LinkCounters {
  std::atomic<uint64_t> frames_sent;
  std::atomic<uint64_t> bytes_sent;
  std::atomic<uint64_t> frames_forwarded;
  std::atomic<uint64_t> retransmissions;
  std::atomic<uint64_t> losses;
  std::atomic<uint64_t> corrupt_received;  // written by the receiver
  std::atomic<uint64_t> acks;
  std::atomic<uint64_t> reroutes;
  std::atomic<int64_t> via;
  std::atomic<uint64_t> loss_ppm;          // loss rate over the window, parts per million
  std::atomic<uint64_t> ack_latency_ns;
};

// Control words of one rank, shared with every rank.
enum class Counter { Done = 0, Board = 1 };

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // --- frames on links -------------------------------------------------------------------------
  virtual size_t frame_capacity() const = 0;
  // A free frame buffer on link rank() -> dst, or nullptr while the link is full.
  virtual void* reserve(int dst) = 0;
  // Hands over the reserved frame's first `bytes` bytes (fault injection may drop, corrupt or delay it).
  virtual void publish(int dst, size_t bytes) = 0;
  virtual uint64_t published(int dst) const = 0;  // frames published on rank() -> dst so far
  virtual uint64_t consumed(int dst) const = 0;   // of those, frames dst has consumed
  // The next frame on link src -> rank() (nullptr: none yet) and its size; consume() releases it.
  virtual const void* peek(int src, size_t* bytes) = 0;
  virtual void consume(int src) = 0;
  // Whether inbound frames may be delayed (not visible yet): the engine then polls instead of
  // sleeping until a notification.
  virtual bool has_delayed_frames() const = 0;

  // --- end-to-end acknowledgements (pair src -> dst, `slot` < ack_slots()) ----------------------
  virtual uint32_t ack_slots() const = 0;
  virtual void ack(int src, uint32_t slot, uint64_t value) = 0;  // by dst; values only grow
  virtual uint64_t acked(int dst, uint32_t slot) const = 0;      // by src

  // --- control plane -----------------------------------------------------------------------------
  virtual size_t board_bytes() const = 0;
  virtual void* board(int parity, int rank) = 0;  // rank's board slot of this parity
  // This rank wrote the first `bytes` bytes of its board slot `parity`: peers see them from the
  // next notify() on, before the counters stored after this call.
  virtual void post_board(int parity, size_t bytes) = 0;
  virtual std::atomic<uint64_t>& counter(int rank, Counter which) = 0;
  virtual LinkCounters& link(int src, int dst) = 0;

  // --- waiting -------------------------------------------------------------------------------------
  virtual uint32_t wait_token() const = 0;  // take before checking conditions
  // Blocks until notified after `token` was taken, or `max` passed.
  virtual void wait(uint32_t token, std::chrono::nanoseconds max) = 0;
  virtual void notify(int peer) = 0;

  // --- failures ------------------------------------------------------------------------------------
  // Why `peer` can no longer take part (its process exited, ...), or nullopt while it is alive.
  virtual std::optional<std::string> peer_failure(int peer) = 0;
  // The first abort message any rank posted (nullopt: none); set_abort keeps the first one.
  virtual std::optional<std::string> aborted() const = 0;
  virtual void set_abort(const std::string& message) = 0;
};

// --- registry ------------------------------------------------------------------------------------
struct TransportEntry {
  std::string name;
  std::string description;
  // Empty when the transport can serve `group`; otherwise why not (shown to the user).
  std::function<std::string(const Group&)> unavailable;
  // Collective over the group: every rank calls it with the same config.
  std::function<std::unique_ptr<Transport>(Group&, const TransportConfig&)> create;
};

void register_transport(TransportEntry entry);
const std::vector<TransportEntry>& transports();
// By name; "" picks the first registered transport that can serve the group. User error naming
// the transports and why each cannot serve the group when none can.
const TransportEntry& find_transport(const std::string& name, const Group& group);

}  // namespace deepep
