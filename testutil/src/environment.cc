#include "testutil/environment.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

}  // namespace testutil
