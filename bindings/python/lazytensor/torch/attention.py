"""scaled_dot_product_attention kept whole across AOTAutograd, on every device.

F.scaled_dot_product_attention is a composite op: AOTAutograd would otherwise lower it to
whichever fused kernel PyTorch picks for the device and dtype (flash or memory-efficient
attention on CUDA, flash-for-cpu on the CPU), each with its own auxiliary outputs (logsumexp,
RNG state, sequence offsets) saved for its own backward kernel. The backend instead rewrites
Dynamo's graph so that each call without dropout becomes `lazytensor::sdpa`, a custom op whose
backward is `lazytensor::sdpa_backward`; calls that Dynamo keeps inside an opaque function
(nn.MultiheadAttention's F.multi_head_attention_forward) are caught while AOTAutograd traces it,
F.scaled_dot_product_attention being ours for that time. Both ops are entries of the aten table (lazytensor's fused
attention and its VJP, which recomputes the scores as flash attention does), and both have
PyTorch implementations for when they run in PyTorch (a split graph).
"""
import contextlib
import functools
from typing import Optional

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


@torch.library.custom_op("lazytensor::sdpa", mutates_args=())
def sdpa(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor], is_causal: bool,
         scale: Optional[float]) -> Tensor:
    return F.scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal, scale=scale)


@sdpa.register_fake
def _sdpa_fake(q, k, v, attn_mask, is_causal, scale):
    return q.new_empty(q.shape[:-1] + v.shape[-1:])


@torch.library.custom_op("lazytensor::sdpa_backward", mutates_args=())
def sdpa_backward(grad: Tensor, q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor],
                  is_causal: bool, scale: Optional[float]) -> tuple[Tensor, Tensor, Tensor]:
    dtype = q.dtype
    # Autograd does not run inside a custom op's kernel, so the VJP is written out (what runs
    # when PyTorch, not lazytensor, executes this node): P = softmax(s), s = q k^T * scale + mask.
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    acc = torch.promote_types(q.dtype, torch.float32)  # half and bfloat16 accumulate in float32
    q, k, v, grad = (t.to(acc) for t in (q, k, v, grad))
    s = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else s + attn_mask.to(acc)
    p = torch.softmax(s, -1)
    gv = p.transpose(-2, -1) @ grad
    dp = grad @ v.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True)) * scale
    return (ds @ k).to(dtype), (ds.transpose(-2, -1) @ q).to(dtype), gv.to(dtype)


@sdpa_backward.register_fake
def _sdpa_backward_fake(grad, q, k, v, attn_mask, is_causal, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, attn_mask, is_causal, scale = inputs
    ctx.save_for_backward(q, k, v, attn_mask)
    ctx.is_causal, ctx.scale = is_causal, scale


def _backward(ctx, grad):
    q, k, v, attn_mask = ctx.saved_tensors
    gq, gk, gv = sdpa_backward(grad, q, k, v, attn_mask, ctx.is_causal, ctx.scale)
    return gq, gk, gv, None, None, None


sdpa.register_autograd(_backward, setup_context=_setup_context)

_SDPA_TARGETS = (torch._C._nn.scaled_dot_product_attention, F.scaled_dot_product_attention)
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
              "enable_gqa")
_SDPA_DEFAULTS = dict(attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                      enable_gqa=False)


def _mask_ok(mask):
    if mask is None:
        return True
    val = mask.meta.get("example_value", mask.meta.get("val")) if hasattr(mask, "meta") else None
    # A float mask that requires grad would need its gradient too, which our VJP does not give.
    return isinstance(val, torch.Tensor) and not val.requires_grad


def keep_attention_whole(gm):
    """Rewrites Dynamo's graph in place: each scaled_dot_product_attention call without dropout
    (and without enable_gqa or a mask that needs a gradient) becomes lazytensor::sdpa. Returns
    how many calls were rewritten."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _SDPA_TARGETS:
            continue
        args = dict(_SDPA_DEFAULTS)
        args.update(zip(_SDPA_ARGS, node.args))
        args.update(node.kwargs)
        if args["dropout_p"] != 0.0 or args["enable_gqa"] or not _mask_ok(args["attn_mask"]):
            continue
        if not all(isinstance(args[a], (bool, float, int, type(None))) for a in ("is_causal",
                                                                                   "scale")):
            continue
        node.target = torch.ops.lazytensor.sdpa.default
        node.args = (args["query"], args["key"], args["value"], args["attn_mask"],
                     bool(args["is_causal"]), args["scale"])
        node.kwargs = {}
        count += 1
    if count:
        gm.recompile()
    return count


_torch_sdpa = F.scaled_dot_product_attention


def sdpa_or(otherwise, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
            scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention as lazytensor::sdpa where that applies (no dropout, no
    enable_gqa, a mask without a gradient), else `otherwise` with the same arguments. Used while
    AOTAutograd traces (otherwise: torch's function) and on the lazy device (its decomposition)."""
    if dropout_p == 0.0 and not enable_gqa and (attn_mask is None or not attn_mask.requires_grad):
        return torch.ops.lazytensor.sdpa(query, key, value, attn_mask, bool(is_causal), scale)
    return otherwise(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                     enable_gqa=enable_gqa)


_sdpa_while_tracing = functools.partial(sdpa_or, _torch_sdpa)


@contextlib.contextmanager
def attention_as_ours():
    """While AOTAutograd traces: torch functions that call F.scaled_dot_product_attention through
    the module's global (multi_head_attention_forward) record lazytensor::sdpa instead."""
    F.scaled_dot_product_attention = _sdpa_while_tracing
    try:
        yield
    finally:
        F.scaled_dot_product_attention = _torch_sdpa
