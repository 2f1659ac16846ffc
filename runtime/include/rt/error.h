// Errors shared by the whole stack. Two families (DESIGN "Errors"):
//  - user errors: bad input a user can act on (source, shapes, dtypes, files, missing GPU);
//  - internal errors: a bug of ours; the message says "internal" and where.
// Both are exceptions; tools catch them at the top, print the message and exit non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace rt {

enum class ErrorKind { User, Internal };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Concatenates anything printable with operator<< into one string.
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// The first max_lines lines of a tool's output for an error message, with a note when cut.
std::string first_lines(const std::string& text, int max_lines, const std::string& cut_note);

[[noreturn]] void throw_user_error(const std::string& message);
[[noreturn]] void throw_internal_error(const char* file, int line, const std::string& message);

}  // namespace rt

// RT_USER_CHECK(cond, parts...): a user error with the concatenated message when cond is false.
#define RT_USER_CHECK(cond, ...)                                    \
  do {                                                              \
    if (!(cond)) ::rt::throw_user_error(::rt::str(__VA_ARGS__));    \
  } while (0)

// RT_ICHECK(cond, parts...): an internal invariant; failing it is a bug of ours.
#define RT_ICHECK(cond, ...)                                                                  \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::rt::throw_internal_error(__FILE__, __LINE__, ::rt::str("check failed: " #cond ". ", ##__VA_ARGS__)); \
  } while (0)

#define RT_UNREACHABLE(...) ::rt::throw_internal_error(__FILE__, __LINE__, ::rt::str("unreachable. ", ##__VA_ARGS__))
