"""Reductions: sums, means, extremes and their indices, variance, softmax, and ops their backward
graphs use. Entries of the aten table (aten_table.py)."""

from .. import _C
from .aten_ops import _cast, _dims, aten, op, prims
from .interop import lt_dtype


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


def _orderable(x):
    # bool has no max/argmax kernel of its own: over uint8 the order and the first hit agree.
    return x if x.dtype != _C.bool else _C.cast(x, _C.uint8)


def _extreme_dim(x, dim, keepdim, which):
    r = getattr(_orderable(x), which)(dim, keepdim)
    return _cast(r[0], x.dtype), r[1]


@op(aten.max.default)
def _max_all(cx, x):  # torch.max(x): the largest entry (LBFGS's flat_grad.abs().max())
    return _cast(_orderable(x).amax((), False), x.dtype)


@op(aten.min.default)
def _min_all(cx, x):
    return _cast(_orderable(x).amin((), False), x.dtype)


@op(aten.isnan.default)
def _isnan(cx, x):  # NaN is the only value unequal to itself (max/min's backward asks)
    return x != x if x.dtype.is_floating_point else _C.zeros_like(x) != 0


@op(aten.log1p.default, prims.log1p.default)
def _log1p(cx, x):
    # lazytensor's log1p primitive (binary_cross_entropy's decomposition calls it: log1p(-p)).
    return x.log1p()


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
