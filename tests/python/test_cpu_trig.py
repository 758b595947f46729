"""sin/cos on lazy:cpu, whose fused kernels compute float32 sin/cos inline (backends/cpu/llvm_ops.cc:
Cody-Waite reduction + FMA polynomial) and fall back to libm when an argument is 39000 or more in
magnitude, or not finite. Oracle: numpy in float64, compared in float32 ulps."""
import numpy as np
import pytest

import lazytensor as lt

DEV = "lazy:cpu"


def _ulps(got, x, fn):
    ref = fn(x.astype(np.float64))
    spacing = np.spacing(np.maximum(np.abs(ref).astype(np.float32), np.float32(2.0**-126)))
    return np.abs(got.astype(np.float64) - ref) / spacing.astype(np.float64)


def _run(x, name):
    t = lt.tensor(x, device=DEV)
    y = getattr(t, name)()
    lt.mark_step()
    return y.numpy()


@pytest.mark.parametrize("name", ["sin", "cos"])
@pytest.mark.parametrize("limit", [1.0, 10.0, 1e3, 1e4, 38999.0, 1e6, 3e38])
def test_within_two_ulps_of_float64(name, limit):
    rng = np.random.default_rng(int(limit) % 1000 + len(name))
    x = rng.uniform(-limit, limit, 100_003).astype(np.float32)  # odd length: a scalar tail too
    err = _ulps(_run(x, name), x, getattr(np, name))
    # The inline path measures up to ~2.3 ulps (near |x| = 1e3..1e4); libm's stays under 1.
    assert err.max() <= 2.5, (name, limit, err.max(), x[err.argmax()])


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_one_large_argument_reruns_its_range_through_libm(name):
    # A single out-of-range value among in-range ones: the whole kernel range is recomputed.
    x = np.random.default_rng(3).uniform(-3, 3, 50_000).astype(np.float32)
    x[12_345] = 1.0e30
    x[40_000] = -123456.0
    err = _ulps(_run(x, name), x, getattr(np, name))
    assert err.max() <= 2.5, err.max()


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_special_values(name):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-30, np.pi, -np.pi / 2, 39000.0,
                  -38999.996, 3.4e38] * 3, dtype=np.float32)
    got = _run(x, name)
    with np.errstate(invalid="ignore"):
        ref = getattr(np, name)(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=3e-7, atol=1e-45)
    if name == "sin":  # the sign of zero survives: sin(-0) = -0
        assert np.signbit(got[4]) and not np.signbit(got[3])


def test_fused_chain_matches_float64_chain():
    # x = x + sin(x), 20 times in one kernel: each step within a few ulps of the float32 chain.
    x0 = np.random.default_rng(4).standard_normal(1 << 16).astype(np.float32)
    t = lt.tensor(x0, device=DEV)
    y = t
    for _ in range(20):
        y = y + y.sin()
    lt.mark_step()
    ref = x0.astype(np.float64)
    for _ in range(20):
        ref = (ref + np.sin(ref)).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(y.numpy(), ref, rtol=2e-5, atol=1e-5)


def test_in_place_update_keeps_libm_path_correct():
    # A donated (in-place) buffer cannot be recomputed, so that body stays on libm; same values.
    x0 = np.random.default_rng(5).uniform(-5e4, 5e4, 4096).astype(np.float32)
    t = lt.tensor(x0, device=DEV)
    t.sin_()
    lt.mark_step()
    err = _ulps(t.numpy(), x0, np.sin)
    assert err.max() <= 2.5


@pytest.mark.parametrize("dtype", [lt.float16, lt.bfloat16, lt.float64])
def test_other_float_dtypes(dtype):
    x = np.random.default_rng(6).uniform(-100, 100, 5000).astype(np.float32)
    t = lt.tensor(x, device=DEV).to(dtype)
    y = t.sin() + t.cos()
    lt.mark_step()
    xin = t.float().numpy().astype(np.float64)
    ref = np.sin(xin) + np.cos(xin)
    tol = {lt.float16: 4e-3, lt.bfloat16: 3e-2, lt.float64: 1e-12}[dtype]
    got = y.numpy() if dtype == lt.float64 else y.float().numpy()
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=tol, atol=tol)
