#include "tilelang/ir/equality.h"

#include <map>

namespace tilelang::ir {
namespace {

class Equal {
 public:
  bool expr(const Expr& a, const Expr& b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind || a->dtype != b->dtype) return false;
    switch (a->kind) {
      case NodeKind::IntImm: return as<IntImmNode>(a)->value == as<IntImmNode>(b)->value;
      case NodeKind::FloatImm: {
        double x = as<FloatImmNode>(a)->value, y = as<FloatImmNode>(b)->value;
        return x == y || (x != x && y != y);
      }
      case NodeKind::Var: {
        auto it = vars_.find(as<VarNode>(a));  // bound inside the trees: by position; free: by identity
        return it != vars_.end() ? it->second == as<VarNode>(b) : a == b;
      }
      case NodeKind::Binary: {
        const BinaryNode *x = as<BinaryNode>(a), *y = as<BinaryNode>(b);
        return x->op == y->op && expr(x->a, y->a) && expr(x->b, y->b);
      }
      case NodeKind::Unary: {
        const UnaryNode *x = as<UnaryNode>(a), *y = as<UnaryNode>(b);
        return x->op == y->op && expr(x->a, y->a);
      }
      case NodeKind::Select: {
        const SelectNode *x = as<SelectNode>(a), *y = as<SelectNode>(b);
        return expr(x->cond, y->cond) && expr(x->t, y->t) && expr(x->f, y->f);
      }
      case NodeKind::Cast: return expr(as<CastNode>(a)->value, as<CastNode>(b)->value);
      case NodeKind::Call: {
        const CallNode *x = as<CallNode>(a), *y = as<CallNode>(b);
        return x->call_kind == y->call_kind && x->name == y->name && exprs(x->args, y->args);
      }
      case NodeKind::BufferLoad: {
        const BufferLoadNode *x = as<BufferLoadNode>(a), *y = as<BufferLoadNode>(b);
        return buffer(x->buffer, y->buffer) && exprs(x->indices, y->indices);
      }
      default: return false;
    }
  }

  bool stmt(const Stmt& a, const Stmt& b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind) return false;
    switch (a->kind) {
      case NodeKind::BufferStore: {
        auto *x = as<BufferStoreNode>(a), *y = as<BufferStoreNode>(b);
        return x->atomic_add == y->atomic_add && buffer(x->buffer, y->buffer) && exprs(x->indices, y->indices) && expr(x->value, y->value);
      }
      case NodeKind::LetStmt: {
        auto *x = as<LetStmtNode>(a), *y = as<LetStmtNode>(b);
        return expr(x->value, y->value) && bind(x->var, y->var) && stmt(x->body, y->body);
      }
      case NodeKind::For: {
        auto *x = as<ForNode>(a), *y = as<ForNode>(b);
        return x->for_kind == y->for_kind && x->num_stages == y->num_stages && x->warp_specialize == y->warp_specialize && x->depth == y->depth && expr(x->min, y->min) &&
               expr(x->extent, y->extent) && bind(x->var, y->var) && stmt(x->body, y->body);
      }
      case NodeKind::IfThenElse: {
        auto *x = as<IfThenElseNode>(a), *y = as<IfThenElseNode>(b);
        return expr(x->cond, y->cond) && stmt(x->then_case, y->then_case) && stmt(x->else_case, y->else_case);
      }
      case NodeKind::Seq: {
        auto *x = as<SeqNode>(a), *y = as<SeqNode>(b);
        if (x->stmts.size() != y->stmts.size()) return false;
        for (size_t i = 0; i < x->stmts.size(); ++i)
          if (!stmt(x->stmts[i], y->stmts[i])) return false;
        return true;
      }
      case NodeKind::Allocate: {
        auto *x = as<AllocateNode>(a), *y = as<AllocateNode>(b);
        const BufferNode &p = *x->buffer, &q = *y->buffer;
        if (p.dtype != q.dtype || p.scope != q.scope || !exprs(p.shape, q.shape)) return false;
        buffers_[x->buffer.get()] = y->buffer.get();
        return stmt(x->body, y->body);
      }
      case NodeKind::Evaluate: return expr(as<EvaluateNode>(a)->value, as<EvaluateNode>(b)->value);
      case NodeKind::InlineCode: {
        auto *x = as<InlineCodeNode>(a), *y = as<InlineCodeNode>(b);
        if (x->target != y->target || x->code != y->code || x->args.size() != y->args.size()) return false;
        for (size_t i = 0; i < x->args.size(); ++i)
          if (x->args[i].first != y->args[i].first || !expr(x->args[i].second, y->args[i].second)) return false;
        return true;
      }
      case NodeKind::KernelLaunch: {
        auto *x = as<KernelLaunchNode>(a), *y = as<KernelLaunchNode>(b);
        if (x->threads != y->threads || x->swizzle_panel != y->swizzle_panel || !exprs(x->grid, y->grid) ||
            x->block_vars.size() != y->block_vars.size())
          return false;
        for (size_t i = 0; i < x->block_vars.size(); ++i) bind(x->block_vars[i], y->block_vars[i]);
        bind(x->thread_var, y->thread_var);
        return stmt(x->body, y->body);
      }
      case NodeKind::Barrier: return true;
      case NodeKind::Copy: {
        auto *x = as<CopyNode>(a), *y = as<CopyNode>(b);
        return region(x->src, y->src) && region(x->dst, y->dst) && (x->barrier ? y->barrier && expr(x->barrier, y->barrier) : !y->barrier);
      }
      case NodeKind::Gemm: {
        auto *x = as<GemmNode>(a), *y = as<GemmNode>(b);
        if (x->trans_a != y->trans_a || x->trans_b != y->trans_b || x->clear_accum != y->clear_accum ||
            x->accum_dtype != y->accum_dtype || x->tiling.block_m != y->tiling.block_m || x->tiling.block_n != y->tiling.block_n ||
            x->tiling.block_k != y->tiling.block_k || x->tiling.threads != y->tiling.threads || !region(x->a, y->a) || !region(x->b, y->b) || !region(x->c, y->c))
          return false;
        if (!x->epilogue || !y->epilogue) return !x->epilogue && !y->epilogue;
        bind(x->acc, y->acc);
        for (size_t i = 0; i < x->epilogue_indices.size() && i < y->epilogue_indices.size(); ++i)
          bind(x->epilogue_indices[i], y->epilogue_indices[i]);
        return stmt(x->epilogue, y->epilogue);
      }
      case NodeKind::Fill: {
        auto *x = as<FillNode>(a), *y = as<FillNode>(b);
        return region(x->dst, y->dst) && expr(x->value, y->value);
      }
      case NodeKind::Reduce: {
        auto *x = as<ReduceNode>(a), *y = as<ReduceNode>(b);
        return x->reduce_kind == y->reduce_kind && x->dim == y->dim && x->clear == y->clear && region(x->src, y->src) &&
               region(x->dst, y->dst);
      }
      default: return false;
    }
  }

 private:
  bool exprs(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!expr(a[i], b[i])) return false;
    return true;
  }
  bool region(const Region& a, const Region& b) {
    if (!buffer(a.buffer, b.buffer) || a.ranges.size() != b.ranges.size()) return false;
    for (size_t i = 0; i < a.ranges.size(); ++i)
      if (!expr(a.ranges[i].min, b.ranges[i].min) || !expr(a.ranges[i].extent, b.ranges[i].extent)) return false;
    return true;
  }
  bool buffer(const Buffer& a, const Buffer& b) {
    auto it = buffers_.find(a.get());
    return it != buffers_.end() ? it->second == b.get() : a == b;
  }
  bool bind(const Var& a, const Var& b) {
    if (!a || !b) return !a && !b;
    if (a->dtype != b->dtype) return false;
    vars_[a.get()] = b.get();
    return true;
  }

  std::map<const VarNode*, const VarNode*> vars_;
  std::map<const BufferNode*, const BufferNode*> buffers_;
};

}  // namespace

bool structural_equal(const Expr& a, const Expr& b) { return Equal().expr(a, b); }

bool structural_equal(const Stmt& a, const Stmt& b) { return Equal().stmt(a, b); }

}  // namespace tilelang::ir
