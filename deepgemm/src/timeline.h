// The host side of the kernel's opt-in cycle timeline (kernels/sm90_timeline.h): the stamp buffer
// decoded into streams, each stream's loop split into the steps its k-blocks spend their cycles in,
// and per CTA how long a stage takes from its TMA issue to the consumers and back to the producer.
// bench_gpu_deepgemm --timeline prints timeline_report().
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace deepgemm::detail {

// What the cycles before a stamp were spent on, named by that stamp's event.
enum class TimelinePhase : int {
  Scales,     // consumer, before the full wait: B's block scales of the k-block copied and the next
              // k-block's loaded (a copy waits for its load), and the loop's bookkeeping
  WaitData,   // consumer: waiting for a stage's full barrier
  Issue,      // consumer: the stage's scales read, the wgmmas issued
  WaitWgmma,  // consumer: wgmma.wait_group
  Release,    // consumer: __syncwarp and the empty-barrier arrive
  Promote,    // consumer: partial * scales into the accumulators
  Store,      // consumer: a tile's epilogue (its stores, or its split-K share)
  Expand,     // consumer (FP4 B in registers): a k-block's fragments from the packed stage
  WaitEmpty,  // producer: waiting for a free stage
  IssueTma,   // producer: expect_tx and the TMA loads
  Other,      // the rest: between the steps, tiles and epilogues
  Count
};
const char* timeline_phase_name(TimelinePhase phase);

// One recorded stream: the producer's issuing thread (stream 0) or lane 0 of consumer c's warp w
// (stream 1 + 4 c + w) of CTA `cta`.
struct TimelineStream {
  int cta = 0, stream = 0;
  uint32_t smid = 0;
  uint64_t globaltimer_start = 0, globaltimer_end = 0;  // ns
  int64_t stamped = 0;                                  // more than events.size(): the rest were dropped
  std::vector<std::pair<int, uint64_t>> events;         // (kernels::TimelineEvent, clock64), program order
};

// The NVRTC option (for DG_JIT_FLAGS) that compiles the stamps in, writing to `buffer`: a device
// allocation of kernels::kTimelineBytes, zeroed.
std::string timeline_jit_flag(const void* buffer);

// The streams that stamped anything, from the buffer's kernels::kTimelineBytes / 8 words.
std::vector<TimelineStream> parse_timeline(const std::vector<uint64_t>& words);

// One stream's steady state: the cycles between its first and last k-block marker (a consumer's
// FullWaitEnd, the producer's TmaIssue), split by phase. A k-interleaved consumer's k-blocks (the
// FP4 registers kernel's) are every other stage fill.
struct TimelineStats {
  int k_blocks = 0;               // markers recorded
  double cycles_per_k_block = 0;  // (last - first marker) / (k_blocks - 1)
  uint64_t phase[int(TimelinePhase::Count)] = {};
};
TimelineStats timeline_stats(const TimelineStream& s);

// One CTA's stage round trip, matching the producer's n-th k-block with the consumer warps' reads
// of that stage fill (a warp's n-th k-block, or with k-interleaved consumers the fill its Skip stamps
// say). Means over the k-blocks counted; n: how many.
struct TimelineRoundTrip {
  double data_latency = 0;  // TMA issue -> the full barrier passed, where a warp waited > 64 cycles for it
  int data_n = 0;
  double lead = 0;  // TMA issue -> a warp starts waiting for that stage (how far ahead loads go out)
  int lead_n = 0;
  double refill = 0;  // the stage's last release -> the producer's TMA issue into it, where it was waiting
  int refill_n = 0;
};
TimelineRoundTrip timeline_round_trip(const std::vector<TimelineStream>& cta_streams, int stages);

// Per CTA and stream: k-blocks, cycles per k-block and each phase's cycles per k-block and share;
// per CTA the round trip; then `excerpt_lines` stamps of CTA 0, all streams merged in time order,
// from the middle of its loop.
std::string timeline_report(const std::vector<TimelineStream>& streams, int stages, int excerpt_lines);

}  // namespace deepgemm::detail
