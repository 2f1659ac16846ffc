#include "bootstrap/setup_check.h"

#include <unistd.h>

#include "bootstrap/wire.h"
#include "deepep/error.h"
#include "deepep/group.h"
#include "rt/error.h"

namespace deepep {

std::vector<std::string> gather_setup(Group& group, const std::string& error, const std::string& payload,
                                      const std::string& prefix, const std::string& step, bool comm_error) {
  wire::Writer w;
  w.put_str(error).put_str(payload);
  std::vector<std::string> payloads;
  for (const std::string& record : group.allgather(w.str(), step)) {
    wire::Reader rd(record);
    const std::string e = rd.get_str();
    if (!e.empty()) {
      const std::string message = rt::str(prefix, "rank ", payloads.size(), ": ", e);
      if (comm_error) throw_comm_error(message);
      rt::throw_user_error(message);
    }
    payloads.push_back(rd.get_str());
  }
  return payloads;
}

int64_t detail::host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : INT64_MAX;
}

}  // namespace deepep
