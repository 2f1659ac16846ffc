// The shm transport: processes of one host through one POSIX shared-memory segment (shm_open +
// mmap) holding, for every ordered pair of ranks, a ring of fixed-size frame slots, plus the
// control words (doorbells for futex waits, counters, acknowledgements, the board, link counters).
#pragma once

#include <memory>
#include <string>

#include "deepep/transport.h"

namespace deepep {

class Group;

// The registry entry's parts.
std::string shm_unavailable(const Group& group);
std::unique_ptr<Transport> create_shm_transport(Group& group, const TransportConfig& config);

}  // namespace deepep
