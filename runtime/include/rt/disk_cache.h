// A content-addressed directory of build products (JIT binaries, sources, headers). Entries are
// written once by atomic rename, so concurrent processes may fill the same entry safely: the last
// rename wins and every reader sees a complete file.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rt {

class DiskCache {
 public:
  // Rooted at TL_CACHE_DIR, else $XDG_CACHE_HOME/tilelang, else $HOME/.cache/tilelang, else a
  // per-user directory under the system temp dir.
  DiskCache();
  explicit DiskCache(std::string root);

  const std::string& root() const { return root_; }
  // <root>/<first two hex digits of key>/<key><suffix>; `key` is a content hash (lowercase hex).
  std::string path_for(std::string_view key, std::string_view suffix) const;
  bool contains(std::string_view key, std::string_view suffix) const;
  // Creates the parent directories, then writes through a temp file and a rename.
  void write_atomic(const std::string& path, std::string_view bytes) const;
  std::optional<std::string> read(const std::string& path) const;

 private:
  std::string root_;
};

}  // namespace rt
