// The channels-last pass (lowering/channels_last.h): which buffers and conv operands become NHWC
// in a residual conv block's forward and backward, the elementwise kernels iterating in NHWC
// order, the plan format carrying the operand bits, and the block's values with the pass equal to
// the values without it (oneDNN reading NHWC operands, the kernels NHWC addresses), random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cpu_codegen_util.h"
#include "graph_util.h"
#include "ir/conv.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"
#include "test_util.h"

namespace lt {
namespace {

using cpu_codegen_test::cpu_backend;
using cpu_codegen_test::host;
using cpu_codegen_test::read;
using testing::param;

NodePtr op(Op o, NodeList in, std::vector<int64_t> ints = {}, bool keepdim = false) {
  Attrs a;
  a.ints = to_ints(ints);
  a.keepdim = keepdim;
  return make_node(o, std::move(in), a);
}
NodePtr conv(Op o, NodeList in, std::vector<int64_t> extra = {}) {
  ConvParams p;
  p.padding = {1, 1};
  Attrs a;
  a.ints = p.ints(std::move(extra));
  return make_node(o, std::move(in), a);
}
NodePtr scalar(double v) { return make_constant(DType::Float32, v); }

// A residual block as a training step computes it, by hand: conv, batch-norm statistics and
// normalization, ReLU, a second conv, the residual add; then the second conv's gradients for an
// upstream gradient that depends on the output, and a few reductions of them.
struct Block {
  NodeList params, roots;
  explicit Block(int64_t n = 2, int64_t c = 8, int64_t h = 7, int64_t w = 6) {
    auto p = [&](Shape s) {
      params.push_back(param(std::move(s)));
      return params.back();
    };
    NodePtr x = p({n, 3, h, w}), w1 = p({c, 3, 3, 3}), w2 = p({c, c, 3, 3});
    NodePtr gamma = p({1, c, 1, 1}), beta = p({1, c, 1, 1}), r = p({n, c, h, w});
    NodePtr y1 = conv(Op::Conv2d, {x, w1});
    NodePtr centered = op(Op::Sub, {y1, op(Op::Mean, {y1}, {0, 2, 3}, true)});
    NodePtr var = op(Op::Mean, {op(Op::Mul, {centered, centered})}, {0, 2, 3}, true);
    NodePtr norm = op(Op::Mul, {centered, op(Op::Rsqrt, {op(Op::Add, {var, scalar(1e-5)})})});
    NodePtr hidden = op(Op::Relu, {op(Op::Add, {op(Op::Mul, {norm, gamma}), beta})});
    NodePtr y2 = conv(Op::Conv2d, {hidden, w2});
    NodePtr out = op(Op::Add, {y2, hidden});
    NodePtr dy = op(Op::Add, {op(Op::Mul, {r, scalar(2.0)}), out});
    NodePtr dh = conv(Op::Conv2dGradInput, {dy, w2}, {h, w});
    NodePtr dw2 = conv(Op::Conv2dGradWeight, {hidden, dy}, {3, 3});
    NodePtr dpre = op(Op::Mul, {op(Op::Add, {dh, dy}), hidden});
    roots = {op(Op::ReduceSum, {op(Op::Mul, {out, r})}, {0, 1, 2, 3}), dw2,
             op(Op::ReduceSum, {dpre}, {0, 2, 3}, true), op(Op::Mul, {dpre, centered})};
  }
  Graph graph() const {
    std::vector<const Node*> r;
    for (auto& n : roots) r.push_back(n.get());
    return collect_graph(r);
  }
};

LowerOptions with_conv(bool channels_last) {
  LowerOptions o;
  o.conv_dtypes = {DType::Float32};
  o.conv_channels_last = channels_last;
  return o;
}

TEST(ChannelsLast, BlockBetweenConvsIsNhwcAndItsKernelsIterateNhwc) {
  Block b;
  const Plan plain = lower(b.graph(), with_conv(false));
  const Plan p = lower(b.graph(), with_conv(true));
  ASSERT_EQ(p.convs.size(), 4u) << p.grouping;
  for (const ConvStep& c : plain.convs) EXPECT_EQ(c.channels_last, 0);
  // The first conv reads the graph's input (users' NCHW memory): it stays NCHW, so its output
  // does too. The second conv and both of its gradients read and write the block's temporaries.
  int nhwc = 0;
  for (const ConvStep& c : p.convs) {
    if (c.kind == ConvStep::Kind::Forward && c.x[1] == 3) {
      EXPECT_EQ(c.channels_last, 0) << c.name;
      continue;
    }
    // Data NHWC, and the weight (or dw) OHWI: cuDNN wants the filter in the data's format.
    EXPECT_EQ(c.channels_last, 7) << c.name << "\n" << p.grouping;
    nhwc += c.channels_last != 0;
  }
  EXPECT_EQ(nhwc, 3) << p.grouping;
  EXPECT_NE(p.grouping.find("channels-last: "), std::string::npos) << p.grouping;
  // Every elementwise kernel that stores an NHWC buffer walks it in memory order: its store's
  // strides decrease from the outermost loop variable to the innermost, which steps by 1.
  int reordered = 0;
  for (const auto& k : p.kernels) {
    if (!k.inner.empty()) continue;
    for (const auto& st : k.stages)
      for (const auto& s : st.stores) {
        if (p.buffers[k.args[s.arg].buffer].kind != BufferSpec::Kind::Temp) continue;
        ASSERT_TRUE(s.index.affine()) << k.name;
        const auto& str = s.index.strides;
        for (size_t v = 1; v < k.outer.size(); ++v)
          if (k.outer[v] > 1) {
            EXPECT_GE(str[v - 1], str[v]) << k.name << "\n" << p.grouping;
          }
        ++reordered;
      }
  }
  EXPECT_GE(reordered, 1) << p.grouping;
  // The pass's own count of the kernels it turned to NHWC order.
  const size_t at = p.grouping.find(" convs, ");
  ASSERT_NE(at, std::string::npos) << p.grouping;
  EXPECT_GE(std::stoi(p.grouping.substr(at + 8)), 2) << p.grouping;
  // w2 read by the forward and the grad-input conv: one OHWI copy; dw2 written OHWI, copied back.
  EXPECT_NE(p.grouping.find(", 2 weight copies"), std::string::npos) << p.grouping;
  int copies = 0;
  for (const auto& k : p.kernels) copies += k.name.find("_to_o") != std::string::npos;
  EXPECT_EQ(copies, 2) << p.grouping;
  // The operand bits survive the plan format, and a weight operand marked NHWC is refused.
  Plan q = deserialize_plan(serialize_plan(p));
  for (size_t i = 0; i < p.convs.size(); ++i)
    EXPECT_EQ(q.convs[i].channels_last, p.convs[i].channels_last);
  Plan bad = p;
  bad.convs[0].channels_last = 8;  // no such operand
  bool refused = false;
  try {
    deserialize_plan(serialize_plan(bad));
  } catch (const Error& e) {
    refused = std::string(e.what()).find("channels-last") != std::string::npos;
  }
  EXPECT_TRUE(refused);
}

TEST(ChannelsLast, WithoutConvolutionDataNothingChanges) {
  // A conv whose output is the graph's output: users see NCHW, so its operands stay NCHW.
  Block b;
  NodePtr y = conv(Op::Conv2d, {b.params[0], b.params[1]});
  std::vector<const Node*> r{y.get()};
  const Plan p = lower(collect_graph(r), with_conv(true));
  ASSERT_EQ(p.convs.size(), 1u);
  EXPECT_EQ(p.convs[0].channels_last, 0);
  EXPECT_EQ(p.grouping.find("channels-last"), std::string::npos) << p.grouping;
}

// The block's outputs from the plan with the pass and without, on the CPU backend (oneDNN convs),
// for random inputs: the same to float32 rounding (the kernels compute the same expressions; only
// oneDNN's NHWC algorithms may sum in another order).
TEST(ChannelsLast, ValuesEqualThePlainPlanOnTheCpu) {
  if (cpu_backend().lower_options().conv_dtypes.empty()) GTEST_SKIP() << "built without oneDNN";
  for (auto [n, c, h, w] : {std::tuple{2, 8, 7, 6}, std::tuple{3, 5, 4, 9}}) {
    Block b(n, c, h, w);
    const Graph g = b.graph();
    std::vector<BufferPtr> data(g.inputs.size());
    std::vector<RunInput> in(g.inputs.size());
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      data[i] = host(testing::random_floats(numel(g.inputs[i]->shape), 11 + i));
      in[i].buffer = data[i].get();
    }
    std::vector<std::vector<double>> got[2];
    for (bool last : {false, true}) {
      const Plan p = lower(g, with_conv(last));
      auto out = cpu_backend().compile(p)->run(in, nullptr);
      for (size_t o = 0; o < p.output_buffers.size(); ++o) {
        auto v = read<float>(out[p.output_buffers[o]], numel(p.output_shapes[o]));
        got[last].emplace_back(v.begin(), v.end());
      }
    }
    ASSERT_EQ(got[0].size(), got[1].size());
    // Tolerance against each output's scale: the gradients' elementwise products cancel (values
    // near 0 next to values in the hundreds), so a relative bound per element would measure the
    // cancellation, not the pass.
    for (size_t o = 0; o < got[0].size(); ++o) {
      double scale = 0;
      for (double v : got[0][o]) scale = std::max(scale, std::fabs(v));
      ASSERT_GT(scale, 0.1);  // random data: the outputs are not all zeros
      testing::expect_close(got[1][o], got[0][o], 1e-6, 1e-5 * scale,
                            "output " + std::to_string(o) + " of block " + std::to_string(c));
    }
  }
}

}  // namespace
}  // namespace lt
