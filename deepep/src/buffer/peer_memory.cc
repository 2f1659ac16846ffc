#include "buffer/peer_memory.h"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "bootstrap/wire.h"
#include "deepep/error.h"
#include "deepep/group.h"
#include "rt/error.h"

namespace deepep::detail {

std::vector<pid_t> probe_peer_memory(Group& group, bool enabled) {
  // Under Yama's ptrace_scope 1 only a process's ancestors may read it, unless it names a reader:
  // let any process of this user read this one (the ranks run as one user).
#if defined(PR_SET_PTRACER)
  if (enabled) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
  // Each rank publishes its pid and a word with a known value; every rank reads every other's.
  static const uint64_t probe = 0x5EEDC0FFEE123457ull;
  wire::Writer w;
  w.put<uint64_t>(enabled ? 1 : 0).put<uint64_t>(uint64_t(getpid())).put<uint64_t>(reinterpret_cast<uint64_t>(&probe));
  const auto all = group.allgather(w.str(), "single-copy probe");
  bool ok = true;
  std::vector<pid_t> pids(size_t(group.size()), 0);
  for (int r = 0; r < group.size(); ++r) {
    wire::Reader rd(all[size_t(r)]);
    const uint64_t wanted = rd.get<uint64_t>(), pid = rd.get<uint64_t>(), addr = rd.get<uint64_t>();
    pids[size_t(r)] = pid_t(pid);
    if (!wanted) ok = false;
    if (!ok || r == group.rank()) continue;
    uint64_t got = 0;
    iovec local{&got, sizeof(got)}, remote{reinterpret_cast<void*>(addr), sizeof(got)};
    ok = process_vm_readv(pid_t(pid), &local, 1, &remote, 1, 0) == ssize_t(sizeof(got)) && got == probe;
  }
  const auto verdicts = group.allgather(ok ? "1" : "0", "single-copy probe result");
  for (const std::string& v : verdicts)
    if (v != "1") {
#if defined(PR_SET_PTRACER)
      if (enabled) prctl(PR_SET_PTRACER, 0, 0, 0, 0);  // unused: no reader needs it
#endif
      return {};
    }
  return pids;
}

void PeerReads::add(uint64_t remote, void* local, size_t bytes) {
  if (bytes == 0) return;
  // A read that continues the previous one on both sides extends it: the kernel pins the remote
  // pages per read, so runs of consecutive rows cost one pinning pass instead of one per row.
  if (!remote_.empty() && remote_.back() + bytes_.back() == remote &&
      static_cast<char*>(local_.back()) + bytes_.back() == local) {
    bytes_.back() += bytes;
    return;
  }
  remote_.push_back(remote);
  local_.push_back(local);
  bytes_.push_back(bytes);
}

void PeerReads::run() {
  constexpr size_t kBatch = IOV_MAX < 1024 ? IOV_MAX : 1024;
  std::vector<iovec> local(kBatch), remote(kBatch);
  for (size_t first = 0; first < remote_.size(); first += kBatch) {
    const size_t n = std::min(kBatch, remote_.size() - first);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      local[i] = {local_[first + i], bytes_[first + i]};
      remote[i] = {reinterpret_cast<void*>(remote_[first + i]), bytes_[first + i]};
      total += bytes_[first + i];
    }
    const ssize_t got = process_vm_readv(pid_, local.data(), n, remote.data(), n, 0);
    if (got != ssize_t(total)) {
      const std::string message =
          rt::str(what_, ": reading rank ", peer_, "'s memory (process ", pid_, ") failed: ",
                  got < 0 ? std::strerror(errno) : rt::str("read ", got, " of ", total, " bytes"));
      if (on_failure_) on_failure_(message);
      throw CommError(message);
    }
  }
  remote_.clear();
  local_.clear();
  bytes_.clear();
}

}  // namespace deepep::detail
