// Whole-file reads and atomic writes. Atomic: readers (and other processes writing the same path)
// see either the old file or the complete new one, never a partial write. There is no fsync: this
// guards against concurrent access, not against power loss (a cache entry can always be rebuilt).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rt {

// The file's bytes, or nullopt when it cannot be opened or read.
std::optional<std::string> read_file(const std::string& path);

// Writes the concatenation of `parts` to a uniquely named temp file next to `path`, then renames it
// over `path`. The directory must exist. A device, pipe or socket at `path` (/dev/null) is written in
// place instead, without the atomicity. A failure is a user error naming the path.
void write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts);

// A path next to `path` that no other thread or process picks: "<path>.tmp.<pid>.<n>.<random>".
std::string unique_temp_path(const std::string& path);

}  // namespace rt
