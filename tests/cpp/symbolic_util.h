// Traced programs for the symbolic-size tests (issue 30): a small GPT block traced at chosen
// sizes, and the symbolic view with its sequence length (and batch) dynamic.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "ir/graph.h"
#include "ir/symbolic_graph.h"
#include "nn/nn.h"
#include "runtime/attention.h"
#include "runtime/indexing.h"
#include "test_util.h"

namespace lt::symbolic_test {

struct Traced {
  std::vector<Tensor> outs;
  Graph graph;
  std::vector<NodePtr> keep;  // the roots' nodes, alive while the graph is
};

inline Traced collect(std::vector<Tensor> outs) {
  Traced t{std::move(outs), {}, {}};
  std::vector<const Node*> roots;
  for (const Tensor& o : t.outs) t.keep.push_back(o.node()), roots.push_back(t.keep.back().get());
  t.graph = collect_graph(roots);
  return t;
}

inline Tensor leaf(const Shape& s, uint32_t seed, bool grad = true) {
  Tensor x = testing::random_tensor(s, seed, testing::kLazyCpu, -1.f, 1.f);
  if (grad) x.requires_grad_();
  return x;
}

inline int input_of(const Traced& t, const Tensor& x) {
  const NodePtr n = x.node();
  return *t.graph.input_of.find(n.get());
}

// A GPT block over tokens [B, T, C] with causal attention, the logits of the last position, a
// cross-entropy loss over every position and the gradients of the input and two weights.
struct Block {
  Traced traced;
  int x_input, target_input;
};

// C channels in H heads (the default head dim 8 is expanded into matmuls and a softmax on every
// backend; C = 128, H = 2 gives the head dim 64 of the CUDA backend's flash attention).
inline Block gpt_block(int64_t B, int64_t T, uint32_t seed, int64_t C = 32, int64_t H = 4) {
  const int64_t V = 11;
  Tensor x = leaf({B, T, C}, seed), wqkv = leaf({3 * C, C}, seed + 1),
         wout = leaf({V, C}, seed + 2);
  std::vector<int64_t> labels(B * T);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>((i * 7 + seed) % V);
  Tensor target = from_host(labels.data(), DType::Int64, {B * T}, testing::kLazyCpu);
  Tensor h = layer_norm(x, {C});
  Tensor qkv = matmul(h, wqkv.transpose(0, 1));
  auto heads = [&](int64_t part) {
    return narrow(qkv, 2, part * C, C).reshape({B, T, H, C / H}).transpose(1, 2);
  };
  Tensor y = scaled_dot_product_attention(heads(0), heads(1), heads(2), Tensor(), 0.0, true);
  y = x + gelu(y.transpose(1, 2).reshape({B, T, C}), "tanh");
  Tensor logits = matmul(y, wout.transpose(0, 1));
  Tensor last = select(logits, 1, -1);  // [B, V]: the next token's logits
  Tensor loss = nn::cross_entropy(logits.reshape({B * T, V}), target);
  std::vector<Tensor> g = grad({loss}, {x, wqkv, wout});
  Block b{collect({loss, last, g[0], g[1], g[2]}), 0, 0};
  b.x_input = input_of(b.traced, x);
  b.target_input = input_of(b.traced, target);
  return b;
}

inline SymbolicGraph sym_of(const Block& b, bool batch_dynamic = false) {
  std::vector<DynamicDim> dyn = {{b.x_input, 1}, {b.target_input, 0}};
  if (batch_dynamic) dyn.push_back({b.x_input, 0});
  return symbolic_graph(b.traced.graph, dyn);
}

// Every symbol's value with the free ones (in order) given: the rest are solved for.
inline std::vector<int64_t> values_at(const SymbolicGraph& sg, std::vector<int64_t> free) {
  std::vector<int64_t> v(sg.env.num_symbols(), 0);
  size_t next = 0;
  for (SymId s = 0; s < v.size(); ++s)
    if (sg.env.simplify(SizeExpr::symbol(s)) == SizeExpr::symbol(s)) v[s] = free.at(next++);
  EXPECT_EQ(next, free.size());
  return all_symbol_values(sg, v);
}

}  // namespace lt::symbolic_test
