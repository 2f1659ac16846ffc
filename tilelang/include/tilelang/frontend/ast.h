// The abstract syntax tree of the Python subset the frontend reads. Nodes are immutable after
// parsing and shared (the elaborator keeps function definitions alive as closures). Every node has
// the location of its first token.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tilelang/diagnostics.h"

namespace tilelang::ast {

// ---------------------------------------------------------------- expressions

enum class ExprKind { Name, Int, Float, Str, Bool, None, Tuple, List, Dict, Attribute, Subscript, Slice, Call, BinOp, UnaryOp, BoolOp, Compare, IfExp };

struct Expr {
  Expr(ExprKind kind, SourceLoc loc) : kind(kind), loc(std::move(loc)) {}
  virtual ~Expr() = default;
  template <class T> const T& as() const { return static_cast<const T&>(*this); }

  const ExprKind kind;
  const SourceLoc loc;
};
using ExprPtr = std::shared_ptr<const Expr>;

struct NameExpr : Expr {
  NameExpr(SourceLoc loc, std::string id) : Expr(ExprKind::Name, std::move(loc)), id(std::move(id)) {}
  std::string id;
};
struct IntExpr : Expr {
  IntExpr(SourceLoc loc, int64_t value) : Expr(ExprKind::Int, std::move(loc)), value(value) {}
  int64_t value;
};
struct FloatExpr : Expr {
  FloatExpr(SourceLoc loc, double value) : Expr(ExprKind::Float, std::move(loc)), value(value) {}
  double value;
};
struct StrExpr : Expr {
  StrExpr(SourceLoc loc, std::string value) : Expr(ExprKind::Str, std::move(loc)), value(std::move(value)) {}
  std::string value;  // escapes already decoded; adjacent literals already joined
};
struct BoolExpr : Expr {
  BoolExpr(SourceLoc loc, bool value) : Expr(ExprKind::Bool, std::move(loc)), value(value) {}
  bool value;
};
struct NoneExpr : Expr {
  explicit NoneExpr(SourceLoc loc) : Expr(ExprKind::None, std::move(loc)) {}
};
struct TupleExpr : Expr {  // (a, b) or a bare a, b
  TupleExpr(SourceLoc loc, std::vector<ExprPtr> elts) : Expr(ExprKind::Tuple, std::move(loc)), elts(std::move(elts)) {}
  std::vector<ExprPtr> elts;
};
struct ListExpr : Expr {
  ListExpr(SourceLoc loc, std::vector<ExprPtr> elts) : Expr(ExprKind::List, std::move(loc)), elts(std::move(elts)) {}
  std::vector<ExprPtr> elts;
};
struct DictExpr : Expr {  // {k0: v0, k1: v1} (T.annotate_layout takes one)
  DictExpr(SourceLoc loc, std::vector<ExprPtr> keys, std::vector<ExprPtr> values)
      : Expr(ExprKind::Dict, std::move(loc)), keys(std::move(keys)), values(std::move(values)) {}
  std::vector<ExprPtr> keys, values;
};
struct AttributeExpr : Expr {  // value.attr
  AttributeExpr(SourceLoc loc, ExprPtr value, std::string attr)
      : Expr(ExprKind::Attribute, std::move(loc)), value(std::move(value)), attr(std::move(attr)) {}
  ExprPtr value;
  std::string attr;
};
struct SubscriptExpr : Expr {  // value[i, j:k]; each index may be a SliceExpr
  SubscriptExpr(SourceLoc loc, ExprPtr value, std::vector<ExprPtr> indices)
      : Expr(ExprKind::Subscript, std::move(loc)), value(std::move(value)), indices(std::move(indices)) {}
  ExprPtr value;
  std::vector<ExprPtr> indices;
};
struct SliceExpr : Expr {  // lower:upper:step, each part optional (null)
  SliceExpr(SourceLoc loc, ExprPtr lower, ExprPtr upper, ExprPtr step)
      : Expr(ExprKind::Slice, std::move(loc)), lower(std::move(lower)), upper(std::move(upper)), step(std::move(step)) {}
  ExprPtr lower, upper, step;
};
struct Keyword {
  SourceLoc loc;
  std::string name;
  ExprPtr value;
};
struct CallExpr : Expr {
  CallExpr(SourceLoc loc, ExprPtr func, std::vector<ExprPtr> args, std::vector<Keyword> keywords)
      : Expr(ExprKind::Call, std::move(loc)), func(std::move(func)), args(std::move(args)), keywords(std::move(keywords)) {}
  ExprPtr func;
  std::vector<ExprPtr> args;
  std::vector<Keyword> keywords;
};

enum class BinOpKind { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, MatMul, LShift, RShift, BitOr, BitXor, BitAnd };
const char* symbol(BinOpKind op);  // "+", "//", ...

struct BinOpExpr : Expr {
  BinOpExpr(SourceLoc loc, BinOpKind op, ExprPtr lhs, ExprPtr rhs)
      : Expr(ExprKind::BinOp, std::move(loc)), op(op), lhs(std::move(lhs)), rhs(std::move(rhs)) {}
  BinOpKind op;
  ExprPtr lhs, rhs;
};

enum class UnaryOpKind { Neg, Pos, Not, Invert };
const char* symbol(UnaryOpKind op);

struct UnaryOpExpr : Expr {
  UnaryOpExpr(SourceLoc loc, UnaryOpKind op, ExprPtr operand)
      : Expr(ExprKind::UnaryOp, std::move(loc)), op(op), operand(std::move(operand)) {}
  UnaryOpKind op;
  ExprPtr operand;
};

enum class BoolOpKind { And, Or };
const char* symbol(BoolOpKind op);  // "and", "or"

struct BoolOpExpr : Expr {  // a and b and c
  BoolOpExpr(SourceLoc loc, BoolOpKind op, std::vector<ExprPtr> values)
      : Expr(ExprKind::BoolOp, std::move(loc)), op(op), values(std::move(values)) {}
  BoolOpKind op;
  std::vector<ExprPtr> values;
};

enum class CmpOpKind { Eq, NotEq, Lt, LtE, Gt, GtE, Is, IsNot, In, NotIn };
const char* symbol(CmpOpKind op);

struct CompareExpr : Expr {  // left op0 c0 op1 c1 ... (chained)
  CompareExpr(SourceLoc loc, ExprPtr left, std::vector<CmpOpKind> ops, std::vector<ExprPtr> comparators)
      : Expr(ExprKind::Compare, std::move(loc)), left(std::move(left)), ops(std::move(ops)), comparators(std::move(comparators)) {}
  ExprPtr left;
  std::vector<CmpOpKind> ops;
  std::vector<ExprPtr> comparators;
};
struct IfExpExpr : Expr {  // body if test else orelse
  IfExpExpr(SourceLoc loc, ExprPtr test, ExprPtr body, ExprPtr orelse)
      : Expr(ExprKind::IfExp, std::move(loc)), test(std::move(test)), body(std::move(body)), orelse(std::move(orelse)) {}
  ExprPtr test, body, orelse;
};

// ---------------------------------------------------------------- statements

enum class StmtKind { FunctionDef, Return, Assign, AugAssign, AnnAssign, For, While, If, With, ExprStmt, Pass, Break, Continue, Import, ImportFrom, Assert };

struct Stmt {
  Stmt(StmtKind kind, SourceLoc loc) : kind(kind), loc(std::move(loc)) {}
  virtual ~Stmt() = default;
  template <class T> const T& as() const { return static_cast<const T&>(*this); }

  const StmtKind kind;
  const SourceLoc loc;
};
using StmtPtr = std::shared_ptr<const Stmt>;
using Body = std::vector<StmtPtr>;

struct Arg {
  SourceLoc loc;
  std::string name;
  ExprPtr annotation;     // null when absent
  ExprPtr default_value;  // null when absent
};

struct FunctionDef : Stmt {  // decorators, def name(args) -> returns: body
  FunctionDef(SourceLoc loc, std::string name, std::vector<ExprPtr> decorators, std::vector<Arg> args, ExprPtr returns, Body body)
      : Stmt(StmtKind::FunctionDef, std::move(loc)), name(std::move(name)), decorators(std::move(decorators)),
        args(std::move(args)), returns(std::move(returns)), body(std::move(body)) {}
  std::string name;
  std::vector<ExprPtr> decorators;
  std::vector<Arg> args;
  ExprPtr returns;  // null when absent
  Body body;
};
struct ReturnStmt : Stmt {
  ReturnStmt(SourceLoc loc, ExprPtr value) : Stmt(StmtKind::Return, std::move(loc)), value(std::move(value)) {}
  ExprPtr value;  // null for a bare return
};
struct AssignStmt : Stmt {  // t0 = t1 = value
  AssignStmt(SourceLoc loc, std::vector<ExprPtr> targets, ExprPtr value)
      : Stmt(StmtKind::Assign, std::move(loc)), targets(std::move(targets)), value(std::move(value)) {}
  std::vector<ExprPtr> targets;
  ExprPtr value;
};
struct AugAssignStmt : Stmt {  // target op= value
  AugAssignStmt(SourceLoc loc, ExprPtr target, BinOpKind op, ExprPtr value)
      : Stmt(StmtKind::AugAssign, std::move(loc)), target(std::move(target)), op(op), value(std::move(value)) {}
  ExprPtr target;
  BinOpKind op;
  ExprPtr value;
};
struct AnnAssignStmt : Stmt {  // target: annotation [= value]
  AnnAssignStmt(SourceLoc loc, ExprPtr target, ExprPtr annotation, ExprPtr value)
      : Stmt(StmtKind::AnnAssign, std::move(loc)), target(std::move(target)), annotation(std::move(annotation)), value(std::move(value)) {}
  ExprPtr target, annotation;
  ExprPtr value;  // null when absent
};
struct ForStmt : Stmt {  // for target in iter: body
  ForStmt(SourceLoc loc, ExprPtr target, ExprPtr iter, Body body)
      : Stmt(StmtKind::For, std::move(loc)), target(std::move(target)), iter(std::move(iter)), body(std::move(body)) {}
  ExprPtr target, iter;
  Body body;
};
struct WhileStmt : Stmt {
  WhileStmt(SourceLoc loc, ExprPtr test, Body body)
      : Stmt(StmtKind::While, std::move(loc)), test(std::move(test)), body(std::move(body)) {}
  ExprPtr test;
  Body body;
};
struct IfStmt : Stmt {  // elif chains are nested IfStmts in orelse
  IfStmt(SourceLoc loc, ExprPtr test, Body body, Body orelse)
      : Stmt(StmtKind::If, std::move(loc)), test(std::move(test)), body(std::move(body)), orelse(std::move(orelse)) {}
  ExprPtr test;
  Body body, orelse;
};
struct WithItem {
  ExprPtr context;
  ExprPtr target;  // the `as` target; null when absent
};
struct WithStmt : Stmt {
  WithStmt(SourceLoc loc, std::vector<WithItem> items, Body body)
      : Stmt(StmtKind::With, std::move(loc)), items(std::move(items)), body(std::move(body)) {}
  std::vector<WithItem> items;
  Body body;
};
struct ExprStmt : Stmt {
  ExprStmt(SourceLoc loc, ExprPtr value) : Stmt(StmtKind::ExprStmt, std::move(loc)), value(std::move(value)) {}
  ExprPtr value;
};
struct SimpleStmt : Stmt {  // pass, break, continue
  SimpleStmt(StmtKind kind, SourceLoc loc) : Stmt(kind, std::move(loc)) {}
};
struct ImportAlias {
  SourceLoc loc;
  std::string name;    // dotted module path, or the imported name for `from`
  std::string asname;  // empty when absent
};
struct ImportStmt : Stmt {  // import a.b as c, d
  ImportStmt(SourceLoc loc, std::vector<ImportAlias> names) : Stmt(StmtKind::Import, std::move(loc)), names(std::move(names)) {}
  std::vector<ImportAlias> names;
};
struct ImportFromStmt : Stmt {  // from a.b import c as d, *  ("*" is a name)
  ImportFromStmt(SourceLoc loc, std::string module, std::vector<ImportAlias> names)
      : Stmt(StmtKind::ImportFrom, std::move(loc)), module(std::move(module)), names(std::move(names)) {}
  std::string module;
  std::vector<ImportAlias> names;
};
struct AssertStmt : Stmt {
  AssertStmt(SourceLoc loc, ExprPtr test, ExprPtr msg)
      : Stmt(StmtKind::Assert, std::move(loc)), test(std::move(test)), msg(std::move(msg)) {}
  ExprPtr test;
  ExprPtr msg;  // null when absent
};

struct Module {
  std::shared_ptr<const SourceFile> file;
  Body body;
};

// Parses a whole file; a syntax error is a user error at its location (error_at).
std::shared_ptr<const Module> parse(std::shared_ptr<const SourceFile> file);

// The tree as indented text, one node a line with its line:col; the `--emit=ast` stage.
std::string print(const Module& module);
std::string print(const Expr& expr);  // as Python source, for messages ("a[i, k]")

}  // namespace tilelang::ast
