// Issue 29 item 2: the runtime traces one graph for a model on every backend; what differs per
// backend is only how lowering runs the library prims (conv2d and its gradients, attention and its
// gradients): as library steps where the backend's LowerOptions offer them, else expanded into
// loop kernels and GEMMs (lowering/expand_conv.h, lowering/expand_attention.h). A small conv net
// and a causal attention block, forward and backward, trace the same graph key on lazy:cpu and
// lazy:reference; their plans for the CPU, the reference interpreter and CUDA's options (as a
// literal: no GPU needed) differ only in library steps; and the values agree across backends.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "graph_util.h"
#include "ir/graph.h"
#include "test_util.h"

namespace lt::one_graph_test {
namespace {

// A leaf of random values in [-1, 1] that requires grad.
Tensor leaf(const Shape& s, uint32_t seed, const Device& d, DType t) {
  const std::vector<float> f = testing::random_floats(numel(s), seed, -1.f, 1.f);
  const std::vector<double> v(f.begin(), f.end());
  Tensor x = t == DType::Float32 ? from_host(f.data(), t, s, d) : from_host(v.data(), t, s, d);
  x.requires_grad_();
  return x;
}

// The outputs of one training step's forward and backward, and the leaves they depend on.
struct Step {
  std::vector<Tensor> outs;
};

// conv(padding 1) -> relu -> max_pool -> conv(stride 2, groups 2) -> sum of squares; gradients of
// both weights, both biases and the input.
Step conv_net(const Device& d, DType t) {
  Tensor x = leaf({2, 3, 10, 10}, 1, d, t), w1 = leaf({4, 3, 3, 3}, 2, d, t);
  Tensor b1 = leaf({4}, 3, d, t), w2 = leaf({6, 2, 3, 3}, 4, d, t), b2 = leaf({6}, 5, d, t);
  Tensor h = max_pool2d(conv2d(x, w1, b1, {1, 1}, {1, 1}).relu(), {2, 2});
  Tensor y = conv2d(h, w2, b2, {2, 2}, {1, 1}, {1, 1}, 2);
  Tensor loss = (y * y).sum();
  std::vector<Tensor> g = grad({loss}, {x, w1, b1, w2, b2});
  g.insert(g.begin(), loss);
  return {g};
}

// Causal self-attention over [2, 2, 8, 64] heads (CUDA's flash kernels take head dim 64).
Step attention_block(const Device& d, DType t) {
  const Shape s = {2, 2, 8, 64};
  Tensor q = leaf(s, 11, d, t), k = leaf(s, 12, d, t), v = leaf(s, 13, d, t);
  Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
  Tensor loss = (y * y).sum();
  std::vector<Tensor> g = grad({loss}, {q, k, v});
  g.insert(g.begin(), y);
  return {g};
}

Hash128 key_of(const Step& s) {
  std::vector<const Node*> roots;
  NodeList keep;
  for (const Tensor& t : s.outs) keep.push_back(t.node()), roots.push_back(keep.back().get());
  return collect_graph(roots).key;
}

Plan plan_of(const Step& s, const LowerOptions& opts) {
  NodeList roots;
  for (const Tensor& t : s.outs) roots.push_back(t.node());
  return testing::plan_of(roots, opts);
}

// CudaBackend::lower_options with cuBLAS and the flash kernels but no cuDNN.
LowerOptions cuda_like() {
  LowerOptions o;
  o.gemm_dtypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16};
  o.attention_dtypes = {DType::Float32};
  o.attention_head_dim = 64;
  return o;
}

TEST(OneGraph, ConvNetAndAttentionTraceOneGraphOnEveryBackend) {
  const bool onednn = !get_backend("cpu").lower_options().conv_dtypes.empty();
  for (DType t : {DType::Float32, DType::Float64}) {
    for (auto model : {conv_net, attention_block}) {
      const bool conv = model == conv_net;
      Step cpu = model(Device::parse("lazy:cpu"), t);
      Step ref = model(Device::parse("lazy:reference"), t);
      const std::string what =
          std::string(conv ? "conv net " : "attention ") + std::string(dtype_name(t));
      EXPECT_EQ(key_of(cpu), key_of(ref)) << what;
      const Plan on_cpu = plan_of(cpu, get_backend("cpu").lower_options());
      const Plan on_ref = plan_of(cpu, get_backend("reference").lower_options());
      const Plan on_cuda = plan_of(cpu, cuda_like());
      // Library steps where offered; none of the prims reach a backend that lacks them.
      EXPECT_EQ(on_ref.convs.size(), conv ? 6u : 0u) << what;  // forward, grad_input, grad_weight
      EXPECT_EQ(on_ref.attentions.size(), conv ? 0u : 2u) << what;  // one forward, one backward
      EXPECT_EQ(on_cpu.convs.size(), conv && onednn && t == DType::Float32 ? 6u : 0u) << what;
      EXPECT_TRUE(on_cpu.attentions.empty()) << what;
      EXPECT_TRUE(on_cuda.convs.empty()) << what;
      EXPECT_EQ(on_cuda.attentions.size(), !conv && t == DType::Float32 ? 2u : 0u) << what;
      // The same values on both backends (the CPU through the expansions where it lacks a
      // library), against the reference interpreter's direct loops.
      for (size_t i = 0; i < cpu.outs.size(); ++i) {
        const double tol = t == DType::Float64 ? 1e-9 : 2e-3;
        testing::expect_close(cpu.outs[i].to_vector<double>(), ref.outs[i].to_vector<double>(), tol,
                              tol, what + " output " + std::to_string(i));
      }
    }
  }
}

}  // namespace
}  // namespace lt::one_graph_test
