#include "bootstrap/setup_check.h"

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

}  // namespace deepep
