#include "engine/engine.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>

#include "bootstrap/wire.h"
#include "deepep/error.h"
#include "engine/checksum.h"
#include "rt/error.h"

namespace deepep {
namespace {

constexpr size_t kFrameHeader = 64;  // payload starts cache-line aligned
constexpr int kFramesPerPass = 16;   // per message or link and pass: interleaves sending and receiving
constexpr int64_t kRelayRtoNs = 5'000'000;
constexpr int64_t kMaxRelayRtoNs = 200'000'000;
constexpr size_t kMinRouteSamples = 32;  // frames a link's loss rate needs before it moves traffic
constexpr int kProbeEvery = 8;
constexpr uint64_t kUnknownLoss = ~uint64_t(0);  // loss_ppm of a link with too few samples

struct FrameHeader {
  uint32_t epoch;
  uint16_t src;
  uint16_t dst;
  uint32_t chunk;
  uint32_t nchunks;
  uint32_t bytes;
  uint32_t reserved;
  uint64_t payload_sum;
  uint64_t header_sum;  // over the fields above
};
static_assert(sizeof(FrameHeader) <= kFrameHeader);

uint64_t header_sum(const FrameHeader& h) { return checksum(&h, offsetof(FrameHeader, header_sum)); }

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

uint64_t ack_key(uint32_t epoch, uint32_t chunk) { return (uint64_t(epoch) << 32) | chunk; }

}  // namespace

Engine::Engine(std::unique_ptr<Transport> transport, const EngineOptions& options)
    : transport_(std::move(transport)), options_(options) {
  rank_ = transport_->rank();
  size_ = transport_->size();
  health_.resize(static_cast<size_t>(size_));
  for (LinkHealth& h : health_) {
    h.window.assign(size_t(std::max(8, options_.health_window)), 0);
    h.acked_seq_via.assign(static_cast<size_t>(size_), 0);
  }
  for (int r = 0; r < size_; ++r)
    if (r != rank_) transport_->link(rank_, r).loss_ppm.store(kUnknownLoss, std::memory_order_relaxed);
  notify_mask_.assign(size_t(size_), 0);
  RT_USER_CHECK(transport_->frame_capacity() > kFrameHeader + 64, "deepep: frames of ", transport_->frame_capacity(),
                " bytes are too small");
}

Engine::~Engine() {
  if (pending_) {
    try {
      finish_pending();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "deepep (rank %d): a pending receive could not complete at destruction: %s\n", rank_,
                   e.what());
    }
  }
}

size_t Engine::max_payload() const { return transport_->frame_capacity() - kFrameHeader; }

void Engine::check_record_fits(size_t unit, const std::string& what) const {
  const size_t payload = max_payload();
  RT_USER_CHECK(unit <= payload, "deepep ", what, ": buffer too small: a record of ", unit, " bytes does not fit a frame of ",
                payload, " payload bytes; give the Buffer more bytes");
}

uint64_t Engine::pending_epoch() const { return pending_ ? pending_->epoch : 0; }

void Engine::check_usable(const std::string& what) const {
  if (!broken_.empty())
    throw_comm_error(rt::str("deepep (rank ", rank_, "): ", what, ": the communicator is broken by an earlier failure: ",
                             broken_));
}

void Engine::fail(const std::string& message) {
  // The communicator is broken; publishing the cause lets the other ranks report it rather than
  // the symptom they see next (this rank gone). The first published cause stays.
  if (broken_.empty()) broken_ = message;
  transport_->set_abort(message);
  throw_comm_error(message);
}

void Engine::fail_peer_read(const std::string& what, const std::string& error) {
  std::string message = rt::str("deepep (rank ", rank_, "): ", error);
  try {
    check_peers(what, [](int) { return true; });
  } catch (const std::exception& e) {
    message = e.what();  // the root cause: another rank's abort, or a peer that died
  }
  fail(message);
}

template <class F>
void Engine::guarded(const std::string& what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    // Data may be half-moved: the communicator cannot be trusted any more. Tell the others, so
    // they fail with the reason now instead of at their timeout.
    if (broken_.empty()) broken_ = e.what();
    transport_->set_abort(rt::str("rank ", rank_, " failed in ", what, ": ", e.what()));
    pending_.reset();
    throw;
  }
}

void Engine::begin_op(const std::string& what) {
  if (device_receive_) std::exchange(device_receive_, nullptr)();
  finish_pending();
  check_usable(what);
  ++ops_;
  kill_if_due(false, what);
}

void Engine::kill_if_due(bool mid_op, const std::string& what) const {
  const FaultConfig& f = options_.faults;
  if (f.kill_rank != rank_ || ops_ != f.kill_at_op || f.kill_mid_op != mid_op) return;
  std::fprintf(stderr, "deepep (rank %d): fault injection: killing this process %s operation %d (%s)\n", rank_,
               mid_op ? "after the agreement of" : "at", ops_, what.c_str());
  std::fflush(stderr);
  raise(SIGKILL);
}

void Engine::check_peers_alive(const std::string& what) { check_peers(what, [](int) { return true; }); }

void Engine::check_peers(const std::string& what, const std::function<bool(int)>& needed) {
  if (auto msg = transport_->aborted())
    fail(rt::str("deepep (rank ", rank_, "): ", what, ": the communicator was aborted: ", *msg));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || !needed(r)) continue;
    if (auto why = transport_->peer_failure(r)) {
      // A rank that failed publishes its cause before it leaves: look again now that it has left.
      if (auto msg = transport_->aborted())
        fail(rt::str("deepep (rank ", rank_, "): ", what, ": the communicator was aborted: ", *msg));
      fail(rt::str("deepep (rank ", rank_, "): ", what, ": ", *why, "; the communicator is broken"));
    }
  }
}

void Engine::idle_wait(uint32_t token, int64_t& last_progress, int64_t& last_live, const std::string& what,
                       const std::function<bool(int)>& needed, const std::function<std::string()>& describe,
                       bool short_wait) {
  const int64_t now = now_ns();
  const int64_t timeout = int64_t(options_.timeout.count()) * 1'000'000;
  const int64_t liveness = std::max<int64_t>(1'000'000, int64_t(options_.liveness.count()) * 1'000'000);
  if (now - last_live >= liveness) {
    check_peers(what, needed);
    last_live = now;
  }
  if (now - last_progress > timeout)
    fail(rt::str("deepep (rank ", rank_, "): ", what, ": no progress for ", options_.timeout.count(), " ms (timeout); ",
                 describe()));
  int64_t ns = std::min(liveness, std::max<int64_t>(0, last_progress + timeout - now) + 1'000'000);
  if (short_wait || transport_->has_delayed_frames()) ns = std::min<int64_t>(ns, 1'000'000);
  transport_->wait(token, std::chrono::nanoseconds(ns));
}

void Engine::flush_notify() {
  for (int r = 0; r < size_; ++r)
    if (notify_mask_[size_t(r)]) {
      notify_mask_[size_t(r)] = 0;
      transport_->notify(r);
    }
}

// --- agreement and barrier -------------------------------------------------------------------------

std::vector<std::string> Engine::agree(const std::string& what, const std::string& desc, const std::string& error,
                                       const std::string& payload) {
  check_usable(what);
  if (before_agreement_) before_agreement_();
  wire::Writer w;
  w.put_str(desc).put_str(error).put_str(payload);
  std::string rec = w.str();
  const size_t room = transport_->board_bytes() - 8;
  if (rec.size() > room) {
    wire::Writer small;
    small.put_str(desc)
        .put_str(rt::str("the call's description (", rec.size(), " bytes) exceeds the control board (", room,
                         " bytes); too many ranks or experts for this build"))
        .put_str("");
    rec = small.str();
  }
  const uint64_t e = ++board_epoch_;
  std::vector<std::string> records(static_cast<size_t>(size_));
  guarded(what, [&] {
    uint8_t* mine = static_cast<uint8_t*>(transport_->board(int(e & 1), rank_));
    const uint64_t n = rec.size();
    std::memcpy(mine, &n, 8);
    std::memcpy(mine + 8, rec.data(), rec.size());
    transport_->post_board(int(e & 1), 8 + rec.size());
    transport_->counter(rank_, Counter::Board).store(e, std::memory_order_release);
    for (int r = 0; r < size_; ++r)
      if (r != rank_) transport_->notify(r);
    int64_t last_progress = now_ns(), last_live = last_progress;
    auto needed = [&](int r) { return transport_->counter(r, Counter::Board).load(std::memory_order_acquire) < e; };
    while (true) {
      const uint32_t token = transport_->wait_token();
      int missing = -1, count = 0;
      for (int r = 0; r < size_; ++r)
        if (needed(r)) missing = missing < 0 ? r : missing, ++count;
      if (missing < 0) break;
      idle_wait(token, last_progress, last_live, what, needed,
                [&] { return rt::str("waiting for rank ", missing, " (", count, " rank(s) have not arrived)"); },
                false);
    }
    for (int r = 0; r < size_; ++r) {
      const uint8_t* slot = static_cast<const uint8_t*>(transport_->board(int(e & 1), r));
      uint64_t len = 0;
      std::memcpy(&len, slot, 8);
      RT_ICHECK(len <= room, "board record of ", len, " bytes");
      records[size_t(r)].assign(reinterpret_cast<const char*>(slot + 8), len);
    }
  });
  std::vector<std::string> descs(static_cast<size_t>(size_)), errors(static_cast<size_t>(size_)), payloads(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    wire::Reader rd(records[size_t(r)]);
    descs[size_t(r)] = rd.get_str();
    errors[size_t(r)] = rd.get_str();
    payloads[size_t(r)] = rd.get_str();
  }
  std::string message;
  int shown = 0;
  for (int r = 0; r < size_; ++r) {
    if (errors[size_t(r)].empty()) continue;
    if (shown++ == 3) {
      message += "; ...";
      break;
    }
    message += rt::str(message.empty() ? "" : "; ", "rank ", r, ": ", errors[size_t(r)]);
  }
  if (!message.empty()) rt::throw_user_error(rt::str("deepep ", what, ": ", message));
  for (int r = 1; r < size_; ++r)
    if (descs[size_t(r)] != descs[0])
      rt::throw_user_error(rt::str("deepep ", what, ": the ranks disagree: rank 0 called ", descs[0], " but rank ", r,
                                   " called ", descs[size_t(r)]));
  kill_if_due(true, what);
  return payloads;
}

void Engine::barrier(const std::string& what) { agree(what, what, ""); }

// --- exchanges -------------------------------------------------------------------------------------

void Engine::exchange(std::vector<SendSpec> sends, std::vector<RecvSpec> recvs, const std::string& what) {
  start_exchange(std::move(sends), std::move(recvs), what);
  finish_pending();
}

void Engine::start_exchange(std::vector<SendSpec> sends, std::vector<RecvSpec> recvs, const std::string& what) {
  check_usable(what);
  RT_ICHECK(!pending_, "an exchange is already pending");
  const size_t payload = max_payload();
  const uint32_t window = transport_->ack_slots();
  auto x = std::make_unique<Exchange>();
  x->epoch = ++epoch_;
  x->what = what;
  x->recvs.resize(static_cast<size_t>(size_));
  const SendSpec* self_send = nullptr;
  for (SendSpec& s : sends) {
    RT_ICHECK(s.peer >= 0 && s.peer < size_ && s.unit > 0, "bad send spec to ", s.peer);
    check_record_fits(s.unit, what);
    if (s.peer == rank_) {
      self_send = &s;
      continue;
    }
    if (s.units == 0) continue;
    SendState st;
    st.chunk_units = payload / s.unit;
    st.nchunks = uint32_t((s.units + st.chunk_units - 1) / st.chunk_units);
    st.chunks.resize(st.nchunks);
    st.spec = std::move(s);
    x->sends.push_back(std::move(st));
  }
  (void)window;
  for (RecvSpec& r : recvs) {
    RT_ICHECK(r.peer >= 0 && r.peer < size_ && r.unit > 0, "bad recv spec from ", r.peer);
    check_record_fits(r.unit, what);
    RecvState& st = x->recvs[size_t(r.peer)];
    RT_ICHECK(!st.expected, "two receives from rank ", r.peer, " in one exchange");
    st.expected = true;
    st.chunk_units = payload / r.unit;
    st.nchunks = r.units == 0 ? 0 : uint32_t((r.units + st.chunk_units - 1) / st.chunk_units);
    st.got.assign(st.nchunks, 0);
    st.spec = std::move(r);
  }
  // Self: straight through a bounce buffer, chunk by chunk (stays in cache).
  RecvState& self = x->recvs[size_t(rank_)];
  if (self_send || self.expected) {
    const size_t su = self_send ? self_send->units : 0, ru = self.expected ? self.spec.units : 0;
    RT_ICHECK(su == ru && (su == 0 || self_send->unit == self.spec.unit), "self message of ", su,
              " units but a receive of ", ru);
    if (su > 0) {
      const size_t unit = self_send->unit, per = payload / unit;
      if (bounce_.size() < payload) bounce_.resize(payload);
      for (size_t first = 0; first < su; first += per) {
        const size_t n = std::min(per, su - first);
        self_send->read(first, n, bounce_.data());
        self.spec.write(first, n, bounce_.data());
      }
    }
    self.count = self.nchunks;
    std::fill(self.got.begin(), self.got.end(), 1);
  }
  pending_ = std::move(x);
  guarded(what, [&] { progress(*pending_, true); });
}

void Engine::finish_pending() {
  if (!pending_) return;
  const std::string what = pending_->what;
  guarded(what, [&] { run_to_completion(*pending_, false); });
  pending_.reset();
}

void Engine::complete_receives() {
  if (!pending_) return;
  const std::string what = pending_->what;
  guarded(what, [&] { run_to_completion(*pending_, true); });
}

bool Engine::local_done(const Exchange& x) const {
  for (const SendState& s : x.sends)
    if (s.acked < s.nchunks) return false;
  for (const RecvState& r : x.recvs)
    if (r.count < r.nchunks) return false;
  return true;
}

std::string Engine::describe(const Exchange& x) const {
  std::string out;
  for (int r = 0; r < size_; ++r) {
    const RecvState& st = x.recvs[size_t(r)];
    if (st.count < st.nchunks)
      out += rt::str(out.empty() ? "" : "; ", "from rank ", r, ": ", st.count, " of ", st.nchunks, " chunks received");
  }
  for (const SendState& s : x.sends)
    if (s.acked < s.nchunks)
      out += rt::str(out.empty() ? "" : "; ", "to rank ", s.spec.peer, ": ", s.acked, " of ", s.nchunks,
                     " chunks acknowledged");
  return out.empty() ? "all data moved; waiting for the other ranks" : out;
}

void Engine::run_to_completion(Exchange& x, bool receives_only) {
  int64_t last_progress = now_ns(), last_live = last_progress;
  const uint64_t epoch = x.epoch;
  auto needed = [&](int r) { return transport_->counter(r, Counter::Done).load(std::memory_order_acquire) < epoch; };
  auto received = [&] {
    for (const RecvState& r : x.recvs)
      if (r.count < r.nchunks) return false;
    return true;
  };
  while (true) {
    const uint32_t token = transport_->wait_token();
    const bool moved = progress(x, true);
    if (receives_only ? received() : local_done(x)) break;
    if (moved) {
      last_progress = now_ns();
      continue;
    }
    bool relayed = false;
    for (const SendState& s : x.sends)
      for (uint32_t c = s.base; c < s.next_new && !relayed; ++c) relayed = s.chunks[c].via >= 0 && !s.chunks[c].acked;
    idle_wait(token, last_progress, last_live, x.what, needed, [&] { return describe(x); }, relayed);
  }
  if (receives_only) return;
  // Termination: every rank must be done before anyone leaves, because a rank may still need
  // another one to relay its frames.
  transport_->counter(rank_, Counter::Done).store(epoch, std::memory_order_release);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) transport_->notify(r);
  while (true) {
    const uint32_t token = transport_->wait_token();
    int missing = -1;
    for (int r = 0; r < size_ && missing < 0; ++r)
      if (r != rank_ && needed(r)) missing = r;
    if (missing < 0) break;
    if (progress(x, false)) {
      last_progress = now_ns();
      continue;
    }
    idle_wait(token, last_progress, last_live, x.what, needed,
              [&] { return rt::str("done; waiting for rank ", missing, " to finish"); }, false);
  }
}

bool Engine::progress(Exchange& x, bool data_phase) {
  bool moved = poll_inbound(x);
  if (data_phase) {
    moved |= poll_acks(x);
    moved |= push_sends(x);
  }
  flush_notify();
  return moved;
}

bool Engine::poll_inbound(Exchange& x) {
  bool moved = false;
  const size_t payload_cap = max_payload();
  const uint32_t window = transport_->ack_slots();
  for (int i = 1; i < size_; ++i) {
    const int src = (rank_ + i) % size_;
    for (int n = 0; n < kFramesPerPass; ++n) {
      size_t bytes = 0;
      const uint8_t* f = static_cast<const uint8_t*>(transport_->peek(src, &bytes));
      if (!f) break;
      FrameHeader h;
      std::memcpy(&h, f, sizeof(h));
      if (bytes < kFrameHeader || h.header_sum != header_sum(h) || h.bytes != bytes - kFrameHeader ||
          h.bytes > payload_cap || h.src >= size_ || h.dst >= size_) {
        transport_->link(src, rank_).corrupt_received.fetch_add(1, std::memory_order_relaxed);
        transport_->consume(src);
        note_notify(src);
        moved = true;
        continue;
      }
      if (h.epoch > x.epoch) break;  // the sender is already in the next exchange: keep it for then
      if (h.epoch < x.epoch) {       // a late duplicate of a finished exchange
        transport_->consume(src);
        note_notify(src);
        moved = true;
        continue;
      }
      if (h.dst != rank_) {  // relay
        // With no room on the next link the frame is dropped, not waited for: relays waiting on
        // each other's full rings can close a cycle (0 -> 2 via 1, 1 -> 0 via 2, 2 -> 1 via 0, every
        // ring full and every ring's first frame one to forward) and stall every rank. The sender's
        // relay timeout resends a dropped frame on the direct link.
        if (void* out = transport_->reserve(h.dst)) {
          std::memcpy(out, f, bytes);
          transport_->publish(h.dst, bytes);
          transport_->link(rank_, h.dst).frames_forwarded.fetch_add(1, std::memory_order_relaxed);
          note_notify(h.dst);
        }
        transport_->consume(src);
        note_notify(src);
        moved = true;
        continue;
      }
      RecvState& r = x.recvs[h.src];
      if (!r.expected || h.chunk >= r.nchunks || h.nchunks != r.nchunks) {
        RT_ICHECK(false, "rank ", rank_, " got chunk ", h.chunk, " of ", h.nchunks, " from rank ", h.src, " in ",
                  x.what, " (epoch ", x.epoch, ") but expects ", r.expected ? r.nchunks : 0,
                  " chunks from it: the ranks disagree on message sizes");
      }
      const uint64_t key = ack_key(x.epoch, h.chunk);
      if (r.got[h.chunk]) {  // duplicate (a resend crossed the acknowledgement)
        transport_->ack(h.src, h.chunk % window, key);
      } else {
        const uint8_t* payload = f + kFrameHeader;
        if (checksum(payload, h.bytes) != h.payload_sum) {
          transport_->link(src, rank_).corrupt_received.fetch_add(1, std::memory_order_relaxed);
        } else {
          const size_t first = size_t(h.chunk) * r.chunk_units;
          const size_t units = std::min(r.chunk_units, r.spec.units - first);
          RT_ICHECK(units * r.spec.unit == h.bytes, "chunk ", h.chunk, " from rank ", h.src, " has ", h.bytes,
                    " bytes, expected ", units * r.spec.unit);
          r.spec.write(first, units, payload);
          r.got[h.chunk] = 1;
          ++r.count;
          transport_->ack(h.src, h.chunk % window, key);
        }
      }
      transport_->consume(src);
      note_notify(src);
      if (h.src != src) note_notify(h.src);
      moved = true;
    }
  }
  return moved;
}

bool Engine::poll_acks(Exchange& x) {
  bool moved = false;
  std::vector<uint64_t> consumed(size_t(size_), 0);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) consumed[size_t(r)] = transport_->consumed(r);  // before reading acknowledgements
  const uint32_t window = transport_->ack_slots();
  const int64_t now = now_ns();
  for (SendState& s : x.sends) {
    const int dst = s.spec.peer;
    LinkCounters& lc = transport_->link(rank_, dst);
    for (uint32_t c = s.base; c < s.next_new; ++c) {
      ChunkState& ch = s.chunks[c];
      if (ch.acked) continue;
      if (transport_->acked(dst, c % window) == ack_key(x.epoch, c)) {
        ch.acked = 1;
        ++s.acked;
        moved = true;
        lc.acks.fetch_add(1, std::memory_order_relaxed);
        LinkHealth& h = health_[size_t(dst)];
        h.latency_ns = h.latency_ns == 0 ? double(now - ch.sent_ns) : 0.9 * h.latency_ns + 0.1 * double(now - ch.sent_ns);
        lc.ack_latency_ns.store(uint64_t(h.latency_ns), std::memory_order_relaxed);
        if (ch.via < 0)
          record(dst, false);
        else
          h.acked_seq_via[size_t(ch.via)] = std::max(h.acked_seq_via[size_t(ch.via)], ch.seq);
        continue;
      }
      if (ch.queued) continue;
      const int hop = ch.via < 0 ? dst : ch.via;
      if (consumed[size_t(hop)] < ch.pub_after) continue;  // still in the ring
      if (ch.via < 0) {
        // Consumed without an acknowledgement: dropped or corrupted on the way.
        lc.losses.fetch_add(1, std::memory_order_relaxed);
        record(dst, true);
      } else {
        // Relayed: the path s -> via -> dst keeps order, so a later frame on it acknowledged before
        // this one means this one was lost. Otherwise (the path's last frames) a timeout.
        const bool overtaken = health_[size_t(dst)].acked_seq_via[size_t(ch.via)] > ch.seq;
        if (!overtaken) {
          if (ch.consumed_ns == 0) {
            ch.consumed_ns = now;
            continue;
          }
          const int64_t rto = std::min(kMaxRelayRtoNs, kRelayRtoNs << std::min<int>(ch.tries - 1, 5));
          if (now - ch.consumed_ns < rto) continue;
        }
      }
      ch.queued = 1;
      s.retx.push_back(c);
      moved = true;
    }
    while (s.base < s.nchunks && s.chunks[s.base].acked) ++s.base;
  }
  return moved;
}

int Engine::route(int dst, bool resend_of_relayed) {
  LinkHealth& h = health_[size_t(dst)];
  ++h.tx;
  // A frame the relay path lost goes direct: loss on the direct link is detected exactly.
  if (h.via < 0 || resend_of_relayed || h.tx % kProbeEvery == 0) return dst;
  return h.via;
}

bool Engine::send_chunk(Exchange& x, SendState& s, uint32_t c, bool resend) {
  const int dst = s.spec.peer;
  const int hop = route(dst, resend && s.chunks[c].via >= 0);
  uint8_t* f = static_cast<uint8_t*>(transport_->reserve(hop));
  if (!f) {
    --health_[size_t(dst)].tx;
    return false;
  }
  const size_t first = size_t(c) * s.chunk_units;
  const size_t units = std::min(s.chunk_units, s.spec.units - first);
  const size_t bytes = units * s.spec.unit;
  uint8_t* payload = f + kFrameHeader;
  s.spec.read(first, units, payload);
  FrameHeader h{};
  h.epoch = x.epoch;
  h.src = uint16_t(rank_);
  h.dst = uint16_t(dst);
  h.chunk = c;
  h.nchunks = s.nchunks;
  h.bytes = uint32_t(bytes);
  h.payload_sum = checksum(payload, bytes);
  h.header_sum = header_sum(h);
  std::memcpy(f, &h, sizeof(h));
  transport_->publish(hop, kFrameHeader + bytes);
  ChunkState& ch = s.chunks[c];
  ch.pub_after = transport_->published(hop);
  ch.sent_ns = now_ns();
  ch.consumed_ns = 0;
  ch.via = hop == dst ? -1 : hop;
  ch.seq = ++health_[size_t(dst)].seq;
  ++ch.tries;
  if (resend) transport_->link(rank_, dst).retransmissions.fetch_add(1, std::memory_order_relaxed);
  note_notify(hop);
  return true;
}

bool Engine::push_sends(Exchange& x) {
  bool moved = false;
  const uint32_t window = transport_->ack_slots();
  for (SendState& s : x.sends) {
    for (int n = 0; n < kFramesPerPass; ++n) {
      while (!s.retx.empty() && s.chunks[s.retx.front()].acked) {
        s.chunks[s.retx.front()].queued = 0;
        s.retx.pop_front();
      }
      if (!s.retx.empty()) {
        const uint32_t c = s.retx.front();
        if (!send_chunk(x, s, c, true)) break;
        s.chunks[c].queued = 0;
        s.retx.pop_front();
      } else if (s.next_new < s.nchunks && s.next_new < s.base + window) {
        if (!send_chunk(x, s, s.next_new, false)) break;
        ++s.next_new;
      } else {
        break;
      }
      moved = true;
    }
  }
  return moved;
}

// --- health and routes -----------------------------------------------------------------------------

void Engine::record(int dst, bool lost) {
  LinkHealth& h = health_[size_t(dst)];
  const size_t w = h.window.size();
  if (h.filled == w)
    h.lost -= h.window[h.pos];
  else
    ++h.filled;
  h.window[h.pos] = lost ? 1 : 0;
  h.lost += lost ? 1 : 0;
  h.pos = (h.pos + 1) % w;
  if (h.filled >= std::min<size_t>(16, w))
    transport_->link(rank_, dst).loss_ppm.store(uint64_t(1e6 * double(h.lost) / double(h.filled)),
                                                 std::memory_order_relaxed);
  evaluate_route(dst);
}

void Engine::evaluate_route(int dst) {
  LinkHealth& h = health_[size_t(dst)];
  if (h.filled < std::min(kMinRouteSamples, h.window.size())) return;
  const double rate = double(h.lost) / double(h.filled);
  LinkCounters& lc = transport_->link(rank_, dst);
  const double threshold = options_.reroute_threshold;
  if (h.via < 0 && rate > threshold) {
    int best = -1;
    double best_ok = (1 - rate) + 0.02;  // a relay must beat the direct link clearly
    for (int m = 0; m < size_; ++m) {
      if (m == rank_ || m == dst) continue;
      // Only relays whose both links are measured (enough samples) and healthy.
      const uint64_t p1 = transport_->link(rank_, m).loss_ppm.load(std::memory_order_relaxed);
      const uint64_t p2 = transport_->link(m, dst).loss_ppm.load(std::memory_order_relaxed);
      if (p1 == kUnknownLoss || p2 == kUnknownLoss) continue;
      const double l1 = double(p1) * 1e-6, l2 = double(p2) * 1e-6;
      if (l1 > threshold || l2 > threshold) continue;
      const double ok = (1 - l1) * (1 - l2);
      if (ok > best_ok) best_ok = ok, best = m;
    }
    if (best >= 0) {
      h.via = best;
      h.warned = false;
      lc.via.store(best, std::memory_order_relaxed);
      lc.reroutes.fetch_add(1, std::memory_order_relaxed);
      if (options_.log_reroutes)
        std::fprintf(stderr,
                     "deepep (rank %d): link %d->%d lost %.0f%% of its last %zu frames (threshold %.0f%%): rerouting "
                     "through rank %d\n",
                     rank_, rank_, dst, 100 * rate, h.filled, 100 * threshold, best);
    } else if (!h.warned) {
      h.warned = true;
      if (options_.log_reroutes)
        std::fprintf(stderr,
                     "deepep (rank %d): link %d->%d lost %.0f%% of its last %zu frames (threshold %.0f%%): no healthier "
                     "route; retransmitting on it\n",
                     rank_, rank_, dst, 100 * rate, h.filled, 100 * threshold);
    }
  } else if (h.via >= 0 && rate < threshold / 2) {
    if (options_.log_reroutes)
      std::fprintf(stderr, "deepep (rank %d): link %d->%d recovered (%.0f%% lost): direct again\n", rank_, rank_, dst,
                   100 * rate);
    h.via = -1;
    lc.via.store(-1, std::memory_order_relaxed);
  }
}

LinkStats Engine::link_stats(int src, int dst) const {
  RT_USER_CHECK(src >= 0 && src < size_ && dst >= 0 && dst < size_ && src != dst, "deepep link_stats: no link ", src,
                "->", dst, " in a group of ", size_);
  LinkCounters& c = transport_->link(src, dst);
  LinkStats s;
  s.src = src;
  s.dst = dst;
  s.frames_sent = c.frames_sent.load(std::memory_order_relaxed);
  s.bytes_sent = c.bytes_sent.load(std::memory_order_relaxed);
  s.frames_forwarded = c.frames_forwarded.load(std::memory_order_relaxed);
  s.retransmissions = c.retransmissions.load(std::memory_order_relaxed);
  s.losses = c.losses.load(std::memory_order_relaxed);
  s.corrupt_received = c.corrupt_received.load(std::memory_order_relaxed);
  s.acks = c.acks.load(std::memory_order_relaxed);
  s.reroutes = c.reroutes.load(std::memory_order_relaxed);
  s.via = int(c.via.load(std::memory_order_relaxed));
  const uint64_t ppm = c.loss_ppm.load(std::memory_order_relaxed);
  s.loss_rate = ppm == kUnknownLoss ? 0.0 : double(ppm) * 1e-6;
  s.ack_latency_us = double(c.ack_latency_ns.load(std::memory_order_relaxed)) * 1e-3;
  return s;
}

std::vector<LinkStats> Engine::link_stats() const {
  std::vector<LinkStats> out;
  for (int s = 0; s < size_; ++s)
    for (int d = 0; d < size_; ++d)
      if (s != d) out.push_back(link_stats(s, d));
  return out;
}

}  // namespace deepep
