// The shared arena of a Buffer: POSIX shared memory of each rank that every rank of the host maps,
// so that tensors placed there (Buffer::alloc_shared_tensor) are read by the receiving ranks with
// plain loads from their mapping -- memcpy speed -- instead of process_vm_readv, whose copy runs
// at 0.35-0.39x of memcpy per core on the CI machine (docs/perf.md, "Stop 13").
//
// Each rank reserves `capacity` bytes when the Buffer is created (a sparse file and a mapping:
// address space, no memory) and commits memory (fallocate) as tensors take it, so an arena that
// cannot grow is a clear error at allocation, never a SIGBUS at first touch. Peers map it
// read-only. A tensor keeps its rank's segment alive, so it may outlive the Buffer; its bytes
// return to the arena when its last handle goes. Nothing orders a rank's writes into a block
// against peers' reads but the operations themselves: dispatch and combine read peers' arenas
// between their agreement and their closing barrier, so a sender's call returns only after every
// reader is done with its tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rt/tensor.h"

namespace deepep {

class Group;

namespace detail {

// A tensor as its peers find it: its address in the owning process and, when it lies in the
// owner's arena, its offset there.
struct PeerTensor {
  static constexpr uint64_t kNotShared = ~uint64_t(0);
  uint64_t address = 0;
  uint64_t arena_offset = kNotShared;
};

class SharedArena {
 public:
  // Collective over the group. capacity 0: this rank has no arena (its allocations are errors;
  // peers read its tensors the other ways). A rank that cannot set its arena up leaves every
  // rank without arenas (the reason goes into alloc's error): the Buffer works without them.
  SharedArena(Group& group, int64_t capacity);
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  // An uninitialized contiguous CPU tensor in this rank's arena; a user error (naming the shape,
  // the capacity and what is in use) when it does not fit or memory cannot be committed.
  rt::Tensor alloc(const rt::Shape& shape, rt::DType dtype);
  // Where peers find `t` (undefined: address 0, not shared).
  PeerTensor describe(const rt::Tensor& t) const;
  // "" unless `t` lies in another Buffer's arena: peers map only this Buffer's, so that is an
  // error naming `role` (passing it through the slow path silently would hide the mistake).
  std::string check_not_foreign(const rt::Tensor& t, const char* role) const;
  // A copy of `t` in this rank's arena, for peers to read from their mapping: copying it in at
  // memcpy speed and the peers reading it at memcpy speed beats one process_vm_readv (0.35-0.39x of
  // memcpy). `t` itself when it needs no copy (undefined, empty, not a CPU tensor, already in this
  // arena), cannot take one (not contiguous) or the arena has no room (the slow path still works).
  rt::Tensor copy_in(const rt::Tensor& t);
  // The first `bytes` of rank `rank`'s tensor `p` as mapped in this process; nullptr when p is not
  // in that rank's arena (read it with process_vm_readv).
  const uint8_t* mapped(int rank, const PeerTensor& p, uint64_t bytes) const;

 private:
  struct Segment;  // this rank's arena: mapping, file, allocator; shared with the tensors in it
  struct Block;    // a tensor's share of the segment (its storage's deleter)
  int rank_ = 0;
  std::shared_ptr<Segment> own_;
  std::vector<const uint8_t*> peer_base_;  // the arenas of this node's ranks as mapped here (own included)
  std::vector<uint64_t> peer_bytes_;
  std::string unavailable_;  // why alloc fails, when this rank has no arena
};

}  // namespace detail
}  // namespace deepep
