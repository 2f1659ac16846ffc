// The collective check of a setup step (creating a communicator, a Buffer, a data plane): every
// rank's local error ("" when fine) and a payload go round the group, and the first error in rank
// order is raised on every rank -- the same message everywhere, so no rank goes on while another
// gave up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepep {

class Group;

// Raises "<prefix>rank r: <error>" for the first rank r with an error: a user error, or a CommError
// with `comm_error`. `step` names the exchange in the group's own errors. Returns every rank's payload.
std::vector<std::string> gather_setup(Group& group, const std::string& error, const std::string& payload,
                                      const std::string& prefix, const std::string& step, bool comm_error = false);

namespace detail {
// This host's physical memory in bytes (INT64_MAX when the system does not say): the bound of
// memory options that are mapped populated (rings), checked before they reach mmap.
int64_t host_memory_bytes();
}  // namespace detail

}  // namespace deepep
