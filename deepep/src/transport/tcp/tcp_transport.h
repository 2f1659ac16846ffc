// The tcp transport: ranks on any hosts through one TCP connection per pair of ranks (POSIX
// sockets, TCP_NODELAY). Frames go on the connection as they are published; everything else a
// peer must see (acknowledgements, consumed counts, counters, the board, link counters) lives in
// local mirrors that a receive thread updates from state messages, which a rank sends when it
// notifies a peer. Protocol and limits: docs/deepep.md, "TCP (tcp transport)".
#pragma once

#include <memory>

#include "deepep/transport.h"

namespace deepep {

class Group;

// The registry entry's part (the tcp transport serves any group).
std::unique_ptr<Transport> create_tcp_transport(Group& group, const TransportConfig& config);

}  // namespace deepep
