// The protocol engine of a communicator: reliable, checksummed, acknowledged transfers on top of a
// Transport, with retransmission, per-link health and rerouting, agreement and barriers.
//
// Exchange: one step of a collective operation. Every rank posts the messages it sends (to any
// peer, itself included) and the messages it receives (sizes known on both sides), then runs the
// progress loop until every message it sends is acknowledged and every message it receives is
// complete, then waits (still relaying frames for others) until every rank got there. Messages are
// sequences of `unit`-byte records produced and consumed through callbacks, cut into frames of whole
// units: a frame's callback sees complete records.
//
// Frames carry (epoch, src, dst, chunk, checksums). The receiver verifies the checksums, writes
// the data through the callback and acknowledges the chunk in a word the sender reads. A frame the
// receiver consumed without acknowledging was lost or corrupted (drops never reach the ring); the
// sender sees that from the ring's consumed count and sends the chunk again. Frames relayed through
// another rank are resent after a timeout instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deepep/health.h"
#include "deepep/transport.h"
#include "engine/tensor_pool.h"

namespace deepep {

using ReadFn = std::function<void(size_t first_unit, size_t units, uint8_t* dst)>;
using WriteFn = std::function<void(size_t first_unit, size_t units, const uint8_t* src)>;

struct SendSpec {
  int peer = 0;
  size_t unit = 1;   // bytes per record
  size_t units = 0;  // records
  ReadFn read;       // copies records [first, first + n) into dst; may be called again for a resend
};

struct RecvSpec {
  int peer = 0;
  size_t unit = 1;
  size_t units = 0;
  WriteFn write;  // called once per record range, in any order
};

struct EngineOptions {
  std::chrono::milliseconds timeout{60000};
  std::chrono::milliseconds liveness{50};
  double reroute_threshold = 0.10;
  int health_window = 64;
  bool log_reroutes = true;
  FaultConfig faults;
};

class Engine {
 public:
  Engine(std::unique_ptr<Transport> transport, const EngineOptions& options);
  ~Engine();

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  std::chrono::milliseconds liveness() const { return options_.liveness; }
  Transport& transport() const { return *transport_; }
  // Payload bytes one frame carries (a record larger than this cannot be sent: buffer too small).
  size_t max_payload() const;
  // A user error (the same on every rank, as the record sizes are) when a record of `unit` bytes
  // does not fit a frame. Paths that move records outside frames check it too, so a Buffer too
  // small for the frame path fails on every path alike.
  void check_record_fits(size_t unit, const std::string& what) const;
  // A read of a peer's memory failed with `error` (the single-copy path), or a wait outside the
  // engine did (the NCCL plane's): throws the root cause when there is one -- an abort another rank
  // recorded, or a peer that died -- else `error`. Breaks the communicator.
  [[noreturn]] void fail_peer_read(const std::string& what, const std::string& error);
  // For waits outside the engine (the NCCL plane polling its stream): breaks the communicator with
  // a CommError when another rank aborted it or a peer died.
  void check_peers_alive(const std::string& what);

  // The kill fault's setup point (kill_at_op = 0), for setup steps that wait on their peers outside
  // the engine (the nccl device plane's communicator creation).
  void kill_if_due_in_setup(const std::string& what) const { kill_if_due(false, what); }

  // Every communication operation starts here: completes a pending exchange, fails when the
  // communicator is broken, and applies the kill fault.
  void begin_op(const std::string& what);
  // Agreement: every rank posts a description of its call (must be equal on all ranks), a local
  // error ("" when fine) and a payload; returns every rank's payload, or throws the same user error
  // on every rank (local errors first, then disagreements). Leaves the communicator usable.
  std::vector<std::string> agree(const std::string& what, const std::string& desc, const std::string& error,
                                 const std::string& payload = {});
  void barrier(const std::string& what);
  // Agreements (barriers included) started so far: every rank counts the same ones, failed ones too.
  uint64_t agreements() const { return board_epoch_; }

  void exchange(std::vector<SendSpec> sends, std::vector<RecvSpec> recvs, const std::string& what);
  // Split form for receive hooks: start() posts everything and pushes what the rings take now;
  // finish_pending() completes it. A started exchange is completed by the next begin_op too.
  // The sources of a started exchange must stay alive until it completes (callbacks own them).
  void start_exchange(std::vector<SendSpec> sends, std::vector<RecvSpec> recvs, const std::string& what);
  // Runs the pending exchange until this rank's receives are complete (its sends may still await
  // acknowledgements, finished by finish_pending or the next operation). For receive hooks.
  void complete_receives();
  void finish_pending();
  bool has_pending() const { return pending_ != nullptr; }
  // A receive started on the device plane and left to a hook (low-latency GPU calls): the next
  // begin_op runs `complete` first (it must be idempotent: the hook may have run it already).
  void defer_device_receive(std::function<void()> complete) { device_receive_ = std::move(complete); }
  // Runs before every agreement (the first step of each operation that moves data, except
  // low-latency calls queued on a stream): the device plane waits there for the work still queued
  // that uses the same windows (DevicePlane::before_agreement), so no rank's next operation writes
  // where that work still reads, and notes that the windows were used (the next queued call then
  // agrees first).
  void set_before_agreement(std::function<void()> f) { before_agreement_ = std::move(f); }
  uint64_t pending_epoch() const;

  std::vector<LinkStats> link_stats() const;
  LinkStats link_stats(int src, int dst) const;

  // Outputs and scratch of the operations (reused between calls).
  TensorPool& pool() { return pool_; }

 private:
  struct ChunkState {
    uint64_t pub_after = 0;  // published count of the first hop right after the last send
    int64_t sent_ns = 0;
    int64_t consumed_ns = 0;  // relayed: when the relay was seen to take it
    int32_t via = -1;
    uint64_t seq = 0;  // transmission number on this destination's traffic (for relayed-loss detection)
    uint8_t acked = 0;
    uint8_t queued = 0;
    uint16_t tries = 0;
  };
  struct SendState {
    SendSpec spec;
    size_t chunk_units = 0;
    uint32_t nchunks = 0, next_new = 0, base = 0, acked = 0;
    std::vector<ChunkState> chunks;
    std::deque<uint32_t> retx;
  };
  struct RecvState {
    RecvSpec spec;
    bool expected = false;
    size_t chunk_units = 0;
    uint32_t nchunks = 0, count = 0;
    std::vector<uint8_t> got;
  };
  struct Exchange {
    uint32_t epoch = 0;
    std::string what;
    std::vector<SendState> sends;
    std::vector<RecvState> recvs;  // by source rank
  };
  struct LinkHealth {
    std::vector<uint8_t> window;
    size_t pos = 0, filled = 0, lost = 0;
    int via = -1;
    uint64_t tx = 0;
    uint64_t seq = 0;                        // transmissions to this destination
    std::vector<uint64_t> acked_seq_via;     // highest acknowledged transmission relayed through each rank
    bool warned = false;
    double latency_ns = 0;
  };

  template <class F>
  void guarded(const std::string& what, F&& f);
  [[noreturn]] void fail(const std::string& message);
  void check_usable(const std::string& what) const;
  void check_peers(const std::string& what, const std::function<bool(int)>& needed);
  void kill_if_due(bool mid_op, const std::string& what) const;
  void idle_wait(uint32_t token, int64_t& last_progress, int64_t& last_live, const std::string& what,
                 const std::function<bool(int)>& needed, const std::function<std::string()>& describe, bool short_wait);
  bool progress(Exchange& x, bool data_phase);
  bool poll_inbound(Exchange& x);
  bool poll_acks(Exchange& x);
  bool push_sends(Exchange& x);
  bool send_chunk(Exchange& x, SendState& s, uint32_t c, bool resend);
  int route(int dst, bool resend_of_relayed);
  void record(int dst, bool lost);
  void evaluate_route(int dst);
  bool local_done(const Exchange& x) const;
  std::string describe(const Exchange& x) const;
  void run_to_completion(Exchange& x, bool receives_only);
  void note_notify(int peer) { notify_mask_[size_t(peer)] = 1; }
  void flush_notify();

  std::unique_ptr<Transport> transport_;
  EngineOptions options_;
  int rank_ = 0;
  int size_ = 0;
  uint32_t epoch_ = 0;
  uint64_t board_epoch_ = 0;
  int ops_ = 0;
  std::string broken_;
  std::unique_ptr<Exchange> pending_;
  std::function<void()> device_receive_;
  std::function<void()> before_agreement_;
  std::vector<LinkHealth> health_;
  std::vector<uint8_t> notify_mask_;
  std::vector<uint8_t> bounce_;
  TensorPool pool_;
};

}  // namespace deepep
