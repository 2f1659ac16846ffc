// An opt-in timeline of the normal-mode dispatch and combine kernels (intranode.cuh), for finding
// what a scatter block waits on (bench_deepep --gpu --timeline). Compiled in only when NVRTC gets
// -DDEEPEP_TIMELINE=<address> (through DEEPEP_JIT_FLAGS), the address of a device buffer of
// kTimelineWords u64 that is zero before the operation: the kernels built without the macro stay as
// they are. Shared by the kernels and the host code that reads the buffer. Plain enums only (NVRTC
// with -default-device would make namespace-scope variables device globals).
//
// Layout: word 0 counts the records appended (it may pass kTimelineRecords: the rest were dropped);
// record i is words 1 + 2 i (%globaltimer, ns) and 2 + 2 i (timeline_tag: the event, the peer
// rank, the block, the chunk). Thread 0 of a block stamps.
#pragma once

namespace deepep::kernels {

enum TimelineEvent : unsigned {
  kScatterStart = 1,  // a scatter block past its wait for the peers' consumed words
  kChunkBegin,        // a scatter block starts a chunk's rows (peer: the destination)
  kChunkFlagged,      // ... and has fenced them and raised the chunk's flag
  kScatterEnd,        // a scatter block done
  kReceiveStart,      // a dispatch receive (or combine reduce) block past its first waits
  kChunkArrived,      // a receive block saw a chunk's flag (peer: the source)
  kReceiveEnd,        // a receive (or reduce) block done
  kTimelineEvents
};

enum : unsigned long long {
  kTimelineRecords = 1ull << 20,
  kTimelineWords = 1 + 2 * kTimelineRecords,
};

// A record's second word: event (8 bits), peer (12), block (20), chunk (24).
inline constexpr unsigned long long timeline_tag(unsigned event, unsigned long long peer, unsigned long long block,
                                                 unsigned long long chunk) {
  return (static_cast<unsigned long long>(event) << 56) | ((peer & 0xfffull) << 44) | ((block & 0xfffffull) << 24) |
         (chunk & 0xffffffull);
}
inline constexpr unsigned timeline_event(unsigned long long tag) { return unsigned(tag >> 56); }
inline constexpr unsigned timeline_peer(unsigned long long tag) { return unsigned((tag >> 44) & 0xfff); }
inline constexpr unsigned timeline_block(unsigned long long tag) { return unsigned((tag >> 24) & 0xfffff); }
inline constexpr unsigned timeline_chunk(unsigned long long tag) { return unsigned(tag & 0xffffff); }

}  // namespace deepep::kernels
