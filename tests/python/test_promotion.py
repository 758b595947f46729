"""Type promotion and casts, with PyTorch as the oracle for result dtypes and NumPy for values."""
import numpy as np
import pytest

import lazytensor as lt
from conftest import assert_close, torch_or_skip

DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"]
# PyTorch promotes uint8 with int8 to int16, which lazytensor lacks: int32 there (ir/dtype.cc).
NO_INT16 = {("uint8", "int8"), ("int8", "uint8")}


def _sample(rng, name, shape):
    if name == "bool":
        return rng.random(shape) > 0.5
    if name == "uint8":
        return rng.integers(0, 10, shape).astype(np.uint8)
    if name.startswith("int"):
        return rng.integers(-10, 10, shape).astype(name)
    return rng.uniform(-3, 3, shape).astype(name)


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_promote_types_matches_torch(a, b):
    torch = torch_or_skip()
    want = "int32" if (a, b) in NO_INT16 else str(torch.promote_types(getattr(torch, a), getattr(torch, b)))[6:]
    assert lt.promote_types(getattr(lt, a), getattr(lt, b)).name == want


@pytest.mark.parametrize("a", DTYPES)
def test_tensor_tensor_result_dtypes_match_torch(rng, a):
    """add/mul/div between every dtype pair (traced on lazy: dtypes are known without running)."""
    torch = torch_or_skip()
    for b in DTYPES:
        if (a, b) in NO_INT16:
            continue
        x, y = _sample(rng, a, (3,)), _sample(rng, b, (3,))
        tx, ty = lt.tensor(x, device="lazy"), lt.tensor(y, device="lazy")
        px, py = torch.tensor(x), torch.tensor(y)
        for op in ("__mul__", "__truediv__", "__gt__", "__add__"):
            if op in ("__add__", "__mul__") and a == b == "bool":
                continue  # torch's bool + bool / bool * bool are logical or / and: no bool arithmetic here
            got = getattr(tx, op)(ty).dtype.name
            want = str(getattr(px, op)(py).dtype)[6:]
            assert got == want, f"{a} {op} {b}: {got}, torch gives {want}"


@pytest.mark.parametrize("a", DTYPES)
def test_tensor_scalar_result_dtypes_match_torch(a):
    torch = torch_or_skip()
    x = np.ones(3, dtype=a)
    for s in (True, 2, 2.5):
        for op in ("__mul__", "__add__", "__truediv__", "__rsub__", "__lt__"):
            if op == "__rsub__" and (a == "bool" or s is True):
                continue  # torch refuses subtraction involving bools
            if a == "bool" and s is True and op in ("__mul__", "__add__"):
                continue  # torch's logical and/or; lazytensor has no bool arithmetic
            got = getattr(lt.tensor(x, device="lazy"), op)(s).dtype.name
            want = str(getattr(torch.tensor(x), op)(s).dtype)[6:]
            assert got == want, f"{a} {op} {s!r}: {got}, torch gives {want}"


def test_zero_dim_operands_follow_torch():
    torch = torch_or_skip()
    cases = [
        (np.array([1.0, 2.0], np.float32), np.array(3.0, np.float64)),
        (np.array([1, 2], np.int64), np.array(1.5, np.float64)),
        (np.array([1, 2], np.int32), np.array(7, np.int64)),
        (np.array([1.5, 2.0], np.float16), np.array(2.0, np.float32)),
        (np.array([True, False]), np.array(3, np.int32)),
    ]
    for x, y in cases:
        got = (lt.tensor(x, device="lazy") * lt.tensor(y, device="lazy")).dtype.name
        want = str((torch.tensor(x) * torch.tensor(y)).dtype)[6:]
        assert got == want, f"{x.dtype}[2] * {y.dtype}[]: {got}, torch gives {want}"


def test_promotion_values(device, rng):
    i64 = rng.integers(-50, 50, (4, 3))
    i32 = (rng.integers(1, 50, (4, 3)) * rng.choice([-1, 1], (4, 3))).astype(np.int32)
    f32 = rng.standard_normal((3,)).astype(np.float32)
    b = rng.random((4, 3)) > 0.5
    t64, t32 = lt.tensor(i64, device=device), lt.tensor(i32, device=device)
    tf, tb = lt.tensor(f32, device=device), lt.tensor(b, device=device)
    assert_close(t64 + 1.5, i64 + 1.5, dtype=lt.float32)
    assert_close(t32 * 2.5, i32 * 2.5, dtype=lt.float32)
    assert_close(t32 * 2, i32 * 2, dtype=lt.int32)
    assert_close(tb + 1, b.astype(np.int64) + 1, dtype=lt.int64)
    assert_close(tb + t32, b + i32, dtype=lt.int32)
    assert_close(t64 + tf, i64 + f32.astype(np.float64), dtype=lt.float32)
    assert_close(t64 / t32, i64 / i32.astype(np.float64), dtype=lt.float32)
    assert_close(t64 * t32, i64 * i32, dtype=lt.int64)
    assert_close(t64 - 3, i64 - 3, dtype=lt.int64)


CASTS = [
    ("float32", "int64"), ("float32", "int32"), ("float32", "int8"), ("float64", "float32"),
    ("float32", "float16"), ("float32", "bool"), ("bool", "float32"), ("int64", "float32"),
    ("int32", "int64"), ("int64", "float64"), ("uint8", "int32"), ("float16", "float64"),
]


@pytest.mark.parametrize("src,dst", CASTS, ids=lambda p: p)
def test_casts(device, rng, src, dst):
    x = _sample(rng, src, (5, 4))
    if src == "float32" and dst == "bool":
        x[0, :2] = 0.0  # some zeros
    t = lt.tensor(x, device=device)
    out = t.to(getattr(lt, dst))
    # Float -> integer truncates toward zero, as in C and PyTorch (NumPy's astype does the same).
    assert_close(out, x.astype(dst), dtype=getattr(lt, dst))


def test_cast_methods(device, rng):
    x = rng.uniform(-4, 4, (6,)).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert t.double().dtype == lt.float64
    assert t.half().dtype == lt.float16
    assert t.int().dtype == lt.int32
    assert t.long().dtype == lt.int64
    assert t.bool().dtype == lt.bool
    assert t.byte().dtype == lt.uint8
    assert t.char().dtype == lt.int8
    assert t.bfloat16().dtype == lt.bfloat16
    assert t.float() is t  # same dtype: the tensor itself, as in PyTorch
    assert_close(t.long(), np.trunc(x).astype(np.int64))
    assert_close(t.to(lt.float64), x.astype(np.float64), dtype=lt.float64)
    assert_close(t.type_as(lt.tensor([1], dtype=lt.int32)), np.trunc(x).astype(np.int32))


def test_bfloat16_round_trip_matches_torch(device, rng):
    torch = torch_or_skip()
    x = rng.standard_normal((16,)).astype(np.float32) * 100
    got = lt.tensor(x, device=device).to(lt.bfloat16).float().numpy()
    want = torch.tensor(x).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(got, want)


def test_integer_pow_keeps_integer_dtype(device):
    t = lt.tensor([1, 2, 3], device=device)
    assert_close(t ** 2, [1, 4, 9], dtype=lt.int64)


def test_integer_clamp_keeps_integer_dtype(device):
    t = lt.tensor([-5, 0, 7], device=device)
    assert_close(t.clamp(-2, 3), [-2, 0, 3], dtype=lt.int64)
    # A float bound promotes, as in PyTorch.
    assert_close(t.clamp(min=-2.5), [-2.5, 0, 7], dtype=lt.float32)


def test_inplace_float_result_into_integer_tensor_raises(device):
    t = lt.tensor([1, 2], device=device)
    with pytest.raises(RuntimeError):
        t += 1.7
