// trig_load_bound (backends/cpu/trig_bounds.h): which loads bound the inline sin/cos arguments of
// a kernel, and up to what magnitude, on hand-built loop IR (cpu_codegen_util.h).
#include <gtest/gtest.h>

#include "backends/cpu/trig_bounds.h"
#include "cpu_codegen_util.h"

namespace lt {
namespace {

using namespace cpu_codegen_test;  // NOLINT: the shared test helpers

// ---- trig_load_bound: which loads bound the inline sin/cos arguments, and up to what size -------

loop::Kernel one_stage_kernel(Stage st, DType t) {
  loop::Kernel k;
  k.name = "bounds";
  k.outer = {64};
  k.args = {{0, t, 64, false, false}, {1, t, 64, false, true}};
  k.stages = {std::move(st)};
  return k;
}

TEST(TrigLoadBound, SinChainAllowsLoadsUpToTheLimitMinusTheSteps) {
  // x = x + sin(x), 20 times: argument k is at most |x| + k, so loads up to ~38980 qualify.
  Body b(StageKind::MapOuter);
  int x = b.load(DType::Float32, 0, aff({1}));
  const int first = x;
  for (int i = 0; i < 20; ++i)
    x = b.op(Op::Add, DType::Float32, x, b.op(Op::Sin, DType::Float32, x));
  b.store(1, aff({1}), x);
  const cpu::TrigLoadBound tb = cpu::trig_load_bound(one_stage_kernel(b.st, DType::Float32));
  ASSERT_TRUE(tb.usable);
  EXPECT_GT(tb.max_load, 38979.0f);
  EXPECT_LT(tb.max_load, 38981.0f);
  ASSERT_EQ(tb.tracked.size(), 1u);
  for (size_t i = 0; i < tb.tracked[0].size(); ++i) EXPECT_EQ(tb.tracked[0][i], i == size_t(first));
}

TEST(TrigLoadBound, ProductsScaleTheThresholdAndUntouchedLoadsAreNotTracked) {
  // sin(x * 1000) + y: loads of x up to ~39 qualify; y never reaches an argument.
  Body b(StageKind::MapOuter);
  int x = b.load(DType::Float32, 0, aff({1}));
  int y = b.load(DType::Float32, 0, aff({1}, 7));
  int s = b.op(Op::Sin, DType::Float32,
               b.op(Op::Mul, DType::Float32, x, b.cnst(DType::Float32, 1000.0)));
  b.store(1, aff({1}), b.op(Op::Add, DType::Float32, s, y));
  const cpu::TrigLoadBound tb = cpu::trig_load_bound(one_stage_kernel(b.st, DType::Float32));
  ASSERT_TRUE(tb.usable);
  EXPECT_NEAR(tb.max_load, 39.0f, 1e-4f);
  EXPECT_LT(tb.max_load * 1000.0f, 39000.0f);
  EXPECT_TRUE(tb.tracked[0][static_cast<size_t>(x)]);
  EXPECT_FALSE(tb.tracked[0][static_cast<size_t>(y)]);
}

TEST(TrigLoadBound, UnboundedOperationsFallBackToTrackingArguments) {
  for (Op o : {Op::Div, Op::Exp, Op::Log, Op::Sqrt}) {
    Body b(StageKind::MapOuter);
    int x = b.load(DType::Float32, 0, aff({1}));
    int v = o == Op::Div ? b.op(o, DType::Float32, b.cnst(DType::Float32, 1.0), x)
                         : b.op(o, DType::Float32, x);
    b.store(1, aff({1}), b.op(Op::Cos, DType::Float32, v));
    EXPECT_FALSE(cpu::trig_load_bound(one_stage_kernel(b.st, DType::Float32)).usable) << op_name(o);
  }
  // A constant argument beyond the range can never take the inline code either.
  Body b(StageKind::MapOuter);
  int x = b.load(DType::Float32, 0, aff({1}));
  b.store(1, aff({1}),
          b.op(Op::Sin, DType::Float32,
               b.op(Op::Add, DType::Float32, x, b.cnst(DType::Float32, 40000.0))));
  EXPECT_FALSE(cpu::trig_load_bound(one_stage_kernel(b.st, DType::Float32)).usable);
}

TEST(TrigLoadBound, NarrowDtypesStopAtTheirOverflow) {
  // float16 x + x - x: the argument is at most 3 |x| (under 39000 for |x| < 13000), and x + x must
  // stay finite (2 |x| <= 65504); bfloat16 has float32's range, so only the first limit applies.
  for (DType t : {DType::Float16, DType::BFloat16}) {
    Body b(StageKind::MapOuter);
    int x = b.load(t, 0, aff({1}));
    int v = b.op(Op::Sub, t, b.op(Op::Add, t, x, x), x);
    b.store(1, aff({1}), b.op(Op::Sin, t, v));
    const cpu::TrigLoadBound tb = cpu::trig_load_bound(one_stage_kernel(b.st, t));
    ASSERT_TRUE(tb.usable);
    EXPECT_LT(tb.max_load, 13000.0f);
    EXPECT_GT(tb.max_load, 12600.0f);  // rounding margins: 2^-7 per bfloat16 op
  }
  // (x * 4) * 0.25: the float16 overflow of x * 4 (past 65504) comes before the argument limit.
  Body b(StageKind::MapOuter);
  int x = b.load(DType::Float16, 0, aff({1}));
  int big = b.op(Op::Mul, DType::Float16, x, b.cnst(DType::Float16, 4.0));
  int v = b.op(Op::Mul, DType::Float16, big, b.cnst(DType::Float16, 0.25));
  b.store(1, aff({1}), b.op(Op::Sin, DType::Float16, v));
  const cpu::TrigLoadBound tb = cpu::trig_load_bound(one_stage_kernel(b.st, DType::Float16));
  ASSERT_TRUE(tb.usable);
  EXPECT_LT(tb.max_load * 4.0f, 65504.0f);
  EXPECT_GT(tb.max_load * 4.0f, 65000.0f);
}

}  // namespace
}  // namespace lt
