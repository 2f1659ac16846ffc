// The simplifier's range-based folding (passes/simplify.cc, analysis/bounds.cc): integer
// comparisons the enclosing loops decide become constants, and nothing is folded where the machine
// arithmetic would wrap.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>

#include "tilelang/analysis/bounds.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/printer.h"
#include "tilelang/passes/simplify.h"

namespace {

namespace ir = tilelang::ir;
namespace analysis = tilelang::analysis;

ir::Expr i32(int64_t v) { return ir::make_int(v, ir::DType::I32); }
ir::Expr plus(ir::Expr a, ir::Expr b) { return ir::make_binary(ir::BinaryOp::Add, ir::DType::I32, a, b); }
ir::Expr times(ir::Expr a, ir::Expr b) { return ir::make_binary(ir::BinaryOp::Mul, ir::DType::I32, a, b); }
ir::Expr cmp(ir::BinaryOp op, ir::Expr a, ir::Expr b) { return ir::make_binary(op, ir::DType::Bool, a, b); }

TEST(SimplifyRanges, ComparisonsDecidedByRanges) {
  const ir::Var k = ir::make_var("k"), j = ir::make_var("j");
  const analysis::VarRanges ranges{{k.get(), {0, 63}}, {j.get(), {0, 63}}};
  const ir::Expr flat = plus(times(k, i32(64)), j);  // 0 .. 4095
  auto decide = [&](ir::BinaryOp op, int64_t v) { return analysis::decide_comparison(op, flat, i32(v), ranges); };
  EXPECT_EQ(decide(ir::BinaryOp::LT, 4096), std::optional<bool>(true));
  EXPECT_EQ(decide(ir::BinaryOp::LT, 4095), std::nullopt);  // 4095 itself is reached
  EXPECT_EQ(decide(ir::BinaryOp::LE, 4095), std::optional<bool>(true));
  EXPECT_EQ(decide(ir::BinaryOp::GE, 4096), std::optional<bool>(false));
  EXPECT_EQ(decide(ir::BinaryOp::GT, -1), std::optional<bool>(true));
  EXPECT_EQ(decide(ir::BinaryOp::GE, 0), std::optional<bool>(true));
  EXPECT_EQ(decide(ir::BinaryOp::EQ, 5000), std::optional<bool>(false));
  EXPECT_EQ(decide(ir::BinaryOp::NE, -3), std::optional<bool>(true));
  EXPECT_EQ(decide(ir::BinaryOp::EQ, 100), std::nullopt);
  // A variable without a range decides nothing.
  const ir::Var free = ir::make_var("n");
  EXPECT_EQ(analysis::decide_comparison(ir::BinaryOp::LT, free, i32(4096), ranges), std::nullopt);
}

// x * x wraps in int32 for x above 46340, so (x * x) // 2^20 is not within [0, 4095] on the machine
// although it is in exact arithmetic: the comparison must stay.
TEST(SimplifyRanges, NoFoldingWhereInt32Wraps) {
  const ir::Var x = ir::make_var("x");
  const analysis::VarRanges ranges{{x.get(), {0, 65535}}};
  const ir::Expr q = ir::make_binary(ir::BinaryOp::FloorDiv, ir::DType::I32, times(x, x), i32(1 << 20));
  EXPECT_EQ(analysis::decide_comparison(ir::BinaryOp::LT, q, i32(4096), ranges), std::nullopt);
  EXPECT_FALSE(analysis::bound_of(times(x, x), ranges).known());
  // The same in int64 does not wrap, and is decided.
  const ir::Expr x64 = ir::make_cast(ir::DType::I64, x);
  const ir::Expr q64 = ir::make_binary(ir::BinaryOp::FloorDiv, ir::DType::I64,
                                       ir::make_binary(ir::BinaryOp::Mul, ir::DType::I64, x64, x64),
                                       ir::make_int(1 << 20, ir::DType::I64));
  EXPECT_EQ(analysis::decide_comparison(ir::BinaryOp::LT, q64, ir::make_int(4096, ir::DType::I64), ranges),
            std::optional<bool>(true));
  // Bounds beyond int64 itself are unbounded too: x * 2^40 does not fold to "== 0".
  const analysis::VarRanges wide{{x.get(), {0, int64_t(1) << 30}}};
  const ir::Expr huge = ir::make_binary(ir::BinaryOp::Mul, ir::DType::I64, x64, ir::make_int(int64_t(1) << 40, ir::DType::I64));
  EXPECT_FALSE(analysis::bound_of(huge, wide).known());
  EXPECT_EQ(analysis::decide_comparison(ir::BinaryOp::EQ, huge, ir::make_int(0, ir::DType::I64), wide), std::nullopt);
}

// The attention kernel's key mask inside its loops: gone when the loops never reach the bound, kept
// when they do.
TEST(SimplifyRanges, LoopRangesRemoveAMaskTheLoopsCannotHit) {
  auto nest = [](int64_t key_blocks) {
    const ir::Var k = ir::make_var("k"), j = ir::make_var("j");
    const ir::Expr mask = cmp(ir::BinaryOp::LT, plus(times(k, i32(64)), j), i32(4096));
    const ir::Stmt work = ir::make_evaluate(ir::make_call(ir::DType::I32, ir::CallKind::Extern, "work", {k, j}));
    const ir::Stmt body = ir::make_if(mask, work);
    return ir::make_for(k, i32(0), i32(key_blocks), ir::ForKind::Serial,
                        ir::make_for(j, i32(0), i32(64), ir::ForKind::Serial, body));
  };
  const std::string whole = ir::print(tilelang::passes::simplify_stmt(nest(64)));
  EXPECT_EQ(whole.find("4096"), std::string::npos) << whole;
  EXPECT_EQ(whole.find("if"), std::string::npos) << whole;
  EXPECT_NE(whole.find("work"), std::string::npos) << whole;
  const std::string partial = ir::print(tilelang::passes::simplify_stmt(nest(65)));
  EXPECT_NE(partial.find("4096"), std::string::npos) << partial;
}

// Constant folding of the operations themselves (ir/op.cc) wraps like the target's fixed-width
// integers and stays defined in C++ (found by fuzzing: INT64_MIN // -1 killed tl with SIGFPE, and an
// integer power ran one factor per unit of a huge exponent).
TEST(ConstantFolding, WrapsWithoutTrappingOrLooping) {
  auto i64 = [](int64_t v) { return ir::make_int(v, ir::DType::I64); };
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ir::as_const_int(ir::floor_div(i64(lowest), i64(-1))), std::optional<int64_t>(lowest));
  EXPECT_EQ(ir::as_const_int(ir::floor_mod(i64(lowest), i64(-1))), std::optional<int64_t>(0));
  EXPECT_EQ(ir::as_const_int(ir::floor_div(i64(-7), i64(2))), std::optional<int64_t>(-4));
  EXPECT_EQ(ir::as_const_int(ir::add(i64(std::numeric_limits<int64_t>::max()), i64(1))), std::optional<int64_t>(lowest));
  EXPECT_EQ(ir::as_const_int(ir::add(i32(2147483647), i32(1))), std::optional<int64_t>(-2147483648LL));
  EXPECT_EQ(ir::as_const_int(ir::pow(i32(3), i32(5))), std::optional<int64_t>(243));
  EXPECT_EQ(ir::as_const_int(ir::pow(i64(2), i64(10000000000))), std::optional<int64_t>(0));  // 2^64 and up wrap to 0
  EXPECT_EQ(ir::as_const_int(ir::pow(i32(-1), i64(9223372036854775807))), std::optional<int64_t>(-1));
  EXPECT_EQ(ir::as_const_int(ir::bitwise(ir::BinaryOp::Shl, i32(1), i32(31))), std::optional<int64_t>(-2147483648LL));
  // A shift by the type's width or more, or by a negative count, is left as written.
  EXPECT_EQ(ir::as_const_int(ir::bitwise(ir::BinaryOp::Shl, i64(1), i64(70))), std::nullopt);
  EXPECT_EQ(ir::as_const_int(ir::bitwise(ir::BinaryOp::Shr, i32(1), i32(-1))), std::nullopt);
}

}  // namespace
