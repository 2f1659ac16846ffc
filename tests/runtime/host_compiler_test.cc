#include "rt/host_compiler.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "rt/file.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using rt::ErrorKind;
using rt::HostCompileOptions;
using rt_test::expect_error;
using rt_test::ScopedEnv;
using rt_test::TempDir;

// Every test compiles into its own fresh cache, so the first compile of a source always misses.
class HostCompiler : public ::testing::Test {
 protected:
  TempDir dir_;
  ScopedEnv cache_{"TL_CACHE_DIR", dir_.file("cache")};
  ScopedEnv no_flags_{"TL_CXXFLAGS", std::nullopt};
  ScopedEnv quiet_{"TL_JIT_VERBOSE", std::nullopt};
};

const std::vector<rt::EmbeddedFile> kHeaders = {
    {"tl_test/add.h",
     "#pragma once\n#include \"tl_test/offset.h\"\ninline int tl_add_impl(int a, int b) { return a + b + kOffset; }\n"},
    {"tl_test/offset.h", "#pragma once\nconstexpr int kOffset = 1000;\n"},
};
const char* kAddSource =
    "#include \"tl_test/add.h\"\nextern \"C\" int tl_add(int a, int b) { return tl_add_impl(a, b); }\n";

TEST_F(HostCompiler, CompilesLoadsAndCachesWithEmbeddedHeaders) {
  const int64_t before = rt::host_compile_count();
  auto lib = rt::compile_cxx(kAddSource, kHeaders);
  EXPECT_EQ(rt::host_compile_count(), before + 1);
  auto add = reinterpret_cast<int (*)(int, int)>(lib->symbol("tl_add"));
  EXPECT_EQ(add(2, 3), 1005);

  // The library, its source and the headers live in the cache.
  EXPECT_EQ(lib->path().rfind(dir_.file("cache") + "/", 0), 0u) << lib->path();
  EXPECT_TRUE(fs::is_regular_file(lib->path()));
  const std::string source_path = lib->path().substr(0, lib->path().size() - 3) + ".cc";
  EXPECT_EQ(rt::read_file(source_path).value_or(""), kAddSource);
  int headers_found = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir_.file("cache/include")))
    if (entry.path().filename() == "offset.h") {
      ++headers_found;
      EXPECT_EQ(rt::read_file(entry.path().string()).value_or(""), kHeaders[1].contents);
    }
  EXPECT_EQ(headers_found, 1);

  // The same request again: no compile, the same loaded library.
  auto again = rt::compile_cxx(kAddSource, kHeaders);
  EXPECT_EQ(again.get(), lib.get());
  EXPECT_EQ(rt::host_compile_count(), before + 1);

  // Changing a header changes the key.
  auto headers = kHeaders;
  headers[1].contents = "#pragma once\nconstexpr int kOffset = 2000;\n";
  auto changed = rt::compile_cxx(kAddSource, headers);
  EXPECT_EQ(rt::host_compile_count(), before + 2);
  EXPECT_NE(changed->path(), lib->path());
  EXPECT_EQ(reinterpret_cast<int (*)(int, int)>(changed->symbol("tl_add"))(2, 3), 2005);
}

TEST_F(HostCompiler, ASecondCacheWithTheEntryIsADiskHit) {
  auto first = rt::compile_cxx(kAddSource, kHeaders);
  const int64_t compiles = rt::host_compile_count();
  // Another cache root holding the same entries, as another process (or machine) would find them.
  fs::copy(dir_.file("cache"), dir_.file("copy"), fs::copy_options::recursive);
  ScopedEnv other_root("TL_CACHE_DIR", dir_.file("copy"));
  auto second = rt::compile_cxx(kAddSource, kHeaders);
  EXPECT_EQ(rt::host_compile_count(), compiles);  // loaded, not compiled
  EXPECT_EQ(second->path().rfind(dir_.file("copy") + "/", 0), 0u) << second->path();
  EXPECT_EQ(reinterpret_cast<int (*)(int, int)>(second->symbol("tl_add"))(1, 1), 1002);
}

TEST_F(HostCompiler, DifferentSourcesGetDifferentLibraries) {
  auto one = rt::compile_cxx("extern \"C\" int tl_which() { return 1; }\n", {});
  auto two = rt::compile_cxx("extern \"C\" int tl_which() { return 2; }\n", {});
  EXPECT_NE(one->path(), two->path());
  EXPECT_EQ(reinterpret_cast<int (*)()>(one->symbol("tl_which"))(), 1);
  EXPECT_EQ(reinterpret_cast<int (*)()>(two->symbol("tl_which"))(), 2);
}

TEST_F(HostCompiler, FlagsFromOptionsAndEnvironment) {
  const char* source = "extern \"C\" int tl_value() { return TL_TEST_VALUE; }\n";
  HostCompileOptions options;
  options.extra_flags = {"-DTL_TEST_VALUE=7"};
  auto seven = rt::compile_cxx(source, {}, options);
  EXPECT_EQ(reinterpret_cast<int (*)()>(seven->symbol("tl_value"))(), 7);
  ScopedEnv flags("TL_CXXFLAGS", "  -DTL_TEST_VALUE=42   -Wall ");
  auto forty_two = rt::compile_cxx(source, {});
  EXPECT_NE(forty_two->path(), seven->path());
  EXPECT_EQ(reinterpret_cast<int (*)()>(forty_two->symbol("tl_value"))(), 42);
}

TEST_F(HostCompiler, OpenMpIsOnByDefault) {
  const char* source = R"(
#ifdef _OPENMP
#include <omp.h>
#endif
extern "C" long tl_sum(int n) {
  long total = 0;
#pragma omp parallel for reduction(+ : total)
  for (int i = 1; i <= n; ++i) total += i;
  return total;
}
extern "C" int tl_has_openmp() {
#ifdef _OPENMP
  return 1;
#else
  return 0;
#endif
}
)";
  auto with = rt::compile_cxx(source, {});
  EXPECT_EQ(reinterpret_cast<int (*)()>(with->symbol("tl_has_openmp"))(), 1);
  EXPECT_EQ(reinterpret_cast<long (*)(int)>(with->symbol("tl_sum"))(100000), 5000050000L);
  HostCompileOptions no_openmp;
  no_openmp.openmp = false;
  auto without = rt::compile_cxx(source, {}, no_openmp);
  EXPECT_EQ(reinterpret_cast<int (*)()>(without->symbol("tl_has_openmp"))(), 0);
}

TEST_F(HostCompiler, CompileErrorCarriesTheCompilerOutput) {
  const int64_t before = rt::host_compile_count();
  std::string message;
  try {
    rt::compile_cxx("extern \"C\" int tl_broken( { return undeclared_name; }\n", {});
    FAIL() << "expected a compile error";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    message = e.what();
  }
  EXPECT_EQ(rt::host_compile_count(), before + 1);
  EXPECT_NE(message.find("the host C++ compiler failed"), std::string::npos) << message;
  EXPECT_NE(message.find("error"), std::string::npos) << message;
  EXPECT_NE(message.find("-march=native"), std::string::npos) << message;  // the command
  const std::string marker = "source kept at: ";
  const size_t at = message.find(marker);
  ASSERT_NE(at, std::string::npos) << message;
  const std::string kept = message.substr(at + marker.size(), message.find('\n', at) - at - marker.size());
  EXPECT_NE(rt::read_file(kept).value_or("").find("tl_broken"), std::string::npos) << kept;
  // Nothing but the kept source is left in its shard (no temp library, no log).
  EXPECT_EQ(std::distance(fs::directory_iterator(fs::path(kept).parent_path()), {}), 1);
}

TEST_F(HostCompiler, MissingSymbolAndBadHeaderPathAreInternalErrors) {
  auto lib = rt::compile_cxx(kAddSource, kHeaders);
  expect_error([&] { lib->symbol("tl_no_such_function"); }, ErrorKind::Internal, "tl_no_such_function", lib->path());
  expect_error([] { rt::compile_cxx("int x;", {{"../escape.h", ""}}); }, ErrorKind::Internal, "../escape.h");
}

TEST_F(HostCompiler, MissingCompilerIsAUserError) {
  {
    ScopedEnv cxx("TL_CXX", "/nonexistent/g++");
    expect_error([] { rt::compile_cxx("int x;", {}); }, ErrorKind::User, "TL_CXX=/nonexistent/g++");
  }
  ScopedEnv cxx("TL_CXX", std::nullopt);
  ScopedEnv path("PATH", dir_.path());  // a directory with no compiler in it
  expect_error([] { rt::compile_cxx("int x;", {}); }, ErrorKind::User,
               "no C++ compiler found for the CPU backend; install g++ or set TL_CXX");
}

TEST_F(HostCompiler, VersionAndVerboseLog) {
  const std::string& version = rt::host_compiler_version();
  EXPECT_NE(version.find_first_of("0123456789"), std::string::npos) << version;
  EXPECT_EQ(&rt::host_compiler_version(), &version);  // computed once

  ScopedEnv verbose("TL_JIT_VERBOSE", "1");
  ::testing::internal::CaptureStderr();
  rt::compile_cxx("extern \"C\" int tl_verbose() { return 1; }\n", {});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("[tl jit] "), std::string::npos) << log;
  EXPECT_NE(log.find("-std=c++20 -O3 -march=native -fPIC -shared -fopenmp"), std::string::npos) << log;
  EXPECT_NE(log.find("compiled in"), std::string::npos) << log;
}

}  // namespace
