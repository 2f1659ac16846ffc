// Two views of the AST: the indented tree of `--emit=ast` (every field of every node, one node a line
// with its @line:col) and the Python source form of an expression used in messages.
#include <charconv>
#include <cmath>
#include <string>

#include "rt/error.h"
#include "tilelang/frontend/ast.h"
#include "tilelang/frontend/lexer.h"

namespace tilelang::ast {

using frontend::quote_string;

const char* symbol(BinOpKind op) {
  switch (op) {
    case BinOpKind::Add: return "+";
    case BinOpKind::Sub: return "-";
    case BinOpKind::Mul: return "*";
    case BinOpKind::Div: return "/";
    case BinOpKind::FloorDiv: return "//";
    case BinOpKind::Mod: return "%";
    case BinOpKind::Pow: return "**";
    case BinOpKind::MatMul: return "@";
    case BinOpKind::LShift: return "<<";
    case BinOpKind::RShift: return ">>";
    case BinOpKind::BitOr: return "|";
    case BinOpKind::BitXor: return "^";
    case BinOpKind::BitAnd: return "&";
  }
  return "?";
}

const char* symbol(UnaryOpKind op) {
  switch (op) {
    case UnaryOpKind::Neg: return "-";
    case UnaryOpKind::Pos: return "+";
    case UnaryOpKind::Not: return "not";
    case UnaryOpKind::Invert: return "~";
  }
  return "?";
}

const char* symbol(BoolOpKind op) { return op == BoolOpKind::And ? "and" : "or"; }

const char* symbol(CmpOpKind op) {
  switch (op) {
    case CmpOpKind::Eq: return "==";
    case CmpOpKind::NotEq: return "!=";
    case CmpOpKind::Lt: return "<";
    case CmpOpKind::LtE: return "<=";
    case CmpOpKind::Gt: return ">";
    case CmpOpKind::GtE: return ">=";
    case CmpOpKind::Is: return "is";
    case CmpOpKind::IsNot: return "is not";
    case CmpOpKind::In: return "in";
    case CmpOpKind::NotIn: return "not in";
  }
  return "?";
}

namespace {

// ------------------------------------------------------------ literals

// Python's repr of a float: the shortest digits that read back the same value, in positional form
// for exponents -4..15 and in scientific form otherwise (0.001, 1.0, 1e-05, 1e+16, 1.44269504).
std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  size_t e = s.find('e');
  int exp = std::stoi(s.substr(e + 1));
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      size_t int_len = static_cast<size_t>(exp) + 1;
      if (digits.size() <= int_len) out = digits + std::string(int_len - digits.size(), '0') + ".0";
      else out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    } else {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    int a = exp < 0 ? -exp : exp;
    out += rt::str("e", exp < 0 ? "-" : "+", a < 10 ? "0" : "", a);
  }
  return sign + out;
}

// ------------------------------------------------------------ source form

// Binding strength, weakest first (Python's precedence table).
enum Prec : int {
  kTest = 1,  // a if b else c
  kOr,
  kAnd,
  kNot,
  kCmp,
  kBitOr,
  kBitXor,
  kBitAnd,
  kShift,
  kArith,  // + -
  kTerm,   // * / // % @
  kUnary,  // -x +x ~x
  kPower,  // **
  kAwait,  // the left operand of **
  kAtom,   // primaries, literals, parenthesized forms
};

int prec_of(BinOpKind op) {
  switch (op) {
    case BinOpKind::Add: case BinOpKind::Sub: return kArith;
    case BinOpKind::Mul: case BinOpKind::Div: case BinOpKind::FloorDiv: case BinOpKind::Mod: case BinOpKind::MatMul:
      return kTerm;
    case BinOpKind::Pow: return kPower;
    case BinOpKind::LShift: case BinOpKind::RShift: return kShift;
    case BinOpKind::BitOr: return kBitOr;
    case BinOpKind::BitXor: return kBitXor;
    case BinOpKind::BitAnd: return kBitAnd;
  }
  return kAtom;
}

int prec_of(const Expr& e) {
  switch (e.kind) {
    case ExprKind::IfExp: return kTest;
    case ExprKind::BoolOp: return e.as<BoolOpExpr>().op == BoolOpKind::Or ? kOr : kAnd;
    case ExprKind::UnaryOp: return e.as<UnaryOpExpr>().op == UnaryOpKind::Not ? kNot : kUnary;
    case ExprKind::Compare: return kCmp;
    case ExprKind::BinOp: return prec_of(e.as<BinOpExpr>().op);
    case ExprKind::Int: return e.as<IntExpr>().value < 0 ? kUnary : kAtom;  // only built, never parsed
    case ExprKind::Float: return std::signbit(e.as<FloatExpr>().value) ? kUnary : kAtom;
    case ExprKind::Slice: return kTest;
    default: return kAtom;
  }
}

void emit(std::string& out, const Expr& e, int min_prec);

void emit_slice(std::string& out, const SliceExpr& s) {
  if (s.lower) emit(out, *s.lower, kTest);
  out += ':';
  if (s.upper) emit(out, *s.upper, kTest);
  if (s.step) {
    out += ':';
    emit(out, *s.step, kTest);
  }
}

void emit_list(std::string& out, const std::vector<ExprPtr>& elts) {
  for (size_t i = 0; i < elts.size(); ++i) {
    if (i) out += ", ";
    emit(out, *elts[i], kTest);
  }
}

void emit(std::string& out, const Expr& e, int min_prec) {
  bool paren = prec_of(e) < min_prec;
  if (paren) out += '(';
  switch (e.kind) {
    case ExprKind::Name: out += e.as<NameExpr>().id; break;
    case ExprKind::Int: out += std::to_string(e.as<IntExpr>().value); break;
    case ExprKind::Float: out += format_float(e.as<FloatExpr>().value); break;
    case ExprKind::Str: out += quote_string(e.as<StrExpr>().value); break;
    case ExprKind::Bool: out += e.as<BoolExpr>().value ? "True" : "False"; break;
    case ExprKind::None: out += "None"; break;
    case ExprKind::Tuple: {
      const auto& t = e.as<TupleExpr>();
      out += '(';
      emit_list(out, t.elts);
      if (t.elts.size() == 1) out += ',';
      out += ')';
      break;
    }
    case ExprKind::List:
      out += '[';
      emit_list(out, e.as<ListExpr>().elts);
      out += ']';
      break;
    case ExprKind::Dict: {
      const auto& d = e.as<DictExpr>();
      out += '{';
      for (size_t i = 0; i < d.keys.size(); ++i) {
        if (i) out += ", ";
        emit(out, *d.keys[i], kTest);
        out += ": ";
        emit(out, *d.values[i], kTest);
      }
      out += '}';
      break;
    }
    case ExprKind::Attribute: {
      const auto& a = e.as<AttributeExpr>();
      // (1).real: an integer literal followed by '.' would read as a float
      if (a.value->kind == ExprKind::Int) {
        out += '(';
        emit(out, *a.value, kTest);
        out += ')';
      } else {
        emit(out, *a.value, kAtom);
      }
      out += '.';
      out += a.attr;
      break;
    }
    case ExprKind::Subscript: {
      const auto& s = e.as<SubscriptExpr>();
      emit(out, *s.value, kAtom);
      out += '[';
      for (size_t i = 0; i < s.indices.size(); ++i) {
        if (i) out += ", ";
        if (s.indices[i]->kind == ExprKind::Slice) emit_slice(out, s.indices[i]->as<SliceExpr>());
        else emit(out, *s.indices[i], kTest);
      }
      out += ']';
      break;
    }
    case ExprKind::Slice: emit_slice(out, e.as<SliceExpr>()); break;
    case ExprKind::Call: {
      const auto& c = e.as<CallExpr>();
      emit(out, *c.func, kAtom);
      out += '(';
      emit_list(out, c.args);
      for (size_t i = 0; i < c.keywords.size(); ++i) {
        if (i || !c.args.empty()) out += ", ";
        out += c.keywords[i].name;
        out += '=';
        emit(out, *c.keywords[i].value, kTest);
      }
      out += ')';
      break;
    }
    case ExprKind::BinOp: {
      const auto& b = e.as<BinOpExpr>();
      int p = prec_of(b.op);
      bool pow = b.op == BinOpKind::Pow;
      emit(out, *b.lhs, pow ? kAwait : p);  // ** is right associative, the others left
      out += ' ';
      out += symbol(b.op);
      out += ' ';
      emit(out, *b.rhs, pow ? kUnary : p + 1);
      break;
    }
    case ExprKind::UnaryOp: {
      const auto& u = e.as<UnaryOpExpr>();
      out += symbol(u.op);
      if (u.op == UnaryOpKind::Not) out += ' ';
      emit(out, *u.operand, u.op == UnaryOpKind::Not ? kNot : kUnary);
      break;
    }
    case ExprKind::BoolOp: {
      const auto& b = e.as<BoolOpExpr>();
      int p = prec_of(e);
      for (size_t i = 0; i < b.values.size(); ++i) {
        if (i) out += rt::str(" ", symbol(b.op), " ");
        emit(out, *b.values[i], p + 1);
      }
      break;
    }
    case ExprKind::Compare: {
      const auto& c = e.as<CompareExpr>();
      emit(out, *c.left, kCmp + 1);
      for (size_t i = 0; i < c.ops.size(); ++i) {
        out += rt::str(" ", symbol(c.ops[i]), " ");
        emit(out, *c.comparators[i], kCmp + 1);
      }
      break;
    }
    case ExprKind::IfExp: {
      const auto& x = e.as<IfExpExpr>();
      emit(out, *x.body, kOr);
      out += " if ";
      emit(out, *x.test, kOr);
      out += " else ";
      emit(out, *x.orelse, kTest);
      break;
    }
  }
  if (paren) out += ')';
}

// ------------------------------------------------------------ tree form

class TreePrinter {
 public:
  std::string take() { return std::move(out_); }

  void body(int depth, const char* label, const Body& stmts) {
    if (stmts.empty()) {
      line(depth, label, "[]");
      return;
    }
    line(depth, label, "");
    for (const StmtPtr& s : stmts) stmt(depth + 1, nullptr, *s);
  }

  void stmt(int depth, const char* label, const Stmt& s) {
    switch (s.kind) {
      case StmtKind::FunctionDef: {
        const auto& f = s.as<FunctionDef>();
        node(depth, label, "FunctionDef " + f.name, s.loc);
        exprs(depth + 1, "decorators", f.decorators);
        if (f.args.empty()) {
          line(depth + 1, "args", "[]");
        } else {
          line(depth + 1, "args", "");
          for (const Arg& a : f.args) {
            node(depth + 2, nullptr, "Arg " + a.name, a.loc);
            expr(depth + 3, "annotation", a.annotation);
            expr(depth + 3, "default_value", a.default_value);
          }
        }
        expr(depth + 1, "returns", f.returns);
        body(depth + 1, "body", f.body);
        return;
      }
      case StmtKind::Return:
        node(depth, label, "Return", s.loc);
        expr(depth + 1, "value", s.as<ReturnStmt>().value);
        return;
      case StmtKind::Assign: {
        const auto& a = s.as<AssignStmt>();
        node(depth, label, "Assign", s.loc);
        exprs(depth + 1, "targets", a.targets);
        expr(depth + 1, "value", a.value);
        return;
      }
      case StmtKind::AugAssign: {
        const auto& a = s.as<AugAssignStmt>();
        node(depth, label, rt::str("AugAssign ", symbol(a.op), "="), s.loc);
        expr(depth + 1, "target", a.target);
        expr(depth + 1, "value", a.value);
        return;
      }
      case StmtKind::AnnAssign: {
        const auto& a = s.as<AnnAssignStmt>();
        node(depth, label, "AnnAssign", s.loc);
        expr(depth + 1, "target", a.target);
        expr(depth + 1, "annotation", a.annotation);
        expr(depth + 1, "value", a.value);
        return;
      }
      case StmtKind::For: {
        const auto& f = s.as<ForStmt>();
        node(depth, label, "For", s.loc);
        expr(depth + 1, "target", f.target);
        expr(depth + 1, "iter", f.iter);
        body(depth + 1, "body", f.body);
        return;
      }
      case StmtKind::While: {
        const auto& w = s.as<WhileStmt>();
        node(depth, label, "While", s.loc);
        expr(depth + 1, "test", w.test);
        body(depth + 1, "body", w.body);
        return;
      }
      case StmtKind::If: {
        const auto& i = s.as<IfStmt>();
        node(depth, label, "If", s.loc);
        expr(depth + 1, "test", i.test);
        body(depth + 1, "body", i.body);
        body(depth + 1, "orelse", i.orelse);
        return;
      }
      case StmtKind::With: {
        const auto& w = s.as<WithStmt>();
        node(depth, label, "With", s.loc);
        if (w.items.empty()) {
          line(depth + 1, "items", "[]");
        } else {
          line(depth + 1, "items", "");
          for (const WithItem& item : w.items) {
            line(depth + 2, nullptr, "WithItem");
            expr(depth + 3, "context", item.context);
            expr(depth + 3, "target", item.target);
          }
        }
        body(depth + 1, "body", w.body);
        return;
      }
      case StmtKind::ExprStmt:
        node(depth, label, "ExprStmt", s.loc);
        expr(depth + 1, "value", s.as<ExprStmt>().value);
        return;
      case StmtKind::Pass: node(depth, label, "Pass", s.loc); return;
      case StmtKind::Break: node(depth, label, "Break", s.loc); return;
      case StmtKind::Continue: node(depth, label, "Continue", s.loc); return;
      case StmtKind::Import:
        node(depth, label, "Import", s.loc);
        aliases(depth + 1, s.as<ImportStmt>().names);
        return;
      case StmtKind::ImportFrom: {
        const auto& i = s.as<ImportFromStmt>();
        node(depth, label, "ImportFrom " + i.module, s.loc);
        aliases(depth + 1, i.names);
        return;
      }
      case StmtKind::Assert: {
        const auto& a = s.as<AssertStmt>();
        node(depth, label, "Assert", s.loc);
        expr(depth + 1, "test", a.test);
        expr(depth + 1, "msg", a.msg);
        return;
      }
    }
    RT_UNREACHABLE("statement kind ", static_cast<int>(s.kind));
  }

 private:
  static std::string at(const SourceLoc& loc) {
    return loc.line > 0 ? rt::str(" @", loc.line, ":", loc.col) : std::string(" @?");
  }
  void line(int depth, const char* label, const std::string& text) {
    out_.append(static_cast<size_t>(depth) * 2, ' ');
    if (label) {
      out_ += label;
      out_ += ':';
      if (!text.empty()) out_ += ' ';
    }
    out_ += text;
    out_ += '\n';
  }
  void node(int depth, const char* label, const std::string& text, const SourceLoc& loc) { line(depth, label, text + at(loc)); }

  void aliases(int depth, const std::vector<ImportAlias>& names) {
    if (names.empty()) {
      line(depth, "names", "[]");
      return;
    }
    line(depth, "names", "");
    for (const ImportAlias& a : names)
      node(depth + 1, nullptr, "Alias " + a.name + (a.asname.empty() ? "" : " as " + a.asname), a.loc);
  }

  void exprs(int depth, const char* label, const std::vector<ExprPtr>& list) {
    if (list.empty()) {
      line(depth, label, "[]");
      return;
    }
    line(depth, label, "");
    for (const ExprPtr& e : list) expr(depth + 1, nullptr, e);
  }

  void expr(int depth, const char* label, const ExprPtr& p) {
    if (!p) {
      line(depth, label, "(none)");
      return;
    }
    const Expr& e = *p;
    switch (e.kind) {
      case ExprKind::Name: node(depth, label, "Name " + e.as<NameExpr>().id, e.loc); return;
      case ExprKind::Int: node(depth, label, "Int " + std::to_string(e.as<IntExpr>().value), e.loc); return;
      case ExprKind::Float: node(depth, label, "Float " + format_float(e.as<FloatExpr>().value), e.loc); return;
      case ExprKind::Str: node(depth, label, "Str " + quote_string(e.as<StrExpr>().value), e.loc); return;
      case ExprKind::Bool: node(depth, label, e.as<BoolExpr>().value ? "Bool True" : "Bool False", e.loc); return;
      case ExprKind::None: node(depth, label, "None", e.loc); return;
      case ExprKind::Tuple:
        node(depth, label, "Tuple", e.loc);
        exprs(depth + 1, "elts", e.as<TupleExpr>().elts);
        return;
      case ExprKind::List:
        node(depth, label, "List", e.loc);
        exprs(depth + 1, "elts", e.as<ListExpr>().elts);
        return;
      case ExprKind::Dict:
        node(depth, label, "Dict", e.loc);
        exprs(depth + 1, "keys", e.as<DictExpr>().keys);
        exprs(depth + 1, "values", e.as<DictExpr>().values);
        return;
      case ExprKind::Attribute: {
        const auto& a = e.as<AttributeExpr>();
        node(depth, label, "Attribute " + a.attr, e.loc);
        expr(depth + 1, "value", a.value);
        return;
      }
      case ExprKind::Subscript: {
        const auto& s = e.as<SubscriptExpr>();
        node(depth, label, "Subscript", e.loc);
        expr(depth + 1, "value", s.value);
        exprs(depth + 1, "indices", s.indices);
        return;
      }
      case ExprKind::Slice: {
        const auto& s = e.as<SliceExpr>();
        node(depth, label, "Slice", e.loc);
        expr(depth + 1, "lower", s.lower);
        expr(depth + 1, "upper", s.upper);
        expr(depth + 1, "step", s.step);
        return;
      }
      case ExprKind::Call: {
        const auto& c = e.as<CallExpr>();
        node(depth, label, "Call", e.loc);
        expr(depth + 1, "func", c.func);
        exprs(depth + 1, "args", c.args);
        if (c.keywords.empty()) {
          line(depth + 1, "keywords", "[]");
        } else {
          line(depth + 1, "keywords", "");
          for (const Keyword& k : c.keywords) {
            node(depth + 2, nullptr, "Keyword " + k.name, k.loc);
            expr(depth + 3, "value", k.value);
          }
        }
        return;
      }
      case ExprKind::BinOp: {
        const auto& b = e.as<BinOpExpr>();
        node(depth, label, rt::str("BinOp ", symbol(b.op)), e.loc);
        expr(depth + 1, "lhs", b.lhs);
        expr(depth + 1, "rhs", b.rhs);
        return;
      }
      case ExprKind::UnaryOp: {
        const auto& u = e.as<UnaryOpExpr>();
        node(depth, label, rt::str("UnaryOp ", symbol(u.op)), e.loc);
        expr(depth + 1, "operand", u.operand);
        return;
      }
      case ExprKind::BoolOp: {
        const auto& b = e.as<BoolOpExpr>();
        node(depth, label, rt::str("BoolOp ", symbol(b.op)), e.loc);
        exprs(depth + 1, "values", b.values);
        return;
      }
      case ExprKind::Compare: {
        const auto& c = e.as<CompareExpr>();
        std::string ops = "[";
        for (size_t i = 0; i < c.ops.size(); ++i) ops += rt::str(i ? ", " : "", symbol(c.ops[i]));
        node(depth, label, "Compare " + ops + "]", e.loc);
        expr(depth + 1, "left", c.left);
        exprs(depth + 1, "comparators", c.comparators);
        return;
      }
      case ExprKind::IfExp: {
        const auto& x = e.as<IfExpExpr>();
        node(depth, label, "IfExp", e.loc);
        expr(depth + 1, "test", x.test);
        expr(depth + 1, "body", x.body);
        expr(depth + 1, "orelse", x.orelse);
        return;
      }
    }
    RT_UNREACHABLE("expression kind ", static_cast<int>(e.kind));
  }

  std::string out_;
};

}  // namespace

std::string print(const Module& module) {
  TreePrinter p;
  p.body(0, "Module", module.body);
  return p.take();
}

std::string print(const Expr& expr) {
  std::string out;
  emit(out, expr, kTest);
  return out;
}

}  // namespace tilelang::ast
