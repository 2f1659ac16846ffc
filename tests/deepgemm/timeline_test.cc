// The kernel timeline's host-side decoding (deepgemm/src/timeline.h) on a synthetic stamp buffer
// laid out as kernels/sm90_timeline.h says the kernel writes it.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "deepgemm/kernels/sm90_timeline.h"
#include "rt/error.h"
#include "timeline.h"

namespace {

namespace k = deepgemm::kernels;
using E = k::TimelineEvent;
using Events = std::vector<std::pair<E, uint64_t>>;

void put(std::vector<uint64_t>& words, int cta, int stream, uint32_t smid, uint64_t gt0, uint64_t gt1,
         const Events& events, int64_t stamped = -1) {
  uint64_t* w = words.data() + size_t(cta * k::kTimelineStreams + stream) * k::kTimelineStreamWords;
  w[0] = uint64_t(stamped < 0 ? int64_t(events.size()) : stamped);
  w[1] = gt0;
  w[2] = gt1;
  w[3] = smid;
  for (size_t i = 0; i < events.size() && i < size_t(k::kTimelineRecords); ++i)
    w[k::kTimelineHeader + i] = uint64_t(events[i].first) << 56 | events[i].second;
}

// Two stages, six k-blocks. Consumer warp k-block n starts at T = 1000 + 200 n: full wait 100
// cycles, issue 10, other 5, wgmma wait 25, release 10 (warp 1: 30), other 5, promote 35 (warp 1:
// 15), scales 10. The producer issues k-blocks 0 and 1 at 500 and 520, then each stage 40 cycles
// after warp 1 (the last) released it.
constexpr int kStages = 2, kBlocks = 6;

uint64_t last_release(int n) { return 1000 + 200 * uint64_t(n) + 170; }
uint64_t tma_issue(int n) { return n < kStages ? 500 + 20 * uint64_t(n) : last_release(n - kStages) + 40; }

Events consumer(int warp) {
  Events e{{E::Start, 900}, {E::Tile, 950}};
  for (int n = 0; n < kBlocks; ++n) {
    const uint64_t t = 1000 + 200 * uint64_t(n), release = warp == 0 ? 150 : 170;
    e.insert(e.end(), {{E::FullWaitBegin, t},
                       {E::FullWaitEnd, t + 100},
                       {E::Issue, t + 110},
                       {E::WgmmaWaitBegin, t + 115},
                       {E::WgmmaWaitEnd, t + 140},
                       {E::Release, t + release},
                       {E::PromoteBegin, t + release + 5},
                       {E::PromoteEnd, t + 190}});
  }
  e.push_back({E::End, 2300});
  return e;
}

Events producer() {
  Events e{{E::Start, 480}, {E::Tile, 485}};
  for (int n = 0; n < kBlocks; ++n) {
    const uint64_t wait = n < kStages ? tma_issue(n) - 15 : n == kStages ? 540 : tma_issue(n - 1) + 5;
    const uint64_t passed = n < kStages ? tma_issue(n) - 10 : last_release(n - kStages) + 30;
    e.insert(e.end(), {{E::EmptyWaitBegin, wait}, {E::EmptyWaitEnd, passed}, {E::TmaIssue, tma_issue(n)}});
  }
  e.push_back({E::End, tma_issue(kBlocks - 1) + 10});  // 1820: 1340 cycles after Start
  return e;
}

std::vector<uint64_t> synthetic() {
  std::vector<uint64_t> words(size_t(k::kTimelineBytes / 8), 0);
  put(words, 0, 0, 7, 10000, 10670, producer());  // 1340 cycles in 670 ns: 2000 MHz
  put(words, 0, 1, 7, 10200, 10900, consumer(0));
  put(words, 0, 2, 7, 10200, 10900, consumer(1));
  return words;
}

TEST(Timeline, ParsesTheStreamsThatStamped) {
  std::vector<uint64_t> words = synthetic();
  Events many;
  for (int i = 0; i < k::kTimelineRecords; ++i) many.push_back({E::FullWaitEnd, 100 + uint64_t(i)});
  put(words, 3, 5, 9, 0, 0, many, k::kTimelineRecords + 10);  // stamped more than the buffer holds
  const auto streams = deepgemm::detail::parse_timeline(words);
  ASSERT_EQ(streams.size(), 4u);
  EXPECT_EQ(streams[0].stream, 0);
  EXPECT_EQ(streams[0].smid, 7u);
  EXPECT_EQ(streams[0].globaltimer_end, 10670u);
  EXPECT_EQ(streams[0].events.size(), producer().size());
  EXPECT_EQ(streams[1].events[2], (std::pair<int, uint64_t>{int(E::FullWaitBegin), 1000}));
  EXPECT_EQ(streams[3].cta, 3);
  EXPECT_EQ(streams[3].stream, 5);
  EXPECT_EQ(streams[3].stamped, k::kTimelineRecords + 10);
  EXPECT_EQ(streams[3].events.size(), size_t(k::kTimelineRecords));
  EXPECT_THROW(deepgemm::detail::parse_timeline(std::vector<uint64_t>(10)), rt::Error);
}

TEST(Timeline, SplitsEachStreamsKBlocksIntoPhases) {
  using P = deepgemm::detail::TimelinePhase;
  const auto streams = deepgemm::detail::parse_timeline(synthetic());
  const auto c = deepgemm::detail::timeline_stats(streams[1]);
  EXPECT_EQ(c.k_blocks, kBlocks);
  EXPECT_DOUBLE_EQ(c.cycles_per_k_block, 200);
  const int intervals = kBlocks - 1;
  EXPECT_EQ(c.phase[int(P::WaitData)], 100u * intervals);
  EXPECT_EQ(c.phase[int(P::Issue)], 10u * intervals);
  EXPECT_EQ(c.phase[int(P::WaitWgmma)], 25u * intervals);
  EXPECT_EQ(c.phase[int(P::Release)], 10u * intervals);
  EXPECT_EQ(c.phase[int(P::Promote)], 35u * intervals);
  EXPECT_EQ(c.phase[int(P::Scales)], 10u * intervals);
  EXPECT_EQ(c.phase[int(P::Other)], 10u * intervals);
  EXPECT_EQ(c.phase[int(P::WaitEmpty)], 0u);

  const auto p = deepgemm::detail::timeline_stats(streams[0]);
  EXPECT_EQ(p.k_blocks, kBlocks);
  EXPECT_DOUBLE_EQ(p.cycles_per_k_block, (tma_issue(kBlocks - 1) - tma_issue(0)) / 5.0);
  // k-block 1: 5 + 5 + 10; k-block 2: waits from 540 to 30 after the release of k-block 0; then 5 + 185 + 10 each.
  EXPECT_EQ(p.phase[int(P::WaitEmpty)], 5u + (last_release(0) + 30 - 540) + 3 * 185u);
  EXPECT_EQ(p.phase[int(P::IssueTma)], 10u * intervals);
  EXPECT_EQ(p.phase[int(P::Other)], 5u + 20u + 3 * 5u);
}

// The FP4 registers kernel stamps ExpandEnd after expanding a k-block's fragments (between its full
// wait and its wgmmas): those cycles are the Expand phase.
TEST(Timeline, CountsTheFp4ExpansionAsExpand) {
  using P = deepgemm::detail::TimelinePhase;
  Events e{{E::Start, 900}, {E::Tile, 950}};
  for (int n = 0; n < kBlocks; ++n) {
    const uint64_t t = 1000 + 300 * uint64_t(n);
    e.insert(e.end(), {{E::FullWaitBegin, t},
                       {E::FullWaitEnd, t + 20},
                       {E::ExpandEnd, t + 140},
                       {E::Issue, t + 150},
                       {E::WgmmaWaitBegin, t + 155},
                       {E::WgmmaWaitEnd, t + 180},
                       {E::PromoteBegin, t + 185},
                       {E::PromoteEnd, t + 280},
                       {E::Release, t + 290}});
  }
  e.push_back({E::End, 3000});
  std::vector<uint64_t> words(size_t(k::kTimelineBytes / 8), 0);
  put(words, 0, 1, 3, 0, 1, e);
  const auto stats = deepgemm::detail::timeline_stats(deepgemm::detail::parse_timeline(words)[0]);
  const int intervals = kBlocks - 1;
  EXPECT_DOUBLE_EQ(stats.cycles_per_k_block, 300);
  EXPECT_EQ(stats.phase[int(P::Expand)], 120u * intervals);
  EXPECT_EQ(stats.phase[int(P::WaitData)], 20u * intervals);
  EXPECT_EQ(stats.phase[int(P::Promote)], 95u * intervals);
  EXPECT_STREQ(deepgemm::detail::timeline_phase_name(P::Expand), "expand");
}

TEST(Timeline, CountsATilesEpilogueAsStore) {
  using P = deepgemm::detail::TimelinePhase;
  std::vector<uint64_t> words(size_t(k::kTimelineBytes / 8), 0);
  // k-block 0's data at 0, the tile's epilogue from 10 to 40, the next tile at 45, its data at 60.
  put(words, 0, 1, 0, 0, 0,
      {{E::FullWaitEnd, 0}, {E::StoreBegin, 10}, {E::StoreEnd, 40}, {E::Tile, 45}, {E::FullWaitBegin, 50},
       {E::FullWaitEnd, 60}});
  const auto c = deepgemm::detail::timeline_stats(deepgemm::detail::parse_timeline(words)[0]);
  EXPECT_EQ(c.k_blocks, 2);
  EXPECT_EQ(c.phase[int(P::Store)], 30u);
  EXPECT_EQ(c.phase[int(P::Other)], 15u);
  EXPECT_EQ(c.phase[int(P::Scales)], 5u);
  EXPECT_EQ(c.phase[int(P::WaitData)], 10u);
}

TEST(Timeline, MatchesTheProducersAndConsumersKBlocks) {
  const auto streams = deepgemm::detail::parse_timeline(synthetic());
  const auto r = deepgemm::detail::timeline_round_trip(streams, kStages);
  // Both warps waited 100 cycles for every k-block: data passed at 1100 + 200 n.
  EXPECT_EQ(r.data_n, 2 * kBlocks);
  EXPECT_DOUBLE_EQ(r.data_latency, (600 + 780 + 4 * 290) / 6.0);
  EXPECT_EQ(r.lead_n, 2 * kBlocks);
  EXPECT_DOUBLE_EQ(r.lead, (500 + 680 + 4 * 190) / 6.0);
  // The producer waited for every refill (k-blocks 2-5), each issued 40 cycles after warp 1's release.
  EXPECT_EQ(r.refill_n, kBlocks - kStages);
  EXPECT_DOUBLE_EQ(r.refill, 40);
  // With more stages than k-blocks minus one, nothing is refilled.
  EXPECT_EQ(deepgemm::detail::timeline_round_trip(streams, kBlocks).refill_n, 0);
}

// Two k-interleaved consumers (streams 1 and 5: warp 0 of each), the first reading the even stage
// fills and the second the odd ones, each stamping Skip for the other's: every fill is matched
// with its own TMA issue, as the one-consumer warps above are.
Events interleaved(int consumer) {
  Events e{{E::Start, 900}, {E::Tile, 950}};
  for (int n = 0; n < kBlocks; ++n) {
    const uint64_t t = 1000 + 200 * uint64_t(n);
    if (n % 2 != consumer) {
      e.push_back({E::Skip, t + 50});
      continue;
    }
    e.insert(e.end(), {{E::FullWaitBegin, t},
                       {E::FullWaitEnd, t + 100},
                       {E::Issue, t + 110},
                       {E::WgmmaWaitBegin, t + 115},
                       {E::WgmmaWaitEnd, t + 140},
                       {E::Release, t + 170},
                       {E::PromoteBegin, t + 175},
                       {E::PromoteEnd, t + 190}});
  }
  e.push_back({E::End, 2300});
  return e;
}

TEST(Timeline, MatchesInterleavedConsumersByTheirSkips) {
  std::vector<uint64_t> words(size_t(k::kTimelineBytes / 8), 0);
  put(words, 0, 0, 7, 10000, 10670, producer());
  put(words, 0, 1, 7, 10200, 10900, interleaved(0));
  put(words, 0, 5, 7, 10200, 10900, interleaved(1));
  const auto streams = deepgemm::detail::parse_timeline(words);
  const auto r = deepgemm::detail::timeline_round_trip(streams, kStages);
  // Each fill read once, 100 cycles after its wait began: the sums of the test above over one warp.
  EXPECT_EQ(r.data_n, kBlocks);
  EXPECT_DOUBLE_EQ(r.data_latency, (600 + 780 + 4 * 290) / 6.0);
  EXPECT_EQ(r.lead_n, kBlocks);
  EXPECT_DOUBLE_EQ(r.lead, (500 + 680 + 4 * 190) / 6.0);
  EXPECT_EQ(r.refill_n, kBlocks - kStages);
  EXPECT_DOUBLE_EQ(r.refill, 40);
  // A consumer's own k-blocks are every other fill: 400 cycles apart.
  EXPECT_DOUBLE_EQ(deepgemm::detail::timeline_stats(streams[2]).cycles_per_k_block, 400);
  const std::string report = deepgemm::detail::timeline_report(streams, kStages, 40);
  EXPECT_NE(report.find("c1.w0     skipped       k-block 4\n"), std::string::npos) << report;
  EXPECT_NE(report.find("c1.w0     full passed   k-block 5\n"), std::string::npos) << report;
  EXPECT_NE(report.find("cycles after c0.w0's wait for k-block 2 "), std::string::npos) << report;
}

TEST(Timeline, JitFlag) {
  EXPECT_EQ(deepgemm::detail::timeline_jit_flag(reinterpret_cast<const void*>(uintptr_t(0x7f0000001000))),
            "-DDG_TIMELINE=139637976731648ull");
}

TEST(Timeline, Report) {
  const std::string report = deepgemm::detail::timeline_report(deepgemm::detail::parse_timeline(synthetic()), kStages, 6);
  EXPECT_NE(report.find("| 0 | 7 | c0.w0 | 6 | 200 | 10 (5%) | 100 (50%) | 10 (5%) |"), std::string::npos) << report;
  EXPECT_NE(report.find("| 0 | 7 | producer | 6 | 262 | - | - | - | - | - | - | - | - | 244 (93%) | 10 (4%) | 8 (3%) |"), std::string::npos) << report;
  EXPECT_NE(report.find("| all | - | consumer warps (2) | - | 200 | 10 (5%) | 100 (50%) |"), std::string::npos) << report;
  // Warp c0.w0 (1400 cycles in 700 ns): first data 200 cycles after its start, its last release 1050
  // cycles later, its end 150 after that.
  EXPECT_NE(report.find("| 0 | 2000 | 0 | 423 (12) | 323 | 40 (4) | 100, 525, 75 |"), std::string::npos) << report;
  // The excerpt starts at warp 0's wait for k-block 3 (1600): both warps' waits, then the data.
  EXPECT_NE(report.find("+0  c0.w0     full wait     k-block 3\n       +0  c0.w1     full wait     k-block 3\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("+100  c0.w0     full passed   k-block 3\n"), std::string::npos) << report;
  EXPECT_EQ(deepgemm::detail::timeline_report({}, kStages, 6), "timeline: no stamps recorded\n");
}

}  // namespace
