"""Elementwise ops on cpu and lazy against NumPy: broadcasting, scalars, reflected and unary forms."""
import math
import operator

import numpy as np
import pytest

import lazytensor as lt
from conftest import assert_close

SHAPE_PAIRS = [
    ((3, 4), (3, 4)),
    ((3, 1), (4,)),
    ((2, 3, 4), (3, 1)),
    ((1,), (5,)),
    ((), (2, 3)),
    ((4, 1, 3), (1, 5, 1)),
]


def _operands(rng, op, sa, sb):
    if op in ("pow",):
        return rng.uniform(0.5, 2.0, sa), rng.uniform(-2.0, 2.0, sb)
    if op in ("div",):
        b = rng.uniform(0.5, 2.0, sb) * rng.choice([-1.0, 1.0], sb)
        return rng.standard_normal(sa), b
    if op in ("eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum"):
        # Small integers stored as floats: plenty of ties.
        return rng.integers(-2, 3, sa).astype(np.float64), rng.integers(-2, 3, sb).astype(np.float64)
    return rng.standard_normal(sa), rng.standard_normal(sb)


BINARY = {
    "add": (operator.add, np.add),
    "sub": (operator.sub, np.subtract),
    "mul": (operator.mul, np.multiply),
    "div": (operator.truediv, np.divide),
    "pow": (operator.pow, np.power),
    "maximum": (lt.maximum, np.maximum),
    "minimum": (lt.minimum, np.minimum),
    "eq": (operator.eq, np.equal),
    "ne": (operator.ne, np.not_equal),
    "lt": (operator.lt, np.less),
    "le": (operator.le, np.less_equal),
    "gt": (operator.gt, np.greater),
    "ge": (operator.ge, np.greater_equal),
}


@pytest.mark.parametrize("sa,sb", SHAPE_PAIRS, ids=lambda s: "x".join(map(str, s)) or "scalar")
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_broadcasting(device, rng, op, sa, sb):
    py_op, np_op = BINARY[op]
    a, b = _operands(rng, op, sa, sb)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ta, tb = lt.tensor(a32, device=device), lt.tensor(b32, device=device)
    want = np_op(a32.astype(np.float64), b32.astype(np.float64))
    out = py_op(ta, tb)
    expect_dtype = lt.bool if want.dtype == np.bool_ else lt.float32
    assert_close(out, want, dtype=expect_dtype, rtol=1e-5 if op == "pow" else None)
    if op != "pow":  # swapped operands broadcast the same way (pow: the base must stay positive)
        want_swapped = np_op(b32.astype(np.float64), a32.astype(np.float64))
        assert_close(py_op(tb, ta), want_swapped, dtype=expect_dtype)


@pytest.mark.parametrize("fn", ["add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"])
def test_function_forms_match_operators(device, rng, fn):
    a = rng.standard_normal((2, 3)).astype(np.float32).round(1)
    b = rng.standard_normal((3,)).astype(np.float32).round(1)
    ta, tb = lt.tensor(a, device=device), lt.tensor(b, device=device)
    np_fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "eq": np.equal,
             "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
             "ge": np.greater_equal}[fn]
    want = np_fn(a.astype(np.float64), b.astype(np.float64))
    assert_close(getattr(lt, fn)(ta, tb), want)
    assert_close(getattr(ta, fn)(tb), want)


def test_add_sub_alpha(device, rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3,))
    ta, tb = lt.tensor(a, device=device), lt.tensor(b, device=device)
    assert_close(lt.add(ta, tb, alpha=2.5), a + 2.5 * b)
    assert_close(ta.sub(tb, alpha=-3), a + 3 * b)


@pytest.mark.parametrize("scalar", [2, -3, 2.5, 0.1, True])
def test_tensor_scalar_and_reflected(device, rng, scalar):
    a = rng.uniform(0.5, 2.0, (3, 5)).astype(np.float32)
    t = lt.tensor(a, device=device)
    a64, s = a.astype(np.float64), float(scalar)
    assert_close(t + scalar, a64 + s, dtype=lt.float32)
    assert_close(scalar + t, s + a64, dtype=lt.float32)
    if isinstance(scalar, bool):  # PyTorch has no subtraction with a bool operand
        with pytest.raises(RuntimeError):
            t - scalar
        with pytest.raises(RuntimeError):
            scalar - t
    else:
        assert_close(t - scalar, a64 - s, dtype=lt.float32)
        assert_close(scalar - t, s - a64, dtype=lt.float32)
    assert_close(t * scalar, a64 * s, dtype=lt.float32)
    assert_close(scalar * t, s * a64, dtype=lt.float32)
    assert_close(t / scalar, a64 / s, dtype=lt.float32)
    assert_close(scalar / t, s / a64, dtype=lt.float32)
    assert_close(t ** scalar, a64 ** s, dtype=lt.float32)
    if s > 0:
        assert_close(scalar ** t, s ** a64, dtype=lt.float32)
    assert_close(t > scalar, a64 > np.float32(s), dtype=lt.bool)
    assert_close(t == scalar, a64 == np.float32(s), dtype=lt.bool)
    assert_close(scalar < t, np.float32(s) < a64, dtype=lt.bool)  # reflected comparison


def test_numpy_scalars_are_numbers(device, rng):
    a = rng.standard_normal((4,)).astype(np.float32)
    t = lt.tensor(a, device=device)
    assert_close(t * np.float32(2.5), a.astype(np.float64) * 2.5, dtype=lt.float32)
    assert_close(t + np.int64(3), a.astype(np.float64) + 3, dtype=lt.float32)
    assert_close(t * np.float64(2.0), a.astype(np.float64) * 2, dtype=lt.float32)
    assert_close(t > np.bool_(False), a > 0, dtype=lt.bool)


def _np_erf(x):
    return np.vectorize(math.erf)(x)


UNARY = {
    "exp": (np.exp, lambda r: r.standard_normal((4, 5))),
    "log": (np.log, lambda r: r.uniform(0.1, 5.0, (4, 5))),
    "sqrt": (np.sqrt, lambda r: r.uniform(0.0, 5.0, (4, 5))),
    "rsqrt": (lambda x: 1 / np.sqrt(x), lambda r: r.uniform(0.1, 5.0, (4, 5))),
    "sin": (np.sin, lambda r: r.uniform(-6, 6, (4, 5))),
    "cos": (np.cos, lambda r: r.uniform(-6, 6, (4, 5))),
    "tanh": (np.tanh, lambda r: r.uniform(-4, 4, (4, 5))),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), lambda r: r.uniform(-8, 8, (4, 5))),
    "relu": (lambda x: np.maximum(x, 0), lambda r: r.standard_normal((4, 5))),
    "abs": (np.abs, lambda r: r.standard_normal((4, 5))),
    "neg": (np.negative, lambda r: r.standard_normal((4, 5))),
    "erf": (_np_erf, lambda r: r.uniform(-3, 3, (4, 5))),
    "floor": (np.floor, lambda r: r.uniform(-5, 5, (4, 5))),
    "reciprocal": (np.reciprocal, lambda r: r.uniform(0.5, 3, (4, 5)) * r.choice([-1, 1], (4, 5))),
    "square": (np.square, lambda r: r.standard_normal((4, 5))),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(device, rng, name):
    np_fn, gen = UNARY[name]
    x = gen(rng).astype(np.float32)
    t = lt.tensor(x, device=device)
    want = np_fn(x.astype(np.float64))
    assert_close(getattr(t, name)(), want, dtype=lt.float32)
    assert_close(getattr(lt, name)(t), want, dtype=lt.float32)


def test_unary_float64_precision(device, rng):
    x = rng.uniform(0.1, 3.0, (6,))
    t = lt.tensor(x, device=device)
    assert t.dtype == lt.float64
    assert_close(t.log().exp().sqrt(), np.sqrt(x), dtype=lt.float64, rtol=1e-12)


def test_unary_operators(device, rng):
    x = rng.standard_normal((3, 3)).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert_close(-t, -x.astype(np.float64))
    assert_close(abs(t), np.abs(x.astype(np.float64)))
    assert_close(+t, x)


def test_int_inputs_of_float_functions_compute_in_float32(device):
    t = lt.tensor([1, 2, 3], device=device)
    assert_close(t.exp(), np.exp([1.0, 2.0, 3.0]), dtype=lt.float32)
    assert_close(t.sqrt(), np.sqrt([1.0, 2.0, 3.0]), dtype=lt.float32)
    assert_close(-t, [-1, -2, -3], dtype=lt.int64)
    assert_close(abs(lt.tensor([-4, 5], dtype=lt.int32, device=device)), [4, 5], dtype=lt.int32)


def test_clamp(device, rng):
    x = rng.standard_normal((5, 4)).astype(np.float32)
    t = lt.tensor(x, device=device)
    x64 = x.astype(np.float64)
    assert_close(t.clamp(-0.5, 0.5), np.clip(x64, -0.5, 0.5))
    assert_close(t.clamp(min=0.1), np.maximum(x64, 0.1))
    assert_close(t.clamp(max=-0.1), np.minimum(x64, -0.1))
    assert_close(lt.clamp(t, -1, 1), np.clip(x64, -1, 1))
    lo = rng.standard_normal((4,)).astype(np.float32) - 1
    assert_close(t.clamp(min=lt.tensor(lo, device=device)), np.maximum(x64, lo))
    with pytest.raises(RuntimeError):
        t.clamp()


def test_pow_tensor_exponent(device, rng):
    base = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    exp = rng.uniform(-2, 2, (4,)).astype(np.float32)
    tb, te = lt.tensor(base, device=device), lt.tensor(exp, device=device)
    want = base.astype(np.float64) ** exp.astype(np.float64)
    assert_close(tb ** te, want, rtol=1e-5)
    assert_close(tb.pow(te), want, rtol=1e-5)
    assert_close(lt.pow(tb, 2), base.astype(np.float64) ** 2)


def test_where_tensors(device, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    c = rng.standard_normal((3, 1))
    ta, tb, tc = (lt.tensor(v, device=device) for v in (a, b, c))
    cond = ta > tb
    want_cond = a > b
    assert_close(cond, want_cond, dtype=lt.bool)
    assert_close(lt.where(cond, ta, tb), np.where(want_cond, a, b), dtype=lt.float32)
    assert_close(ta.where(cond, tb), np.where(want_cond, a, b))
    assert_close(lt.where(tb > 0, tc, ta), np.where(b > 0, c, a), dtype=lt.float64)  # promotes
    ti = lt.tensor(rng.integers(-5, 5, (3, 4)), device=device)
    assert lt.where(cond, ti, ta).dtype == lt.float32  # int64 with float32
    assert_close(lt.where(cond, ti, ti * 2), np.where(want_cond, ti.numpy(), ti.numpy() * 2),
                 dtype=lt.int64)


def test_where_with_numbers(device, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    ta, tb = lt.tensor(a, device=device), lt.tensor(b, device=device)
    cond = ta > tb
    want_cond = a > b
    assert_close(lt.where(cond, ta, 0.0), np.where(want_cond, a, 0.0), dtype=lt.float32)
    assert_close(lt.where(cond, -1.5, tb), np.where(want_cond, -1.5, b), dtype=lt.float32)
    both = lt.where(cond, 1, 0)
    assert_close(both, want_cond.astype(np.int64), dtype=lt.int64)
    assert_close(lt.where(cond, 1.0, 0.0), want_cond.astype(np.float64), dtype=lt.float32)
    ti = lt.tensor(rng.integers(-5, 5, (3, 4)), device=device)
    assert lt.where(cond, ti, 2.5).dtype == lt.float32  # int64 with a float number
    assert lt.where(cond, ti, 2).dtype == lt.int64


def test_logical_ops(device, rng):
    a = rng.random((3, 4)) > 0.5
    b = rng.random((4,)) > 0.5
    ta, tb = lt.tensor(a, device=device), lt.tensor(b, device=device)
    assert_close(ta & tb, a & b, dtype=lt.bool)
    assert_close(ta | tb, a | b, dtype=lt.bool)
    assert_close(ta ^ tb, a ^ b, dtype=lt.bool)
    assert_close(~ta, ~a, dtype=lt.bool)
    assert_close(lt.logical_and(ta, tb), a & b)
    assert_close(lt.logical_or(ta, tb), a | b)
    assert_close(lt.logical_not(ta), ~a)
    assert_close(ta & True, a)
    x = lt.tensor(rng.standard_normal((3, 4)), device=device)
    assert_close((x > 0) & (x < 1), (x.numpy() > 0) & (x.numpy() < 1))
    # Integer operands are bitwise, as in PyTorch (tests/python/test_int_ops.py); floats have none.
    assert_close(lt.tensor([1, 6], device=device) & lt.tensor([3, 4], device=device), np.array([1, 4]),
                 dtype=lt.int64)
    with pytest.raises(NotImplementedError):
        x & x


def test_masked_fill_keeps_dtype(device, rng):
    x = rng.integers(-5, 5, (3, 4))
    t = lt.tensor(x, device=device)
    mask = t > 0
    out = t.masked_fill(mask, 2.7)
    assert out.dtype == lt.int64
    assert_close(out, np.where(x > 0, 2, x))
    f = lt.tensor(x.astype(np.float32), device=device)
    assert_close(lt.masked_fill(f, mask, -1.5), np.where(x > 0, -1.5, x))


def test_eq_with_non_numbers_is_false(device):
    t = lt.tensor([1.0], device=device)
    assert (t == None) is False  # noqa: E711
    assert (t != "a") is True
    assert len({t, t}) == 1  # tensors hash by identity
