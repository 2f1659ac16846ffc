// The running gtest test split over child processes of this binary (testutil::run_test_in_shards):
// for tests of many NVRTC compiles, which run one at a time in a process. Header-only: it needs
// GoogleTest, which tl_testutil (also linked by the demo and the benchmarks) does not.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "rt/error.h"
#include "testutil/environment.h"

namespace testutil {

// This process's share of the test's work items: i = index, index + count, ... `done`: the parent
// ran the shares in one child per core (up to 8), each child that failed failing this test with its
// output (printed anyway when `verbose_var` is set), and has nothing left to do.
struct TestShard {
  unsigned index = 0, count = 1;
  bool done = false;
};

// In a child (`shard_var` set, "i/n"): share i of n. In the parent on one core: all the work. In the
// parent on several: runs the children (their logs in `dir`) and returns `done`.
inline TestShard shard_this_test(const char* shard_var, const std::string& dir, const char* verbose_var) {
  TestShard s;
  if (const char* given = std::getenv(shard_var)) {
    if (std::sscanf(given, "%u/%u", &s.index, &s.count) != 2 || s.index >= s.count) {
      ADD_FAILURE() << shard_var << "='" << given << "' is not i/n with i < n";
      s.done = true;
    }
    return s;
  }
  const unsigned procs = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  if (procs == 1) return s;
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  const auto results = run_test_in_shards(rt::str(info->test_suite_name(), ".", info->name()), shard_var, procs, dir);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].first, 0) << "shard " << i << "/" << procs << ":\n" << results[i].second;
    if (std::getenv(verbose_var)) std::printf("%s", results[i].second.c_str());
  }
  s.count = procs;
  s.done = true;
  return s;
}

}  // namespace testutil
