// Scaled dot-product attention as one autograd node. Without an explicit mask or dropout it is
// traced as the attention prims (ir/attention.h) on every backend, with the gradient prims as its
// VJP: lowering runs them as the backend's fused library step or expands them into matmuls and
// softmax (lowering/expand_attention.h), so one model traces one graph everywhere. With a mask or
// dropout the forward is traced from matmuls, the softmax composite and elementwise ops (so
// lowering fuses it like any other graph); the backward is the flash-attention rule,
// dS = P * (dP - D) * scale with dP = dO V^T, instead of the chain of matmul, scale, mask and
// softmax VJPs. Eager devices save only the output O and the row logsumexp L and recompute
// P = exp(S - L); on lazy P is the forward's IR node (see attention.cc).
#pragma once
#include <optional>

#include "ir/attention.h"
#include "runtime/tensor.h"

namespace lt {

// torch.nn.functional.scaled_dot_product_attention: softmax(q @ k^T * scale + mask) @ v.
// query [..., L, E], key [..., S, E], value [..., S, Ev]; batch dims broadcast. attn_mask (may be
// undefined) broadcasts to [..., L, S]: a bool mask keeps the True positions, a float mask is
// added (and gets a gradient). is_causal keeps the lower triangle, top-left aligned. scale
// defaults to 1/sqrt(E). enable_gqa lets key/value have fewer heads (dim -3) than query: query
// head h reads key/value head h / (Hq / Hk). dropout_p zeroes probabilities (always applied).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false);

// S = q @ k^T * scale with is_causal's lower triangle or attn_mask (bool: True kept; float:
// added) applied, [..., L, S]: what softmax takes. Also the attention prims' own VJP rule's
// (autograd/vjp.cc).
Tensor attention_scores(const Tensor& q, const Tensor& k, const Tensor& mask, bool bool_mask,
                        bool causal, double scale);

}  // namespace lt
