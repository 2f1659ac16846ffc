// Single-copy data path of dispatch and combine between processes of one host: a rank reads the
// rows it receives straight from the sending rank's memory (Linux cross-memory attach,
// process_vm_readv), one copy per byte, where the frames of the shm transport take two (into the
// ring, out of it).
//
// Why and when: the CPU path's time is its copies (docs/perf.md, "CPU: DeepEP over shared memory").
// The kernel's copy cannot drop or corrupt data, so what the frames add -- checksums,
// acknowledgements, retransmission, rerouting -- has nothing to repair; the ranks still agree on
// every call through the engine and wait for each other at its end (a dead rank is reported as
// on the frame path). The path is used when every rank can read every other rank (probed once per
// Buffer: Yama's ptrace_scope, seccomp or a kernel without CMA can forbid it), the group is one
// node (across nodes, emulated ones too, the hierarchical route's frames carry the rows), no frame
// faults are injected (drop, corrupt, delay: the tests of self-healing need the frames; killing a
// rank is no frame fault), and DEEPEP_SINGLE_COPY is not 0. A peer that dies while being read is an
// error naming it; the others learn of the death at the call's closing barrier.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace deepep {

class Group;

namespace detail {

// Collective over the group: every rank's process id when every rank can read every other rank's
// memory, else empty. `enabled`: this rank's wish (options and environment); the path is used only
// when all ranks wish it.
std::vector<pid_t> probe_peer_memory(Group& group, bool enabled);

// A batch of reads from one peer's memory: add (remote address, local destination, bytes), then
// run() issues them, IOV_MAX at a time. A failed or short read goes to `on_failure` with a message
// naming the peer, which may throw a better diagnosis (the peer may be gone because another rank
// failed first); if it returns, the read's own CommError is thrown.
class PeerReads {
 public:
  PeerReads(pid_t pid, int peer, std::string what, std::function<void(const std::string&)> on_failure)
      : pid_(pid), peer_(peer), what_(std::move(what)), on_failure_(std::move(on_failure)) {}
  void add(uint64_t remote, void* local, size_t bytes);
  void run();

 private:
  pid_t pid_;
  int peer_;
  std::string what_;
  std::function<void(const std::string&)> on_failure_;
  std::vector<uint64_t> remote_;
  std::vector<void*> local_;
  std::vector<size_t> bytes_;
};

}  // namespace detail
}  // namespace deepep
