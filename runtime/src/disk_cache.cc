#include "rt/disk_cache.h"

#include <unistd.h>

#include <filesystem>

#include "rt/env.h"
#include "rt/error.h"
#include "rt/file.h"

namespace fs = std::filesystem;

namespace rt {
namespace {

std::string default_root() {
  // TL_CACHE_DIR: where JIT products are cached (tests point it into the build tree).
  std::string dir = env_string("TL_CACHE_DIR", "");
  if (!dir.empty()) return dir;
  // XDG_CACHE_HOME, HOME: the usual per-user cache location when TL_CACHE_DIR is not set.
  dir = env_string("XDG_CACHE_HOME", "");
  if (!dir.empty()) return dir + "/tilelang";
  dir = env_string("HOME", "");
  if (!dir.empty()) return dir + "/.cache/tilelang";
  std::error_code ec;
  const fs::path temp = fs::temp_directory_path(ec);
  return (ec ? fs::path("/tmp") : temp).string() + "/tilelang-cache-" + std::to_string(::getuid());
}

}  // namespace

DiskCache::DiskCache() : DiskCache(default_root()) {}

DiskCache::DiskCache(std::string root) : root_(std::move(root)) {}

std::string DiskCache::path_for(std::string_view key, std::string_view suffix) const {
  RT_ICHECK(key.size() >= 2 && key.find_first_not_of("0123456789abcdef") == std::string_view::npos, "cache key '", key,
            "' is not a lowercase hex hash");
  return str(root_, "/", key.substr(0, 2), "/", key, suffix);
}

bool DiskCache::contains(std::string_view key, std::string_view suffix) const {
  std::error_code ec;
  return fs::is_regular_file(path_for(key, suffix), ec);
}

void DiskCache::write_atomic(const std::string& path, std::string_view bytes) const {
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);
  RT_USER_CHECK(!ec, dir.string(), ": error: cannot create the cache directory: ", ec.message());
  write_file_atomic(path, {bytes});
}

std::optional<std::string> DiskCache::read(const std::string& path) const { return read_file(path); }

}  // namespace rt
