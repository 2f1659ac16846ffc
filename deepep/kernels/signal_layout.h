// Where the device signalling keeps its words, shared by the kernels (NVRTC: intranode.cuh,
// low_latency.cuh) and the host code that sizes the signal area and reads the kernels' reports
// (src/transport/cuda_ipc/device_plane.cc), so the two cannot drift apart. Plain constants only.
#pragma once

namespace deepep::kernels {

// Status words: int32 in page-locked host memory, written by a kernel only on an error and kept
// until the host takes them.
constexpr int kLlTimedOut = 0;     // 1 + a rank whose low-latency flag never came
constexpr int kLlBadSource = 1;    // 1 + a rank whose top-k indices were invalid
constexpr int kLlTopkDiffers = 2;  // 1 when combine's topk_idx differs from its dispatch's
constexpr int kNormalTimedOut = 3;  // 1 + a rank whose normal-mode flag or consumed word never came
constexpr int kStatusWords = 4;

// Signal words (u64) of a window's signal area: the low-latency ones in [0, 16384)
// (low_latency.cuh), then the normal mode's.
constexpr int kNormalMaxRanks = 1024;
constexpr long long kNormalFlags = 16384;                              // [ranks]: source s's flag at + s
constexpr long long kNormalConsumed = kNormalFlags + kNormalMaxRanks;  // the last operation read here
constexpr long long kNormalRecvArrivals = kNormalConsumed + 1;         // blocks of the running receive done
constexpr long long kNormalGaveUp = kNormalConsumed + 2;  // nonzero once a wait of this rank timed out (then broken)
// The chunk flags of a dispatch or a combine: source s's share is kNormalChunkWords / ranks words
// from kNormalChunkFlags + s * that, one per chunk of its rows for this rank (normal_layout.h:
// chunk_rows). A word is written only by the calls that have that chunk, so it may keep an old
// call's number for a long time: it holds the operation's whole 64-bit number (NormalSignals::op),
// which never comes round again.
constexpr long long kNormalChunkFlags = kNormalGaveUp + 1;
constexpr long long kNormalChunkWords = 9216;
// The device barriers between the collectives' phases (intranode.cuh: device_barrier_body): source
// s's latest barrier number at kBarrierFlags + s. The numbers only grow, so a peer that has already
// raised its next barrier's number here has passed this one too.
constexpr long long kBarrierFlags = kNormalChunkFlags + kNormalChunkWords;
// The all-reduce's flags (intranode.cuh: all_reduce_body), two per source rank and block of its
// grid: source s's block b at kReduceFlags + 2 (s * blocks + b), "pushed" then "reduced"; so the
// grid has at most kReduceFlagWords / (2 ranks) blocks.
constexpr long long kReduceFlags = kBarrierFlags + kNormalMaxRanks;
constexpr long long kReduceFlagWords = 4096;
constexpr long long kSignalWords = kReduceFlags + kReduceFlagWords;

}  // namespace deepep::kernels
