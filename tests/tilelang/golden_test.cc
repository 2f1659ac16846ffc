// Golden tests of the compiler's stages: every case of tests/tilelang/golden/cases.txt is compiled by
// the real `tl` binary with --emit=ast, ir, lowered and cpp, and each output is compared with
// tests/tilelang/golden/NAME.STAGE.expected.
//
// To (re)generate the expected files after an intended change of the compiler's output:
//   TL_UPDATE_GOLDEN=1 ./build/tests/tilelang_tests --gtest_filter='*Golden*'
// then read the diff (git diff tests/tilelang/golden) before committing it: the update mode
// rewrites the files instead of comparing, and so blesses whatever the compiler prints.
//
// The tool runs from the repository root with relative paths, on the CPU target, with the host
// description pinned (TL_NUM_THREADS and TL_CPU_*_BYTES, see cli_util.h): the CPU schedule and
// the gemm's cache blocking follow the core count and the cache sizes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <regex>
#include <set>

#include "cli_util.h"

namespace {

namespace cli = tltest::cli;

const char* const kStages[] = {"ast", "ir", "lowered", "cpp"};
const std::string kGoldenDir = "tests/tilelang/golden";

struct GoldenCase {
  std::string name, source, stage;
  std::vector<std::string> args;
  std::string error;  // a problem of the manifest itself
  int line = 0;       // in cases.txt
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name << "." << c.stage; }

std::vector<GoldenCase> load_cases() {
  std::vector<GoldenCase> cases;
  const std::string manifest = cli::source_dir() + "/" + kGoldenDir + "/cases.txt";
  std::optional<std::string> text = cli::read_text(manifest);
  if (!text) return {GoldenCase{"manifest", "", "missing", {}, "cannot read " + manifest}};
  std::set<std::string> names;
  int line_no = 0;
  for (const std::string& raw : cli::split_lines(*text)) {
    ++line_no;
    std::string line = cli::trim(raw);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> words = cli::split_words(line);
    GoldenCase base;
    base.line = line_no;
    base.name = words[0];
    if (words.size() < 2) base.error = "a case needs a name and a source file";
    else base.source = words[1];
    base.args.assign(words.begin() + std::min<size_t>(2, words.size()), words.end());
    if (!std::regex_match(base.name, std::regex("[A-Za-z][A-Za-z0-9_]*"))) {
      base.error = "case names are identifiers: '" + base.name + "'";
      base.name = "bad_name_line_" + std::to_string(line_no);
    }
    if (!names.insert(base.name).second) {
      base.error = "duplicate case name '" + base.name + "'";
      base.name += "_line_" + std::to_string(line_no);
    }
    for (const char* stage : kStages) {
      GoldenCase c = base;
      c.stage = stage;
      cases.push_back(c);
    }
  }
  return cases;
}

bool update_mode() {
  const char* v = std::getenv("TL_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, MatchesExpected) {
  const GoldenCase& c = GetParam();
  ASSERT_TRUE(c.error.empty()) << kGoldenDir << "/cases.txt:" << c.line << ": " << c.error;
  std::vector<std::string> args = {"compile", c.source, "--emit=" + c.stage, "--target", "cpu"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  const std::string command = cli::describe(args);

  cli::Result r = cli::run_tl(args);
  ASSERT_EQ(r.exit_code, 0) << command << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.err, "") << command << " printed to stderr";
  ASSERT_FALSE(r.out.empty()) << command << " printed nothing";
  EXPECT_EQ(r.out.find(cli::source_dir()), std::string::npos) << command << ": the output holds the machine path " << cli::source_dir();
  EXPECT_EQ(r.out.find(std::filesystem::path(cli::tool_path()).parent_path().string()), std::string::npos)
      << command << ": the output holds the build directory";

  // The same command again must print the same text.
  cli::Result again = cli::run_tl(args);
  EXPECT_EQ(again.exit_code, 0) << command << " (second run)";
  EXPECT_EQ(r.out, again.out) << command << " is not deterministic:\n" << cli::diff(r.out, again.out, "first run", "second run");

  const std::string actual = r.out;
  const std::string rel = kGoldenDir + "/" + c.name + "." + c.stage + ".expected";
  const std::string path = cli::source_dir() + "/" + rel;
  if (update_mode()) {
    ASSERT_TRUE(cli::write_text(path, actual)) << "cannot write " << path;
    std::cout << "[ updated  ] " << rel << "\n";
    return;
  }
  std::optional<std::string> expected = cli::read_text(path);
  ASSERT_TRUE(expected.has_value()) << "missing " << rel << " (generate it with TL_UPDATE_GOLDEN=1, then review it)";
  EXPECT_TRUE(*expected == actual) << command << "\ndiffers from " << rel << " (TL_UPDATE_GOLDEN=1 rewrites it):\n"
                                   << cli::diff(*expected, actual, rel, "actual");
}

INSTANTIATE_TEST_SUITE_P(Cases, Golden, ::testing::ValuesIn(load_cases()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) { return info.param.name + "_" + info.param.stage; });

// Every expected file belongs to a case of the manifest (a renamed or removed case leaves none behind).
TEST(GoldenManifest, NoStaleExpectedFiles) {
  std::set<std::string> wanted;
  for (const GoldenCase& c : load_cases()) wanted.insert(c.name + "." + c.stage + ".expected");
  for (const auto& entry : std::filesystem::directory_iterator(cli::source_dir() + "/" + kGoldenDir)) {
    const std::string file = entry.path().filename().string();
    if (file.size() > 9 && file.ends_with(".expected")) {
      EXPECT_TRUE(wanted.count(file)) << kGoldenDir << "/" << file << " belongs to no case of cases.txt";
    }
  }
}

}  // namespace
