// lt::nn::MultiheadAttention: PyTorch's layer (parameter names, initialization, mask conventions
// and return values), as the Python lt.nn.MultiheadAttention. The attention itself is
// scaled_dot_product_attention (runtime/attention.h: one autograd node with the flash-attention
// backward); the returned weights are a softmax computed beside it (on lazy, unused ones are
// dead code). Its forward takes query, key, value and options and returns two tensors, so it is a
// Module with its own forward, not a UnaryModule.
#pragma once
#include <optional>

#include "nn/nn.h"

namespace lt::nn {

struct MultiheadAttentionOptions {
  double dropout = 0.0;               // on the attention probabilities, in training only
  bool bias = true;                   // in_proj_bias and out_proj.bias
  std::optional<int64_t> kdim, vdim;  // key/value feature sizes (default embed_dim)
  bool batch_first = false;           // [N, L, E] instead of PyTorch's default [L, N, E]
};

struct MultiheadAttentionArgs {
  Tensor key_padding_mask;  // [N, S]: bool (true = ignore that key) or additive float
  bool need_weights = true;
  Tensor attn_mask;  // [L, S] or [N * num_heads, L, S]: bool (true = not allowed) or additive float
  bool average_attn_weights = true;
  bool is_causal = false;  // a hint only: attn_mask must then be given (as in PyTorch)
};

struct AttentionOutput {
  Tensor output;   // like query: [N, L, E] (batch_first), [L, N, E], or [L, E] unbatched
  Tensor weights;  // [N, L, S] averaged over heads, or [N, H, L, S]; undefined without need_weights
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions opt = {},
                     const Device& device = kCPU);
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const MultiheadAttentionArgs& args = {});
  AttentionOutput operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                             const MultiheadAttentionArgs& args = {}) {
    return forward(query, key, value, args);
  }
  int64_t embed_dim() const { return e_; }
  int64_t num_heads() const { return h_; }
  Linear& out_proj() { return *out_proj_; }

 private:
  int64_t e_, h_, kdim_, vdim_;
  MultiheadAttentionOptions opt_;
  Tensor* in_proj_weight_ = nullptr;  // [3E, E] when kdim == vdim == E
  Tensor* q_ = nullptr;               // else q/k/v_proj_weight [E, E], [E, kdim], [E, vdim]
  Tensor* k_ = nullptr;
  Tensor* v_ = nullptr;
  Tensor* in_proj_bias_ = nullptr;  // [3E]
  std::shared_ptr<Linear> out_proj_;
};

}  // namespace lt::nn
