// An opt-in cycle timeline of sm90_gemm.cuh's loops, for finding which step a k-block waits on
// (bench_gpu_deepgemm --timeline). Compiled in only when NVRTC gets -DDG_TIMELINE=<address> (through
// DG_JIT_FLAGS), the address of a device buffer of kTimelineBytes: baking the address into the
// kernel leaves its parameters, and the code built without the macro, exactly as they are.
//
// Recorded: the first kTimelineCtas CTAs (blockIdx.x); per CTA, stream 0 is the producer's issuing
// thread and stream 1 + 4 c + w lane 0 of warp w of consumer c (FP8 loops only; and every loop of
// sm90_fp4_gemm.cuh, whose consumers also stamp ExpandEnd after expanding a k-block's fragments). A stream is
// kTimelineHeader words -- [0] events stamped (may exceed kTimelineRecords: the rest were dropped),
// [1] %globaltimer (ns) just before the Start stamp, [2] just after the End stamp, [3] %smid -- then
// up to kTimelineRecords records, each event << 56 | (clock64 & kTimelineClockMask), in program
// order. The waits, Release and TmaIssue occur once per k-block, so their n-th occurrence in a
// stream belongs to its n-th k-block (the producer's and the consumers' n-th k-blocks are the same
// stage fill; a k-interleaved consumer of sm90_fp4_gemm.cuh stamps Skip for each fill it leaves to
// the other, so there its FullWaitEnd and Skip stamps together count the fills); Issue, the wgmma
// waits and the promotion once per wgmma group (per k-block in the 64- and 128-row FP8 loops, per
// m64 wave or promotion sub-block in the others). Every lane of a stamping warp reads the clock, so
// the stamps add no divergence around the wgmmas.
#pragma once

#include "tl/device/numeric.h"

namespace deepgemm::kernels {

enum class TimelineEvent : tl::uint32_t {
  Start = 1,  // stream opened (before the first tile)
  End,        // stream closed (after the last tile)
  Tile,       // a tile (or split-K piece) begins
  // consumer warps
  FullWaitBegin,  // before waiting for a stage's data
  FullWaitEnd,
  Issue,  // a wgmma group committed
  WgmmaWaitBegin,
  WgmmaWaitEnd,
  Release,  // the stage's empty-barrier arrive done
  PromoteBegin,
  PromoteEnd,
  // producer
  EmptyWaitBegin,  // before waiting for a free stage
  EmptyWaitEnd,
  TmaIssue,  // the stage's TMA loads issued
  // consumer warps again (appended: the values above are the decoder's)
  Skip,        // k-interleaved consumers (sm90_fp4_gemm.cuh): a stage fill left to the other consumer
  StoreBegin,  // a tile's epilogue (split-K reduction or store) begins
  StoreEnd,    // and ends
  ExpandEnd,   // FP4 B in registers (sm90_fp4_gemm.cuh): a k-block's fragments expanded
  Count
};

// Enumerators, not constexpr variables: with -default-device NVRTC emits namespace-scope variables
// as device globals, which would change the module built without DG_TIMELINE.
enum : int {
  kTimelineCtas = 8,
  kTimelineStreams = 13,  // the producer + up to 3 consumers x 4 warps
  kTimelineHeader = 4,
  kTimelineRecords = 2048,  // 8 per consumer k-block: ~250 k-blocks
  kTimelineStreamWords = kTimelineHeader + kTimelineRecords,
  kTimelineBytes = 8 * kTimelineCtas * kTimelineStreams * kTimelineStreamWords,
};
enum : tl::uint64_t { kTimelineClockMask = (tl::uint64_t(1) << 56) - 1 };

}  // namespace deepgemm::kernels

#if defined(DG_TIMELINE)
#include "tl/device/cuda/arch.h"
#include "tl/device/cuda/wgmma.h"

static_assert(DG_TIMELINE != 0 && DG_TIMELINE % 8 == 0, "DG_TIMELINE must be the stamp buffer's device address");

namespace deepgemm::kernels {

// One stream's writer; only the writer lane of a recorded CTA stores.
struct TimelineWriter {
  tl::uint64_t* words = nullptr;  // the stream's header; null: not recorded
  tl::uint32_t n = 0;

  TL_DEVICE TimelineWriter(int stream, bool writer) {
    if (writer && blockIdx.x < unsigned(kTimelineCtas)) {
      words = reinterpret_cast<tl::uint64_t*>(tl::uint64_t(DG_TIMELINE)) +
              (blockIdx.x * kTimelineStreams + stream) * tl::uint64_t(kTimelineStreamWords);
      tl::uint32_t smid;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
      words[3] = smid;
      words[1] = tl::cuda::globaltimer_ns();
    }
    stamp(TimelineEvent::Start);
  }
  TL_DEVICE void stamp(TimelineEvent e) {
    tl::uint64_t t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
    const tl::uint64_t record = tl::uint64_t(e) << 56 | (t & kTimelineClockMask);
    const tl::uint64_t address = reinterpret_cast<tl::uint64_t>(words) + 8 * (kTimelineHeader + n);
    // A predicated store, not a branch: the other lanes must not diverge around the wgmmas.
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.u32 p, %2, 0;\n"
        "@p st.global.u64 [%0], %1;\n"
        "}\n" ::"l"(address),
        "l"(record), "r"(tl::uint32_t(words != nullptr && n < tl::uint32_t(kTimelineRecords))));
    ++n;
  }
  TL_DEVICE void close() {
    stamp(TimelineEvent::End);
    if (words) {
      words[2] = tl::cuda::globaltimer_ns();
      words[0] = n;
    }
  }
};

}  // namespace deepgemm::kernels

#define DG_TIMELINE_OPEN(stream, writer) ::deepgemm::kernels::TimelineWriter dg_timeline(stream, writer)
#define DG_STAMP(event) dg_timeline.stamp(::deepgemm::kernels::TimelineEvent::event)
// A stamp after the register array `values` is computed (the compiler may otherwise sink plain
// arithmetic past the clock read).
#define DG_STAMP_AFTER(event, values)     \
  do {                                    \
    tl::cuda::fence_accumulators(values); \
    DG_STAMP(event);                      \
  } while (0)
#define DG_TIMELINE_CLOSE() dg_timeline.close()
#else
#define DG_TIMELINE_OPEN(stream, writer)
#define DG_STAMP(event)
#define DG_STAMP_AFTER(event, values)
#define DG_TIMELINE_CLOSE()
#endif
