#include "rt/env.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "test_util.h"

namespace {

using rt::ErrorKind;
using rt_test::expect_error;
using rt_test::ScopedEnv;

TEST(Env, StringFallsBackWhenUnsetOrEmpty) {
  {
    ScopedEnv e("TL_TEST_KNOB", std::nullopt);
    EXPECT_EQ(rt::env_string("TL_TEST_KNOB", "dflt"), "dflt");
  }
  {
    ScopedEnv e("TL_TEST_KNOB", "");
    EXPECT_EQ(rt::env_string("TL_TEST_KNOB", "dflt"), "dflt");
  }
  ScopedEnv e("TL_TEST_KNOB", "value with spaces");
  EXPECT_EQ(rt::env_string("TL_TEST_KNOB", "dflt"), "value with spaces");
}

TEST(Env, WordsSplitOnWhitespace) {
  {
    ScopedEnv e("TL_TEST_KNOB", std::nullopt);
    EXPECT_TRUE(rt::env_words("TL_TEST_KNOB").empty());
  }
  ScopedEnv e("TL_TEST_KNOB", "  -DA=1\t-lineinfo\n  -DB ");
  EXPECT_EQ(rt::env_words("TL_TEST_KNOB"), (std::vector<std::string>{"-DA=1", "-lineinfo", "-DB"}));
}

TEST(Env, Int) {
  {
    ScopedEnv e("TL_TEST_KNOB", std::nullopt);
    EXPECT_EQ(rt::env_int("TL_TEST_KNOB", 17), 17);
  }
  {
    ScopedEnv e("TL_TEST_KNOB", "-42");
    EXPECT_EQ(rt::env_int("TL_TEST_KNOB", 17), -42);
  }
  {
    ScopedEnv e("TL_TEST_KNOB", "9223372036854775807");
    EXPECT_EQ(rt::env_int("TL_TEST_KNOB", 0), INT64_MAX);
  }
  for (const char* bad : {"12x", "x12", " 5", "1.5", "0x10", "+"}) {
    ScopedEnv e("TL_TEST_KNOB", bad);
    expect_error([] { rt::env_int("TL_TEST_KNOB", 0); }, ErrorKind::User,
                 std::string("TL_TEST_KNOB='") + bad + "' is not a decimal integer");
  }
  ScopedEnv e("TL_TEST_KNOB", "99999999999999999999");
  expect_error([] { rt::env_int("TL_TEST_KNOB", 0); }, ErrorKind::User, "TL_TEST_KNOB", "out of the 64-bit");
}

TEST(Env, Flag) {
  {
    ScopedEnv e("TL_TEST_KNOB", std::nullopt);
    EXPECT_FALSE(rt::env_flag("TL_TEST_KNOB"));
  }
  for (const char* yes : {"1", "true", "TRUE", "yes", "On"}) {
    ScopedEnv e("TL_TEST_KNOB", yes);
    EXPECT_TRUE(rt::env_flag("TL_TEST_KNOB")) << yes;
  }
  for (const char* no : {"0", "false", "No", "off"}) {
    ScopedEnv e("TL_TEST_KNOB", no);
    EXPECT_FALSE(rt::env_flag("TL_TEST_KNOB")) << no;
  }
  ScopedEnv e("TL_TEST_KNOB", "ture");
  expect_error([] { rt::env_flag("TL_TEST_KNOB"); }, ErrorKind::User, "TL_TEST_KNOB='ture' is not a flag",
               "1/true/yes/on");
}

}  // namespace
