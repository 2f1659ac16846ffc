#include "buffer/shared_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>

#include "bootstrap/wire.h"
#include "deepep/group.h"
#include "rt/error.h"

namespace deepep::detail {
namespace {

constexpr uint64_t kAlign = 4096;      // blocks start on pages: rows copied from them stay aligned
constexpr uint64_t kCommitStep = 2 << 20;  // memory is committed in steps, not per tensor

std::atomic<uint64_t> g_arena_counter{0};

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

struct SharedArena::Segment {
  int rank = 0;
  uint8_t* base = nullptr;
  uint64_t capacity = 0;
  int fd = -1;  // kept open to commit memory
  std::mutex mutex;
  std::map<uint64_t, uint64_t> free;  // offset -> bytes; disjoint, neighbours merged
  uint64_t committed = 0;             // [0, committed) is backed by memory
  uint64_t in_use = 0;

  ~Segment() {
    if (base) munmap(base, capacity);
    if (fd >= 0) ::close(fd);
  }

  // A free range of `bytes` (a multiple of kAlign), committed; its offset. `what` describes the
  // request in errors.
  uint64_t take(uint64_t bytes, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    uint64_t largest = 0;
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < bytes) {
        largest = std::max(largest, it->second);
        continue;
      }
      const uint64_t offset = it->first, left = it->second - bytes;
      free.erase(it);
      if (left) free.emplace(offset + bytes, left);
      if (offset + bytes > committed) {
        // tmpfs refuses here when it has no room (ENOSPC), where a touch of an uncommitted page
        // would raise SIGBUS later.
        const uint64_t target = std::min(capacity, round_up(offset + bytes, kCommitStep));
        if (fallocate(fd, 0, off_t(committed), off_t(target - committed)) != 0) {
          const int error = errno;
          give_back_locked(offset, bytes);
          rt::throw_user_error(rt::str("deepep alloc_shared_tensor (rank ", rank, "): ", what,
                                       " needs the shared arena to hold ", target, " bytes of memory, ", committed,
                                       " are committed, and the system refused more: ", std::strerror(error),
                                       " (is /dev/shm large enough?)"));
        }
        committed = target;
      }
      in_use += bytes;
      return offset;
    }
    rt::throw_user_error(rt::str("deepep alloc_shared_tensor (rank ", rank, "): ", what, " (", bytes,
                                 " bytes) does not fit in the shared arena: ", capacity, " bytes per rank (CommOptions::",
                                 "shared_arena_bytes), ", in_use, " in use, the largest free range ", largest,
                                 " bytes"));
  }

  void give_back(uint64_t offset, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    in_use -= bytes;
    give_back_locked(offset, bytes);
  }

  void give_back_locked(uint64_t offset, uint64_t bytes) {
    auto next = free.lower_bound(offset);
    if (next != free.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += bytes;
        return;
      }
    }
    free.emplace(offset, bytes);
  }
};

struct SharedArena::Block {
  std::shared_ptr<Segment> segment;
  uint64_t offset = 0, bytes = 0;
  void operator()(void*) const { segment->give_back(offset, bytes); }
};

SharedArena::SharedArena(Group& group, int64_t capacity) : rank_(group.rank()) {
  const int R = group.size(), me = rank_;
  peer_base_.assign(size_t(R), nullptr);
  peer_bytes_.assign(size_t(R), 0);
  // Each rank creates its segment under a fresh name; every rank maps every other's; each rank
  // unlinks its own name once all have mapped it (or setup failed), so /dev/shm keeps nothing.
  // The names are announced before the segments exist, so when a rank dies during setup the
  // survivors remove its segment as they fail (its name outlived it before).
  auto own = std::make_shared<Segment>();
  own->rank = me;
  std::string name, error;
  if (capacity > 0) {
    std::random_device rd;
    name = rt::str("/deepep-arena-", getpid(), "-", g_arena_counter.fetch_add(1), "-", std::hex, rd());
  }
  const std::vector<std::string> names = group.allgather(name, "shared arena names");
  if (capacity > 0) {
    own->fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (own->fd < 0) {
      error = rt::str("rank ", me, " could not create the shared-memory segment ", name, ": ", std::strerror(errno));
    } else if (ftruncate(own->fd, off_t(capacity)) != 0) {
      error = rt::str("rank ", me, " could not size the shared-memory segment to ", capacity, " bytes: ",
                      std::strerror(errno));
    } else {
      // Address space only: memory is committed per block (Segment::take).
      void* p = mmap(nullptr, size_t(capacity), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, own->fd, 0);
      if (p == MAP_FAILED)
        error = rt::str("rank ", me, " could not map ", capacity, " bytes of shared memory: ", std::strerror(errno));
      else
        own->base = static_cast<uint8_t*>(p), own->capacity = uint64_t(capacity), own->free.emplace(0, own->capacity);
    }
  }
  auto unlink_own = [&] {
    if (!name.empty() && own->fd >= 0) shm_unlink(name.c_str());
  };
  // On failure: the other ranks of this host may have died before unlinking theirs.
  auto unlink_peers = [&] {
    for (int r = 0; r < R; ++r)
      if (r != me && !names[size_t(r)].empty() && group.peer(r).node == group.node()) shm_unlink(names[size_t(r)].c_str());
  };
  auto first_error = [&](const std::vector<std::string>& all) {
    for (const std::string& s : all) {
      wire::Reader rd(s);
      std::string e = rd.get_str();
      if (!e.empty()) return e;
    }
    return std::string();
  };
  std::vector<uint8_t*> mapped(size_t(R), nullptr);
  auto unmap_peers = [&] {
    for (int r = 0; r < R; ++r)
      if (mapped[size_t(r)]) munmap(mapped[size_t(r)], peer_bytes_[size_t(r)]);
  };
  // The group's steps below throw when a peer dies or the timeout passes: the segment's name and
  // the peers' mappings must not outlive that (`own` unmaps and closes its own).
  struct OnThrow {
    std::function<void()> undo;
    ~OnThrow() {
      if (undo) undo();
    }
  } on_throw{[&] {
    unlink_own();
    unlink_peers();
    unmap_peers();
  }};
  wire::Writer w;
  w.put_str(error).put<uint64_t>(own->capacity);
  const std::vector<std::string> all = group.allgather(w.str(), "shared arena setup");
  std::string failure = first_error(all);
  for (int r = 0; r < R && failure.empty(); ++r) {
    wire::Reader rd(all[size_t(r)]);
    rd.get_str();
    const std::string& peer_name = names[size_t(r)];
    const uint64_t bytes = rd.get<uint64_t>();
    // Ranks of other hosts have their segments elsewhere (nor are they read: no single copy across nodes).
    if (bytes == 0 || group.peer(r).node != group.node()) continue;
    peer_bytes_[size_t(r)] = bytes;
    if (r == me) {
      peer_base_[size_t(r)] = own->base;
      continue;
    }
    const int fd = shm_open(peer_name.c_str(), O_RDONLY, 0600);
    struct stat st {};
    if (fd < 0) {
      failure = rt::str("rank ", me, " could not open rank ", r, "'s segment ", peer_name, ": ", std::strerror(errno));
    } else if (fstat(fd, &st) != 0 || uint64_t(st.st_size) != bytes) {
      failure = rt::str("rank ", me, " sees rank ", r, "'s segment ", peer_name, " with ", st.st_size, " bytes, not ",
                        bytes);
    } else {
      void* p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED | MAP_NORESERVE, fd, 0);
      if (p == MAP_FAILED)
        failure = rt::str("rank ", me, " could not map rank ", r, "'s ", bytes, " bytes: ", std::strerror(errno));
      else
        mapped[size_t(r)] = static_cast<uint8_t*>(p), peer_base_[size_t(r)] = mapped[size_t(r)];
    }
    if (fd >= 0) ::close(fd);
  }
  wire::Writer v;
  v.put_str(failure);
  const std::string attach_failure = first_error(group.allgather(v.str(), "shared arena attach"));
  on_throw.undo = nullptr;
  if (failure.empty()) failure = attach_failure;
  // Every rank of the host has mapped every segment: the names can go, each rank's by every rank
  // (a rank killed right after this step would keep its own otherwise).
  unlink_own();
  unlink_peers();
  if (failure.empty()) {
    if (own->base) own_ = std::move(own);
    return;
  }
  unmap_peers();
  peer_base_.assign(size_t(R), nullptr);
  peer_bytes_.assign(size_t(R), 0);
  unavailable_ = "the shared arenas could not be set up when the Buffer was created: " + failure;
}

SharedArena::~SharedArena() {
  for (size_t r = 0; r < peer_base_.size(); ++r)
    if (peer_base_[r] && !(own_ && peer_base_[r] == own_->base))
      munmap(const_cast<uint8_t*>(peer_base_[r]), peer_bytes_[r]);
}

rt::Tensor SharedArena::alloc(const rt::Shape& shape, rt::DType dtype) {
  std::string what = rt::str("a ", rt::name(dtype), " tensor of shape [");
  int64_t numel = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    RT_USER_CHECK(shape[i] >= 0, "deepep alloc_shared_tensor: negative dimension ", shape[i], " in the shape");
    overflow |= __builtin_mul_overflow(numel, shape[i], &numel);
    what += rt::str(i ? ", " : "", shape[i]);
  }
  what += "]";
  RT_USER_CHECK(!overflow && numel <= (int64_t(1) << 60), "deepep alloc_shared_tensor: ", what, " has too many elements");
  if (!own_) {
    rt::throw_user_error(rt::str("deepep alloc_shared_tensor (rank ", rank_, "): this rank has no shared arena: ",
                                 unavailable_.empty() ? "CommOptions::shared_arena_bytes is 0" : unavailable_));
  }
  const uint64_t bytes = round_up(std::max<uint64_t>(uint64_t(rt::storage_bytes(dtype, numel)), 1), kAlign);
  const uint64_t offset = own_->take(bytes, what);
  std::shared_ptr<void> owner(own_->base + offset, Block{own_, offset, bytes});
  return rt::Tensor::wrap(own_->base + offset, shape, dtype, rt::Device::cpu(), {}, std::move(owner));
}

PeerTensor SharedArena::describe(const rt::Tensor& t) const {
  PeerTensor p;
  if (!t.defined()) return p;
  p.address = reinterpret_cast<uint64_t>(t.data());
  if (!own_ || !t.device().is_cpu()) return p;
  const uint64_t base = reinterpret_cast<uint64_t>(own_->base), bytes = uint64_t(t.nbytes());
  if (p.address >= base && bytes <= own_->capacity && p.address - base <= own_->capacity - bytes)
    p.arena_offset = p.address - base;
  return p;
}

rt::Tensor SharedArena::copy_in(const rt::Tensor& t) {
  if (!own_ || !t.defined() || t.numel() == 0 || !t.device().is_cpu() || !t.is_contiguous()) return t;
  if (describe(t).arena_offset != PeerTensor::kNotShared) return t;
  rt::Tensor copy;
  try {
    copy = alloc(t.shape(), t.dtype());
  } catch (const rt::Error&) {  // full, or memory not committed: peers read t the slow way
    return t;
  }
  std::memcpy(copy.data(), t.data(), size_t(t.nbytes()));
  return copy;
}

std::string SharedArena::check_not_foreign(const rt::Tensor& t, const char* role) const {
  if (!t.defined()) return "";
  const Block* block = std::get_deleter<Block>(t.storage());
  if (!block || block->segment == own_) return "";
  return rt::str(role, " lies in the shared arena of another Buffer; the ranks map only this Buffer's: allocate it "
                       "with this Buffer's alloc_shared_tensor");
}

const uint8_t* SharedArena::mapped(int rank, const PeerTensor& p, uint64_t bytes) const {
  const uint8_t* base = peer_base_[size_t(rank)];
  if (p.arena_offset == PeerTensor::kNotShared || !base) return nullptr;
  const uint64_t size = peer_bytes_[size_t(rank)];
  RT_ICHECK(bytes <= size && p.arena_offset <= size - bytes, "rank ", rank, " described a tensor at offset ",
            p.arena_offset, " (", bytes, " bytes) of its ", size, "-byte arena");
  return base + p.arena_offset;
}

}  // namespace deepep::detail
