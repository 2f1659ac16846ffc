#include "transport/shm/shm_transport.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "bootstrap/wire.h"
#include "deepep/error.h"
#include "deepep/group.h"
#include "rt/env.h"
#include "rt/error.h"
#include "transport/frame_faults.h"
#include "transport/ring_geometry.h"
#include "transport/shm/futex.h"

namespace deepep {
namespace {

constexpr uint64_t kMagic = 0xDEE9E95E60000001ull;
constexpr size_t kSlotHeader = kFrameSlotHeader;  // transport's part of a slot: visibility time, length
constexpr size_t kAbortBytes = 2048;

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free");

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // system-wide: comparable between processes
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

struct SegmentHeader {
  uint64_t magic;
  int32_t size;
  uint32_t slots;
  uint64_t frame_capacity;
  uint64_t slot_bytes;
  uint32_t ack_slots;
  uint32_t pad0;
  uint64_t board_bytes;
  uint64_t total_bytes;
  uint64_t rank_off, link_off, ack_off, board_off, ring_off;
  std::atomic<uint32_t> abort_state;  // 0 none, 1 being written, 2 set
  int32_t abort_rank;
  char abort_message[kAbortBytes];
};

struct alignas(64) RankCtl {
  std::atomic<uint32_t> doorbell;
  char pad0[60];
  std::atomic<uint32_t> sleeping;
  char pad1[60];
  std::atomic<uint64_t> counters[2];
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> closed;  // set when the rank destroyed its transport normally
  char pad2[40];
};
static_assert(sizeof(RankCtl) == 192);

struct alignas(64) LinkCtl {
  std::atomic<uint64_t> head;  // frames published (sender)
  char pad0[56];
  std::atomic<uint64_t> tail;  // frames consumed (receiver)
  char pad1[56];
  LinkCounters counters;
};

struct SlotHeader {
  int64_t visible_ns;
  uint64_t bytes;
};

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Is process `pid` gone (exited, or a zombie waiting for its parent)?
bool process_gone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X' || state == 'x';
}

class ShmTransport final : public Transport {
 public:
  ShmTransport(Group& group, const TransportConfig& config);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  size_t frame_capacity() const override { return hdr_->frame_capacity; }
  void* reserve(int dst) override {
    LinkCtl& l = link_ctl(rank_, dst);
    const uint64_t h = l.head.load(std::memory_order_relaxed);
    if (h - l.tail.load(std::memory_order_acquire) >= hdr_->slots) return nullptr;
    return slot(rank_, dst, h) + kSlotHeader;
  }
  void publish(int dst, size_t bytes) override;
  uint64_t published(int dst) const override { return link_ctl(rank_, dst).head.load(std::memory_order_relaxed); }
  uint64_t consumed(int dst) const override { return link_ctl(rank_, dst).tail.load(std::memory_order_acquire); }
  const void* peek(int src, size_t* bytes) override {
    LinkCtl& l = link_ctl(src, rank_);
    const uint64_t t = l.tail.load(std::memory_order_relaxed);
    if (t == l.head.load(std::memory_order_acquire)) return nullptr;
    const uint8_t* s = slot(src, rank_, t);
    SlotHeader sh;
    std::memcpy(&sh, s, sizeof(sh));
    if (sh.visible_ns != 0 && sh.visible_ns > now_ns()) {
      delayed_ = true;
      return nullptr;
    }
    *bytes = sh.bytes;
    return s + kSlotHeader;
  }
  void consume(int src) override {
    LinkCtl& l = link_ctl(src, rank_);
    l.tail.store(l.tail.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  bool has_delayed_frames() const override {
    const bool d = delayed_;
    delayed_ = false;
    return d || faults_.delays();
  }

  uint32_t ack_slots() const override { return hdr_->ack_slots; }
  void ack(int src, uint32_t slot_index, uint64_t value) override {
    std::atomic<uint64_t>& a = ack_word(src, rank_, slot_index);
    if (value > a.load(std::memory_order_relaxed)) a.store(value, std::memory_order_release);
  }
  uint64_t acked(int dst, uint32_t slot_index) const override {
    return ack_word(rank_, dst, slot_index).load(std::memory_order_acquire);
  }

  size_t board_bytes() const override { return hdr_->board_bytes; }
  void post_board(int, size_t) override {}  // the board is shared memory already
  void* board(int parity, int r) override {
    return base_ + hdr_->board_off + (size_t(parity) * size_ + r) * hdr_->board_bytes;
  }
  std::atomic<uint64_t>& counter(int r, Counter which) override { return rank_ctl(r).counters[int(which)]; }
  LinkCounters& link(int src, int dst) override { return link_ctl(src, dst).counters; }

  uint32_t wait_token() const override { return rank_ctl(rank_).doorbell.load(std::memory_order_acquire); }
  void wait(uint32_t token, std::chrono::nanoseconds max) override;
  void notify(int peer) override {
    RankCtl& c = rank_ctl(peer);
    c.doorbell.fetch_add(1, std::memory_order_seq_cst);
    if (c.sleeping.load(std::memory_order_seq_cst)) futex::wake_all(&c.doorbell);
  }

  std::optional<std::string> peer_failure(int peer) override;
  std::optional<std::string> aborted() const override;
  void set_abort(const std::string& message) override;

 private:
  RankCtl& rank_ctl(int r) const { return reinterpret_cast<RankCtl*>(base_ + hdr_->rank_off)[r]; }
  LinkCtl& link_ctl(int s, int d) const { return reinterpret_cast<LinkCtl*>(base_ + hdr_->link_off)[s * size_ + d]; }
  std::atomic<uint64_t>& ack_word(int s, int d, uint32_t i) const {
    return reinterpret_cast<std::atomic<uint64_t>*>(base_ + hdr_->ack_off)[(size_t(s) * size_ + d) * hdr_->ack_slots +
                                                                           (i % hdr_->ack_slots)];
  }
  uint8_t* slot(int s, int d, uint64_t index) const {
    const size_t ring = size_t(s) * (size_ - 1) + size_t(d < s ? d : d - 1);
    return base_ + hdr_->ring_off + (ring * hdr_->slots + index % hdr_->slots) * hdr_->slot_bytes;
  }

  int rank_ = 0;
  int size_ = 0;
  uint8_t* base_ = nullptr;
  size_t mapped_ = 0;
  SegmentHeader* hdr_ = nullptr;
  int spin_ = 0;
  FrameFaults faults_;
  mutable bool delayed_ = false;
};

std::atomic<uint64_t> g_segment_counter{0};

ShmTransport::ShmTransport(Group& group, const TransportConfig& config)
    : rank_(group.rank()), size_(group.size()), faults_(config.faults, group.rank()) {
  const RingGeometry geo = ring_geometry(config.inbound_bytes, size_);
  const size_t R = size_t(size_);
  const size_t slot_bytes = kSlotHeader + geo.frame_capacity;
  const size_t board_bytes = align_up(std::max<int64_t>(config.board_bytes, 4096), 64);
  size_t off = align_up(sizeof(SegmentHeader), 4096);
  const size_t rank_off = off;
  off = align_up(off + R * sizeof(RankCtl), 4096);
  const size_t link_off = off;
  off = align_up(off + R * R * sizeof(LinkCtl), 4096);
  const size_t ack_off = off;
  off = align_up(off + R * R * geo.ack_slots * sizeof(uint64_t), 4096);
  const size_t board_off = off;
  off = align_up(off + 2 * R * board_bytes, 4096);
  const size_t ring_off = off;
  off = align_up(off + R * (R - 1) * geo.slots * slot_bytes, 4096);
  const size_t total = off;

  // Rank 0 creates the segment; the others open it; the name is unlinked once every rank has it
  // mapped, so nothing is left in /dev/shm whatever happens later. The mappings are populated
  // up front (like a GPU buffer allocated at creation): no page faults later, in any operation.
  // Rank 0 announces the name before it creates the segment: when a rank dies during setup (an
  // OOM kill while populating, say), every survivor removes the name as it fails, so no segment
  // outlives the group whichever rank died.
  std::string status, name;
  if (rank_ == 0) {
    std::random_device rd;
    name = rt::str("/deepep-", getpid(), "-", g_segment_counter.fetch_add(1), "-", std::hex, rd());
  }
  name = group.allgather(name, "shm transport name")[0];
  int fd = -1;
  const auto unlinking_on_failure = [&](const std::string& mine, const char* what) {
    try {
      return group.allgather(mine, what);
    } catch (...) {
      shm_unlink(name.c_str());
      if (base_) munmap(base_, mapped_), base_ = nullptr;
      if (fd >= 0) ::close(fd);
      throw;
    }
  };
  if (rank_ == 0) {
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      status = rt::str("E:rank 0 could not create the shared-memory segment ", name, ": ", std::strerror(errno));
    } else if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
      status = rt::str("E:rank 0 could not size the shared-memory segment ", name, " to ", total, " bytes: ",
                       std::strerror(errno), " (is /dev/shm large enough?)");
    } else {
      void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
      if (p == MAP_FAILED) {
        status = rt::str("E:rank 0 could not map ", total, " bytes of shared memory: ", std::strerror(errno));
      } else {
        base_ = static_cast<uint8_t*>(p);
        mapped_ = total;
        hdr_ = new (base_) SegmentHeader{};
        hdr_->size = size_;
        hdr_->slots = geo.slots;
        hdr_->frame_capacity = geo.frame_capacity;
        hdr_->slot_bytes = slot_bytes;
        hdr_->ack_slots = geo.ack_slots;
        hdr_->board_bytes = board_bytes;
        hdr_->total_bytes = total;
        hdr_->rank_off = rank_off;
        hdr_->link_off = link_off;
        hdr_->ack_off = ack_off;
        hdr_->board_off = board_off;
        hdr_->ring_off = ring_off;
        for (size_t r = 0; r < R; ++r) new (&rank_ctl(int(r))) RankCtl{};
        for (size_t i = 0; i < R * R; ++i) {
          LinkCtl* l = new (reinterpret_cast<LinkCtl*>(base_ + link_off) + i) LinkCtl{};
          l->counters.via.store(-1);
        }
        // Acks, board and rings are zero pages from ftruncate: zero is the atomics' initial value.
        std::atomic_thread_fence(std::memory_order_release);
        hdr_->magic = kMagic;
        status = "O:";
      }
    }
    if (status[0] == 'E' && fd >= 0) shm_unlink(name.c_str());
  }
  auto fail_all = [&](const std::vector<std::string>& all, const std::string& step) {
    for (int r = 0; r < size_; ++r)
      if (!all[r].empty() && all[r][0] == 'E') {
        if (rank_ == 0 && !name.empty()) shm_unlink(name.c_str());
        if (base_) munmap(base_, mapped_), base_ = nullptr;
        if (fd >= 0) ::close(fd);
        throw_comm_error(rt::str("deepep shm transport (rank ", rank_, ", ", step, "): ", all[r].substr(2)));
      }
  };
  std::vector<std::string> all = unlinking_on_failure(status, "shm transport setup");
  fail_all(all, "setup");
  if (rank_ != 0) {
    fd = shm_open(name.c_str(), O_RDWR, 0600);
    struct stat st {};
    if (fd < 0) {
      status = rt::str("E:rank ", rank_, " could not open the shared-memory segment ", name, ": ", std::strerror(errno),
                       " (are all ranks on one host and in one /dev/shm?)");
    } else if (fstat(fd, &st) != 0 || size_t(st.st_size) != total) {
      status = rt::str("E:rank ", rank_, " sees the segment ", name, " with ", st.st_size, " bytes, expected ", total,
                       " (do the ranks agree on the sizes?)");
    } else {
      void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
      if (p == MAP_FAILED) {
        status = rt::str("E:rank ", rank_, " could not map ", total, " bytes of shared memory: ", std::strerror(errno));
      } else {
        base_ = static_cast<uint8_t*>(p);
        mapped_ = total;
        hdr_ = reinterpret_cast<SegmentHeader*>(base_);
        status = hdr_->magic == kMagic && hdr_->size == size_
                     ? "O:"
                     : rt::str("E:rank ", rank_, " found a foreign segment under ", name);
      }
    }
  }
  if (base_) rank_ctl(rank_).pid.store(getpid());
  all = unlinking_on_failure(status, "shm transport attach");
  fail_all(all, "attach");
  if (fd >= 0) ::close(fd);
  shm_unlink(name.c_str());  // by every rank: rank 0 may die right after the attach step

  // Spin briefly before sleeping only when every rank of this host can have a core of its own.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  spin_ = unsigned(group.local_size()) <= cores ? 2000 : 0;
}

ShmTransport::~ShmTransport() {
  if (!base_) return;
  rank_ctl(rank_).closed.store(1, std::memory_order_release);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) notify(r);
  munmap(base_, mapped_);
}

void ShmTransport::publish(int dst, size_t bytes) {
  RT_ICHECK(bytes <= hdr_->frame_capacity, "frame of ", bytes, " bytes exceeds the capacity ", hdr_->frame_capacity);
  LinkCtl& l = link_ctl(rank_, dst);
  const uint64_t h = l.head.load(std::memory_order_relaxed);
  uint8_t* s = slot(rank_, dst, h);
  l.counters.frames_sent.fetch_add(1, std::memory_order_relaxed);
  l.counters.bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
  SlotHeader sh{0, bytes};
  int64_t delay_ns = 0;
  if (!faults_.deliver(dst, s + kSlotHeader, bytes, &delay_ns)) return;  // lost: never becomes visible
  if (delay_ns > 0) sh.visible_ns = now_ns() + delay_ns;
  std::memcpy(s, &sh, sizeof(sh));
  l.head.store(h + 1, std::memory_order_release);
}

void ShmTransport::wait(uint32_t token, std::chrono::nanoseconds max) {
  RankCtl& c = rank_ctl(rank_);
  for (int i = 0; i < spin_; ++i) {
    if (c.doorbell.load(std::memory_order_acquire) != token) return;
    cpu_relax();
  }
  c.sleeping.store(1, std::memory_order_seq_cst);
  if (c.doorbell.load(std::memory_order_seq_cst) == token) futex::wait(&c.doorbell, token, max);
  c.sleeping.store(0, std::memory_order_relaxed);
}

std::optional<std::string> ShmTransport::peer_failure(int peer) {
  RankCtl& c = rank_ctl(peer);
  const int pid = c.pid.load(std::memory_order_relaxed);
  if (c.closed.load(std::memory_order_acquire))
    return rt::str("rank ", peer, " (pid ", pid, ") left: it destroyed its communicator");
  if (process_gone(pid)) return rt::str("rank ", peer, " (pid ", pid, ") died: its process is gone");
  return std::nullopt;
}

std::optional<std::string> ShmTransport::aborted() const {
  // State 1: a rank is writing its message (a few stores); wait for it rather than miss the cause.
  uint32_t state = hdr_->abort_state.load(std::memory_order_acquire);
  for (int i = 0; state == 1 && i < 100000; ++i) {
    cpu_relax();
    state = hdr_->abort_state.load(std::memory_order_acquire);
  }
  if (state != 2) return std::nullopt;
  return std::string(hdr_->abort_message);
}

void ShmTransport::set_abort(const std::string& message) {
  uint32_t expected = 0;
  if (!hdr_->abort_state.compare_exchange_strong(expected, 1)) return;
  hdr_->abort_rank = rank_;
  const size_t n = std::min(message.size(), kAbortBytes - 1);
  std::memcpy(hdr_->abort_message, message.data(), n);
  hdr_->abort_message[n] = '\0';
  hdr_->abort_state.store(2, std::memory_order_release);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) notify(r);
}

}  // namespace

std::string shm_unavailable(const Group& group) {
  // DEEPEP_SHM_EMULATE_NODES=1: serve a group whose ranks name different hosts (TcpRendezvous::
  // host_id) anyway, trusting that they are processes of this one host: several emulated nodes, for
  // testing and measuring the topology-aware collectives on one machine.
  if (group.num_nodes() <= 1 || rt::env_flag("DEEPEP_SHM_EMULATE_NODES")) return "";
  std::string hosts;
  for (const PeerInfo& p : group.peers())
    if (p.local_rank == 0) hosts += (hosts.empty() ? "" : ", ") + p.host;
  return rt::str("the group spans ", group.num_nodes(), " hosts (", hosts,
                 "); shm reaches the processes of one host only");
}

std::unique_ptr<Transport> create_shm_transport(Group& group, const TransportConfig& config) {
  return std::make_unique<ShmTransport>(group, config);
}

}  // namespace deepep
