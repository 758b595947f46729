"""Creation, random draws and dropout, and SymInt size arithmetic. Entries of the aten table
(aten_table.py)."""
import math
import operator

import torch

from .. import _C
from .aten_ops import aten, op
from .interop import lt_dtype


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

