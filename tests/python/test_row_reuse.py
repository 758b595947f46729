"""Row kernels whose last stage recomputes a costly value that a reduce stage already computed at
the same point (softmax's exp(x - max), summed and then scaled): the CPU backend keeps the value
in a row scratch array instead of computing it twice (backends/cpu/codegen.cc find_row_reuse).
Results against NumPy in float64, on rows of many lengths, multi-dim rows, sin (the fast-trig
body), float16, rows past the scratch limit, and values the last stage reads twice."""
import numpy as np
import pytest

import lazytensor as lt
from conftest import assert_close

F = lt.nn.functional


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("shape", [(3, 1), (5, 7), (64, 1024), (9, 333), (2, 3, 20000)], ids=str)
def test_softmax_rows(device, rng, shape):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert_close(t.softmax(-1), np_softmax(x.astype(np.float64)), rtol=2e-6, atol=1e-7)
    assert_close(F.softmax(t, 0), np_softmax(x.astype(np.float64), 0), rtol=2e-6, atol=1e-7)


def test_spelled_out_softmax_over_two_dims(device, rng):
    x = rng.standard_normal((4, 6, 70)).astype(np.float32)
    t = lt.tensor(x, device=device)
    e = (t - t.amax((1, 2), keepdim=True)).exp()
    got = e / e.sum((1, 2), keepdim=True) + e * 0.5  # the kept value read twice
    x64 = x.astype(np.float64)
    e64 = np.exp(x64 - x64.max((1, 2), keepdims=True))
    assert_close(got, e64 / e64.sum((1, 2), keepdims=True) + e64 * 0.5, rtol=2e-6, atol=1e-7)


def test_sin_normalized_by_its_row_sum(device, rng):
    x = rng.uniform(0.1, 3.0, (16, 500)).astype(np.float32)
    t = lt.tensor(x, device=device)
    s = t.sin()
    got = s / s.sum(-1, keepdim=True)
    s64 = np.sin(x.astype(np.float64))
    assert_close(got, s64 / s64.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    # Arguments beyond the inline sin's range: the kernel reruns with libm's, reuse and all.
    xb = (x * 1e5).astype(np.float32)
    sb = lt.tensor(xb, device=device).sin()
    sb64 = np.sin(xb.astype(np.float64))
    assert_close(sb * sb.sum(-1, keepdim=True), sb64 * sb64.sum(-1, keepdims=True), rtol=1e-4, atol=1e-4)


def test_float16_softmax(device, rng):
    x = rng.standard_normal((32, 300)).astype(np.float16)
    got = lt.tensor(x, device=device).softmax(-1)
    assert got.dtype == lt.float16
    assert_close(got, np_softmax(x.astype(np.float64)), rtol=2e-3, atol=2e-4)
