// The tile IR: immutable, shared nodes (Halide/TVM style). Expressions are typed by rt::DType;
// buffers carry a memory scope; loops carry a kind; tile operations work on buffer regions.
// Node kinds are listed once in nodes.def. Construct nodes with the make_* functions below (raw,
// no type promotion) or with the typed builders of ir/op.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rt/dtype.h"
#include "tilelang/diagnostics.h"

namespace tilelang::ir {

using rt::DType;

enum class NodeKind {
#define TL_EXPR_NODE(Name) Name,
#define TL_STMT_NODE(Name) Name,
#include "tilelang/ir/nodes.def"
};
const char* kind_name(NodeKind kind);

struct ExprNode {
  ExprNode(NodeKind kind, DType dtype, SourceLoc loc) : kind(kind), dtype(dtype), loc(std::move(loc)) {}
  virtual ~ExprNode() = default;
  const NodeKind kind;
  const DType dtype;
  const SourceLoc loc;
};
using Expr = std::shared_ptr<const ExprNode>;

struct StmtNode {
  StmtNode(NodeKind kind, SourceLoc loc) : kind(kind), loc(std::move(loc)) {}
  virtual ~StmtNode() = default;
  const NodeKind kind;
  const SourceLoc loc;
};
using Stmt = std::shared_ptr<const StmtNode>;

// as<T>(node): the node as T when it is of T's kind, else null.
template <class T, class N>
const T* as(const std::shared_ptr<const N>& node) {
  return node && node->kind == T::kKind ? static_cast<const T*>(node.get()) : nullptr;
}

// ---------------------------------------------------------------- buffers

enum class Scope { Global, Shared, Fragment, Local };
const char* scope_name(Scope scope);

struct FragmentLayout;  // ir/fragment_layout.h

struct BufferNode {
  std::string name;
  DType dtype;
  std::vector<Expr> shape;  // extents; strides are row-major over this shape
  Scope scope;
  SourceLoc loc;
  // A tile spread over the registers of a GPU block's threads (set by lower_kernel_cuda): the buffer
  // is then each thread's own registers, shape [registers per thread]; null for every other buffer.
  std::shared_ptr<const FragmentLayout> layout;
  // A GPU shared tile whose rows' 16-byte chunks are permuted (device/cuda/swizzle.h; set by
  // lower_kernel_cuda for tensor-core operands): its elements are addressed through that layout.
  bool swizzled = false;
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer make_buffer(std::string name, DType dtype, std::vector<Expr> shape, Scope scope, SourceLoc loc = {});

struct Range {
  Expr min, extent;
};

// A rectangular part of a buffer, one Range per dimension.
struct Region {
  Buffer buffer;
  std::vector<Range> ranges;
  SourceLoc loc;
};
Region full_region(const Buffer& buffer, SourceLoc loc = {});

// ---------------------------------------------------------------- expressions

struct IntImmNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::IntImm;
  IntImmNode(DType dtype, int64_t value, SourceLoc loc) : ExprNode(kKind, dtype, std::move(loc)), value(value) {}
  int64_t value;
};

struct FloatImmNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::FloatImm;
  FloatImmNode(DType dtype, double value, SourceLoc loc) : ExprNode(kKind, dtype, std::move(loc)), value(value) {}
  double value;
};

// Identity is the node's address; the name is for printing only (printers make names unique).
struct VarNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Var;
  VarNode(DType dtype, std::string name, SourceLoc loc) : ExprNode(kKind, dtype, std::move(loc)), name(std::move(name)) {}
  std::string name;
};
using Var = std::shared_ptr<const VarNode>;

enum class BinaryOp {
  Add, Sub, Mul,
  Div,       // true division for floats, truncating for ints (only made by lowering)
  FloorDiv,  // Python //
  FloorMod,  // Python %
  Min, Max, Pow,
  EQ, NE, LT, LE, GT, GE,
  And, Or,
  BitAnd, BitOr, BitXor, Shl, Shr,
};
const char* op_symbol(BinaryOp op);
bool is_comparison(BinaryOp op);
bool is_logical(BinaryOp op);

struct BinaryNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Binary;
  BinaryNode(DType dtype, BinaryOp op, Expr a, Expr b, SourceLoc loc)
      : ExprNode(kKind, dtype, std::move(loc)), op(op), a(std::move(a)), b(std::move(b)) {}
  BinaryOp op;
  Expr a, b;
};

enum class UnaryOp { Neg, Not, BitNot };
const char* op_symbol(UnaryOp op);

struct UnaryNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Unary;
  UnaryNode(DType dtype, UnaryOp op, Expr a, SourceLoc loc) : ExprNode(kKind, dtype, std::move(loc)), op(op), a(std::move(a)) {}
  UnaryOp op;
  Expr a;
};

struct SelectNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Select;
  SelectNode(DType dtype, Expr cond, Expr t, Expr f, SourceLoc loc)
      : ExprNode(kKind, dtype, std::move(loc)), cond(std::move(cond)), t(std::move(t)), f(std::move(f)) {}
  Expr cond, t, f;
};

struct CastNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Cast;
  CastNode(DType dtype, Expr value, SourceLoc loc) : ExprNode(kKind, dtype, std::move(loc)), value(std::move(value)) {}
  Expr value;
};

enum class CallKind {
  Intrinsic,  // math function known to every backend (ir/intrinsics.h)
  Extern,     // a function of the target's language, called by name (T.call_extern)
};

struct CallNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Call;
  CallNode(DType dtype, CallKind call_kind, std::string name, std::vector<Expr> args, SourceLoc loc)
      : ExprNode(kKind, dtype, std::move(loc)), call_kind(call_kind), name(std::move(name)), args(std::move(args)) {}
  CallKind call_kind;
  std::string name;
  std::vector<Expr> args;
};

struct BufferLoadNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::BufferLoad;
  BufferLoadNode(Buffer buffer, std::vector<Expr> indices, SourceLoc loc)
      : ExprNode(kKind, buffer->dtype, std::move(loc)), buffer(std::move(buffer)), indices(std::move(indices)) {}
  Buffer buffer;
  std::vector<Expr> indices;
};

Expr make_int(int64_t value, DType dtype = DType::I32, SourceLoc loc = {});
Expr make_bool(bool value, SourceLoc loc = {});
Expr make_float(double value, DType dtype = DType::F32, SourceLoc loc = {});
Var make_var(std::string name, DType dtype = DType::I32, SourceLoc loc = {});
Expr make_binary(BinaryOp op, DType dtype, Expr a, Expr b, SourceLoc loc = {});
Expr make_unary(UnaryOp op, DType dtype, Expr a, SourceLoc loc = {});
Expr make_select(DType dtype, Expr cond, Expr t, Expr f, SourceLoc loc = {});
Expr make_cast(DType dtype, Expr value, SourceLoc loc = {});
Expr make_call(DType dtype, CallKind kind, std::string name, std::vector<Expr> args, SourceLoc loc = {});
Expr make_load(Buffer buffer, std::vector<Expr> indices, SourceLoc loc = {});

// ---------------------------------------------------------------- statements

struct BufferStoreNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::BufferStore;
  BufferStoreNode(Buffer buffer, std::vector<Expr> indices, Expr value, bool atomic_add, SourceLoc loc)
      : StmtNode(kKind, std::move(loc)), buffer(std::move(buffer)), indices(std::move(indices)), value(std::move(value)), atomic_add(atomic_add) {}
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;       // of the buffer's dtype
  bool atomic_add;  // buffer[indices] += value, atomically with respect to other threads and blocks
};

struct LetStmtNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::LetStmt;
  LetStmtNode(Var var, Expr value, Stmt body, SourceLoc loc)
      : StmtNode(kKind, std::move(loc)), var(std::move(var)), value(std::move(value)), body(std::move(body)) {}
  Var var;
  Expr value;
  Stmt body;
};

enum class ForKind { Serial, Parallel, Unrolled, Vectorized, Pipelined };
const char* for_kind_name(ForKind kind);

// T.Pipelined's arguments (other loops keep the defaults).
struct Pipelining {
  int num_stages = 0;  // the software pipeline depth asked for
  // warp_specialize=: unset, wherever the CUDA lowering can (sm_90a); false: never; true: required
  // on sm_90a (an error where it cannot apply; other targets have no warp specialization).
  std::optional<bool> warp_specialize;
  // A scheduled body (T.Pipelined's order/stage/group, frontend/pipeline_schedule.h): the loop runs
  // `depth` steps more than the plain loop's iterations, and its first and last `depth` steps run
  // only part of the body (conditions on the loop variable); 0 otherwise.
  int depth = 0;
};

struct ForNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::For;
  ForNode(Var var, Expr min, Expr extent, ForKind for_kind, Pipelining pipelining, Stmt body, SourceLoc loc)
      : StmtNode(kKind, std::move(loc)), var(std::move(var)), min(std::move(min)), extent(std::move(extent)),
        for_kind(for_kind), num_stages(pipelining.num_stages), warp_specialize(pipelining.warp_specialize), depth(pipelining.depth), body(std::move(body)) {}
  Pipelining pipelining() const { return {num_stages, warp_specialize, depth}; }
  Var var;
  Expr min, extent;
  ForKind for_kind;
  int num_stages;  // Pipelined only: the software pipeline depth asked for
  std::optional<bool> warp_specialize;  // Pipelined only (Pipelining)
  int depth;                            // Pipelined only (Pipelining)
  Stmt body;
};

struct IfThenElseNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::IfThenElse;
  IfThenElseNode(Expr cond, Stmt then_case, Stmt else_case, SourceLoc loc)
      : StmtNode(kKind, std::move(loc)), cond(std::move(cond)), then_case(std::move(then_case)), else_case(std::move(else_case)) {}
  Expr cond;
  Stmt then_case;
  Stmt else_case;  // may be null
};

struct SeqNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::Seq;
  SeqNode(std::vector<Stmt> stmts, SourceLoc loc) : StmtNode(kKind, std::move(loc)), stmts(std::move(stmts)) {}
  std::vector<Stmt> stmts;
};

struct AllocateNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::Allocate;
  AllocateNode(Buffer buffer, Stmt body, SourceLoc loc) : StmtNode(kKind, std::move(loc)), buffer(std::move(buffer)), body(std::move(body)) {}
  Buffer buffer;
  Stmt body;
};

struct EvaluateNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::Evaluate;
  EvaluateNode(Expr value, SourceLoc loc) : StmtNode(kKind, std::move(loc)), value(std::move(value)) {}
  Expr value;
};

// Source text pasted into the generated code for one target ("cpu" or "cuda"; empty: any); other
// targets reject it with an error at its location. Each "{name}" in the code is replaced by the
// generated form of the argument of that name.
struct InlineCodeNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::InlineCode;
  InlineCodeNode(std::string target, std::string code, std::vector<std::pair<std::string, Expr>> args, SourceLoc loc)
      : StmtNode(kKind, std::move(loc)), target(std::move(target)), code(std::move(code)), args(std::move(args)) {}
  std::string target;
  std::string code;
  std::vector<std::pair<std::string, Expr>> args;
};

struct KernelLaunchNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::KernelLaunch;
  KernelLaunchNode(std::vector<Expr> grid, std::vector<Var> block_vars, int64_t threads, Var thread_var,
                   int swizzle_panel, Stmt body, SourceLoc loc)
      : StmtNode(kKind, std::move(loc)), grid(std::move(grid)), block_vars(std::move(block_vars)), threads(threads),
        thread_var(std::move(thread_var)), swizzle_panel(swizzle_panel), body(std::move(body)) {}
  std::vector<Expr> grid;       // blocks per dimension (x, y, z), 1 to 3 of them
  std::vector<Var> block_vars;  // one per grid dimension
  int64_t threads;              // threads per block
  Var thread_var;               // the thread index inside the block
  int swizzle_panel;            // T.use_swizzle: rasterize blocks in panels of this width (0: row order)
  Stmt body;
};

struct BarrierNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::Barrier;
  explicit BarrierNode(SourceLoc loc) : StmtNode(kKind, std::move(loc)) {}
};

// dst = src over regions of equal element count (unit dimensions do not count). Reads outside the
// source buffer give 0 and writes outside the destination buffer are dropped, so tiles may hang
// over the edge of a tensor.
//
// With a `barrier` (the address of a shared mbarrier, set by pipeline_loads_cuda), the copy is a
// bulk tensor copy (TMA) of a box of a global tensor into a shared tile: one thread issues it, it
// completes asynchronously on the barrier, and what lies outside the tensor arrives as zeros.
struct CopyNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::Copy;
  CopyNode(Region src, Region dst, SourceLoc loc, Expr barrier = nullptr)
      : StmtNode(kKind, std::move(loc)), src(std::move(src)), dst(std::move(dst)), barrier(std::move(barrier)) {}
  Region src, dst;
  Expr barrier;
};

// Block sizes a schedule chose for a gemm (0: the backend decides).
struct GemmTiling {
  int64_t block_m = 0, block_n = 0, block_k = 0;
  int64_t threads = 0;
};

// C (M x N) = [C +] op(A) (M x K) * op(B) (K x N), accumulated in accum_dtype. op() transposes when
// asked. When `epilogue` is set, it runs once per element of C with `acc` bound to the accumulated
// value (in accum_dtype) and epilogue_indices bound to the element's indices in C's region (row,
// column), and it does the storing; otherwise C's element is set to the accumulated value. With an
// epilogue, C only gives the result's shape: its buffer need not exist.
struct GemmNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::Gemm;
  GemmNode(Region a, Region b, Region c, bool trans_a, bool trans_b, bool clear_accum, DType accum_dtype,
           Stmt epilogue, Var acc, std::vector<Var> epilogue_indices, SourceLoc loc, GemmTiling tiling = {})
      : StmtNode(kKind, std::move(loc)), a(std::move(a)), b(std::move(b)), c(std::move(c)), trans_a(trans_a),
        trans_b(trans_b), clear_accum(clear_accum), accum_dtype(accum_dtype), epilogue(std::move(epilogue)),
        acc(std::move(acc)), epilogue_indices(std::move(epilogue_indices)), tiling(tiling) {}
  Region a, b, c;
  bool trans_a, trans_b;
  bool clear_accum;  // C starts from zero instead of its contents
  DType accum_dtype;
  Stmt epilogue;                      // may be null
  Var acc;                            // with epilogue only
  std::vector<Var> epilogue_indices;  // with epilogue only: (i, j) in C's region
  GemmTiling tiling;
};

struct FillNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::Fill;
  FillNode(Region dst, Expr value, SourceLoc loc) : StmtNode(kKind, std::move(loc)), dst(std::move(dst)), value(std::move(value)) {}
  Region dst;
  Expr value;
};

enum class ReduceKind { Sum, Max, Min, AbsSum, AbsMax };
const char* reduce_kind_name(ReduceKind kind);

// dst = reduce(src) along `dim` of src; dst's region has src's shape without that dimension.
// Without `clear`, the result is combined with dst's previous contents. Sums accumulate in f32 at least.
struct ReduceNode : StmtNode {
  static constexpr NodeKind kKind = NodeKind::Reduce;
  ReduceNode(ReduceKind reduce_kind, Region src, Region dst, int dim, bool clear, SourceLoc loc)
      : StmtNode(kKind, std::move(loc)), reduce_kind(reduce_kind), src(std::move(src)), dst(std::move(dst)), dim(dim), clear(clear) {}
  ReduceKind reduce_kind;
  Region src, dst;
  int dim;
  bool clear;
};

Stmt make_store(Buffer buffer, std::vector<Expr> indices, Expr value, SourceLoc loc = {}, bool atomic_add = false);
Stmt make_let(Var var, Expr value, Stmt body, SourceLoc loc = {});
Stmt make_for(Var var, Expr min, Expr extent, ForKind kind, Stmt body, SourceLoc loc = {}, Pipelining pipelining = {});
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case = nullptr, SourceLoc loc = {});
// A sequence; nested sequences are flattened, an empty sequence is a Seq with no statements and a
// one-statement sequence is that statement.
Stmt make_seq(std::vector<Stmt> stmts, SourceLoc loc = {});
Stmt make_allocate(Buffer buffer, Stmt body, SourceLoc loc = {});
Stmt make_evaluate(Expr value, SourceLoc loc = {});
bool is_no_op(const Stmt& stmt);  // an empty Seq

// ---------------------------------------------------------------- functions

struct Param {
  Buffer buffer;   // tensor parameters (global scope)
  bool is_output;  // written by the function and handed back to the caller
};

enum class FuncStyle {
  TileKernel,  // @tile_kernel: whole-tensor program; the compiler finds the tiles and the parallelism
  PrimFunc,    // @T.prim_func: explicit T.Kernel launches and tile operations
};

struct PrimFunc {
  std::string name;
  std::vector<Param> params;
  Stmt body;
  FuncStyle style = FuncStyle::PrimFunc;
  SourceLoc loc;
};

}  // namespace tilelang::ir
