// Helpers for the tests that run the real `tl` binary (golden_test.cc, error_test.cc): run it from
// the repository root with a pinned environment, read manifests, and show differences.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "testutil/environment.h"

namespace tltest::cli {

inline std::string source_dir() { return TL_SOURCE_DIR; }
inline std::string tool_path() { return TL_TOOL_PATH; }

inline std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

inline std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

inline std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

using testutil::TempDir;

struct Result {
  int exit_code = -1;  // the tool's exit status; 128 + N when killed by signal N, 124 when it timed out
  std::string out, err;
};

// Runs `tl ARGS...` in the repository root, with no shell interpretation of the arguments, the
// CPU device forced, the CPU described the same on every host (four threads, the cache sizes and
// the vector width: the CPU schedule depends on them) and no IR dumps; a run longer than 120 s
// counts as a hang (exit code 124).
inline Result run_tl(const std::vector<std::string>& args) {
  TempDir tmp;
  const std::string out_path = tmp.path() + "/stdout", err_path = tmp.path() + "/stderr";
  std::string cmd = "cd " + shell_quote(source_dir()) + " && env -u TL_DUMP_IR -u TL_JIT_VERBOSE TL_DEVICE=cpu TL_NUM_THREADS=4 TL_CPU_L1D_BYTES=49152 TL_CPU_L2_BYTES=2097152 TL_CPU_L3_BYTES=33554432 TL_CPU_SIMD_BITS=512 timeout 120 " +
                    shell_quote(tool_path());
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(out_path) + " 2>" + shell_quote(err_path) + " </dev/null";
  Result r;
  int status = std::system(cmd.c_str());
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (status != -1 && WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  r.out = read_text(out_path).value_or("");
  r.err = read_text(err_path).value_or("");
  return r;
}

inline std::string describe(const std::vector<std::string>& args) {
  std::string s = "tl";
  for (const std::string& a : args) s += " " + a;
  return s;
}

// A unified-style diff of the one region where `expected` and `actual` differ (their common
// prefix and suffix are skipped), with a few lines of context; "" when they are equal.
inline std::string diff(const std::string& expected, const std::string& actual, const std::string& expected_name = "expected",
                        const std::string& actual_name = "actual") {
  if (expected == actual) return "";
  std::vector<std::string> e = split_lines(expected), a = split_lines(actual);
  size_t p = 0;
  while (p < e.size() && p < a.size() && e[p] == a[p]) ++p;
  size_t s = 0;
  while (s < e.size() - p && s < a.size() - p && e[e.size() - 1 - s] == a[a.size() - 1 - s]) ++s;
  const size_t context = 3, max_lines = 30;
  std::ostringstream os;
  os << "--- " << expected_name << "\n+++ " << actual_name << "\n";
  size_t from = p > context ? p - context : 0;
  os << "@@ -" << from + 1 << " +" << from + 1 << " @@\n";
  for (size_t i = from; i < p; ++i) os << " " << e[i] << "\n";
  size_t e_end = e.size() - s, a_end = a.size() - s;
  for (size_t i = p; i < e_end && i < p + max_lines; ++i) os << "-" << e[i] << "\n";
  if (e_end > p + max_lines) os << "-... (" << e_end - p - max_lines << " more lines)\n";
  for (size_t i = p; i < a_end && i < p + max_lines; ++i) os << "+" << a[i] << "\n";
  if (a_end > p + max_lines) os << "+... (" << a_end - p - max_lines << " more lines)\n";
  for (size_t i = e_end; i < e.size() && i < e_end + context; ++i) os << " " << e[i] << "\n";
  if (p == e.size() && p == a.size()) os << "(the texts differ only in their final newline)\n";
  return os.str();
}

}  // namespace tltest::cli
