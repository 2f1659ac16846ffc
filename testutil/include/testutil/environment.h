// Where a test, demo or benchmark runs: the repository's files, and how busy the machine is.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace testutil {

// Sets an environment variable for the scope (forked processes inherit it), restoring it after.
// A null value or std::nullopt unsets it for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
  ScopedEnv(const char* name, std::nullopt_t) : ScopedEnv(name, static_cast<const char*>(nullptr)) {}
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A new empty scratch directory (<tmp>/tl-test.XXXXXX, unique per instance), removed with its files
// at the end of the scope.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A file of the repository, `relative` to its root: the TL_SOURCE_DIR environment variable when set
// (a binary that travelled to another machine, as scripts/gpu_check.sh runs them), else the
// checkout it was built from.
std::string source_path(const std::string& relative);

// The first line of /proc/loadavg, "?" where there is none: CPU benchmarks print it beside their
// timings, since other work on the machine skews them.
std::string load_average();

// Runs this test binary's gtest `test` ("Suite.Name") alone in `procs` child processes at once,
// child i with the environment variable `shard_var` set to "i/procs" (the test reads it and takes
// its i-th share of the work), its output in dir/shard-i.log; each child's exit status (-1 when it
// could not be started or did not exit) and output. For tests of many NVRTC compiles: NVRTC runs
// one compile at a time in a process, so threads gain nothing.
std::vector<std::pair<int, std::string>> run_test_in_shards(const std::string& test, const char* shard_var, unsigned procs, const std::string& dir);

}  // namespace testutil
