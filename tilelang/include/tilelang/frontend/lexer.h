// The lexer of the kernel language: Python's tokens, with NEWLINE / INDENT / DEDENT made explicit the
// way Python's own tokenizer does (blank and comment-only lines make no tokens, newlines inside
// (), [] and {} are ignored, a backslash at the end of a line joins it with the next).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tilelang/diagnostics.h"

namespace tilelang::frontend {

// Operators and delimiters: X(enumerator, spelling).
#define TILELANG_TOKEN_OPERATORS(X)                                                                          \
  X(LParen, "(") X(RParen, ")") X(LBracket, "[") X(RBracket, "]") X(LBrace, "{") X(RBrace, "}")              \
  X(Comma, ",") X(Colon, ":") X(Semicolon, ";") X(Dot, ".") X(Ellipsis, "...") X(Arrow, "->") X(At, "@")     \
  X(Equal, "=") X(ColonEqual, ":=")                                                                          \
  X(Plus, "+") X(Minus, "-") X(Star, "*") X(Slash, "/") X(DoubleSlash, "//") X(Percent, "%")                 \
  X(DoubleStar, "**") X(Amp, "&") X(Pipe, "|") X(Caret, "^") X(Tilde, "~") X(LShift, "<<") X(RShift, ">>")   \
  X(Less, "<") X(Greater, ">") X(LessEqual, "<=") X(GreaterEqual, ">=") X(EqEqual, "==") X(NotEqual, "!=")   \
  X(PlusEqual, "+=") X(MinusEqual, "-=") X(StarEqual, "*=") X(SlashEqual, "/=") X(DoubleSlashEqual, "//=")   \
  X(PercentEqual, "%=") X(DoubleStarEqual, "**=") X(AtEqual, "@=") X(AmpEqual, "&=") X(PipeEqual, "|=")      \
  X(CaretEqual, "^=") X(LShiftEqual, "<<=") X(RShiftEqual, ">>=")

// Python's hard keywords: X(enumerator, spelling).
#define TILELANG_TOKEN_KEYWORDS(X)                                                                           \
  X(KwFalse, "False") X(KwNone, "None") X(KwTrue, "True") X(KwAnd, "and") X(KwAs, "as")                      \
  X(KwAssert, "assert") X(KwAsync, "async") X(KwAwait, "await") X(KwBreak, "break") X(KwClass, "class")      \
  X(KwContinue, "continue") X(KwDef, "def") X(KwDel, "del") X(KwElif, "elif") X(KwElse, "else")              \
  X(KwExcept, "except") X(KwFinally, "finally") X(KwFor, "for") X(KwFrom, "from") X(KwGlobal, "global")       \
  X(KwIf, "if") X(KwImport, "import") X(KwIn, "in") X(KwIs, "is") X(KwLambda, "lambda")                      \
  X(KwNonlocal, "nonlocal") X(KwNot, "not") X(KwOr, "or") X(KwPass, "pass") X(KwRaise, "raise")              \
  X(KwReturn, "return") X(KwTry, "try") X(KwWhile, "while") X(KwWith, "with") X(KwYield, "yield")

enum class TokenKind {
  Name,     // identifier; text is its spelling
  Int,      // text is the source spelling, int_value the value
  Float,    // text is the source spelling, float_value the value
  String,   // text is the value: prefix and quotes removed, escapes decoded
  Newline,  // end of a logical line
  Indent,
  Dedent,
  End,      // end of file; always the last token
#define TILELANG_X(e, s) e,
  TILELANG_TOKEN_OPERATORS(TILELANG_X) TILELANG_TOKEN_KEYWORDS(TILELANG_X)
#undef TILELANG_X
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text;  // see TokenKind; for operators and keywords their spelling
  SourceLoc loc;     // of the token's first character (INDENT/DEDENT: the line's first token)
  int64_t int_value = 0;
  double float_value = 0.0;
};

bool is_keyword(TokenKind kind);
bool is_operator(TokenKind kind);
// The spelling of an operator or keyword ("**=", "def"); the category for the others ("NAME", "NEWLINE").
const char* spelling(TokenKind kind);
// The token as a message names it: "name 'x'", "keyword 'in'", "integer 3", "number 1.5", "string \"ab\"", "')'",
// "NEWLINE", "INDENT", "DEDENT", "end of file".
std::string describe(const Token& token);

// A string value as a double-quoted Python literal: "a\"b\n" (\\, \", \n, \r, \t, \xHH for other control bytes).
std::string quote_string(const std::string& value);

// Splits a file into tokens; the last one is END. A lexical error (unknown character, unterminated
// string, bad number, inconsistent dedent, bracket never closed, ...) is a user error at its location.
std::vector<Token> tokenize(std::shared_ptr<const SourceFile> file);

// One token a line, "line:col KIND [text]": "4:5 KEYWORD for", "4:9 NAME i", "4:19 OP (", "4:20 INT 3",
// "4:22 STRING \"a\\n\"" (quoted, escaped), "4:31 NEWLINE", "5:9 INDENT", "8:13 DEDENT", "8:13 END" (the
// DEDENTs and END at the end of the file sit where the last line ends). A debugging aid.
std::string print_tokens(const std::vector<Token>& tokens);

}  // namespace tilelang::frontend
