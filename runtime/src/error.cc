#include "rt/error.h"

#include <cstring>

namespace rt {

std::string first_lines(const std::string& text, int max_lines, const std::string& cut_note) {
  size_t pos = 0;
  for (int i = 0; i < max_lines; ++i) {
    pos = text.find('\n', pos);
    if (pos == std::string::npos) return text;
    ++pos;
  }
  return text.substr(0, pos) + cut_note + "\n";
}

void throw_user_error(const std::string& message) { throw Error(ErrorKind::User, message); }

void throw_internal_error(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw Error(ErrorKind::Internal, str("internal error at ", base ? base + 1 : file, ":", line, ": ", message));
}

}  // namespace rt
