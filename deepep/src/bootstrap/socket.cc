#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "rt/error.h"

namespace deepep::net {
namespace {

bool resolve(const std::string& address, int port, sockaddr_in* out, std::string* error) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  if (address.empty() || address == "0.0.0.0") {
    out->sin_addr.s_addr = htonl(INADDR_ANY);
    return true;
  }
  if (inet_pton(AF_INET, address.c_str(), &out->sin_addr) == 1) return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(address.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    *error = rt::str("cannot resolve '", address, "': ", gai_strerror(rc));
    return false;
  }
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left, 1000));  // wake up at least every second
}

int listen_on(const std::string& address, int port, int backlog) {
  sockaddr_in addr{};
  std::string error;
  RT_USER_CHECK(resolve(address, port, &addr, &error), "deepep rendezvous: ", error);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  RT_USER_CHECK(fd >= 0, "deepep rendezvous: socket(): ", std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, backlog) != 0) {
    const int e = errno;
    ::close(fd);
    rt::throw_user_error(rt::str("deepep rendezvous: cannot listen on ", address, ":", port, ": ", std::strerror(e)));
  }
  return fd;
}

bool resolves(const std::string& address) {
  sockaddr_in addr{};
  std::string error;
  return resolve(address, 0, &addr, &error);
}

int local_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return ntohs(addr.sin_port);
}

std::string local_address_toward(const std::string& address, std::string* error) {
  sockaddr_in addr{};
  if (!resolve(address, 9, &addr, error)) return "";
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = rt::str("socket(): ", std::strerror(errno));
    return "";
  }
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  char text[INET_ADDRSTRLEN] = {};
  // Connecting a datagram socket only picks the route and the source address.
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
                  inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr;
  if (!ok) *error = rt::str("no route toward ", address, ": ", std::strerror(errno));
  ::close(fd);
  return ok ? std::string(text) : std::string();
}

int connect_until(const std::string& address, int port, Clock::time_point deadline, std::string* error) {
  sockaddr_in addr{};
  if (!resolve(address, port, &addr, error)) return -1;
  auto backoff = std::chrono::milliseconds(5);
  while (true) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      *error = rt::str("socket(): ", std::strerror(errno));
      return -1;
    }
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, std::max(1, remaining_ms(deadline)));
      int soerr = 0;
      socklen_t len = sizeof(soerr);
      if (rc == 1) {
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
        rc = soerr == 0 ? 0 : -1;
        errno = soerr;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      const int flags = fcntl(fd, F_GETFL);
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      set_nodelay(fd);
      return fd;
    }
    *error = std::strerror(errno);
    ::close(fd);
    if (Clock::now() + backoff >= deadline) return -1;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

int accept_until(int listen_fd, Clock::time_point deadline) {
  while (true) {
    pollfd p{listen_fd, POLLIN, 0};
    const int ms = remaining_ms(deadline);
    if (ms == 0 && Clock::now() >= deadline) return -1;
    const int rc = poll(&p, 1, ms);
    if (rc < 0 && errno != EINTR) return -1;
    if (rc <= 0) continue;
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      return fd;
    }
    if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) return -1;
  }
}

namespace {

// Waits until fd is ready for `events`: Ok, or why it is not (Timeout at the deadline, Error).
IoStatus wait_ready(int fd, short events, Clock::time_point deadline, std::string* error) {
  for (;;) {
    pollfd pf{fd, events, 0};
    const int rc = poll(&pf, 1, remaining_ms(deadline));
    if (rc > 0) return IoStatus::Ok;
    if (rc < 0 && errno != EINTR) {
      *error = std::strerror(errno);
      return IoStatus::Error;
    }
    if (rc == 0 && Clock::now() >= deadline) return IoStatus::Timeout;
  }
}

}  // namespace

IoStatus write_all(int fd, const void* data, size_t bytes, Clock::time_point deadline, std::string* error) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    if (IoStatus s = wait_ready(fd, POLLOUT, deadline, error); s != IoStatus::Ok) return s;
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      *error = std::strerror(errno);
      return errno == EPIPE || errno == ECONNRESET ? IoStatus::Closed : IoStatus::Error;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return IoStatus::Ok;
}

IoStatus read_all(int fd, void* data, size_t bytes, Clock::time_point deadline, std::string* error) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    if (IoStatus s = wait_ready(fd, POLLIN, deadline, error); s != IoStatus::Ok) return s;
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n == 0) return IoStatus::Closed;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      *error = std::strerror(errno);
      return errno == ECONNRESET ? IoStatus::Closed : IoStatus::Error;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return IoStatus::Ok;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace deepep::net
