"""`lazytensor.nn.MultiheadAttention`: PyTorch's layer (parameter names, init, mask conventions and
return values); the attention itself is F.scaled_dot_product_attention (one autograd node with the
flash-attention backward), the returned weights a softmax beside it."""
import math

from .. import _C
from . import functional as F
from . import init
from .layers import Linear, _new_param
from .module import Module


def _additive(mask, dtype, what):
    """A bool mask (True = not allowed, MultiheadAttention's convention) or a float mask as an
    additive float mask."""
    if mask.dtype == _C.bool:
        return _C.where(mask, float("-inf"), _C.zeros(list(mask.shape), dtype, mask.device))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {what} are supported")
    return mask.to(dtype)



def _merged_mask(attn_mask, key_padding_mask, N, H, L, S, dtype):
    """MultiheadAttention's attn_mask ([L, S] or [N * H, L, S]) and key_padding_mask ([N, S]), each
    bool (True = not allowed) or additive float, as one scaled_dot_product_attention mask that
    broadcasts to [N, H, L, S]: a bool keep-mask when both are bool, else an additive float mask."""
    parts = []
    if attn_mask is not None:
        if attn_mask.dtype != _C.bool and not attn_mask.dtype.is_floating_point:
            raise AssertionError("only bool and floating types of attn_mask are supported")
        if attn_mask.ndim == 2:
            if list(attn_mask.shape) != [L, S]:
                raise RuntimeError(f"The shape of the 2D attn_mask is {list(attn_mask.shape)}, but "
                                   f"should be {[L, S]}.")
        elif attn_mask.ndim == 3:
            if list(attn_mask.shape) != [N * H, L, S]:
                raise RuntimeError(f"The shape of the 3D attn_mask is {list(attn_mask.shape)}, but "
                                   f"should be {[N * H, L, S]}.")
            attn_mask = attn_mask.reshape([N, H, L, S])
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
        parts.append(attn_mask)
    if key_padding_mask is not None:
        if list(key_padding_mask.shape) != [N, S]:
            raise AssertionError(f"expecting key_padding_mask shape of {[N, S]}, but got "
                                 f"{list(key_padding_mask.shape)}")
        parts.append(key_padding_mask.reshape([N, 1, 1, S]))
    if not parts:
        return None
    if all(m.dtype == _C.bool for m in parts):
        blocked = parts[0] if len(parts) == 1 else _C.logical_or(parts[0], parts[1])
        return blocked.logical_not()
    merged = _additive(parts[0], dtype, "attn_mask")
    return merged if len(parts) == 1 else merged + _additive(parts[1], dtype, "key_padding_mask")

class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads != 0:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("not implemented: MultiheadAttention(add_bias_kv / "
                                      "add_zero_attn) on lazytensor")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _new_param((3 * embed_dim, embed_dim), device, dtype)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = _new_param((embed_dim, embed_dim), device, dtype)
            self.k_proj_weight = _new_param((embed_dim, self.kdim), device, dtype)
            self.v_proj_weight = _new_param((embed_dim, self.vdim), device, dtype)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = _new_param((3 * embed_dim,), device, dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _projections(self):
        E = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            return (w[:E], bq), (w[E:2 * E], bk), (w[2 * E:], bv)
        return (self.q_proj_weight, bq), (self.k_proj_weight, bk), (self.v_proj_weight, bv)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                               "Transformer module method `generate_square_subsequent_mask` to "
                               "create this mask.")
        batched = query.ndim == 3
        if not batched:  # [L, E] -> [1, L, E]
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:  # [L, N, E] -> [N, L, E]
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if query.ndim != 3 or key.ndim != 3 or value.ndim != 3 or query.shape[-1] != self.embed_dim:
            raise AssertionError(f"MultiheadAttention: expected query/key/value of matching rank with "
                                 f"embedding dim {self.embed_dim}, got {list(query.shape)}, "
                                 f"{list(key.shape)}, {list(value.shape)}")
        N, L, E = query.shape
        S = key.shape[1]
        H, hd = self.num_heads, self.head_dim
        (wq, bq), (wk, bk), (wv, bv) = self._projections()

        def heads(x, w, b, n):  # [N, n, *] -> [N, H, n, hd]
            return F.linear(x, w, b).reshape([N, n, H, hd]).transpose(1, 2)
        q, k, v = heads(query, wq, bq, L), heads(key, wk, bk, S), heads(value, wv, bv, S)

        mask = _merged_mask(attn_mask, key_padding_mask, N, H, L, S, q.dtype)
        out = F.scaled_dot_product_attention(q, k, v, mask,
                                             self.dropout if self.training else 0.0)
        if need_weights:  # the softmax PyTorch returns (before dropout); on lazy unused ones are DCE'd
            scores = q.matmul(k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))  # [N, H, L, S]
            if mask is not None:
                scores = scores.masked_fill(mask.logical_not(), float("-inf")) \
                    if mask.dtype == _C.bool else scores + mask
            attn = scores.softmax(-1)
        out = out.transpose(1, 2).reshape([N, L, E])
        out = self.out_proj(out)
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        weights = None
        if need_weights:
            weights = attn.mean([1]) if average_attn_weights else attn
            if not batched:
                weights = weights.squeeze(0)
        return out, weights
