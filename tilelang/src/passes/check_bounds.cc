#include "tilelang/passes/check_bounds.h"

#include <set>

#include "rt/error.h"
#include "tilelang/analysis/bounds.h"
#include "tilelang/analysis/linear.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/printer.h"
#include "tilelang/ir/substitute.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::passes {
namespace {

class BoundsChecker : public ir::IRVisitor {
 protected:
  void visit(const ir::ForNode& n) override {
    visit_expr(n.min);
    visit_expr(n.extent);
    auto lo = ir::as_const_int(n.min), ext = ir::as_const_int(n.extent);
    if (lo && ext && *ext > 0) ranges_[n.var.get()] = {*lo, *lo + *ext - 1};
    visit_stmt(n.body);
    ranges_.erase(n.var.get());
  }
  void visit(const ir::KernelLaunchNode& n) override {
    for (size_t i = 0; i < n.grid.size(); ++i)
      if (auto g = ir::as_const_int(n.grid[i])) ranges_[n.block_vars[i].get()] = {0, *g - 1};
    ranges_[n.thread_var.get()] = {0, n.threads - 1};
    visit_stmt(n.body);
  }
  void visit(const ir::IfThenElseNode& n) override {
    // A condition may keep an index in range; accesses under it are not provably out of bounds.
    ++guarded_;
    ir::IRVisitor::visit(n);
    --guarded_;
  }
  void visit(const ir::SelectNode& n) override {
    visit_expr(n.cond);
    ++guarded_;
    visit_expr(n.t);
    visit_expr(n.f);
    --guarded_;
  }
  void visit(const ir::LetStmtNode& n) override {
    visit_expr(n.value);
    // A let of an affine expression has that expression's range.
    lets_[n.var.get()] = n.value;
    visit_stmt(n.body);
    lets_.erase(n.var.get());
  }
  void visit(const ir::BufferLoadNode& n) override {
    check(n.buffer, n.indices, n.loc, "reads");
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::BufferStoreNode& n) override {
    check(n.buffer, n.indices, n.loc, "writes");
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::GemmNode& n) override {
    check_region(n.a, n.loc);
    check_region(n.b, n.loc);
    check_region(n.c, n.loc);
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::FillNode& n) override {
    check_region(n.dst, n.loc);
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::ReduceNode& n) override {
    check_region(n.src, n.loc);
    check_region(n.dst, n.loc);
    ir::IRVisitor::visit(n);
  }

 private:
  // The exact range of an affine index, when every variable in it has a known, independent range.
  std::optional<analysis::Interval> exact_range(const ir::Expr& index) {
    ir::Expr e = index;
    for (int round = 0; round < 8; ++round) {  // inline affine lets (bounded: lets do not recurse)
      bool changed = false;
      ir::VarMap subst;
      ir::for_each_expr(e, [&](const ir::Expr& x) {
        if (auto it = lets_.find(static_cast<const ir::VarNode*>(x.get())); x->kind == ir::NodeKind::Var && it != lets_.end()) {
          subst[it->first] = it->second;
          changed = true;
        }
      });
      if (!changed) break;
      e = ir::substitute(e, subst);
    }
    auto lin = analysis::as_linear(e);
    if (!lin) return std::nullopt;
    analysis::Interval out = analysis::Interval::point(lin->constant);
    for (const auto& [v, c] : lin->terms) {
      auto it = ranges_.find(v.get());
      if (it == ranges_.end() || !it->second.known()) return std::nullopt;
      int64_t a = *it->second.lo * c, b = *it->second.hi * c;
      *out.lo += std::min(a, b);
      *out.hi += std::max(a, b);
    }
    return out;
  }

  void check(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices, const SourceLoc& loc, const char* verb) {
    if (guarded_) return;
    for (size_t d = 0; d < indices.size(); ++d) {
      auto extent = ir::as_const_int(buffer->shape[d]);
      if (!extent) continue;
      auto r = exact_range(indices[d]);
      if (!r) continue;
      if (*r->hi >= *extent || *r->lo < 0) {
        int64_t bad = *r->hi >= *extent ? *r->hi : *r->lo;
        std::string access = rt::str(buffer->name, "[", [&] {
          std::string s;
          for (size_t i = 0; i < indices.size(); ++i) s += (i ? ", " : "") + ir::print(indices[i]);
          return s;
        }(), "]");
        error_at(loc, rt::str("index out of bounds: ", access, " ", verb, " '", buffer->name, "' of shape ", ir::shape_string(buffer->shape),
                              ", but its index ", ir::print(indices[d]), " in dimension ", d, " reaches ", bad,
                              *extent > 0 ? rt::str(" (valid: 0 to ", *extent - 1, ")") : std::string(" (the dimension is empty: no index is valid)")));
      }
    }
  }

  void check_region(const ir::Region& region, const SourceLoc& loc) {
    if (guarded_) return;
    const ir::Buffer& b = region.buffer;
    for (size_t d = 0; d < region.ranges.size(); ++d) {
      auto extent = ir::as_const_int(b->shape[d]);
      auto len = ir::as_const_int(region.ranges[d].extent);
      auto r = exact_range(region.ranges[d].min);
      if (!extent || !len || !r) continue;
      if (*r->lo < 0 || *r->hi + *len > *extent)
        error_at(loc, rt::str("tile out of bounds: ", ir::print(region), " reaches past '", b->name, "' of shape ", ir::shape_string(b->shape),
                              " in dimension ", d, " (its start goes up to ", *r->hi, " with extent ", *len, ")"));
    }
  }

  analysis::VarRanges ranges_;
  std::map<const ir::VarNode*, ir::Expr> lets_;
  int guarded_ = 0;
};

}  // namespace

ir::PrimFunc check_bounds(const ir::PrimFunc& func, const PassOptions&) {
  BoundsChecker().visit_stmt(func.body);
  return func;
}

}  // namespace tilelang::passes
