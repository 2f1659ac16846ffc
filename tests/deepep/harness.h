// Multi-process test harness for deepep: forks N ranks that join a TCP rendezvous on 127.0.0.1
// (an ephemeral port the parent listens on; rank 0 inherits the listening socket), runs a body in
// each and reports every rank's outcome to the parent. Every wait is bounded: the parent kills
// ranks still running at the deadline, and each child has an alarm as a second guard.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "deepep/deepep.h"
#include "rt/error.h"
#include <dirent.h>
#include <netinet/in.h>
#include <sys/inotify.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "testutil/tensors.h"

namespace deepep_test {

// The options of the tests' communicators: a timeout far above any healthy run, so that a hang
// fails its test rather than the whole CI job.
inline deepep::CommOptions test_options() {
  deepep::CommOptions o;
  o.timeout = std::chrono::milliseconds(30000);
  return o;
}

struct RankOutcome {
  int rank = 0;
  bool ok = false;
  bool killed = false;  // ended by a signal (e.g. the kill fault)
  bool timed_out = false;
  std::string message;  // the failure's text, or what the body reported
};

struct RunOptions {
  int timeout_s = 90;                      // the parent's bound for the whole run
  std::chrono::milliseconds group_timeout{20000};
  std::vector<int> absent;                 // ranks that are not started
  std::function<int(int)> size_of;         // world size each rank claims (default: n)
  std::function<std::string(int)> host_of; // host identity per rank (default: the host name)
};

using Body = std::function<void(const std::shared_ptr<deepep::Group>&)>;

// Rank r on the emulated host "node-<node_of(r)>" (a host identity of its own per node).
inline RunOptions on_nodes(std::function<int(int)> node_of) {
  RunOptions o;
  o.host_of = [node_of](int r) { return rt::str("node-", node_of(r)); };
  return o;
}
inline RunOptions nodes_of(int ranks_per_node) {
  return on_nodes([ranks_per_node](int r) { return r / ranks_per_node; });
}


// Inside a body: a failed check throws with the message (the child reports it to the parent).
#define EP_CHECK(cond, ...)                                                                        \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      throw std::runtime_error(::rt::str(__FILE__, ":", __LINE__, ": check failed: " #cond " ", ##__VA_ARGS__)); \
  } while (0)

// Inside a rank's body: `f` must throw an rt::Error whose message holds `piece` (`what` names the
// call in the failure when it does not throw).
template <class F>
void expect_throws(F&& f, const std::string& piece, const std::string& what) {
  try {
    f();
  } catch (const rt::Error& e) {
    EP_CHECK(std::string(e.what()).find(piece) != std::string::npos, e.what());
    return;
  }
  EP_CHECK(false, what, " did not fail");
}



// Whether this machine lets one process read another's memory with process_vm_readv once the
// target allowed it (PR_SET_PTRACER_ANY), as deepep's own probe does: the single-copy path needs it,
// and Yama's ptrace_scope 2 or 3 or a seccomp filter forbid it. Tests of that path skip without it.
inline bool peer_memory_readable() {
  static const bool readable = [] {
    int up[2], down[2];
    if (pipe(up) != 0) return false;
    if (pipe(down) != 0) {
      close(up[0]);
      close(up[1]);
      return false;
    }
    static volatile uint64_t value = 0x5eed;  // the same address in the forked child
    const pid_t child = fork();
    if (child == 0) {
#if defined(PR_SET_PTRACER)
      prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
      char c = 'r';
      (void)!write(up[1], &c, 1);
      (void)!read(down[0], &c, 1);
      _exit(0);
    }
    bool ok = false;
    if (child > 0) {
      char c;
      uint64_t got = 0;
      iovec local{&got, sizeof got}, remote{const_cast<uint64_t*>(&value), sizeof got};
      ok = read(up[0], &c, 1) == 1 && process_vm_readv(child, &local, 1, &remote, 1, 0) == ssize_t(sizeof got) &&
           got == 0x5eed;
      (void)!write(down[1], "x", 1);
      waitpid(child, nullptr, 0);
    }
    for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
    return ok;
  }();
  return readable;
}

namespace detail {

inline int g_note_fd = -1;

inline int listen_ephemeral(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 256) != 0)
    throw std::runtime_error(std::string("cannot listen on 127.0.0.1: ") + std::strerror(errno));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

inline void write_all(int fd, const std::string& s) {
  size_t at = 0;
  while (at < s.size()) {
    const ssize_t n = ::write(fd, s.data() + at, s.size() - at);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    at += size_t(n);
  }
}

}  // namespace detail

// Whether /dev/shm holds a name starting with `prefix` (the shm segments' names).
inline bool shm_name_exists(const std::string& prefix) {
  bool found = false;
  if (DIR* dir = opendir("/dev/shm")) {
    while (const dirent* entry = readdir(dir)) found |= std::string(entry->d_name).rfind(prefix, 0) == 0;
    closedir(dir);
  }
  return found;
}

// Inside a body: kills this process (SIGKILL) as soon as a name starting with `prefix` is created
// in /dev/shm: a rank that dies in setup right after creating a segment. The watch (inotify) is in
// place when this returns, so a name that exists only briefly is not missed.
inline void die_once_shm_name_created(const std::string& prefix) {
  const int fd = inotify_init1(IN_CLOEXEC);
  if (fd < 0 || inotify_add_watch(fd, "/dev/shm", IN_CREATE) < 0)
    throw std::runtime_error(rt::str("inotify on /dev/shm: ", std::strerror(errno)));
  std::thread([fd, prefix] {
    alignas(inotify_event) char buffer[4096];
    for (;;) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
        if (event->len > 0 && std::string(event->name).rfind(prefix, 0) == 0) raise(SIGKILL);
        at += ssize_t(sizeof(inotify_event) + event->len);
      }
    }
  }).detach();
}

// Inside a body: report a note to the parent (RankOutcome::message when the rank succeeds).
inline void note(const std::string& text) {
  std::string one = text;
  std::replace(one.begin(), one.end(), '\n', ' ');
  if (detail::g_note_fd >= 0) detail::write_all(detail::g_note_fd, "N" + one + "\n");
}

inline uint64_t test_seed();

// Runs `body` on n ranks; returns one outcome per started rank, in rank order.
inline std::vector<RankOutcome> run_ranks(int n, const Body& body, const RunOptions& options = {}) {
  (void)test_seed();  // drawn once in the parent, so every rank sees the same seed
  int port = 0;
  int lfd = detail::listen_ephemeral(&port);
  // Without rank 0 nobody listens: close the socket before the others try to connect.
  const bool root_absent = std::find(options.absent.begin(), options.absent.end(), 0) != options.absent.end();
  if (root_absent) ::close(lfd), lfd = -1;
  struct Child {
    int rank;
    pid_t pid;
    int fd;
    std::string out;
    bool open = true;
  };
  std::vector<Child> children;
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < n; ++r) {
    if (std::find(options.absent.begin(), options.absent.end(), r) != options.absent.end()) continue;
    int p[2];
    if (pipe(p) != 0) throw std::runtime_error("pipe() failed");
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork() failed");
    if (pid == 0) {
      ::close(p[0]);
      for (const Child& c : children) ::close(c.fd);
      detail::g_note_fd = p[1];
      alarm(unsigned(options.timeout_s + 10));  // second guard: a hung child dies
      int status = 1;
      try {
        deepep::TcpRendezvous rv;
        rv.address = "127.0.0.1";
        rv.port = port;
        rv.rank = r;
        rv.size = options.size_of ? options.size_of(r) : n;
        rv.timeout = options.group_timeout;
        if (options.host_of) rv.host_id = options.host_of(r);
        if (r == 0)
          rv.listen_fd = lfd;
        else if (lfd >= 0)
          ::close(lfd);
        auto group = deepep::Group::create(rv);
        body(group);
        detail::write_all(p[1], "K\n");
        status = 0;
      } catch (const std::exception& e) {
        detail::write_all(p[1], std::string("F") + e.what() + "\n");
      } catch (...) {
        detail::write_all(p[1], "Funknown exception\n");
      }
      ::close(p[1]);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(status);
    }
    ::close(p[1]);
    children.push_back({r, pid, p[0], {}, true});
  }
  if (lfd >= 0) ::close(lfd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_s);
  bool timed_out = false;
  while (true) {
    std::vector<pollfd> pfds;
    std::vector<Child*> who;
    for (Child& c : children)
      if (c.open) pfds.push_back({c.fd, POLLIN, 0}), who.push_back(&c);
    if (pfds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int rc = poll(pfds.data(), pfds.size(), int(std::min<int64_t>(left.count(), 1000)));
    if (rc < 0 && errno != EINTR) break;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t k = ::read(pfds[i].fd, buf, sizeof(buf));
      if (k > 0)
        who[i]->out.append(buf, size_t(k));
      else if (k == 0 || (errno != EINTR && errno != EAGAIN))
        who[i]->open = false;
    }
  }
  std::vector<RankOutcome> outcomes;
  for (Child& c : children) {
    RankOutcome o;
    o.rank = c.rank;
    if (c.open) {
      kill(c.pid, SIGKILL);
      o.timed_out = true;
    }
    ::close(c.fd);
    int status = 0;
    waitpid(c.pid, &status, 0);
    o.killed = WIFSIGNALED(status) && !o.timed_out;
    std::string notes;
    for (size_t pos = 0; pos < c.out.size();) {
      size_t nl = c.out.find('\n', pos);
      if (nl == std::string::npos) nl = c.out.size();
      const std::string line = c.out.substr(pos, nl - pos);
      if (!line.empty() && line[0] == 'N') notes += (notes.empty() ? "" : "\n") + line.substr(1);
      if (!line.empty() && line[0] == 'K') o.ok = true;
      if (!line.empty() && line[0] == 'F') {  // the failure's text runs to the end
        o.message = c.out.substr(pos + 1);
        while (!o.message.empty() && o.message.back() == '\n') o.message.pop_back();
        break;
      }
      pos = nl + 1;
    }
    if (o.ok) o.message = notes;
    if (o.timed_out) o.message = rt::str("rank ", c.rank, " did not finish within ", options.timeout_s, " s (killed)");
    if (o.killed && o.message.empty()) o.message = rt::str("killed by signal ", WTERMSIG(status));
    outcomes.push_back(o);
  }
  (void)timed_out;
  return outcomes;
}

// gtest: every rank succeeded (prints each failure with its rank).
inline void expect_all_ok(const std::vector<RankOutcome>& outcomes) {
  EXPECT_FALSE(outcomes.empty()) << "no rank ran";
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok) << "rank " << o.rank << ": " << o.message;
}

// gtest: every rank failed and its message contains every piece.
inline void expect_all_failed_with(const std::vector<RankOutcome>& outcomes, const std::vector<std::string>& pieces) {
  for (const RankOutcome& o : outcomes) {
    EXPECT_FALSE(o.ok) << "rank " << o.rank << " succeeded but should have failed";
    EXPECT_FALSE(o.timed_out) << "rank " << o.rank << " hung";
    for (const std::string& p : pieces)
      EXPECT_NE(o.message.find(p), std::string::npos) << "rank " << o.rank << ": message lacks '" << p << "':\n"
                                                      << o.message;
  }
}

// A fresh seed per test run, printed so a failure can be replayed (DEEPEP_TEST_SEED overrides it).
inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("DEEPEP_TEST_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 10) : testutil::fresh_seed();
    std::fprintf(stderr, "deepep tests: seed %llu (DEEPEP_TEST_SEED=%llu replays it)\n", (unsigned long long)s,
                 (unsigned long long)s);
    return s;
  }();
  return seed;
}

// Deterministic pseudo-random numbers from a key.
inline uint64_t mix(uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint64_t v : {a, b, c, d}) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return h;
}

inline double unit(uint64_t h) { return double(h >> 11) * 0x1.0p-53; }  // [0, 1)

}  // namespace deepep_test
