// Helpers shared by the runtime tests: scoped environment variables and fresh temp directories.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "rt/error.h"
#include "testutil/environment.h"

namespace rt_test {

using testutil::ScopedEnv;

using testutil::TempDir;

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
