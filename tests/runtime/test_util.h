// Helpers shared by the runtime tests: scoped environment variables and fresh temp directories.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "rt/error.h"
#include "testutil/environment.h"

namespace rt_test {

using testutil::ScopedEnv;

// A new empty directory for the running test, <tmp>/rt-test-<suite>.<test>-<pid>-<n>, removed at the end
// of the scope. Unique per instance, so --gtest_repeat never sees a previous run's paths.
class TempDir {
 public:
  TempDir() {
    static int instances = 0;
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("rt-test-" + std::string(test->test_suite_name()) + "." + test->name() + "-" + std::to_string(::getpid()) +
             "-" + std::to_string(instances++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs `f`, expecting an rt::Error of `kind` whose message contains every one of `parts`.
template <class F, class... Parts>
void expect_error(F&& f, rt::ErrorKind kind, const Parts&... parts) {
  try {
    f();
    ADD_FAILURE() << "expected an rt::Error";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    const std::string message = e.what();
    auto expect_part = [&](const std::string& part) {
      EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in: " << message;
    };
    (expect_part(parts), ...);
  }
}

}  // namespace rt_test
