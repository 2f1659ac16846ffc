// Error tests: every case of tests/tilelang/error/cases.txt runs the real `tl` binary from the
// repository root (relative paths, so messages are stable) and checks the exit code, the complete
// first line of stderr, and, for a message with a FILE:LINE:COL location, that the next two lines
// show that source line and a caret under the column. An error run must print nothing on stdout
// and exactly one error. The format of cases.txt is described at its top.
//
// There is no update mode: each expected message is written and reviewed by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "cli_util.h"

namespace {

namespace cli = tltest::cli;

const std::string kManifest = "tests/tilelang/error/cases.txt";

struct ErrorCase {
  std::string name;
  std::vector<std::string> args;
  int exit_code = -1;
  std::string first_line;
  int line = 0;       // of the 'case' line in cases.txt
  std::string error;  // a problem of the manifest itself
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

std::vector<ErrorCase> load_cases() {
  std::optional<std::string> text = cli::read_text(cli::source_dir() + "/" + kManifest);
  if (!text) return {ErrorCase{"manifest", {}, -1, "", 0, "cannot read " + kManifest}};
  std::vector<ErrorCase> cases;
  std::set<std::string> names;
  int line_no = 0;
  auto fail = [&](const std::string& why) {
    if (cases.empty()) cases.push_back(ErrorCase{"manifest", {}, -1, "", line_no, ""});
    if (cases.back().error.empty()) cases.back().error = "line " + std::to_string(line_no) + ": " + why;
  };
  for (const std::string& raw : cli::split_lines(*text)) {
    ++line_no;
    std::string line = cli::trim(raw);
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(':');
    if (line.rfind("case ", 0) == 0) {
      ErrorCase c;
      c.name = cli::trim(line.substr(5));
      c.line = line_no;
      if (!std::regex_match(c.name, std::regex("[A-Za-z][A-Za-z0-9_]*"))) {
        c.error = "case names are identifiers: '" + c.name + "'";
        c.name = "bad_name_line_" + std::to_string(line_no);
      } else if (!names.insert(c.name).second) {
        c.error = "duplicate case '" + c.name + "'";
        c.name += "_line_" + std::to_string(line_no);
      }
      cases.push_back(c);
    } else if (cases.empty()) {
      fail("expected 'case NAME' first");
    } else if (colon == std::string::npos) {
      fail("expected 'tl:', 'exit:' or 'error:'");
    } else {
      const std::string key = line.substr(0, colon), value = cli::trim(line.substr(colon + 1));
      ErrorCase& c = cases.back();
      if (key == "tl") c.args = cli::split_words(value);
      else if (key == "exit") c.exit_code = std::atoi(value.c_str());
      else if (key == "error") c.first_line = value;
      else fail("unknown key '" + key + "'");
    }
  }
  for (ErrorCase& c : cases) {
    if (!c.error.empty()) continue;
    if (c.args.empty()) c.error = "case at line " + std::to_string(c.line) + " has no 'tl:' line";
    else if (c.exit_code < 0) c.error = "case at line " + std::to_string(c.line) + " has no 'exit:' line";
    else if (c.first_line.empty()) c.error = "case at line " + std::to_string(c.line) + " has no 'error:' line";
  }
  return cases;
}

class ErrorCases : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ErrorCases, GivesTheExpectedError) {
  const ErrorCase& c = GetParam();
  ASSERT_TRUE(c.error.empty()) << kManifest << ": " << c.error;
  cli::TempDir tmp;
  std::vector<std::string> args;
  for (const std::string& a : c.args) args.push_back(std::regex_replace(a, std::regex(R"(\$TMP)"), tmp.path()));
  const std::string command = cli::describe(c.args) + "   (" + kManifest + ":" + std::to_string(c.line) + ")";

  cli::Result r = cli::run_tl(args);
  std::vector<std::string> err = cli::split_lines(r.err);
  std::vector<std::string> problems;  // all are reported together, with the output once
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) problems.push_back(what);
  };
  check(r.exit_code == c.exit_code, "exit code " + std::to_string(r.exit_code) + ", expected " + std::to_string(c.exit_code));
  check(!err.empty() && err[0] == c.first_line, "first line of stderr:\n    actual:   " + (err.empty() ? std::string("(none)") : err[0]) +
                                                    "\n    expected: " + c.first_line);
  check(r.out.empty(), "an error run must print nothing on stdout");

  // Exactly one error.
  int errors = 0;
  for (const std::string& l : err) errors += l.find("error:") != std::string::npos;
  check(errors == 1, "expected exactly one line with 'error:', found " + std::to_string(errors));

  // A located message shows the offending source line and a caret under the column.
  std::smatch m;
  static const std::regex located(R"(^([^:]+):(\d+):(\d+): error: .*)");
  if (std::regex_match(c.first_line, m, located)) {
    const std::string file = m[1];
    const int line = std::stoi(m[2]), col = std::stoi(m[3]);
    std::optional<std::string> source = cli::read_text(cli::source_dir() + "/" + file);
    ASSERT_TRUE(source.has_value()) << "the expected message names " << file << ", which cannot be read";
    std::vector<std::string> lines = cli::split_lines(*source);
    ASSERT_GE(lines.size(), static_cast<size_t>(line)) << file << " has no line " << line;
    std::string text = lines[line - 1];
    std::string caret = "    ";
    for (int i = 1; i < col && i <= static_cast<int>(text.size()); ++i)  // one place per character, not per UTF-8 byte
      if ((static_cast<unsigned char>(text[i - 1]) & 0xC0) != 0x80) caret += text[i - 1] == '\t' ? '\t' : ' ';
    caret += "^";
    for (char& ch : text)  // control characters other than tabs are shown as '?'
      if ((static_cast<unsigned char>(ch) < 0x20 && ch != '\t') || ch == 0x7f) ch = '?';
    check(err.size() >= 2 && err[1] == "    " + text, "the second line of stderr must show " + file + ":" + std::to_string(line) + ":\n    " + text);
    check(err.size() >= 3 && err[2] == caret, "the third line of stderr must put a caret under column " + std::to_string(col) + ":\n" + caret);
  }

  std::string report;
  for (const std::string& p : problems) report += "  - " + p + "\n";
  EXPECT_TRUE(problems.empty()) << command << "\n" << report << "--- stderr:\n" << r.err << "--- stdout:\n" << r.out << "---";
}

INSTANTIATE_TEST_SUITE_P(Cases, ErrorCases, ::testing::ValuesIn(load_cases()),
                         [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

// Every program in tests/tilelang/error/ is used by some case (a renamed case leaves no orphan).
TEST(ErrorManifest, EveryProgramIsUsed) {
  std::string all_args;
  for (const ErrorCase& c : load_cases())
    for (const std::string& a : c.args) all_args += a + "\n";
  for (const auto& entry : std::filesystem::directory_iterator(cli::source_dir() + "/tests/tilelang/error")) {
    const std::string file = entry.path().filename().string();
    if (file.ends_with(".py") || file.ends_with(".npy")) {
      EXPECT_NE(all_args.find("tests/tilelang/error/" + file + "\n"), std::string::npos)
          << "tests/tilelang/error/" << file << " is used by no case of cases.txt";
    }
  }
}

}  // namespace
