#include "tilelang/analysis/register_fragments.h"

#include <algorithm>
#include <set>

#include "rt/dtype.h"
#include "tilelang/analysis/access.h"
#include "tilelang/ir/equality.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::analysis {
namespace {

bool is_16bit_float(ir::DType t) { return t == ir::DType::F16 || t == ir::DType::BF16; }
// The element types a wgmma reads from registers as its A operand: 16-bit floats, and 8-bit floats
// and integers (tile_gemm_wgmma_rs reorders those into the k32 fragment).
bool register_a_dtype(ir::DType t) {
  return is_16bit_float(t) || t == ir::DType::F8E4M3 || t == ir::DType::F8E5M2 || t == ir::DType::I8 || t == ir::DType::U8;
}

// Registers a thread may give the register fragments (accumulators and wgmma A operands) before a
// 16-bit A operand goes through shared memory instead: of the 255 a thread has, the rest holds
// addresses, row vectors and temporaries.
constexpr int64_t kRegisterABudget = 192;

// Whether ldmatrix can read a gemm operand: a 2-D tile of shared memory (leading dimensions of
// extent 1, as in a pipeline stage) whose rows start at multiples of 16 bytes: the row length and
// the tile's offset within its 2-D slice in whole 16-byte chunks (the leading dimensions' strides
// are multiples of the row length).
bool ldmatrix_operand(const ir::Region& r) {
  const ir::Buffer& b = r.buffer;
  size_t rank = r.ranges.size();
  if (b->scope == ir::Scope::Global || b->scope == ir::Scope::Local || rank < 2) return false;
  for (size_t d = 0; d + 2 < rank; ++d)
    if (!ir::is_const_int(r.ranges[d].extent, 1)) return false;
  auto ld = ir::as_const_int(b->shape[rank - 1]);
  auto m0 = ir::as_const_int(r.ranges[rank - 2].min), m1 = ir::as_const_int(r.ranges[rank - 1].min);
  const int64_t chunk = 128 / rt::bits(b->dtype);  // elements in 16 bytes
  return ld && m0 && m1 && *ld % chunk == 0 && (*m0 * *ld + *m1) % chunk == 0;
}

// Whether a register-accumulator gemm operand can be swizzled (see swizzled_tiles).
bool swizzlable(const ir::Region& r) {
  const ir::Buffer& b = r.buffer;
  size_t rank = r.ranges.size();
  auto ld = ir::as_const_int(b->shape[rank - 1]);
  auto row0 = ir::as_const_int(r.ranges[rank - 2].min);
  int64_t chunks = ld ? *ld * rt::bits(b->dtype) / 128 : 0;
  if ((chunks != 2 && chunks != 4 && (chunks == 0 || chunks % 8 != 0)) || !row0 || *row0 % 8 != 0 || !ir::is_const_int(r.ranges[rank - 1].min, 0)) return false;
  if (rank > 2) {  // leading dimensions (pipeline stages) start at multiples of 8 rows
    auto rows = ir::as_const_int(b->shape[rank - 2]);
    if (!rows || *rows % 8 != 0) return false;
  }
  return true;
}

// Whether wgmma can read a gemm operand once it is swizzled: K-major (rows along M or N) with rows
// of any swizzle width, MN-major with rows of whole 128-byte panels.
bool wgmma_operand(const ir::Region& r, bool k_major) {
  if (!ldmatrix_operand(r) || !swizzlable(r)) return false;
  int64_t row_bytes = *ir::as_const_int(r.buffer->shape.back()) * rt::bits(r.buffer->dtype) / 8;
  return k_major || row_bytes % 128 == 0;
}

bool whole(const ir::Region& r) {
  for (size_t d = 0; d < r.ranges.size(); ++d)
    if (!ir::is_const_int(r.ranges[d].min, 0) || !ir::structural_equal(r.ranges[d].extent, r.buffer->shape[d])) return false;
  return true;
}

// The 2-D float fragments a kernel allocates (and with `register_a` the 16- and 8-bit ones, wgmma A
// operands from registers), with the accumulator layout each would take.
class Candidates : public ir::IRVisitor {
 public:
  Candidates(std::map<const ir::BufferNode*, ir::FragmentLayout>& out, int64_t threads, bool warpgroup, bool register_a, bool int32)
      : out_(out), threads_(threads), warpgroup_(warpgroup), register_a_(register_a), int32_(int32) {}

 protected:
  using ir::IRVisitor::visit;
  void visit(const ir::AllocateNode& n) override {
    const ir::Buffer& b = n.buffer;
    // int32: accumulators of 8-bit integer gemms, where the tensor cores take them.
    bool dtype = b->dtype == ir::DType::F32 || (int32_ && b->dtype == ir::DType::I32) || (register_a_ && register_a_dtype(b->dtype));
    if (b->scope == ir::Scope::Fragment && dtype && b->shape.size() == 2 && threads_ % 32 == 0) {
      auto rows = ir::as_const_int(b->shape[0]), cols = ir::as_const_int(b->shape[1]);
      if (rows && cols)
        if (auto l = warpgroup_ ? ir::FragmentLayout::warpgroup_accumulator(*rows, *cols, threads_ / 32) : ir::FragmentLayout::accumulator(*rows, *cols, threads_ / 32))
          out_.emplace(b.get(), *l);
    }
    ir::IRVisitor::visit(n);
  }

 private:
  std::map<const ir::BufferNode*, ir::FragmentLayout>& out_;
  int64_t threads_;
  bool warpgroup_, register_a_, int32_;
};

// Walks a kernel body keeping track of per-thread code (under an if or loop on the thread index),
// and hands each element access (load, store) and each buffer used as a whole (gemm, copy, fill,
// reduce, address_of) to the subclass, which decides what stays in registers.
class FragmentWalk : public ir::IRVisitor {
 public:
  explicit FragmentWalk(const ThreadDependence& dep) : dep_(dep) {}

 protected:
  using ir::IRVisitor::visit;
  virtual void element(const ir::BufferNode* b, const std::vector<ir::Expr>& idx) = 0;
  virtual void whole_use(const ir::BufferNode* b) = 0;

  void visit(const ir::ForNode& n) override {
    per_thread(dep_.dependent(n.min) || dep_.dependent(n.extent), [&] { ir::IRVisitor::visit(n); });
  }
  void visit(const ir::IfThenElseNode& n) override {
    per_thread(dep_.dependent(n.cond), [&] { ir::IRVisitor::visit(n); });
  }
  // Every thread reaches a let's body, per-thread value or not (T.get_thread_binding binds one
  // around the rest of the kernel): its gemms and tile nests are the block's (as in lower_kernel_cuda);
  // element accesses through the value are ruled out by their indices.
  void visit(const ir::LetStmtNode& n) override { ir::IRVisitor::visit(n); }
  void visit(const ir::BufferLoadNode& n) override {
    element(n.buffer.get(), n.indices);
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::BufferStoreNode& n) override {
    element(n.buffer.get(), n.indices);
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::GemmNode& n) override {
    for (const ir::Region* r : {&n.a, &n.b, &n.c}) whole_use(r->buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::CopyNode& n) override {
    whole_use(n.src.buffer.get());
    whole_use(n.dst.buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::FillNode& n) override {
    whole_use(n.dst.buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::ReduceNode& n) override {
    whole_use(n.src.buffer.get());
    whole_use(n.dst.buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::CallNode& n) override {
    if (n.name == "address_of")
      if (const auto* l = ir::as<ir::BufferLoadNode>(n.args.at(0))) whole_use(l->buffer.get());
    ir::IRVisitor::visit(n);
  }

  template <class F>
  void per_thread(bool dependent, F walk) {
    bool saved = per_thread_;
    per_thread_ |= dependent;
    walk();
    per_thread_ = saved;
  }

  const ThreadDependence& dep_;
  bool per_thread_ = false;  // under an if or loop on the thread index
};

// Walks a kernel body and strikes out the candidates some access rules out.
class Screen : public FragmentWalk {
 public:
  Screen(std::map<const ir::BufferNode*, ir::FragmentLayout>& candidates, int64_t threads, const ThreadDependence& dep, EightBitInputs eight_bit)
      : FragmentWalk(dep), candidates_(candidates), threads_(threads), eight_bit_(eight_bit) {}

  std::set<const ir::BufferNode*> accumulated;  // candidates some gemm accumulates into
  // 16- and 8-bit candidates read as a gemm's A operand, with the accumulators of those gemms.
  std::map<const ir::BufferNode*, std::vector<const ir::BufferNode*>> register_a;

 protected:
  using FragmentWalk::visit;

  void visit(const ir::ForNode& n) override {
    if (nest_ == nullptr && !per_thread_) {
      if (auto red = row_reduction(n); red && candidates_.count(red->source)) {
        reduced(*red);
        return;
      }
      if (auto t = tile_nest(n)) {
        nest_ = &*t;
        visit_stmt(t->cols->body);
        nest_ = nullptr;
        return;
      }
    }
    FragmentWalk::visit(n);
  }
  // Operands are used whole; the accumulator may take registers (the only other way in), and so
  // may a 16- or 8-bit A of a wgmma gemm that is its whole tile, not transposed, of the accumulator's
  // rows: its layout is then the accumulator's, read by wgmma's register form (tile_gemm_wgmma_rs),
  // and it need not suit shared memory (P of attention with block_N 80: 160-byte rows no swizzle fits).
  // Should it be staged after all (the register budget, register_fragments), the plan's last check
  // (GemmOperandsSwizzled) finds it unswizzled and the kernel takes mma.sync instead.
  void visit(const ir::GemmNode& n) override {
    strike(n.b.buffer.get());
    auto it = candidates_.find(n.c.buffer.get());
    std::optional<ir::FragmentLayout> acc;
    auto a = candidates_.find(n.a.buffer.get());
    auto register_a_of = [&](const ir::FragmentLayout& c) {
      return a != candidates_.end() && register_a_dtype(a->first->dtype) && c.warpgroup && !n.trans_a && whole(n.a) && a->second.rows == c.rows;
    };
    if (it != candidates_.end()) {
      bool ok = !per_thread_ && !n.epilogue && tensor_core_gemm(n, threads_, eight_bit_) && whole(n.c);
      if (it->second.warpgroup)
        ok = ok && (register_a_of(it->second) || wgmma_operand(n.a, !n.trans_a)) && wgmma_operand(n.b, n.trans_b) &&
             (n.trans_b || it->second.cols % 64 == 0);
      else ok = ok && ldmatrix_operand(n.a) && ldmatrix_operand(n.b);
      if (ok) accumulated.insert(it->first), acc = it->second;
      else strike(it->first);
    }
    if (acc && register_a_of(*acc))
      register_a[a->first].push_back(n.c.buffer.get());
    else
      strike(n.a.buffer.get());
    ir::IRVisitor::visit(n);
  }

 private:
  void whole_use(const ir::BufferNode* b) override { strike(b); }
  void element(const ir::BufferNode* b, const std::vector<ir::Expr>& idx) override {
    auto it = candidates_.find(b);
    if (it == candidates_.end()) return;
    const ir::FragmentLayout& l = it->second;
    bool ok = nest_ && !per_thread_ && idx.size() == 2 && nest_->extent_rows == l.rows && nest_->extent_cols == l.cols && ir::as<ir::VarNode>(idx[0]) == nest_->rows->var.get() &&
              ir::as<ir::VarNode>(idx[1]) == nest_->cols->var.get();
    if (!ok) strike(b);
  }
  void strike(const ir::BufferNode* b) { candidates_.erase(b); }

  // A row reduction of a candidate: the whole tile, and whole rows per warp.
  void reduced(const RowReduction& red) {
    ir::FragmentLayout& l = candidates_.at(red.source);
    auto rows = ir::as_const_int(red.rows->extent), cols = ir::as_const_int(red.cols->extent);
    // The warpgroup layout already has whole rows per warp.
    auto whole_rows = l.warpgroup ? std::optional(l) : ir::FragmentLayout::accumulator(l.rows, l.cols, l.warps_m * l.warps_n, true);
    if (!rows || !cols || *rows != l.rows || *cols != l.cols || !whole_rows || red.source->dtype != ir::DType::F32) return strike(red.source);
    l = *whole_rows;
    visit_expr(red.init);
    visit_stmt(red.store);
  }

  std::map<const ir::BufferNode*, ir::FragmentLayout>& candidates_;
  int64_t threads_;
  EightBitInputs eight_bit_;
  const TileNest* nest_ = nullptr;
};

// The layout a tile nest is distributed by (BlockLowering::distribute): that of the first 2-D
// register fragment its body reads, else writes; none when it touches none.
const ir::FragmentLayout* nest_layout(const TileNest& t, const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers) {
  Accesses a = accesses_of(t.cols->body);
  for (const auto* set : {&a.read, &a.written})
    for (const ir::BufferNode* b : *set)
      if (auto it = registers.find(b); it != registers.end() && !it->second.row_vector) return &it->second;
  return nullptr;
}

// Calls f on every statement of a kind under a statement.
template <class Node, class F>
void for_each(const ir::Stmt& body, F f) {
  struct Walk : ir::IRVisitor {
    F& f;
    explicit Walk(F& f) : f(f) {}
    using ir::IRVisitor::visit;
    void visit(const Node& n) override {
      f(n);
      ir::IRVisitor::visit(n);
    }
  } walk(f);
  walk.visit_stmt(body);
}

// A 1-D T.Parallel loop over a constant extent from 0 with no parallel loop inside.
bool row_nest(const ir::ForNode& n) {
  if (n.for_kind != ir::ForKind::Parallel || !ir::is_const_int(n.min, 0) || !ir::as_const_int(n.extent)) return false;
  bool inner_parallel = false;
  for_each<ir::ForNode>(n.body, [&](const ir::ForNode& f) { inner_parallel |= f.for_kind == ir::ForKind::Parallel; });
  return !inner_parallel;
}

// The 1-D float fragments that can live in registers as row vectors (FragmentLayout::row_vector)
// of the 2-D register fragments: every access at [i] with i the row of a row reduction of a
// register fragment (its init and store), of a tile nest distributed by a register layout, or of
// a 1-D T.Parallel nest over the whole vector that writes no memory other threads see (each
// thread runs the rows it holds; the lanes sharing a row compute the same values); and the
// layouts involved agree on which threads hold a row.
class RowVectors : public FragmentWalk {
 public:
  // `candidates`: the vectors still in the running (all allocated 1-D float fragments of a tile's
  // row count, first), each with the rows of that tile.
  RowVectors(const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers, const ThreadDependence& dep,
             std::map<const ir::BufferNode*, ir::FragmentLayout> candidates)
      : FragmentWalk(dep), found(std::move(candidates)), registers_(registers) {}

  std::map<const ir::BufferNode*, ir::FragmentLayout> found;  // candidates until the walk ends

  // The 1-D float fragments of a kernel with as many elements as some register tile with whole rows
  // per warp has rows.
  static std::map<const ir::BufferNode*, ir::FragmentLayout> candidates(const ir::Stmt& body,
                                                                       const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers) {
    std::map<const ir::BufferNode*, ir::FragmentLayout> out;
    for_each<ir::AllocateNode>(body, [&](const ir::AllocateNode& a) {
      const ir::Buffer& b = a.buffer;
      auto extent = b->shape.size() == 1 ? ir::as_const_int(b->shape[0]) : std::nullopt;
      if (b->scope != ir::Scope::Fragment || b->dtype != ir::DType::F32 || !extent) return;
      for (const auto& [tile, layout] : registers)
        if (layout.warps_n == 1 && layout.rows == *extent) {
          out.emplace(b.get(), layout.rows_vector());
          return;
        }
    });
    return out;
  }

 protected:
  using FragmentWalk::visit;
  void visit(const ir::ForNode& n) override {
    if (!row_var_ && !per_thread_) {
      if (auto red = row_reduction(n); red && registers_.count(red->source)) {
        within(red->rows->var.get(), &registers_.at(red->source), [&] {
          visit_expr(red->init);
          visit_stmt(red->store);
        });
        return visit_expr(red->element);
      }
      if (auto t = tile_nest(n)) return within(t->rows->var.get(), nest_layout(*t, registers_), [&] { visit_stmt(t->cols->body); });
      if (row_nest(n)) {
        // The vectors it touches share one layout, which the lowering distributes it by.
        const ir::FragmentLayout* layout = nullptr;
        bool writes_shared = false;
        Accesses a = accesses_of(n.body);
        for (const auto* set : {&a.read, &a.written})
          for (const ir::BufferNode* b : *set)
            if (auto it = found.find(b); it != found.end() && !layout) layout = &it->second;
        for (const ir::BufferNode* b : a.written) writes_shared |= b->scope != ir::Scope::Local && !found.count(b);
        if (layout && (writes_shared || layout->rows != *ir::as_const_int(n.extent))) layout = nullptr;
        return within(n.var.get(), layout, [&] { visit_stmt(n.body); });
      }
    }
    FragmentWalk::visit(n);
  }

 private:
  void whole_use(const ir::BufferNode* b) override { found.erase(b); }
  template <class F>
  void within(const ir::VarNode* row, const ir::FragmentLayout* layout, F walk) {
    const ir::VarNode* saved_row = row_var_;
    const ir::FragmentLayout* saved_layout = layout_;
    row_var_ = row, layout_ = layout;
    walk();
    row_var_ = saved_row, layout_ = saved_layout;
  }
  void element(const ir::BufferNode* b, const std::vector<ir::Expr>& idx) override {
    auto it = found.find(b);
    if (it == found.end()) return;
    bool ok = row_var_ && layout_ && !per_thread_ && idx.size() == 1 && ir::as<ir::VarNode>(idx[0]) == row_var_ && it->second.same_rows(*layout_);
    if (!ok) found.erase(it);
  }

  const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers_;
  const ir::VarNode* row_var_ = nullptr;        // the row variable of the nest being walked
  const ir::FragmentLayout* layout_ = nullptr;  // the layout it is distributed by (none: no vector may be touched)
};

// `e` without conversions to its own dtype.
const ir::Expr& strip_same_cast(const ir::Expr& e) {
  const auto* c = ir::as<ir::CastNode>(e);
  return c && c->value->dtype == c->dtype ? c->value : e;
}

bool is_load_of(const ir::Expr& e, const ir::BufferNode* b) {
  const auto* l = ir::as<ir::BufferLoadNode>(strip_same_cast(e));
  return l && l->buffer.get() == b && l->indices.empty();
}

}  // namespace

std::optional<RowReduction> row_reduction(const ir::ForNode& outer) {
  if (outer.for_kind != ir::ForKind::Parallel || !ir::is_const_int(outer.min, 0)) return std::nullopt;
  const auto* alloc = ir::as<ir::AllocateNode>(outer.body);
  const auto* seq = alloc ? ir::as<ir::SeqNode>(alloc->body) : nullptr;
  if (!seq || seq->stmts.size() != 3 || !alloc->buffer->shape.empty()) return std::nullopt;
  const ir::BufferNode* red = alloc->buffer.get();
  const auto* init = ir::as<ir::BufferStoreNode>(seq->stmts[0]);
  const auto* loop = ir::as<ir::ForNode>(seq->stmts[1]);
  const auto* step = loop ? ir::as<ir::BufferStoreNode>(loop->body) : nullptr;
  if (!init || init->buffer.get() != red || !step || step->buffer.get() != red || loop->for_kind != ir::ForKind::Serial ||
      !ir::is_const_int(loop->min, 0))
    return std::nullopt;
  // red = combine(red, element), either operand order.
  const auto* comb = ir::as<ir::BinaryNode>(strip_same_cast(step->value));
  if (!comb || (comb->op != ir::BinaryOp::Add && comb->op != ir::BinaryOp::Max && comb->op != ir::BinaryOp::Min)) return std::nullopt;
  ir::Expr element = is_load_of(comb->a, red) ? comb->b : is_load_of(comb->b, red) ? comb->a : nullptr;
  if (!element || analysis::uses_buffer(element, red)) return std::nullopt;
  // The element reads one 2-D buffer, at [i, r] only.
  const ir::BufferNode* source = nullptr;
  bool ok = true;
  ir::for_each_expr(element, [&](const ir::Expr& e) {
    const auto* l = ir::as<ir::BufferLoadNode>(e);
    if (!l) return;
    bool at_ir = l->indices.size() == 2 && ir::as<ir::VarNode>(l->indices[0]) == outer.var.get() && ir::as<ir::VarNode>(l->indices[1]) == loop->var.get();
    ok &= at_ir && (!source || source == l->buffer.get());
    source = l->buffer.get();
  });
  const ir::Stmt& store = seq->stmts[2];
  if (!ok || !source || analysis::uses_var(init->value, loop->var.get()) || analysis::uses_var(store, loop->var.get())) return std::nullopt;
  return RowReduction{&outer, loop, alloc->buffer, init->value, comb->op, element, store, source};
}

bool is_wgmma(const ir::GemmNode& g) {
  const ir::FragmentLayout* l = g.c.buffer->layout.get();
  return l && l->warpgroup;
}

bool calls_wgmma(const ir::Stmt& stmt) {
  struct Finder : ir::IRVisitor {
    bool found = false;
    using ir::IRVisitor::visit;
    void visit(const ir::GemmNode& n) override { found = found || is_wgmma(n); }
  } finder;
  finder.visit_stmt(stmt);
  return finder.found;
}

bool eight_bit_gemm(const ir::GemmNode& g) { return rt::bits(g.a.buffer->dtype) == 8 && rt::bits(g.b.buffer->dtype) == 8; }

EightBitInputs eight_bit_inputs(const std::string& arch) {
  // "sm_80", "sm_89", "sm_90a": the compute capability's digits.
  const std::string digits = arch.rfind("sm_", 0) == 0 ? arch.substr(3, arch.find_first_not_of("0123456789", 3) - 3) : "";
  const int cc = digits.empty() ? 0 : std::stoi(digits);
  return {cc >= 80, cc >= 89};
}

bool tensor_core_gemm(const ir::GemmNode& g, int64_t threads, EightBitInputs eight_bit_inputs) {
  ir::DType ta = g.a.buffer->dtype, tb = g.b.buffer->dtype, tc = g.c.buffer->dtype;
  auto fp8 = [](ir::DType t) { return t == ir::DType::F8E4M3 || t == ir::DType::F8E5M2; };
  auto int8 = [](ir::DType t) { return t == ir::DType::I8 || t == ir::DType::U8; };
  const bool sixteen_bit = is_16bit_float(ta) && tb == ta && tc == ir::DType::F32;
  const bool eight_bit = !g.trans_a && g.trans_b &&
                         ((eight_bit_inputs.floats && fp8(ta) && fp8(tb) && tc == ir::DType::F32) ||
                          (eight_bit_inputs.integers && int8(ta) && int8(tb) && tc == ir::DType::I32));
  if (!sixteen_bit && !eight_bit) return false;
  if (g.c.buffer->scope == ir::Scope::Global || threads % 32 != 0) return false;
  const ir::Range& k = g.trans_a ? g.a.ranges[g.a.ranges.size() - 2] : g.a.ranges.back();
  auto kk = ir::as_const_int(k.extent);
  return kk && *kk % (eight_bit ? 32 : 16) == 0;
}

std::optional<TileNest> tile_nest(const ir::ForNode& n) {
  const ir::ForNode* outer = &n;
  if (outer->for_kind != ir::ForKind::Parallel) return std::nullopt;
  const auto* inner = ir::as<ir::ForNode>(outer->body);
  if (!inner || inner->for_kind != ir::ForKind::Parallel) return std::nullopt;
  if (const auto* deeper = ir::as<ir::ForNode>(inner->body); deeper && deeper->for_kind == ir::ForKind::Parallel) return std::nullopt;
  auto rows = ir::as_const_int(outer->extent), cols = ir::as_const_int(inner->extent);
  if (!rows || !cols || !ir::is_const_int(outer->min, 0) || !ir::is_const_int(inner->min, 0)) return std::nullopt;
  return TileNest{outer, inner, *rows, *cols};
}

std::map<const ir::BufferNode*, ir::FragmentLayout> register_fragments(const ir::KernelLaunchNode& kernel, const ThreadDependence& dep, bool warpgroup,
                                                                      bool register_a, EightBitInputs eight_bit) {
  std::map<const ir::BufferNode*, ir::FragmentLayout> candidates;
  Candidates(candidates, kernel.threads, warpgroup, register_a, eight_bit.integers).visit_stmt(kernel.body);
  Screen screen(candidates, kernel.threads, dep, eight_bit);
  screen.visit_stmt(kernel.body);
  // The accumulators, then the A operands all of whose gemms keep theirs in registers.
  std::map<const ir::BufferNode*, ir::FragmentLayout> operands;
  for (auto it = candidates.begin(); it != candidates.end();) {
    if (!screen.accumulated.count(it->first) && screen.register_a.count(it->first)) operands.insert(*it);
    it = screen.accumulated.count(it->first) ? std::next(it) : candidates.erase(it);
  }
  // An A operand joins them while the fragments' registers stay within kRegisterABudget a thread:
  // past it ptxas spills (attention at head dim 256: 176 with P in registers at 64 x 64 compile
  // without spills; 224 at 128 x 128 spill 92 bytes, where P staged does not -- a tiling that
  // needs more shared memory than the H200 has anyway, but other programs need not).
  int64_t fragment_registers = 0;
  for (const auto& [fragment, layout] : candidates) fragment_registers += layout.per_thread() * rt::bits(fragment->dtype) / 32;
  for (const auto& [fragment, layout] : operands) {
    const std::vector<const ir::BufferNode*>& accs = screen.register_a.at(fragment);
    const int64_t registers = layout.per_thread() * rt::bits(fragment->dtype) / 32;
    if (std::all_of(accs.begin(), accs.end(), [&](const ir::BufferNode* c) { return candidates.count(c) > 0; }) &&
        fragment_registers + registers <= kRegisterABudget) {
      candidates.emplace(fragment, layout);
      fragment_registers += registers;
    }
  }
  // Row vectors beside them. A vector struck out can change what a 1-D nest that also touched it
  // writes (memory other threads see), so the walk repeats until nothing more is struck.
  std::map<const ir::BufferNode*, ir::FragmentLayout> vectors = RowVectors::candidates(kernel.body, candidates);
  for (size_t before = vectors.size() + 1; vectors.size() < before;) {
    before = vectors.size();
    RowVectors walk(candidates, dep, std::move(vectors));
    walk.visit_stmt(kernel.body);
    vectors = std::move(walk.found);
  }
  candidates.insert(vectors.begin(), vectors.end());
  return candidates;
}

namespace {

class SwizzleScreen : public ir::IRVisitor {
 public:
  explicit SwizzleScreen(const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers) : registers_(registers) {}
  std::set<const ir::BufferNode*> wanted, ruled_out;

 protected:
  using ir::IRVisitor::visit;
  void visit(const ir::GemmNode& n) override {
    if (registers_.count(n.c.buffer.get())) {
      for (const ir::Region* r : {&n.a, &n.b})
        if (!registers_.count(r->buffer.get())) (swizzlable(*r) ? wanted : ruled_out).insert(r->buffer.get());
    } else {
      for (const ir::Region* r : {&n.a, &n.b, &n.c}) ruled_out.insert(r->buffer.get());
    }
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::CallNode& n) override {
    if (n.name == "address_of")
      if (const auto* l = ir::as<ir::BufferLoadNode>(n.args.at(0))) ruled_out.insert(l->buffer.get());
    ir::IRVisitor::visit(n);
  }
  void visit(const ir::CopyNode& n) override {
    // A bulk copy (TMA) writes its tile in whichever layout the tile has.
    if (!n.barrier) ruled_out.insert({n.src.buffer.get(), n.dst.buffer.get()});
  }
  void visit(const ir::FillNode& n) override { ruled_out.insert(n.dst.buffer.get()); }
  void visit(const ir::ReduceNode& n) override { ruled_out.insert({n.src.buffer.get(), n.dst.buffer.get()}); }

 private:
  const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers_;
};

}  // namespace

std::set<const ir::BufferNode*> swizzled_tiles(const ir::KernelLaunchNode& kernel, const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers) {
  SwizzleScreen screen(registers);
  screen.visit_stmt(kernel.body);
  std::set<const ir::BufferNode*> out;
  for (const ir::BufferNode* b : screen.wanted)
    if (!screen.ruled_out.count(b)) out.insert(b);
  return out;
}

namespace {

// Whether every gemm accumulating into a register fragment reads swizzled operands (or A from registers).
class GemmOperandsSwizzled : public ir::IRVisitor {
 public:
  GemmOperandsSwizzled(const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers, const std::set<const ir::BufferNode*>& swizzled)
      : registers_(registers), swizzled_(swizzled) {}
  bool ok = true;

 protected:
  using ir::IRVisitor::visit;
  void visit(const ir::GemmNode& n) override {
    if (registers_.count(n.c.buffer.get())) ok = ok && (swizzled_.count(n.a.buffer.get()) || registers_.count(n.a.buffer.get())) && swizzled_.count(n.b.buffer.get());
    ir::IRVisitor::visit(n);
  }

 private:
  const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers_;
  const std::set<const ir::BufferNode*>& swizzled_;
};

}  // namespace

TensorCorePlan tensor_core_plan(const ir::KernelLaunchNode& kernel, const ThreadDependence& dep, const std::string& arch, bool register_a) {
  const EightBitInputs eight_bit = eight_bit_inputs(arch);
  TensorCorePlan mma{register_fragments(kernel, dep, false, false, eight_bit), {}};
  mma.swizzled = swizzled_tiles(kernel, mma.registers);
  if (arch != "sm_90a") return mma;
  TensorCorePlan wgmma{register_fragments(kernel, dep, true, register_a, eight_bit), {}};
  wgmma.swizzled = swizzled_tiles(kernel, wgmma.registers);
  // The same accumulators in registers (row vectors follow their tiles' layouts and may differ;
  // A operands in registers are wgmma's alone; 8-bit gemms take wgmma where it can read them).
  std::set<const ir::BufferNode*> eight_bit_accumulators;
  for_each<ir::GemmNode>(kernel.body, [&](const ir::GemmNode& g) {
    if (eight_bit_gemm(g)) eight_bit_accumulators.insert(g.c.buffer.get());
  });
  auto tiles = [&](const std::map<const ir::BufferNode*, ir::FragmentLayout>& registers) {
    std::set<const ir::BufferNode*> out;
    for (const auto& [fragment, layout] : registers)
      if (!layout.row_vector && fragment->dtype == ir::DType::F32 && !eight_bit_accumulators.count(fragment)) out.insert(fragment);
    return out;
  };
  bool same_fragments = tiles(wgmma.registers) == tiles(mma.registers);
  GemmOperandsSwizzled check(wgmma.registers, wgmma.swizzled);
  check.visit_stmt(kernel.body);
  return same_fragments && check.ok ? wgmma : mma;
}

}  // namespace tilelang::analysis
