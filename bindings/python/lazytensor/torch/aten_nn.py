"""Neural-network ops: normalization, matmul and convolution, pooling, attention. Entries of the
aten table (aten_table.py)."""
import math

import torch

from .. import _C
from ..nn import functional as F
from .aten_ops import _cast, aten, op


# ---- normalization ------------------------------------------------------------------------------

@op(aten.native_layer_norm.default)
def _native_layer_norm(cx, x, normalized_shape, weight, bias, eps):
    dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    acc = _C.float32 if x.dtype in (_C.float16, _C.bfloat16) else x.dtype
    xf = _cast(x, acc)
    mean = xf.mean(dims, True)
    d = xf - mean
    rstd = ((d * d).mean(dims, True) + eps).rsqrt()
    y = d * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return _cast(y, x.dtype), mean, rstd


def _bn_shape(x):
    return [1, -1] + [1] * (x.ndim - 2)


@op(aten._native_batch_norm_legit_functional.default)
def _batch_norm_train(cx, x, weight, bias, running_mean, running_var, training, momentum, eps):
    if not training:
        out, _, _ = _batch_norm_eval(cx, x, weight, bias, running_mean, running_var, momentum, eps)
        empty = _C.zeros([0], x.dtype, cx.device)
        return out, empty, empty, running_mean, running_var
    dims = tuple(d for d in range(x.ndim) if d != 1)
    n = x.numel() // x.shape[1]
    acc = _C.float32 if x.dtype in (_C.float16, _C.bfloat16) else x.dtype
    xf = _cast(x, acc)
    mean = xf.mean(dims)
    d = xf - mean.reshape(_bn_shape(x))
    var = (d * d).mean(dims)
    invstd = (var + eps).rsqrt()
    y = d * invstd.reshape(_bn_shape(x))
    if weight is not None:
        y = y * weight.reshape(_bn_shape(x))
    if bias is not None:
        y = y + bias.reshape(_bn_shape(x))
    new_mean = new_var = None
    if running_mean is not None:
        new_mean = running_mean * (1 - momentum) + _cast(mean, running_mean.dtype) * momentum
    if running_var is not None:
        unbiased = var * (n / max(n - 1, 1))
        new_var = running_var * (1 - momentum) + _cast(unbiased, running_var.dtype) * momentum
    return _cast(y, x.dtype), mean, invstd, new_mean, new_var


@op(aten._native_batch_norm_legit_no_training.default)
def _batch_norm_eval(cx, x, weight, bias, running_mean, running_var, momentum, eps):
    shape = _bn_shape(x)
    y = (x - running_mean.reshape(shape)) * (running_var + eps).rsqrt().reshape(shape)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    empty = _C.zeros([0], x.dtype, cx.device)
    return _cast(y, x.dtype), empty, empty


# ---- matmul and convolution ---------------------------------------------------------------------

# A PyTorch script sets torch's TF32 switches, not lazytensor's; each matmul or convolution
# translated carries torch's current setting to the runtime's, which the CUDA launches read.
def _follow(torch_get, lt_get, lt_set):
    on = torch_get()
    if on != lt_get():
        lt_set(on)


def _follow_matmul_tf32():
    _follow(torch._C._get_cublas_allow_tf32, _C.matmul_allow_tf32, _C.set_matmul_allow_tf32)


def _follow_conv_tf32():
    _follow(torch._C._get_cudnn_allow_tf32, _C.conv_allow_tf32, _C.set_conv_allow_tf32)


@op(aten.mm.default, aten.bmm.default)
def _mm(cx, a, b):
    _follow_matmul_tf32()
    return _C.matmul(a, b)


@op(aten.addmm.default)
def _addmm(cx, bias, a, b, *, beta=1, alpha=1):
    _follow_matmul_tf32()
    p = _C.matmul(a, b)
    if alpha != 1:
        p = p * alpha
    return p + (bias if beta == 1 else bias * beta)


def _conv_check(transposed, output_padding, weight):
    if transposed:
        raise NotImplementedError("not implemented: transposed convolution in lazytensor")
    if weight.ndim not in (3, 4):
        raise NotImplementedError(f"not implemented: {weight.ndim - 2}-d convolution in lazytensor")


def _conv(x, w, b, stride, padding, dilation, groups):
    if w.ndim == 4:
        return _C.conv2d(x, w, b, list(stride), list(padding), list(dilation), groups)
    # _C.conv1d takes one int per parameter, not aten's one-element lists.
    return _C.conv1d(x, w, b, stride[0], padding[0], dilation[0], groups)


@op(aten.convolution.default)
def _convolution(cx, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    _conv_check(transposed, output_padding, w)
    _follow_conv_tf32()
    return _conv(x, w, b, stride, padding, dilation, groups)


def _vjp(fn, inputs, needed, grad_out):
    """Gradients of fn(*inputs) toward grad_out for the inputs marked in `needed`, through
    lazytensor's own VJP rules (the backward ops below: torch hands us the op's backward as one
    node, we record our rules' IR for it)."""
    leaves = [x.detach().requires_grad_(True) if need else x.detach()
              for x, need in zip(inputs, needed)]
    with _C_enable_grad():
        out = fn(*leaves)
        wanted = [x for x, need in zip(leaves, needed) if need]
        grads = list(_C.autograd_grad([out], wanted, [grad_out], False, True)) if wanted else []
    it = iter(grads)
    return [next(it) if need else None for need in needed]


class _C_enable_grad:
    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C.set_grad_enabled(True)

    def __exit__(self, *exc):
        _C.set_grad_enabled(self.prev)


@op(aten.convolution_backward.default)
def _convolution_backward(cx, grad_out, x, w, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    _conv_check(transposed, output_padding, w)
    _follow_conv_tf32()
    gx, gw = _vjp(lambda a, b: _conv(a, b, None, stride, padding, dilation, groups), [x, w],
                  [bool(output_mask[0]), bool(output_mask[1])], grad_out)
    gb = None
    if output_mask[2]:
        gb = grad_out.sum([d for d in range(grad_out.ndim) if d != 1])
    return gx, gw, gb


# ---- pooling ------------------------------------------------------------------------------------

def _pool_args(kernel_size, stride, padding, dilation):
    """lt.nn.functional's int-or-pair rule; aten's empty stride means the kernel size."""
    k = F._pair(kernel_size, "kernel_size", "pool2d")
    stride = k if stride is None or len(stride) == 0 else stride
    return (k, F._pair(stride, "stride", "pool2d"), F._pair(padding, "padding", "pool2d"),
            F._pair(dilation, "dilation", "pool2d"))


def _max_pool_indices(x, out, k, s, p, d, ceil_mode):
    """The flat index (into each H*W plane) of the element each window's max came from, as
    PyTorch's max_pool2d_with_indices returns it: the first position holding the max."""
    H, W = x.shape[-2], x.shape[-1]
    xp = _C.pad(x, [p[1], p[1], p[0], p[0]], -math.inf) if any(p) else x
    oh, ow = out.shape[-2], out.shape[-1]
    need_h = (oh - 1) * s[0] + (k[0] - 1) * d[0] + 1
    need_w = (ow - 1) * s[1] + (k[1] - 1) * d[1] + 1
    extra_h, extra_w = max(0, need_h - xp.shape[-2]), max(0, need_w - xp.shape[-1])
    if extra_h or extra_w:  # ceil_mode's last partial windows
        xp = _C.pad(xp, [0, extra_w, 0, extra_h], -math.inf)
    # sliding_window(dim) replaces dim by (windows, kernel): [..., oh, kh, W] then
    # [..., oh, kh, ow, kw], permuted to [..., oh, ow, kh, kw].
    n = xp.ndim
    win = _C.sliding_window(_C.sliding_window(xp, n - 2, k[0], s[0], d[0]), n, k[1], s[1], d[1])
    win = win.permute(list(range(n - 2)) + [n - 2, n, n - 1, n + 1])
    # The first (kh, kw) position whose value equals the window's max: its offset from the
    # window's corner in the plane grows with the position, so the smallest hit offset is it.
    flat = win.reshape(list(win.shape[:-2]) + [k[0] * k[1]])
    hit = flat == out.unsqueeze(-1)
    i64 = _C.int64
    offs = ((_C.arange(0, k[0], 1, i64, x.device) * (d[0] * W)).reshape([k[0], 1]) +
            _C.arange(0, k[1], 1, i64, x.device) * d[1]).reshape([k[0] * k[1]])
    big = _C.full([], H * W, i64, x.device)
    first = _C.where(hit, offs, big).amin((-1,), False)
    rows = _C.arange(0, oh, 1, i64, x.device).reshape([oh, 1]) * s[0] - p[0]
    cols = _C.arange(0, ow, 1, i64, x.device).reshape([1, ow]) * s[1] - p[1]
    return rows * W + cols + first


@op(aten.max_pool2d_with_indices.default)
def _max_pool2d_with_indices(cx, x, kernel_size, stride=(), padding=0, dilation=1,
                             ceil_mode=False):
    k, s, p, d = _pool_args(kernel_size, stride, padding, dilation)
    out = _C.max_pool2d(x, k, s, p, d, ceil_mode)
    return out, _max_pool_indices(x, out, k, s, p, d, ceil_mode)


@op(aten.max_pool2d_with_indices_backward.default)
def _max_pool2d_backward(cx, grad_out, x, kernel_size, stride, padding, dilation, ceil_mode,
                         indices):
    # The gradient goes to the element each window took its max from: `indices`, scattered
    # (added, as overlapping windows may pick the same element) into each H*W plane.
    lead = list(x.shape[:-2])
    plane = x.shape[-2] * x.shape[-1]
    g = grad_out.reshape(lead + [-1])
    idx = indices.reshape(lead + [-1])
    zeros = _C.zeros(lead + [plane], grad_out.dtype, cx.device)
    return _C.scatter_add(zeros, len(lead), idx, g).reshape(list(x.shape))


@op(aten.avg_pool2d.default)
def _avg_pool2d(cx, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    k, s, p, _ = _pool_args(kernel_size, stride, padding, 1)
    return _C.avg_pool2d(x, k, s, p, ceil_mode, count_include_pad, divisor_override)


@op(aten.avg_pool2d_backward.default)
def _avg_pool2d_backward(cx, grad_out, x, kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override):
    k, s, p, _ = _pool_args(kernel_size, stride, padding, 1)
    return _vjp(lambda a: _C.avg_pool2d(a, k, s, p, ceil_mode, count_include_pad,
                                        divisor_override), [x], [True], grad_out)[0]


@op(aten._adaptive_avg_pool2d.default)
def _adaptive_avg_pool2d(cx, x, output_size):
    return _C.adaptive_avg_pool2d(x, list(output_size))


@op(aten._adaptive_avg_pool2d_backward.default)
def _adaptive_avg_pool2d_backward(cx, grad_out, x):
    size = list(grad_out.shape[-2:])
    return _vjp(lambda a: _C.adaptive_avg_pool2d(a, size), [x], [True], grad_out)[0]


# ---- attention ----------------------------------------------------------------------------------

def _attention_scale(q, scale):
    return scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])


def _attention_lse(q, k, attn_mask, is_causal, scale):
    """logsumexp over keys of the scaled scores: the second output of torch's fused attention ops
    (what their backward kernels read); ours recomputes instead, but the output must be right."""
    s = _C.matmul(q, k.transpose(-2, -1)) * _attention_scale(q, scale)
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        keep = _C.tril(_C.full([L, S], True, _C.bool, q.device), 0)
        s = _C.masked_fill(s, _C.logical_not(keep), -math.inf)
    if attn_mask is not None:
        s = (_C.masked_fill(s, _C.logical_not(attn_mask), -math.inf) if attn_mask.dtype == _C.bool
             else s + attn_mask)
    # Half and bfloat16 scores in float32, as torch's kernels keep them; float64 stays float64.
    return _cast(s, _C.float32 if s.dtype in (_C.float16, _C.bfloat16) else s.dtype).logsumexp(-1)


def _no_attention_dropout(dropout_p):
    if dropout_p:
        raise NotImplementedError("not implemented: scaled_dot_product_attention with dropout_p > 0 "
                                  "under torch.compile in lazytensor")


@op(torch.ops.lazytensor.sdpa.default)
def _sdpa(cx, q, k, v, attn_mask, is_causal, scale):
    return _C.scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal, scale)


@op(torch.ops.lazytensor.sdpa_backward.default)
def _sdpa_backward(cx, grad_out, q, k, v, attn_mask, is_causal, scale):
    return tuple(_vjp(lambda a, b, c: _C.scaled_dot_product_attention(a, b, c, attn_mask, 0.0,
                                                                      is_causal, scale),
                      [q, k, v], [True, True, True], grad_out))


@op(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _sdpa_cpu(cx, q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    _no_attention_dropout(dropout_p)
    out = _C.scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal, scale)
    return out, _attention_lse(q, k, attn_mask, is_causal, scale)


@op(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _sdpa_cpu_backward(cx, grad_out, q, k, v, out, lse, dropout_p, is_causal, *, attn_mask=None,
                       scale=None):
    _no_attention_dropout(dropout_p)
    return tuple(_vjp(lambda a, b, c: _C.scaled_dot_product_attention(a, b, c, attn_mask, 0.0,
                                                                      is_causal, scale),
                      [q, k, v], [True, True, True], grad_out))
