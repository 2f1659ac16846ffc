// The frontend's lexer, parser and AST printer.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "rt/error.h"
#include "tilelang/frontend/ast.h"
#include "tilelang/frontend/lexer.h"

namespace tilelang {
namespace {

using frontend::Token;
using frontend::TokenKind;
using frontend::tokenize;
using frontend::print_tokens;
using frontend::describe;
using frontend::spelling;
using frontend::is_keyword;
using frontend::is_operator;
using ast::ExprKind;
using ast::StmtKind;

std::shared_ptr<const SourceFile> src(const std::string& text) { return std::make_shared<SourceFile>("t.py", text); }

std::vector<Token> lex(const std::string& text) { return tokenize(src(text)); }

std::vector<TokenKind> kinds(const std::vector<Token>& toks) {
  std::vector<TokenKind> out;
  for (const Token& t : toks) out.push_back(t.kind);
  return out;
}

std::shared_ptr<const ast::Module> parse(const std::string& text) { return ast::parse(src(text)); }

// The value of a one-line expression statement.
ast::ExprPtr expr(const std::string& text) {
  auto m = parse(text + "\n");
  EXPECT_EQ(m->body.size(), 1u);
  EXPECT_EQ(m->body[0]->kind, StmtKind::ExprStmt);
  return m->body[0]->as<ast::ExprStmt>().value;
}

// Every operator node in parentheses, to check the tree's shape independently of ast::print.
std::string shape(const ast::Expr& e) {
  switch (e.kind) {
    case ExprKind::BinOp: {
      const auto& b = e.as<ast::BinOpExpr>();
      return "(" + shape(*b.lhs) + " " + symbol(b.op) + " " + shape(*b.rhs) + ")";
    }
    case ExprKind::UnaryOp: {
      const auto& u = e.as<ast::UnaryOpExpr>();
      return std::string("(") + symbol(u.op) + (u.op == ast::UnaryOpKind::Not ? " " : "") + shape(*u.operand) + ")";
    }
    case ExprKind::BoolOp: {
      const auto& b = e.as<ast::BoolOpExpr>();
      std::string s = "(";
      for (size_t i = 0; i < b.values.size(); ++i) s += (i ? std::string(" ") + symbol(b.op) + " " : "") + shape(*b.values[i]);
      return s + ")";
    }
    case ExprKind::Compare: {
      const auto& c = e.as<ast::CompareExpr>();
      std::string s = "(" + shape(*c.left);
      for (size_t i = 0; i < c.ops.size(); ++i) s += std::string(" ") + symbol(c.ops[i]) + " " + shape(*c.comparators[i]);
      return s + ")";
    }
    case ExprKind::IfExp: {
      const auto& x = e.as<ast::IfExpExpr>();
      return "(" + shape(*x.body) + " if " + shape(*x.test) + " else " + shape(*x.orelse) + ")";
    }
    case ExprKind::Call: {
      const auto& c = e.as<ast::CallExpr>();
      std::string s = shape(*c.func) + "(";
      for (size_t i = 0; i < c.args.size(); ++i) s += (i ? ", " : "") + shape(*c.args[i]);
      for (const auto& k : c.keywords) s += ", " + k.name + "=" + shape(*k.value);
      return s + ")";
    }
    case ExprKind::Subscript: {
      const auto& x = e.as<ast::SubscriptExpr>();
      std::string s = "{" + shape(*x.value) + "}[";
      for (size_t i = 0; i < x.indices.size(); ++i) s += (i ? ", " : "") + shape(*x.indices[i]);
      return s + "]";
    }
    case ExprKind::Slice: {
      const auto& x = e.as<ast::SliceExpr>();
      return (x.lower ? shape(*x.lower) : "") + ":" + (x.upper ? shape(*x.upper) : "") + ":" + (x.step ? shape(*x.step) : "");
    }
    case ExprKind::Attribute: {
      const auto& a = e.as<ast::AttributeExpr>();
      return "{" + shape(*a.value) + "}." + a.attr;
    }
    default: return ast::print(e);
  }
}

// The first line of the error a source raises ("t.py:1:2: error: ..."); the rest is the line and caret.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.kind(), rt::ErrorKind::User);
    std::string what = e.what();
    return what.substr(0, what.find('\n'));
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

std::string loc(const SourceLoc& l) { return std::to_string(l.line) + ":" + std::to_string(l.col); }

const char* kSeed =
    "@tile_kernel\n"
    "def matmul(a: Tensor[FP16], b: Tensor[FP16]) -> Tensor[FP16]:\n"
    "    c = zeros_like(a)\n"
    "    for i in range(a.shape[0]):\n"
    "        for j in range(b.shape[1]):\n"
    "            for k in range(a.shape[1]):\n"
    "                c[i,j] += a[i,k] * b[k,j]\n"
    "    return c\n";

// ---------------------------------------------------------------- lexer

TEST(Lexer, IndentDedentAndBlankLines) {
  auto toks = lex(
      "if a:\n"
      "    b = 1\n"
      "\n"
      "        # a comment at another indentation\n"
      "    if c:\n"
      "        d\n"
      "e\n");
  using K = TokenKind;
  std::vector<K> expected = {K::KwIf, K::Name, K::Colon, K::Newline,
                             K::Indent, K::Name, K::Equal, K::Int, K::Newline,
                             K::KwIf, K::Name, K::Colon, K::Newline,
                             K::Indent, K::Name, K::Newline,
                             K::Dedent, K::Dedent, K::Name, K::Newline, K::End};
  EXPECT_EQ(kinds(toks), expected);
  EXPECT_EQ(loc(toks[4].loc), "2:5");    // INDENT at the line's first token
  EXPECT_EQ(loc(toks[16].loc), "7:1");   // DEDENTs too
  EXPECT_EQ(loc(toks[3].loc), "1:6");    // NEWLINE where the line ends
}

TEST(Lexer, EndOfFileClosesBlocksAndLine) {
  auto toks = lex("def f():\n    return 1");  // no final newline
  using K = TokenKind;
  std::vector<K> expected = {K::KwDef, K::Name, K::LParen, K::RParen, K::Colon, K::Newline,
                             K::Indent, K::KwReturn, K::Int, K::Newline, K::Dedent, K::End};
  EXPECT_EQ(kinds(toks), expected);
  EXPECT_EQ(loc(toks.back().loc), "2:13");
  EXPECT_EQ(kinds(lex("")), std::vector<K>{K::End});
  EXPECT_EQ(kinds(lex("\n  # only a comment\n\n")), std::vector<K>{K::End});
}

TEST(Lexer, TabsAdvanceToMultiplesOfEight) {
  auto toks = lex("if a:\n\tb\n\tif c:\n\t\td\n");
  int indents = 0;
  for (const Token& t : toks) indents += t.kind == TokenKind::Indent;
  EXPECT_EQ(indents, 2);
  EXPECT_EQ(error_of("if a:\n\tb\n        c\n"), "t.py:3:9: error: inconsistent use of tabs and spaces in indentation");
}

TEST(Lexer, ImplicitAndExplicitLineJoining) {
  auto toks = lex(
      "x = f(a,\n"
      "        b,   # comment inside brackets\n"
      "  [c,\n"
      "d])\n"
      "y = 1 + \\\n"
      "    2\n");
  int newlines = 0;
  for (const Token& t : toks) {
    newlines += t.kind == TokenKind::Newline;
    EXPECT_NE(t.kind, TokenKind::Indent);
  }
  EXPECT_EQ(newlines, 2);
  EXPECT_EQ(toks.back().kind, TokenKind::End);
  // The joined token keeps its own physical line.
  bool saw_two = false;
  for (const Token& t : toks)
    if (t.kind == TokenKind::Int && t.int_value == 2) {
      saw_two = true;
      EXPECT_EQ(loc(t.loc), "6:5");
    }
  EXPECT_TRUE(saw_two);
}

TEST(Lexer, WindowsLineEndings) {
  auto m = parse("x = 1\r\nif a:\r\n    b = '''q\r\nr'''\r\n");
  ASSERT_EQ(m->body.size(), 2u);
  const auto& iff = m->body[1]->as<ast::IfStmt>();
  EXPECT_EQ(loc(iff.body[0]->loc), "3:5");
  EXPECT_EQ(iff.body[0]->as<ast::AssignStmt>().value->as<ast::StrExpr>().value, "q\nr");
  EXPECT_EQ(loc(lex("x\r\n")[1].loc), "1:2");  // NEWLINE at the line's end, before the \r
  EXPECT_EQ(error_of("x = 1\r\ny = $\r\n"), "t.py:2:5: error: invalid character '$' in the source");
}

TEST(Lexer, Numbers) {
  auto toks = lex("0 42 1_000_000 0x1F 0XfF_ff 0o17 0b1010 0b_1 00 9223372036854775807\n");
  std::vector<int64_t> ints = {0, 42, 1000000, 31, 0xffff, 15, 10, 1, 0, 9223372036854775807LL};
  ASSERT_EQ(toks.size(), ints.size() + 2);
  for (size_t i = 0; i < ints.size(); ++i) {
    EXPECT_EQ(toks[i].kind, TokenKind::Int) << i;
    EXPECT_EQ(toks[i].int_value, ints[i]) << i;
  }
  EXPECT_EQ(toks[3].text, "0x1F");
  auto floats = lex("1. .5 1e-3 1_000.0 1.5E+2 3e2 0.0 1.44269504 1e999\n");
  std::vector<double> values = {1.0, 0.5, 1e-3, 1000.0, 150.0, 300.0, 0.0, 1.44269504, HUGE_VAL};
  ASSERT_EQ(floats.size(), values.size() + 2);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(floats[i].kind, TokenKind::Float) << i;
    EXPECT_EQ(floats[i].float_value, values[i]) << i;
  }
  EXPECT_EQ(floats[1].text, ".5");
  EXPECT_EQ(loc(floats[1].loc), "1:4");
}

TEST(Lexer, BadNumbers) {
  EXPECT_EQ(error_of("x = 0123\n"),
            "t.py:1:5: error: leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers");
  EXPECT_EQ(error_of("x = 9223372036854775808\n"),
            "t.py:1:5: error: integer literal 9223372036854775808 is too large (kernel integers are at most 64-bit: "
            "9223372036854775807)");
  EXPECT_EQ(error_of("x = 1__0\n"), "t.py:1:5: error: invalid decimal literal (an underscore must sit between two digits)");
  EXPECT_EQ(error_of("x = 1_\n"), "t.py:1:5: error: invalid decimal literal (an underscore must sit between two digits)");
  EXPECT_EQ(error_of("x = 0x\n"), "t.py:1:5: error: invalid hexadecimal literal");
  EXPECT_EQ(error_of("x = 0b102\n"), "t.py:1:5: error: invalid digit '2' in binary literal");
  EXPECT_EQ(error_of("x = 1e\n"), "t.py:1:5: error: invalid decimal literal (the exponent has no digits)");
  EXPECT_EQ(error_of("x = 12abc\n"), "t.py:1:5: error: invalid decimal literal");
  EXPECT_EQ(error_of("x = 2j\n"), "t.py:1:5: error: complex (imaginary) literals are not supported in kernels");
}

TEST(Lexer, Strings) {
  auto toks = lex(
      "'a' \"b\\\"c\" '''x\n"
      "y''' r'\\n\\'' u'\\x41\\t\\101\\u00e9\\\n"
      "z' \"\"\"q\"\"\"\n");
  ASSERT_GE(toks.size(), 6u);
  EXPECT_EQ(toks[0].text, "a");
  EXPECT_EQ(toks[1].text, "b\"c");
  EXPECT_EQ(toks[2].text, "x\ny");
  EXPECT_EQ(loc(toks[2].loc), "1:12");
  EXPECT_EQ(toks[3].text, "\\n\\'");  // raw: kept as written
  EXPECT_EQ(loc(toks[3].loc), "2:6");
  EXPECT_EQ(toks[4].text, "A\tA\xc3\xa9z");  // \x41 \t \101 \u00e9, backslash-newline joins
  EXPECT_EQ(toks[5].text, "q");
  EXPECT_EQ(loc(toks[5].loc), "3:4");
  EXPECT_EQ(toks[6].kind, TokenKind::Newline);
  // Unknown escapes keep their backslash, as in Python.
  EXPECT_EQ(lex("'\\d'\n")[0].text, "\\d");
}

TEST(Lexer, BadStrings) {
  EXPECT_EQ(error_of("x = 'abc\ny = 1\n"), "t.py:1:5: error: unterminated string literal (detected at line 1)");
  EXPECT_EQ(error_of("x = 1\ny = \"\"\"abc\n\n"),
            "t.py:2:5: error: unterminated triple-quoted string literal (detected at line 4)");
  EXPECT_EQ(error_of("x = b'abc'\n"),
            "t.py:1:5: error: bytes literals (b'...') are not supported in kernels; use a plain string");
  EXPECT_EQ(error_of("x = f'{a}'\n"), "t.py:1:5: error: f-strings are not supported in kernels");
  EXPECT_EQ(error_of("x = '\\x4'\n"), "t.py:1:6: error: invalid \\x escape: it needs exactly 2 hexadecimal digits");
}

TEST(Lexer, OperatorsAndKeywords) {
  auto toks = lex("-> ** **= // //= @ @= := ... != == <= >= << >>= ~ ^ | & % . ; , is not in and or\n");
  std::vector<std::string> spellings;
  for (const Token& t : toks) spellings.push_back(spelling(t.kind));
  std::vector<std::string> expected = {"->", "**", "**=", "//", "//=", "@", "@=", ":=", "...", "!=", "==", "<=", ">=",
                                       "<<", ">>=", "~", "^", "|", "&", "%", ".", ";", ",", "is", "not", "in", "and",
                                       "or", "NEWLINE", "END"};
  EXPECT_EQ(spellings, expected);
  EXPECT_TRUE(is_keyword(toks[23].kind));
  EXPECT_TRUE(is_operator(toks[0].kind));
  auto t = lex("match_ True None lambda_\n");
  EXPECT_EQ(t[0].kind, TokenKind::Name);
  EXPECT_EQ(t[1].kind, TokenKind::KwTrue);
  EXPECT_EQ(t[2].kind, TokenKind::KwNone);
  EXPECT_EQ(t[3].kind, TokenKind::Name);
}

TEST(Lexer, PrintTokens) {
  EXPECT_EQ(print_tokens(lex("for i in x:\n  s = 'a\\n' + 1.5\n")),
            "1:1 KEYWORD for\n1:5 NAME i\n1:7 KEYWORD in\n1:10 NAME x\n1:11 OP :\n1:12 NEWLINE\n"
            "2:3 INDENT\n2:3 NAME s\n2:5 OP =\n2:7 STRING \"a\\n\"\n2:13 OP +\n2:15 FLOAT 1.5\n2:18 NEWLINE\n"
            "2:18 DEDENT\n2:18 END\n");
  EXPECT_EQ(describe(lex("foo")[0]), "name 'foo'");
  EXPECT_EQ(describe(lex("in")[0]), "keyword 'in'");
  EXPECT_EQ(describe(lex("()")[0]), "'('");
}

TEST(Lexer, Errors) {
  EXPECT_EQ(error_of("x = a $ b\n"), "t.py:1:7: error: invalid character '$' in the source");
  EXPECT_EQ(error_of("x = a ? b\n"), "t.py:1:7: error: invalid character '?' in the source");
  EXPECT_EQ(error_of("x = a \xe2\x80\x94 b\n"),
            "t.py:1:7: error: invalid character '\xe2\x80\x94' (U+2014); kernel source outside strings and comments must be ASCII");
  EXPECT_EQ(error_of("if a:\n    b = 1\n  c = 2\n"), "t.py:3:3: error: unindent does not match any outer indentation level");
  EXPECT_EQ(error_of("x = foo(a,\n  b\ny = 2\n"),
            "t.py:1:8: error: '(' opened at line 1, column 8 was never closed (the file ended first)");
  EXPECT_EQ(error_of("x = [1, (2]\n"),
            "t.py:1:11: error: closing bracket ']' does not match the opening '(' at 1:9 (expected ')')");
  EXPECT_EQ(error_of("x = 1)\n"), "t.py:1:6: error: unmatched ')'");
  EXPECT_EQ(error_of("x = 1 + \\ 2\n"),
            "t.py:1:9: error: unexpected character after the line continuation character '\\' (it must end the line)");
}

TEST(Lexer, FullDiagnosticShowsLineAndCaret) {
  try {
    parse("x = 1\ny = a $ b\n");
    FAIL() << "no error";
  } catch (const rt::Error& e) {
    EXPECT_EQ(std::string(e.what()), "t.py:2:7: error: invalid character '$' in the source\n    y = a $ b\n          ^");
  }
}

// ---------------------------------------------------------------- parser: programs

TEST(Parser, SeedMatmul) {
  auto m = parse(kSeed);
  ASSERT_EQ(m->body.size(), 1u);
  ASSERT_EQ(m->body[0]->kind, StmtKind::FunctionDef);
  const auto& f = m->body[0]->as<ast::FunctionDef>();
  EXPECT_EQ(f.name, "matmul");
  EXPECT_EQ(loc(f.loc), "1:1");  // the first token: the decorator's '@'
  ASSERT_EQ(f.decorators.size(), 1u);
  EXPECT_EQ(ast::print(*f.decorators[0]), "tile_kernel");
  EXPECT_EQ(loc(f.decorators[0]->loc), "1:2");
  ASSERT_EQ(f.args.size(), 2u);
  EXPECT_EQ(f.args[0].name, "a");
  EXPECT_EQ(loc(f.args[0].loc), "2:12");
  EXPECT_EQ(ast::print(*f.args[0].annotation), "Tensor[FP16]");
  EXPECT_EQ(f.args[0].default_value, nullptr);
  EXPECT_EQ(f.args[1].name, "b");
  ASSERT_NE(f.returns, nullptr);
  EXPECT_EQ(ast::print(*f.returns), "Tensor[FP16]");
  ASSERT_EQ(f.body.size(), 3u);

  ASSERT_EQ(f.body[0]->kind, StmtKind::Assign);
  const auto& assign = f.body[0]->as<ast::AssignStmt>();
  ASSERT_EQ(assign.targets.size(), 1u);
  EXPECT_EQ(ast::print(*assign.targets[0]), "c");
  EXPECT_EQ(ast::print(*assign.value), "zeros_like(a)");
  EXPECT_EQ(loc(assign.loc), "3:5");

  ASSERT_EQ(f.body[1]->kind, StmtKind::For);
  const auto& fi = f.body[1]->as<ast::ForStmt>();
  EXPECT_EQ(loc(fi.loc), "4:5");
  EXPECT_EQ(fi.target->kind, ExprKind::Name);
  EXPECT_EQ(loc(fi.target->loc), "4:9");
  EXPECT_EQ(ast::print(*fi.iter), "range(a.shape[0])");
  ASSERT_EQ(fi.body.size(), 1u);
  const auto& fj = fi.body[0]->as<ast::ForStmt>();
  EXPECT_EQ(loc(fj.loc), "5:9");
  const auto& fk = fj.body[0]->as<ast::ForStmt>();
  EXPECT_EQ(ast::print(*fk.iter), "range(a.shape[1])");
  ASSERT_EQ(fk.body.size(), 1u);
  ASSERT_EQ(fk.body[0]->kind, StmtKind::AugAssign);
  const auto& aug = fk.body[0]->as<ast::AugAssignStmt>();
  EXPECT_EQ(aug.op, ast::BinOpKind::Add);
  EXPECT_EQ(loc(aug.loc), "7:17");
  ASSERT_EQ(aug.target->kind, ExprKind::Subscript);
  EXPECT_EQ(aug.target->as<ast::SubscriptExpr>().indices.size(), 2u);
  EXPECT_EQ(ast::print(*aug.value), "a[i, k] * b[k, j]");
  EXPECT_EQ(loc(aug.value->loc), "7:27");
  const auto& mul = aug.value->as<ast::BinOpExpr>();
  EXPECT_EQ(loc(mul.rhs->loc), "7:36");

  ASSERT_EQ(f.body[2]->kind, StmtKind::Return);
  EXPECT_EQ(ast::print(*f.body[2]->as<ast::ReturnStmt>().value), "c");
  EXPECT_EQ(loc(f.body[2]->loc), "8:5");
}

const char* kTileLang = R"PY(import tilelang
import tilelang.language as T
from tilelang import language as T
from x import *


@tilelang.jit(out_idx=[-1])
def flash(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, dtype="float16"):
    """Flash attention.

    Second paragraph."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e)
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(
            Q: T.Tensor(shape, dtype),
            Output: T.Tensor(shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], "float")
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_s, -T.infinity("float"))
            loop_range = (
                T.ceildiv((bx + 1) * block_M, block_N) if is_causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=3):
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            x: T.int32 = 0
            a = b = c
            bx2, by2 = by, bx
            while x < 10 and not done:
                x += 1
                if x % 2 == 0:
                    continue
                elif 0 < x <= 5:
                    pass
                else:
                    break
            assert dim % 8 == 0, "dim must be a multiple of 8"

    return main
)PY";

TEST(Parser, TileLangStyle) {
  auto m = parse(kTileLang);
  ASSERT_EQ(m->body.size(), 5u);
  {
    const auto& imp = m->body[1]->as<ast::ImportStmt>();
    ASSERT_EQ(imp.names.size(), 1u);
    EXPECT_EQ(imp.names[0].name, "tilelang.language");
    EXPECT_EQ(imp.names[0].asname, "T");
    const auto& from = m->body[2]->as<ast::ImportFromStmt>();
    EXPECT_EQ(from.module, "tilelang");
    EXPECT_EQ(from.names[0].name, "language");
    EXPECT_EQ(from.names[0].asname, "T");
    EXPECT_EQ(loc(from.names[0].loc), "3:22");
    const auto& star = m->body[3]->as<ast::ImportFromStmt>();
    EXPECT_EQ(star.names[0].name, "*");
  }
  ASSERT_EQ(m->body[4]->kind, StmtKind::FunctionDef);
  const auto& flash = m->body[4]->as<ast::FunctionDef>();
  EXPECT_EQ(loc(flash.loc), "7:1");
  EXPECT_EQ(ast::print(*flash.decorators[0]), "tilelang.jit(out_idx=[-1])");
  ASSERT_EQ(flash.args.size(), 8u);
  EXPECT_EQ(ast::print(*flash.args[5].default_value), "64");
  EXPECT_EQ(ast::print(*flash.args[7].default_value), "\"float16\"");
  EXPECT_EQ(flash.returns, nullptr);
  ASSERT_EQ(flash.body.size(), 5u);
  // The docstring is an expression statement holding the string.
  ASSERT_EQ(flash.body[0]->kind, StmtKind::ExprStmt);
  EXPECT_EQ(flash.body[0]->as<ast::ExprStmt>().value->as<ast::StrExpr>().value, "Flash attention.\n\n    Second paragraph.");
  EXPECT_EQ(ast::print(*flash.body[1]->as<ast::AssignStmt>().value), "(1.0 / dim) ** 0.5 * 1.44269504");
  EXPECT_EQ(ast::print(*flash.body[4]->as<ast::ReturnStmt>().value), "main");

  const auto& main = flash.body[3]->as<ast::FunctionDef>();
  EXPECT_EQ(main.name, "main");
  EXPECT_EQ(loc(main.loc), "15:5");
  EXPECT_EQ(ast::print(*main.decorators[0]), "T.prim_func");
  ASSERT_EQ(main.args.size(), 2u);
  EXPECT_EQ(ast::print(*main.args[1].annotation), "T.Tensor(shape, dtype)");
  EXPECT_EQ(loc(main.args[1].loc), "18:13");
  ASSERT_EQ(main.body.size(), 1u);

  ASSERT_EQ(main.body[0]->kind, StmtKind::With);
  const auto& with = main.body[0]->as<ast::WithStmt>();
  ASSERT_EQ(with.items.size(), 1u);
  EXPECT_EQ(ast::print(*with.items[0].context), "T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128)");
  const auto& kernel = with.items[0].context->as<ast::CallExpr>();
  ASSERT_EQ(kernel.keywords.size(), 1u);
  EXPECT_EQ(kernel.keywords[0].name, "threads");
  EXPECT_EQ(loc(kernel.keywords[0].loc), "20:66");
  ASSERT_EQ(with.items[0].target->kind, ExprKind::Tuple);
  EXPECT_EQ(with.items[0].target->as<ast::TupleExpr>().elts.size(), 3u);
  EXPECT_EQ(loc(with.items[0].target->loc), "20:82");

  const ast::Body& wb = with.body;
  ASSERT_EQ(wb.size(), 11u);
  const auto& copy = wb[2]->as<ast::ExprStmt>().value->as<ast::CallExpr>();
  ASSERT_EQ(copy.args.size(), 2u);
  const auto& q = copy.args[0]->as<ast::SubscriptExpr>();
  ASSERT_EQ(q.indices.size(), 4u);
  EXPECT_EQ(q.indices[1]->kind, ExprKind::Slice);
  EXPECT_EQ(q.indices[3]->kind, ExprKind::Slice);
  EXPECT_EQ(q.indices[3]->as<ast::SliceExpr>().lower, nullptr);
  EXPECT_EQ(ast::print(*copy.args[0]), "Q[bz, bx * block_M:(bx + 1) * block_M, by, :]");
  EXPECT_EQ(ast::print(*wb[3]->as<ast::ExprStmt>().value), "T.fill(acc_s, -T.infinity(\"float\"))");
  EXPECT_EQ(ast::print(*wb[4]->as<ast::AssignStmt>().value),
            "T.ceildiv((bx + 1) * block_M, block_N) if is_causal else T.ceildiv(seq_len, block_N)");
  EXPECT_EQ(loc(wb[4]->as<ast::AssignStmt>().value->loc), "26:17");

  const auto& pipelined = wb[5]->as<ast::ForStmt>();
  EXPECT_EQ(ast::print(*pipelined.iter), "T.Pipelined(loop_range, num_stages=3)");
  const auto& parallel = pipelined.body[0]->as<ast::ForStmt>();
  ASSERT_EQ(parallel.target->kind, ExprKind::Tuple);
  EXPECT_EQ(ast::print(*parallel.target), "(i, j)");
  EXPECT_EQ(loc(parallel.target->loc), "28:21");
  const auto& store = parallel.body[0]->as<ast::AssignStmt>();
  EXPECT_EQ(ast::print(*store.value),
            "T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype))");
  const auto& gemm = pipelined.body[1]->as<ast::ExprStmt>().value->as<ast::CallExpr>();
  ASSERT_EQ(gemm.keywords.size(), 2u);
  EXPECT_EQ(ast::print(*gemm.keywords[0].value), "True");
  EXPECT_EQ(ast::print(*gemm.keywords[1].value), "T.GemmWarpPolicy.FullRow");

  ASSERT_EQ(wb[6]->kind, StmtKind::AnnAssign);
  const auto& ann = wb[6]->as<ast::AnnAssignStmt>();
  EXPECT_EQ(ast::print(*ann.target), "x");
  EXPECT_EQ(ast::print(*ann.annotation), "T.int32");
  EXPECT_EQ(ast::print(*ann.value), "0");

  const auto& chain = wb[7]->as<ast::AssignStmt>();
  ASSERT_EQ(chain.targets.size(), 2u);
  EXPECT_EQ(ast::print(*chain.targets[1]), "b");
  EXPECT_EQ(ast::print(*chain.value), "c");

  const auto& tup = wb[8]->as<ast::AssignStmt>();
  ASSERT_EQ(tup.targets.size(), 1u);
  EXPECT_EQ(tup.targets[0]->kind, ExprKind::Tuple);
  EXPECT_EQ(tup.value->kind, ExprKind::Tuple);

  const auto& loop = wb[9]->as<ast::WhileStmt>();
  EXPECT_EQ(ast::print(*loop.test), "x < 10 and not done");
  ASSERT_EQ(loop.body.size(), 2u);
  const auto& iff = loop.body[1]->as<ast::IfStmt>();
  EXPECT_EQ(iff.body[0]->kind, StmtKind::Continue);
  ASSERT_EQ(iff.orelse.size(), 1u);
  const auto& elif = iff.orelse[0]->as<ast::IfStmt>();
  EXPECT_EQ(loc(elif.loc), "38:17");
  EXPECT_EQ(ast::print(*elif.test), "0 < x <= 5");
  EXPECT_EQ(elif.body[0]->kind, StmtKind::Pass);
  ASSERT_EQ(elif.orelse.size(), 1u);
  EXPECT_EQ(elif.orelse[0]->kind, StmtKind::Break);

  const auto& as = wb[10]->as<ast::AssertStmt>();
  EXPECT_EQ(ast::print(*as.test), "dim % 8 == 0");
  EXPECT_EQ(ast::print(*as.msg), "\"dim must be a multiple of 8\"");
}

TEST(Parser, SimpleStatements) {
  auto m = parse(
      "return a, b\n"
      "return\n"
      "x = 1; y = 2;\n"
      "if a: b = 1\n"
      "else: pass\n"
      "from a.b import (c as d, e,)\n"
      "import os, numpy as np\n"
      "a, = f()\n"
      "[p, q] = r\n"
      "s.t = 1\n"
      "x = yield_\n");
  ASSERT_EQ(m->body.size(), 11u);
  EXPECT_EQ(m->body[0]->as<ast::ReturnStmt>().value->kind, ExprKind::Tuple);
  EXPECT_EQ(m->body[1]->as<ast::ReturnStmt>().value, nullptr);
  EXPECT_EQ(m->body[2]->kind, StmtKind::Assign);
  EXPECT_EQ(m->body[3]->kind, StmtKind::Assign);
  EXPECT_EQ(loc(m->body[3]->loc), "3:8");
  const auto& one_line_if = m->body[4]->as<ast::IfStmt>();
  EXPECT_EQ(one_line_if.body[0]->kind, StmtKind::Assign);
  EXPECT_EQ(one_line_if.orelse[0]->kind, StmtKind::Pass);
  const auto& from = m->body[5]->as<ast::ImportFromStmt>();
  EXPECT_EQ(from.module, "a.b");
  ASSERT_EQ(from.names.size(), 2u);
  EXPECT_EQ(from.names[1].name, "e");
  const auto& imp = m->body[6]->as<ast::ImportStmt>();
  ASSERT_EQ(imp.names.size(), 2u);
  EXPECT_EQ(imp.names[1].asname, "np");
  EXPECT_EQ(ast::print(*m->body[7]->as<ast::AssignStmt>().targets[0]), "(a,)");
  EXPECT_EQ(m->body[8]->as<ast::AssignStmt>().targets[0]->kind, ExprKind::List);
  EXPECT_EQ(m->body[9]->as<ast::AssignStmt>().targets[0]->kind, ExprKind::Attribute);
}

// ---------------------------------------------------------------- parser: expressions

TEST(Parser, Precedence) {
  EXPECT_EQ(shape(*expr("-2**2")), "(-(2 ** 2))");
  EXPECT_EQ(ast::print(*expr("-2**2")), "-2 ** 2");
  EXPECT_EQ(shape(*expr("2**-1")), "(2 ** (-1))");
  EXPECT_EQ(shape(*expr("2**3**4")), "(2 ** (3 ** 4))");
  EXPECT_EQ(shape(*expr("a if b else c")), "(a if b else c)");
  EXPECT_EQ(shape(*expr("a if b else c if d else e")), "(a if b else (c if d else e))");
  EXPECT_EQ(shape(*expr("not a == b")), "(not (a == b))");
  EXPECT_EQ(shape(*expr("a < b < c")), "(a < b < c)");
  EXPECT_EQ(expr("a < b < c")->as<ast::CompareExpr>().ops.size(), 2u);
  EXPECT_EQ(shape(*expr("a is not b not in c in d is e")), "(a is not b not in c in d is e)");
  EXPECT_EQ(shape(*expr("a or b and not c")), "(a or (b and (not c)))");
  EXPECT_EQ(shape(*expr("a or b or c")), "(a or b or c)");
  EXPECT_EQ(shape(*expr("a | b ^ c & d << 1 + 2 * 3")), "(a | (b ^ (c & (d << (1 + (2 * 3))))))");
  EXPECT_EQ(shape(*expr("a - b - c")), "((a - b) - c)");
  EXPECT_EQ(shape(*expr("a // b % c @ d / e * f")), "(((((a // b) % c) @ d) / e) * f)");
  EXPECT_EQ(shape(*expr("-a * ~b + +c")), "(((-a) * (~b)) + (+c))");
  EXPECT_EQ(shape(*expr("a >> b << c")), "((a >> b) << c)");
  EXPECT_EQ(shape(*expr("x == y | z")), "(x == (y | z))");
  EXPECT_EQ(shape(*expr("-x.y[0](1) ** 2")), "(-({{x}.y}[0](1) ** 2))");
  EXPECT_EQ(shape(*expr("a + b if c < d else e and f")), "((a + b) if (c < d) else (e and f))");
}

TEST(Parser, PrintExpressionMinimalParentheses) {
  const char* same[] = {
      "a[i, k] * b[k, j]",
      "(a + b) * c",
      "a - (b - c)",
      "a - b - c",
      "(2 ** 3) ** 4",
      "2 ** 3 ** 4",
      "(-2) ** 2",
      "-2 ** 2",
      "2 ** -1",
      "not a == b",
      "(not a) == b",
      "(a if b else c) if d else e",
      "a if b else c if d else e",
      "(a < b) < c",
      "a < b < c",
      "{A_shared: f(A_shared), 1: (x, y)}",
      "{}",
      "(a or b) and c",
      "a and b or c",
      "f(a, b, k=1, m=(x, y))",
      "f(k=1)",
      "x[(i, j)]",
      "x[i:j, :]",
      "x[::2]",
      "x[1:]",
      "x[:, ::-1]",
      "()",
      "(a,)",
      "[a, b]",
      "[]",
      "True",
      "None",
      "\"a\\nb\"",
      "a.b.c",
      "(a + b).c",
      "(1).bit_length()",
      "a is not None",
      "a not in b",
      "~(a & b)",
      "-(-a)",
      "1.0 + 0.5 + 1e-05 + 1e+16 + 0.0001 + 1.44269504 + 100.0",
      "a @ b",
  };
  for (const char* s : same) {
    std::string text = s;
    if (text == "-(-a)") {
      EXPECT_EQ(ast::print(*expr(text)), "--a");
      continue;
    }
    EXPECT_EQ(ast::print(*expr(text)), text);
  }
  EXPECT_EQ(ast::print(*expr("((a))")), "a");
  EXPECT_EQ(ast::print(*expr("'x' \"y\"")), "\"xy\"");
  EXPECT_EQ(ast::print(*expr("1e3")), "1000.0");
  EXPECT_EQ(ast::print(*expr("0x10")), "16");
}

// Random fully parenthesized expressions: printing with minimal parentheses and parsing again gives
// the same tree.
std::string random_expr(std::mt19937& rng, int depth) {
  static const char* leaves[] = {"a", "b", "1", "2.5", "True", "None", "\"s\"", "x.y", "f(a)", "t[i, 0:n]", "()"};
  static const char* binops[] = {"+", "-", "*", "/", "//", "%", "**", "@", "<<", ">>", "|", "^", "&",
                                 "<", "<=", "==", "!=", "is", "is not", "in", "not in", "and", "or"};
  static const char* unops[] = {"-", "+", "~", "not "};
  if (depth == 0 || rng() % 4 == 0) return leaves[rng() % std::size(leaves)];
  switch (rng() % 6) {
    case 0: return std::string("(") + unops[rng() % std::size(unops)] + random_expr(rng, depth - 1) + ")";
    case 1: return "(" + random_expr(rng, depth - 1) + " if " + random_expr(rng, depth - 1) + " else " + random_expr(rng, depth - 1) + ")";
    case 2: return "g(" + random_expr(rng, depth - 1) + ", k=" + random_expr(rng, depth - 1) + ")";
    case 3: return "(" + random_expr(rng, depth - 1) + ")[" + random_expr(rng, depth - 1) + ":]";
    default:
      return "(" + random_expr(rng, depth - 1) + " " + binops[rng() % std::size(binops)] + " " + random_expr(rng, depth - 1) + ")";
  }
}

TEST(Parser, PrintedExpressionsReparseToTheSameTree) {
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::string text = random_expr(rng, 5);
    auto e = expr(text);
    std::string printed = ast::print(*e);
    auto again = expr(printed);
    ASSERT_EQ(shape(*again), shape(*e)) << text << "\nprinted as " << printed;
    ASSERT_EQ(ast::print(*again), printed);
    ASSERT_LE(printed.size(), text.size()) << text;
  }
}

TEST(Parser, ExpressionStructure) {
  auto sub = expr("x[(i, j)]");
  ASSERT_EQ(sub->as<ast::SubscriptExpr>().indices.size(), 1u);
  EXPECT_EQ(sub->as<ast::SubscriptExpr>().indices[0]->kind, ExprKind::Tuple);
  auto sub2 = expr("x[i, j]");
  EXPECT_EQ(sub2->as<ast::SubscriptExpr>().indices.size(), 2u);
  auto sl = expr("A[0:64, :]")->as<ast::SubscriptExpr>().indices;
  ASSERT_EQ(sl.size(), 2u);
  const auto& s0 = sl[0]->as<ast::SliceExpr>();
  EXPECT_EQ(ast::print(*s0.lower), "0");
  EXPECT_EQ(ast::print(*s0.upper), "64");
  EXPECT_EQ(s0.step, nullptr);
  EXPECT_EQ(loc(sl[1]->loc), "1:9");
  auto s2_index = expr("a[::2]")->as<ast::SubscriptExpr>().indices[0];
  const auto& s2 = s2_index->as<ast::SliceExpr>();
  EXPECT_EQ(s2.lower, nullptr);
  EXPECT_EQ(s2.upper, nullptr);
  EXPECT_EQ(ast::print(*s2.step), "2");

  EXPECT_EQ(expr("()")->as<ast::TupleExpr>().elts.size(), 0u);
  EXPECT_EQ(expr("(a,)")->as<ast::TupleExpr>().elts.size(), 1u);
  EXPECT_EQ(expr("(a)")->kind, ExprKind::Name);
  EXPECT_EQ(expr("a, b")->as<ast::TupleExpr>().elts.size(), 2u);
  EXPECT_EQ(expr("True")->as<ast::BoolExpr>().value, true);
  EXPECT_EQ(expr("False")->as<ast::BoolExpr>().value, false);
  EXPECT_EQ(expr("None")->kind, ExprKind::None);

  // Locations: the first token, including a leading parenthesis.
  auto paren = expr("(a + b) * c");
  EXPECT_EQ(loc(paren->loc), "1:1");
  EXPECT_EQ(loc(paren->as<ast::BinOpExpr>().lhs->loc), "1:2");
  auto mcall = expr("obj.method(1, k=2)[0]");
  EXPECT_EQ(mcall->kind, ExprKind::Subscript);
  EXPECT_EQ(loc(mcall->loc), "1:1");
  const auto& inner = mcall->as<ast::SubscriptExpr>().value->as<ast::CallExpr>();
  EXPECT_EQ(inner.args.size(), 1u);
  EXPECT_EQ(inner.keywords.size(), 1u);
  EXPECT_EQ(loc(inner.keywords[0].loc), "1:15");

  auto multi = expr("f(a,\n  b,\n  c=1,\n)");
  EXPECT_EQ(multi->as<ast::CallExpr>().args.size(), 2u);
  EXPECT_EQ(loc(multi->as<ast::CallExpr>().keywords[0].loc), "3:3");
}

// ---------------------------------------------------------------- printer

TEST(Printer, SmallModule) {
  auto m = parse(
      "@T.prim_func\n"
      "def f(a: T.int32, b=2) -> None:\n"
      "    for i, j in T.Parallel(4, n):\n"
      "        a[i, 0:j] += -b ** 2\n"
      "    with T.Kernel(8, threads=128) as (bx, by), ctx:\n"
      "        if a < b <= 3:\n"
      "            pass\n"
      "        else:\n"
      "            x: int = a if b else 'c'\n"
      "    assert not a, 1.5\n"
      "from m import *\n");
  EXPECT_EQ(ast::print(*m),
            "Module:\n"
            "  FunctionDef f @1:1\n"
            "    decorators:\n"
            "      Attribute prim_func @1:2\n"
            "        value: Name T @1:2\n"
            "    args:\n"
            "      Arg a @2:7\n"
            "        annotation: Attribute int32 @2:10\n"
            "          value: Name T @2:10\n"
            "        default_value: (none)\n"
            "      Arg b @2:19\n"
            "        annotation: (none)\n"
            "        default_value: Int 2 @2:21\n"
            "    returns: None @2:27\n"
            "    body:\n"
            "      For @3:5\n"
            "        target: Tuple @3:9\n"
            "          elts:\n"
            "            Name i @3:9\n"
            "            Name j @3:12\n"
            "        iter: Call @3:17\n"
            "          func: Attribute Parallel @3:17\n"
            "            value: Name T @3:17\n"
            "          args:\n"
            "            Int 4 @3:28\n"
            "            Name n @3:31\n"
            "          keywords: []\n"
            "        body:\n"
            "          AugAssign += @4:9\n"
            "            target: Subscript @4:9\n"
            "              value: Name a @4:9\n"
            "              indices:\n"
            "                Name i @4:11\n"
            "                Slice @4:14\n"
            "                  lower: Int 0 @4:14\n"
            "                  upper: Name j @4:16\n"
            "                  step: (none)\n"
            "            value: UnaryOp - @4:22\n"
            "              operand: BinOp ** @4:23\n"
            "                lhs: Name b @4:23\n"
            "                rhs: Int 2 @4:28\n"
            "      With @5:5\n"
            "        items:\n"
            "          WithItem\n"
            "            context: Call @5:10\n"
            "              func: Attribute Kernel @5:10\n"
            "                value: Name T @5:10\n"
            "              args:\n"
            "                Int 8 @5:19\n"
            "              keywords:\n"
            "                Keyword threads @5:22\n"
            "                  value: Int 128 @5:30\n"
            "            target: Tuple @5:38\n"
            "              elts:\n"
            "                Name bx @5:39\n"
            "                Name by @5:43\n"
            "          WithItem\n"
            "            context: Name ctx @5:48\n"
            "            target: (none)\n"
            "        body:\n"
            "          If @6:9\n"
            "            test: Compare [<, <=] @6:12\n"
            "              left: Name a @6:12\n"
            "              comparators:\n"
            "                Name b @6:16\n"
            "                Int 3 @6:21\n"
            "            body:\n"
            "              Pass @7:13\n"
            "            orelse:\n"
            "              AnnAssign @9:13\n"
            "                target: Name x @9:13\n"
            "                annotation: Name int @9:16\n"
            "                value: IfExp @9:22\n"
            "                  test: Name b @9:27\n"
            "                  body: Name a @9:22\n"
            "                  orelse: Str \"c\" @9:34\n"
            "      Assert @10:5\n"
            "        test: UnaryOp not @10:12\n"
            "          operand: Name a @10:16\n"
            "        msg: Float 1.5 @10:19\n"
            "  ImportFrom m @11:1\n"
            "    names:\n"
            "      Alias * @11:15\n");
}

TEST(Printer, SeedIsDeterministicAndComplete) {
  std::string a = ast::print(*parse(kSeed));
  EXPECT_EQ(a, ast::print(*parse(kSeed)));
  EXPECT_NE(a.find("          For @5:9\n            target: Name j @5:13\n"), std::string::npos) << a;
  EXPECT_NE(a.find("AugAssign += @7:17"), std::string::npos);
  EXPECT_NE(a.find("      Return @8:5\n        value: Name c @8:12\n"), std::string::npos);
  EXPECT_EQ(ast::print(*parse("")), "Module: []\n");
  EXPECT_EQ(ast::print(*parse("while x:\n  break\n")),
            "Module:\n  While @1:1\n    test: Name x @1:7\n    body:\n      Break @2:3\n");
}

TEST(Printer, Symbols) {
  EXPECT_STREQ(ast::symbol(ast::BinOpKind::FloorDiv), "//");
  EXPECT_STREQ(ast::symbol(ast::BinOpKind::MatMul), "@");
  EXPECT_STREQ(ast::symbol(ast::UnaryOpKind::Invert), "~");
  EXPECT_STREQ(ast::symbol(ast::UnaryOpKind::Not), "not");
  EXPECT_STREQ(ast::symbol(ast::CmpOpKind::IsNot), "is not");
  EXPECT_STREQ(ast::symbol(ast::CmpOpKind::NotIn), "not in");
  EXPECT_STREQ(ast::symbol(ast::BoolOpKind::Or), "or");
}

// ---------------------------------------------------------------- syntax errors

TEST(ParserErrors, MissingPieces) {
  EXPECT_EQ(error_of("for i in range(3)\n    pass\n"), "t.py:1:18: error: expected ':' after the for header, found NEWLINE");
  EXPECT_EQ(error_of("if x\n    pass\n"), "t.py:1:5: error: expected ':' after the if header, found NEWLINE");
  EXPECT_EQ(error_of("def f(a) -> int\n    pass\n"),
            "t.py:1:16: error: expected ':' after the function signature, found NEWLINE");
  EXPECT_EQ(error_of("for i range(3):\n    pass\n"), "t.py:1:7: error: expected 'in' after the for target, found name 'range'");
  EXPECT_EQ(error_of("x = \n"), "t.py:1:5: error: expected an expression, found NEWLINE");
  EXPECT_EQ(error_of("x = a b\n"), "t.py:1:7: error: expected NEWLINE after the statement, found name 'b'");
  EXPECT_EQ(error_of("f(a b)\n"), "t.py:1:5: error: expected ')' or ',' in the argument list of the call opened at 1:2, found name 'b'");
  EXPECT_EQ(error_of("x = a if b\n"),
            "t.py:1:11: error: expected 'else' in the conditional expression (a if cond else b), found NEWLINE");
  EXPECT_EQ(error_of("x = a[]\n"), "t.py:1:7: error: expected an index expression inside '[]', found ']'");
  EXPECT_EQ(error_of("def (a):\n  pass\n"), "t.py:1:5: error: expected a function name after 'def', found '('");
  EXPECT_EQ(error_of("@dec\nx = 1\n"), "t.py:2:1: error: expected 'def' after the decorators, found name 'x'");
  EXPECT_EQ(error_of("x = a.\n"), "t.py:1:7: error: expected an attribute name after '.', found NEWLINE");
}

TEST(ParserErrors, Indentation) {
  EXPECT_EQ(error_of("for i in x:\npass\n"),
            "t.py:2:1: error: expected an indented block after the 'for' statement on line 1, found keyword 'pass'");
  EXPECT_EQ(error_of("def f():\n"), "t.py:1:9: error: expected an indented block after the 'def' statement on line 1, found end of file");
  EXPECT_EQ(error_of("x = 1\n    y = 2\n"), "t.py:2:5: error: unexpected indent");
  EXPECT_EQ(error_of("  x = 1\n"), "t.py:1:3: error: unexpected indent");
  EXPECT_EQ(error_of("if a:\n    b = 1\n  c = 2\n"), "t.py:3:3: error: unindent does not match any outer indentation level");
  EXPECT_EQ(error_of("x = 1\nelse:\n  pass\n"),
            "t.py:2:1: error: 'else' here does not follow an 'if' block at the same indentation");
}

TEST(ParserErrors, Unsupported) {
  EXPECT_EQ(error_of("f = lambda x: x\n"), "t.py:1:5: error: lambda expressions are not supported in kernels");
  EXPECT_EQ(error_of("y = [x for x in a]\n"), "t.py:1:5: error: list comprehensions are not supported in kernels");
  EXPECT_EQ(error_of("y = sum(x for x in a)\n"), "t.py:1:9: error: generator expressions are not supported in kernels");
  EXPECT_EQ(error_of("y = (x for x in a)\n"), "t.py:1:5: error: generator expressions are not supported in kernels");
  EXPECT_EQ(error_of("y = {1, 2}\n"), "t.py:1:5: error: set displays ({a, b}) are not supported in kernels");
  EXPECT_EQ(error_of("y = {k: v for k in a}\n"), "t.py:1:5: error: dict comprehensions are not supported in kernels");
  EXPECT_EQ(error_of("y = *a, b\n"), "t.py:1:5: error: starred expressions (*x) are not supported in kernels");
  EXPECT_EQ(error_of("f(*a)\n"), "t.py:1:3: error: argument unpacking (*args) is not supported in kernels");
  EXPECT_EQ(error_of("f(**k)\n"), "t.py:1:3: error: keyword argument unpacking (**kwargs) is not supported in kernels");
  EXPECT_EQ(error_of("if (n := 3) > 2:\n  pass\n"), "t.py:1:7: error: assignment expressions (:=) are not supported in kernels");
  EXPECT_EQ(error_of("x = yield\n"), "t.py:1:5: error: yield expressions are not supported in kernels");
  EXPECT_EQ(error_of("x = await y\n"), "t.py:1:5: error: await expressions are not supported in kernels");
  EXPECT_EQ(error_of("x = a[...]\n"), "t.py:1:7: error: the Ellipsis literal (...) is not supported in kernels");
  EXPECT_EQ(error_of("def f(*args):\n  pass\n"), "t.py:1:7: error: variadic parameters (*args) are not supported in kernels");
  EXPECT_EQ(error_of("def f(a, *, b):\n  pass\n"),
            "t.py:1:10: error: keyword-only parameters (a bare '*' marker) are not supported in kernels");
  EXPECT_EQ(error_of("def f(**kw):\n  pass\n"),
            "t.py:1:7: error: keyword variadic parameters (**kwargs) are not supported in kernels");
  EXPECT_EQ(error_of("def f(a, /):\n  pass\n"),
            "t.py:1:10: error: positional-only parameters (a '/' marker) are not supported in kernels");
  EXPECT_EQ(error_of("for i in x:\n  pass\nelse:\n  pass\n"),
            "t.py:3:1: error: 'else' clauses on for loops are not supported in kernels");
  EXPECT_EQ(error_of("while x:\n  pass\nelse:\n  pass\n"),
            "t.py:3:1: error: 'else' clauses on while loops are not supported in kernels");
  EXPECT_EQ(error_of("from . import x\n"), "t.py:1:6: error: relative imports are not supported in kernels");
  EXPECT_EQ(error_of("from .m import x\n"), "t.py:1:6: error: relative imports are not supported in kernels");
  EXPECT_EQ(error_of("class A:\n  pass\n"), "t.py:1:1: error: class definitions are not supported in kernels");
  EXPECT_EQ(error_of("try:\n  pass\n"), "t.py:1:1: error: try statements are not supported in kernels");
  EXPECT_EQ(error_of("raise E\n"), "t.py:1:1: error: raise statements are not supported in kernels");
  EXPECT_EQ(error_of("del a\n"), "t.py:1:1: error: del statements are not supported in kernels");
  EXPECT_EQ(error_of("global a\n"), "t.py:1:1: error: global declarations are not supported in kernels");
  EXPECT_EQ(error_of("async def f():\n  pass\n"), "t.py:1:1: error: async functions and statements are not supported in kernels");
  EXPECT_EQ(error_of("x := 1\n"), "t.py:1:3: error: assignment expressions (:=) are not supported in kernels");
}

TEST(ParserErrors, CallsAndTargets) {
  EXPECT_EQ(error_of("f(a=1, b)\n"), "t.py:1:8: error: positional argument follows keyword argument");
  EXPECT_EQ(error_of("f(a=1, a=2)\n"), "t.py:1:8: error: keyword argument repeated: a");
  EXPECT_EQ(error_of("f(a.b=1)\n"),
            "t.py:1:3: error: a keyword argument needs a plain name before '=', not an attribute (a.b); did you mean '=='?");
  EXPECT_EQ(error_of("def f(a, a):\n  pass\n"), "t.py:1:10: error: duplicate parameter 'a' in the function definition");
  EXPECT_EQ(error_of("def f(a=1, b):\n  pass\n"),
            "t.py:1:12: error: parameter 'b' without a default follows a parameter with a default");
  EXPECT_EQ(error_of("f(x) = 1\n"),
            "t.py:1:1: error: cannot use a function call (f(x)) as an assignment target; did you mean '==' instead of '='?");
  EXPECT_EQ(error_of("a, 1 = x\n"), "t.py:1:4: error: cannot use a literal (1) as an assignment target");
  EXPECT_EQ(error_of("for f() in x:\n  pass\n"), "t.py:1:5: error: cannot use a function call (f()) as a loop variable");
  EXPECT_EQ(error_of("a, b += 1\n"),
            "t.py:1:1: error: the target of '+=' must be a single name, attribute or subscript, not a tuple");
  EXPECT_EQ(error_of("a, b: int = 1\n"), "t.py:1:1: error: only a single target (not a tuple or list) can be annotated");
  EXPECT_EQ(error_of("with a as f():\n  pass\n"), "t.py:1:11: error: cannot use a function call (f()) as a with target");
}

TEST(ParserErrors, NestingLimits) {
  std::string deep = "x = " + std::string(120, '(') + "a" + std::string(120, ')') + "\n";
  EXPECT_EQ(ast::print(*parse(deep)->body[0]->as<ast::AssignStmt>().value), "a");
  std::string too_deep = "x = " + std::string(5000, '(') + "a" + std::string(5000, ')') + "\n";
  EXPECT_NE(error_of(too_deep).find("error: the code is nested too deeply here"), std::string::npos);
  EXPECT_NE(error_of("x = " + std::string(20000, '-') + "a\n").find("nested too deeply"), std::string::npos);
  std::string sum = "x = a";
  for (int i = 0; i < 999; ++i) sum += " + a";
  EXPECT_EQ(parse(sum + "\n")->body.size(), 1u);
  std::string long_sum = "x = a";
  for (int i = 0; i < 20000; ++i) long_sum += " + a";
  EXPECT_EQ(error_of(long_sum + "\n"),
            "t.py:1:5: error: this expression is nested too deeply (more than 1000 levels of operators, calls and "
            "brackets); split it into several statements");
  std::string attrs = "x = a";
  for (int i = 0; i < 20000; ++i) attrs += ".b";
  EXPECT_NE(error_of(attrs + "\n").find("nested too deeply"), std::string::npos);
}

// Damaged programs either parse or fail with one user error; never a crash, a hang or an internal error.
TEST(ParserErrors, MutatedProgramsFailCleanly) {
  const std::string base = std::string(kSeed) + kTileLang;
  const std::string alphabet = "()[]{}:,.=+-*/%@<>!&|^~#\\'\"\n\t 0123456789aeifnorx_";
  std::mt19937 rng(1234);
  int parsed = 0, failed = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string text = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % (text.size() + 1);
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: text.insert(text.begin() + static_cast<long>(at), c); break;
        case 1: if (at < text.size()) text.erase(at, 1); break;
        default: if (at < text.size()) text[at] = c; break;
      }
    }
    try {
      auto m = ast::parse(src(text));
      ast::print(*m);
      ++parsed;
    } catch (const rt::Error& err) {
      ASSERT_EQ(err.kind(), rt::ErrorKind::User) << err.what() << "\nfor:\n" << text;
      std::string what = err.what();
      ASSERT_EQ(what.rfind("t.py:", 0), 0u) << what;
      ++failed;
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace tilelang
