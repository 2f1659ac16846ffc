#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "deepep/health.h"
#include "rt/env.h"
#include "rt/error.h"

namespace deepep {
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

double parse_double(const std::string& key, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v.c_str(), &end);
  RT_USER_CHECK(errno == 0 && end && *end == '\0' && !v.empty(), "deepep faults: ", key, "='", v, "' is not a number");
  return d;
}

int64_t parse_int(const std::string& key, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const long long d = std::strtoll(v.c_str(), &end, 10);
  RT_USER_CHECK(errno == 0 && end && *end == '\0' && !v.empty(), "deepep faults: ", key, "='", v,
                "' is not an integer");
  return d;
}

// The int fields (ranks, operation numbers): a value beyond int is an error, not truncated (a
// kill_rank of 2^32 would otherwise kill rank 0).
int parse_int32(const std::string& key, const std::string& v) {
  const int64_t d = parse_int(key, v);
  RT_USER_CHECK(d >= INT32_MIN && d <= INT32_MAX, "deepep faults: ", key, "='", v, "' is out of range");
  return static_cast<int>(d);
}

}  // namespace

bool FaultConfig::applies(int src, int dst) const {
  if (links.empty()) return true;
  for (const auto& [s, d] : links)
    if (s == src && d == dst) return true;
  return false;
}

FaultConfig FaultConfig::parse(std::string_view text) {
  FaultConfig f;
  std::string s(text);
  std::stringstream items(s);
  std::string item;
  while (std::getline(items, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    RT_USER_CHECK(eq != std::string::npos, "deepep faults: '", item, "' is not key=value (in '", text, "')");
    const std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    if (key == "drop") {
      f.drop = parse_double(key, value);
    } else if (key == "corrupt") {
      f.corrupt = parse_double(key, value);
    } else if (key == "delay_us") {
      f.delay_us = parse_int(key, value);
    } else if (key == "kill_rank") {
      f.kill_rank = parse_int32(key, value);
    } else if (key == "kill_at_op") {
      f.kill_at_op = parse_int32(key, value);
    } else if (key == "kill_mid_op") {
      const int64_t v = parse_int(key, value);
      RT_USER_CHECK(v == 0 || v == 1, "deepep faults: kill_mid_op=", value, " must be 0 or 1");
      f.kill_mid_op = v == 1;
    } else if (key == "seed") {
      f.seed = static_cast<uint64_t>(parse_int(key, value));
    } else if (key == "links") {
      std::stringstream ls(value);
      std::string link;
      while (std::getline(ls, link, ';')) {
        link = trim(link);
        if (link.empty()) continue;
        const size_t gt = link.find('>');
        RT_USER_CHECK(gt != std::string::npos, "deepep faults: link '", link, "' is not src>dst");
        f.links.emplace_back(parse_int32("links", trim(link.substr(0, gt))),
                             parse_int32("links", trim(link.substr(gt + 1))));
      }
    } else {
      rt::throw_user_error(rt::str("deepep faults: unknown key '", key,
                                   "' (known: drop, corrupt, delay_us, links, kill_rank, kill_at_op, kill_mid_op, seed)"));
    }
  }
  const std::string err = f.check();
  RT_USER_CHECK(err.empty(), err);
  return f;
}

std::string FaultConfig::check(int num_ranks) const {
  // Written as negations so that NaN fails them.
  if (!(drop >= 0 && drop < 1)) return rt::str("deepep faults: drop=", drop, " must be in [0, 1)");
  if (!(corrupt >= 0 && corrupt < 1)) return rt::str("deepep faults: corrupt=", corrupt, " must be in [0, 1)");
  if (!(drop + corrupt < 0.95)) return "deepep faults: drop + corrupt must stay below 0.95";
  if (delay_us < 0 || delay_us > 10'000'000)
    return rt::str("deepep faults: delay_us=", delay_us, " must be in [0, 10 s]");
  if (kill_at_op < 0) return rt::str("deepep faults: kill_at_op=", kill_at_op, " must be at least 0 (0: in setup)");
  if (kill_rank < -1) return rt::str("deepep faults: kill_rank=", kill_rank, " must be a rank, or -1 for none");
  if (num_ranks > 0 && kill_rank >= num_ranks)
    return rt::str("deepep faults: kill_rank=", kill_rank, " is not a rank of this group of ", num_ranks);
  for (const auto& [src, dst] : links)
    if (src < 0 || dst < 0 || (num_ranks > 0 && (src >= num_ranks || dst >= num_ranks)))
      return rt::str("deepep faults: link ", src, ">", dst, " is not between ranks of this group",
                     num_ranks > 0 ? rt::str(" of ", num_ranks) : std::string());
  return "";
}

FaultConfig FaultConfig::from_env(const FaultConfig& fallback) {
  const std::string text = rt::env_string("DEEPEP_FAULTS", "");
  return text.empty() ? fallback : parse(text);
}

std::string FaultConfig::to_string() const {
  std::ostringstream os;
  os << "drop=" << drop << ",corrupt=" << corrupt << ",delay_us=" << delay_us;
  if (!links.empty()) {
    os << ",links=";
    for (size_t i = 0; i < links.size(); ++i) os << (i ? ";" : "") << links[i].first << ">" << links[i].second;
  }
  if (kill_rank >= 0) os << ",kill_rank=" << kill_rank << ",kill_at_op=" << kill_at_op << (kill_mid_op ? ",kill_mid_op=1" : "");
  os << ",seed=" << seed;
  return os.str();
}

}  // namespace deepep
