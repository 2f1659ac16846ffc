#include <mutex>

#include "deepep/group.h"
#include "deepep/transport.h"
#include "rt/error.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace deepep {
namespace {

std::vector<TransportEntry>& table() {
  static std::vector<TransportEntry> entries;
  return entries;
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

// Built-in transports are listed here, not by static initializers (a static library drops
// unreferenced objects, and with them their initializers).
void register_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    table().push_back({"shm", "processes of one host through POSIX shared-memory rings", shm_unavailable,
                       create_shm_transport});
    // After shm: a group on one host keeps shared memory; a group spanning hosts gets tcp.
    table().push_back({"tcp", "processes of any hosts through one TCP connection per pair of ranks",
                       [](const Group&) { return std::string(); }, create_tcp_transport});
    // cuda_ipc and nccl move CUDA tensors beside the frame transport rather than as one (data planes).
    table().push_back({"cuda_ipc", "GPUs of one host through CUDA IPC buffers",
                       [](const Group&) {
                         return std::string("it carries CUDA tensors beside a host transport, not frames: give the "
                                            "communicator a device with CommOptions::cuda_device (docs/deepep.md)");
                       },
                       nullptr});
    table().push_back({"nccl", "GPUs through NCCL (loaded at run time): the collectives, dispatch and combine of CUDA tensors",
                       [](const Group&) {
                         return std::string("it carries CUDA tensors beside a host transport, not frames: give the "
                                            "communicator a device with CommOptions::cuda_device and "
                                            "CommOptions::device_transport = \"nccl\" (docs/deepep.md)");
                       },
                       nullptr});
  });
}

}  // namespace

void register_transport(TransportEntry entry) {
  register_builtins();
  std::lock_guard<std::mutex> lock(table_mutex());
  for (TransportEntry& e : table())
    if (e.name == entry.name) {
      e = std::move(entry);
      return;
    }
  table().push_back(std::move(entry));
}

const std::vector<TransportEntry>& transports() {
  register_builtins();
  return table();
}

const TransportEntry& find_transport(const std::string& name, const Group& group) {
  std::string reasons;
  for (const TransportEntry& e : transports()) {
    if (!name.empty() && e.name != name) continue;
    const std::string why = e.create ? e.unavailable(group) : e.unavailable(group);
    if (why.empty() && e.create) return e;
    reasons += rt::str("\n  ", e.name, ": ", why.empty() ? "cannot be created" : why);
    if (!name.empty()) break;
  }
  if (!name.empty() && reasons.empty()) {
    std::string known;
    for (const TransportEntry& e : transports()) known += (known.empty() ? "" : ", ") + e.name;
    rt::throw_user_error(rt::str("deepep: unknown transport '", name, "' (known: ", known, ")"));
  }
  rt::throw_user_error(rt::str("deepep: no transport can serve this group of ", group.size(), " ranks on ",
                               group.num_nodes(), " host(s):", reasons));
}

}  // namespace deepep
