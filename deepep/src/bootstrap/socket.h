// Blocking TCP helpers with deadlines for the rendezvous (poll before every read and write).
#pragma once

#include <chrono>
#include <string>

namespace deepep::net {

using Clock = std::chrono::steady_clock;

// Milliseconds left until `deadline` (0 when passed), capped for poll().
int remaining_ms(Clock::time_point deadline);

// A socket listening on address:port (port 0: ephemeral); user error when it cannot.
int listen_on(const std::string& address, int port, int backlog = 256);
// Whether `address` (IPv4 address or host name) resolves to an IPv4 address here.
bool resolves(const std::string& address);
int local_port(int fd);
// This host's IPv4 address on the route toward `address` (the interface a connection there would
// leave by; nothing is sent). "" with *error set when there is no route.
std::string local_address_toward(const std::string& address, std::string* error);
// Connects, retrying refused/unreachable attempts with backoff until `deadline`. Returns -1 and
// sets *error when the deadline passes.
int connect_until(const std::string& address, int port, Clock::time_point deadline, std::string* error);
// Accepts one connection or returns -1 at the deadline.
int accept_until(int listen_fd, Clock::time_point deadline);

enum class IoStatus { Ok, Timeout, Closed, Error };
IoStatus write_all(int fd, const void* data, size_t bytes, Clock::time_point deadline, std::string* error);
IoStatus read_all(int fd, void* data, size_t bytes, Clock::time_point deadline, std::string* error);
void close_fd(int& fd);

}  // namespace deepep::net
