#include "rt/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "rt/error.h"

namespace rt {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(contents).str();
}

std::string unique_temp_path(const std::string& path) {
  // The pid separates live processes on one host, the counter threads, and the random part hosts
  // that share a file system.
  static const uint64_t process_random = std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  return str(path, ".tmp.", ::getpid(), ".", counter++, ".", std::hex, process_random);
}

namespace {

// Writes every part to `fd`: 0, or the errno of the write that failed.
int write_parts(int fd, const std::vector<std::string_view>& parts) {
  for (std::string_view part : parts) {
    while (!part.empty()) {
      const ssize_t n = ::write(fd, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      part.remove_prefix(static_cast<size_t>(n));
    }
  }
  return 0;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts) {
  // A device, pipe or socket (--out /dev/null, /dev/stdout) is written in place: a rename would
  // replace the node itself, and a process run as root may do that in /dev.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    RT_USER_CHECK(fd >= 0, path, ": error: cannot open for writing: ", std::strerror(errno));
    const int err = write_parts(fd, parts);
    const bool closed = ::close(fd) == 0;
    if (err != 0 || !closed) throw_user_error(str(path, ": error: cannot write: ", std::strerror(err != 0 ? err : errno)));
    return;
  }
  const std::string temp = unique_temp_path(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  RT_USER_CHECK(fd >= 0, path, ": error: cannot create ", temp, ": ", std::strerror(errno));
  if (const int err = write_parts(fd, parts); err != 0) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw_user_error(str(path, ": error: cannot write: ", std::strerror(err)));
  }
  const bool closed = ::close(fd) == 0;
  const int close_err = errno;
  if (!closed || std::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = closed ? errno : close_err;
    ::unlink(temp.c_str());
    throw_user_error(str(path, ": error: cannot write: ", std::strerror(err)));
  }
}

}  // namespace rt
