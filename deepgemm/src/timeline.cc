#include "timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "deepgemm/kernels/sm90_timeline.h"
#include "rt/error.h"

namespace deepgemm::detail {
namespace {

using kernels::TimelineEvent;

TimelinePhase phase_of(int event) {
  switch (TimelineEvent(event)) {
    case TimelineEvent::FullWaitBegin:
    case TimelineEvent::Skip: return TimelinePhase::Scales;
    case TimelineEvent::FullWaitEnd: return TimelinePhase::WaitData;
    case TimelineEvent::Issue: return TimelinePhase::Issue;
    case TimelineEvent::WgmmaWaitEnd: return TimelinePhase::WaitWgmma;
    case TimelineEvent::Release: return TimelinePhase::Release;
    case TimelineEvent::PromoteEnd: return TimelinePhase::Promote;
    case TimelineEvent::StoreEnd: return TimelinePhase::Store;
    case TimelineEvent::ExpandEnd: return TimelinePhase::Expand;
    case TimelineEvent::EmptyWaitEnd: return TimelinePhase::WaitEmpty;
    case TimelineEvent::TmaIssue: return TimelinePhase::IssueTma;
    default: return TimelinePhase::Other;
  }
}

const char* event_name(int event) {
  static const char* const names[] = {"?",           "start",          "end",          "tile",
                                      "full wait",   "full passed",    "wgmma issued", "wgmma wait",
                                      "wgmma done",  "release",        "promote",      "promoted",
                                      "empty wait",  "empty passed",   "tma issued",   "skipped",
                                      "store",       "stored",         "expanded"};
  static_assert(std::size(names) == size_t(TimelineEvent::Count));
  return event > 0 && event < int(TimelineEvent::Count) ? names[event] : "?";
}

// Events stamped once per k-block (the others may repeat per wave or promotion sub-block).
bool per_k_block(int event) {
  switch (TimelineEvent(event)) {
    case TimelineEvent::FullWaitBegin:
    case TimelineEvent::FullWaitEnd:
    case TimelineEvent::Release:
    case TimelineEvent::EmptyWaitBegin:
    case TimelineEvent::EmptyWaitEnd:
    case TimelineEvent::TmaIssue:
    case TimelineEvent::Skip: return true;
    default: return false;
  }
}

// The stage fill (the producer's k-block) of each of a consumer stream's k-blocks: its n-th
// FullWaitEnd is fill n, unless the stream is a k-interleaved consumer's, whose Skip stamps count
// the fills it leaves to the other.
std::vector<size_t> fills_of(const TimelineStream& s) {
  std::vector<size_t> fills;
  size_t fill = 0;
  for (const auto& [event, clock] : s.events) {
    if (event == int(TimelineEvent::FullWaitEnd)) fills.push_back(fill++);
    if (event == int(TimelineEvent::Skip)) ++fill;
  }
  return fills;
}

// Each event's stage fill, -1 for events not stamped per k-block: the producer's n-th of a kind is
// fill n; a consumer's n-th wait or release is its n-th k-block's fill (fills_of), a Skip the fill
// it passes.
std::vector<int> event_fills(const TimelineStream& s) {
  const std::vector<size_t> fills = s.stream == 0 ? std::vector<size_t>{} : fills_of(s);
  std::vector<int> out;
  int seen[int(TimelineEvent::Count)] = {};
  int skipped = 0;  // Skip stamps so far
  for (const auto& [event, clock] : s.events) {
    const int index = event > 0 && event < int(TimelineEvent::Count) ? seen[event]++ : 0;
    if (!per_k_block(event)) {
      out.push_back(-1);
    } else if (s.stream == 0) {
      out.push_back(index);
    } else if (event == int(TimelineEvent::Skip)) {
      out.push_back(seen[int(TimelineEvent::FullWaitEnd)] + skipped++);  // fills read or passed before it
    } else {
      out.push_back(size_t(index) < fills.size() ? int(fills[size_t(index)]) : -1);
    }
  }
  return out;
}

std::vector<uint64_t> times_of(const TimelineStream& s, TimelineEvent e) {
  std::vector<uint64_t> t;
  for (const auto& [event, clock] : s.events)
    if (event == int(e)) t.push_back(clock);
  return t;
}

double diff(uint64_t a, uint64_t b) { return double(int64_t(a - b)); }

std::string stream_name(int stream) {
  return stream == 0 ? "producer" : rt::str("c", (stream - 1) / 4, ".w", (stream - 1) % 4);
}

// "cycles per k-block (share)" of each phase, "-" where the role has none.
std::string phase_cells(const uint64_t (&phase)[int(TimelinePhase::Count)], int intervals) {
  uint64_t total = 0;
  for (uint64_t c : phase) total += c;
  std::string cells;
  for (int p = 0; p < int(TimelinePhase::Count); ++p) {
    char cell[48] = " - |";
    if (phase[p] > 0 && intervals > 0)
      std::snprintf(cell, sizeof(cell), " %.0f (%.0f%%) |", double(phase[p]) / intervals,
                    100.0 * double(phase[p]) / double(total));
    cells += cell;
  }
  return cells;
}

}  // namespace

const char* timeline_phase_name(TimelinePhase phase) {
  static const char* const names[] = {"scales", "wait data",  "issue",     "wait wgmma", "release", "promote",
                                      "store",  "expand",     "wait empty", "issue TMA", "other"};
  static_assert(std::size(names) == size_t(TimelinePhase::Count));
  return names[int(phase)];
}

std::string timeline_jit_flag(const void* buffer) {
  return rt::str("-DDG_TIMELINE=", reinterpret_cast<uintptr_t>(buffer), "ull");
}

std::vector<TimelineStream> parse_timeline(const std::vector<uint64_t>& words) {
  using namespace kernels;
  RT_ICHECK(int64_t(words.size()) * 8 == kTimelineBytes, "timeline buffer of ", words.size(), " words, expected ",
            kTimelineBytes / 8);
  std::vector<TimelineStream> streams;
  for (int cta = 0; cta < kTimelineCtas; ++cta) {
    for (int stream = 0; stream < kTimelineStreams; ++stream) {
      const uint64_t* w = words.data() + size_t(cta * kTimelineStreams + stream) * kTimelineStreamWords;
      if (w[0] == 0) continue;
      TimelineStream s;
      s.cta = cta;
      s.stream = stream;
      s.stamped = int64_t(w[0]);
      s.globaltimer_start = w[1];
      s.globaltimer_end = w[2];
      s.smid = uint32_t(w[3]);
      const int64_t n = std::min<int64_t>(s.stamped, kTimelineRecords);
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t r = w[kTimelineHeader + i];
        s.events.emplace_back(int(r >> 56), r & kTimelineClockMask);
      }
      streams.push_back(std::move(s));
    }
  }
  return streams;
}

TimelineStats timeline_stats(const TimelineStream& s) {
  const int marker = int(s.stream == 0 ? TimelineEvent::TmaIssue : TimelineEvent::FullWaitEnd);
  TimelineStats st;
  size_t first = s.events.size(), last = 0;
  for (size_t i = 0; i < s.events.size(); ++i) {
    if (s.events[i].first != marker) continue;
    first = std::min(first, i);
    last = i;
    ++st.k_blocks;
  }
  if (st.k_blocks < 2) return st;
  for (size_t i = first + 1; i <= last; ++i)
    st.phase[int(phase_of(s.events[i].first))] += s.events[i].second - s.events[i - 1].second;
  st.cycles_per_k_block = diff(s.events[last].second, s.events[first].second) / (st.k_blocks - 1);
  return st;
}

TimelineRoundTrip timeline_round_trip(const std::vector<TimelineStream>& cta_streams, int stages) {
  TimelineRoundTrip r;
  const auto producer = std::find_if(cta_streams.begin(), cta_streams.end(),
                                     [](const TimelineStream& s) { return s.stream == 0; });
  if (producer == cta_streams.end()) return r;
  const std::vector<uint64_t> tma = times_of(*producer, TimelineEvent::TmaIssue);
  const std::vector<uint64_t> empty_wait = times_of(*producer, TimelineEvent::EmptyWaitBegin);
  // Per stage fill, over the consumer warps that read it: the last release and how many released.
  std::vector<uint64_t> last_release(tma.size());
  std::vector<int> releasers(tma.size());
  for (const TimelineStream& s : cta_streams) {
    if (s.stream == 0) continue;
    const std::vector<uint64_t> wait = times_of(s, TimelineEvent::FullWaitBegin);
    const std::vector<uint64_t> passed = times_of(s, TimelineEvent::FullWaitEnd);
    const std::vector<uint64_t> release = times_of(s, TimelineEvent::Release);
    const std::vector<size_t> fills = fills_of(s);
    for (size_t k = 0; k < std::min(wait.size(), passed.size()) && fills[k] < tma.size(); ++k) {
      const uint64_t issued = tma[fills[k]];
      r.lead += diff(wait[k], issued);
      ++r.lead_n;
      if (passed[k] - wait[k] > 64) {
        r.data_latency += diff(passed[k], issued);
        ++r.data_n;
      }
    }
    for (size_t k = 0; k < std::min(release.size(), fills.size()) && fills[k] < tma.size(); ++k) {
      uint64_t& last = last_release[fills[k]];
      last = releasers[fills[k]]++ == 0 ? release[k] : std::max(last, release[k]);
    }
  }
  // Only fills released by as many warps as any (the buffer may have cut a stream's last ones) count.
  const int all_warps = releasers.empty() ? 0 : *std::max_element(releasers.begin(), releasers.end());
  const size_t s = size_t(stages);
  for (size_t k = 0; k + s < std::min(tma.size(), empty_wait.size()); ++k) {
    if (all_warps == 0 || releasers[k] < all_warps) continue;
    if (empty_wait[k + s] >= last_release[k]) continue;  // the stage was free before the producer asked
    r.refill += diff(tma[k + s], last_release[k]);
    ++r.refill_n;
  }
  if (r.data_n) r.data_latency /= r.data_n;
  if (r.lead_n) r.lead /= r.lead_n;
  if (r.refill_n) r.refill /= r.refill_n;
  return r;
}

std::string timeline_report(const std::vector<TimelineStream>& streams, int stages, int excerpt_lines) {
  if (streams.empty()) return "timeline: no stamps recorded\n";
  std::string out = rt::str("timeline: ", streams.size(), " streams of ", streams.back().cta + 1,
                            " CTAs (clock64 cycles of each CTA's SM; a phase is the cycles before its stamp)\n\n");
  out += "| CTA | SM | stream | k-blocks | cycles / k-block |";
  for (int p = 0; p < int(TimelinePhase::Count); ++p) out += rt::str(" ", timeline_phase_name(TimelinePhase(p)), " |");
  out += "\n|---|---|---|---|---|";
  for (int p = 0; p < int(TimelinePhase::Count); ++p) out += "---|";
  out += "\n";
  bool truncated = false;
  uint64_t role_phase[2][int(TimelinePhase::Count)] = {};
  int role_intervals[2] = {}, role_streams[2] = {};
  for (const TimelineStream& s : streams) {
    const TimelineStats st = timeline_stats(s);
    const bool cut = s.stamped > int64_t(s.events.size());
    truncated = truncated || cut;
    char head[96];
    std::snprintf(head, sizeof(head), "| %d | %u | %s | %d%s | %.0f |", s.cta, s.smid, stream_name(s.stream).c_str(),
                  st.k_blocks, cut ? "*" : "", st.cycles_per_k_block);
    out += head + phase_cells(st.phase, st.k_blocks - 1) + "\n";
    const int role = s.stream == 0 ? 0 : 1;
    if (st.k_blocks < 2) continue;
    for (int p = 0; p < int(TimelinePhase::Count); ++p) role_phase[role][p] += st.phase[p];
    role_intervals[role] += st.k_blocks - 1;
    ++role_streams[role];
  }
  for (int role = 0; role < 2; ++role) {
    if (role_intervals[role] == 0) continue;
    uint64_t total = 0;
    for (uint64_t c : role_phase[role]) total += c;
    char head[96];
    std::snprintf(head, sizeof(head), "| all | - | %s (%d) | - | %.0f |", role == 0 ? "producers" : "consumer warps",
                  role_streams[role], double(total) / role_intervals[role]);
    out += head + phase_cells(role_phase[role], role_intervals[role]) + "\n";
  }
  if (truncated) out += "\n* the stream stamped more than the buffer holds: its last k-blocks are missing\n";

  // Per CTA: the SM clock by %globaltimer, the start against the first CTA, the stage round trip.
  std::map<int, std::vector<TimelineStream>> by_cta;
  for (const TimelineStream& s : streams) by_cta[s.cta].push_back(s);
  uint64_t first_start = ~uint64_t(0);
  for (const TimelineStream& s : streams) first_start = std::min(first_start, s.globaltimer_start);
  out += rt::str("\n| CTA | SM MHz (clock64 / globaltimer) | start (ns after the first) | TMA issue -> data passed, "
                 "where waited (cycles, k-blocks) | TMA issue -> consumer asks (cycles) | last release -> refill "
                 "TMA issue, where the producer waited (cycles, k-blocks), ",
                 stages, " stages | first consumer warp's life (ns): start -> first data, loop, last release -> end "
                 "|\n|---|---|---|---|---|---|---|\n");
  for (const auto& [cta, list] : by_cta) {
    const TimelineStream& s = list.front();
    const double ns = diff(s.globaltimer_end, s.globaltimer_start);
    const double cycles = s.events.size() >= 2 && s.stamped == int64_t(s.events.size())
                              ? diff(s.events.back().second, s.events.front().second)
                              : 0;
    const TimelineRoundTrip r = timeline_round_trip(list, stages);
    char mhz[32] = "-", life[96] = "-", row[384];
    if (ns > 0 && cycles > 0) std::snprintf(mhz, sizeof(mhz), "%.0f", cycles / ns * 1000.0);
    // Where a short kernel's time goes: the pipeline's fill, the k-block loop and what follows it
    // (epilogue, split-K fixup), on the first consumer warp's clock converted by its SM's rate.
    const auto warp = std::find_if(list.begin(), list.end(), [](const TimelineStream& t) { return t.stream == 1; });
    if (warp != list.end() && warp->stamped == int64_t(warp->events.size()) && warp->events.size() >= 2) {
      const std::vector<uint64_t> data = times_of(*warp, TimelineEvent::FullWaitEnd);
      const std::vector<uint64_t> released = times_of(*warp, TimelineEvent::Release);
      const double warp_ns = diff(warp->globaltimer_end, warp->globaltimer_start);
      const double warp_cycles = diff(warp->events.back().second, warp->events.front().second);
      if (!data.empty() && !released.empty() && warp_ns > 0 && warp_cycles > 0) {
        const double per_ns = warp_cycles / warp_ns;
        std::snprintf(life, sizeof(life), "%.0f, %.0f, %.0f", diff(data.front(), warp->events.front().second) / per_ns,
                      diff(released.back(), data.front()) / per_ns, diff(warp->events.back().second, released.back()) / per_ns);
      }
    }
    std::snprintf(row, sizeof(row), "| %d | %s | %.0f | %.0f (%d) | %.0f | %.0f (%d) | %s |\n", cta, mhz,
                  diff(s.globaltimer_start, first_start), r.data_latency, r.data_n, r.lead, r.refill, r.refill_n, life);
    out += row;
  }

  // CTA 0's stamps, merged, from its first consumer warp's middle k-block on.
  const std::vector<TimelineStream>& cta0 = by_cta.begin()->second;
  const auto warp0 = std::find_if(cta0.begin(), cta0.end(), [](const TimelineStream& s) { return s.stream != 0; });
  if (excerpt_lines <= 0 || warp0 == cta0.end()) return out;
  const std::vector<uint64_t> waits = times_of(*warp0, TimelineEvent::FullWaitBegin);
  if (waits.empty()) return out;
  const uint64_t t0 = waits[waits.size() / 2];
  std::vector<std::tuple<uint64_t, int, int, int>> merged;  // clock, stream, event, k-block (-1: none)
  for (const TimelineStream& s : cta0) {
    const std::vector<int> fills = event_fills(s);
    for (size_t i = 0; i < s.events.size(); ++i)
      if (s.events[i].second >= t0) merged.emplace_back(s.events[i].second, s.stream, s.events[i].first, fills[i]);
  }
  std::sort(merged.begin(), merged.end());
  const std::vector<size_t> warp0_fills = fills_of(*warp0);
  out += rt::str("\nCTA ", cta0.front().cta, ", cycles after ", stream_name(warp0->stream), "'s wait for k-block ",
                 waits.size() / 2 < warp0_fills.size() ? warp0_fills[waits.size() / 2] : waits.size() / 2,
                 " (k-block: the producer's n-th stage fill):\n");
  for (size_t i = 0; i < merged.size() && int(i) < excerpt_lines; ++i) {
    const auto& [clock, stream, event, kb] = merged[i];
    char line[96];
    std::snprintf(line, sizeof(line), "  %+7.0f  %-8s  %-13s %s\n", diff(clock, t0), stream_name(stream).c_str(),
                  event_name(event), kb >= 0 ? rt::str("k-block ", kb).c_str() : "");
    out += line;
  }
  return out;
}

}  // namespace deepgemm::detail
