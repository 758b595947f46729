"""Integer and bool semantics against PyTorch 2.13 (CPU) on "cpu" and "lazy": floor_divide (//),
remainder (%), fmod, bitwise and/or/xor/not (&, |, ^, ~) and the shifts (<<, >>), with tensors or
Python numbers on either side, in-place forms, broadcasting, every integer dtype, values AND dtypes.

Where PyTorch raises (integer division by zero: ZeroDivisionError), lazytensor gives a defined
value instead, 0, as NumPy does: a compiled kernel cannot raise (ir/ops.def); that is checked here
against the documented value."""
import operator

import numpy as np
import pytest

import lazytensor as lt
from conftest import torch_or_skip

torch = torch_or_skip()

INT_DTYPES = ["int64", "int32", "int8", "uint8"]
BITS = {"int64": 64, "int32": 32, "int8": 8, "uint8": 8}

DIVISION = {  # name: (lazytensor function, torch function, operator or None)
    "floor_divide": (lt.floor_divide, torch.floor_divide, operator.floordiv),
    "remainder": (lt.remainder, torch.remainder, operator.mod),
    "fmod": (lt.fmod, torch.fmod, None),
}
BITWISE = {
    "bitwise_and": (lt.bitwise_and, torch.bitwise_and, operator.and_),
    "bitwise_or": (lt.bitwise_or, torch.bitwise_or, operator.or_),
    "bitwise_xor": (lt.bitwise_xor, torch.bitwise_xor, operator.xor),
}
SHIFTS = {
    "bitwise_left_shift": (lt.bitwise_left_shift, torch.bitwise_left_shift, operator.lshift),
    "bitwise_right_shift": (lt.bitwise_right_shift, torch.bitwise_right_shift, operator.rshift),
}
ALL = {**DIVISION, **BITWISE, **SHIFTS}


def _ints(rng, dtype, shape, nonzero=False):
    """Random integers over the dtype's whole range, with its edges and small values mixed in."""
    info = np.iinfo(dtype)
    whole = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    small = rng.integers(max(info.min, -20), 21, shape).astype(dtype)
    edges = rng.choice(np.array([info.min, info.max, 0, 1, info.max - 1], dtype=dtype), shape)
    pick = rng.integers(0, 3, shape)
    x = np.where(pick == 0, whole, np.where(pick == 1, small, edges)).astype(dtype)
    if nonzero:
        x[x == 0] = 3
    return x


def _counts(rng, dtype, shape):
    """Shift counts: in range mostly, and out of it (negative, the width, beyond) now and then."""
    bits = BITS[dtype]
    info = np.iinfo(dtype)
    c = rng.integers(0, bits, shape)
    odd = rng.choice([-1, -bits, bits, bits + 3, min(127, info.max)], shape)
    c = np.where(rng.random(shape) < 0.2, odd, c)
    return np.clip(c, info.min, info.max).astype(dtype)


def _check(got, want):
    """Same dtype, shape and values (NaNs where torch has NaNs; -0.0 and 0.0 alike)."""
    assert isinstance(got, lt.Tensor), type(got)
    want_dtype = str(want.dtype)[6:]
    assert got.dtype.name == want_dtype, f"dtype {got.dtype.name}, torch gives {want_dtype}"
    g, w = got.numpy(), want.numpy()
    assert g.shape == w.shape
    if w.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(g[~np.isnan(w)], w[~np.isnan(w)], rtol=1e-6, atol=0)
    else:
        np.testing.assert_array_equal(g, w)


def _pair(device, a, b):
    return lt.tensor(a, device=device), lt.tensor(b, device=device), torch.tensor(a), torch.tensor(b)


# ---- tensor op tensor, every integer dtype -------------------------------------------------------

@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", list(ALL))
def test_tensor_tensor_matches_torch(device, name, dtype):
    rng = np.random.default_rng(sorted(ALL).index(name) * 10 + INT_DTYPES.index(dtype))
    a = _ints(rng, dtype, (6, 50))
    b = _counts(rng, dtype, (6, 50)) if name in SHIFTS else _ints(rng, dtype, (6, 50), nonzero=name in DIVISION)
    la, lb, ta, tb = _pair(device, a, b)
    fn, tfn, op = ALL[name]
    _check(fn(la, lb), tfn(ta, tb))
    _check(getattr(la, name)(lb), tfn(ta, tb))
    if op is not None:
        _check(op(la, lb), op(ta, tb))


@pytest.mark.parametrize("name", list(BITWISE))
def test_bitwise_ops_on_bool_are_logical(device, name):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    la, lb, ta, tb = _pair(device, a, b)
    fn, tfn, op = BITWISE[name]
    _check(fn(la, lb), tfn(ta, tb))
    _check(op(la, lb), op(ta, tb))
    _check(op(la, True), op(ta, True))
    _check(op(False, lb), op(False, tb))


@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
def test_invert_matches_torch(device, dtype):
    rng = np.random.default_rng(5)
    a = rng.random(20) > 0.5 if dtype == "bool" else _ints(rng, dtype, (20,))
    la, ta = lt.tensor(a, device=device), torch.tensor(a)
    _check(~la, ~ta)
    _check(lt.bitwise_not(la), torch.bitwise_not(ta))
    _check(la.bitwise_not(), ta.bitwise_not())


@pytest.mark.parametrize("a_dtype", INT_DTYPES + ["bool"])
@pytest.mark.parametrize("b_dtype", INT_DTYPES + ["bool"])
def test_mixed_integer_dtypes_promote_as_torch(device, a_dtype, b_dtype):
    if {a_dtype, b_dtype} == {"uint8", "int8"}:
        pytest.skip("torch promotes uint8 with int8 to int16, which lazytensor lacks")
    rng = np.random.default_rng(INT_DTYPES.index(a_dtype) if a_dtype != "bool" else 9)

    def sample(dtype, nonzero):
        if dtype == "bool":
            return np.ones(8, bool) if nonzero else rng.random(8) > 0.5
        return rng.integers(1 if nonzero else 0, 8, 8).astype(dtype)

    for name, (fn, tfn, _) in ALL.items():
        a, b = sample(a_dtype, False), sample(b_dtype, name in DIVISION)
        la, lb, ta, tb = _pair(device, a, b)
        try:
            want = tfn(ta, tb)
        except (RuntimeError, TypeError) as e:  # bool for //, %, <<, ...: the same error type here
            with pytest.raises(type(e)):
                fn(la, lb)
            continue
        _check(fn(la, lb), want)


# ---- floats ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(DIVISION))
def test_float_division_family_matches_torch(device, name, dtype):
    rng = np.random.default_rng(len(name) + len(dtype))
    a = (rng.uniform(-50, 50, (8, 40)) * rng.choice([1, 1e-3, 1e3], (8, 40))).astype(dtype)
    b = rng.uniform(-6, 6, (40,)).astype(dtype)
    b[:4] = [0.1, -0.1, 0.0, 2.5]
    a[0, :8] = [1.0, -1.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 7.5]
    la, lb, ta, tb = _pair(device, a, b)
    fn, tfn, op = DIVISION[name]
    _check(fn(la, lb), tfn(ta, tb))
    if op is not None:
        _check(op(la, lb), op(ta, tb))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_floor_divide_and_remainder(device, dtype):
    a = np.array([1.0, -7.5, 7.5, 100.0, -3.25], np.float32)
    b = np.array([0.3, 2.0, -2.0, 7.0, 0.5], np.float32)
    tdt = getattr(torch, dtype)
    la = lt.tensor(a, device=device).to(getattr(lt, dtype))
    lb = lt.tensor(b, device=device).to(getattr(lt, dtype))
    ta, tb = torch.tensor(a).to(tdt), torch.tensor(b).to(tdt)
    for got, want in ((la // lb, ta // tb), (la % lb, ta % tb), (lt.fmod(la, lb), torch.fmod(ta, tb))):
        assert got.dtype.name == dtype
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2)


# ---- numbers on either side -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int8", "float32"])
def test_python_numbers_on_either_side(device, dtype):
    rng = np.random.default_rng(17)
    if dtype == "float32":
        a = rng.uniform(-20, 20, 30).astype(dtype)
    else:
        a = _ints(rng, dtype, (30,), nonzero=True)
        a = np.clip(a, -100, 100).astype(dtype)
        a[a == 0] = 3
    la, ta = lt.tensor(a, device=device), torch.tensor(a)
    numbers = [3, -4, 2.5, -0.75] if dtype == "float32" else [3, -4, 2.5, True, 7]
    for s in numbers:
        for op in (operator.floordiv, operator.mod):
            _check(op(la, s), op(ta, s))
            _check(op(s, la), op(s, ta))
        _check(lt.fmod(la, s), torch.fmod(ta, s))
        _check(lt.remainder(s, la), torch.remainder(s, ta))
        _check(lt.floor_divide(s, la), torch.floor_divide(s, ta))
        if dtype == "float32" or isinstance(s, float):
            continue
        for op in (operator.and_, operator.or_, operator.xor):
            _check(op(la, s), op(ta, s))
            _check(op(s, la), op(s, ta))
        counts = lt.tensor(np.array([0, 1, 2, 5], dtype), device=device)
        tcounts = torch.tensor(np.array([0, 1, 2, 5], dtype))
        _check(la << 2, ta << 2)
        _check(la >> 1, ta >> 1)
        _check(s << counts, s << tcounts)
        _check(s >> counts, s >> tcounts)
        _check(lt.bitwise_left_shift(s, counts), torch.bitwise_left_shift(s, tcounts))


def test_zero_dim_tensor_operands_follow_wrapped_number_rules(device):
    a = np.array([7, -7, 9], np.int32)
    for other in (np.array(2, np.int64), np.array(-2.5, np.float64)):
        la, lo, ta, to = _pair(device, a, other)
        _check(la // lo, ta // to)
        _check(la % lo, ta % to)
        if other.dtype.kind == "i":
            _check(la & lo, ta & to)
            _check(la << lo, ta << to)


# ---- broadcasting and in-place --------------------------------------------------------------------

@pytest.mark.parametrize("name", list(ALL))
def test_broadcasting(device, name):
    rng = np.random.default_rng(3)
    a = _ints(rng, "int32", (4, 1, 5), nonzero=True)
    b = _counts(rng, "int32", (3, 1)) if name in SHIFTS else _ints(rng, "int32", (3, 1), nonzero=True)
    la, lb, ta, tb = _pair(device, a, b)
    fn, tfn, _ = ALL[name]
    _check(fn(la, lb), tfn(ta, tb))
    _check(fn(lb, la), tfn(tb, ta))  # [3, 1] op [4, 1, 5]


INPLACE = [
    ("__ifloordiv__", "floor_divide_", operator.floordiv),
    ("__imod__", "remainder_", operator.mod),
    ("__iand__", "bitwise_and_", operator.and_),
    ("__ior__", "bitwise_or_", operator.or_),
    ("__ixor__", "bitwise_xor_", operator.xor),
    ("__ilshift__", "bitwise_left_shift_", operator.lshift),
    ("__irshift__", "bitwise_right_shift_", operator.rshift),
]


@pytest.mark.parametrize("dunder,method,op", INPLACE)
def test_inplace_forms_rebind_every_reference(device, dunder, method, op):
    a = np.array([[-9, 14, 5], [7, -3, 100]], np.int64)
    b = np.array([2, 3, 1], np.int64)
    for other in (b, 3):
        x = lt.tensor(a, device=device)
        alias = x
        y = x[0]  # a view sees the write too
        other_l = lt.tensor(other, device=device) if isinstance(other, np.ndarray) else other
        other_t = torch.tensor(other) if isinstance(other, np.ndarray) else other
        want = op(torch.tensor(a), other_t)
        r = getattr(x, dunder)(other_l)
        assert r is x
        _check(alias, want)
        _check(y, want[0])
        x2 = lt.tensor(a, device=device)
        assert getattr(x2, method)(other_l) is x2
        _check(x2, want)
    # The statement forms.
    x = lt.tensor(a, device=device)
    t = torch.tensor(a)
    x //= 4
    t //= 4
    x %= 3
    t %= 3
    x <<= 2
    t <<= 2
    x |= 1
    t |= 1
    x ^= 6
    t ^= 6
    x &= 13
    t &= 13
    x >>= 1
    t >>= 1
    _check(x, t)


def test_inplace_keeps_the_dtype_or_raises_as_torch(device):
    x = lt.tensor(np.array([7, -7], np.int64), device=device)
    with pytest.raises(RuntimeError):
        x //= 2.5  # a float result cannot be written into an int64 tensor (torch raises too)
    f = lt.tensor(np.array([7.5, -7.5], np.float32), device=device)
    f //= 2
    f %= 1.5
    t = torch.tensor([7.5, -7.5])
    t //= 2
    t %= 1.5
    _check(f, t)
    i8 = lt.tensor(np.array([100, -100], np.int8), device=device)
    i8 <<= 1  # wraps in the tensor's dtype
    _check(i8, torch.tensor(np.array([100, -100], np.int8)) << 1)


# ---- edge cases: zero divisors, INT_MIN // -1, errors -----------------------------------------------

@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_division_by_zero_gives_zero(device, dtype):
    """PyTorch raises ZeroDivisionError here; lazytensor's documented value is 0 (NumPy's)."""
    a = lt.tensor(np.array([5, 0, 1, 100], dtype), device=device)
    z = lt.tensor(np.zeros(4, dtype), device=device)
    for got in (a // z, a % z, lt.fmod(a, z), a // 0, a % 0, lt.fmod(a, 0), 7 // z, 7 % z):
        assert got.dtype.name == dtype
        np.testing.assert_array_equal(got.numpy(), np.zeros(4, dtype))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.tensor([5]) // torch.tensor([0])  # what PyTorch does instead


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8"])
def test_int_min_by_minus_one_wraps_as_torch(device, dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min, info.max, -1], dtype)
    b = np.array([-1, 1, -1, -1], dtype)
    la, lb, ta, tb = _pair(device, a, b)
    _check(la // lb, ta // tb)
    _check(la % lb, ta % tb)
    _check(lt.fmod(la, lb), torch.fmod(ta, tb))
    _check(la // -1, ta // -1)


def test_float_operands_of_bitwise_ops_raise_as_torch(device):
    x, tx = lt.tensor([1.5, 2.0], device=device), torch.tensor([1.5, 2.0])
    for f in (lambda t: t & 1, lambda t: 1 | t, lambda t: t ^ t, lambda t: t.bitwise_not(),
              lambda t: t << 1, lambda t: t >> 1, lambda t: t.bitwise_and(t)):
        with pytest.raises(NotImplementedError):
            f(tx)
        with pytest.raises(NotImplementedError) as e:
            f(x)
        assert "bitwise" in str(e.value) and "float" in str(e.value), str(e.value)
    with pytest.raises(TypeError):
        ~tx  # PyTorch's operator checks the dtype first, with a TypeError
    with pytest.raises(TypeError, match="invert"):
        ~x
    i = lt.tensor([1, 2], device=device)
    with pytest.raises(NotImplementedError, match="bitwise_and"):
        i & 1.5  # an int tensor and a float number promote to float32


def test_bool_operands_of_division_and_shifts_raise_as_torch(device):
    b = lt.tensor([True, False], device=device)
    tb = torch.tensor([True, False])
    for op in (operator.floordiv, operator.mod, operator.lshift, operator.rshift):
        with pytest.raises(NotImplementedError):
            op(tb, tb)
        with pytest.raises(NotImplementedError, match="bool"):
            op(b, b)


def test_non_tensor_operands_are_type_errors(device):
    x = lt.tensor([1, 2], device=device)
    for f in (lambda: x // "a", lambda: x % [1], lambda: x & "a", lambda: "a" << x, lambda: x.fmod(None)):
        with pytest.raises(TypeError):
            f()


# ---- div's rounding modes and gradients -------------------------------------------------------------

@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_rounding_modes_match_torch(device, mode):
    rng = np.random.default_rng(8)
    ai = rng.integers(-50, 50, 24)
    bi = rng.integers(1, 9, 24) * rng.choice([-1, 1], 24)
    af = rng.uniform(-9, 9, 24).astype(np.float32)
    for a, b in ((ai, bi), (af, bi.astype(np.float32)), (ai, af)):
        la, lb, ta, tb = _pair(device, a, b)
        _check(la.div(lb, rounding_mode=mode), ta.div(tb, rounding_mode=mode))
        _check(lt.div(la, 3, rounding_mode=mode), torch.div(ta, 3, rounding_mode=mode))
    with pytest.raises(ValueError):
        lt.tensor([1.0], device=device).div(2, rounding_mode="round")


@pytest.mark.parametrize("name", ["remainder", "fmod"])
def test_gradients_match_torch(device, name):
    rng = np.random.default_rng(4)
    a = rng.uniform(-10, 10, (3, 5))
    b = rng.uniform(0.5, 4, (5,)) * rng.choice([-1, 1], 5)
    la = lt.tensor(a, device=device, requires_grad=True)
    lb = lt.tensor(b, device=device, requires_grad=True)
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    fn, tfn, _ = DIVISION[name]
    (fn(la, lb) * lt.tensor(np.arange(15.0).reshape(3, 5), device=device)).sum().backward()
    (tfn(ta, tb) * torch.arange(15.0, dtype=torch.float64).reshape(3, 5)).sum().backward()
    np.testing.assert_allclose(la.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(lb.grad.numpy(), tb.grad.numpy())


def test_floor_divide_gradient_is_zero(device):
    """A step function: zero almost everywhere (PyTorch raises on its backward instead)."""
    a = lt.tensor([5.5, -3.2], device=device, requires_grad=True)
    (a // 2.0).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0])


def test_lazy_chain_is_one_kernel():
    """The new ops fuse like the other elementwise ops: one graph, one kernel."""
    x = lt.tensor(np.arange(-20, 20, dtype=np.int64), device="lazy")
    y = ((x // 3) % 5 << 2 | (x & 7)) ^ ~x >> 1
    lt.mark_step()
    want = ((torch.arange(-20, 20) // 3) % 5 << 2 | (torch.arange(-20, 20) & 7)) ^ ~torch.arange(-20, 20) >> 1
    _check(y, want)
    assert lt.metrics.last_graph()["kernels"] == 1
