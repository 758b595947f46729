"""Kernels with more scalar arguments than vector registers (backends/cpu/sink_broadcasts.h loads
their broadcasts again inside the vector loop): out of place, in place, and with a row reduction,
against numpy computing the same float32 steps. Random scalars and data; odd lengths leave
vector remainders."""
import numpy as np
import pytest

import lazytensor as lt

DEV = "lazy:cpu"


def _scalars(seed, steps):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 1.5, steps).astype(np.float32), rng.uniform(-0.5, 0.5, steps).astype(np.float32)


@pytest.mark.parametrize("n", [1, 1003, 70001])
@pytest.mark.parametrize("steps", [9, 40, 150])
def test_out_of_place_chain(n, steps):
    a, c = _scalars(n + steps, steps)
    x0 = np.random.default_rng(steps).uniform(-1, 1, n).astype(np.float32)
    y = lt.tensor(x0, device=DEV)
    want = x0.copy()
    for i in range(steps):
        y = y * float(a[i]) + float(c[i])
        want = want * a[i] + c[i]
    lt.mark_step()
    np.testing.assert_allclose(y.numpy(), want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("steps", [12, 60])
def test_in_place_chain(steps):
    a, c = _scalars(7 * steps, steps)
    x0 = np.random.default_rng(5).uniform(-1, 1, (257, 129)).astype(np.float32)
    x = lt.tensor(x0, device=DEV)
    lt.mark_step()
    want = x0.copy()
    for i in range(steps):
        x.mul_(float(a[i])).add_(float(c[i]))
        want = want * a[i] + c[i]
    lt.mark_step()
    np.testing.assert_allclose(x.numpy(), want, rtol=2e-5, atol=2e-5)


def test_chain_into_a_row_reduction():
    steps = 50
    a, c = _scalars(11, steps)
    x0 = np.random.default_rng(6).uniform(-1, 1, (64, 1000)).astype(np.float32)
    y = lt.tensor(x0, device=DEV)
    want = x0.copy()
    for i in range(steps):
        y = y * float(a[i]) + float(c[i])
        want = want * a[i] + c[i]
    s = y.sum(1)
    lt.mark_step()
    np.testing.assert_allclose(s.numpy(), want.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
