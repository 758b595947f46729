// Buffer donation in lowering (lowering/donation.h): which outputs may be written into an input's
// memory. Pinned on small traced graphs (an elementwise update takes its own input; a transposed or
// broadcast read never qualifies; Adam's three outputs each take their own buffer) and on
// hand-built plans and kernels (an input read by a later kernel, or at another index, is refused).
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "lowering/complete_plan.h"
#include "lowering/donation.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"
#include "runtime/indexing.h"
#include "runtime/tensor_impl.h"
#include "test_util.h"

namespace lt {
namespace {

using testing::kLazyCpu;

struct Lowered {
  NodeList keep;
  Graph graph;
  Plan plan;
};

Lowered lower_roots(const std::vector<Tensor>& roots) {
  Lowered l;
  std::vector<const Node*> raw;
  for (const Tensor& t : roots) {
    l.keep.push_back(node_of(*t.impl()));
    raw.push_back(l.keep.back().get());
  }
  l.graph = collect_graph(raw);
  l.plan = lower(l.graph);
  return l;
}

// The graph input of tensor t's data (a materialized tensor), or -1.
int input_of(const Lowered& l, const Tensor& t) {
  for (size_t j = 0; j < l.graph.inputs.size(); ++j)
    if (l.graph.inputs[j]->data.get() == t.impl()->storage.get()) return static_cast<int>(j);
  return -1;
}

// The graph input whose memory root r may take, or -1.
int donated_input(const Lowered& l, size_t r) {
  for (const Donation& d : l.plan.donations)
    if (d.output == l.plan.output_buffers.at(r)) return l.plan.buffers.at(d.input).input;
  return -1;
}

TEST(DonationLowering, ElementwiseUpdateTakesItsOwnInput) {
  Tensor p = testing::random_tensor({4, 8}, 1, kLazyCpu),
         g = testing::random_tensor({4, 8}, 2, kLazyCpu);
  Lowered l = lower_roots({p - g * 0.1});
  ASSERT_EQ(l.plan.donations.size(), 1u) << l.plan.grouping;
  EXPECT_EQ(donated_input(l, 0), input_of(l, p));
  // The kernel that writes it is marked, so code generators keep it correct when aliased.
  size_t marked = 0;
  for (const auto& k : l.plan.kernels) marked += k.inplace.size();
  EXPECT_EQ(marked, 1u);
}

TEST(DonationLowering, AdamUpdateKeepsEachTensorInItsOwnBuffer) {
  Tensor p = testing::random_tensor({16, 8}, 1, kLazyCpu),
         m = testing::random_tensor({16, 8}, 2, kLazyCpu);
  Tensor v = testing::random_tensor({16, 8}, 3, kLazyCpu, 0.f, 1.f),
         g = testing::random_tensor({16, 8}, 4, kLazyCpu);
  Tensor m2 = m * 0.9 + g * 0.1;
  Tensor v2 = v * 0.999 + g * g * 0.001;
  Tensor p2 = p - m2 / ((v2 * 1.5).sqrt() + 1e-8) * 0.01;
  Lowered l = lower_roots({p2, m2, v2});
  ASSERT_EQ(l.plan.donations.size(), 3u) << l.plan.grouping;
  EXPECT_EQ(donated_input(l, 0), input_of(l, p));
  EXPECT_EQ(donated_input(l, 1), input_of(l, m));
  EXPECT_EQ(donated_input(l, 2), input_of(l, v));
}

TEST(DonationLowering, TransposedOrBroadcastReadIsNotACandidate) {
  Tensor a = testing::random_tensor({4, 4}, 1, kLazyCpu),
         b = testing::random_tensor({4, 4}, 2, kLazyCpu);
  // Only b, read transposed: writing the result into b would clobber elements still to be read.
  EXPECT_TRUE(lower_roots({b.transpose(0, 1) * 2.0}).plan.donations.empty());
  // a is read at the output's index, b transposed: a may take it, b never.
  Lowered both = lower_roots({a + b.transpose(0, 1)});
  EXPECT_EQ(donated_input(both, 0), input_of(both, a));
  // A column of b broadcast across the rows: as many elements as b, but each read four times.
  Tensor col = slice(b, 1, 0, 1, 1).expand({4, 4});
  EXPECT_TRUE(lower_roots({col + 1.0}).plan.donations.empty());
  // A flipped read.
  EXPECT_TRUE(lower_roots({flip(b, {0}) * 3.0}).plan.donations.empty());
}

TEST(DonationLowering, InputThatIsAlsoAResultIsNotDonated) {
  Tensor a = testing::random_tensor({8}, 1, kLazyCpu);
  Lowered l = lower_roots({a * 2.0, a});
  EXPECT_TRUE(l.plan.donations.empty());
}

// Hand-built loop IR: out[i] = in[i] * 2 over n elements, reading `in` at `load`.
loop::Kernel scale_kernel(int in_buffer, int out_buffer, int64_t n, loop::Index load,
                          loop::Index store, Shape outer) {
  loop::Kernel k;
  k.name = "scale";
  k.outer = std::move(outer);
  k.args = {{in_buffer, DType::Float32, n, false, false},
            {out_buffer, DType::Float32, n, false, true}};
  loop::Stage st;
  st.kind = loop::StageKind::MapOuter;
  loop::Instr ld{loop::IKind::Load};
  ld.dtype = DType::Float32;
  ld.arg = 0;
  ld.index = std::move(load);
  loop::Instr two{loop::IKind::Const};
  two.dtype = DType::Float32;
  two.value = 2;
  loop::Instr mul{loop::IKind::Op};
  mul.op = Op::Mul;
  mul.dtype = DType::Float32;
  mul.a = 0;
  mul.b = 1;
  st.body = {ld, two, mul};
  st.stores = {{1, std::move(store), 2}};
  k.stages = {st};
  return k;
}

loop::Index affine(std::vector<int64_t> strides, int64_t offset = 0) {
  loop::Index ix;
  ix.offset = offset;
  ix.strides = std::move(strides);
  return ix;
}

TEST(DonationLowering, SameIndexUpdateRules) {
  EXPECT_TRUE(same_index_update(scale_kernel(0, 1, 12, affine({1}), affine({1}), {12}), 0, 1));
  EXPECT_FALSE(same_index_update(scale_kernel(0, 1, 12, affine({1}), affine({1}), {12}), 1, 0));
  // [3,4] row-major and the same order written as a permuted traversal: still each element once.
  EXPECT_TRUE(
      same_index_update(scale_kernel(0, 1, 12, affine({4, 1}), affine({4, 1}), {3, 4}), 0, 1));
  EXPECT_TRUE(
      same_index_update(scale_kernel(0, 1, 12, affine({1, 3}), affine({1, 3}), {3, 4}), 0, 1));
  // Read transposed relative to the write.
  EXPECT_FALSE(
      same_index_update(scale_kernel(0, 1, 9, affine({1, 3}), affine({3, 1}), {3, 3}), 0, 1));
  // Read shifted by one element.
  EXPECT_FALSE(same_index_update(scale_kernel(0, 1, 12, affine({1}, 1), affine({1}), {11}), 0, 1));
  // A store that revisits elements (stride 0: a broadcast write) is not a permutation.
  EXPECT_FALSE(
      same_index_update(scale_kernel(0, 1, 4, affine({0, 1}), affine({0, 1}), {3, 4}), 0, 1));
  // Read in a reduction stage before the write.
  loop::Kernel red = scale_kernel(0, 1, 12, affine({1}), affine({1}), {12});
  loop::Stage r;
  r.kind = loop::StageKind::Reduce;
  loop::Instr ld{loop::IKind::Load};
  ld.dtype = DType::Float32;
  ld.arg = 0;
  ld.index = affine({1});
  r.body = {ld};
  r.reduce_value = 0;
  red.stages.insert(red.stages.begin(), r);
  EXPECT_FALSE(same_index_update(red, 0, 1));
  // Written twice.
  loop::Kernel twice = scale_kernel(0, 1, 12, affine({1}), affine({1}), {12});
  twice.stages[0].stores.push_back({1, affine({1}), 0});
  EXPECT_FALSE(same_index_update(twice, 0, 1));
}

// Buffers: 0 = input a, 1 and 2 = outputs; kernels in order K0: o1 = a*2, K1: o2 = a*2.
Plan two_kernel_plan() {
  Plan p;
  p.buffers = {{BufferSpec::Kind::Input, DType::Float32, 16, 0},
               {BufferSpec::Kind::Output, DType::Float32, 16},
               {BufferSpec::Kind::Output, DType::Float32, 16}};
  p.kernels = {scale_kernel(0, 1, 16, affine({1}), affine({1}), {16}),
               scale_kernel(0, 2, 16, affine({1}), affine({1}), {16})};
  p.output_buffers = {1, 2};
  p.output_shapes = {{16}, {16}};
  return p;
}

TEST(DonationLowering, InputReadByALaterKernelIsNotDonatedToAnEarlierOutput) {
  Plan p = two_kernel_plan();
  find_donations(p);
  ASSERT_EQ(p.donations.size(), 1u);
  EXPECT_EQ(p.donations[0].output, 2);  // K1 is a's last reader; K0 runs before it
  EXPECT_EQ(p.donations[0].input, 0);
  EXPECT_TRUE(p.kernels[0].inplace.empty());
  ASSERT_EQ(p.kernels[1].inplace.size(), 1u);
  EXPECT_EQ(p.kernels[1].inplace[0], (std::pair<int, int>{0, 1}));
  // Run K1 first: now K0 reads a last and takes it.
  p.steps = {{PlanStep::Kind::Kernel, 1}, {PlanStep::Kind::Kernel, 0}};
  find_donations(p);
  ASSERT_EQ(p.donations.size(), 1u);
  EXPECT_EQ(p.donations[0].output, 1);
  EXPECT_TRUE(p.kernels[1].inplace.empty());
}

// An optimizer update that the step order puts before a library step still reading its parameter
// (a convolution's or GEMM's backward-data reads the weight): the update moves after that reader
// and its result takes the parameter's own memory, not another input's.
// Buffers: 0 = parameter p, 1 = momentum m (inputs), 2 = x, 3 = p' (output), 4 = m' (output),
// 5 = y = x p (a GEMM's output). K0: p' = p * 2 and m' = m * 2 (two kernels), then the GEMM.
TEST(DonationLowering, UpdateMovesPastALibraryStepReadingItsParameter) {
  Plan p;
  p.buffers = {{BufferSpec::Kind::Input, DType::Float32, 16, 0},
               {BufferSpec::Kind::Input, DType::Float32, 16, 1},
               {BufferSpec::Kind::Input, DType::Float32, 16, 2},
               {BufferSpec::Kind::Output, DType::Float32, 16},
               {BufferSpec::Kind::Output, DType::Float32, 16},
               {BufferSpec::Kind::Output, DType::Float32, 16}};
  p.kernels = {scale_kernel(0, 3, 16, affine({1}), affine({1}), {16}),
               scale_kernel(1, 4, 16, affine({1}), affine({1}), {16})};
  Gemm g;
  g.a = 2, g.b = 0, g.out = 5, g.M = 4, g.N = 4, g.K = 4;
  g.a_rs = 4, g.a_cs = 1, g.b_rs = 4, g.b_cs = 1;
  p.gemms = {g};
  p.steps = {{PlanStep::Kind::Kernel, 0}, {PlanStep::Kind::Kernel, 1}, {PlanStep::Kind::Gemm, 0}};
  p.output_buffers = {3, 4, 5};
  p.output_shapes = {{16}, {16}, {4, 4}};
  find_donations(p);
  // p's update runs after the GEMM now; m's update had no later reader and stays first.
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_EQ(p.steps[0].kind, PlanStep::Kind::Kernel);
  EXPECT_EQ(p.steps[0].index, 1);
  EXPECT_EQ(p.steps[1].kind, PlanStep::Kind::Gemm);
  EXPECT_EQ(p.steps[2].index, 0);
  ASSERT_EQ(p.donations.size(), 2u);
  EXPECT_EQ(p.donations[0].output, 3);
  EXPECT_EQ(p.donations[0].input, 0);  // p' in p's memory
  EXPECT_EQ(p.donations[1].output, 4);
  EXPECT_EQ(p.donations[1].input, 1);
}

TEST(DonationLowering, SurvivesSerializationAndCountsInKernelIdentity) {
  Plan p = two_kernel_plan();
  find_donations(p);
  Plan back = deserialize_plan(serialize_plan(p));
  ASSERT_EQ(back.donations.size(), 1u);
  EXPECT_EQ(back.donations[0].output, p.donations[0].output);
  EXPECT_EQ(back.donations[0].input, p.donations[0].input);
  EXPECT_EQ(back.kernels[1].inplace, p.kernels[1].inplace);
  // The two kernels differ only in the in-place mark: they must not share generated code.
  EXPECT_EQ(distinct_kernels(p.kernels).first.size(), 2u);
  // A donation that pairs two outputs is rejected as a damaged entry.
  p.donations = {{2, 1}};
  EXPECT_THROW(deserialize_plan(serialize_plan(p)), Error);
}

}  // namespace
}  // namespace lt
