// Source files and locations for the compiler's messages: every AST and IR node carries a SourceLoc,
// and every user error about source reads "file:line:col: error: message" followed by the line and a caret.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace tilelang {

class SourceFile {
 public:
  SourceFile(std::string name, std::string text);
  // Reads a file; a user error names it when it cannot be read.
  static std::shared_ptr<const SourceFile> load(const std::string& path);

  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }
  // The 1-based line's text without its newline; empty when out of range.
  std::string line(int line) const;

 private:
  std::string name_;
  std::string text_;
  std::vector<size_t> line_starts_;
};

struct SourceLoc {
  std::shared_ptr<const SourceFile> file;
  int line = 0;  // 1-based; 0 when unknown
  int col = 0;   // 1-based

  bool known() const { return file && line > 0; }
  std::string to_string() const;  // "file:line:col" or "<unknown>"
};

// "file:line:col: error: message\n    source line\n    ^" (just the message when loc is unknown).
std::string format_diagnostic(const SourceLoc& loc, const std::string& message, const char* severity = "error");

// Throws an rt::Error of the user family with the formatted diagnostic; `details`, when given,
// follows the source line and caret.
[[noreturn]] void error_at(const SourceLoc& loc, const std::string& message, const std::string& details = "");

}  // namespace tilelang
