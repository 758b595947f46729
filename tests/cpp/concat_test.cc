// The concat op (ir/ops.def, runtime/indexing.h concat): its plan (lowering/concat_match.cc: each
// operand's producer writes into its range of the result, BufferSpec::alias; what cannot is copied
// by a kernel), the stored plan, and the values on the lazy CPU backend and the reference
// interpreter against host math, with the operands made the ways a DDP bucket's gradients are
// (matmuls, reductions, elementwise values, graph inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "graph_util.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "lowering/memory_plan.h"
#include "lowering/plan_serialize.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"
#include "test_util.h"

namespace lt {
namespace concat_test {

NodePtr flat(NodePtr x) {
  Attrs a;
  a.ints = {numel(x->shape)};
  return make_node(Op::Reshape, {std::move(x)}, a);
}
NodePtr exp_of(NodePtr x) { return make_node(Op::Exp, {std::move(x)}); }
NodePtr concat_of(NodeList xs) { return make_node(Op::Concat, xs); }
NodePtr twice(NodePtr x) { return make_node(Op::Add, {x, x}); }

int copy_kernels(const Plan& p) {
  int n = 0;
  for (const auto& k : p.kernels) n += k.name.find("_concat_") != std::string::npos;
  return n;
}

// Computed pieces of 64 and 128 floats (256-byte multiples): their kernels write the result's
// buffer at 0 and 64; no copy kernel, no slot of their own; the stored plan keeps that, and a
// damaged alias is refused.
TEST(Concat, ComputedPiecesAreWrittenInPlace) {
  NodePtr a = exp_of(testing::param({8, 8})), b = exp_of(testing::param({128}));
  NodePtr c = concat_of({flat(a), b});
  ASSERT_EQ(c->shape, (Shape{192}));
  const Plan p = testing::plan_of({twice(c)});
  EXPECT_EQ(copy_kernels(p), 0) << p.grouping;
  std::vector<int64_t> offsets;
  int base = -1;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const BufferSpec& s = p.buffers[i];
    if (s.alias < 0) continue;
    EXPECT_EQ(p.memory.slot_of[i], -1) << "buffer " << i << " has memory of its own";
    EXPECT_TRUE(base < 0 || base == s.alias);
    base = s.alias;
    offsets.push_back(s.alias_offset);
  }
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 64})) << p.grouping;
  ASSERT_GE(base, 0);
  EXPECT_EQ(p.buffers[static_cast<size_t>(base)].numel, 192);
  EXPECT_GE(p.memory.slot_of[static_cast<size_t>(base)], 0);

  const Plan back = deserialize_plan(serialize_plan(p));
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    EXPECT_EQ(back.buffers[i].alias, p.buffers[i].alias);
    EXPECT_EQ(back.buffers[i].alias_offset, p.buffers[i].alias_offset);
  }
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    if (p.buffers[i].alias < 0) continue;
    Plan bad = p;
    bad.buffers[i].alias_offset = 150;  // 64 or 128 floats from 150 overrun 192
    EXPECT_THROW(deserialize_plan(serialize_plan(bad)), Error);
    bad = p;
    bad.buffers[i].alias = static_cast<int>(p.buffers.size());
    EXPECT_THROW(deserialize_plan(serialize_plan(bad)), Error);
  }
}

// A library step's result (a GEMM's, as a weight's gradient) is written in place too.
TEST(Concat, AGemmWritesItsRangeOfTheResult) {
  LowerOptions gemms;
  gemms.gemm_dtypes = {DType::Float32};
  NodePtr mm = make_node(Op::Matmul, {testing::param({16, 8}), testing::param({8, 32})});
  const Plan p =
      testing::plan_of({twice(concat_of({exp_of(testing::param({64})), flat(mm)}))}, gemms);
  ASSERT_EQ(p.gemms.size(), 1u) << p.grouping;
  EXPECT_EQ(copy_kernels(p), 0) << p.grouping;
  const BufferSpec& out = p.buffers[static_cast<size_t>(p.gemms[0].out)];
  EXPECT_GE(out.alias, 0) << p.grouping;
  EXPECT_EQ(out.alias_offset, 64);
}

// Copied instead: a graph input, a value that is also a graph output and a piece whose range starts
// off a 256-byte boundary (symbolic plans keep pieces in place: generalize_test.cc).
TEST(Concat, PiecesThatCannotLiveInTheResultAreCopied) {
  NodePtr in = testing::param({64});
  NodePtr kept = exp_of(testing::param({64}));
  NodePtr odd = exp_of(testing::param({3}));
  NodePtr after = exp_of(testing::param({64}));  // at 64 + 64 + 3 floats: unaligned
  NodePtr c = concat_of({in, kept, odd, after});
  const Plan p = testing::plan_of({twice(c), kept});
  EXPECT_EQ(copy_kernels(p), 3) << p.grouping;  // in, kept, after; odd (at 128) is in place
  int aliased = 0;
  for (const BufferSpec& s : p.buffers) aliased += s.alias >= 0;
  EXPECT_EQ(aliased, 1) << p.grouping;
}

TEST(Concat, TheOpChecksItsOperands) {
  EXPECT_THROW(make_node(Op::Concat, {testing::param({4, 2}), testing::param({3})}), Error);
  EXPECT_THROW(make_node(Op::Concat, {testing::param({4}), testing::param({3}, DType::Int32)}),
               Error);
  EXPECT_THROW(make_node(Op::Concat, {}), Error);
  const Device cpu = Device::parse("lazy:cpu");
  const Tensor a = from_host(testing::random_floats(4, 1).data(), DType::Float32, {4}, cpu);
  const Tensor b = from_host(testing::random_floats(6, 2).data(), DType::Float32, {2, 3}, cpu);
  // One piece is a new tensor too (its own node: lowering writes the piece into it).
  const Tensor one = concat({a});
  EXPECT_NE(one.node().get(), a.node().get());
  EXPECT_EQ(one.to_vector<float>(), a.to_vector<float>());
  try {
    concat({a, b});
    FAIL() << "a two-dimensional operand was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
}

// A DDP bucket's ways of making gradients, concatenated, scaled and sliced back, on every host
// backend against host math; the same through the gradient of concat.
TEST(Concat, ValuesOnEveryHostBackend) {
  for (const char* dev_name : {"lazy:cpu", "lazy:reference"}) {
    const Device dev = Device::parse(dev_name);
    const std::vector<float> ha = testing::random_floats(16 * 8, 11),
                             hb = testing::random_floats(8 * 32, 12),
                             hc = testing::random_floats(24 * 64, 13),
                             hd = testing::random_floats(5, 14),
                             he = testing::random_floats(64, 15);
    const Tensor a = from_host(ha.data(), DType::Float32, {16, 8}, dev);
    const Tensor b = from_host(hb.data(), DType::Float32, {8, 32}, dev);
    const Tensor c = from_host(hc.data(), DType::Float32, {24, 64}, dev);
    const Tensor d = from_host(hd.data(), DType::Float32, {5}, dev);
    const Tensor e = from_host(he.data(), DType::Float32, {64}, dev);
    // Only the slices outlive the trace (as DDP's local gradients do not): the pieces are no
    // graph outputs. At 0, 512, 576, 581, 645 floats: the matmul and the reduction start on
    // 256-byte boundaries and are written in place; d and c are graph inputs, exp(e) is unaligned.
    const std::vector<int64_t> sizes = {512, 64, 5, 64, 1536};
    std::vector<Tensor> back = [&] {
      const std::vector<Tensor> pieces = {reshape(matmul(a, b), {-1}), c.sum({0}), d,
                                          unary(Op::Exp, e), reshape(c, {-1})};
      const Tensor whole = concat(pieces) * 1.5;
      std::vector<Tensor> out;
      int64_t off = 0;
      for (int64_t n : sizes) {
        out.push_back(narrow(whole, 0, off, n));
        off += n;
      }
      return out;
    }();
    sync(back);
    std::vector<std::vector<float>> want(5);
    want[0].assign(16 * 32, 0.f);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 32; ++j) {
        double s = 0;
        for (int k = 0; k < 8; ++k) s += double(ha[i * 8 + k]) * hb[k * 32 + j];
        want[0][i * 32 + j] = static_cast<float>(s);
      }
    want[1].assign(64, 0.f);
    for (int i = 0; i < 24; ++i)
      for (int j = 0; j < 64; ++j) want[1][j] += hc[i * 64 + j];
    want[2] = hd;
    for (float x : he) want[3].push_back(std::exp(x));
    want[4] = hc;
    for (size_t p = 0; p < 5; ++p) {
      const std::vector<float> got = back[p].to_vector<float>();
      ASSERT_EQ(got.size(), want[p].size());
      for (size_t j = 0; j < got.size(); ++j)
        ASSERT_NEAR(got[j], want[p][j] * 1.5f, 1e-4f * (1.f + std::abs(want[p][j])))
            << dev_name << " piece " << p << " at " << j;
    }
  }
}

}  // namespace concat_test
}  // namespace lt
