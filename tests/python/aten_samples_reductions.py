"""Samples of the aten table's reductions (test_torch_aten_table.py runs them)."""
import math

import torch

from aten_samples import BOOL, F32, F64, I64, S, samples

aten = torch.ops.aten
prims = torch.ops.prims


# ---- reductions ---------------------------------------------------------------------------------

@samples(aten.sum.dim_IntList)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), [1]), S(r.f(*sh), [0, -1], True), S(r.f(*sh), [], dtype=F64),
            S(r.f(*sh, dtype=F64), [2]), S(r.i(*sh), [0, 2]), S(r.b(*sh), [1], True),
            S(r.i(*sh, dtype=torch.int32), [-1]), S(r.f(1, 0, 3), [1])]


@samples(aten.sum.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh)), S(r.f(*sh, dtype=F64)), S(r.i(*sh)), S(r.b(*sh)),
            S(r.i(*sh, dtype=torch.int32)), S(r.f(*sh), dtype=F64), S(r.f())]


@samples(aten.mean.dim)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), [1]), S(r.f(*sh), [0, -1], True), S(r.f(*sh, dtype=F64), [2]),
            S(r.f(*sh), [-2], dtype=F64)]


@samples(aten.mean.default)
def _(r, op):
    return [S(r.f(*r.shape(3))), S(r.f(*r.shape(2), dtype=F64)), S(r.f())]


@samples(aten.amax.default, aten.amin.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), [1]), S(r.f(*sh), [0, 2], True), S(r.f(*sh)), S(r.f(*sh, dtype=F64), [-1]),
            S(r.i(*sh), [0])]


def _unique(r, *shape, dtype=F32):
    """Distinct values (no ties for arg-reductions and max/min with indices)."""
    n = math.prod(shape)
    return (r.perm(n).to(dtype) - n / 2).reshape(shape) / (1 if dtype == I64 else 3)


@samples(aten.argmax.default, aten.argmin.default)
def _(r, op):
    sh = r.shape(3)
    return [S(_unique(r, *sh)), S(_unique(r, *sh), 1), S(_unique(r, *sh), -1, True),
            S(_unique(r, *sh, dtype=I64), 0), S(_unique(r, *sh, dtype=F64))]


@samples(aten.max.dim, aten.min.dim)
def _(r, op):
    sh = r.shape(3)
    return [S(_unique(r, *sh), 1), S(_unique(r, *sh), -1, True), S(_unique(r, *sh, dtype=F64), 0),
            S(_unique(r, *sh, dtype=I64), 2)]


@samples(aten.max.default, aten.min.default)
def _(r, op):
    sh = r.shape(3)
    return [S(_unique(r, *sh)), S(_unique(r, *sh, dtype=F64)), S(_unique(r, *sh, dtype=I64)),
            S(r.b(*sh)), S(r.f())]


@samples(aten.isnan.default)
def _(r, op):
    sh = r.shape(3)
    x = r.f(*sh)
    x.view(-1)[::3] = float("nan")
    return [S(x, grad=False), S(r.f(*sh, dtype=F64), grad=False), S(r.i(*sh), grad=False)]


@samples(aten.log1p.default, prims.log1p.default)
def _(r, op):
    sh = r.shape(3)
    tiny = r.f(*sh, lo=-1e-6, hi=1e-6)  # where log(1 + x) alone would lose every digit
    return [S(r.f(*sh, lo=-0.9, hi=3.0)), S(r.f(*sh, dtype=F64, lo=-0.9, hi=3.0)), S(tiny),
            S(r.i(*sh, lo=0, hi=5), grad=False)] if op is aten.log1p.default else \
        [S(r.f(*sh, lo=-0.9, hi=3.0), grad=False), S(tiny, grad=False)]  # prims: no autograd


def _multinomial_check(num_samples, replacement):
    def check(out, args):
        probs = args[0]
        assert out.shape == probs.shape[:-1] + (num_samples,) and out.dtype == I64
        assert bool(((out >= 0) & (out < probs.shape[-1])).all())
        picked = torch.gather(probs, -1, out.cpu())
        assert bool((picked > 0).all())  # never an index of weight 0
        if not replacement:
            assert all(len(set(row)) == num_samples for row in out.reshape(-1, num_samples).tolist())
    return check


@samples(aten.multinomial.default)
def _(r, op):
    w = r.pos(4, 7)
    w[:, 2] = 0  # a zero weight is never drawn
    return [S(w, 3, check=_multinomial_check(3, False), grad=False),
            S(w, 5, True, check=_multinomial_check(5, True), grad=False),
            S(r.pos(9, dtype=F64), 2, check=_multinomial_check(2, False), grad=False)]


@samples(aten.any.dim)
def _(r, op):
    sh = r.shape(3)
    return [S(r.b(*sh), 1), S(r.sparse(*sh), -1, True), S(r.i(*sh, lo=0, hi=1), 0)]


@samples(aten.any.dims)
def _(r, op):
    sh = r.shape(3)
    return [S(r.b(*sh), [0, 2]), S(r.sparse(*sh), [-1], True), S(r.b(*sh), None)]


@samples(aten.any.default)
def _(r, op):
    sh = r.shape(2)
    return [S(r.b(*sh)), S(r.sparse(*sh)), S(torch.zeros(sh, dtype=BOOL)), S(r.i(*sh, lo=0, hi=1))]


@samples(aten.var.correction)
def _(r, op):
    sh = r.shape(3, lo=2)
    return [S(r.f(*sh), [1]), S(r.f(*sh), [0, 2], correction=0, keepdim=True),
            S(r.f(*sh), None, correction=2), S(r.f(*sh, dtype=F64), [-1], correction=1),
            S(r.f(*sh))]


@samples(aten.cumsum.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), 1), S(r.f(*sh), -1), S(r.f(*sh, dtype=F64), 0), S(r.i(*sh), 2),
            S(r.b(*sh), 1), S(r.f(*sh), 0, dtype=F64), S(r.f(), 0)]


@samples(aten._softmax.default, aten._log_softmax.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh) * 3, -1, False), S(r.f(*sh) * 3, 0, False),
            S(r.f(*sh, dtype=F64) * 3, 1, False), S(r.f(), 0, False)]
