// The recursive-descent parser of the kernel language (a subset of Python 3). Each parse function has
// the grammar rule it reads written above it; the rules follow Python's grammar, minus what kernels
// do not support, which is rejected with a "... is not supported in kernels" error where it starts.
// Every node gets the location of its first token (for `(a + b) * c` that is the '(').
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "rt/error.h"
#include "tilelang/frontend/ast.h"
#include "tilelang/frontend/lexer.h"

namespace tilelang::ast {

using frontend::Token;
using frontend::TokenKind;
using frontend::describe;
using frontend::is_keyword;
using frontend::is_operator;
using frontend::spelling;
using frontend::tokenize;

namespace {

using TK = TokenKind;

class Parser {
 public:
  explicit Parser(std::shared_ptr<const SourceFile> file) : file_(file), toks_(tokenize(file)) {}

  // file: statement* END
  std::shared_ptr<const Module> parse_file() {
    auto module = std::make_shared<Module>();
    module->file = file_;
    while (!check(TK::End)) parse_statement(module->body);
    return module;
  }

 private:
  // ------------------------------------------------------------ token helpers

  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  bool check(TK kind, size_t k = 0) const { return peek(k).kind == kind; }
  const Token& advance() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(TK kind) {
    if (!check(kind)) return false;
    advance();
    return true;
  }
  [[noreturn]] void fail(const SourceLoc& loc, const std::string& message) const { error_at(loc, message); }
  // "expected <what>, found <the next token>" at the next token.
  [[noreturn]] void fail_expected(const std::string& what) const {
    fail(peek().loc, rt::str("expected ", what, ", found ", describe(peek())));
  }
  // Consumes a token of the kind or fails with "expected 'X' <context>, found Y".
  const Token& expect(TK kind, const std::string& context) {
    if (!check(kind)) {
      std::string what = is_operator(kind) || is_keyword(kind) ? rt::str("'", spelling(kind), "'") : spelling(kind);
      fail_expected(context.empty() ? what : what + " " + context);
    }
    return advance();
  }
  // Consumes a NAME or fails with "expected <what>, found Y".
  const Token& expect_name(const std::string& what) {
    if (!check(TK::Name)) fail_expected(what);
    return advance();
  }
  [[noreturn]] void unsupported(const SourceLoc& loc, const std::string& what) const {
    fail(loc, what + " not supported in kernels");
  }
  static std::string line_of(const Token& t) { return std::to_string(t.loc.line); }

  // Whether the token can begin an expression (including the ones rejected later with a clear error).
  static bool starts_expression(const Token& t) {
    switch (t.kind) {
      case TK::Name: case TK::Int: case TK::Float: case TK::String: case TK::KwTrue: case TK::KwFalse:
      case TK::KwNone: case TK::LParen: case TK::LBracket: case TK::LBrace: case TK::Minus: case TK::Plus:
      case TK::Tilde: case TK::KwNot: case TK::KwLambda: case TK::KwAwait: case TK::KwYield: case TK::Star:
      case TK::DoubleStar: case TK::Ellipsis:
        return true;
      default:
        return false;
    }
  }

  // Bounds the recursion, so that absurdly nested source is an error and not a stack overflow.
  static constexpr int kMaxDepth = 600;
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > kMaxDepth)
        p->fail(p->peek().loc, rt::str("the code is nested too deeply here (more than ", kMaxDepth,
                                       " levels of blocks, brackets and operators)"));
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  // Bounds the depth of expression trees, which loops (a + b + c ..., a.b.c ...) grow without
  // recursing: later passes recurse over them, and so does destroying them.
  static constexpr int kMaxExprDepth = 1000;
  ExprPtr tracked(ExprPtr e) {
    int d = 0;
    auto see = [&](const ExprPtr& c) {
      if (!c) return;
      auto it = expr_depth_.find(c.get());
      d = std::max(d, it == expr_depth_.end() ? 1 : it->second);
    };
    auto see_all = [&](const std::vector<ExprPtr>& v) {
      for (const ExprPtr& c : v) see(c);
    };
    switch (e->kind) {
      case ExprKind::Tuple: see_all(e->as<TupleExpr>().elts); break;
      case ExprKind::List: see_all(e->as<ListExpr>().elts); break;
      case ExprKind::Dict: see_all(e->as<DictExpr>().keys), see_all(e->as<DictExpr>().values); break;
      case ExprKind::Attribute: see(e->as<AttributeExpr>().value); break;
      case ExprKind::Subscript: see(e->as<SubscriptExpr>().value), see_all(e->as<SubscriptExpr>().indices); break;
      case ExprKind::Slice: see(e->as<SliceExpr>().lower), see(e->as<SliceExpr>().upper), see(e->as<SliceExpr>().step); break;
      case ExprKind::Call:
        see(e->as<CallExpr>().func), see_all(e->as<CallExpr>().args);
        for (const Keyword& k : e->as<CallExpr>().keywords) see(k.value);
        break;
      case ExprKind::BinOp: see(e->as<BinOpExpr>().lhs), see(e->as<BinOpExpr>().rhs); break;
      case ExprKind::UnaryOp: see(e->as<UnaryOpExpr>().operand); break;
      case ExprKind::BoolOp: see_all(e->as<BoolOpExpr>().values); break;
      case ExprKind::Compare: see(e->as<CompareExpr>().left), see_all(e->as<CompareExpr>().comparators); break;
      case ExprKind::IfExp: see(e->as<IfExpExpr>().test), see(e->as<IfExpExpr>().body), see(e->as<IfExpExpr>().orelse); break;
      default: break;
    }
    if (++d > kMaxExprDepth)
      fail(e->loc, rt::str("this expression is nested too deeply (more than ", kMaxExprDepth,
                           " levels of operators, calls and brackets); split it into several statements"));
    expr_depth_[e.get()] = d;
    return e;
  }

  // ------------------------------------------------------------ statements

  // statement: compound_stmt | simple_stmts
  // compound_stmt: decorated_def | funcdef | if_stmt | for_stmt | while_stmt | with_stmt
  void parse_statement(Body& out) {
    DepthGuard guard(this);
    const Token& t = peek();
    switch (t.kind) {
      case TK::At: case TK::KwDef: out.push_back(parse_funcdef()); return;
      case TK::KwIf: out.push_back(parse_if(advance())); return;
      case TK::KwFor: out.push_back(parse_for()); return;
      case TK::KwWhile: out.push_back(parse_while()); return;
      case TK::KwWith: out.push_back(parse_with()); return;
      case TK::Indent: fail(t.loc, "unexpected indent");
      case TK::Dedent: fail(t.loc, "unexpected unindent");
      case TK::KwClass: unsupported(t.loc, "class definitions are");
      case TK::KwTry: unsupported(t.loc, "try statements are");
      case TK::KwExcept: case TK::KwFinally:
        unsupported(t.loc, rt::str("try statements ('", t.text, "') are"));
      case TK::KwAsync: unsupported(t.loc, "async functions and statements are");
      case TK::KwElif: case TK::KwElse:
        fail(t.loc, rt::str("'", t.text, "' here does not follow an 'if' block at the same indentation"));
      default: parse_simple_statements(out); return;
    }
  }

  // simple_stmts: simple_stmt (';' simple_stmt)* [';'] NEWLINE
  void parse_simple_statements(Body& out) {
    while (true) {
      out.push_back(parse_simple_statement());
      if (!accept(TK::Semicolon)) break;
      if (check(TK::Newline)) break;
    }
    if (!check(TK::Newline)) {
      if (check(TK::ColonEqual)) unsupported(peek().loc, "assignment expressions (:=) are");
      fail_expected("NEWLINE after the statement");
    }
    advance();
  }

  // simple_stmt: return_stmt | import_name | import_from | assert_stmt | 'pass' | 'break' | 'continue'
  //            | expr_or_assign_stmt
  StmtPtr parse_simple_statement() {
    const Token& t = peek();
    switch (t.kind) {
      case TK::KwReturn: return parse_return();
      case TK::KwImport: return parse_import();
      case TK::KwFrom: return parse_import_from();
      case TK::KwAssert: return parse_assert();
      case TK::KwPass: advance(); return std::make_shared<SimpleStmt>(StmtKind::Pass, t.loc);
      case TK::KwBreak: advance(); return std::make_shared<SimpleStmt>(StmtKind::Break, t.loc);
      case TK::KwContinue: advance(); return std::make_shared<SimpleStmt>(StmtKind::Continue, t.loc);
      case TK::KwRaise: unsupported(t.loc, "raise statements are");
      case TK::KwDel: unsupported(t.loc, "del statements are");
      case TK::KwGlobal: unsupported(t.loc, "global declarations are");
      case TK::KwNonlocal: unsupported(t.loc, "nonlocal declarations are");
      default: return parse_expr_or_assign();
    }
  }

  // block: NEWLINE INDENT statement+ DEDENT | simple_stmts
  Body parse_block(const Token& header) {
    Body body;
    if (!accept(TK::Newline)) {
      parse_simple_statements(body);
      return body;
    }
    if (!check(TK::Indent))
      fail_expected(rt::str("an indented block after the '", header.text, "' statement on line ", line_of(header)));
    advance();
    while (!check(TK::Dedent) && !check(TK::End)) parse_statement(body);
    expect(TK::Dedent, "at the end of the block");
    return body;
  }

  // decorated_def: ('@' expression NEWLINE)+ funcdef
  // funcdef: 'def' NAME '(' [params] ')' ['->' expression] ':' block
  StmtPtr parse_funcdef() {
    SourceLoc loc = peek().loc;
    std::vector<ExprPtr> decorators;
    while (accept(TK::At)) {
      decorators.push_back(parse_expression());
      expect(TK::Newline, "after the decorator");
    }
    if (check(TK::KwClass)) unsupported(peek().loc, "class definitions are");
    if (check(TK::KwAsync)) unsupported(peek().loc, "async functions are");
    const Token& def = expect(TK::KwDef, decorators.empty() ? "" : "after the decorators");
    std::string name = expect_name("a function name after 'def'").text;
    expect(TK::LParen, rt::str("after the function name '", name, "'"));
    std::vector<Arg> args = parse_params();
    ExprPtr returns;
    if (accept(TK::Arrow)) returns = parse_expression();
    expect(TK::Colon, "after the function signature");
    Body body = parse_block(def);
    return std::make_shared<FunctionDef>(loc, std::move(name), std::move(decorators), std::move(args), std::move(returns),
                                         std::move(body));
  }

  // params: param (',' param)* [','] ')'
  // param: NAME [':' expression] ['=' expression]
  std::vector<Arg> parse_params() {
    std::vector<Arg> args;
    std::set<std::string> seen;
    while (!accept(TK::RParen)) {
      const Token& t = peek();
      if (t.kind == TK::Star) {
        if (check(TK::Name, 1)) unsupported(t.loc, "variadic parameters (*" + peek(1).text + ") are");
        unsupported(t.loc, "keyword-only parameters (a bare '*' marker) are");
      }
      if (t.kind == TK::DoubleStar) unsupported(t.loc, "keyword variadic parameters (**kwargs) are");
      if (t.kind == TK::Slash) unsupported(t.loc, "positional-only parameters (a '/' marker) are");
      const Token& name = expect_name("a parameter name");
      if (!seen.insert(name.text).second) fail(name.loc, "duplicate parameter '" + name.text + "' in the function definition");
      Arg arg{name.loc, name.text, nullptr, nullptr};
      if (accept(TK::Colon)) arg.annotation = parse_expression();
      if (accept(TK::Equal)) {
        arg.default_value = parse_expression();
      } else if (!args.empty() && args.back().default_value) {
        fail(name.loc, "parameter '" + name.text + "' without a default follows a parameter with a default");
      }
      args.push_back(std::move(arg));
      if (!accept(TK::Comma)) {
        expect(TK::RParen, "or ',' in the parameter list");
        break;
      }
    }
    return args;
  }

  // return_stmt: 'return' [star_expressions]
  StmtPtr parse_return() {
    const Token& kw = advance();
    ExprPtr value;
    if (starts_expression(peek())) value = parse_star_expressions();
    return std::make_shared<ReturnStmt>(kw.loc, std::move(value));
  }

  // if_stmt: 'if' expression ':' block ('elif' expression ':' block)* ['else' ':' block]
  // (an elif is an IfStmt in the orelse of the one before; `kw` is the 'if' or 'elif' just read)
  StmtPtr parse_if(const Token& kw) {
    DepthGuard guard(this);  // elif chains recurse
    ExprPtr test = parse_named_expression();
    expect(TK::Colon, rt::str("after the ", kw.text, " header"));
    Body body = parse_block(kw);
    Body orelse;
    if (check(TK::KwElif)) {
      orelse.push_back(parse_if(advance()));
    } else if (check(TK::KwElse)) {
      const Token& e = advance();
      expect(TK::Colon, "after 'else'");
      orelse = parse_block(e);
    }
    return std::make_shared<IfStmt>(kw.loc, std::move(test), std::move(body), std::move(orelse));
  }

  // for_stmt: 'for' star_targets 'in' star_expressions ':' block
  StmtPtr parse_for() {
    const Token& kw = advance();
    ExprPtr target = parse_targets();
    check_target(*target, "a loop variable");
    expect(TK::KwIn, "after the for target");
    ExprPtr iter = parse_star_expressions();
    expect(TK::Colon, "after the for header");
    Body body = parse_block(kw);
    reject_loop_else("for");
    return std::make_shared<ForStmt>(kw.loc, std::move(target), std::move(iter), std::move(body));
  }

  // while_stmt: 'while' expression ':' block
  StmtPtr parse_while() {
    const Token& kw = advance();
    ExprPtr test = parse_named_expression();
    expect(TK::Colon, "after the while header");
    Body body = parse_block(kw);
    reject_loop_else("while");
    return std::make_shared<WhileStmt>(kw.loc, std::move(test), std::move(body));
  }

  void reject_loop_else(const char* loop) const {
    if (check(TK::KwElse)) unsupported(peek().loc, rt::str("'else' clauses on ", loop, " loops are"));
  }

  // with_stmt: 'with' with_item (',' with_item)* ':' block
  // with_item: expression ['as' star_target]     (a tuple target needs parentheses: `as (bx, by)`)
  StmtPtr parse_with() {
    const Token& kw = advance();
    std::vector<WithItem> items;
    do {
      WithItem item;
      item.context = parse_expression();
      if (accept(TK::KwAs)) {
        item.target = parse_target();
        check_target(*item.target, "a with target");
      }
      items.push_back(std::move(item));
    } while (accept(TK::Comma));
    expect(TK::Colon, "after the with header");
    Body body = parse_block(kw);
    return std::make_shared<WithStmt>(kw.loc, std::move(items), std::move(body));
  }

  // import_name: 'import' dotted_as_name (',' dotted_as_name)*
  // dotted_as_name: dotted_name ['as' NAME]
  StmtPtr parse_import() {
    const Token& kw = advance();
    std::vector<ImportAlias> names;
    do {
      ImportAlias alias;
      alias.loc = peek().loc;
      alias.name = parse_dotted_name("after 'import'");
      if (accept(TK::KwAs)) alias.asname = expect_name("a name after 'as'").text;
      names.push_back(std::move(alias));
    } while (accept(TK::Comma));
    return std::make_shared<ImportStmt>(kw.loc, std::move(names));
  }

  // dotted_name: NAME ('.' NAME)*
  std::string parse_dotted_name(const char* context) {
    std::string name = expect_name(rt::str("a module name ", context)).text;
    while (accept(TK::Dot)) name += "." + expect_name("a name after '.' in the module name").text;
    return name;
  }

  // import_from: 'from' dotted_name 'import' ('*' | import_as_names | '(' import_as_names [','] ')')
  // import_as_names: NAME ['as' NAME] (',' NAME ['as' NAME])*
  StmtPtr parse_import_from() {
    const Token& kw = advance();
    if (check(TK::Dot) || check(TK::Ellipsis)) unsupported(peek().loc, "relative imports are");
    std::string module = parse_dotted_name("after 'from'");
    expect(TK::KwImport, "after the module name");
    std::vector<ImportAlias> names;
    if (check(TK::Star)) {
      const Token& star = advance();
      names.push_back(ImportAlias{star.loc, "*", ""});
    } else {
      bool paren = accept(TK::LParen);
      while (true) {
        const Token& name = expect_name("a name to import");
        ImportAlias alias{name.loc, name.text, ""};
        if (accept(TK::KwAs)) alias.asname = expect_name("a name after 'as'").text;
        names.push_back(std::move(alias));
        if (!accept(TK::Comma)) break;
        if (paren && check(TK::RParen)) break;
      }
      if (paren) expect(TK::RParen, "or ',' after the imported names");
    }
    return std::make_shared<ImportFromStmt>(kw.loc, std::move(module), std::move(names));
  }

  // assert_stmt: 'assert' expression [',' expression]
  StmtPtr parse_assert() {
    const Token& kw = advance();
    ExprPtr test = parse_expression();
    ExprPtr msg;
    if (accept(TK::Comma)) msg = parse_expression();
    return std::make_shared<AssertStmt>(kw.loc, std::move(test), std::move(msg));
  }

  // expr_or_assign_stmt:
  //     star_expressions ('=' star_expressions)+          # assignment, chained: a = b = c
  //   | single_target augassign star_expressions           # a += 1
  //   | single_target ':' expression ['=' star_expressions] # x: T.int32 = 0
  //   | star_expressions                                  # expression statement
  // augassign: '+=' | '-=' | '*=' | '@=' | '/=' | '%=' | '&=' | '|=' | '^=' | '<<=' | '>>=' | '**=' | '//='
  StmtPtr parse_expr_or_assign() {
    SourceLoc loc = peek().loc;
    ExprPtr first = parse_star_expressions();
    if (check(TK::Equal)) {
      std::vector<ExprPtr> exprs{first};
      while (accept(TK::Equal)) exprs.push_back(parse_star_expressions());
      ExprPtr value = exprs.back();
      exprs.pop_back();
      for (const ExprPtr& t : exprs) check_target(*t, kAssignTarget);
      return std::make_shared<AssignStmt>(loc, std::move(exprs), std::move(value));
    }
    if (auto op = augassign_op(peek().kind)) {
      const Token& tok = advance();
      if (first->kind != ExprKind::Name && first->kind != ExprKind::Attribute && first->kind != ExprKind::Subscript)
        fail(first->loc, rt::str("the target of '", tok.text, "' must be a single name, attribute or subscript, not ",
                                 what_is(*first)));
      ExprPtr value = parse_star_expressions();
      return std::make_shared<AugAssignStmt>(loc, std::move(first), *op, std::move(value));
    }
    if (check(TK::Colon)) {
      advance();  // ':'
      if (first->kind == ExprKind::Tuple || first->kind == ExprKind::List)
        fail(first->loc, "only a single target (not a tuple or list) can be annotated");
      if (first->kind != ExprKind::Name && first->kind != ExprKind::Attribute && first->kind != ExprKind::Subscript)
        fail(first->loc, rt::str("cannot annotate ", what_is(*first)));
      ExprPtr annotation = parse_expression();
      ExprPtr value;
      if (accept(TK::Equal)) value = parse_star_expressions();
      return std::make_shared<AnnAssignStmt>(loc, std::move(first), std::move(annotation), std::move(value));
    }
    return std::make_shared<ExprStmt>(loc, std::move(first));
  }

  static std::optional<BinOpKind> augassign_op(TK kind) {
    switch (kind) {
      case TK::PlusEqual: return BinOpKind::Add;
      case TK::MinusEqual: return BinOpKind::Sub;
      case TK::StarEqual: return BinOpKind::Mul;
      case TK::SlashEqual: return BinOpKind::Div;
      case TK::DoubleSlashEqual: return BinOpKind::FloorDiv;
      case TK::PercentEqual: return BinOpKind::Mod;
      case TK::DoubleStarEqual: return BinOpKind::Pow;
      case TK::AtEqual: return BinOpKind::MatMul;
      case TK::LShiftEqual: return BinOpKind::LShift;
      case TK::RShiftEqual: return BinOpKind::RShift;
      case TK::PipeEqual: return BinOpKind::BitOr;
      case TK::CaretEqual: return BinOpKind::BitXor;
      case TK::AmpEqual: return BinOpKind::BitAnd;
      default: return std::nullopt;
    }
  }

  // What an expression is, for "cannot assign to ..." messages.
  static std::string what_is(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Name: return "a name";
      case ExprKind::Int: case ExprKind::Float: case ExprKind::Str: return "a literal";
      case ExprKind::Bool: return e.as<BoolExpr>().value ? "True" : "False";
      case ExprKind::None: return "None";
      case ExprKind::Tuple: return "a tuple";
      case ExprKind::List: return "a list";
      case ExprKind::Dict: return "a dict";
      case ExprKind::Attribute: return "an attribute";
      case ExprKind::Subscript: return "a subscript";
      case ExprKind::Slice: return "a slice";
      case ExprKind::Call: return "a function call";
      case ExprKind::BinOp: case ExprKind::UnaryOp: return "an expression";
      case ExprKind::BoolOp: return "a boolean expression";
      case ExprKind::Compare: return "a comparison";
      case ExprKind::IfExp: return "a conditional expression";
    }
    return "an expression";
  }

  static constexpr const char* kAssignTarget = "an assignment target";

  // Targets are names, attributes, subscripts, and tuples or lists of targets.
  void check_target(const Expr& e, const char* role) const {
    bool assignment = std::string(role) == kAssignTarget;
    switch (e.kind) {
      case ExprKind::Name: case ExprKind::Attribute: case ExprKind::Subscript: return;
      case ExprKind::Tuple:
        for (const ExprPtr& x : e.as<TupleExpr>().elts) check_target(*x, role);
        return;
      case ExprKind::List:
        for (const ExprPtr& x : e.as<ListExpr>().elts) check_target(*x, role);
        return;
      default: {
        std::string msg = rt::str("cannot use ", what_is(e), " (", print(e), ") as ", role);
        if (assignment && (e.kind == ExprKind::Call || e.kind == ExprKind::Compare))
          msg += "; did you mean '==' instead of '='?";
        fail(e.loc, msg);
      }
    }
  }

  // ------------------------------------------------------------ targets

  // star_targets: target (',' target)* [',']     (a Tuple when there is a comma)
  ExprPtr parse_targets() {
    SourceLoc loc = peek().loc;
    ExprPtr first = parse_target();
    if (!check(TK::Comma)) return first;
    std::vector<ExprPtr> elts{first};
    while (accept(TK::Comma)) {
      if (!starts_expression(peek())) break;
      elts.push_back(parse_target());
    }
    return tracked(std::make_shared<TupleExpr>(loc, std::move(elts)));
  }

  // target: bitor   (checked to be a name, attribute, subscript, or a tuple or list of targets)
  ExprPtr parse_target() {
    if (check(TK::Star)) unsupported(peek().loc, "starred targets (*x) are");
    return parse_bitor();
  }

  // ------------------------------------------------------------ expressions

  // star_expressions: star_expression (',' star_expression)* [',']   (a Tuple when there is a comma)
  ExprPtr parse_star_expressions() {
    SourceLoc loc = peek().loc;
    ExprPtr first = parse_star_expression();
    if (!check(TK::Comma)) return first;
    std::vector<ExprPtr> elts{first};
    while (accept(TK::Comma)) {
      if (!starts_expression(peek())) break;
      elts.push_back(parse_star_expression());
    }
    return tracked(std::make_shared<TupleExpr>(loc, std::move(elts)));
  }

  // star_expression: '*' bitor (rejected) | expression
  ExprPtr parse_star_expression() {
    if (check(TK::Star)) unsupported(peek().loc, "starred expressions (*x) are");
    if (check(TK::DoubleStar)) unsupported(peek().loc, "dict unpacking (**x) is");
    return parse_named_expression();
  }

  // named_expression: expression   (NAME ':=' expression is rejected)
  ExprPtr parse_named_expression() {
    ExprPtr e = parse_expression();
    if (check(TK::ColonEqual)) unsupported(peek().loc, "assignment expressions (:=) are");
    return e;
  }

  // expression: disjunction ['if' disjunction 'else' expression] | lambda (rejected)
  ExprPtr parse_expression() {
    DepthGuard guard(this);
    SourceLoc loc = peek().loc;
    if (check(TK::KwLambda)) unsupported(loc, "lambda expressions are");
    if (check(TK::KwYield)) unsupported(loc, "yield expressions are");
    ExprPtr body = parse_disjunction();
    if (!accept(TK::KwIf)) return body;
    ExprPtr test = parse_disjunction();
    expect(TK::KwElse, "in the conditional expression (a if cond else b)");
    ExprPtr orelse = parse_expression();
    return tracked(std::make_shared<IfExpExpr>(loc, std::move(test), std::move(body), std::move(orelse)));
  }

  // disjunction: conjunction ('or' conjunction)*
  ExprPtr parse_disjunction() {
    SourceLoc loc = peek().loc;
    ExprPtr first = parse_conjunction();
    if (!check(TK::KwOr)) return first;
    std::vector<ExprPtr> values{first};
    while (accept(TK::KwOr)) values.push_back(parse_conjunction());
    return tracked(std::make_shared<BoolOpExpr>(loc, BoolOpKind::Or, std::move(values)));
  }

  // conjunction: inversion ('and' inversion)*
  ExprPtr parse_conjunction() {
    SourceLoc loc = peek().loc;
    ExprPtr first = parse_inversion();
    if (!check(TK::KwAnd)) return first;
    std::vector<ExprPtr> values{first};
    while (accept(TK::KwAnd)) values.push_back(parse_inversion());
    return tracked(std::make_shared<BoolOpExpr>(loc, BoolOpKind::And, std::move(values)));
  }

  // inversion: 'not' inversion | comparison
  ExprPtr parse_inversion() {
    DepthGuard guard(this);
    if (check(TK::KwNot)) {
      const Token& kw = advance();
      return tracked(std::make_shared<UnaryOpExpr>(kw.loc, UnaryOpKind::Not, parse_inversion()));
    }
    return parse_comparison();
  }

  // comparison: bitor (comp_op bitor)*
  // comp_op: '==' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not' 'in' | 'is' | 'is' 'not'
  ExprPtr parse_comparison() {
    SourceLoc loc = peek().loc;
    ExprPtr left = parse_bitor();
    std::vector<CmpOpKind> ops;
    std::vector<ExprPtr> comparators;
    while (true) {
      std::optional<CmpOpKind> op;
      switch (peek().kind) {
        case TK::EqEqual: op = CmpOpKind::Eq; break;
        case TK::NotEqual: op = CmpOpKind::NotEq; break;
        case TK::Less: op = CmpOpKind::Lt; break;
        case TK::LessEqual: op = CmpOpKind::LtE; break;
        case TK::Greater: op = CmpOpKind::Gt; break;
        case TK::GreaterEqual: op = CmpOpKind::GtE; break;
        case TK::KwIn: op = CmpOpKind::In; break;
        case TK::KwIs: op = check(TK::KwNot, 1) ? CmpOpKind::IsNot : CmpOpKind::Is; break;
        case TK::KwNot:
          if (check(TK::KwIn, 1)) op = CmpOpKind::NotIn;
          break;
        default: break;
      }
      if (!op) break;
      advance();
      if (*op == CmpOpKind::IsNot || *op == CmpOpKind::NotIn) advance();
      ops.push_back(*op);
      comparators.push_back(parse_bitor());
    }
    if (ops.empty()) return left;
    return tracked(std::make_shared<CompareExpr>(loc, std::move(left), std::move(ops), std::move(comparators)));
  }

  // One left-associative binary level: operand (op operand)*.
  template <class Next>
  ExprPtr parse_binary(Next next, std::optional<BinOpKind> (*op_of)(TK)) {
    SourceLoc loc = peek().loc;
    ExprPtr lhs = (this->*next)();
    while (auto op = op_of(peek().kind)) {
      advance();
      ExprPtr rhs = (this->*next)();
      lhs = tracked(std::make_shared<BinOpExpr>(loc, *op, std::move(lhs), std::move(rhs)));
    }
    return lhs;
  }

  // bitor: bitxor ('|' bitxor)*
  ExprPtr parse_bitor() {
    return parse_binary(&Parser::parse_bitxor, [](TK k) -> std::optional<BinOpKind> {
      if (k == TK::Pipe) return BinOpKind::BitOr;
      return std::nullopt;
    });
  }
  // bitxor: bitand ('^' bitand)*
  ExprPtr parse_bitxor() {
    return parse_binary(&Parser::parse_bitand, [](TK k) -> std::optional<BinOpKind> {
      if (k == TK::Caret) return BinOpKind::BitXor;
      return std::nullopt;
    });
  }
  // bitand: shift_expr ('&' shift_expr)*
  ExprPtr parse_bitand() {
    return parse_binary(&Parser::parse_shift, [](TK k) -> std::optional<BinOpKind> {
      if (k == TK::Amp) return BinOpKind::BitAnd;
      return std::nullopt;
    });
  }
  // shift_expr: sum (('<<' | '>>') sum)*
  ExprPtr parse_shift() {
    return parse_binary(&Parser::parse_sum, [](TK k) -> std::optional<BinOpKind> {
      if (k == TK::LShift) return BinOpKind::LShift;
      if (k == TK::RShift) return BinOpKind::RShift;
      return std::nullopt;
    });
  }
  // sum: term (('+' | '-') term)*
  ExprPtr parse_sum() {
    return parse_binary(&Parser::parse_term, [](TK k) -> std::optional<BinOpKind> {
      if (k == TK::Plus) return BinOpKind::Add;
      if (k == TK::Minus) return BinOpKind::Sub;
      return std::nullopt;
    });
  }
  // term: factor (('*' | '/' | '//' | '%' | '@') factor)*
  ExprPtr parse_term() {
    return parse_binary(&Parser::parse_factor, [](TK k) -> std::optional<BinOpKind> {
      if (k == TK::Star) return BinOpKind::Mul;
      if (k == TK::Slash) return BinOpKind::Div;
      if (k == TK::DoubleSlash) return BinOpKind::FloorDiv;
      if (k == TK::Percent) return BinOpKind::Mod;
      if (k == TK::At) return BinOpKind::MatMul;
      return std::nullopt;
    });
  }

  // factor: ('+' | '-' | '~') factor | power
  ExprPtr parse_factor() {
    DepthGuard guard(this);
    const Token& t = peek();
    std::optional<UnaryOpKind> op;
    if (t.kind == TK::Minus) op = UnaryOpKind::Neg;
    if (t.kind == TK::Plus) op = UnaryOpKind::Pos;
    if (t.kind == TK::Tilde) op = UnaryOpKind::Invert;
    if (!op) return parse_power();
    advance();
    return tracked(std::make_shared<UnaryOpExpr>(t.loc, *op, parse_factor()));
  }

  // power: primary ['**' factor]        (so -2**2 is -(2**2) and 2**-1 is 2**(-1); right associative)
  ExprPtr parse_power() {
    SourceLoc loc = peek().loc;
    if (check(TK::KwAwait)) unsupported(loc, "await expressions are");
    ExprPtr base = parse_primary();
    if (!accept(TK::DoubleStar)) return base;
    ExprPtr exponent = parse_factor();
    return tracked(std::make_shared<BinOpExpr>(loc, BinOpKind::Pow, std::move(base), std::move(exponent)));
  }

  // primary: atom ('.' NAME | '(' [arguments] ')' | '[' slices ']')*
  ExprPtr parse_primary() {
    SourceLoc loc = peek().loc;
    ExprPtr e = parse_atom();
    while (true) {
      if (accept(TK::Dot)) {
        e = tracked(std::make_shared<AttributeExpr>(loc, std::move(e), expect_name("an attribute name after '.'").text));
      } else if (check(TK::LParen)) {
        e = parse_call(loc, std::move(e));
      } else if (check(TK::LBracket)) {
        e = parse_subscript(loc, std::move(e));
      } else {
        return e;
      }
    }
  }

  // call: primary '(' [arguments] ')'
  // arguments: argument (',' argument)* [',']
  // argument: NAME '=' expression | expression     (positional ones first; *a and **k rejected)
  ExprPtr parse_call(const SourceLoc& loc, ExprPtr func) {
    const Token& open = advance();
    std::vector<ExprPtr> args;
    std::vector<Keyword> keywords;
    while (!check(TK::RParen)) {
      const Token& t = peek();
      if (t.kind == TK::Star) unsupported(t.loc, "argument unpacking (*args) is");
      if (t.kind == TK::DoubleStar) unsupported(t.loc, "keyword argument unpacking (**kwargs) is");
      if (t.kind == TK::Name && check(TK::Equal, 1)) {
        advance();
        advance();
        for (const Keyword& k : keywords)
          if (k.name == t.text) fail(t.loc, "keyword argument repeated: " + t.text);
        keywords.push_back(Keyword{t.loc, t.text, parse_expression()});
      } else {
        ExprPtr arg = parse_named_expression();
        if (check(TK::KwFor) || check(TK::KwAsync)) unsupported(arg->loc, "generator expressions are");
        if (check(TK::Equal))
          fail(arg->loc, rt::str("a keyword argument needs a plain name before '=', not ", what_is(*arg), " (",
                                 print(*arg), "); did you mean '=='?"));
        if (!keywords.empty()) fail(arg->loc, "positional argument follows keyword argument");
        args.push_back(std::move(arg));
      }
      if (!accept(TK::Comma)) break;
    }
    expect(TK::RParen, rt::str("or ',' in the argument list of the call opened at ", open.loc.line, ":", open.loc.col));
    return tracked(std::make_shared<CallExpr>(loc, std::move(func), std::move(args), std::move(keywords)));
  }

  // subscript: primary '[' slices ']'
  // slices: slice (',' slice)* [',']      (a[i, j] has two indices; a[(i, j)] one tuple index)
  ExprPtr parse_subscript(const SourceLoc& loc, ExprPtr value) {
    const Token& open = advance();
    std::vector<ExprPtr> indices;
    if (check(TK::RBracket)) fail_expected("an index expression inside '[]'");
    while (!check(TK::RBracket)) {
      indices.push_back(parse_slice());
      if (!accept(TK::Comma)) break;
    }
    expect(TK::RBracket, rt::str("or ',' after the index of the subscript opened at ", open.loc.line, ":", open.loc.col));
    return tracked(std::make_shared<SubscriptExpr>(loc, std::move(value), std::move(indices)));
  }

  // slice: [expression] ':' [expression] [':' [expression]] | expression
  ExprPtr parse_slice() {
    SourceLoc loc = peek().loc;
    ExprPtr lower;
    if (!check(TK::Colon)) {
      if (check(TK::Star)) unsupported(loc, "starred indices (*x) are");
      lower = parse_named_expression();
      if (!check(TK::Colon)) return lower;
    }
    advance();  // ':'
    auto part = [&]() -> ExprPtr {
      if (check(TK::Colon) || check(TK::Comma) || check(TK::RBracket)) return nullptr;
      return parse_expression();
    };
    ExprPtr upper = part();
    ExprPtr step;
    if (accept(TK::Colon)) step = part();
    return tracked(std::make_shared<SliceExpr>(loc, std::move(lower), std::move(upper), std::move(step)));
  }

  // atom: NAME | 'True' | 'False' | 'None' | NUMBER | STRING+ | '(' [group_or_tuple] ')' | '[' [list] ']' | dict
  ExprPtr parse_atom() {
    const Token& t = peek();
    switch (t.kind) {
      case TK::Name: advance(); return std::make_shared<NameExpr>(t.loc, t.text);
      case TK::Int: advance(); return std::make_shared<IntExpr>(t.loc, t.int_value);
      case TK::Float: advance(); return std::make_shared<FloatExpr>(t.loc, t.float_value);
      case TK::KwTrue: advance(); return std::make_shared<BoolExpr>(t.loc, true);
      case TK::KwFalse: advance(); return std::make_shared<BoolExpr>(t.loc, false);
      case TK::KwNone: advance(); return std::make_shared<NoneExpr>(t.loc);
      case TK::String: {
        std::string value;
        while (check(TK::String)) value += advance().text;  // "a" "b" is "ab"
        return std::make_shared<StrExpr>(t.loc, std::move(value));
      }
      case TK::LParen: return parse_paren();
      case TK::LBracket: return parse_list();
      case TK::LBrace: return parse_dict();
      case TK::Ellipsis: unsupported(t.loc, "the Ellipsis literal (...) is");
      case TK::KwLambda: unsupported(t.loc, "lambda expressions are");
      case TK::KwYield: unsupported(t.loc, "yield expressions are");
      case TK::KwAwait: unsupported(t.loc, "await expressions are");
      case TK::Indent: fail(t.loc, "unexpected indent");
      default: fail_expected("an expression");
    }
  }

  // dict: '{' [expression ':' expression (',' expression ':' expression)* [',']] '}'
  ExprPtr parse_dict() {
    const Token& open = advance();
    std::vector<ExprPtr> keys, values;
    while (!check(TK::RBrace)) {
      if (check(TK::DoubleStar)) unsupported(peek().loc, "dict unpacking (**x) is");
      ExprPtr key = parse_expression();
      if (!check(TK::Colon)) unsupported(open.loc, check(TK::KwFor) ? "set comprehensions are" : "set displays ({a, b}) are");
      advance();
      ExprPtr value = parse_expression();
      if (check(TK::KwFor) || check(TK::KwAsync)) unsupported(open.loc, "dict comprehensions are");
      keys.push_back(std::move(key));
      values.push_back(std::move(value));
      if (!accept(TK::Comma)) break;
    }
    expect(TK::RBrace, rt::str("or ',' in the dict opened at ", open.loc.line, ":", open.loc.col));
    return tracked(std::make_shared<DictExpr>(open.loc, std::move(keys), std::move(values)));
  }

  // group_or_tuple: '(' ')' | '(' star_named_expression ')' | '(' star_named_expression ',' [star_named_expressions] ')'
  ExprPtr parse_paren() {
    const Token& open = advance();
    if (accept(TK::RParen)) return tracked(std::make_shared<TupleExpr>(open.loc, std::vector<ExprPtr>{}));
    ExprPtr first = parse_star_expression();
    if (check(TK::KwFor) || check(TK::KwAsync)) unsupported(open.loc, "generator expressions are");
    if (!check(TK::Comma)) {
      expect(TK::RParen, rt::str("to close the '(' opened at ", open.loc.line, ":", open.loc.col));
      return first;
    }
    std::vector<ExprPtr> elts{first};
    while (accept(TK::Comma)) {
      if (check(TK::RParen)) break;
      elts.push_back(parse_star_expression());
    }
    expect(TK::RParen, rt::str("or ',' in the tuple opened at ", open.loc.line, ":", open.loc.col));
    return tracked(std::make_shared<TupleExpr>(open.loc, std::move(elts)));
  }

  // list: '[' [star_named_expression (',' star_named_expression)* [',']] ']'
  ExprPtr parse_list() {
    const Token& open = advance();
    std::vector<ExprPtr> elts;
    while (!check(TK::RBracket)) {
      elts.push_back(parse_star_expression());
      if (elts.size() == 1 && (check(TK::KwFor) || check(TK::KwAsync))) unsupported(open.loc, "list comprehensions are");
      if (!accept(TK::Comma)) break;
    }
    expect(TK::RBracket, rt::str("or ',' in the list opened at ", open.loc.line, ":", open.loc.col));
    return tracked(std::make_shared<ListExpr>(open.loc, std::move(elts)));
  }

  std::shared_ptr<const SourceFile> file_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::unordered_map<const Expr*, int> expr_depth_;  // of the composite nodes built so far
};

}  // namespace

std::shared_ptr<const Module> parse(std::shared_ptr<const SourceFile> file) {
  RT_ICHECK(file != nullptr, "parse needs a file");
  return Parser(std::move(file)).parse_file();
}

}  // namespace tilelang::ast
