#include "testutil/environment.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "rt/error.h"

namespace testutil {

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name)) old_ = old;
  if (value)
    ::setenv(name, value, 1);
  else
    ::unsetenv(name);
}

ScopedEnv::~ScopedEnv() {
  if (old_)
    ::setenv(name_.c_str(), old_->c_str(), 1);
  else
    ::unsetenv(name_.c_str());
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "tl-test.XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  RT_USER_CHECK(::mkdtemp(buf.data()) != nullptr, "cannot create a scratch directory from ", tmpl);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string source_path(const std::string& relative) {
  const char* env = std::getenv("TL_SOURCE_DIR");
  return std::string(env && *env ? env : TL_SOURCE_DIR) + "/" + relative;
}

std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "?";
  char buf[128] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  std::string s(buf, n);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::pair<int, std::string>> run_test_in_shards(const std::string& test, const char* shard_var, unsigned procs, const std::string& dir) {
  // The children's gtest must not write the parent's report or skip the test as another shard.
  const ScopedEnv no_output("GTEST_OUTPUT", std::nullopt), no_shards("GTEST_TOTAL_SHARDS", std::nullopt), no_index("GTEST_SHARD_INDEX", std::nullopt);
  const std::string exe = "/proc/self/exe", filter = "--gtest_filter=" + test;
  std::vector<pid_t> pids;
  for (unsigned i = 0; i < procs; ++i) {
    const ScopedEnv shard(shard_var, rt::str(i, "/", procs));
    const std::string log = rt::str(dir, "/shard-", i, ".log");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>(filter.c_str()), nullptr};
    pid_t pid = 0;
    const int err = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    pids.push_back(err == 0 ? pid : -1);
  }
  std::vector<std::pair<int, std::string>> out;
  for (unsigned i = 0; i < procs; ++i) {
    int status = -1;
    if (pids[i] > 0 && waitpid(pids[i], &status, 0) != pids[i]) status = -1;
    std::ifstream in(rt::str(dir, "/shard-", i, ".log"));
    std::stringstream text;
    text << in.rdbuf();
    out.emplace_back(pids[i] > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str());
  }
  return out;
}

}  // namespace testutil
