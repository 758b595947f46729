#include "nn/nn_attention.h"

#include <cmath>
#include <limits>

#include "autograd/autograd.h"
#include "ir/error.h"
#include "runtime/attention.h"
#include "runtime/indexing.h"

namespace lt::nn {

namespace {
constexpr const char* kName = "MultiheadAttention";

// A bool mask (true = not allowed, MultiheadAttention's convention) or a float mask as an additive
// float mask.
Tensor additive(const Tensor& mask, DType dtype) {
  if (mask.dtype() == DType::Bool)
    return where(mask, Scalar(-std::numeric_limits<double>::infinity()),
                 zeros(mask.shape(), dtype, mask.device()));
  return cast(mask, dtype);
}

// attn_mask ([L, S] or [N * H, L, S]) and key_padding_mask ([N, S]), each bool (true = not allowed)
// or additive float, as one scaled_dot_product_attention mask broadcasting to [N, H, L, S]: a bool
// keep-mask when both are bool, else an additive float mask. Undefined when neither is given.
Tensor merged_mask(Tensor attn_mask, const Tensor& key_padding_mask, int64_t N, int64_t H,
                   int64_t L, int64_t S, DType dtype) {
  std::vector<Tensor> parts;
  if (attn_mask.defined()) {
    if (!is_bool(attn_mask.dtype()) && !is_floating(attn_mask.dtype()))
      fail(ErrorKind::Runtime, kName,
           ": only bool and floating types of attn_mask are supported, got ",
           dtype_name(attn_mask.dtype()));
    if (attn_mask.dim() == 2 && attn_mask.shape() != Shape{L, S})
      fail(ErrorKind::Runtime, kName, ": the shape of the 2D attn_mask is ",
           shape_str(attn_mask.shape()), ", but should be ", shape_str({L, S}));
    if (attn_mask.dim() == 3) {
      if (attn_mask.shape() != Shape{N * H, L, S})
        fail(ErrorKind::Runtime, kName, ": the shape of the 3D attn_mask is ",
             shape_str(attn_mask.shape()), ", but should be ", shape_str({N * H, L, S}));
      attn_mask = attn_mask.reshape({N, H, L, S});
    } else if (attn_mask.dim() != 2) {
      fail(ErrorKind::Runtime, kName, ": attn_mask of shape ", shape_str(attn_mask.shape()),
           " is not supported (expected 2-D or 3-D)");
    }
    parts.push_back(attn_mask);
  }
  if (key_padding_mask.defined()) {
    if (key_padding_mask.shape() != Shape{N, S})
      fail(ErrorKind::Runtime, kName, ": expected key_padding_mask of shape ", shape_str({N, S}),
           ", got ", shape_str(key_padding_mask.shape()));
    if (!is_bool(key_padding_mask.dtype()) && !is_floating(key_padding_mask.dtype()))
      fail(ErrorKind::Runtime, kName,
           ": only bool and floating types of key_padding_mask are supported, got ",
           dtype_name(key_padding_mask.dtype()));
    parts.push_back(key_padding_mask.reshape({N, 1, 1, S}));
  }
  if (parts.empty()) return Tensor();
  bool all_bool = true;
  for (auto& p : parts) all_bool = all_bool && is_bool(p.dtype());
  if (all_bool) return logical_not(parts.size() == 1 ? parts[0] : logical_or(parts[0], parts[1]));
  Tensor m = additive(parts[0], dtype);
  return parts.size() == 1 ? m : m + additive(parts[1], dtype);
}

void check_input(const Tensor& t, const char* what) {
  if (!t.defined()) fail(ErrorKind::Runtime, kName, ": ", what, " is undefined");
  if (!is_floating(t.dtype()))
    fail(ErrorKind::Runtime, kName, ": ", what, " must be floating point, got ",
         dtype_name(t.dtype()), " of shape ", shape_str(t.shape()));
}
}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads,
                                       MultiheadAttentionOptions opt, const Device& device)
    : e_(embed_dim),
      h_(num_heads),
      kdim_(opt.kdim.value_or(embed_dim)),
      vdim_(opt.vdim.value_or(embed_dim)),
      opt_(opt) {
  if (embed_dim <= 0 || num_heads <= 0)
    fail(ErrorKind::Value, kName,
         ": embed_dim and num_heads must be greater than 0, got embed_dim=", embed_dim,
         " and num_heads=", num_heads);
  if (embed_dim % num_heads != 0)
    fail(ErrorKind::Value, kName, ": embed_dim=", embed_dim,
         " must be divisible by num_heads=", num_heads);
  if (kdim_ <= 0 || vdim_ <= 0) fail(ErrorKind::Value, kName, ": kdim and vdim must be positive");
  if (!(opt.dropout >= 0.0 && opt.dropout <= 1.0))
    fail(ErrorKind::Value, kName, ": dropout probability has to be between 0 and 1, but got ",
         opt.dropout);
  // PyTorch's _reset_parameters: xavier_uniform_ projections (bound sqrt(6 / (fan_in + fan_out)) of
  // each weight as a whole), zero in_proj_bias and out_proj.bias; out_proj.weight keeps Linear's.
  auto xavier = [&](int64_t out, int64_t in) {
    return uniform({out, in}, std::sqrt(6.0 / static_cast<double>(in + out)), device);
  };
  if (kdim_ == e_ && vdim_ == e_) {
    in_proj_weight_ = &register_parameter("in_proj_weight", xavier(3 * e_, e_));
  } else {
    q_ = &register_parameter("q_proj_weight", xavier(e_, e_));
    k_ = &register_parameter("k_proj_weight", xavier(e_, kdim_));
    v_ = &register_parameter("v_proj_weight", xavier(e_, vdim_));
  }
  if (opt.bias) in_proj_bias_ = &register_parameter("in_proj_bias", filled({3 * e_}, 0.0, device));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(e_, e_, opt.bias, device));
  if (opt.bias) {
    NoGradGuard ng;  // an in-place write to a leaf parameter
    out_proj_->bias().assign(filled({e_}, 0.0, device));
  }
}

AttentionOutput MultiheadAttention::forward(const Tensor& query_in, const Tensor& key_in,
                                            const Tensor& value_in,
                                            const MultiheadAttentionArgs& args) {
  check_input(query_in, "query");
  check_input(key_in, "key");
  check_input(value_in, "value");
  if (args.is_causal && !args.attn_mask.defined())
    fail(ErrorKind::Runtime, kName, ": need attn_mask if specifying the is_causal hint");
  Tensor query = query_in, key = key_in, value = value_in, kpm = args.key_padding_mask;
  const bool batched = query.dim() == 3;
  if (query.dim() != 2 && query.dim() != 3)
    fail(ErrorKind::Runtime, kName,
         ": query should be 2-D (unbatched) or 3-D (batched), got shape ",
         shape_str(query.shape()));
  if (!batched) {  // [L, E] -> [1, L, E]
    query = query.unsqueeze(0);
    key = key.unsqueeze(0);
    value = value.unsqueeze(0);
    if (kpm.defined()) kpm = kpm.unsqueeze(0);
  } else if (!opt_.batch_first) {  // [L, N, E] -> [N, L, E]
    query = query.transpose(0, 1);
    key = key.transpose(0, 1);
    value = value.transpose(0, 1);
  }
  if (key.dim() != 3 || value.dim() != 3 || query.size(2) != e_ || key.size(2) != kdim_ ||
      value.size(2) != vdim_ || key.size(0) != query.size(0) || value.size(0) != query.size(0) ||
      key.size(1) != value.size(1))
    fail(ErrorKind::Runtime, kName,
         ": expected query/key/value of matching rank, batch and length with feature "
         "sizes ",
         e_, "/", kdim_, "/", vdim_, " (batch_first=", opt_.batch_first ? "true" : "false",
         "), got ", shape_str(query_in.shape()), ", ", shape_str(key_in.shape()), ", ",
         shape_str(value_in.shape()));
  const int64_t N = query.size(0), L = query.size(1), S = key.size(1), H = h_, hd = e_ / h_;

  // Per-projection weight and bias: slices of the packed in_proj tensors (their gradients flow
  // back into the packed parameter) or the separate q/k/v weights.
  auto bias_part = [&](int64_t i) {
    return in_proj_bias_ ? slice(*in_proj_bias_, 0, i * e_, (i + 1) * e_) : Tensor();
  };
  auto weight_part = [&](int64_t i) {
    if (in_proj_weight_) return slice(*in_proj_weight_, 0, i * e_, (i + 1) * e_);
    return i == 0 ? *q_ : i == 1 ? *k_ : *v_;
  };
  auto heads = [&](const Tensor& x, int64_t i, int64_t n) {  // [N, n, *] -> [N, H, n, hd]
    return linear(x, weight_part(i), bias_part(i)).reshape({N, n, H, hd}).transpose(1, 2);
  };
  Tensor q = heads(query, 0, L), k = heads(key, 1, S), v = heads(value, 2, S);

  Tensor mask = merged_mask(args.attn_mask, kpm, N, H, L, S, q.dtype());
  Tensor out = scaled_dot_product_attention(q, k, v, mask, is_training() ? opt_.dropout : 0.0);
  Tensor weights;
  if (args.need_weights) {  // the probabilities PyTorch returns (here: before dropout)
    Tensor scores =
        q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));  // [N, H, L, S]
    if (mask.defined())
      scores = is_bool(mask.dtype()) ? masked_fill(scores, logical_not(mask),
                                                   -std::numeric_limits<double>::infinity())
                                     : scores + mask;
    weights = softmax(scores, -1);
    if (args.average_attn_weights) weights = weights.mean({1});
    if (!batched) weights = weights.squeeze(0);
  }
  out = (*out_proj_)(out.transpose(1, 2).reshape({N, L, e_}));
  if (!batched)
    out = out.squeeze(0);
  else if (!opt_.batch_first)
    out = out.transpose(0, 1);
  return {out, weights};
}

}  // namespace lt::nn
