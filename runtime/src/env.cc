#include "rt/env.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <sstream>

#include "rt/error.h"

namespace rt {
namespace {

const char* lookup(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

}  // namespace

std::string env_string(const char* name, const std::string& fallback) {
  const char* value = lookup(name);
  return value ? std::string(value) : fallback;
}

std::vector<std::string> env_words(const char* name) {
  std::istringstream in(env_string(name, ""));
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* value = lookup(name);
  if (!value) return fallback;
  const std::string_view text(value);
  int64_t result = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), result);
  RT_USER_CHECK(ec != std::errc::result_out_of_range, "environment variable ", name, "='", text,
                "' is out of the 64-bit integer range");
  RT_USER_CHECK(ec == std::errc() && end == text.data() + text.size(), "environment variable ", name, "='", text,
                "' is not a decimal integer");
  return result;
}

bool env_flag(const char* name) {
  const char* value = lookup(name);
  if (!value) return false;
  std::string lower(value);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  throw_user_error(
      str("environment variable ", name, "='", value, "' is not a flag; use 1/true/yes/on or 0/false/no/off"));
}

}  // namespace rt
