"""The bridge's "ops are data": one entry per aten op, from the op to a builder that records the
same computation as lazytensor IR.

A builder takes the graph's context (`cx`: the lazy device the graph runs on) and the op's
arguments with torch tensors replaced by lazytensor tensors, and returns what the aten op returns
(a tensor, a tuple of tensors, or a list). Python numbers stay numbers: they become scalars of the
graph. A builder raises NotImplementedError for an argument combination it does not cover; the
partitioner (partition.py) asks `supports(node)` first, so such a node runs in PyTorch instead.

Ops that torch._decomp already decomposes well are not here (the backend keeps torch's
decompositions for them); ops we fuse better ourselves (softmax, layer_norm, attention, gelu) are
kept whole (backend.py's decomposition table leaves them out).
"""
import math
import operator

import torch

from .. import _C
from ..nn import functional as F
from . import attention  # noqa: F401  (defines torch.ops.lazytensor.sdpa*)
from .interop import lt_dtype

aten = torch.ops.aten
prims = torch.ops.prims
TABLE = {}


def op(*overloads):
    def register(fn):
        for o in overloads:
            TABLE[o] = fn
        return fn
    return register


def _dims(dim, ndim):
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return [d % ndim if ndim else 0 for d in dim]


def _cast(x, dtype):
    return x if dtype is None or x.dtype == dtype else _C.cast(x, dtype)


# ---- elementwise --------------------------------------------------------------------------------

@op(aten.add.Tensor, aten.add.Scalar)
def _add(cx, a, b, alpha=1):
    return a + (b if alpha == 1 else b * alpha)


@op(aten.sub.Tensor, aten.sub.Scalar)
def _sub(cx, a, b, alpha=1):
    return a - (b if alpha == 1 else b * alpha)


@op(aten.rsub.Tensor, aten.rsub.Scalar)
def _rsub(cx, a, b, alpha=1):
    return b - (a if alpha == 1 else a * alpha)


@op(aten.mul.Tensor, aten.mul.Scalar)
def _mul(cx, a, b):
    return a * b


@op(aten.div.Tensor, aten.div.Scalar)
def _div(cx, a, b):
    return a / b


@op(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(cx, a, b, rounding_mode=None):
    if rounding_mode is None:
        return a / b
    if rounding_mode == "floor" and a.dtype.is_floating_point:
        return (a / b).floor()
    raise NotImplementedError(f"not implemented: div(rounding_mode={rounding_mode!r}) on "
                              f"{a.dtype} in lazytensor")


@op(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)
def _pow(cx, a, b):
    return a.pow(b)


@op(aten.pow.Scalar)
def _rpow(cx, a, b):
    return _C.rpow(b, a)


@op(aten.maximum.default)
def _maximum(cx, a, b):
    return _C.maximum(a, b)


@op(aten.minimum.default)
def _minimum(cx, a, b):
    return _C.minimum(a, b)


for _name, _fn in (("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                   ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)):
    op(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar)(
        lambda cx, a, b, _fn=_fn: _fn(a, b))


def _bool_only(name, *xs):
    for x in xs:
        if not isinstance(x, bool) and getattr(x, "dtype", None) != _C.bool:
            raise NotImplementedError(f"not implemented: {name} of {getattr(x, 'dtype', type(x))} "
                                      f"in lazytensor (bool tensors only)")


@op(aten.logical_and.default, aten.bitwise_and.Tensor)
def _and(cx, a, b):
    _bool_only("bitwise_and", a, b)
    return _C.logical_and(a, b)


@op(aten.logical_or.default, aten.bitwise_or.Tensor)
def _or(cx, a, b):
    _bool_only("bitwise_or", a, b)
    return _C.logical_or(a, b)


@op(aten.logical_xor.default, aten.bitwise_xor.Tensor)
def _xor(cx, a, b):
    _bool_only("bitwise_xor", a, b)
    return a != b


@op(aten.logical_not.default, aten.bitwise_not.default)
def _not(cx, a):
    _bool_only("bitwise_not", a)
    return _C.logical_not(a)


@op(aten.where.self)
def _where(cx, c, a, b):
    return _C.where(c, a, b)


@op(aten.clamp.default, aten.clamp.Tensor)
def _clamp(cx, x, min=None, max=None):
    return x.clamp(min, max)


@op(aten.clamp_min.default)
def _clamp_min(cx, x, m):
    return x.clamp(m, None)


@op(aten.clamp_max.default)
def _clamp_max(cx, x, m):
    return x.clamp(None, m)


@op(aten.lerp.Scalar, aten.lerp.Tensor)
def _lerp(cx, start, end, weight):
    """start + weight * (end - start): Adam's first-moment update (torch.optim uses lerp_)."""
    return start + (end - start) * weight


@op(aten.addcmul.default)
def _addcmul(cx, x, a, b, *, value=1):
    return x + (a * b if value == 1 else a * b * value)


@op(aten.addcdiv.default)
def _addcdiv(cx, x, a, b, *, value=1):
    return x + (a / b if value == 1 else a / b * value)


def _fma(cx, a, b, c):
    return a * b + c


def register_inductor_prims():
    """prims.fma exists once torch._inductor's prims are imported (the backend does; importing
    them here would cost the `lazy` device's first op about a second)."""
    if hasattr(prims, "fma"):
        TABLE[prims.fma.default] = _fma


register_inductor_prims()


for _name in ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh",
              "sigmoid", "relu", "erf", "floor"):
    op(getattr(aten, _name).default)(lambda cx, x, _name=_name: getattr(x, _name)())


@op(aten.sign.default)
def _sign(cx, x):
    # No sign op in lazytensor (abs's derivative needs it): (x > 0) - (x < 0) in x's dtype, which
    # gives torch's sign(nan) = 0 too; a bool is its own sign.
    if x.dtype == _C.bool:
        return x
    return _cast(x > 0, x.dtype) - _cast(x < 0, x.dtype)


@op(aten.gelu.default)
def _gelu(cx, x, approximate="none"):
    return _C.gelu(x, approximate)


@op(aten.silu.default)
def _silu(cx, x):
    return _C.silu(x)


# ---- reductions ---------------------------------------------------------------------------------

@op(aten.sum.dim_IntList, aten.sum.default)
def _sum(cx, x, dim=None, keepdim=False, *, dtype=None):
    x = _cast(x, lt_dtype(dtype))
    return x.sum(_dims(dim, x.ndim) if dim not in (None, []) else None, keepdim)


@op(aten.mean.dim, aten.mean.default)
def _mean(cx, x, dim=None, keepdim=False, *, dtype=None):
    x = _cast(x, lt_dtype(dtype))
    return x.mean(_dims(dim, x.ndim) if dim not in (None, []) else None, keepdim)


@op(aten.amax.default)
def _amax(cx, x, dim=(), keepdim=False):
    return x.amax(tuple(dim), keepdim)


@op(aten.amin.default)
def _amin(cx, x, dim=(), keepdim=False):
    return x.amin(tuple(dim), keepdim)


@op(aten.argmax.default)
def _argmax(cx, x, dim=None, keepdim=False):
    return x.argmax(dim, keepdim)


@op(aten.argmin.default)
def _argmin(cx, x, dim=None, keepdim=False):
    return x.argmin(dim, keepdim)


def _extreme_dim(x, dim, keepdim, which):
    # bool has no max/argmax kernel of its own: over uint8 the order and the first hit agree.
    r = getattr(x if x.dtype != _C.bool else _C.cast(x, _C.uint8), which)(dim, keepdim)
    return _cast(r[0], x.dtype), r[1]


@op(aten.max.default)
def _max_all(cx, x):  # torch.max(x): the largest entry (LBFGS's flat_grad.abs().max())
    return _cast((x if x.dtype != _C.bool else _C.cast(x, _C.uint8)).amax((), False), x.dtype)


@op(aten.min.default)
def _min_all(cx, x):
    return _cast((x if x.dtype != _C.bool else _C.cast(x, _C.uint8)).amin((), False), x.dtype)


@op(aten.isnan.default)
def _isnan(cx, x):  # NaN is the only value unequal to itself (max/min's backward asks)
    return x != x if x.dtype.is_floating_point else _C.zeros_like(x) != 0


@op(aten.log1p.default, prims.log1p.default)
def _log1p(cx, x):
    # No log1p op in lazytensor: log(u) * x / (u - 1) with u = 1 + x, exact where 1 + x rounds
    # (Goldberg's trick), x itself where u == 1 and +inf at +inf. binary_cross_entropy's
    # decomposition calls it (log1p(-p)).
    if not x.dtype.is_floating_point:
        x = _cast(x, _C.float32)
    u = x + 1.0
    ratio = _C.where(u == 1.0, _C.ones_like(x), x / (u - 1.0))
    y = u.log() * ratio
    return _C.where(u == 1.0, x, _C.where(x == math.inf, x, y))


@op(aten.multinomial.default)
def _multinomial(cx, x, num_samples, replacement=False, *, generator=None):
    if generator is not None:  # a torch.Generator's stream: PyTorch draws (the CPU fallback)
        raise NotImplementedError("multinomial with a torch.Generator on the lazy device")
    from .._sampling import multinomial
    return multinomial(x, num_samples, replacement)


@op(aten.max.dim)
def _max_dim(cx, x, dim, keepdim=False):
    return _extreme_dim(x, dim, keepdim, "max")


@op(aten.min.dim)
def _min_dim(cx, x, dim, keepdim=False):
    return _extreme_dim(x, dim, keepdim, "min")


@op(aten.any.dim, aten.any.dims, aten.any.default)
def _any(cx, x, dim=None, keepdim=False):
    dims = _dims(dim, x.ndim) if dim not in (None, []) else None
    return (x != 0).to(_C.int32).amax(tuple(dims) if dims is not None else (), keepdim) != 0


@op(aten.var.correction)
def _var(cx, x, dim=None, *, correction=None, keepdim=False):
    return x.var(_dims(dim, x.ndim) if dim not in (None, []) else None, keepdim=keepdim,
                 correction=1 if correction is None else correction)


@op(aten.cumsum.default)
def _cumsum(cx, x, dim, *, dtype=None):
    return _cast(x, lt_dtype(dtype)).cumsum(dim)


@op(aten._softmax.default)
def _softmax(cx, x, dim, half_to_float=False):
    return x.softmax(dim)


@op(aten._log_softmax.default)
def _log_softmax(cx, x, dim, half_to_float=False):
    return x.log_softmax(dim)


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

@op(aten.mm.default, aten.bmm.default)
def _mm(cx, a, b):
    return _C.matmul(a, b)


@op(aten.addmm.default)
def _addmm(cx, bias, a, b, *, beta=1, alpha=1):
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


# ---- indexing -----------------------------------------------------------------------------------

@op(aten.embedding.default)
def _embedding(cx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return _C.embedding(weight, indices)


@op(aten.embedding_dense_backward.default)
def _embedding_backward(cx, grad_out, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise NotImplementedError("not implemented: embedding(scale_grad_by_freq=True) backward "
                                  "in lazytensor")
    dim = grad_out.shape[-1]
    idx = indices.reshape([-1])
    g = grad_out.reshape([-1, dim])
    if padding_idx is not None and padding_idx >= 0:
        g = _C.masked_fill(g, (idx == padding_idx).unsqueeze(-1), 0.0)
    zeros = _C.zeros([num_weights, dim], grad_out.dtype, cx.device)
    return _C.scatter_add(zeros, 0, idx.unsqueeze(-1).expand(-1, dim), g)


@op(aten.index_select.default)
def _index_select(cx, x, dim, index):
    return _C.index_select(x, dim, index)


@op(aten.gather.default)
def _gather(cx, x, dim, index, *, sparse_grad=False):
    return _C.gather(x, dim, index)


@op(aten.scatter_add.default)
def _scatter_add(cx, x, dim, index, src):
    return _C.scatter_add(x, dim, index, src)


@op(aten.scatter.value, aten.scatter.src)
def _scatter(cx, x, dim, index, value):
    # Each (index) position is written once with the value (PyTorch leaves duplicates'
    # winner unspecified): x where no index points, else the value. A position's hit count
    # comes from a scatter_add of ones.
    hits = _C.scatter_add(_C.zeros_like(x), dim, index, _cast(_C.ones_like(index), x.dtype)) > 0
    if not isinstance(value, _C.Tensor):
        return _C.where(hits, _C.full([], value, x.dtype, cx.device), x)
    src = value
    for d in range(index.ndim):  # torch reads src only where index has entries
        if src.shape[d] != index.shape[d]:
            src = _C.slice(src, d, 0, index.shape[d], 1)
    # With unique indices (the defined case), the sum of the scattered values is the value.
    placed = _C.scatter_add(_C.zeros_like(x), dim, index, _cast(src, x.dtype))
    return _C.where(hits, placed, x)


def _one_index(name, x, indices):
    """(dim, index) of an aten.index/index_put whose indices are one integer tensor after Nones
    (x[i], x[:, i], ...: also what index_select's and index_add's derivatives produce), negative
    entries counted back from the end as torch counts them."""
    d = len(indices) - 1
    if d < 0 or any(i is not None for i in indices[:-1]) or indices[-1] is None \
            or indices[-1].dtype == _C.bool:
        raise NotImplementedError(f"not implemented: aten.{name} with other than one integer "
                                  f"index tensor (after full slices) in lazytensor")
    idx = indices[-1]
    return d, _C.where(idx < 0, idx + x.shape[d], idx)


@op(aten.index.Tensor)
def _index(cx, x, indices):
    d, idx = _one_index("index", x, indices)
    flat = _C.index_select(x, d, idx.reshape([-1]))
    return flat.reshape(list(x.shape[:d]) + list(idx.shape) + list(x.shape[d + 1:]))


@op(aten.index_put.default)
def _index_put(cx, x, indices, values, accumulate=False):
    d, idx = _one_index("index_put", x, indices)
    lead, row = list(x.shape[:d]), list(x.shape[d + 1:])
    shape = lead + list(idx.shape) + row
    if idx.ndim == 0 and values.ndim > len(shape):
        # index_select's derivative (through index_add) passes a 0-d index with values that keep
        # the indexed dim (size 1), which torch's index_put takes.
        shape = lead + [1] + row
    vals = values.expand(shape).reshape(lead + [-1] + row)
    full_idx = idx.reshape([1] * d + [-1] + [1] * len(row)).expand(lead + [-1] + row)
    if accumulate:
        return _C.scatter_add(x, d, full_idx, _cast(vals, x.dtype))
    return _scatter(cx, x, d, full_idx, _cast(vals, x.dtype))


# ---- movement -----------------------------------------------------------------------------------

@op(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(cx, x, size):
    return x.reshape(list(size))


@op(aten.permute.default)
def _permute(cx, x, dims):
    return x.permute(list(dims))


@op(aten.expand.default)
def _expand(cx, x, size, implicit=False):
    return x.expand(list(size))


@op(aten.unsqueeze.default)
def _unsqueeze(cx, x, dim):
    return x.unsqueeze(dim)


@op(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def _squeeze(cx, x, dim=None):
    if dim is None:
        return x.squeeze()
    keep = [s for i, s in enumerate(x.shape) if not (i in _dims(dim, x.ndim) and s == 1)]
    return x.reshape(keep)


@op(aten.slice.Tensor)
def _slice(cx, x, dim=0, start=None, end=None, step=1):
    n = x.shape[dim]
    start = 0 if start is None else start
    end = n if end is None else end
    start = max(0, min(n, start + n if start < 0 else start))
    end = max(start, min(n, end + n if end < 0 else end))
    return _C.slice(x, dim, start, end, step)


@op(aten.select.int)
def _select(cx, x, dim, index):
    return _C.select(x, dim, index)


@op(aten.cat.default)
def _cat(cx, tensors, dim=0):
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    return _C.cat(tensors, dim)


@op(aten.split_with_sizes.default)
def _split_with_sizes(cx, x, sizes, dim=0):
    return list(x.split(list(sizes), dim))


@op(aten.split.Tensor)
def _split(cx, x, size, dim=0):
    return list(x.split(size, dim))


@op(aten.transpose.int)
def _transpose(cx, x, a, b):
    return x.transpose(a, b)


@op(aten.t.default)
def _t(cx, x):
    return x.t()


@op(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default)
def _clone(cx, x, *, memory_format=None):
    return x


@op(aten._to_copy.default)
def _to_copy(cx, x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    return _cast(x, lt_dtype(dtype))


@op(aten.copy.default)
def _copy(cx, x, src, non_blocking=False):
    return _cast(src, x.dtype).expand(list(x.shape))


@op(aten.constant_pad_nd.default)
def _constant_pad_nd(cx, x, pad, value=0):
    return _C.pad(x, list(pad), float(value))


@op(aten.flip.default)
def _flip(cx, x, dims):
    return _C.flip(x, list(dims))


@op(aten.tril.default)
def _tril(cx, x, diagonal=0):
    return _C.tril(x, diagonal)


@op(aten.triu.default)
def _triu(cx, x, diagonal=0):
    return _C.triu(x, diagonal)


# ---- creation and random ------------------------------------------------------------------------

def _dtype_or(dtype, value):
    if dtype is not None:
        return lt_dtype(dtype)
    if isinstance(value, bool):
        return _C.bool
    if isinstance(value, int):
        return _C.int64
    return _C.float32


@op(aten.full.default)
def _full(cx, size, value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _C.full(list(size), value, _dtype_or(dtype, value), cx.device)


@op(aten.scalar_tensor.default)
def _scalar_tensor(cx, value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _C.full([], value, _dtype_or(dtype, value), cx.device)


@op(aten.full_like.default)
def _full_like(cx, x, value, *, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    return _C.full(list(x.shape), value, lt_dtype(dtype) or x.dtype, cx.device)


@op(aten.zeros.default, aten.empty.memory_format)
def _zeros(cx, size, *, dtype=None, layout=None, device=None, pin_memory=None,
           memory_format=None):
    return _C.full(list(size), 0, lt_dtype(dtype) or _C.float32, cx.device)


@op(aten.ones.default)
def _ones(cx, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _C.full(list(size), 1, lt_dtype(dtype) or _C.float32, cx.device)


@op(aten.empty_strided.default)
def _empty_strided(cx, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _C.full(list(size), 0, lt_dtype(dtype) or _C.float32, cx.device)


@op(aten.zeros_like.default, aten.empty_like.default)
def _zeros_like(cx, x, *, dtype=None, layout=None, device=None, pin_memory=None,
                memory_format=None):
    return _C.full(list(x.shape), 0, lt_dtype(dtype) or x.dtype, cx.device)


@op(aten.ones_like.default)
def _ones_like(cx, x, *, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    return _C.full(list(x.shape), 1, lt_dtype(dtype) or x.dtype, cx.device)


@op(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(cx, start, end=None, step=1, *, dtype=None, layout=None, device=None,
            pin_memory=None):
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = torch.int64 if all(isinstance(v, int) for v in (start, end, step)) else \
            torch.get_default_dtype()
    return _C.arange(start, end, step, lt_dtype(dtype), cx.device)


@op(aten.rand_like.default)
def _rand_like(cx, x, *, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    return _C.rand_like(_C.full(list(x.shape), 0, lt_dtype(dtype) or x.dtype, cx.device))


@op(aten.randn_like.default)
def _randn_like(cx, x, *, dtype=None, layout=None, device=None, pin_memory=None,
                memory_format=None):
    return _C.randn_like(_C.full(list(x.shape), 0, lt_dtype(dtype) or x.dtype, cx.device))


@op(aten.native_dropout.default)
def _native_dropout(cx, x, p, train):
    if not train or p == 0:
        return x, _C.full(list(x.shape), True, _C.bool, cx.device)
    keep = _C.rand_like(x) >= p
    return _C.where(keep, x * (1.0 / (1.0 - p)), _C.full([], 0, x.dtype, cx.device)), keep


@op(aten.native_dropout_backward.default)
def _native_dropout_backward(cx, grad, mask, scale):
    return _C.where(mask, grad * scale, _C.full([], 0, grad.dtype, cx.device))


# ---- sizes (SymInt arithmetic runs as Python on concrete values) --------------------------------

@op(aten.sym_size.int)
def _sym_size(cx, x, dim):
    return x.shape[dim]


@op(aten.sym_numel.default)
def _sym_numel(cx, x):
    return x.numel()


for _f in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv,
           operator.mod, operator.neg, operator.pow, operator.eq, operator.ne, operator.lt,
           operator.le, operator.gt, operator.ge, math.ceil, math.floor):
    op(_f)(lambda cx, *a, _f=_f: _f(*a))



@op(operator.getitem)
def _getitem(cx, seq, i):
    return seq[i]


def builder(target):
    """The builder of an FX node's target, or None."""
    return TABLE.get(target)
