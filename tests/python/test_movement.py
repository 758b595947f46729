"""reshape/view/permute/transpose/expand/squeeze chains and matmul on cpu and lazy against NumPy."""
import numpy as np
import pytest

import lazytensor as lt
from conftest import assert_close


def test_reshape_forms(device, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert_close(t.reshape(6, 4), x.reshape(6, 4))
    assert_close(t.reshape((4, 6)), x.reshape(4, 6))
    assert_close(t.reshape([3, -1]), x.reshape(3, -1))
    assert_close(t.view(-1), x.reshape(-1))
    assert_close(t.view(2, 12), x.reshape(2, 12))
    assert_close(lt.reshape(t, (24,)), x.reshape(24))
    assert_close(t.reshape_as(lt.zeros(4, 6)), x.reshape(4, 6))
    assert t.reshape(2, 3, 4) is not None and t.reshape(2, 3, 4).shape == (2, 3, 4)
    assert_close(lt.tensor(3.0, device=device).reshape(1, 1), np.full((1, 1), 3.0))


def test_permute_transpose(device, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert_close(t.permute(2, 0, 1), x.transpose(2, 0, 1))
    assert_close(t.permute((1, 2, 0)), x.transpose(1, 2, 0))
    assert_close(t.permute(-1, -2, -3), x.transpose(2, 1, 0))
    assert_close(t.transpose(0, 2), x.swapaxes(0, 2))
    assert_close(lt.transpose(t, -1, 1), x.swapaxes(-1, 1))
    assert_close(t.T, x.transpose(2, 1, 0))
    assert_close(t.mT, x.swapaxes(-1, -2))
    m = x[0]
    tm = lt.tensor(m, device=device)
    assert_close(tm.T, m.T)
    assert_close(tm.t(), m.T)
    v = lt.tensor(x[0, 0], device=device)
    assert_close(v.T, x[0, 0])


def test_squeeze_unsqueeze_flatten(device, rng):
    x = rng.standard_normal((3, 1, 4, 1)).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert_close(t.squeeze(), x.squeeze())
    assert_close(t.squeeze(1), x.squeeze(1))
    assert_close(t.squeeze(-1), x.squeeze(-1))
    assert_close(t.squeeze(0), x)  # a dim that is not 1 stays
    assert_close(t.squeeze((1, 3)), x.squeeze((1, 3)))
    assert_close(t.unsqueeze(0), x[None])
    assert_close(t.unsqueeze(-1), x[..., None])
    assert_close(t.unsqueeze(2), np.expand_dims(x, 2))
    assert_close(t.flatten(), x.reshape(-1))
    assert_close(t.flatten(1), x.reshape(3, -1))
    assert_close(t.flatten(1, 2), x.reshape(3, 4, 1))
    assert_close(lt.flatten(t, 0, -2), x.reshape(12, 1))
    assert_close(lt.tensor(5.0, device=device).flatten(), np.array([5.0]))


def test_expand(device, rng):
    x = rng.standard_normal((3, 1)).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert_close(t.expand(3, 4), np.broadcast_to(x, (3, 4)))
    assert_close(t.expand(2, -1, 5), np.broadcast_to(x, (2, 3, 5)))
    assert_close(t.expand((2, 3, 2)), np.broadcast_to(x, (2, 3, 2)))
    assert_close(t.expand_as(lt.zeros(3, 6)), np.broadcast_to(x, (3, 6)))
    assert_close(t.expand(3, 4) * 2 + t, np.broadcast_to(x, (3, 4)) * 2 + x)


def test_movement_chain_into_elementwise_and_reduction(device, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = rng.standard_normal((4, 6)).astype(np.float32)
    t, u = lt.tensor(x, device=device), lt.tensor(y, device=device)
    got = t.permute(2, 0, 1).reshape(4, 6).T.unsqueeze(0).expand(3, 6, 4) + u.T
    want = np.broadcast_to(x.transpose(2, 0, 1).reshape(4, 6).T[None], (3, 6, 4)) + y.T
    assert_close(got, want)
    assert_close(got.sum((0, 2)), want.astype(np.float64).sum((0, 2)), rtol=1e-5, atol=1e-5)
    assert_close((t.transpose(0, 1).flatten(1) * 2).amax(1),
                 (x.swapaxes(0, 1).reshape(3, -1) * 2).max(1))


def test_contiguous_is_identity(device, rng):
    t = lt.tensor(rng.standard_normal((2, 3)), device=device)
    assert t.contiguous() is t
    assert_close(t.T.contiguous(), t.numpy().T)


MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((1, 7), (7, 1)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((4, 3), (3,)),
    ((3,), (3, 6)),
    ((5,), (5,)),
    ((2, 3, 4), (4,)),
    ((17, 33), (33, 9)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul(device, rng, sa, sb):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    ta, tb = lt.tensor(a, device=device), lt.tensor(b, device=device)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert_close(ta @ tb, want, dtype=lt.float32, rtol=1e-4, atol=1e-5)
    assert_close(lt.matmul(ta, tb), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sa,sb", [s for s in MATMUL_SHAPES if len(s[0]) >= 2 and len(s[1]) >= 2], ids=str)
def test_transposed_matmul(device, rng, sa, sb):
    # (a @ b).mT is computed as b.mT @ a.mT (lowering/decompose.cc); with the product also read
    # as it is, it is computed once and transposed.
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    ta, tb = lt.tensor(a, device=device), lt.tensor(b, device=device)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert_close((ta @ tb).transpose(-1, -2), np.swapaxes(want, -1, -2), rtol=1e-4, atol=1e-5)
    p = ta @ tb
    assert_close(p.transpose(-1, -2) * 2 + p.sum(), np.swapaxes(want, -1, -2) * 2 + want.sum(),
                 rtol=1e-4, atol=1e-4)


def test_matmul_float64_and_forms(device, rng):
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((6, 3))
    ta, tb = lt.tensor(a, device=device), lt.tensor(b, device=device)
    assert_close(ta.matmul(tb), a @ b, dtype=lt.float64, rtol=1e-10)
    assert_close(ta.mm(tb), a @ b)
    assert_close(lt.mm(ta, tb), a @ b)
    ba, bb = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    assert_close(lt.bmm(lt.tensor(ba, device=device), lt.tensor(bb, device=device)), ba @ bb)


def test_matmul_in_expression(device, rng):
    x = rng.standard_normal((8, 5)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    tx, tw, tb = (lt.tensor(v, device=device) for v in (x, w, b))
    got = (tx @ tw.T + tb).relu().sum(1)
    want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0).sum(1)
    assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_integer_matmul(device, rng):
    a = rng.integers(-5, 5, (3, 4))
    b = rng.integers(-5, 5, (4, 2))
    assert_close(lt.tensor(a, device=device) @ lt.tensor(b, device=device), a @ b, dtype=lt.int64)
