"""Samples of the aten table's creation and random ops (test_torch_aten_table.py runs them)."""
import pytest
import torch

from aten_samples import BOOL, F32, F64, I64, S, samples

aten = torch.ops.aten


# ---- creation and random ------------------------------------------------------------------------

def _created(op, kwargs):
    """A graph with an input around a creation op: the created tensor added to the input (its
    values then count), or beside it for dtypes that do not add (bool)."""
    def fn(x, *args):
        made = op(*args, **kwargs)
        return (x | made) if made.dtype == BOOL else x + made
    return fn


def _creation(op, x, *args, check="close", **kwargs):
    return S(x, *args, fn=_created(op, kwargs), grad=False, check=check)


@samples(aten.full.default)
def _(r, op):
    sh = r.shape(3)
    return [_creation(op, r.f(*sh), sh, r.f().item()), _creation(op, r.i(*sh), sh, 3),
            _creation(op, r.b(*sh), sh, True), _creation(op, r.f(*sh, dtype=F64), sh, 2.5, dtype=F64),
            _creation(op, r.f(*sh), [], -1.0, dtype=F32, device="cpu", pin_memory=False),
            _creation(op, r.i(*sh), sh[1:], 2, dtype=I64)]


@samples(aten.scalar_tensor.default)
def _(r, op):
    sh = r.shape(2)
    return [_creation(op, r.f(*sh), r.f().item()), _creation(op, r.i(*sh), 4, dtype=I64),
            _creation(op, r.f(*sh, dtype=F64), 3, dtype=F64), _creation(op, r.b(*sh), False, dtype=BOOL)]


@samples(aten.zeros.default, aten.ones.default)
def _(r, op):
    sh = r.shape(3)
    return [_creation(op, r.f(*sh), sh), _creation(op, r.i(*sh), sh[1:], dtype=I64),
            _creation(op, r.f(*sh, dtype=F64), [1], dtype=F64), _creation(op, r.f(*sh), [])]


@samples(aten.empty.memory_format)
def _(r, op):
    sh = r.shape(3)
    return [_creation(op, r.f(*sh), sh, check="meta"),
            _creation(op, r.i(*sh), sh, dtype=I64, check="meta"),
            _creation(op, r.f(*sh), sh, dtype=F32, memory_format=torch.contiguous_format,
                      check="meta")]


@samples(aten.empty_strided.default)
def _(r, op):
    sh = r.shape(2)
    return [_creation(op, r.f(*sh), sh, [sh[1], 1], check="meta"),
            _creation(op, r.f(*sh, dtype=F64), sh, [sh[1], 1], dtype=F64, check="meta")]


@samples(aten.full_like.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.f().item()), S(r.i(*sh), 5), S(r.f(*sh), 2, dtype=I64),
            S(r.b(*sh), True), S(r.f(dtype=F64), -0.5)]


@samples(aten.zeros_like.default, aten.ones_like.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh)), S(r.i(*sh)), S(r.f(*sh), dtype=I64), S(r.b(*sh)), S(r.f(dtype=F64))]


@samples(aten.empty_like.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), check="meta"), S(r.f(*sh), dtype=I64, check="meta"),
            S(r.b(*sh), check="meta")]


@samples(aten.arange.start_step)
def _(r, op):
    n = r.int(2, 6)
    return [_creation(op, r.i(n), 1, 1 + 2 * n, 2), _creation(op, r.f(n), 0.5, 0.5 + 0.3 * n, 0.3),
            _creation(op, r.f(n), 3, 3 - n, -1, dtype=F32),
            _creation(op, r.f(n, dtype=F64), -1.0, -1.0 + 0.25 * n, 0.25, dtype=F64)]


@samples(aten.arange.start)
def _(r, op):
    n = r.int(1, 6)
    return [_creation(op, r.i(n), -2, n - 2), _creation(op, r.f(n), 1.5, 1.5 + n),
            _creation(op, r.f(n), 0, n, dtype=F32)]


@samples(aten.arange.default)
def _(r, op):
    n = r.int(1, 6)
    return [_creation(op, r.i(n), n), _creation(op, r.f(n), n, dtype=F32),
            _creation(op, r.f(3, n, dtype=F64), float(n), dtype=F64)]


def _uniform(out, args):
    x = args[0]
    assert out.shape == x.shape and out.dtype == (x.dtype if x.is_floating_point() else F32)
    assert float(out.min()) >= 0 and float(out.max()) < 1
    assert abs(float(out.double().mean()) - 0.5) < 0.02 and abs(float(out.double().var()) - 1 / 12) < 0.01


def _normal(out, args):
    x = args[0]
    assert out.shape == x.shape and out.dtype == x.dtype
    assert abs(float(out.double().mean())) < 0.05 and abs(float(out.double().std()) - 1) < 0.05
    assert float((out.abs() < 1).double().mean()) == pytest.approx(0.6827, abs=0.02)


@samples(aten.rand_like.default)
def _(r, op):
    return [S(r.f(100, 100), check=_uniform), S(r.f(50, 200, dtype=F64), check=_uniform)]


@samples(aten.randn_like.default)
def _(r, op):
    return [S(r.f(100, 100), check=_normal), S(r.f(10000, dtype=F64), check=_normal)]


def _dropout_check(p):
    def check(out, args):
        y, mask = out
        x = args[0]
        assert y.shape == x.shape and y.dtype == x.dtype and mask.dtype == BOOL
        torch.testing.assert_close(y, torch.where(mask, x / (1 - p), torch.zeros_like(x)),
                                   rtol=1e-6, atol=0)
        assert float(mask.double().mean()) == pytest.approx(1 - p, abs=0.02)
    return check


@samples(aten.native_dropout.default)
def _(r, op):
    # train=False and p=0 are deterministic: compared with torch.
    return [S(r.f(100, 100), 0.3, True, check=_dropout_check(0.3), grad=False),
            S(r.f(40, 250, dtype=F64), 0.6, True, check=_dropout_check(0.6), grad=False),
            S(r.f(*r.shape(3)), 0.5, False), S(r.f(*r.shape(2)), 0.0, True)]


@samples(aten.native_dropout_backward.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.b(*sh), 1 / 0.7, grad=False), S(r.f(*sh, dtype=F64), r.b(*sh), 2.0),
            S(r.f(*sh), r.b(*sh), 1.0)]
