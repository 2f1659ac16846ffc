#include "transport/tcp/tcp_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <iterator>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "deepep/error.h"
#include "deepep/group.h"
#include "engine/checksum.h"
#include "rt/env.h"
#include "rt/error.h"
#include "transport/frame_faults.h"
#include "transport/ring_geometry.h"
#include "transport/shm/futex.h"

namespace deepep {
namespace {

// Every message starts with this header. Frames carry the engine's own checksums, so the transport
// adds none to them (an injected corruption must reach the engine); state messages carry one.
struct MsgHeader {
  uint32_t kind;
  uint32_t bytes;  // after the header
  uint64_t aux;    // frame: delay in ns (fault injection); state: checksum of the body
};
static_assert(sizeof(MsgHeader) == 16);
constexpr uint32_t kFrameMsg = 0xDEE7C901;
constexpr uint32_t kStateMsg = 0xDEE7C902;
constexpr uint32_t kMaxStateBytes = 64u << 20;

constexpr uint64_t kHelloMagic = 0xDEE9E97C90000001ull;
struct Hello {
  uint64_t magic;
  uint64_t session;
  int32_t from;
  int32_t to;
};

// Records of a state message, applied in order (counters last: they announce the rest).
enum Record : uint8_t { kBoard = 1, kAck, kLink, kConsumed, kCounter, kAbort, kClosed };

// LinkCounters as numbered words (they travel one word at a time).
constexpr std::atomic<uint64_t> LinkCounters::*kLinkWords[] = {
    &LinkCounters::frames_sent, &LinkCounters::bytes_sent, &LinkCounters::frames_forwarded,
    &LinkCounters::retransmissions, &LinkCounters::losses, &LinkCounters::corrupt_received,
    &LinkCounters::acks, &LinkCounters::reroutes, &LinkCounters::loss_ppm, &LinkCounters::ack_latency_ns};
constexpr uint32_t kWordsPerLink = std::size(kLinkWords) + 1;  // and `via`
constexpr uint32_t kViaWord = kWordsPerLink - 1;
constexpr uint32_t kCorruptWord = 5;  // the receiver's word
static_assert(kLinkWords[kCorruptWord] == &LinkCounters::corrupt_received);

uint64_t load_word(const LinkCounters& c, uint32_t w) {
  return w == kViaWord ? uint64_t(c.via.load(std::memory_order_relaxed)) : (c.*kLinkWords[w]).load(std::memory_order_relaxed);
}
void store_word(LinkCounters& c, uint32_t w, uint64_t v) {
  if (w == kViaWord)
    c.via.store(int64_t(v), std::memory_order_relaxed);
  else
    (c.*kLinkWords[w]).store(v, std::memory_order_relaxed);
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

struct InFrame {
  int64_t visible_ns;
  uint64_t bytes;
};

// One peer: its connection, what this rank has sent it, and what arrived from it.
struct Peer {
  int fd = -1;
  // Sending side (the communicator's thread).
  std::unique_ptr<uint8_t[]> out;  // MsgHeader + one frame
  uint64_t published = 0;
  bool send_dead = false;           // a send failed: nothing more goes out
  std::vector<uint64_t> ack_out;    // highest acknowledgement posted per slot
  std::vector<std::pair<uint32_t, uint64_t>> acks;  // posted since the last notify
  size_t board_posted[2] = {0, 0};  // bytes of this rank's board slots posted since the last notify
  uint64_t consumed_sent = 0;       // this rank's consumed count of peer -> me last sent
  uint64_t counters_sent[2] = {0, 0};
  std::vector<uint64_t> words_sent;  // owned link words as last sent
  // Receiving side (written by the receive thread).
  std::atomic<uint64_t> consumed{0};  // frames of me -> peer the peer consumed
  std::unique_ptr<std::atomic<uint64_t>[]> acked;
  std::unique_ptr<uint8_t[]> ring;  // inbound frames, `slots` of frame_capacity bytes
  std::unique_ptr<InFrame[]> meta;
  std::atomic<uint64_t> head{0};  // frames received
  std::atomic<uint64_t> tail{0};  // frames consumed (the communicator's thread)
  // The receive thread's parser.
  MsgHeader hdr{};
  size_t hdr_got = 0;
  uint8_t* body = nullptr;
  size_t body_got = 0;
  std::vector<uint8_t> state;
  bool open = true;  // still read from
  // Why the peer is gone (under the transport's mutex).
  bool closed = false;  // it said goodbye: it destroyed its communicator
  std::string failure;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(Group& group, const TransportConfig& config);
  ~TcpTransport() override;

  const char* name() const override { return "tcp"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  size_t frame_capacity() const override { return geo_.frame_capacity; }
  void* reserve(int dst) override {
    Peer& p = *peers_[size_t(dst)];
    if (p.published - p.consumed.load(std::memory_order_acquire) >= geo_.slots) return nullptr;
    return p.out.get() + sizeof(MsgHeader);
  }
  void publish(int dst, size_t bytes) override;
  uint64_t published(int dst) const override { return peers_[size_t(dst)]->published; }
  uint64_t consumed(int dst) const override { return peers_[size_t(dst)]->consumed.load(std::memory_order_acquire); }
  const void* peek(int src, size_t* bytes) override {
    Peer& p = *peers_[size_t(src)];
    const uint64_t t = p.tail.load(std::memory_order_relaxed);
    if (t == p.head.load(std::memory_order_acquire)) return nullptr;
    const InFrame& f = p.meta[t % geo_.slots];
    if (f.visible_ns != 0 && f.visible_ns > now_ns()) {
      delayed_ = true;
      return nullptr;
    }
    *bytes = f.bytes;
    return p.ring.get() + (t % geo_.slots) * geo_.frame_capacity;
  }
  void consume(int src) override {
    Peer& p = *peers_[size_t(src)];
    p.tail.store(p.tail.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  bool has_delayed_frames() const override {
    const bool d = delayed_;
    delayed_ = false;
    return d || faults_.delays();
  }

  uint32_t ack_slots() const override { return geo_.ack_slots; }
  void ack(int src, uint32_t slot, uint64_t value) override {
    Peer& p = *peers_[size_t(src)];
    uint64_t& last = p.ack_out[slot % geo_.ack_slots];
    if (value <= last) return;
    last = value;
    p.acks.emplace_back(slot % geo_.ack_slots, value);
  }
  uint64_t acked(int dst, uint32_t slot) const override {
    return peers_[size_t(dst)]->acked[slot % geo_.ack_slots].load(std::memory_order_acquire);
  }

  size_t board_bytes() const override { return board_bytes_; }
  void* board(int parity, int r) override { return boards_.get() + (size_t(parity) * size_ + r) * board_bytes_; }
  void post_board(int parity, size_t bytes) override {
    RT_ICHECK(bytes <= board_bytes_, "board record of ", bytes, " bytes");
    for (int r = 0; r < size_; ++r)
      if (r != rank_) peers_[size_t(r)]->board_posted[parity & 1] = std::max(peers_[size_t(r)]->board_posted[parity & 1], bytes);
  }
  std::atomic<uint64_t>& counter(int r, Counter which) override { return counters_[size_t(r) * 2 + size_t(which)]; }
  LinkCounters& link(int src, int dst) override { return links_[size_t(src) * size_ + dst]; }

  uint32_t wait_token() const override { return doorbell_.load(std::memory_order_acquire); }
  void wait(uint32_t token, std::chrono::nanoseconds max) override {
    sleeping_.store(1, std::memory_order_seq_cst);
    if (doorbell_.load(std::memory_order_seq_cst) == token) futex::wait(&doorbell_, token, max);
    sleeping_.store(0, std::memory_order_relaxed);
  }
  void notify(int peer) override;

  std::optional<std::string> peer_failure(int peer) override;
  std::optional<std::string> aborted() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return abort_;
  }
  void set_abort(const std::string& message) override;

 private:
  std::string who(int r) const {
    return rt::str("rank ", r, " (pid ", group_peers_[size_t(r)].pid, " on host ", group_peers_[size_t(r)].host, ")");
  }
  void send(int peer, const void* data, size_t bytes);
  void send_state(int peer, const std::string& body);
  void receive_loop();
  bool read_from(int src);  // true when a message completed
  void apply_state(int src, const uint8_t* data, size_t bytes);
  void fail_peer(int src, const std::string& why);
  void ring_doorbell() {
    doorbell_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) futex::wake_all(&doorbell_);
  }

  int rank_ = 0;
  int size_ = 0;
  std::vector<PeerInfo> group_peers_;
  std::chrono::milliseconds timeout_;
  RingGeometry geo_;
  size_t board_bytes_ = 0;
  FrameFaults faults_;
  mutable bool delayed_ = false;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; this rank's entry unused
  std::unique_ptr<std::atomic<uint64_t>[]> counters_;
  std::unique_ptr<LinkCounters[]> links_;
  std::unique_ptr<uint8_t[]> boards_;
  std::vector<std::pair<uint32_t, uint32_t>> owned_;  // (link, word) this rank writes
  std::atomic<uint32_t> doorbell_{0};
  std::atomic<uint32_t> sleeping_{0};
  mutable std::mutex mutex_;  // abort_ and the peers' failures
  std::optional<std::string> abort_;
  int wake_[2] = {-1, -1};  // a pipe that stops the receive thread
  std::thread receiver_;
};

std::string rendezvous_host(const Group& group) {
  const std::string ep = group.endpoint();
  return ep.substr(0, ep.rfind(':'));
}

TcpTransport::TcpTransport(Group& group, const TransportConfig& config)
    : rank_(group.rank()),
      size_(group.size()),
      group_peers_(group.peers()),
      timeout_(config.timeout),
      geo_(ring_geometry(config.inbound_bytes, group.size())),
      board_bytes_(align_up(size_t(std::max<int64_t>(config.board_bytes, 4096)), 64)),
      faults_(config.faults, group.rank()) {
  const size_t R = size_t(size_);
  counters_.reset(new std::atomic<uint64_t>[R * 2]);
  for (size_t i = 0; i < R * 2; ++i) counters_[i].store(0);
  links_.reset(new LinkCounters[R * R]);
  for (size_t i = 0; i < R * R; ++i) {
    for (uint32_t w = 0; w < kWordsPerLink; ++w) store_word(links_[i], w, 0);
    links_[i].via.store(-1);
  }
  boards_.reset(new uint8_t[2 * R * board_bytes_]());
  for (int d = 0; d < size_; ++d) {
    if (d == rank_) continue;
    for (uint32_t w = 0; w < kWordsPerLink; ++w)
      if (w != kCorruptWord) owned_.emplace_back(uint32_t(rank_ * size_ + d), w);
    owned_.emplace_back(uint32_t(d * size_ + rank_), kCorruptWord);
  }
  peers_.resize(R);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    auto p = std::make_unique<Peer>();
    p->out.reset(new uint8_t[sizeof(MsgHeader) + geo_.frame_capacity]);
    p->ack_out.assign(geo_.ack_slots, 0);
    p->acked.reset(new std::atomic<uint64_t>[geo_.ack_slots]);
    for (uint32_t i = 0; i < geo_.ack_slots; ++i) p->acked[i].store(0);
    p->ring.reset(new uint8_t[size_t(geo_.slots) * geo_.frame_capacity]);  // untouched until used
    p->meta.reset(new InFrame[geo_.slots]);
    for (const auto& [l, w] : owned_) p->words_sent.push_back(load_word(links_[l], w));
    peers_[size_t(r)] = std::move(p);
  }

  // Listen where the route to the rendezvous leaves this host (or DEEPEP_TCP_ADDRESS), tell every
  // rank, then connect to every lower rank and accept every higher one: one connection per pair.
  // DEEPEP_TCP_ADDRESS: the IPv4 address this rank listens on and gives its peers.
  std::string error, address = rt::env_string("DEEPEP_TCP_ADDRESS", "");
  if (address.empty()) address = net::local_address_toward(rendezvous_host(group), &error);
  int listen_fd = -1, port = 0;
  // Whatever fails here (the group's exchanges throw too) closes what is open: no destructor runs.
  try {
    if (error.empty()) {
      try {
        listen_fd = net::listen_on(address, 0, std::max(16, size_));
        port = net::local_port(listen_fd);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    std::random_device rd;
    const uint64_t session = (uint64_t(rd()) << 32) ^ rd();
    wire::Writer mine;
    mine.put_str(error).put_str(address).put<int32_t>(port).put<uint64_t>(session);
    auto fail_setup = [&](const std::vector<std::string>& all, const std::string& step) {
      for (int r = 0; r < size_; ++r) {
        wire::Reader rd_r(all[size_t(r)]);
        const std::string e = rd_r.get_str();
        if (e.empty()) continue;
        throw_comm_error(rt::str("deepep tcp transport (rank ", rank_, ", ", step, "): rank ", r, ": ", e));
      }
    };
    const std::vector<std::string> all = group.allgather(mine.str(), "tcp transport addresses");
    fail_setup(all, "listening");
    std::vector<std::string> addresses(R);
    std::vector<int> ports(R);
    uint64_t session0 = 0;
    for (int r = 0; r < size_; ++r) {
      wire::Reader rd_r(all[size_t(r)]);
      rd_r.get_str();
      addresses[size_t(r)] = rd_r.get_str();
      ports[size_t(r)] = rd_r.get<int32_t>();
      const uint64_t s = rd_r.get<uint64_t>();
      if (r == 0) session0 = s;
    }
    const auto deadline = net::Clock::now() + group.timeout();
    for (int q = 0; q < rank_ && error.empty(); ++q) {
      std::string why;
      const int fd = net::connect_until(addresses[size_t(q)], ports[size_t(q)], deadline, &why);
      const Hello hello{kHelloMagic, session0, rank_, q};
      if (fd < 0) {
        error = rt::str("cannot connect to rank ", q, " at ", addresses[size_t(q)], ":", ports[size_t(q)], ": ", why);
      } else if (net::write_all(fd, &hello, sizeof(hello), deadline, &why) != net::IoStatus::Ok) {
        error = rt::str("cannot greet rank ", q, " at ", addresses[size_t(q)], ":", ports[size_t(q)], ": ", why);
      }
      if (fd >= 0) peers_[size_t(q)]->fd = fd;
    }
    for (int missing = size_ - 1 - rank_; missing > 0 && error.empty();) {
      int fd = net::accept_until(listen_fd, deadline);
      if (fd < 0) {
        error = rt::str(missing, " higher rank(s) did not connect to ", address, ":", port, " within ",
                        group.timeout().count(), " ms");
        break;
      }
      Hello hello{};
      std::string why;
      const bool ok = net::read_all(fd, &hello, sizeof(hello), deadline, &why) == net::IoStatus::Ok &&
                      hello.magic == kHelloMagic && hello.session == session0 && hello.to == rank_ &&
                      hello.from > rank_ && hello.from < size_ && peers_[size_t(hello.from)]->fd < 0;
      if (!ok) {  // a stranger on the port, or a stale connection: not one of this group's ranks
        net::close_fd(fd);
        continue;
      }
      peers_[size_t(hello.from)]->fd = fd;
      --missing;
    }
    net::close_fd(listen_fd);
    wire::Writer status;
    status.put_str(error);
    fail_setup(group.allgather(status.str(), "tcp transport connections"), "connecting");

    if (pipe2(wake_, O_CLOEXEC) != 0)
      throw_comm_error(rt::str("deepep tcp transport (rank ", rank_, "): pipe(): ", std::strerror(errno)));
    receiver_ = std::thread([this] { receive_loop(); });
  } catch (...) {
    net::close_fd(listen_fd);
    for (auto& p : peers_)
      if (p) net::close_fd(p->fd);
    for (int& fd : wake_) net::close_fd(fd);
    throw;
  }
}

TcpTransport::~TcpTransport() {
  // Goodbye first, so that a peer still waiting reports "left" rather than "died"; then the write
  // side ends (FIN after all data), the receive thread stops and the sockets close. A broken
  // communicator's cause goes ahead of the goodbye on every connection: this rank may have it from
  // another rank's abort (set_abort then sent nothing), whose own message to a peer travels on
  // another connection and can arrive after this goodbye -- the peer would report this rank's
  // leaving instead of the cause.
  wire::Writer bye;
  if (const std::optional<std::string> cause = aborted()) bye.put<uint8_t>(kAbort).put_str(*cause);
  bye.put<uint8_t>(kClosed);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) {
      send_state(r, bye.str());
      if (peers_[size_t(r)]->fd >= 0) shutdown(peers_[size_t(r)]->fd, SHUT_WR);
    }
  if (receiver_.joinable()) {
    const char c = 'x';
    (void)!::write(wake_[1], &c, 1);
    receiver_.join();
  }
  for (int& fd : wake_) net::close_fd(fd);
  for (auto& p : peers_)
    if (p) net::close_fd(p->fd);
}

void TcpTransport::send(int peer, const void* data, size_t bytes) {
  Peer& p = *peers_[size_t(peer)];
  if (p.send_dead || p.fd < 0) return;
  std::string why;
  const net::IoStatus s = net::write_all(p.fd, data, bytes, net::Clock::now() + timeout_, &why);
  if (s == net::IoStatus::Ok) return;
  p.send_dead = true;
  // A closed connection: the receive thread sees its end and says why (goodbye or death).
  if (s == net::IoStatus::Timeout)
    fail_peer(peer, rt::str(who(peer), " stopped reading: sending to it made no progress for ", timeout_.count(),
                            " ms"));
  else if (s == net::IoStatus::Error)
    fail_peer(peer, rt::str(who(peer), " is unreachable: sending to it failed: ", why));
}

void TcpTransport::publish(int dst, size_t bytes) {
  RT_ICHECK(bytes <= geo_.frame_capacity, "frame of ", bytes, " bytes exceeds the capacity ", geo_.frame_capacity);
  Peer& p = *peers_[size_t(dst)];
  LinkCounters& l = link(rank_, dst);
  l.frames_sent.fetch_add(1, std::memory_order_relaxed);
  l.bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
  int64_t delay_ns = 0;
  if (!faults_.deliver(dst, p.out.get() + sizeof(MsgHeader), bytes, &delay_ns)) return;  // lost: never sent
  const MsgHeader h{kFrameMsg, uint32_t(bytes), uint64_t(delay_ns)};
  std::memcpy(p.out.get(), &h, sizeof(h));
  ++p.published;
  send(dst, p.out.get(), sizeof(MsgHeader) + bytes);
}

void TcpTransport::send_state(int peer, const std::string& body) {
  std::string msg(sizeof(MsgHeader), '\0');
  const MsgHeader h{kStateMsg, uint32_t(body.size()), checksum(body.data(), body.size())};
  std::memcpy(msg.data(), &h, sizeof(h));
  msg += body;
  send(peer, msg.data(), msg.size());
}

void TcpTransport::notify(int peer) {
  Peer& p = *peers_[size_t(peer)];
  wire::Writer w;
  for (int parity = 0; parity < 2; ++parity)
    if (size_t n = std::exchange(p.board_posted[parity], 0); n > 0)
      w.put<uint8_t>(kBoard).put<uint8_t>(uint8_t(parity)).put_str(
          std::string(static_cast<const char*>(board(parity, rank_)), n));
  for (const auto& [slot, value] : p.acks) w.put<uint8_t>(kAck).put<uint32_t>(slot).put<uint64_t>(value);
  p.acks.clear();
  for (size_t i = 0; i < owned_.size(); ++i) {
    const auto [l, word] = owned_[i];
    const uint64_t v = load_word(links_[l], word);
    if (v != p.words_sent[i]) w.put<uint8_t>(kLink).put<uint32_t>(l * kWordsPerLink + word).put<uint64_t>(v);
    p.words_sent[i] = v;
  }
  // Acknowledgements before the consumed count: a sender that sees a frame consumed and no
  // acknowledgement for it counts the frame as lost.
  const uint64_t tail = p.tail.load(std::memory_order_relaxed);
  if (tail != p.consumed_sent) w.put<uint8_t>(kConsumed).put<uint64_t>(tail);
  p.consumed_sent = tail;
  for (int c = 0; c < 2; ++c) {
    const uint64_t v = counters_[size_t(rank_) * 2 + size_t(c)].load(std::memory_order_acquire);
    if (v != p.counters_sent[c]) w.put<uint8_t>(kCounter).put<uint8_t>(uint8_t(c)).put<uint64_t>(v);
    p.counters_sent[c] = v;
  }
  if (!w.str().empty()) send_state(peer, w.str());
}

void TcpTransport::set_abort(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abort_) return;
    abort_ = message;
  }
  wire::Writer w;
  w.put<uint8_t>(kAbort).put_str(message);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) send_state(r, w.str());
}

std::optional<std::string> TcpTransport::peer_failure(int peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Peer& p = *peers_[size_t(peer)];
  if (p.closed) return rt::str(who(peer), " left: it destroyed its communicator");
  if (!p.failure.empty()) return p.failure;
  return std::nullopt;
}

void TcpTransport::fail_peer(int src, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  Peer& p = *peers_[size_t(src)];
  if (p.failure.empty()) p.failure = why;
}

// --- the receive thread ------------------------------------------------------------------------------

void TcpTransport::receive_loop() {
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  while (true) {
    fds.assign(1, pollfd{wake_[0], POLLIN, 0});
    ranks.assign(1, -1);
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && peers_[size_t(r)]->open) fds.push_back({peers_[size_t(r)]->fd, POLLIN, 0}), ranks.push_back(r);
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      for (size_t i = 1; i < fds.size(); ++i) fail_peer(ranks[i], rt::str("poll(): ", std::strerror(errno)));
      ring_doorbell();
      return;
    }
    if (fds[0].revents) return;
    bool arrived = false;
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents) arrived |= read_from(ranks[i]);
    if (arrived) ring_doorbell();
  }
}

bool TcpTransport::read_from(int src) {
  Peer& p = *peers_[size_t(src)];
  bool completed = false;
  auto end = [&](const std::string& why) {
    p.open = false;
    fail_peer(src, why);
    return true;  // wakes the communicator's thread to notice it
  };
  while (true) {
    uint8_t* dst;
    size_t want;
    if (p.hdr_got < sizeof(MsgHeader)) {
      dst = reinterpret_cast<uint8_t*>(&p.hdr) + p.hdr_got;
      want = sizeof(MsgHeader) - p.hdr_got;
    } else {
      dst = p.body + p.body_got;
      want = p.hdr.bytes - p.body_got;
    }
    const ssize_t n = ::recv(p.fd, dst, want, MSG_DONTWAIT);
    if (n == 0) return end(rt::str(who(src), " died: its connection closed without a goodbye"));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return completed;
      return end(rt::str(who(src), " died: its connection failed: ", std::strerror(errno)));
    }
    if (p.hdr_got < sizeof(MsgHeader)) {
      p.hdr_got += size_t(n);
      if (p.hdr_got < sizeof(MsgHeader)) continue;
      // A header: where its body goes.
      p.body_got = 0;
      if (p.hdr.kind == kFrameMsg) {
        const uint64_t h = p.head.load(std::memory_order_relaxed);
        if (p.hdr.bytes > geo_.frame_capacity || h - p.tail.load(std::memory_order_acquire) >= geo_.slots)
          return end(rt::str("protocol error on the connection from ", who(src), ": a frame of ", p.hdr.bytes,
                             " bytes beyond the link's window"));
        p.body = p.ring.get() + (h % geo_.slots) * geo_.frame_capacity;
      } else if (p.hdr.kind == kStateMsg && p.hdr.bytes <= kMaxStateBytes) {
        p.state.resize(p.hdr.bytes);
        p.body = p.state.data();
      } else {
        return end(rt::str("protocol error on the connection from ", who(src), ": bad message header"));
      }
      if (p.hdr.bytes > 0) continue;
    } else {
      p.body_got += size_t(n);
      if (p.body_got < p.hdr.bytes) continue;
    }
    // A whole message.
    p.hdr_got = 0;
    completed = true;
    if (p.hdr.kind == kFrameMsg) {
      const uint64_t h = p.head.load(std::memory_order_relaxed);
      p.meta[h % geo_.slots] = {p.hdr.aux ? now_ns() + int64_t(p.hdr.aux) : 0, p.hdr.bytes};
      p.head.store(h + 1, std::memory_order_release);
    } else {
      if (checksum(p.state.data(), p.state.size()) != p.hdr.aux)
        return end(rt::str("the connection from ", who(src), " corrupted a state message (bad checksum)"));
      try {
        apply_state(src, p.state.data(), p.state.size());
      } catch (const std::exception& e) {
        return end(rt::str("protocol error on the connection from ", who(src), ": ", e.what()));
      }
    }
  }
}

void TcpTransport::apply_state(int src, const uint8_t* data, size_t bytes) {
  Peer& p = *peers_[size_t(src)];
  wire::Reader rd(data, bytes);
  while (!rd.done()) {
    switch (rd.get<uint8_t>()) {
      case kBoard: {
        const int parity = rd.get<uint8_t>() & 1;
        const std::string b = rd.get_str();
        RT_ICHECK(b.size() <= board_bytes_, "board record of ", b.size(), " bytes");
        std::memcpy(board(parity, src), b.data(), b.size());
        break;
      }
      case kAck: {
        const uint32_t slot = rd.get<uint32_t>();
        const uint64_t v = rd.get<uint64_t>();
        RT_ICHECK(slot < geo_.ack_slots, "acknowledgement slot ", slot);
        if (v > p.acked[slot].load(std::memory_order_relaxed)) p.acked[slot].store(v, std::memory_order_release);
        break;
      }
      case kLink: {
        const uint32_t index = rd.get<uint32_t>();
        const uint64_t v = rd.get<uint64_t>();
        const uint32_t l = index / kWordsPerLink, word = index % kWordsPerLink;
        RT_ICHECK(l < uint32_t(size_ * size_), "link word ", index);
        const int s = int(l) / size_, d = int(l) % size_;
        // Only the words the sender owns: its links' words, and corrupt_received of its inbound links.
        RT_ICHECK(word == kCorruptWord ? d == src : s == src, "rank ", src, " sent a word of link ", s, "->", d);
        store_word(links_[l], word, v);
        break;
      }
      case kConsumed:
        p.consumed.store(rd.get<uint64_t>(), std::memory_order_release);
        break;
      case kCounter: {
        const uint8_t c = rd.get<uint8_t>();
        const uint64_t v = rd.get<uint64_t>();
        RT_ICHECK(c < 2, "counter ", int(c));
        counters_[size_t(src) * 2 + c].store(v, std::memory_order_release);
        break;
      }
      case kAbort: {
        std::string m = rd.get_str();
        std::lock_guard<std::mutex> lock(mutex_);
        if (!abort_) abort_ = std::move(m);
        break;
      }
      case kClosed: {
        std::lock_guard<std::mutex> lock(mutex_);
        p.closed = true;
        break;
      }
      default:
        RT_ICHECK(false, "unknown record in a state message");
    }
  }
}

}  // namespace

std::unique_ptr<Transport> create_tcp_transport(Group& group, const TransportConfig& config) {
  return std::make_unique<TcpTransport>(group, config);
}

}  // namespace deepep
