#include "tilelang/ir/op.h"

#include <cmath>
#include <limits>
#include <optional>

#include "rt/error.h"
#include "tl/device/numeric.h"
#include "tl/device/scalar.h"

namespace tilelang::ir {
namespace {

int int_rank(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::I8: return 1;
    case DType::U8: return 2;
    case DType::I32: return 3;
    case DType::I64: return 4;
    default: return -1;
  }
}

int64_t wrap_to(DType t, int64_t v) {
  switch (t) {
    case DType::Bool: return v != 0;
    case DType::I8: return static_cast<int8_t>(v);
    case DType::U8: return static_cast<uint8_t>(v);
    case DType::I32: return static_cast<int32_t>(v);
    default: return v;
  }
}

// Folding wraps like the kernel's fixed-width arithmetic, without C++'s undefined signed overflow
// (wrap_to then narrows to the result's type).
int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

int64_t floor_div_int(int64_t a, int64_t b) {
  if (b == -1) return wrap_sub(0, a);  // INT64_MIN / -1 traps in C++
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Both operands converted to their promoted type; as in C, integers narrower than 32 bits (and
// bools) compute in i32, so int8 products do not wrap.
DType arith_type(const Expr& a, const Expr& b) {
  DType t = promote(a->dtype, b->dtype);
  return t == DType::Bool || t == DType::I8 || t == DType::U8 ? DType::I32 : t;
}

Expr arith(BinaryOp op, Expr a, Expr b, SourceLoc loc) {
  DType t = arith_type(a, b);
  auto ia = as_const_int(a), ib = as_const_int(b);
  if (rt::is_int(t) && ia && ib) {
    int64_t x = *ia, y = *ib, r = 0;
    switch (op) {
      case BinaryOp::Add: r = wrap_add(x, y); break;
      case BinaryOp::Sub: r = wrap_sub(x, y); break;
      case BinaryOp::Mul: r = wrap_mul(x, y); break;
      case BinaryOp::Min: r = std::min(x, y); break;
      case BinaryOp::Max: r = std::max(x, y); break;
      case BinaryOp::FloorDiv:
        if (y == 0) return make_binary(op, t, cast(t, a), cast(t, b), loc);  // the checker reports it
        r = floor_div_int(x, y);
        break;
      case BinaryOp::FloorMod:
        if (y == 0) return make_binary(op, t, cast(t, a), cast(t, b), loc);
        r = wrap_sub(x, wrap_mul(floor_div_int(x, y), y));
        break;
      default: RT_UNREACHABLE("arith op ", op_symbol(op));
    }
    return make_int(wrap_to(t, r), t, loc);
  }
  if (rt::is_float(t)) {
    auto fa = as_const_float(a), fb = as_const_float(b);
    if (fa && fb) {
      double x = *fa, y = *fb, r = 0;
      switch (op) {
        case BinaryOp::Add: r = x + y; break;
        case BinaryOp::Sub: r = x - y; break;
        case BinaryOp::Mul: r = x * y; break;
        // A NaN operand gives the other one, as the kernels' max / min do.
        case BinaryOp::Min: r = tl::min_num(x, y); break;
        case BinaryOp::Max: r = tl::max_num(x, y); break;
        case BinaryOp::Div: r = x / y; break;
        // As the kernels compute them (tl/device/scalar.h): in float below float64.
        case BinaryOp::FloorDiv: r = t == DType::F64 ? tl::floordiv(x, y) : tl::floordiv(float(x), float(y)); break;
        case BinaryOp::FloorMod: r = t == DType::F64 ? tl::floormod(x, y) : tl::floormod(float(x), float(y)); break;
        case BinaryOp::Pow: r = std::pow(x, y); break;
        default: RT_UNREACHABLE("arith op ", op_symbol(op));
      }
      // Below float64 the kernels compute in float (narrow types are rounded when stored): so does
      // the fold (the double result rounded to float is float's own, correctly rounded, result).
      if (t != DType::F64) r = static_cast<float>(r);
      return make_float(r, t, loc);
    }
  }
  return make_binary(op, t, cast(t, a, loc), cast(t, b, loc), loc);
}

}  // namespace

bool holds(DType t, int64_t v) { return rt::is_int(t) && wrap_to(t, v) == v; }

DType promote(DType a, DType b) {
  if (a == b) return a;
  bool fa = rt::is_float(a), fb = rt::is_float(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (!fa && !fb) return int_rank(a) >= int_rank(b) ? a : b;
  int ba = rt::bits(a), bb = rt::bits(b);
  if (ba != bb) return ba > bb ? a : b;
  return ba >= 32 ? (a == DType::F64 ? a : b) : DType::F32;  // f16 with bf16, e4m3 with e5m2
}

Expr add(Expr a, Expr b, SourceLoc loc) {
  if (is_const_int(b, 0) && !rt::is_float(a->dtype) && promote(a->dtype, b->dtype) == a->dtype) return a;
  if (is_const_int(a, 0) && !rt::is_float(b->dtype) && promote(a->dtype, b->dtype) == b->dtype) return b;
  return arith(BinaryOp::Add, std::move(a), std::move(b), std::move(loc));
}
Expr sub(Expr a, Expr b, SourceLoc loc) {
  if (is_const_int(b, 0) && !rt::is_float(a->dtype) && promote(a->dtype, b->dtype) == a->dtype) return a;
  return arith(BinaryOp::Sub, std::move(a), std::move(b), std::move(loc));
}
Expr mul(Expr a, Expr b, SourceLoc loc) {
  if (is_const_int(b, 1) && !rt::is_float(a->dtype) && promote(a->dtype, b->dtype) == a->dtype) return a;
  if (is_const_int(a, 1) && !rt::is_float(b->dtype) && promote(a->dtype, b->dtype) == b->dtype) return b;
  return arith(BinaryOp::Mul, std::move(a), std::move(b), std::move(loc));
}
Expr true_div(Expr a, Expr b, SourceLoc loc) {
  DType t = promote(a->dtype, b->dtype);
  if (!rt::is_float(t)) {
    a = cast(DType::F32, a, loc);
    b = cast(DType::F32, b, loc);
  }
  return arith(BinaryOp::Div, std::move(a), std::move(b), std::move(loc));
}
Expr floor_div(Expr a, Expr b, SourceLoc loc) {
  if (is_const_int(b, 1) && rt::is_int(a->dtype)) return a;
  return arith(BinaryOp::FloorDiv, std::move(a), std::move(b), std::move(loc));
}
Expr floor_mod(Expr a, Expr b, SourceLoc loc) { return arith(BinaryOp::FloorMod, std::move(a), std::move(b), std::move(loc)); }
Expr min(Expr a, Expr b, SourceLoc loc) { return arith(BinaryOp::Min, std::move(a), std::move(b), std::move(loc)); }
Expr max(Expr a, Expr b, SourceLoc loc) { return arith(BinaryOp::Max, std::move(a), std::move(b), std::move(loc)); }

Expr pow(Expr a, Expr b, SourceLoc loc) {
  auto ia = as_const_int(a), ib = as_const_int(b);
  if (ia && ib && *ib >= 0 && rt::is_int(arith_type(a, b))) {
    int64_t r = 1, base = *ia;
    for (int64_t e = *ib; e > 0; e >>= 1) {  // by squaring: the exponent may be huge
      if (e & 1) r = wrap_mul(r, base);
      base = wrap_mul(base, base);
    }
    return make_int(wrap_to(arith_type(a, b), r), arith_type(a, b), loc);
  }
  DType t = promote(a->dtype, b->dtype);
  if (!rt::is_float(t)) t = DType::F32;  // integer powers with a runtime operand are computed in float
  return arith(BinaryOp::Pow, cast(t, a, loc), cast(t, b, loc), std::move(loc));
}

Expr bitwise(BinaryOp op, Expr a, Expr b, SourceLoc loc) {
  const bool shift = op == BinaryOp::Shl || op == BinaryOp::Shr;
  // Shifts compute in int32 at least, as in C and as the code generators emit them (an int8
  // shifted left keeps its high bits); & | ^ cannot leave their operands' type.
  DType t = shift ? arith_type(a, b) : promote(a->dtype, b->dtype);
  auto ia = as_const_int(a), ib = as_const_int(b);
  // A shift by a negative amount or by the width of the type or more is left unfolded: verify
  // reports it.
  if (ia && ib && (!shift || (*ib >= 0 && *ib < rt::bits(t)))) {
    int64_t x = *ia, y = *ib, r = 0;
    switch (op) {
      case BinaryOp::BitAnd: r = x & y; break;
      case BinaryOp::BitOr: r = x | y; break;
      case BinaryOp::BitXor: r = x ^ y; break;
      case BinaryOp::Shl: r = static_cast<int64_t>(static_cast<uint64_t>(x) << y); break;
      case BinaryOp::Shr: r = x >> y; break;
      default: RT_UNREACHABLE("bitwise op ", op_symbol(op));
    }
    return make_int(wrap_to(t, r), t, loc);
  }
  return make_binary(op, t, cast(t, a, loc), cast(t, b, loc), loc);
}

Expr binary(BinaryOp op, Expr a, Expr b, SourceLoc loc) {
  switch (op) {
    case BinaryOp::Add: return add(a, b, loc);
    case BinaryOp::Sub: return sub(a, b, loc);
    case BinaryOp::Mul: return mul(a, b, loc);
    case BinaryOp::Div: return true_div(a, b, loc);
    case BinaryOp::FloorDiv: return floor_div(a, b, loc);
    case BinaryOp::FloorMod: return floor_mod(a, b, loc);
    case BinaryOp::Min: return min(a, b, loc);
    case BinaryOp::Max: return max(a, b, loc);
    case BinaryOp::Pow: return pow(a, b, loc);
    case BinaryOp::And: return logical_and(a, b, loc);
    case BinaryOp::Or: return logical_or(a, b, loc);
    case BinaryOp::BitAnd:
    case BinaryOp::BitOr:
    case BinaryOp::BitXor:
    case BinaryOp::Shl:
    case BinaryOp::Shr: return bitwise(op, a, b, loc);
    default: return compare(op, a, b, loc);
  }
}

Expr compare(BinaryOp op, Expr a, Expr b, SourceLoc loc) {
  RT_ICHECK(is_comparison(op));
  DType t = promote(a->dtype, b->dtype);
  auto ia = as_const_int(a), ib = as_const_int(b);
  auto fa = as_const_float(a), fb = as_const_float(b);
  if (fa && fb) {
    bool r = false;
    double x = *fa, y = *fb;
    if (ia && ib) x = static_cast<double>(*ia), y = static_cast<double>(*ib);
    switch (op) {
      case BinaryOp::EQ: r = ia && ib ? *ia == *ib : x == y; break;
      case BinaryOp::NE: r = ia && ib ? *ia != *ib : x != y; break;
      case BinaryOp::LT: r = ia && ib ? *ia < *ib : x < y; break;
      case BinaryOp::LE: r = ia && ib ? *ia <= *ib : x <= y; break;
      case BinaryOp::GT: r = ia && ib ? *ia > *ib : x > y; break;
      case BinaryOp::GE: r = ia && ib ? *ia >= *ib : x >= y; break;
      default: break;
    }
    return make_bool(r, loc);
  }
  return make_binary(op, DType::Bool, cast(t, a, loc), cast(t, b, loc), loc);
}

Expr logical_and(Expr a, Expr b, SourceLoc loc) {
  if (auto ia = as_const_int(a)) return *ia ? cast(DType::Bool, b, loc) : make_bool(false, loc);
  if (auto ib = as_const_int(b)) return *ib ? cast(DType::Bool, a, loc) : make_bool(false, loc);
  return make_binary(BinaryOp::And, DType::Bool, cast(DType::Bool, a, loc), cast(DType::Bool, b, loc), loc);
}
Expr logical_or(Expr a, Expr b, SourceLoc loc) {
  if (auto ia = as_const_int(a)) return *ia ? make_bool(true, loc) : cast(DType::Bool, b, loc);
  if (auto ib = as_const_int(b); ib && !*ib) return cast(DType::Bool, a, loc);
  return make_binary(BinaryOp::Or, DType::Bool, cast(DType::Bool, a, loc), cast(DType::Bool, b, loc), loc);
}
Expr logical_not(Expr a, SourceLoc loc) {
  if (auto ia = as_const_int(a)) return make_bool(*ia == 0, loc);
  if (auto fa = as_const_float(a)) return make_bool(*fa == 0.0, loc);
  return make_unary(UnaryOp::Not, DType::Bool, cast(DType::Bool, a, loc), loc);
}
Expr neg(Expr a, SourceLoc loc) {
  DType t = rt::is_float(a->dtype) ? a->dtype : arith_type(a, a);  // -int8 is int32, as in C
  if (auto ia = as_const_int(a); ia && rt::is_int(t)) return make_int(wrap_to(t, wrap_sub(0, *ia)), t, loc);
  if (const FloatImmNode* f = as<FloatImmNode>(a)) return make_float(-f->value, t, loc);
  return make_unary(UnaryOp::Neg, t, cast(t, a, loc), loc);
}

Expr bit_not(Expr a, SourceLoc loc) {
  RT_ICHECK(rt::is_int(a->dtype), "'~' of ", rt::name(a->dtype));
  DType t = arith_type(a, a);  // ~uint8 is int32, as in C (~200 is -201, not 55)
  if (auto ia = as_const_int(a)) return make_int(wrap_to(t, ~*ia), t, loc);
  return make_unary(UnaryOp::BitNot, t, cast(t, a, loc), loc);
}

Expr select(Expr cond, Expr t, Expr f, SourceLoc loc) {
  DType type = promote(t->dtype, f->dtype);
  if (auto c = as_const_int(cond)) return cast(type, *c ? t : f, loc);
  return make_select(type, cast(DType::Bool, cond, loc), cast(type, t, loc), cast(type, f, loc), loc);
}

namespace {
// `x` rounded to a narrow float format as the kernels round it (tl/device/numeric.h): through a float
// rounded to odd, so the result is correctly rounded; nullopt for the other types.
template <class X>
std::optional<double> round_to_narrow(DType dtype, X x) {
  const float f = tl::to_float_odd(x);
  switch (dtype) {
    case DType::F16: return tl::to_float(tl::from_float<tl::half_t>(f));
    case DType::BF16: return tl::to_float(tl::from_float<tl::bfloat16_t>(f));
    case DType::F8E4M3: return tl::to_float(tl::from_float<tl::float8_e4m3_t>(f));
    case DType::F8E5M2: return tl::to_float(tl::from_float<tl::float8_e5m2_t>(f));
    case DType::F4E2M1: return tl::to_float(tl::from_float<tl::float4_e2m1_t>(f));
    default: return std::nullopt;
  }
}
}  // namespace

Expr cast(DType dtype, Expr value, SourceLoc loc) {
  if (value->dtype == dtype) return value;
  // A constant converted to a float type holds the value of that type, rounded once (a bfloat16 257
  // computed as 257 before, not 256).
  if (const IntImmNode* i = as<IntImmNode>(value)) {
    if (dtype == DType::F64) return make_float(static_cast<double>(i->value), dtype, loc);
    if (dtype == DType::F32) return make_float(static_cast<float>(i->value), dtype, loc);
    if (auto r = round_to_narrow(dtype, i->value)) return make_float(*r, dtype, loc);
    if (rt::is_float(dtype)) return make_cast(dtype, std::move(value), std::move(loc));
    return make_int(wrap_to(dtype, i->value), dtype, loc);
  }
  if (const FloatImmNode* f = as<FloatImmNode>(value)) {
    if (rt::is_float(dtype)) {
      if (dtype == DType::F32) return make_float(static_cast<float>(f->value), dtype, loc);
      if (dtype == DType::F64) return make_float(f->value, dtype, loc);
      if (auto r = round_to_narrow(dtype, f->value)) return make_float(*r, dtype, loc);
    } else if (dtype == DType::Bool) {
      if (std::isfinite(f->value)) return make_bool(f->value != 0.0, loc);
    } else {
      // As the kernels convert (tl::trunc_to): toward zero, saturating, NaN -> 0.
      switch (dtype) {
        case DType::I8: return make_int(tl::trunc_to<int8_t>(f->value), dtype, loc);
        case DType::U8: return make_int(tl::trunc_to<uint8_t>(f->value), dtype, loc);
        case DType::I32: return make_int(tl::trunc_to<int32_t>(f->value), dtype, loc);
        case DType::I64: return make_int(tl::trunc_to<int64_t>(f->value), dtype, loc);
        default: break;
      }
    }
  }
  return make_cast(dtype, std::move(value), std::move(loc));
}

Expr convert(DType dtype, Expr value, SourceLoc loc) {
  const bool held_in_float32 = value->dtype == dtype && rt::is_float(dtype) && rt::bits(dtype) < 32 &&
                               value->kind != NodeKind::BufferLoad && value->kind != NodeKind::FloatImm && value->kind != NodeKind::Cast;
  if (held_in_float32) value = cast(DType::F32, std::move(value), loc);
  return cast(dtype, std::move(value), std::move(loc));
}

namespace {
struct MathInfo {
  const char* name;
  int arity;
};
constexpr MathInfo kMath[] = {
    {"exp", 1},   {"exp2", 1},  {"log", 1},   {"log2", 1},  {"log10", 1}, {"sqrt", 1},  {"rsqrt", 1},
    {"abs", 1},   {"sin", 1},   {"cos", 1},   {"tan", 1},   {"tanh", 1},  {"sigmoid", 1}, {"floor", 1},
    {"ceil", 1},  {"round", 1}, {"trunc", 1}, {"erf", 1},   {"pow", 2},   {"fma", 3},
};
const MathInfo* find_math(const std::string& name) {
  for (const MathInfo& m : kMath)
    if (name == m.name) return &m;
  return nullptr;
}
}  // namespace

bool is_math_intrinsic(const std::string& name) { return find_math(name) != nullptr; }

Expr call_math(const std::string& name, std::vector<Expr> args, SourceLoc loc) {
  const MathInfo* info = find_math(name);
  RT_ICHECK(info && static_cast<int>(args.size()) == info->arity, "math intrinsic ", name);
  DType t = args[0]->dtype;
  for (const Expr& a : args) t = promote(t, a->dtype);
  if (name == "abs" && !rt::is_float(t)) {  // integer abs stays integer, int32 at least (as in C)
    t = arith_type(args[0], args[0]);
    if (auto v = as_const_int(args[0])) return make_int(wrap_to(t, *v < 0 ? wrap_sub(0, *v) : *v), t, loc);
    return make_call(t, CallKind::Intrinsic, name, {cast(t, args[0], loc)}, loc);
  }
  if (!rt::is_float(t)) t = DType::F32;
  for (Expr& a : args) a = cast(t, a, loc);
  return make_call(t, CallKind::Intrinsic, name, std::move(args), std::move(loc));
}

std::optional<int64_t> as_const_int(const Expr& e) {
  if (const IntImmNode* i = as<IntImmNode>(e)) return i->value;
  return std::nullopt;
}
std::optional<double> as_const_float(const Expr& e) {
  if (const FloatImmNode* f = as<FloatImmNode>(e)) return f->value;
  if (const IntImmNode* i = as<IntImmNode>(e)) return static_cast<double>(i->value);
  return std::nullopt;
}
bool is_const_int(const Expr& e, int64_t value) {
  auto v = as_const_int(e);
  return v && *v == value;
}

DType index_dtype(const Expr& a, const Expr& b) {
  return a->dtype == DType::I64 || b->dtype == DType::I64 ? DType::I64 : DType::I32;
}

}  // namespace tilelang::ir
