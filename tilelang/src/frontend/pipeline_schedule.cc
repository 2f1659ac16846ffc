#include "frontend/pipeline_schedule.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "rt/error.h"
#include "tilelang/analysis/access.h"
#include "tilelang/diagnostics.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::frontend {
namespace {

// A group of the body, or one copy of a stage -1 group, as the schedule places it.
struct Unit {
  size_t group;               // its index in group=
  size_t first;               // its first statement's index in the body (the plain loop's order)
  std::vector<ir::Stmt> stmts;
  int64_t stage = 0;
  size_t position = 0;        // in the scheduled body
  bool copy = false;
  analysis::Accesses acc;
};

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += rt::str(i ? ", " : "", v[i]);
  return s + "]";
}

// A buffer that `a` writes and `b` touches, or that `a` reads and `b` writes; null if none.
const ir::BufferNode* conflict(const analysis::Accesses& a, const analysis::Accesses& b) {
  for (const ir::BufferNode* x : a.written)
    if (b.read.count(x) || b.written.count(x)) return x;
  for (const ir::BufferNode* x : a.read)
    if (b.written.count(x)) return x;
  return nullptr;
}

}  // namespace

ir::Stmt schedule_pipelined(const ir::Var& var, const ir::Expr& min, const ir::Expr& extent, const ir::Stmt& body, const PipelineSchedule& s,
                            const SourceLoc& loc, const ir::Pipelining& pipelining) {
  std::vector<ir::Stmt> stmts;
  if (const auto* seq = ir::as<ir::SeqNode>(body)) stmts = seq->stmts;
  else if (!ir::is_no_op(body)) stmts = {body};
  // The groups: runs of consecutive statements that together cover the body in order.
  size_t next = 0;
  for (size_t g = 0; g < s.group.size(); ++g) {
    const std::vector<int64_t>& idx = s.group[g];
    if (idx.empty()) error_at(s.group_loc, rt::str("T.Pipelined's group ", g, " is empty"));
    for (size_t i = 0; i < idx.size(); ++i)
      if (idx[i] != static_cast<int64_t>(next + i))
        error_at(s.group_loc, rt::str("T.Pipelined's groups must list the body's statements in order, as runs of consecutive indices: group ", g, " is ",
                                      list(idx), ", expected it to start at ", next));
    next += idx.size();
  }
  if (next != stmts.size())
    error_at(s.group_loc, rt::str("T.Pipelined's groups cover ", next, " statement", next == 1 ? "" : "s", " but the loop body has ", stmts.size()));
  // Orders: -1 exactly where the stage is -1, the others a permutation of 0 .. m-1.
  std::vector<size_t> by_order;
  for (size_t g = 0; g < s.group.size(); ++g) {
    if ((s.order[g] == -1) != (s.stage[g] == -1))
      error_at(s.order[g] == -1 ? s.stage_loc : s.order_loc, rt::str("T.Pipelined's group ", g, " has order ", s.order[g], " and stage ", s.stage[g],
                                                                  ": -1 (a copy the pipeline loads) goes in both or neither"));
    if (s.stage[g] < -1) error_at(s.stage_loc, rt::str("T.Pipelined's stage ", s.stage[g], " of group ", g, " is negative"));
    // The scheduled loop runs extent + (largest stage) steps on the loop's counter: that must not wrap
    // (a symbolic extent keeps half the counter's range).
    const int64_t counter_max = var->dtype == rt::DType::I64 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max();
    const auto cmin = ir::as_const_int(min), cext = ir::as_const_int(extent);
    const int64_t room = cmin && cext && *cmin >= 0 && *cext >= 0 && *cmin <= counter_max - *cext ? counter_max - *cmin - *cext : counter_max / 2;
    if (s.stage[g] > room || s.stage[g] > std::numeric_limits<int32_t>::max())
      error_at(s.stage_loc, rt::str("T.Pipelined's stage ", s.stage[g], " of group ", g, " is too large: the scheduled loop runs its iterations plus the largest stage as steps, past the range of its ",
                                    rt::name(var->dtype), " counter"));
    if (s.order[g] >= 0) by_order.push_back(g);
  }
  std::sort(by_order.begin(), by_order.end(), [&](size_t a, size_t b) { return s.order[a] < s.order[b]; });
  for (size_t i = 0; i < by_order.size(); ++i)
    if (s.order[by_order[i]] != static_cast<int64_t>(i))
      error_at(s.order_loc, rt::str("T.Pipelined's order must number the groups not marked -1 from 0 to ", by_order.size() - 1, " once each: ", list(s.order)));
  // The units: a scheduled group each, and each copy of a -1 group before the first group after it
  // that reads its tile.
  std::vector<Unit> units;
  std::vector<size_t> first_of(s.group.size());
  for (size_t g = 0, at = 0; g < s.group.size(); at += s.group[g].size(), ++g) first_of[g] = at;
  for (size_t g = 0; g < s.group.size(); ++g)
    for (size_t i = first_of[g]; s.order[g] < 0 && i < first_of[g] + s.group[g].size(); ++i) {
      const auto* c = ir::as<ir::CopyNode>(stmts[i]);
      if (!c || c->src.buffer->scope != ir::Scope::Global || c->dst.buffer->scope != ir::Scope::Shared)
        error_at(stmts[i]->loc, rt::str("T.Pipelined's group ", g, " has stage -1, which marks copies the pipeline loads (T.copy from a global tensor into a shared tile); this statement is not one"));
    }
  std::vector<std::vector<Unit>> copies_before(s.group.size());
  for (size_t g = 0; g < s.group.size(); ++g) {
    if (s.order[g] >= 0) continue;
    for (size_t i = first_of[g]; i < first_of[g] + s.group[g].size(); ++i) {
      const auto* c = ir::as<ir::CopyNode>(stmts[i]);
      // As the pipeline asks: the tile is loaded before anything in the iteration touches it.
      for (size_t j = 0; j < i; ++j)
        if (analysis::uses_buffer(stmts[j], c->dst.buffer.get()))
          error_at(stmts[i]->loc, rt::str("this copy (stage -1) loads '", c->dst.buffer->name, "', which the statement at ", stmts[j]->loc.to_string(),
                                          " before it uses; the pipeline loads only tiles the iteration has not touched yet"));
      std::optional<size_t> consumer;
      for (size_t h = g + 1; h < s.group.size() && !consumer; ++h)
        if (s.order[h] >= 0)
          for (size_t j = first_of[h]; j < first_of[h] + s.group[h].size(); ++j)
            if (analysis::accesses_of(stmts[j]).read.count(c->dst.buffer.get())) consumer = h;
      if (!consumer) error_at(stmts[i]->loc, rt::str("no group after this copy (stage -1) reads '", c->dst.buffer->name, "', so it has no stage to take"));
      Unit u{g, i, {stmts[i]}, s.stage[*consumer], 0, true, analysis::accesses_of(stmts[i])};
      copies_before[*consumer].push_back(std::move(u));
    }
  }
  for (size_t g : by_order) {
    for (Unit& u : copies_before[g]) units.push_back(std::move(u));
    Unit u{g, first_of[g], {}, s.stage[g], 0, false, {}};
    u.stmts.assign(stmts.begin() + first_of[g], stmts.begin() + first_of[g] + s.group[g].size());
    u.acc = analysis::accesses_of(ir::make_seq(u.stmts, loc));
    units.push_back(std::move(u));
  }
  for (size_t i = 0; i < units.size(); ++i) units[i].position = i;
  // Dependences: for units a before b in the body that touch a buffer in common (one writing it),
  // iteration k of a must still run before iteration k of b, and iteration k of b before
  // iteration k + 1 of a. The scheduled loop runs iteration k of a unit at loop step k + stage.
  std::vector<const Unit*> source(units.size());
  for (size_t i = 0; i < units.size(); ++i) source[i] = &units[i];
  std::sort(source.begin(), source.end(), [](const Unit* a, const Unit* b) { return a->first < b->first; });
  auto describe_unit = [&](const Unit& u, bool at) {
    return rt::str(u.copy ? "the copy" : "group " + std::to_string(u.group), at ? " at " + u.stmts.front()->loc.to_string() : "", " (stage ", u.stage,
                   u.copy ? ", the stage of the group reading it" : ", order " + std::to_string(s.order[u.group]), ")");
  };
  for (size_t i = 0; i < source.size(); ++i)
    for (size_t j = i + 1; j < source.size(); ++j) {
      const Unit &a = *source[i], &b = *source[j];
      const ir::BufferNode* x = conflict(a.acc, b.acc);
      if (!x) x = conflict(b.acc, a.acc);
      if (!x) continue;
      auto before = [](int64_t s1, size_t p1, int64_t s2, size_t p2) { return s1 < s2 || (s1 == s2 && p1 < p2); };
      const char* broken = !before(a.stage, a.position, b.stage, b.position)         ? "before %s of the same iteration"
                           : !before(b.stage, b.position, a.stage + 1, a.position) ? "after %s of the next iteration"
                                                                                     : nullptr;
      if (!broken) continue;
      std::string when = broken;
      when.replace(when.find("%s"), 2, describe_unit(a, true));
      error_at(b.stmts.front()->loc, rt::str("this T.Pipelined schedule breaks a dependence on '", x->name, "': ", describe_unit(b, false), " would run ", when,
                                               ", which comes before it in the loop body"));
    }
  // The scheduled body: each unit on iteration k - stage, where that exists (copies always).
  int64_t depth = 0;
  for (const Unit& u : units) depth = std::max(depth, u.stage);
  const ir::DType t = var->dtype;
  std::vector<ir::Stmt> out;
  for (const Unit& u : units) {
    ir::Stmt group = ir::make_seq(u.stmts, u.stmts.front()->loc);
    if (u.stage > 0) group = ir::substitute(group, {{var.get(), ir::sub(var, ir::make_int(u.stage, t))}});
    ir::Expr cond;
    auto both = [&](ir::Expr c) { cond = cond ? ir::logical_and(cond, c) : c; };
    if (!u.copy && u.stage > 0) both(ir::compare(ir::BinaryOp::GE, var, ir::add(min, ir::make_int(u.stage, t))));
    if (!u.copy && u.stage < depth) both(ir::compare(ir::BinaryOp::LT, var, ir::add(ir::add(min, extent), ir::make_int(u.stage, t))));
    out.push_back(cond ? ir::make_if(cond, group, nullptr, group->loc) : group);
  }
  ir::Pipelining scheduled = pipelining;
  scheduled.depth = static_cast<int>(depth);
  return ir::make_for(var, min, ir::add(extent, ir::make_int(depth, t)), ir::ForKind::Pipelined, ir::make_seq(std::move(out), loc), loc, scheduled);
}

namespace {

// Whether `s` reads `tile` before it overwrites it (a copy or fill into it, taken as whole: the
// loads of a pipelined loop are of whole tiles).
bool reads_first(const ir::Stmt& s, const ir::BufferNode* tile) {
  if (const auto* c = ir::as<ir::CopyNode>(s); c && c->dst.buffer.get() == tile) return false;
  if (const auto* f = ir::as<ir::FillNode>(s); f && f->dst.buffer.get() == tile) return false;
  if (const auto* q = ir::as<ir::SeqNode>(s)) {
    for (const ir::Stmt& x : q->stmts)
      if (analysis::uses_buffer(x, tile)) return reads_first(x, tile);
    return false;
  }
  if (const auto* l = ir::as<ir::ForNode>(s)) return reads_first(l->body, tile);
  if (const auto* a = ir::as<ir::AllocateNode>(s)) return reads_first(a->body, tile);
  return analysis::uses_buffer(s, tile);
}

class LoadsAfterLoops : public ir::IRVisitor {
 protected:
  void visit(const ir::SeqNode& n) override {
    for (size_t i = 0; i < n.stmts.size(); ++i) {
      std::vector<std::pair<const ir::CopyNode*, const ir::ForNode*>> loads;
      collect(n.stmts[i], loads);
      for (const auto& [copy, loop] : loads)
        for (size_t j = i + 1; j < n.stmts.size(); ++j) {
          if (!analysis::uses_buffer(n.stmts[j], copy->dst.buffer.get())) continue;
          if (reads_first(n.stmts[j], copy->dst.buffer.get()))
            error_at(n.stmts[j]->loc, rt::str("this reads '", copy->dst.buffer->name, "' after the scheduled T.Pipelined loop at ", loop->loc.to_string(),
                                               ", whose copy at ", copy->loc.to_string(), " (stage -1) also runs on the ",
                                               loop->depth == 1 ? std::string("step") : rt::str(loop->depth, " steps"),
                                               " past its last iteration: the tile holds a later load, not the last iteration's"));
          break;
        }
    }
    ir::IRVisitor::visit(n);
  }

 private:
  // The copies of the scheduled loops in `s`: its body's statements without a condition.
  static void collect(const ir::Stmt& s, std::vector<std::pair<const ir::CopyNode*, const ir::ForNode*>>& out) {
    struct Finder : ir::IRVisitor {
      std::vector<std::pair<const ir::CopyNode*, const ir::ForNode*>>* out;
      using ir::IRVisitor::visit;
      void visit(const ir::ForNode& n) override {
        if (n.depth > 0)
          for (const ir::Stmt& x : ir::as<ir::SeqNode>(n.body) ? ir::as<ir::SeqNode>(n.body)->stmts : std::vector<ir::Stmt>{n.body})
            if (const auto* c = ir::as<ir::CopyNode>(x)) out->push_back({c, &n});
        ir::IRVisitor::visit(n);
      }
    } finder;
    finder.out = &out;
    finder.visit_stmt(s);
  }
};

}  // namespace

void check_loads_after_scheduled_loops(const ir::Stmt& body) { LoadsAfterLoops().visit_stmt(body); }

}  // namespace tilelang::frontend
