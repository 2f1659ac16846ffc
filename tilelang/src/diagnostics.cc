#include "tilelang/diagnostics.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "rt/error.h"

namespace tilelang {

SourceFile::SourceFile(std::string name, std::string text) : name_(std::move(name)), text_(std::move(text)) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

std::shared_ptr<const SourceFile> SourceFile::load(const std::string& path) {
  std::error_code ec;
  RT_USER_CHECK(!std::filesystem::is_directory(path, ec), path, ": error: cannot read the file: it is a directory");
  std::ifstream in(path, std::ios::binary);
  RT_USER_CHECK(in.good(), path, ": error: cannot read the file (does it exist and is it readable?)");
  std::ostringstream buf;
  buf << in.rdbuf();
  RT_USER_CHECK(!in.bad(), path, ": error: reading the file failed");
  return std::make_shared<SourceFile>(path, buf.str());
}

std::string SourceFile::line(int line) const {
  if (line < 1 || line > static_cast<int>(line_starts_.size())) return "";
  size_t begin = line_starts_[line - 1];
  size_t end = text_.find('\n', begin);
  if (end == std::string::npos) end = text_.size();
  if (end > begin && text_[end - 1] == '\r') --end;
  return text_.substr(begin, end - begin);
}

std::string SourceLoc::to_string() const {
  if (!known()) return "<unknown>";
  return rt::str(file->name(), ":", line, ":", col);
}

std::string format_diagnostic(const SourceLoc& loc, const std::string& message, const char* severity) {
  if (!loc.known()) return rt::str(severity, ": ", message);
  std::string text = loc.file->line(loc.line);
  std::string caret;
  // Columns count bytes; the caret moves one place per character (not per UTF-8 continuation byte).
  for (int i = 1; i < loc.col && i <= static_cast<int>(text.size()); ++i)
    if ((static_cast<unsigned char>(text[i - 1]) & 0xC0) != 0x80) caret += text[i - 1] == '\t' ? '\t' : ' ';
  // Control characters other than tabs would garble the quoted line (a NUL ends the message where
  // it is printed as a C string): show each as '?', one column as in the source.
  for (char& c : text)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) c = '?';
  return rt::str(loc.to_string(), ": ", severity, ": ", message, "\n    ", text, "\n    ", caret, "^");
}

void error_at(const SourceLoc& loc, const std::string& message, const std::string& details) {
  std::string text = format_diagnostic(loc, message);
  if (!details.empty()) text += "\n" + details;
  throw rt::Error(rt::ErrorKind::User, text);
}

}  // namespace tilelang
