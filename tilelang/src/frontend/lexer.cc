#include "tilelang/frontend/lexer.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "rt/error.h"

namespace tilelang::frontend {

namespace {

struct Spelling {
  TokenKind kind;
  const char* text;
};

constexpr Spelling kOperators[] = {
#define TILELANG_X(e, s) {TokenKind::e, s},
    TILELANG_TOKEN_OPERATORS(TILELANG_X)
#undef TILELANG_X
};

constexpr Spelling kKeywords[] = {
#define TILELANG_X(e, s) {TokenKind::e, s},
    TILELANG_TOKEN_KEYWORDS(TILELANG_X)
#undef TILELANG_X
};

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
bool is_dec(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_oct(char c) { return c >= '0' && c <= '7'; }
bool is_bin(char c) { return c == '0' || c == '1'; }
int hex_value(char c) {
  if (is_dec(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

const char* closer_of(char open) { return open == '(' ? ")" : open == '[' ? "]" : "}"; }

class Lexer {
 public:
  explicit Lexer(std::shared_ptr<const SourceFile> file) : file_(std::move(file)), s_(file_->text()) {}

  std::vector<Token> run() {
    while (true) {
      if (at_line_start_ && brackets_.empty()) {
        if (!indentation()) break;  // end of file
        continue;
      }
      if (pos_ >= s_.size()) break;
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\f' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        skip_comment();
      } else if (c == '\n') {
        if (brackets_.empty()) {
          SourceLoc loc = here();
          if (pos_ > line_start_ && s_[pos_ - 1] == '\r') loc.col -= 1;
          push(TokenKind::Newline, "", loc);
          at_line_start_ = true;
        }
        next_line(pos_ + 1);
      } else if (c == '\\') {
        continuation();
      } else if (is_dec(c) || (c == '.' && pos_ + 1 < s_.size() && is_dec(s_[pos_ + 1]))) {
        number();
      } else if (c == '\'' || c == '"') {
        string(pos_, "");
      } else if (is_ident_start(c)) {
        identifier_or_prefixed_string();
      } else {
        op();
      }
    }
    finish();
    return std::move(out_);
  }

 private:
  SourceLoc loc_of(size_t pos) const { return SourceLoc{file_, line_, static_cast<int>(pos - line_start_) + 1}; }
  SourceLoc here() const { return loc_of(pos_); }
  void next_line(size_t new_pos) {
    pos_ = new_pos;
    line_start_ = new_pos;
    ++line_;
  }
  Token& push(TokenKind kind, std::string text, SourceLoc loc) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.loc = std::move(loc);
    out_.push_back(std::move(t));
    return out_.back();
  }
  void skip_comment() {
    while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
  }

  // At the start of a physical line outside brackets: measures the indentation and emits INDENT or
  // DEDENTs for a line with code. Blank and comment-only lines are skipped whole. False at end of file.
  bool indentation() {
    int col = 0, alt = 0;  // alt: the column with tabs counted as one, to catch inconsistent mixes
    size_t p = pos_;
    for (; p < s_.size(); ++p) {
      char c = s_[p];
      if (c == ' ') {
        ++col, ++alt;
      } else if (c == '\t') {
        col = (col / 8 + 1) * 8;
        ++alt;
      } else if (c == '\f') {
        col = alt = 0;
      } else {
        break;
      }
    }
    pos_ = p;
    if (p >= s_.size()) return false;
    char c = s_[p];
    if (c == '#' || c == '\n' || (c == '\r' && (p + 1 >= s_.size() || s_[p + 1] == '\n'))) {
      skip_comment();
      if (pos_ >= s_.size()) return false;
      next_line(pos_ + 1);
      return true;
    }
    at_line_start_ = false;
    SourceLoc loc = here();
    auto inconsistent = [&] { error_at(loc, "inconsistent use of tabs and spaces in indentation"); };
    if (col > indents_.back()) {
      if (alt <= alt_indents_.back()) inconsistent();
      indents_.push_back(col);
      alt_indents_.push_back(alt);
      push(TokenKind::Indent, "", loc);
    } else {
      while (col < indents_.back()) {
        indents_.pop_back();
        alt_indents_.pop_back();
        push(TokenKind::Dedent, "", loc);
      }
      if (col != indents_.back()) error_at(loc, "unindent does not match any outer indentation level");
      if (alt != alt_indents_.back()) inconsistent();
    }
    return true;
  }

  // '\' NEWLINE joins two physical lines.
  void continuation() {
    SourceLoc loc = here();
    size_t p = pos_ + 1;
    if (p < s_.size() && s_[p] == '\r') ++p;
    if (p >= s_.size()) error_at(loc, "unexpected end of file after the line continuation character '\\'");
    if (s_[p] != '\n') error_at(loc, "unexpected character after the line continuation character '\\' (it must end the line)");
    next_line(p + 1);
    if (pos_ >= s_.size()) error_at(loc, "unexpected end of file after the line continuation character '\\'");
  }

  // Reads digit ('_'? digit)* with the given digit class; false when an underscore is misplaced.
  bool digits(bool (*is_digit)(char), std::string& clean) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (is_digit(c)) {
        clean += c;
        ++pos_;
      } else if (c == '_') {
        if (clean.empty() || pos_ + 1 >= s_.size() || !is_digit(s_[pos_ + 1])) return false;
        ++pos_;
      } else {
        break;
      }
    }
    return true;
  }

  // number: decimal | '0' [xX] hexdigits | '0' [oO] octdigits | '0' [bB] bindigits | float
  void number() {
    size_t start = pos_;
    SourceLoc loc = here();
    auto spelled = [&] { return s_.substr(start, pos_ - start); };
    auto reject_suffix = [&](const char* what) {
      if (pos_ < s_.size() && (s_[pos_] == 'j' || s_[pos_] == 'J'))
        error_at(loc, "complex (imaginary) literals are not supported in kernels");
      if (pos_ < s_.size() && (is_ident_char(s_[pos_]) || s_[pos_] == '.'))
        error_at(loc, rt::str("invalid ", what, " literal"));
    };
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && std::strchr("xXoObB", s_[pos_ + 1])) {
      char p = static_cast<char>(s_[pos_ + 1] | 0x20);
      int base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      const char* what = p == 'x' ? "hexadecimal" : p == 'o' ? "octal" : "binary";
      pos_ += 2;
      if (pos_ < s_.size() && s_[pos_] == '_') ++pos_;  // 0x_ff is allowed
      std::string clean;
      bool ok = digits(base == 16 ? is_hex : base == 8 ? is_oct : is_bin, clean);
      if (!ok || clean.empty()) error_at(loc, rt::str("invalid ", what, " literal"));
      if (pos_ < s_.size() && (is_ident_char(s_[pos_]) || s_[pos_] == '.'))
        error_at(loc, rt::str("invalid digit '", s_[pos_], "' in ", what, " literal"));
      uint64_t v = 0;
      for (char c : clean) {
        uint64_t d = static_cast<uint64_t>(hex_value(c));
        if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / base) too_large(loc, spelled());
        v = v * base + d;
      }
      Token& t = push(TokenKind::Int, spelled(), loc);
      t.int_value = static_cast<int64_t>(v);
      return;
    }
    std::string clean;
    bool ok = digits(is_dec, clean);
    bool is_float = false;
    if (ok && pos_ < s_.size() && s_[pos_] == '.') {  // 1.  1.5  .5
      is_float = true;
      clean += '.';
      ++pos_;
      if (pos_ < s_.size() && s_[pos_] == '_') ok = false;
      if (ok) ok = digits(is_dec, clean);
    }
    if (ok && pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {  // 1e-3  1.5E+2
      ++pos_;
      clean += 'e';
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) clean += s_[pos_++];
      if (pos_ >= s_.size() || !is_dec(s_[pos_])) error_at(loc, "invalid decimal literal (the exponent has no digits)");
      ok = digits(is_dec, clean);
      is_float = true;
    }
    if (!ok) error_at(loc, "invalid decimal literal (an underscore must sit between two digits)");
    reject_suffix("decimal");
    if (!is_float) {
      if (clean.size() > 1 && clean[0] == '0' && clean.find_first_not_of('0') != std::string::npos)
        error_at(loc, "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers");
      uint64_t v = 0;
      for (char c : clean) {
        uint64_t d = static_cast<uint64_t>(c - '0');
        if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / 10) too_large(loc, spelled());
        v = v * 10 + d;
      }
      Token& t = push(TokenKind::Int, spelled(), loc);
      t.int_value = static_cast<int64_t>(v);
      return;
    }
    double value = 0.0;
    auto res = std::from_chars(clean.data(), clean.data() + clean.size(), value);
    if (res.ec == std::errc::result_out_of_range) {
      value = std::strtod(clean.c_str(), nullptr);  // inf or 0, as Python reads 1e999 and 1e-999
    } else if (res.ec != std::errc() || res.ptr != clean.data() + clean.size()) {
      RT_UNREACHABLE("float literal '", clean, "' did not convert");
    }
    Token& t = push(TokenKind::Float, spelled(), loc);
    t.float_value = value;
  }

  [[noreturn]] void too_large(const SourceLoc& loc, const std::string& text) {
    error_at(loc, rt::str("integer literal ", text, " is too large (kernel integers are at most 64-bit: 9223372036854775807)"));
  }

  void identifier_or_prefixed_string() {
    size_t start = pos_;
    while (pos_ < s_.size() && is_ident_char(s_[pos_])) ++pos_;
    std::string word = s_.substr(start, pos_ - start);
    if (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"') && word.size() <= 2) {
      std::string lower;
      for (char c : word) lower += static_cast<char>(c | 0x20);
      bool prefix = true;
      for (char c : lower) prefix = prefix && std::strchr("rbuf", c);
      if (prefix) {
        string(start, lower);
        return;
      }
    }
    if (pos_ < s_.size() && static_cast<unsigned char>(s_[pos_]) >= 0x80) invalid_character(pos_);
    for (const Spelling& k : kKeywords) {
      if (word == k.text) {
        push(k.kind, word, loc_of(start));
        return;
      }
    }
    push(TokenKind::Name, word, loc_of(start));
  }

  // string: [prefix] ( "'" chars "'" | '"' chars '"' | "'''" chars "'''" | '"""' chars '"""' )
  void string(size_t start, const std::string& prefix) {
    SourceLoc loc = loc_of(start);
    if (prefix.find('f') != std::string::npos) error_at(loc, "f-strings are not supported in kernels");
    if (prefix.find('b') != std::string::npos)
      error_at(loc, "bytes literals (b'...') are not supported in kernels; use a plain string");
    if (prefix.size() == 2) error_at(loc, rt::str("invalid string prefix '", s_.substr(start, 2), "'"));
    bool raw = prefix == "r";
    char q = s_[pos_];
    bool triple = pos_ + 2 < s_.size() && s_[pos_ + 1] == q && s_[pos_ + 2] == q;
    pos_ += triple ? 3 : 1;
    std::string value;
    while (true) {
      if (pos_ >= s_.size()) unterminated(loc, triple);
      char c = s_[pos_];
      if (c == q) {
        if (!triple) {
          ++pos_;
          break;
        }
        if (pos_ + 2 < s_.size() && s_[pos_ + 1] == q && s_[pos_ + 2] == q) {
          pos_ += 3;
          break;
        }
        value += c;
        ++pos_;
      } else if (c == '\n') {
        if (!triple) unterminated(loc, triple);
        value += '\n';
        next_line(pos_ + 1);
      } else if (c == '\r' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n') {
        ++pos_;  // CRLF reads as LF
      } else if (c == '\\') {
        escape(value, raw, triple, loc);
      } else {
        value += c;
        ++pos_;
      }
    }
    push(TokenKind::String, std::move(value), loc);
  }

  [[noreturn]] void unterminated(const SourceLoc& loc, bool triple) {
    error_at(loc, rt::str(triple ? "unterminated triple-quoted string literal" : "unterminated string literal",
                          " (detected at line ", line_, ")"));
  }

  // At a backslash inside a string: appends what the escape stands for and moves past it.
  void escape(std::string& value, bool raw, bool triple, const SourceLoc& string_loc) {
    SourceLoc loc = here();
    ++pos_;  // the backslash
    if (pos_ >= s_.size()) unterminated(string_loc, triple);
    char c = s_[pos_];
    size_t after_cr = (c == '\r' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n') ? pos_ + 1 : pos_;
    if (s_[after_cr] == '\n') {  // backslash-newline: the string goes on on the next line
      if (raw) value += "\\\n";
      next_line(after_cr + 1);
      return;
    }
    if (raw) {  // kept as written; a backslash still stops a quote from ending the string
      value += '\\';
      value += c;
      ++pos_;
      return;
    }
    ++pos_;
    switch (c) {
      case '\\': value += '\\'; return;
      case '\'': value += '\''; return;
      case '"': value += '"'; return;
      case 'a': value += '\a'; return;
      case 'b': value += '\b'; return;
      case 'f': value += '\f'; return;
      case 'n': value += '\n'; return;
      case 'r': value += '\r'; return;
      case 't': value += '\t'; return;
      case 'v': value += '\v'; return;
      case 'x': case 'u': case 'U': {
        int n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int i = 0; i < n; ++i) {
          if (pos_ >= s_.size() || !is_hex(s_[pos_]))
            error_at(loc, rt::str("invalid \\", c, " escape: it needs exactly ", n, " hexadecimal digits"));
          cp = cp * 16 + static_cast<uint32_t>(hex_value(s_[pos_++]));
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
          error_at(loc, rt::str("invalid \\", c, " escape: not a Unicode code point"));
        if (c == 'x') value += static_cast<char>(cp);
        else append_utf8(value, cp);
        return;
      }
      case 'N':
        error_at(loc, "named Unicode escapes (\\N{...}) are not supported in kernels");
      default:
        break;
    }
    if (is_oct(c)) {
      uint32_t cp = static_cast<uint32_t>(c - '0');
      for (int i = 0; i < 2 && pos_ < s_.size() && is_oct(s_[pos_]); ++i) cp = cp * 8 + static_cast<uint32_t>(s_[pos_++] - '0');
      if (cp < 0x100) value += static_cast<char>(cp);
      else append_utf8(value, cp);
      return;
    }
    // An unknown escape keeps its backslash, as in Python.
    value += '\\';
    --pos_;
  }

  void op() {
    SourceLoc loc = here();
    for (int len = 3; len >= 1; --len) {
      if (pos_ + len > s_.size()) continue;
      for (const Spelling& o : kOperators) {
        if (std::strlen(o.text) != static_cast<size_t>(len) || s_.compare(pos_, len, o.text) != 0) continue;
        pos_ += len;
        bracket(o.kind, o.text[0], loc);
        push(o.kind, o.text, loc);
        return;
      }
    }
    invalid_character(pos_);
  }

  void bracket(TokenKind kind, char ch, const SourceLoc& loc) {
    if (kind == TokenKind::LParen || kind == TokenKind::LBracket || kind == TokenKind::LBrace) {
      brackets_.push_back({ch, loc});
    } else if (kind == TokenKind::RParen || kind == TokenKind::RBracket || kind == TokenKind::RBrace) {
      if (brackets_.empty()) error_at(loc, rt::str("unmatched '", ch, "'"));
      const Open& open = brackets_.back();
      if (closer_of(open.ch)[0] != ch)
        error_at(loc, rt::str("closing bracket '", ch, "' does not match the opening '", open.ch, "' at ",
                              open.loc.line, ":", open.loc.col, " (expected '", closer_of(open.ch), "')"));
      brackets_.pop_back();
    }
  }

  [[noreturn]] void invalid_character(size_t p) {
    SourceLoc loc = loc_of(p);
    unsigned char c = static_cast<unsigned char>(s_[p]);
    if (c >= 0x80) {
      // Decode one UTF-8 sequence to name the character.
      int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      uint32_t cp = n == 4 ? c & 0x07 : n == 3 ? c & 0x0F : n == 2 ? c & 0x1F : c;
      bool ok = n > 1 && p + n <= s_.size();
      for (int i = 1; ok && i < n; ++i) {
        unsigned char cc = static_cast<unsigned char>(s_[p + i]);
        ok = (cc & 0xC0) == 0x80;
        cp = (cp << 6) | (cc & 0x3F);
      }
      char hex[16];
      if (!ok) {
        std::snprintf(hex, sizeof hex, "0x%02X", c);
        error_at(loc, rt::str("invalid byte ", hex, " in the source (the file is not valid UTF-8)"));
      }
      std::snprintf(hex, sizeof hex, "U+%04X", cp);
      error_at(loc, rt::str("invalid character '", s_.substr(p, n), "' (", hex,
                            "); kernel source outside strings and comments must be ASCII"));
    }
    if (c < 0x20 || c == 0x7F) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "U+%04X", c);
      error_at(loc, rt::str("invalid non-printable character ", hex));
    }
    error_at(loc, rt::str("invalid character '", static_cast<char>(c), "' in the source"));
  }

  void finish() {
    if (!brackets_.empty()) {
      const Open& open = brackets_.back();
      error_at(open.loc, rt::str("'", open.ch, "' opened at line ", open.loc.line, ", column ", open.loc.col,
                                 " was never closed (the file ended first)"));
    }
    // END sits just after the last character of the last line with code (where its NEWLINE is).
    SourceLoc end = SourceLoc{file_, 1, 1};
    if (!out_.empty()) end = out_.back().kind == TokenKind::Newline ? out_.back().loc : here();
    if (!out_.empty() && out_.back().kind != TokenKind::Newline) push(TokenKind::Newline, "", end);
    for (size_t i = 1; i < indents_.size(); ++i) push(TokenKind::Dedent, "", end);
    push(TokenKind::End, "", end);
  }

  struct Open {
    char ch;
    SourceLoc loc;
  };

  std::shared_ptr<const SourceFile> file_;
  const std::string& s_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  bool at_line_start_ = true;
  std::vector<int> indents_{0};
  std::vector<int> alt_indents_{0};
  std::vector<Open> brackets_;
  std::vector<Token> out_;
};

}  // namespace

bool is_keyword(TokenKind kind) { return kind >= TokenKind::KwFalse; }
bool is_operator(TokenKind kind) { return kind >= TokenKind::LParen && kind < TokenKind::KwFalse; }

const char* spelling(TokenKind kind) {
  switch (kind) {
    case TokenKind::Name: return "NAME";
    case TokenKind::Int: return "INT";
    case TokenKind::Float: return "FLOAT";
    case TokenKind::String: return "STRING";
    case TokenKind::Newline: return "NEWLINE";
    case TokenKind::Indent: return "INDENT";
    case TokenKind::Dedent: return "DEDENT";
    case TokenKind::End: return "END";
#define TILELANG_X(e, s) case TokenKind::e: return s;
    TILELANG_TOKEN_OPERATORS(TILELANG_X) TILELANG_TOKEN_KEYWORDS(TILELANG_X)
#undef TILELANG_X
  }
  return "?";
}

std::string quote_string(const std::string& value) {
  std::string out = "\"";
  for (char ch : value) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::Name: return "name '" + t.text + "'";
    case TokenKind::Int: return "integer " + t.text;
    case TokenKind::Float: return "number " + t.text;
    case TokenKind::String: {
      std::string q = quote_string(t.text);
      if (q.size() > 24) q = q.substr(0, 20) + "...\"";
      return "string " + q;
    }
    case TokenKind::Newline: return "NEWLINE";
    case TokenKind::Indent: return "INDENT";
    case TokenKind::Dedent: return "DEDENT";
    case TokenKind::End: return "end of file";
    default: break;
  }
  if (is_keyword(t.kind)) return rt::str("keyword '", spelling(t.kind), "'");
  return rt::str("'", spelling(t.kind), "'");
}

std::vector<Token> tokenize(std::shared_ptr<const SourceFile> file) {
  RT_ICHECK(file != nullptr, "tokenize needs a file");
  return Lexer(std::move(file)).run();
}

std::string print_tokens(const std::vector<Token>& tokens) {
  std::string out;
  for (const Token& t : tokens) {
    out += rt::str(t.loc.line, ":", t.loc.col, " ");
    switch (t.kind) {
      case TokenKind::Name: out += "NAME " + t.text; break;
      case TokenKind::Int: out += "INT " + t.text; break;
      case TokenKind::Float: out += "FLOAT " + t.text; break;
      case TokenKind::String: out += "STRING " + quote_string(t.text); break;
      case TokenKind::Newline: case TokenKind::Indent: case TokenKind::Dedent: case TokenKind::End:
        out += spelling(t.kind);
        break;
      default:
        out += rt::str(is_keyword(t.kind) ? "KEYWORD " : "OP ", spelling(t.kind));
    }
    out += '\n';
  }
  return out;
}

}  // namespace tilelang::frontend
