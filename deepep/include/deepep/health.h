// Self-healing: what a user can read about each link, and the fault injection built into the
// transports.
//
// A link is an ordered pair of ranks (src -> dst). Its sender keeps the statistics in memory that
// every rank can read (Comm::link_stats()). The loss rate is measured over the last
// CommOptions::health_window frames sent directly on the link; when it exceeds
// CommOptions::reroute_threshold (10% by default) and a two-hop path through another rank is
// healthier, traffic for dst goes through that rank (logged on stderr), while one frame in eight
// still probes the direct link; the route goes back to direct when the probes show the loss rate
// below half the threshold.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepep {

struct LinkStats {
  int src = 0;
  int dst = 0;
  uint64_t frames_sent = 0;        // frames the sender put on this link (its own and forwarded ones)
  uint64_t bytes_sent = 0;         // bytes of those frames, their 64-byte headers included
  uint64_t frames_forwarded = 0;   // of frames_sent, those relayed for another rank's traffic
  uint64_t retransmissions = 0;    // frames of src's traffic to dst sent again
  uint64_t losses = 0;             // frames found lost (dropped or corrupted) on the direct link
  uint64_t corrupt_received = 0;   // frames dst received with a bad checksum on this link
  uint64_t acks = 0;               // frames of src's traffic to dst acknowledged
  uint64_t reroutes = 0;           // times src's traffic to dst was moved to a two-hop route
  int via = -1;                    // current relay for src's traffic to dst, -1: direct
  double loss_rate = 0;            // over the window of the last direct frames
  double ack_latency_us = 0;       // moving average of send -> acknowledgement time
};

// Fault injection (tests and drills). Applies to the frames a rank publishes on the links it
// sends on; `links` empty means every link. Probabilities are per frame.
struct FaultConfig {
  double drop = 0;        // the frame never arrives
  double corrupt = 0;     // one bit of the frame (header or payload) is flipped after checksumming
  int64_t delay_us = 0;   // the frame becomes visible to its receiver this much later
  std::vector<std::pair<int, int>> links;  // (src, dst) pairs the faults apply to; empty: all
  int kill_rank = -1;     // this rank kills itself (SIGKILL) when it starts operation number kill_at_op
  int kill_at_op = 1;     // 1-based count of communication operations (dispatch, combine, collectives);
                          // 0: while the communicator is set up, just before the nccl device plane's
                          // ncclCommInitRank (the only setup step that offers the point)
  // Kill once that operation's agreement is done instead, so its peers are already moving data
  // (a death in the middle of a transfer, on the device planes too).
  bool kill_mid_op = false;
  uint64_t seed = 1;      // random stream of the injector (mixed with the rank)

  bool any() const { return drop > 0 || corrupt > 0 || delay_us > 0 || kill_rank >= 0; }
  // Why these values cannot be injected ("" when they can): probabilities outside [0, 1) or
  // summing to 0.95 or more, delay_us outside [0, 10 s], kill_at_op < 0, kill_rank < -1, and with
  // num_ranks > 0, a kill_rank or a link end that is not a rank of a group that size. parse()
  // and Comm apply it (a FaultConfig given in CommOptions as well as one parsed).
  std::string check(int num_ranks = 0) const;
  bool applies(int src, int dst) const;
  // "drop=0.1,corrupt=0.05,delay_us=100,links=0>1;2>3,kill_rank=2,kill_at_op=3,kill_mid_op=1,seed=7"; a user
  // error names the bad item.
  static FaultConfig parse(std::string_view text);
  // DEEPEP_FAULTS (same syntax) when set, else `fallback`.
  static FaultConfig from_env(const FaultConfig& fallback);
  std::string to_string() const;
};

}  // namespace deepep
