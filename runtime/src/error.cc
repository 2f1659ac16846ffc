#include "rt/error.h"

#include <cstring>

namespace rt {

void throw_user_error(const std::string& message) { throw Error(ErrorKind::User, message); }

void throw_internal_error(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw Error(ErrorKind::Internal, str("internal error at ", base ? base + 1 : file, ":", line, ": ", message));
}

}  // namespace rt
