#include "deepep/group.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "bootstrap/mpi.h"
#include "bootstrap/nccl_world.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "deepep/error.h"
#include "rt/env.h"

namespace deepep {
namespace {

using net::Clock;
constexpr uint32_t kMagic = 0xDEE9E901u;
// After a validation error the root keeps accepting this long, to tell late ranks the reason.
constexpr auto kErrorGrace = std::chrono::milliseconds(2000);
constexpr size_t kMaxFrame = 64u << 20;

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 8) return out + ", ... (" + std::to_string(ranks.size()) + " in all)";
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return out;
}

const char* first_env(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v && *v) {
      *which = n;
      return v;
    }
  }
  return nullptr;
}

int parse_int(const char* text, const char* name) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  RT_USER_CHECK(errno == 0 && end && *end == '\0' && v >= INT_MIN && v <= INT_MAX, "environment variable ", name, "='",
                text, "' is not an integer");
  return static_cast<int>(v);
}

// One framed message: [type][u32 length][payload].
bool write_frame(int fd, char type, const std::string& payload, Clock::time_point deadline, std::string* error) {
  std::string buf(5 + payload.size(), '\0');
  buf[0] = type;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  std::memcpy(&buf[1], &n, 4);
  std::memcpy(&buf[5], payload.data(), payload.size());
  const auto st = net::write_all(fd, buf.data(), buf.size(), deadline, error);
  if (st == net::IoStatus::Timeout) *error = "timed out";
  if (st == net::IoStatus::Closed) *error = "connection closed";
  return st == net::IoStatus::Ok;
}

net::IoStatus read_frame(int fd, char* type, std::string* payload, Clock::time_point deadline, std::string* error) {
  char head[5];
  auto st = net::read_all(fd, head, 5, deadline, error);
  if (st != net::IoStatus::Ok) return st;
  uint32_t n = 0;
  std::memcpy(&n, head + 1, 4);
  if (n > kMaxFrame) {
    *error = rt::str("bad control frame (", n, " bytes): not a deepep peer?");
    return net::IoStatus::Error;
  }
  *type = head[0];
  payload->assign(n, '\0');
  return n ? net::read_all(fd, payload->data(), n, deadline, error) : net::IoStatus::Ok;
}

}  // namespace

void throw_comm_error(const std::string& message) { throw CommError(message); }

TcpRendezvous TcpRendezvous::from_env() {
  TcpRendezvous r;
  const char* which = nullptr;
  if (const char* ep = first_env({"DEEPEP_RENDEZVOUS"}, &which)) {
    const std::string s(ep);
    const size_t colon = s.rfind(':');
    RT_USER_CHECK(colon != std::string::npos && colon > 0, "DEEPEP_RENDEZVOUS='", s, "' is not host:port");
    r.address = s.substr(0, colon);
    r.port = parse_int(s.c_str() + colon + 1, "DEEPEP_RENDEZVOUS (port)");
  } else {
    if (const char* a = first_env({"MASTER_ADDR"}, &which)) r.address = a;
    const char* p = first_env({"MASTER_PORT"}, &which);
    RT_USER_CHECK(p, "deepep rendezvous: set DEEPEP_RENDEZVOUS=host:port (or MASTER_ADDR and MASTER_PORT)");
    r.port = parse_int(p, which);
  }
  const char* rank = first_env({"DEEPEP_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, &which);
  RT_USER_CHECK(rank, "deepep rendezvous: no rank in the environment (DEEPEP_RANK, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, "
                      "SLURM_PROCID)");
  r.rank = parse_int(rank, which);
  const char* size =
      first_env({"DEEPEP_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, &which);
  RT_USER_CHECK(size, "deepep rendezvous: no world size in the environment (DEEPEP_WORLD_SIZE, WORLD_SIZE, "
                      "OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS)");
  r.size = parse_int(size, which);
  r.timeout = std::chrono::milliseconds(rt::env_int("DEEPEP_TIMEOUT_MS", r.timeout.count()));
  return r;
}

namespace {

// The rendezvous of a group whose ranks already know each other through another library (MPI,
// NCCL): rank 0 listens on an ephemeral port of every interface and `broadcast` (of a fixed-size
// buffer, from rank 0, given the group's timeout) carries "host:port" to the others, who reach it
// by its host name (127.0.0.1 when that name does not resolve, which serves ranks of one host), or
// "!error" so that every rank raises rank 0's error.
TcpRendezvous rendezvous_through(int rank, int size, std::chrono::milliseconds timeout, const char* who,
                                 const std::function<void(char*, int, std::chrono::milliseconds)>& broadcast) {
  TcpRendezvous o;
  o.rank = rank;
  o.size = size;
  o.timeout = timeout.count() > 0 ? timeout
                                  : std::chrono::milliseconds(rt::env_int("DEEPEP_TIMEOUT_MS", o.timeout.count()));
  char endpoint[512] = {};
  if (rank == 0 && size > 1) {
    try {
      o.listen_fd = net::listen_on("0.0.0.0", 0);
      const std::string host = host_name();
      std::snprintf(endpoint, sizeof(endpoint), "%s:%d", net::resolves(host) ? host.c_str() : "127.0.0.1",
                    net::local_port(o.listen_fd));
    } catch (const rt::Error& e) {
      std::snprintf(endpoint, sizeof(endpoint), "!%s", e.what());
    }
  }
  if (size > 1) broadcast(endpoint, int(sizeof(endpoint)), o.timeout);
  const std::string ep(endpoint);
  RT_USER_CHECK(ep.empty() || ep[0] != '!', "deepep ", who, ": rank 0 could not open the rendezvous: ",
                ep.substr(ep.empty() ? 0 : 1));
  if (!ep.empty()) {
    const size_t colon = ep.rfind(':');
    o.address = ep.substr(0, colon);
    o.port = parse_int(ep.c_str() + colon + 1, "the rendezvous port");
  }
  return o;
}

}  // namespace

std::shared_ptr<Group> Group::from_mpi(std::chrono::milliseconds timeout) {
  const mpi::World world = mpi::world();
  return create(rendezvous_through(world.rank, world.size, timeout, "Group::from_mpi",
                                   [](char* data, int bytes, std::chrono::milliseconds) {
                                     mpi::broadcast(data, bytes, 0);  // MPI_Bcast has no bound
                                   }));
}

std::shared_ptr<Group> Group::from_nccl(void* nccl_comm, std::chrono::milliseconds timeout) {
  RT_USER_CHECK(nccl_comm != nullptr, "deepep Group::from_nccl: the NCCL communicator is null");
  const auto comm = static_cast<nccl::Comm>(nccl_comm);
  const nccl::World world = nccl::world(comm);
  std::shared_ptr<Group> group = create(
      rendezvous_through(world.rank, world.size, timeout, "Group::from_nccl",
                         [comm](char* data, int bytes, std::chrono::milliseconds bound) {
                           nccl::broadcast(comm, data, bytes, 0, bound);
                         }));
  group->nccl_comm_ = nccl_comm;
  return group;
}

std::shared_ptr<Group> Group::create(const TcpRendezvous& o) {
  RT_USER_CHECK(o.size >= 1, "deepep group: world size ", o.size, " must be at least 1");
  RT_USER_CHECK(o.rank >= 0 && o.rank < o.size, "deepep group: rank ", o.rank, " is out of range for world size ", o.size);
  RT_USER_CHECK(o.size <= 4096, "deepep group: world size ", o.size, " is larger than 4096");
  RT_USER_CHECK(o.port >= 0 && o.port < 65536, "deepep group: bad port ", o.port);
  RT_USER_CHECK(o.timeout.count() > 0, "deepep group: the timeout must be positive");
  RT_USER_CHECK(o.rank != 0 || o.listen_fd >= 0 || o.port > 0 || o.size == 1,
                "deepep group: rank 0 needs a port (or a listening socket) for the rendezvous");
  std::shared_ptr<Group> g(new Group());
  g->rank_ = o.rank;
  g->timeout_ = o.timeout;
  g->peers_.resize(o.size);
  const std::string host = o.host_id.empty() ? host_name() : o.host_id;
  const std::string where = rt::str(o.address, ":", o.port);
  g->endpoint_ = where;
  const auto start = Clock::now();
  const auto deadline = start + o.timeout;
  const std::string me = rt::str("deepep group (rank ", o.rank, " of ", o.size, ")");

  if (o.rank == 0) {
    g->peers_[0] = PeerInfo{0, host, static_cast<int>(getpid()), 0, 0};
    g->peer_fds_.assign(o.size, -1);
    int lfd = o.listen_fd;
    if (o.size > 1 && lfd < 0) lfd = net::listen_on(o.address, o.port);
    std::vector<int> extra_fds;  // connections that failed validation (told the error, then closed)
    std::string error;
    auto stop = deadline;
    int joined = 1;
    while (o.size > 1 && joined < o.size) {
      const int fd = net::accept_until(lfd, stop);
      if (fd < 0) break;
      char type = 0;
      std::string payload, io_error;
      const auto st = read_frame(fd, &type, &payload, std::min(stop, Clock::now() + std::chrono::seconds(5)), &io_error);
      if (st != net::IoStatus::Ok || type != 'H') {
        ::close(fd);
        continue;  // not a deepep peer, or it went away: keep waiting for real ones
      }
      wire::Reader rd(payload);
      const uint32_t magic = rd.get<uint32_t>();
      const int rank = rd.get<int32_t>(), size = rd.get<int32_t>(), pid = rd.get<int32_t>();
      const std::string phost = rd.get_str();
      std::string bad;
      if (magic != kMagic)
        bad = rt::str("a process (pid ", pid, ") joined with a different deepep protocol version");
      else if (size != o.size)
        bad = rt::str("wrong group size: rank ", rank, " (pid ", pid, ", host ", phost, ") was started with world size ",
                      size, " but rank 0 with world size ", o.size);
      else if (rank <= 0 || rank >= o.size)
        bad = rt::str("a process (pid ", pid, ") claims rank ", rank, ", out of range for world size ", o.size);
      else if (g->peer_fds_[rank] >= 0)
        bad = rt::str("two processes claim rank ", rank, " (pids ", g->peers_[rank].pid, " and ", pid, ")");
      if (!bad.empty()) {
        extra_fds.push_back(fd);
        if (error.empty()) {
          error = bad;
          stop = std::min(deadline, Clock::now() + kErrorGrace);
        }
        continue;
      }
      g->peer_fds_[rank] = fd;
      g->peers_[rank] = PeerInfo{rank, phost, pid, 0, 0};
      ++joined;
    }
    if (error.empty() && joined < o.size) {
      std::vector<int> missing;
      for (int r = 1; r < o.size; ++r)
        if (g->peer_fds_[r] < 0) missing.push_back(r);
      error = rt::str("rendezvous at ", where, " timed out after ", o.timeout.count(), " ms: rank",
                      missing.size() > 1 ? "s " : " ", list_ranks(missing), " never joined (", joined, " of ", o.size,
                      " did)");
    }
    if (lfd >= 0) ::close(lfd);
    if (!error.empty()) {
      const auto tell = Clock::now() + std::chrono::seconds(2);
      std::string ignored;
      for (int fd : g->peer_fds_)
        if (fd >= 0) write_frame(fd, 'E', error, tell, &ignored);
      for (int fd : extra_fds) write_frame(fd, 'E', error, tell, &ignored), ::close(fd);
      throw_comm_error(me + ": " + error);
    }
    wire::Writer table;
    for (const PeerInfo& p : g->peers_) table.put<int32_t>(p.pid).put_str(p.host);
    for (int r = 1; r < o.size; ++r) {
      std::string io_error;
      if (!write_frame(g->peer_fds_[r], 'T', table.str(), deadline + std::chrono::seconds(5), &io_error))
        g->fail(rt::str("rank ", r, " went away during the rendezvous at ", where, " (", io_error, ")"));
    }
  } else {
    std::string io_error;
    const int fd = net::connect_until(o.address, o.port, deadline, &io_error);
    if (fd < 0)
      throw_comm_error(rt::str(me, ": could not reach the rendezvous root (rank 0) at ", where, " within ",
                               o.timeout.count(), " ms: ", io_error));
    g->root_fd_ = fd;
    wire::Writer hello;
    hello.put<uint32_t>(kMagic).put<int32_t>(o.rank).put<int32_t>(o.size).put<int32_t>(getpid()).put_str(host);
    if (!write_frame(fd, 'H', hello.str(), deadline, &io_error))
      throw_comm_error(rt::str(me, ": lost the rendezvous root at ", where, " (", io_error, ")"));
    // The root decides within its own timeout; allow it that long from now, plus slack.
    const auto reply_deadline = Clock::now() + o.timeout + std::chrono::seconds(5);
    char type = 0;
    std::string payload;
    const auto st = read_frame(fd, &type, &payload, reply_deadline, &io_error);
    if (st == net::IoStatus::Timeout)
      throw_comm_error(rt::str(me, ": the rendezvous at ", where, " did not complete within ",
                               o.timeout.count() + 5000, " ms"));
    if (st != net::IoStatus::Ok)
      throw_comm_error(rt::str(me, ": lost the rendezvous root at ", where, " (",
                               st == net::IoStatus::Closed ? "connection closed: did rank 0 die?" : io_error, ")"));
    if (type == 'E') throw_comm_error(me + ": " + payload);
    RT_ICHECK(type == 'T', "unexpected rendezvous message '", type, "'");
    wire::Reader rd(payload);
    for (int r = 0; r < o.size; ++r) {
      g->peers_[r].rank = r;
      g->peers_[r].pid = rd.get<int32_t>();
      g->peers_[r].host = rd.get_str();
    }
  }
  // Nodes in order of their first rank; local ranks in rank order.
  std::map<std::string, int> node_of;
  std::vector<int> next_local;
  for (PeerInfo& p : g->peers_) {
    auto [it, inserted] = node_of.emplace(p.host, static_cast<int>(next_local.size()));
    if (inserted) next_local.push_back(0);
    p.node = it->second;
    p.local_rank = next_local[p.node]++;
  }
  g->num_nodes_ = static_cast<int>(next_local.size());
  return g;
}

Group::~Group() {
  net::close_fd(root_fd_);
  for (int& fd : peer_fds_) net::close_fd(fd);
}

int Group::local_size() const {
  int n = 0;
  for (const PeerInfo& p : peers_) n += p.node == node();
  return n;
}

void Group::fail(const std::string& message) {
  const std::string full = rt::str("deepep group (rank ", rank_, " of ", size(), "): ", message);
  if (broken_.empty()) broken_ = full;
  // The root tells everyone, so they fail with the reason instead of a lost connection.
  std::string ignored;
  const auto tell = Clock::now() + std::chrono::seconds(1);
  for (int& fd : peer_fds_)
    if (fd >= 0) write_frame(fd, 'E', full, tell, &ignored), net::close_fd(fd);
  net::close_fd(root_fd_);
  throw_comm_error(full);
}

std::vector<std::string> Group::allgather(const std::string& mine, const std::string& what) {
  if (!broken_.empty()) throw_comm_error(rt::str(broken_, " (the group is broken; ", what, " not attempted)"));
  std::vector<std::string> all(size());
  all[rank_] = mine;
  if (size() == 1) return all;
  const auto deadline = Clock::now() + timeout_;
  std::string io_error;
  // A control frame holds at most kMaxFrame bytes; what does not fit is an error on every rank (the
  // root tells the others), not a frame the receiver drops as "not a deepep peer" -- which showed
  // as lost connections on both sides.
  const auto too_large = [&](size_t bytes) {
    return rt::str(what, " of ", bytes, " bytes: the control plane carries at most ", kMaxFrame,
                   " bytes per step (all ranks' parts together)");
  };
  if (rank_ != 0) {
    if (mine.size() > kMaxFrame) {
      const std::string full = rt::str("deepep group (rank ", rank_, " of ", size(), "): ", too_large(mine.size()));
      write_frame(root_fd_, 'E', full, deadline, &io_error);  // the root fails with it and tells everyone
    } else if (!write_frame(root_fd_, 'D', mine, deadline, &io_error))
      fail(rt::str("lost rank 0 during ", what, " (", io_error, ")"));
    char type = 0;
    std::string payload;
    const auto st = read_frame(root_fd_, &type, &payload, deadline + std::chrono::seconds(2), &io_error);
    if (st == net::IoStatus::Timeout) fail(rt::str(what, " timed out after ", timeout_.count(), " ms"));
    if (st != net::IoStatus::Ok) fail(rt::str("lost rank 0 during ", what, " (connection closed: did it die?)"));
    if (type == 'E') {
      broken_ = payload;
      net::close_fd(root_fd_);
      throw_comm_error(payload);
    }
    wire::Reader rd(payload);
    for (int r = 0; r < size(); ++r) all[r] = rd.get_str();
    return all;
  }
  // Root: collect from whoever is ready first, so a dead rank is noticed even while others are slow.
  std::vector<bool> have(size(), false);
  have[0] = true;
  int pending = size() - 1;
  while (pending > 0) {
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 1; r < size(); ++r)
      if (!have[r]) pfds.push_back({peer_fds_[r], POLLIN, 0}), who.push_back(r);
    const int rc = poll(pfds.data(), pfds.size(), net::remaining_ms(deadline));
    if (rc < 0 && errno != EINTR) fail(rt::str("poll failed during ", what, ": ", std::strerror(errno)));
    if (rc <= 0) {
      if (Clock::now() < deadline) continue;
      std::vector<int> late;
      for (int r : who) late.push_back(r);
      fail(rt::str(what, " timed out after ", timeout_.count(), " ms waiting for rank", late.size() > 1 ? "s " : " ",
                   list_ranks(late)));
    }
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int r = who[i];
      char type = 0;
      std::string payload;
      const auto st = read_frame(peer_fds_[r], &type, &payload, deadline, &io_error);
      if (st != net::IoStatus::Ok)
        fail(rt::str("lost rank ", r, " (pid ", peers_[r].pid, ") during ", what, " (",
                     st == net::IoStatus::Closed ? "connection closed: did it die?" : io_error, ")"));
      if (type == 'E') fail(payload);
      all[r] = std::move(payload);
      have[r] = true;
      --pending;
    }
  }
  wire::Writer w;
  for (const std::string& s : all) w.put_str(s);
  if (w.str().size() > kMaxFrame) fail(too_large(w.str().size()));
  for (int r = 1; r < size(); ++r)
    if (!write_frame(peer_fds_[r], 'D', w.str(), deadline, &io_error))
      fail(rt::str("lost rank ", r, " during ", what, " (", io_error, ")"));
  return all;
}

void Group::barrier(const std::string& what) { allgather(std::string(), what); }

}  // namespace deepep
