"""Samples of the aten table's normalization, matmul and convolution, pooling, attention
(test_torch_aten_table.py runs them)."""
import torch

from lazytensor.torch.aten_table import TABLE

from aten_samples import F32, F64, S, _flat, samples

aten = torch.ops.aten


# ---- normalization ------------------------------------------------------------------------------

@samples(aten.native_layer_norm.default)
def _(r, op):
    sh = r.shape(3, lo=2)
    return [S(r.f(*sh), sh[-1:], r.f(sh[-1]), r.f(sh[-1]), 1e-5),
            S(r.f(*sh), sh[-2:], r.f(*sh[-2:]), None, 1e-3),
            S(r.f(*sh), sh[-1:], None, None, 1e-5),
            S(r.f(*sh, dtype=F64), sh[-1:], r.f(sh[-1], dtype=F64), r.f(sh[-1], dtype=F64), 1e-5)]


def _bn_args(r, dtype=F32, nd=4):
    sh = [r.int(2, 4)] + r.shape(nd - 1)
    c = sh[1]
    return (r.f(*sh, dtype=dtype), r.f(c, dtype=dtype), r.f(c, dtype=dtype), r.f(c, dtype=dtype),
            r.pos(c, dtype=dtype))


@samples(aten._native_batch_norm_legit_functional.default)
def _(r, op):
    # The running statistics need no gradient (they are buffers).
    x, w, b, rm, rv = _bn_args(r)
    x3, w3, b3, rm3, rv3 = _bn_args(r, nd=3)
    x64, w64, b64, rm64, rv64 = _bn_args(r, F64)
    return [S(x, w, b, rm, rv, True, 0.1, 1e-5, grad=[0, 1, 2]),
            S(x3, None, None, rm3, rv3, True, 0.3, 1e-3, grad=[0]),
            S(x64, w64, b64, rm64, rv64, True, 0.1, 1e-5, grad=[0, 1, 2]),
            S(x, w, b, rm, rv, False, 0.1, 1e-5, grad=[0, 1, 2])]


@samples(aten._native_batch_norm_legit_no_training.default)
def _(r, op):
    x, w, b, rm, rv = _bn_args(r)
    x3, w3, b3, rm3, rv3 = _bn_args(r, nd=3)
    return [S(x, w, b, rm, rv, 0.1, 1e-5, grad=[0, 1, 2]),
            S(x3, None, None, rm3, rv3, 0.1, 1e-3, grad=[0])]


# ---- matmul and convolution ---------------------------------------------------------------------

@samples(aten.mm.default)
def _(r, op):
    m, k, n = r.shape(3)
    return [S(r.f(m, k), r.f(k, n)), S(r.f(m, k, dtype=F64), r.f(k, n, dtype=F64)),
            S(r.f(1, k), r.f(k, 1))]


@samples(aten.bmm.default)
def _(r, op):
    b, m, k, n = r.shape(4)
    return [S(r.f(b, m, k), r.f(b, k, n)), S(r.f(b, m, k, dtype=F64), r.f(b, k, n, dtype=F64))]


@samples(aten.addmm.default)
def _(r, op):
    m, k, n = r.shape(3)
    return [S(r.f(n), r.f(m, k), r.f(k, n)), S(r.f(m, n), r.f(m, k), r.f(k, n), beta=0.5, alpha=-2),
            S(r.f(1, n, dtype=F64), r.f(m, k, dtype=F64), r.f(k, n, dtype=F64), alpha=3)]


def _conv_cases(r):
    """(x, w, bias, stride, padding, dilation, groups): 2-d and 1-d, groups, strides, dilation."""
    n = r.int(1, 2)
    return [
        (r.f(n, 4, 7, 6), r.f(6, 2, 3, 2), r.f(6), [2, 1], [1, 0], [1, 2], 2),
        (r.f(n, 3, 5, 5), r.f(4, 3, 3, 3), None, [1, 1], [1, 1], [1, 1], 1),
        (r.f(n, 2, 6, 5), r.f(3, 2, 1, 1), r.f(3), [1, 2], [0, 0], [1, 1], 1),
        (r.f(n, 3, 9), r.f(4, 3, 3), r.f(4), [2], [1], [2], 1),
        (r.f(n, 4, 6, dtype=F64), r.f(4, 1, 3, dtype=F64), None, [1], [2], [1], 4),
    ]


@samples(aten.convolution.default)
def _(r, op):
    return [S(x, w, b, s, p, d, False, [0] * len(s), g, tol=(1e-4, 1e-5))
            for x, w, b, s, p, d, g in _conv_cases(r)]


@samples(aten.convolution_backward.default)
def _(r, op):
    out = []
    for (x, w, b, s, p, d, g), mask in zip(_conv_cases(r), ([True, True, True], [True, False, False],
                                                          [False, True, True], [True, True, False],
                                                          [True, True, True])):
        y = aten.convolution(x, w, b, s, p, d, False, [0] * len(s), g)
        bias_sizes = [w.shape[0]]  # torch passes the bias size, with a bias or without
        out.append(S(r.f(*y.shape, dtype=x.dtype), x, w, bias_sizes, s, p, d, False, [0] * len(s),
                     g, mask, grad=False, tol=(1e-4, 1e-5)))
    return out


# ---- pooling ------------------------------------------------------------------------------------

def _pool_cases(r):
    """(x, kernel, stride, padding, dilation, ceil_mode) for max_pool2d."""
    return [(r.f(2, 3, 6, 5), [2, 2], [2, 2], [0, 0], [1, 1], False),
            (r.f(1, 2, 7, 6), [3, 2], [2, 1], [1, 1], [1, 1], True),
            (r.f(3, 6, 6), [3, 3], [2, 2], [1, 0], [2, 1], False),
            (r.f(1, 1, 5, 5, dtype=F64), [2, 3], [], [0, 1], [1, 1], True),
            (r.f(2, 1, 4, 4), [2, 2], [1, 1], [0, 0], [1, 1], False)]


def _pool_samples(forward, backward, cases, backward_args):
    """A pooling op's samples (`cases`) and its backward op's on the same cases, whose arguments
    `backward_args(grad_out, case, forward's result)` makes."""
    samples(forward)(lambda r, op: [S(*c) for c in cases(r)])

    def backward_samples(r, op):
        out = []
        for c in cases(r):
            y = forward(*c)
            g = r.f(*_flat(y)[0].shape, dtype=c[0].dtype)
            out.append(S(*backward_args(g, c, y), grad=False))
        return out
    samples(backward)(backward_samples)


_pool_samples(aten.max_pool2d_with_indices.default, aten.max_pool2d_with_indices_backward.default,
              _pool_cases, lambda g, c, y: (g, c[0], c[1], c[2] or c[1], *c[3:], y[1]))


def _avg_cases(r):
    """(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)."""
    return [(r.f(2, 3, 6, 5), [2, 2], [2, 2], [0, 0], False, True, None),
            (r.f(1, 2, 7, 6), [3, 2], [2, 1], [1, 1], True, False, None),
            (r.f(3, 6, 6), [3, 3], [2, 2], [1, 0], False, True, None),
            (r.f(1, 2, 5, 5, dtype=F64), [2, 3], [1, 2], [1, 1], True, True, None),
            (r.f(2, 2, 5, 4), [2, 2], [1, 1], [1, 0], False, True, 3)]


_pool_samples(aten.avg_pool2d.default, aten.avg_pool2d_backward.default, _avg_cases,
              lambda g, c, y: (g, *c))


def _adaptive_cases(r):
    # Output sizes that divide the input's (lazytensor's adaptive pooling; others fall back).
    return [(r.f(2, 3, 6, 4), [3, 2]), (r.f(1, 2, 7, 5), [1, 1]), (r.f(3, 5, 6), [5, 3]),
            (r.f(1, 2, 4, 6, dtype=F64), [2, 3]), (r.f(1, 2, 4, 5), [4, 5])]


_pool_samples(aten._adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d_backward.default,
              _adaptive_cases, lambda g, c, y: (g, c[0]))


# ---- attention ----------------------------------------------------------------------------------

def _attn_cases(r):
    """(q, k, v, is_causal, attn_mask, scale)."""
    b, h = r.int(1, 2), r.int(1, 3)
    L, S_, E = r.int(2, 5), r.int(2, 6), r.int(2, 6)  # the flash op takes one head size
    qkv = lambda dtype=F32: (r.f(b, h, L, E, dtype=dtype), r.f(b, h, S_, E, dtype=dtype),  # noqa
                             r.f(b, h, S_, E, dtype=dtype))
    # (The flash op takes a float mask of q's dtype only; a bool mask is made float before.)
    return [(*qkv(), False, None, None),
            (*qkv(), True, None, None),
            (*qkv(), False, r.f(b, 1, L, S_), 0.3),
            (*qkv(F64), False, None, None)]


@samples(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _(r, op):
    return [S(q, k, v, 0.0, causal, attn_mask=m, scale=s, grad=[0, 1, 2], tol=(1e-4, 1e-5))
            for q, k, v, causal, m, s in _attn_cases(r)]


@samples(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _(r, op):
    out = []
    for q, k, v, causal, m, s in _attn_cases(r):
        o, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal,
                                                                   attn_mask=m, scale=s)
        out.append(S(r.f(*o.shape, dtype=o.dtype), q, k, v, o, lse, 0.0, causal, attn_mask=m,
                     scale=s, grad=False, tol=(1e-4, 1e-5)))
    return out


def _lt_attn_cases(r):
    """(q, k, v, attn_mask, is_causal, scale) for lazytensor::sdpa, which takes what
    F.scaled_dot_product_attention takes: also bool masks and a head size of v of its own."""
    b, h, L, S_, E, Ev = r.int(1, 2), r.int(1, 3), *r.shape(4, lo=2)
    keep = r.b(L, S_)
    keep[:, 0] = True  # every query keeps a key (an all-masked row is NaN in both)
    qkv = lambda dtype=F32: (r.f(b, h, L, E, dtype=dtype), r.f(b, h, S_, E, dtype=dtype),  # noqa
                             r.f(b, h, S_, Ev, dtype=dtype))
    return [(*qkv(), None, False, None), (*qkv(), None, True, 0.5), (*qkv(), keep, False, None),
            (*qkv(), r.f(b, 1, L, S_), False, None), (*qkv(F64), None, False, None)]


def _torch_sdpa(q, k, v, attn_mask, is_causal, scale):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal,
                                                            scale=scale)


def _torch_sdpa_backward(grad, q, k, v, attn_mask, is_causal, scale):
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with torch.enable_grad():
        return torch.autograd.grad(_torch_sdpa(*leaves, attn_mask, is_causal, scale), leaves, grad)


# lazytensor/torch/attention.py's custom ops, sampled once the table has them.
if hasattr(torch.ops.lazytensor, "sdpa") and torch.ops.lazytensor.sdpa.default in TABLE:
    @samples(torch.ops.lazytensor.sdpa.default)
    def _(r, op):
        return [S(*c, grad=[0, 1, 2], tol=(1e-4, 1e-5), ref=_torch_sdpa) for c in _lt_attn_cases(r)]

    @samples(torch.ops.lazytensor.sdpa_backward.default)
    def _(r, op):
        return [S(r.f(*q.shape[:-1], v.shape[-1], dtype=q.dtype), q, k, v, *rest, grad=False,
                  tol=(1e-4, 1e-5), ref=_torch_sdpa_backward) for q, k, v, *rest in _lt_attn_cases(r)]
