"""The counter-based generator: statistics, and the same seed giving the same numbers on every device."""
import numpy as np
import pytest

import lazytensor as lt


def _draws(device):
    lt.manual_seed(1234)
    a = lt.rand(257, device=device)
    b = lt.randn(3, 50, device=device)
    c = lt.randint(0, 1000, (64,), device=device)
    return a.numpy(), b.numpy(), c.numpy()


def test_same_seed_same_numbers_on_cpu_and_lazy():
    (rand, randn, randint), (want_rand, want_randn, want_randint) = _draws("lazy"), _draws("cpu")
    np.testing.assert_array_equal(rand, want_rand)
    np.testing.assert_array_equal(randint, want_randint)
    # randn's log/cos may run vectorized (libmvec, <= 4 ulp) in one kernel shape and not another.
    np.testing.assert_array_max_ulp(randn, want_randn, maxulp=4)


def test_same_seed_same_numbers_on_the_reference_backend():
    rand, randn, randint = _draws("lazy:reference")
    want_rand, want_randn, want_randint = _draws("cpu")
    np.testing.assert_array_equal(rand, want_rand)
    np.testing.assert_array_equal(randint, want_randint)
    # randn is Box-Muller (log, sqrt, cos): the interpreter's libm may differ from the compiled
    # backend's by an ulp.
    np.testing.assert_array_max_ulp(randn, want_randn, maxulp=4)


def test_reseeding_repeats_and_draws_differ(device):
    lt.manual_seed(7)
    a = lt.rand(100, device=device).numpy()
    b = lt.rand(100, device=device).numpy()
    lt.manual_seed(7)
    a2 = lt.rand(100, device=device).numpy()
    np.testing.assert_array_equal(a, a2)
    assert not np.array_equal(a, b)
    lt.manual_seed(8)
    assert not np.array_equal(lt.rand(100, device=device).numpy(), a)


def test_rand_statistics(device):
    lt.manual_seed(0)
    x = lt.rand(200_000, device=device)
    assert x.dtype == lt.float32
    v = x.numpy().astype(np.float64)
    assert v.min() >= 0.0 and v.max() < 1.0
    assert abs(v.mean() - 0.5) < 0.005
    assert abs(v.var() - 1 / 12) < 0.002
    hist, _ = np.histogram(v, bins=10, range=(0, 1))
    assert np.all(np.abs(hist / len(v) - 0.1) < 0.005)


def test_randn_statistics(device):
    lt.manual_seed(1)
    v = lt.randn(400, 500, device=device).numpy().astype(np.float64)
    assert np.all(np.isfinite(v))
    assert abs(v.mean()) < 0.01
    assert abs(v.std() - 1.0) < 0.01
    assert abs(np.mean(np.abs(v) < 1.0) - 0.6827) < 0.005
    assert abs(np.mean(np.abs(v) < 2.0) - 0.9545) < 0.003
    # Rows are not copies of each other (the counter advances per element).
    assert not np.allclose(v[0], v[1])


def test_rand_float64_and_like(device):
    lt.manual_seed(2)
    d = lt.rand(1000, dtype=lt.float64, device=device)
    assert d.dtype == lt.float64
    v = d.numpy()
    assert 0 <= v.min() and v.max() < 1
    base = lt.zeros(4, 6, dtype=lt.float64, device=device)
    r = lt.rand_like(base)
    assert r.shape == (4, 6) and r.dtype == lt.float64 and str(r.device) == str(base.device)
    n = lt.randn_like(base, dtype=lt.float32)
    assert n.dtype == lt.float32 and n.shape == (4, 6)
    assert np.std(lt.randn_like(lt.zeros(10000, device=device)).numpy()) == pytest.approx(1.0, abs=0.05)


def test_randint(device):
    lt.manual_seed(3)
    x = lt.randint(-3, 5, (20000,), device=device)
    assert x.dtype == lt.int64
    v = x.numpy()
    assert v.min() == -3 and v.max() == 4
    counts = np.bincount(v + 3)
    assert np.all(np.abs(counts / len(v) - 1 / 8) < 0.01)
    y = lt.randint(10, (3, 4), device=device)
    assert y.shape == (3, 4) and y.numpy().min() >= 0 and y.numpy().max() < 10
    z = lt.randint(0, 2, (5,), dtype=lt.int32, device=device)
    assert z.dtype == lt.int32


def test_rand_rejects_integer_dtype(device):
    with pytest.raises(TypeError):
        lt.rand(3, dtype=lt.int64, device=device)
    with pytest.raises(TypeError):
        lt.randn(3, dtype=lt.bool, device=device)
