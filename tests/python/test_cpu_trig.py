"""sin/cos on lazy:cpu, whose fused kernels compute float32 sin/cos inline (backends/cpu/llvm_ops.cc:
3-part Cody-Waite reduction + FMA polynomial) and fall back to libm when an argument is 39000 or
more in magnitude, or not finite. Oracle: numpy in float64, compared in float32 ulps.

Measured once over every float in [0, 39000) (both functions are odd/even in their code paths):
sin within 1.73 ulp, cos within 1.82 ulp of float64."""
import numpy as np
import pytest

import lazytensor as lt
from conftest import float32_ulps

DEV = "lazy:cpu"


def _ulps(got, x, fn):
    return float32_ulps(got, fn(x.astype(np.float64)))


def _run(x, name, dev=DEV):
    t = lt.tensor(x, device=dev)
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


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_strided_sweep_of_every_float_below_39000(name):
    # Every 251st float32 bit pattern in [0, 39000) and its negation: all exponents of the inline
    # path, subnormals and the Cody-Waite worst cases near multiples of pi/2 included.
    bits = np.arange(0, 0x47185800, 251, dtype=np.uint32)
    x = bits.view(np.float32)
    x = np.concatenate([x, -x])
    err = _ulps(_run(x, name), x, getattr(np, name))
    assert err.max() <= 2.0, (name, err.max(), x[err.argmax()])


@pytest.mark.parametrize("dev", ["lazy:cpu", "cpu"])
def test_signed_zero_and_subnormals_on_the_inline_path(dev):
    # No argument out of range, so the inline code alone answers (no libm rerun): sin(-0) = -0,
    # sin of a subnormal or tiny x is x exactly, cos of them is 1.
    tiny = np.array([-0.0, 0.0, 1e-45, -1e-45, 1e-40, -3e-39, 1e-30, -1e-20, 2.0**-126], np.float32)
    x = np.tile(tiny, 64)  # long enough for the vector loop, with a scalar tail
    s = _run(x, "sin", dev)
    np.testing.assert_array_equal(s.view(np.uint32), x.view(np.uint32))
    np.testing.assert_array_equal(_run(x, "cos", dev), np.ones_like(x))


def _chain_ref(x0, steps):
    ref = x0.astype(np.float64)
    for _ in range(steps):
        ref = (ref + np.sin(ref)).astype(np.float32).astype(np.float64)
    return ref


@pytest.mark.parametrize("start", [38960.0, 38985.0])
def test_chain_checks_its_intermediate_arguments(start):
    # The fast body tracks the largest load and bounds the 20 arguments by it (|x + sin x| <=
    # |x| + 1, backends/cpu/trig_bounds.h): from 38960 they stay below 39000 (inline code), from
    # 38985 they may not, and the kernel reruns through libm. Both agree with float64 (the inline
    # code is still accurate just past 39000, so this checks accuracy; test_scaled_argument_bound
    # checks that a load past the threshold reruns).
    x0 = (start + np.random.default_rng(8).uniform(0, 4, 4099)).astype(np.float32)
    y = lt.tensor(x0, device=DEV)
    for _ in range(20):
        y = y + y.sin()
    lt.mark_step()
    np.testing.assert_allclose(y.numpy(), _chain_ref(x0, 20), rtol=1e-6, atol=0)


@pytest.mark.parametrize("scale", [0.5, 300.0])
def test_scaled_argument_bound(scale):
    # sin(x * 1000): bounded by 1000 * max|x|, so the fast body checks the loads against ~39.
    # x up to 38.99 * 0.5 stays inline; up to 38.99 * 300 (arguments to 1.2e7, where the inline
    # reduction is wrong) must rerun through libm. One NaN among the loads reruns as well.
    x = np.random.default_rng(9).uniform(-38.99, 38.99, 10_001).astype(np.float32) * np.float32(scale)
    t = lt.tensor(x, device=DEV)
    y = (t * 1000.0).sin()
    lt.mark_step()
    arg = x * np.float32(1000.0)
    assert _ulps(y.numpy(), arg, np.sin).max() <= 2.0
    x[77] = np.nan
    t = lt.tensor(x, device=DEV)
    y = (t * 1000.0).sin()
    lt.mark_step()
    got = y.numpy()
    assert np.isnan(got[77]) and not np.isnan(np.delete(got, 77)).any()


def test_unbounded_arguments_are_tracked_themselves():
    # exp has no bound in trig_bounds.h: the arguments are tracked (exp(11) = 59874 reruns).
    x = np.random.default_rng(10).uniform(-3, 11, 5003).astype(np.float32)
    t = lt.tensor(x, device=DEV)
    e = t.exp()
    y = e.sin()  # one kernel writes both: the argument is exactly e
    lt.mark_step()
    err = _ulps(y.numpy(), e.numpy(), np.sin)
    assert err.max() <= 2.5, (err.max(), x[err.argmax()])


def test_float16_overflow_inside_a_bounded_looking_argument():
    # In float16, x + x overflows to inf for x = 40000 and inf - x stays inf: sin is NaN. The bound
    # analysis must treat the overflow as unbounded rather than trust |x + x - x| <= 3 max|x|.
    x = np.full(4096, 0.5, np.float16)
    x[100] = 40000.0
    t = lt.tensor(x, device=DEV)
    y = (t + t - t).sin()
    lt.mark_step()
    got = y.float().numpy()
    assert np.isnan(got[100])
    np.testing.assert_allclose(np.delete(got, 100), np.sin(0.5), rtol=1e-3)
