// The functions and attributes the elaborator knows: Python's builtins used in kernels, the seed
// dialect (zeros_like, Tensor[FP16], ...) and TileLang's `T.` namespace. Each builtin checks its
// arguments and says which one is wrong.
#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>

#include "rt/error.h"
#include "tilelang/analysis/linear.h"
#include "frontend/elaborator.h"
#include "tilelang/frontend/lexer.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/printer.h"

namespace tilelang::frontend {
namespace {

// The members of `T.` that are functions (dtypes are handled separately).
const char* const kTFunctions[] = {
    "prim_func", "macro", "Kernel", "Tensor", "Buffer", "alloc_shared", "alloc_fragment", "alloc_local", "alloc_var", "copy",
    "gemm", "clear", "fill", "Pipelined", "Parallel", "serial", "unroll", "vectorized", "grid", "reduce_max", "reduce_sum",
    "reduce_min", "reduce_abssum", "reduce_absmax", "max", "min", "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt",
    "abs", "tanh", "sigmoid", "floor", "ceil", "round", "trunc", "erf", "sin", "cos", "pow", "ceildiv", "if_then_else",
    "cast", "atomic_add", "use_swizzle", "annotate_layout", "infinity", "get_thread_binding", "get_block_binding",
    "call_extern", "inline_code", "address_of", "sync_threads", "symbolic", "dynamic", "floordiv", "floormod", "truncdiv", "truncmod", "fma"};

// A name the target's compiler can call: an identifier, optionally qualified by namespaces
// (std::hypot, ::hypotf). Anything else is pasted into the generated code as is, where the compiler
// rejects it far from the call, or takes it as more code.
bool is_function_name(const std::string& name) {
  static const std::regex pattern("(::)?[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*");
  return std::regex_match(name, pattern);
}

// Reads a builtin's arguments by position or keyword, and rejects what it does not know.
class ArgReader {
 public:
  ArgReader(Args& args, const SourceLoc& loc, std::string fn) : args_(args), loc_(loc), fn_(std::move(fn)), used_kw_(args.keywords.size(), false) {}

  const Value* get(size_t pos, const char* name) {
    const Value* found = nullptr;
    if (pos < args_.positional.size()) found = &args_.positional[pos], max_pos_ = std::max(max_pos_, pos + 1);
    for (size_t k = 0; k < args_.keywords.size(); ++k) {
      if (args_.keywords[k].first != name) continue;
      if (found) error_at(args_.keyword_locs[k], rt::str(fn_, "() got two values for '", name, "'"));
      found = &args_.keywords[k].second;
      used_kw_[k] = true;
    }
    if (found) locs_[name] = where(pos, name);
    return found;
  }
  const Value& req(size_t pos, const char* name) {
    const Value* v = get(pos, name);
    if (!v) error_at(loc_, rt::str(fn_, "() is missing its argument '", name, "'"));
    return *v;
  }
  bool flag(size_t pos, const char* name, bool fallback, Elaborator& el) {
    const Value* v = get(pos, name);
    if (!v) return fallback;
    if (auto b = v->get_if<bool>()) return *b;
    return el.to_int(*v, loc(name), rt::str("'", name, "' of ", fn_)) != 0;
  }
  std::vector<Value> rest(size_t from) {
    std::vector<Value> out;
    for (size_t i = from; i < args_.positional.size(); ++i) out.push_back(args_.positional[i]);
    max_pos_ = std::max(max_pos_, args_.positional.size());
    return out;
  }
  SourceLoc loc(const char* name) const {
    auto it = locs_.find(name);
    return it == locs_.end() ? loc_ : it->second;
  }
  SourceLoc pos_loc(size_t pos) const { return pos < args_.positional_locs.size() ? args_.positional_locs[pos] : loc_; }
  // Everything given must have been read: unknown keywords and extra arguments are errors.
  void done() {
    if (args_.positional.size() > max_pos_)
      error_at(args_.positional_locs[max_pos_], rt::str(fn_, "() takes at most ", max_pos_, " positional argument", max_pos_ == 1 ? "" : "s"));
    for (size_t k = 0; k < args_.keywords.size(); ++k)
      if (!used_kw_[k]) error_at(args_.keyword_locs[k], rt::str(fn_, "() has no argument '", args_.keywords[k].first, "'"));
  }
  // Keywords that are accepted for compatibility and have no effect here.
  void ignore(std::initializer_list<const char*> names) {
    for (size_t k = 0; k < args_.keywords.size(); ++k)
      for (const char* n : names)
        if (args_.keywords[k].first == n) used_kw_[k] = true;
  }

 private:
  SourceLoc where(size_t pos, const char* name) const {
    if (pos < args_.positional_locs.size()) return args_.positional_locs[pos];
    for (size_t k = 0; k < args_.keywords.size(); ++k)
      if (args_.keywords[k].first == name) return args_.keyword_locs[k];
    return loc_;
  }
  Args& args_;
  SourceLoc loc_;
  std::string fn_;
  std::vector<bool> used_kw_;
  size_t max_pos_ = 0;
  std::map<std::string, SourceLoc> locs_;
};

bool is_number(const Value& v) { return v.is<int64_t>() || v.is<double>() || v.is<bool>(); }
double num(const Value& v) {
  if (auto i = v.get_if<int64_t>()) return static_cast<double>(*i);
  if (auto b = v.get_if<bool>()) return *b;
  return v.get<double>();
}

// Element counts of a region's extents without its unit dimensions, for shape checks.
std::vector<ir::Expr> squeezed(const ir::Region& r) {
  std::vector<ir::Expr> out;
  for (const ir::Range& x : r.ranges)
    if (!ir::is_const_int(x.extent, 1)) out.push_back(x.extent);
  return out;
}

std::string extents_string(const ir::Region& r) {
  std::vector<ir::Expr> e;
  for (const ir::Range& x : r.ranges) e.push_back(x.extent);
  return ir::shape_string(e);
}

// Do two extents differ for sure? (Equal, or unknown at compile time, passes.)
bool differ(const ir::Expr& a, const ir::Expr& b) {
  auto x = ir::as_const_int(a), y = ir::as_const_int(b);
  return x && y && *x != *y;
}

// The extents a point region (A[i, j] in T.copy) takes from the other side's shape: those of a
// tile of A's rank as they are (an (8, 1) tile at A[i, j] is a column, as in TileLang: aligning
// its squeezed shape copied a row into it, transposed); of another rank, its non-unit dimensions
// align with A's trailing ones, leading extra ones are 1.
ir::Region widen_point(const ir::Region& point, const ir::Region& other, const SourceLoc& loc, const char* fn) {
  ir::Region out = point;
  if (other.ranges.size() == point.ranges.size()) {
    for (size_t d = 0; d < other.ranges.size(); ++d) out.ranges[d].extent = other.ranges[d].extent;
    return out;
  }
  std::vector<ir::Expr> ext = squeezed(other);
  if (ext.size() > point.ranges.size())
    error_at(loc, rt::str(fn, ": cannot place a tile of shape ", extents_string(other), " at ", ir::print(point), ": it has more dimensions than ",
                          point.buffer->name));
  size_t offset = point.ranges.size() - ext.size();
  for (size_t d = 0; d < ext.size(); ++d) out.ranges[offset + d].extent = ext[d];
  return out;
}

}  // namespace

void bind_language_names(Env& env) {
  for (const char* f : kTFunctions) env.set(f, BuiltinV{std::string("T.") + f});
  for (const char* d : {"float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "int8", "uint8", "int32",
                        "int64", "bool"})
    env.set(d, DTypeV{*rt::parse_dtype(d)});
}

std::optional<rt::DType> dtype_from_name(const std::string& name) {
  static const std::pair<const char*, rt::DType> kSeedNames[] = {
      {"FP16", rt::DType::F16},     {"FP32", rt::DType::F32},       {"FP64", rt::DType::F64},       {"BF16", rt::DType::BF16},
      {"FP8", rt::DType::F8E4M3},   {"FP8_E4M3", rt::DType::F8E4M3}, {"FP8_E5M2", rt::DType::F8E5M2}, {"FP4", rt::DType::F4E2M1},
      {"INT8", rt::DType::I8},      {"UINT8", rt::DType::U8},       {"INT32", rt::DType::I32},      {"INT64", rt::DType::I64},
      {"BOOL", rt::DType::Bool}};
  for (const auto& [n, d] : kSeedNames)
    if (name == n) return d;
  return rt::parse_dtype(name);
}

Value Elaborator::eval_attribute(const ast::AttributeExpr& e) {
  Value base = eval(*e.value);
  const std::string& attr = e.attr;
  if (const ModuleV* m = base.get_if<ModuleV>()) {
    if (m->name == "T") {
      if (auto d = rt::parse_dtype(attr)) return DTypeV{*d};
      for (const char* f : kTFunctions)
        if (attr == f) return BuiltinV{"T." + attr};
      error_at(e.loc, rt::str("T.", attr, " is not supported; docs/language.md lists what is"));
    }
    if (m->name == "tilelang") {
      if (attr == "language") return ModuleV{"T"};
      if (attr == "jit" || attr == "autotune" || attr == "cdiv") return BuiltinV{"tilelang." + attr};
      if (attr == "layout") return ModuleV{"tilelang.layout"};
      error_at(e.loc, rt::str("tilelang.", attr, " is not supported"));
    }
    if (m->name == "tilelang.layout" && attr == "make_swizzled_layout") return BuiltinV{"tilelang.layout.make_swizzled_layout"};
    if (m->name == "math") {
      if (attr == "pi") return M_PI;
      if (attr == "e") return M_E;
      if (attr == "inf") return std::numeric_limits<double>::infinity();
      if (ir::is_math_intrinsic(attr) || attr == "log2" || attr == "sqrt") return BuiltinV{attr};
      error_at(e.loc, rt::str("math.", attr, " is not supported"));
    }
    return ModuleV{m->name + "." + attr};  // an unknown library: fails only if called
  }
  auto dims = [&](const std::vector<ir::Expr>& shape) {
    TupleV t;
    for (const ir::Expr& d : shape) {
      if (auto c = ir::as_const_int(d)) t.items.push_back(*c);
      else t.items.push_back(ExprV{d});
    }
    return t;
  };
  if (const BufferV* b = base.get_if<BufferV>()) {
    if (attr == "shape") return dims(b->buffer->shape);
    if (attr == "dtype") return DTypeV{b->buffer->dtype};
    if (attr == "ndim") return static_cast<int64_t>(b->buffer->shape.size());
    if (attr == "name") return b->buffer->name;
    error_at(e.loc, rt::str("tensors have .shape, .dtype and .ndim; '", attr, "' is not supported"));
  }
  if (const RegionV* r = base.get_if<RegionV>()) {
    std::vector<ir::Expr> ext;
    for (const ir::Range& x : r->region.ranges) ext.push_back(x.extent);
    if (attr == "shape") return dims(ext);
    if (attr == "dtype") return DTypeV{r->region.buffer->dtype};
    if (attr == "ndim") return static_cast<int64_t>(ext.size());
    error_at(e.loc, rt::str("tensor slices have .shape, .dtype and .ndim; '", attr, "' is not supported"));
  }
  if (const TensorTypeV* t = base.get_if<TensorTypeV>()) {
    if (attr == "dtype" && t->has_dtype) return DTypeV{t->dtype};
    if (attr == "shape" && t->has_shape) return TupleV{t->shape, false};
  }
  if (const ExprV* x = base.get_if<ExprV>(); x && attr == "dtype") return DTypeV{x->expr->dtype};
  if (const DTypeV* d = base.get_if<DTypeV>()) {
    if (attr == "bits") return static_cast<int64_t>(rt::bits(d->dtype));
  }
  error_at(e.loc, rt::str(type_name(base), " has no attribute '", attr, "'"));
}

Value Elaborator::call_builtin(const std::string& name, Args& args, const SourceLoc& loc) {
  ArgReader r(args, loc, name);
  auto scalar_or_const = [&](const std::string& fn, const std::vector<Value>& vals, auto const_fn, auto ir_fn) -> Value {
    bool all_numbers = std::all_of(vals.begin(), vals.end(), is_number);
    if (all_numbers) return const_fn(vals);
    std::vector<ir::Expr> es;
    for (size_t i = 0; i < vals.size(); ++i) es.push_back(to_expr(vals[i], r.pos_loc(i), rt::str("argument ", i + 1, " of ", fn)));
    return ExprV{ir_fn(es)};
  };
  // min/max over numbers or runtime values, with Python numbers typed like the other operand.
  auto min_max = [&](bool is_max) -> Value {
    std::vector<Value> vals = r.rest(0);
    if (vals.size() == 1 && vals[0].is<TupleV>()) vals = vals[0].get<TupleV>().items;
    r.done();
    if (vals.size() < 2 && !(vals.size() == 1)) error_at(loc, rt::str(name, "() needs at least one value"));
    Value acc = vals[0];
    for (size_t i = 1; i < vals.size(); ++i) {
      const Value& v = vals[i];
      if (is_number(acc) && is_number(v)) {
        bool take = is_max ? num(v) > num(acc) : num(v) < num(acc);
        if (take) acc = v;
        continue;
      }
      auto [a, b] = operands(acc, v, loc, rt::str("argument of ", name, "()"));
      acc = ExprV{is_max ? ir::max(a, b, loc) : ir::min(a, b, loc)};
    }
    return acc;
  };
  auto math1 = [&](const std::string& fn) -> Value {
    std::vector<Value> vals = r.rest(0);
    r.done();
    if (fn != "pow" && fn != "fma" && vals.size() != 1) error_at(loc, rt::str(name, "() takes one argument"));
    return scalar_or_const(
        name, vals,
        [&](const std::vector<Value>& v) -> Value {
          double x = num(v[0]);
          if (fn == "exp") return std::exp(x);
          if (fn == "exp2") return std::exp2(x);
          if (fn == "log") return std::log(x);
          if (fn == "log2") return std::log2(x);
          if (fn == "log10") return std::log10(x);
          if (fn == "sqrt") return std::sqrt(x);
          if (fn == "rsqrt") return 1.0 / std::sqrt(x);
          if (fn == "abs") {
            if (v[0].is<double>()) return std::fabs(x);
            const int64_t i = v[0].is<bool>() ? static_cast<int64_t>(v[0].get<bool>()) : v[0].get<int64_t>();
            return i < 0 ? int_neg(i, loc, "abs") : i;
          }
          if (fn == "tanh") return std::tanh(x);
          if (fn == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
          if (fn == "floor") return std::floor(x);
          if (fn == "ceil") return std::ceil(x);
          if (fn == "round") return std::nearbyint(x);
          if (fn == "trunc") return std::trunc(x);
          if (fn == "erf") return std::erf(x);
          if (fn == "sin") return std::sin(x);
          if (fn == "cos") return std::cos(x);
          if (fn == "tan") return std::tan(x);
          if (fn == "pow") return std::pow(x, num(v.at(1)));
          if (fn == "fma") return x * num(v.at(1)) + num(v.at(2));
          RT_UNREACHABLE("math ", fn);
        },
        [&](const std::vector<ir::Expr>& es) { return ir::call_math(fn, es, loc); });
  };
  // order=, stage= (lists of ints) and group= (a list of lists of ints) of T.Pipelined: all three or none
  // (frontend/pipeline_schedule.h).
  auto pipeline_schedule = [&](ArgReader& r) -> std::optional<PipelineSchedule> {
    auto given = [&](const char* name) {  // None: not given
      const Value* v = r.get(99, name);
      return v && !v->is<NoneV>() ? v : nullptr;
    };
    const Value *order = given("order"), *stage = given("stage"), *group = given("group");
    if (!order && !stage && !group) return std::nullopt;
    if (!order || !stage || !group) error_at(r.loc(order ? "order" : stage ? "stage" : "group"), "T.Pipelined takes order=, stage= and group= together");
    auto ints = [&](const Value& v, const SourceLoc& at, const char* what) {
      const auto* t = v.get_if<TupleV>();
      if (!t) error_at(at, rt::str("T.Pipelined's ", what, " must be a list of integers, not ", describe(v)));
      std::vector<int64_t> out;
      for (const Value& x : t->items) {
        if (!x.is<int64_t>()) error_at(at, rt::str("T.Pipelined's ", what, " must be a list of integers, not one holding ", describe(x)));
        out.push_back(x.get<int64_t>());
      }
      return out;
    };
    PipelineSchedule s;
    s.order_loc = r.loc("order"), s.stage_loc = r.loc("stage"), s.group_loc = r.loc("group");
    s.order = ints(*order, s.order_loc, "order");
    s.stage = ints(*stage, s.stage_loc, "stage");
    const auto* groups = group->get_if<TupleV>();
    if (!groups) error_at(s.group_loc, rt::str("T.Pipelined's group must be a list of lists of statement indices, not ", describe(*group)));
    for (const Value& g : groups->items) s.group.push_back(ints(g, s.group_loc, "group's entries"));
    if (s.order.size() != s.group.size() || s.stage.size() != s.group.size())
      error_at(s.order.size() != s.group.size() ? s.order_loc : s.stage_loc,
               rt::str("T.Pipelined has ", s.group.size(), " groups but ", s.order.size(), " order and ", s.stage.size(), " stage entries (one each per group)"));
    return s;
  };
  auto loop = [&](LoopKind kind) -> Value {
    LoopV l{kind, {}, 0};
    std::vector<Value> vals = r.rest(0);
    if (kind == LoopKind::Pipelined) {
      const Value* st = r.get(99, "num_stages");
      l.num_stages = st ? static_cast<int>(to_int(*st, r.loc("num_stages"), "num_stages")) : 0;
      // None (the default) leaves it to the compiler.
      if (const Value* ws = r.get(99, "warp_specialize"); ws && !ws->is<NoneV>()) l.warp_specialize = r.flag(99, "warp_specialize", false, *this);
      l.schedule = pipeline_schedule(r);
      r.ignore({"sync"});
    }
    r.ignore({"coalesced_width", "annotations", "unroll_factor", "explicit"});
    r.done();
    auto expr_of = [&](const Value& v, size_t i) {
      ir::Expr e = to_expr(v, r.pos_loc(i), rt::str("a bound of ", name));
      if (!rt::is_int(e->dtype)) error_at(r.pos_loc(i), rt::str("the bounds of ", name, " must be integers, not ", rt::name(e->dtype)));
      return e;
    };
    if (kind == LoopKind::Parallel || kind == LoopKind::Grid) {
      if (vals.empty()) error_at(loc, rt::str(name, "() needs at least one extent"));
      for (size_t i = 0; i < vals.size(); ++i) {
        ir::Expr n = expr_of(vals[i], i);
        l.dims.push_back({ir::make_int(0, n->dtype), n, 1});
      }
      return l;
    }
    if (vals.empty() || vals.size() > 3) error_at(loc, rt::str(name, "() takes (stop), (start, stop) or (start, stop, step)"));
    ir::Expr start = vals.size() >= 2 ? expr_of(vals[0], 0) : ir::make_int(0);
    ir::Expr stop = vals.size() >= 2 ? expr_of(vals[1], 1) : expr_of(vals[0], 0);
    int64_t step = vals.size() == 3 ? to_int(vals[2], r.pos_loc(2), "the step") : 1;
    if (step == 0) error_at(r.pos_loc(2), "the step of a loop must not be zero");
    ir::DType t = ir::index_dtype(start, stop);
    start = ir::cast(t, start);
    stop = ir::cast(t, stop);
    // A negative extent runs zero times, as Python does; only strides need the rounding up.
    ir::Expr extent;
    if (step == 1) extent = analysis::canonical(ir::sub(stop, start));
    else if (step > 0) extent = ir::max(ir::floor_div(ir::add(ir::sub(stop, start), ir::make_int(step - 1, t)), ir::make_int(step, t)), ir::make_int(0, t));
    else extent = ir::max(ir::floor_div(ir::add(ir::sub(start, stop), ir::make_int(-step - 1, t)), ir::make_int(-step, t)), ir::make_int(0, t));
    l.dims.push_back({start, extent, step});
    return l;
  };
  auto alloc = [&](ir::Scope scope) -> Value {
    require_launch(loc, name);
    const Value& shape = r.req(0, "shape");
    rt::DType dtype = to_dtype(r.req(1, "dtype"), r.loc("dtype"), rt::str("the dtype of ", name));
    r.ignore({"scope"});
    r.done();
    return make_buffer(scope == ir::Scope::Shared ? "shared" : scope == ir::Scope::Fragment ? "fragment" : "local", dtype,
                       to_shape(shape, r.loc("shape"), name), scope, loc);
  };
  auto reduce = [&](ir::ReduceKind kind) -> Value {
    require_launch(loc, name);
    ir::Region src = to_region(r.req(0, "buffer"), r.loc("buffer"), rt::str("the source of ", name));
    ir::Region dst = to_region(r.req(1, "out"), r.loc("out"), rt::str("the destination of ", name));
    const Value* dim_v = r.get(2, "dim");
    bool clear = r.flag(3, "clear", true, *this);
    r.done();
    int rank = static_cast<int>(src.ranges.size());
    int dim = dim_v ? static_cast<int>(to_int(*dim_v, r.loc("dim"), "dim")) : -1;
    if (dim < -rank || dim >= rank) error_at(r.loc("dim"), rt::str(name, ": dim ", dim, " is out of range for a source of ", rank, " dimensions"));
    if (dim < 0) dim += rank;
    std::vector<ir::Expr> expect;
    for (int d = 0; d < rank; ++d)
      if (d != dim) expect.push_back(src.ranges[d].extent);
    std::vector<ir::Expr> got = squeezed(dst);
    std::vector<ir::Expr> want;
    for (const ir::Expr& x : expect)
      if (!ir::is_const_int(x, 1)) want.push_back(x);
    bool bad = got.size() != want.size();
    for (size_t i = 0; !bad && i < got.size(); ++i) bad = differ(got[i], want[i]);
    if (bad) error_at(loc, rt::str(name, ": reducing ", extents_string(src), " along dim ", dim, " gives ", ir::shape_string(expect), " but the destination is ",
                                   extents_string(dst)));
    emit(std::make_shared<const ir::ReduceNode>(kind, src, dst, dim, clear, loc));
    return NoneV{};
  };
  auto seed_tensor = [&](bool like, bool zero, bool has_fill) -> Value {
    require_staged(loc, name);
    if (kernel()->style != ir::FuncStyle::TileKernel)
      error_at(loc, rt::str(name, "() makes a whole tensor, which only @tile_kernel functions can do; inside T.Kernel use T.alloc_fragment and T.clear"));
    std::vector<ir::Expr> shape;
    rt::DType dtype = rt::DType::F32;
    if (like) {
      const Value& src = r.req(0, "tensor");
      const BufferV* b = src.get_if<BufferV>();
      if (!b) error_at(r.loc("tensor"), rt::str(name, "() needs a tensor, not ", type_name(src)));
      shape = b->buffer->shape;
      dtype = b->buffer->dtype;
      if (const Value* d = r.get(1, "dtype")) dtype = to_dtype(*d, r.loc("dtype"), "dtype");
    } else {
      shape = to_shape(r.req(0, "shape"), r.loc("shape"), name + "()");
      size_t next = 1;
      ir::Expr fill_value;
      if (has_fill) fill_value = to_expr(r.req(next++, "fill_value"), r.loc("fill_value"), "the fill value");
      if (const Value* d = r.get(next, "dtype")) dtype = to_dtype(*d, r.loc("dtype"), "dtype");
      r.done();
      Value buf = make_buffer(name, dtype, shape, ir::Scope::Global, loc);
      if (has_fill) emit(std::make_shared<const ir::FillNode>(ir::full_region(buf.get<BufferV>().buffer, loc), ir::cast(dtype, fill_value), loc));
      else if (zero) emit(std::make_shared<const ir::FillNode>(ir::full_region(buf.get<BufferV>().buffer, loc), ir::cast(dtype, ir::make_int(0)), loc));
      return buf;
    }
    r.done();
    Value buf = make_buffer(name, dtype, shape, ir::Scope::Global, loc);
    if (zero) emit(std::make_shared<const ir::FillNode>(ir::full_region(buf.get<BufferV>().buffer, loc), ir::cast(dtype, ir::make_int(0)), loc));
    return buf;
  };

  // ---- Python builtins
  if (name == "range") return loop(LoopKind::Range);
  if (name == "len") {
    const Value& v = r.req(0, "obj");
    r.done();
    if (auto t = v.get_if<TupleV>()) return static_cast<int64_t>(t->items.size());
    if (auto s = v.get_if<std::string>()) return static_cast<int64_t>(s->size());
    if (auto b = v.get_if<BufferV>()) {
      if (b->buffer->shape.empty()) error_at(loc, "len() of a scalar");
      if (auto c = ir::as_const_int(b->buffer->shape[0])) return *c;
      return ExprV{b->buffer->shape[0]};
    }
    error_at(loc, rt::str("len() of ", type_name(v)));
  }
  if (name == "min" || name == "T.min") return min_max(false);
  if (name == "max" || name == "T.max") return min_max(true);
  if (name == "int" || name == "float" || name == "bool") {
    const Value& v = r.req(0, "x");
    r.done();
    if (auto s = v.get_if<std::string>()) {
      // The whole string must be the number, as in Python ("12abc" is not 12); spaces around it may be.
      const size_t first = s->find_first_not_of(" \t"), last = s->find_last_not_of(" \t");
      const std::string text = first == std::string::npos ? "" : s->substr(first, last - first + 1);
      try {
        size_t used = 0;
        if (name == "int") {
          const int64_t i = std::stoll(text, &used);
          if (used == text.size()) return i;
        } else if (name == "float") {
          const double d = std::stod(text, &used);
          if (used == text.size()) return d;
        }
      } catch (const std::out_of_range&) {
        if (name == "int") error_at(loc, rt::str("int() of '", *s, "': the value does not fit in 64 bits (kernel integers are at most 64-bit: 9223372036854775807)"));
      } catch (const std::exception&) {
      }
      if (name != "bool") error_at(loc, rt::str(name, "() cannot convert '", *s, "'"));
    }
    if (is_number(v)) {
      if (name == "int" && v.is<int64_t>()) return v;
      if (name == "int") return v.is<bool>() ? static_cast<int64_t>(v.get<bool>()) : float_to_int(v.get<double>(), loc, "int");
      if (name == "float") return num(v);
      return num(v) != 0.0;
    }
    ir::Expr e = to_expr(v, r.loc("x"), rt::str("the argument of ", name, "()"));
    return ExprV{ir::cast(name == "int" ? rt::DType::I32 : name == "float" ? rt::DType::F32 : rt::DType::Bool, e, loc)};
  }
  if (name == "print") return NoneV{};  // compile-time prints have nowhere useful to go
  if (name == "tuple" || name == "list") {
    const Value& v = r.req(0, "iterable");
    r.done();
    TupleV t;
    if (auto x = v.get_if<TupleV>()) t.items = x->items;
    else error_at(loc, rt::str(name, "() of ", type_name(v), " is not supported"));
    t.is_list = name == "list";
    return t;
  }
  if (name == "sum") {
    const Value& v = r.req(0, "iterable");
    r.done();
    const TupleV* t = v.get_if<TupleV>();
    if (!t) error_at(loc, "sum() needs a compile-time tuple or list");
    Value acc = int64_t{0};
    for (const Value& x : t->items) acc = binary_op(ast::BinOpKind::Add, acc, x, loc);
    return acc;
  }
  if (name == "isinstance") error_at(loc, "isinstance() is not supported");

  // ---- math, bare (seed style), math.x or T.x
  std::string base = name.starts_with("T.") ? name.substr(2) : name;
  if (ir::is_math_intrinsic(base) && base != "fma") return math1(base);
  if (base == "fma") return math1("fma");

  // ---- decorators and annotations
  if (name == "tilelang.jit" || name == "tilelang.autotune") {
    r.ignore({"out_idx", "target", "execution_backend", "pass_configs", "debug_root_path", "configs", "warmup", "rep", "timeout",
              "cache_input_tensors", "compile_flags", "verbose"});
    r.rest(0);
    r.done();
    return BuiltinV{name};  // @tilelang.jit(...) decorates like @tilelang.jit
  }
  if (name == "tilelang.cdiv" || name == "T.ceildiv") {
    const Value& a = r.req(0, "a");
    const Value& b = r.req(1, "b");
    r.done();
    if (is_number(a) && is_number(b) && !a.is<double>() && !b.is<double>()) {
      auto as_int = [](const Value& v) { return v.is<bool>() ? static_cast<int64_t>(v.get<bool>()) : v.get<int64_t>(); };
      int64_t x = as_int(a), y = as_int(b);
      if (y == 0) error_at(loc, "ceildiv by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1)
        error_at(loc, rt::str("integer overflow: T.ceildiv(", x, ", ", y, ") does not fit in 64 bits (kernel integers are at most 64-bit: 9223372036854775807)"));
      int64_t q = x / y;  // rounded toward zero; up when the exact quotient is positive
      if (x % y != 0 && (x < 0) == (y < 0)) ++q;
      return q;
    }
    ir::Expr x = to_expr(a, r.loc("a"), rt::str("the dividend of ", name)), y = to_expr(b, r.loc("b"), rt::str("the divisor of ", name));
    return ExprV{ir::floor_div(ir::add(x, ir::sub(y, ir::make_int(1, y->dtype))), y, loc)};
  }
  if (name == "tilelang.layout.make_swizzled_layout") {
    r.rest(0);
    r.ignore({"k_major", "allow_pad"});
    r.done();
    return NoneV{};
  }
  if (name == "T.Tensor" || name == "T.Buffer") {
    TensorTypeV t;
    const Value& shape = r.req(0, "shape");
    const Value* dtype = r.get(1, "dtype");
    r.ignore({"scope", "strides", "data", "elem_offset", "align", "offset_factor", "buffer_type", "axis_separators"});
    r.done();
    t.has_shape = true;
    if (const TupleV* tt = shape.get_if<TupleV>()) t.shape = tt->items;
    else t.shape = {shape};
    t.has_dtype = true;
    t.dtype = dtype ? to_dtype(*dtype, r.loc("dtype"), rt::str("the dtype of ", name)) : rt::DType::F32;
    return t;
  }
  if (name == "tile_kernel" || name == "T.prim_func" || name == "T.macro")
    error_at(loc, rt::str(name, " is a decorator: write @", name, " above a def"));
  if (name == "Tensor") error_at(loc, "Tensor is an annotation: write Tensor[FP16]");

  // ---- seed tensors
  if (name == "zeros_like") return seed_tensor(true, true, false);
  if (name == "empty_like") return seed_tensor(true, false, false);
  if (name == "zeros") return seed_tensor(false, true, false);
  if (name == "empty") return seed_tensor(false, false, false);
  if (name == "full") return seed_tensor(false, false, true);
  if (name == "ones") {
    Value buf = seed_tensor(false, false, false);
    const ir::Buffer& b = buf.get<BufferV>().buffer;
    emit(std::make_shared<const ir::FillNode>(ir::full_region(b, loc), ir::cast(b->dtype, ir::make_int(1)), loc));
    return buf;
  }

  // ---- T: kernels, memory, loops
  if (name == "T.Kernel") {
    require_staged(loc, "T.Kernel");
    KernelV k;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      ir::Expr g = to_expr(args.positional[i], args.positional_locs[i], "a grid dimension of T.Kernel");
      if (!rt::is_int(g->dtype)) error_at(args.positional_locs[i], "grid dimensions of T.Kernel must be integers");
      if (auto c = ir::as_const_int(g); c && *c < 1) error_at(args.positional_locs[i], rt::str("grid dimensions of T.Kernel must be at least 1 (got ", *c, ")"));
      if (auto c = ir::as_const_int(g); c && *c > std::numeric_limits<int32_t>::max())  // block indices are int32
        error_at(args.positional_locs[i], rt::str("grid dimensions of T.Kernel must be at most 2147483647 (got ", *c, ")"));
      k.grid.push_back(ir::cast(rt::DType::I32, g));
    }
    r.rest(0);
    if (k.grid.empty() || k.grid.size() > 3) error_at(loc, "T.Kernel takes one to three grid dimensions");
    if (const Value* t = r.get(99, "threads")) {
      if (const TupleV* tt = t->get_if<TupleV>()) {
        if (tt->items.empty() || tt->items.size() > 3)
          error_at(r.loc("threads"), rt::str("threads= takes a count or one to three dimensions, not ", tt->items.size()));
        k.threads = 1;
        for (const Value& d : tt->items) {
          k.thread_dims.push_back(to_int(d, r.loc("threads"), "threads"));
          if (k.thread_dims.back() < 1 || k.thread_dims.back() > 1024)
            error_at(r.loc("threads"), rt::str("each dimension of threads must be between 1 and 1024 (got ", k.thread_dims.back(), ")"));
          k.threads *= k.thread_dims.back();
        }
      } else {
        k.threads = to_int(*t, r.loc("threads"), "threads");
        k.thread_dims = {k.threads};
      }
      if (k.threads < 1 || k.threads > 1024) error_at(r.loc("threads"), rt::str("threads must be between 1 and 1024 (got ", k.threads, ")"));
    } else {
      k.thread_dims = {k.threads};
    }
    r.ignore({"prelude", "is_cpu", "cluster_dims"});
    r.done();
    return k;
  }
  if (name == "T.alloc_shared") return alloc(ir::Scope::Shared);
  if (name == "T.alloc_fragment") return alloc(ir::Scope::Fragment);
  if (name == "T.alloc_local") return alloc(ir::Scope::Local);
  if (name == "T.alloc_var") {
    require_staged(loc, name);
    rt::DType dtype = to_dtype(r.req(0, "dtype"), r.loc("dtype"), "the dtype of T.alloc_var");
    const Value* init = r.get(1, "init");
    r.ignore({"scope"});
    r.done();
    Value buf = make_buffer("var", dtype, {}, ir::Scope::Local, loc);
    if (init) emit(ir::make_store(buf.get<BufferV>().buffer, {}, ir::cast(dtype, to_expr(*init, r.loc("init"), "init")), loc));
    return buf;
  }
  if (name == "T.Pipelined") return loop(LoopKind::Pipelined);
  if (name == "T.Parallel") return loop(LoopKind::Parallel);
  if (name == "T.serial") return loop(LoopKind::Serial);
  if (name == "T.unroll") return loop(LoopKind::Unrolled);
  if (name == "T.vectorized") return loop(LoopKind::Vectorized);
  if (name == "T.grid") return loop(LoopKind::Grid);

  // ---- T: tile operations
  if (name == "T.copy") {
    require_launch(loc, name);
    bool src_point = false, dst_point = false;
    ir::Region src = to_region(r.req(0, "src"), r.loc("src"), "the source of T.copy", &src_point);
    ir::Region dst = to_region(r.req(1, "dst"), r.loc("dst"), "the destination of T.copy", &dst_point);
    r.ignore({"coalesced_width", "disable_tma", "eviction_policy"});
    r.done();
    if (src_point && dst_point) error_at(loc, "T.copy: give at least one side as a whole tensor or a slice, so the tile's shape is known");
    if (src_point) src = widen_point(src, dst, r.loc("src"), "T.copy");
    if (dst_point) dst = widen_point(dst, src, r.loc("dst"), "T.copy");
    std::vector<ir::Expr> a = squeezed(src), b = squeezed(dst);
    bool bad = a.size() != b.size();
    for (size_t i = 0; !bad && i < a.size(); ++i) bad = differ(a[i], b[i]);
    if (bad) error_at(loc, rt::str("T.copy: the source ", ir::print(src), " has shape ", extents_string(src), " but the destination ", ir::print(dst),
                                   " has shape ", extents_string(dst)));
    emit(std::make_shared<const ir::CopyNode>(src, dst, loc));
    return NoneV{};
  }
  if (name == "T.gemm") {
    require_launch(loc, name);
    ir::Region a = to_region(r.req(0, "A"), r.loc("A"), "A of T.gemm");
    ir::Region b = to_region(r.req(1, "B"), r.loc("B"), "B of T.gemm");
    ir::Region c = to_region(r.req(2, "C"), r.loc("C"), "C of T.gemm");
    bool ta = r.flag(3, "transpose_A", false, *this);
    bool tb = r.flag(4, "transpose_B", false, *this);
    bool clear = r.flag(99, "clear_accum", false, *this);
    r.ignore({"policy", "k_pack", "wg_wait", "mbar"});
    r.done();
    // Rows and columns: the region's extents without the unit ones in front of them, down to two
    // (Q[0, s0:s1, 0, :] is s x d; a [9, 1] tile stays a column, not a row).
    auto dims2 = [&](const ir::Region& x, const char* what) {
      std::vector<ir::Expr> d;
      for (const ir::Range& range : x.ranges) d.push_back(range.extent);
      for (size_t i = 0; i < d.size() && d.size() > 2;) {
        if (ir::is_const_int(d[i], 1)) d.erase(d.begin() + static_cast<std::ptrdiff_t>(i));
        else ++i;
      }
      if (d.size() != 2) error_at(loc, rt::str("T.gemm: ", what, " must be a 2-D tile, but ", ir::print(x), " has shape ", extents_string(x)));
      return d;
    };
    std::vector<ir::Expr> da = dims2(a, "A"), db = dims2(b, "B"), dc = dims2(c, "C");
    ir::Expr m = ta ? da[1] : da[0], ka = ta ? da[0] : da[1], kb = tb ? db[1] : db[0], n = tb ? db[0] : db[1];
    if (differ(ka, kb) || differ(m, dc[0]) || differ(n, dc[1]))
      error_at(loc, rt::str("T.gemm: shapes do not fit: A ", extents_string(a), ta ? " (transposed)" : "", ", B ", extents_string(b), tb ? " (transposed)" : "",
                            ", C ", extents_string(c), "; need A: M x K, B: K x N, C: M x N"));
    // An integer C sums integer products exactly in int32 (wrapping, as the tensor cores' s32 sums
    // do on every target); float operands into it, or a narrower or wider integer C, would not.
    auto int32_operand = [](ir::DType t) { return rt::is_int(t) && rt::bits(t) <= 32; };
    if (!rt::is_float(c.buffer->dtype) &&
        (c.buffer->dtype != ir::DType::I32 || !int32_operand(a.buffer->dtype) || !int32_operand(b.buffer->dtype)))
      error_at(loc, rt::str("T.gemm: an integer C must be int32 with integer A and B (int8, uint8, int32); got A ", rt::name(a.buffer->dtype), ", B ",
                            rt::name(b.buffer->dtype), ", C ", rt::name(c.buffer->dtype)));
    if (c.buffer->scope == ir::Scope::Shared && kernel()->style == ir::FuncStyle::PrimFunc) {
      // Accepted: TileLang allows shared accumulators; they cost more than fragments on GPUs.
    }
    emit(std::make_shared<const ir::GemmNode>(a, b, c, ta, tb, clear, c.buffer->dtype, nullptr, nullptr, std::vector<ir::Var>{}, loc));
    return NoneV{};
  }
  if (name == "T.clear" || name == "T.fill") {
    require_launch(loc, name);
    ir::Region dst = to_region(r.req(0, "buffer"), r.loc("buffer"), rt::str("the target of ", name));
    ir::Expr value = name == "T.clear" ? ir::make_int(0) : to_expr(r.req(1, "value"), r.loc("value"), "the fill value");
    r.done();
    emit(std::make_shared<const ir::FillNode>(dst, ir::cast(dst.buffer->dtype, value, loc), loc));
    return NoneV{};
  }
  if (name == "T.reduce_max") return reduce(ir::ReduceKind::Max);
  if (name == "T.reduce_min") return reduce(ir::ReduceKind::Min);
  if (name == "T.reduce_sum") return reduce(ir::ReduceKind::Sum);
  if (name == "T.reduce_abssum") return reduce(ir::ReduceKind::AbsSum);
  if (name == "T.reduce_absmax") return reduce(ir::ReduceKind::AbsMax);
  if (name == "T.atomic_add") {
    require_launch(loc, name);
    bool point = false;
    ir::Region dst = to_region(r.req(0, "dst"), r.loc("dst"), "the destination of T.atomic_add", &point);
    const Value& value = r.req(1, "value");
    r.ignore({"memory_order", "return_prev", "use_tma"});
    r.done();
    if (point && try_expr(value)) {
      std::vector<ir::Expr> idx;
      for (const ir::Range& x : dst.ranges) idx.push_back(x.min);
      emit(ir::make_store(dst.buffer, idx, ir::cast(dst.buffer->dtype, *try_expr(value), loc), loc, true));
      return NoneV{};
    }
    // Tile form: every element of the source tile is added into the destination tile.
    ir::Region src = to_region(value, r.loc("value"), "the value of T.atomic_add");
    if (point) dst = widen_point(dst, src, r.loc("dst"), "T.atomic_add");
    std::vector<ir::Expr> a = squeezed(src), b = squeezed(dst);
    bool bad = a.size() != b.size();
    for (size_t i = 0; !bad && i < a.size(); ++i) bad = differ(a[i], b[i]);
    if (bad) error_at(loc, rt::str("T.atomic_add: the value has shape ", extents_string(src), " but the destination has shape ", extents_string(dst)));
    // Loop over the non-unit dimensions of the destination; unit ones stay at their start.
    std::vector<ir::Var> vars;
    std::vector<ir::Expr> dst_idx, src_idx;
    for (const ir::Range& x : dst.ranges) {
      if (ir::is_const_int(x.extent, 1)) {
        dst_idx.push_back(x.min);
        continue;
      }
      vars.push_back(ir::make_var(rt::str("i", vars.size()), x.extent->dtype, loc));
      dst_idx.push_back(ir::add(x.min, vars.back()));
    }
    size_t v = 0;
    for (const ir::Range& x : src.ranges) src_idx.push_back(ir::is_const_int(x.extent, 1) ? x.min : ir::add(x.min, vars[v++]));
    ir::Stmt body = ir::make_store(dst.buffer, dst_idx, ir::cast(dst.buffer->dtype, ir::make_load(src.buffer, src_idx, loc)), loc, true);
    size_t vi = vars.size();
    for (auto it = dst.ranges.rbegin(); it != dst.ranges.rend(); ++it) {
      if (ir::is_const_int(it->extent, 1)) continue;
      --vi;
      body = ir::make_for(vars[vi], ir::make_int(0, vars[vi]->dtype), it->extent, ir::ForKind::Parallel, body, loc);
    }
    emit(body);
    return NoneV{};
  }

  // ---- T: scalar helpers
  if (name == "T.if_then_else") {
    const Value& c = r.req(0, "cond");
    const Value& t = r.req(1, "true_value");
    const Value& f = r.req(2, "false_value");
    r.done();
    if (!c.is<ExprV>()) {
      bool take = is_number(c) ? num(c) != 0.0 : true;
      return take ? t : f;
    }
    auto [te, fe] = operands(t, f, loc, "value of T.if_then_else");
    return ExprV{ir::select(c.get<ExprV>().expr, te, fe, loc)};
  }
  if (name == "T.cast") {
    const Value& a = r.req(0, "value");
    const Value& b = r.req(1, "dtype");
    r.done();
    // Both T.cast(value, dtype) and the TVM order T.cast(dtype, value) are seen in the wild.
    bool dtype_first = a.is<DTypeV>() || (a.is<std::string>() && dtype_from_name(a.get<std::string>()));
    const Value& v = dtype_first ? b : a;
    rt::DType d = to_dtype(dtype_first ? a : b, loc, "the dtype of T.cast");
    return ExprV{ir::convert(d, to_expr(v, loc, "the value of T.cast"), loc)};
  }
  if (name == "T.infinity") {
    const Value* d = r.get(0, "dtype");
    r.done();
    rt::DType dtype = d ? to_dtype(*d, r.loc("dtype"), "the dtype of T.infinity") : rt::DType::F32;
    if (!rt::is_float(dtype)) error_at(loc, rt::str("T.infinity needs a float dtype, not ", rt::name(dtype)));
    return ExprV{ir::make_float(std::numeric_limits<double>::infinity(), dtype, loc)};
  }
  if (name == "T.floordiv" || name == "T.floormod" || name == "T.truncdiv" || name == "T.truncmod") {
    ir::Expr a = to_expr(r.req(0, "a"), r.loc("a"), "a"), b = to_expr(r.req(1, "b"), r.loc("b"), "b");
    r.done();
    if (name == "T.floordiv") return ExprV{ir::floor_div(a, b, loc)};
    if (name == "T.floormod") return ExprV{ir::floor_mod(a, b, loc)};
    // C's truncating division; on integers only (floats have no remainder to truncate).
    ir::DType t = ir::promote(a->dtype, b->dtype);
    if (!rt::is_int(t)) error_at(loc, rt::str(name, " needs integers, not ", rt::name(t)));
    if (t == rt::DType::I8 || t == rt::DType::U8) t = rt::DType::I32;
    ir::Expr q = ir::make_binary(ir::BinaryOp::Div, t, ir::cast(t, a), ir::cast(t, b), loc);
    return ExprV{name == "T.truncdiv" ? q : ir::sub(ir::cast(t, a), ir::mul(q, ir::cast(t, b)), loc)};
  }
  if (name == "T.use_swizzle") {
    require_inside_kernel_launch(loc, name);
    const Value* p = r.get(0, "panel_size");
    bool enable = r.flag(1, "enable", true, *this);
    r.ignore({"order"});
    r.done();
    if (enable) {
      const int64_t panel = p ? to_int(*p, r.loc("panel_size"), "panel_size") : 10;
      // (A panel of 0 or fewer columns has no order to give; turning the swizzle off is enable=False.)
      if (panel < 1 || panel > (int64_t(1) << 20))
        error_at(r.loc("panel_size"), rt::str("T.use_swizzle: panel_size must be from 1 to 2^20 block columns, not ", panel,
                                              " (enable=False turns the swizzle off)"));
      launch()->swizzle_panel = static_cast<int>(panel);
    }
    return NoneV{};
  }
  if (name == "T.annotate_layout") {
    require_launch(loc, name);
    const Value& map = r.req(0, "layout_map");
    const SourceLoc map_loc = r.loc("layout_map");
    r.done();
    // Layouts are chosen by the compiler; the annotation is accepted for compatibility, but it must
    // be what TileLang takes: a dict from tiles to layouts.
    const DictV* d = map.get_if<DictV>();
    if (!d) error_at(map_loc, rt::str("T.annotate_layout takes a dict from tiles to layouts, not a ", type_name(map)));
    for (const auto& item : d->items)
      if (!item.first.get_if<BufferV>())
        error_at(map_loc, rt::str("T.annotate_layout: a key of the layout dict is a ", type_name(item.first),
                                  ", not a tile (T.alloc_shared / T.alloc_fragment)"));
    return NoneV{};
  }
  if (name == "T.get_thread_binding" || name == "T.get_block_binding") {
    require_inside_kernel_launch(loc, name);
    const Value* d = r.get(0, "dim");
    r.done();
    int64_t dim = d ? to_int(*d, r.loc("dim"), "dim") : 0;
    LaunchScope* l = launch();
    if (name == "T.get_block_binding") {
      if (dim < 0 || dim >= static_cast<int64_t>(l->block_vars.size())) error_at(loc, rt::str("the kernel has no block dimension ", dim));
      return ExprV{l->block_vars[dim]};
    }
    if (dim < 0 || dim >= static_cast<int64_t>(l->thread_dims.size())) error_at(loc, rt::str("the kernel has no thread dimension ", dim));
    ir::Expr t = l->thread_var;
    int64_t below = 1;
    for (int64_t i = 0; i < dim; ++i) below *= l->thread_dims[i];
    if (below > 1) t = ir::floor_div(t, ir::make_int(below));
    if (dim + 1 < static_cast<int64_t>(l->thread_dims.size())) t = ir::floor_mod(t, ir::make_int(l->thread_dims[dim]));
    return ExprV{t};
  }
  if (name == "T.sync_threads") {
    require_inside_kernel_launch(loc, name);
    r.done();
    emit(std::make_shared<const ir::BarrierNode>(loc));
    return NoneV{};
  }
  if (name == "T.call_extern") {
    require_staged(loc, name);
    rt::DType dtype = to_dtype(r.req(0, "dtype"), r.loc("dtype"), "the result dtype of T.call_extern");
    const Value& fn = r.req(1, "func_name");
    if (!fn.is<std::string>()) error_at(r.loc("func_name"), "T.call_extern needs the function's name as a string");
    if (!is_function_name(fn.get<std::string>()))
      error_at(r.loc("func_name"), rt::str("T.call_extern needs a function name (an identifier, optionally qualified: hypotf, std::hypot), not ",
                                           quote_string(fn.get<std::string>())));
    std::vector<ir::Expr> call_args;
    std::vector<Value> rest = r.rest(2);
    for (size_t i = 0; i < rest.size(); ++i) call_args.push_back(to_expr(rest[i], r.pos_loc(i + 2), "an argument of T.call_extern"));
    r.done();
    return ExprV{ir::make_call(dtype, ir::CallKind::Extern, fn.get<std::string>(), std::move(call_args), loc)};
  }
  if (name == "T.inline_code") {
    require_staged(loc, name);
    const Value& code = r.req(0, "code");
    if (!code.is<std::string>()) error_at(r.loc("code"), "T.inline_code needs the code as a string");
    std::string target;
    std::vector<std::pair<std::string, ir::Expr>> bound;
    for (size_t k = 0; k < args.keywords.size(); ++k) {
      const auto& [key, value] = args.keywords[k];
      if (key == "code") continue;
      if (key == "target") {
        if (!value.is<std::string>() || (value.get<std::string>() != "cpu" && value.get<std::string>() != "cuda"))
          error_at(args.keyword_locs[k], "target= of T.inline_code must be \"cpu\" or \"cuda\"");
        target = value.get<std::string>();
      } else {
        bound.push_back({key, to_expr(value, args.keyword_locs[k], rt::str("'", key, "' of T.inline_code"))});
      }
    }
    if (args.positional.size() > 1) error_at(args.positional_locs[1], "T.inline_code takes the code, then name=value arguments");
    emit(std::make_shared<const ir::InlineCodeNode>(target, code.get<std::string>(), std::move(bound), loc));
    return NoneV{};
  }
  if (name == "T.address_of") {
    const Value& v = r.req(0, "element");
    r.done();
    const ExprV* e = v.get_if<ExprV>();
    if (!e || !ir::as<ir::BufferLoadNode>(e->expr)) error_at(r.loc("element"), "T.address_of needs one tensor element, e.g. T.address_of(A[i, j])");
    return ExprV{ir::make_call(rt::DType::I64, ir::CallKind::Intrinsic, "address_of", {e->expr}, loc)};
  }
  if (name == "T.symbolic" || name == "T.dynamic") {
    const Value& n = r.req(0, "name");
    const Value* d = r.get(1, "dtype");
    r.done();
    if (!n.is<std::string>()) error_at(r.loc("name"), rt::str(name, " needs a name string"));
    rt::DType dtype = d ? to_dtype(*d, r.loc("dtype"), "dtype") : rt::DType::I32;
    return ExprV{ir::make_var(n.get<std::string>(), dtype, loc)};
  }
  error_at(loc, rt::str(name, "() is not supported"));
}

}  // namespace tilelang::frontend
