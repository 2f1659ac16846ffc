#include "rt/disk_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "rt/hash.h"
#include "test_util.h"

namespace {

using rt::DiskCache;
using rt_test::ScopedEnv;
using rt_test::TempDir;

TEST(DiskCache, RootFollowsTheEnvironment) {
  ScopedEnv cache("TL_CACHE_DIR", "/some/cache");
  EXPECT_EQ(DiskCache().root(), "/some/cache");
  ScopedEnv no_cache("TL_CACHE_DIR", std::nullopt);
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(DiskCache().root(), "/xdg/tilelang");
  ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(DiskCache().root(), "/home/someone/.cache/tilelang");
  ScopedEnv no_home("HOME", std::nullopt);
  const std::string fallback = DiskCache().root();
  EXPECT_EQ(fallback.rfind(std::filesystem::temp_directory_path().string(), 0), 0u) << fallback;
  EXPECT_NE(fallback.find("tilelang-cache-"), std::string::npos);
}

TEST(DiskCache, ShardsByTheFirstTwoHexDigits) {
  DiskCache cache("/root");
  const std::string key = rt::content_hash("kernel");
  EXPECT_EQ(cache.path_for(key, ".so"), "/root/" + key.substr(0, 2) + "/" + key + ".so");
  rt_test::expect_error([&] { cache.path_for("not-hex", ".so"); }, rt::ErrorKind::Internal, "not a lowercase hex");
}

TEST(DiskCache, WriteReadContains) {
  TempDir dir;
  DiskCache cache(dir.file("cache"));
  const std::string key = rt::content_hash("entry");
  EXPECT_FALSE(cache.contains(key, ".bin"));
  const std::string path = cache.path_for(key, ".bin");
  EXPECT_FALSE(cache.read(path).has_value());
  const std::string bytes("binary\0data\xff", 12);
  cache.write_atomic(path, bytes);  // creates <root>/<shard>/
  EXPECT_TRUE(cache.contains(key, ".bin"));
  EXPECT_FALSE(cache.contains(key, ".cc"));
  EXPECT_EQ(cache.read(path).value(), bytes);
  cache.write_atomic(path, "replaced");
  EXPECT_EQ(cache.read(path).value(), "replaced");
  // Only the entry remains: the temp files were renamed away.
  const auto shard = std::filesystem::path(path).parent_path();
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(shard), {}), 1);
}

TEST(DiskCache, ConcurrentWritersNeverExposeAPartialFile) {
  TempDir dir;
  DiskCache cache(dir.path());
  const std::string path = cache.path_for(rt::content_hash("contended"), ".so");
  // Each writer's content is large and uniform, so any torn or partial file is detected.
  auto content = [](int writer) { return std::string(1 << 20, static_cast<char>('a' + writer)); };
  cache.write_atomic(path, content(0));
  std::atomic<bool> done{false};
  std::atomic<int> bad_reads{0}, reads{0};
  std::thread reader([&] {
    while (!done) {
      const std::optional<std::string> got = cache.read(path);
      ++reads;
      if (!got || got->size() != (1u << 20) || got->find_first_not_of(got->front()) != std::string::npos) ++bad_reads;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w)
    writers.emplace_back([&, w] {
      for (int i = 0; i < 20; ++i) cache.write_atomic(path, content(w));
    });
  for (std::thread& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(bad_reads.load(), 0);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()), {}), 1);
}

TEST(DiskCache, WriteFailureIsAUserErrorNamingThePath) {
  TempDir dir;
  const std::string blocker = dir.file("file");
  DiskCache(dir.path()).write_atomic(blocker, "x");
  // The "directory" of the entry is a regular file.
  rt_test::expect_error([&] { DiskCache(blocker).write_atomic(blocker + "/ab/entry", "y"); }, rt::ErrorKind::User,
                        blocker + "/ab", "cannot create the cache directory");
}

}  // namespace
