// Errors of deepep. Bad input (shapes, dtypes, sizes, indices, options) is an rt::Error of kind
// User, raised on every rank of the group when it is detected collectively. Failures of the group
// itself (a rank that died, never arrived, or timed out; a communicator aborted by another rank)
// are CommError, also of kind User: the message names the rank, what it was doing and the bound.
#pragma once

#include <string>

#include "rt/error.h"

namespace deepep {

class CommError : public rt::Error {
 public:
  explicit CommError(const std::string& message) : rt::Error(rt::ErrorKind::User, message) {}
};

[[noreturn]] void throw_comm_error(const std::string& message);

}  // namespace deepep
