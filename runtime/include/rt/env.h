// The one way to read environment knobs. Each knob is documented in a comment where it is read.
// An unset or empty variable means "use the fallback".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rt {

std::string env_string(const char* name, const std::string& fallback);
// The value's whitespace-separated words (none when unset), e.g. extra compiler flags.
std::vector<std::string> env_words(const char* name);
// A decimal integer; anything else is a user error naming the variable.
int64_t env_int(const char* name, int64_t fallback);
// True for 1/true/yes/on, false for 0/false/no/off (any case) or unset; anything else is a user error.
bool env_flag(const char* name);

}  // namespace rt
