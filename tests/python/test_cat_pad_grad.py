"""Gradients through cat / stack (one autograd node whose rule is a slice of the gradient per
piece) and through slices and pads (pad's mask cached as data, runtime/indexing.h range_mask),
against torch 2.13 CPU with random inputs and upstream gradients; and the ops their backward
traces, pinned (the cost of an eager backward is mostly its traced ops)."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F

torch = pytest.importorskip("torch")


def _leaf(arr, device, requires_grad=True):
    return (lt.tensor(arr, device=device).requires_grad_(requires_grad),
            torch.tensor(arr).requires_grad_(requires_grad))


def _backward(out_l, out_t, rng):
    g = rng.standard_normal(tuple(out_t.shape))
    (out_l * lt.tensor(g, dtype=out_l.dtype, device=out_l.device)).sum().backward()
    (out_t * torch.tensor(g, dtype=out_t.dtype)).sum().backward()


def _same_grads(pairs):
    for l, t in pairs:
        if t.grad is None:
            assert l.grad is None
            continue
        assert l.grad.dtype == getattr(lt, str(t.grad.dtype).split(".")[1])
        np.testing.assert_array_equal(l.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_gradients_match_torch(device, rng, dim):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    sizes = [3, 0, 1, 2]  # an empty piece, a piece of one
    pieces = []
    for i, n in enumerate(sizes):
        s = list(shapes[0])
        s[dim] = n
        dtype = np.float64 if i == 2 else np.float32  # the cat promotes to float64
        pieces.append(_leaf(rng.standard_normal(s).astype(dtype), device, requires_grad=i != 3))
    out_l = lt.cat([p[0] for p in pieces], dim)
    out_t = torch.cat([p[1] for p in pieces], dim)
    np.testing.assert_array_equal(out_l.detach().numpy(), out_t.detach().numpy())
    _backward(out_l, out_t, rng)
    _same_grads(pieces)  # each grad in its piece's dtype; the last piece's None


def test_stack_and_chunk_gradients_match_torch(device, rng):
    pieces = [_leaf(rng.standard_normal((4, 6)).astype(np.float32), device) for _ in range(3)]
    x = _leaf(rng.standard_normal((4, 16)).astype(np.float32), device)
    outs = []
    for lib, k in ((lt, 0), (torch, 1)):
        st = lib.stack([p[k] for p in pieces] + [pieces[0][k] * 2], 1)  # a piece used twice
        i, f, g, o = x[k].chunk(4, -1)  # an LSTM's gates
        outs.append((st, i.sigmoid() * g.tanh() + f * o))
    for (a, b) in zip(*outs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), 
                                   rtol=2e-5, atol=2e-6)  # float32 transcendentals
        _backward(a, b, rng)
    _same_grads(pieces)
    np.testing.assert_allclose(x[0].grad.numpy(), x[1].grad.numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("pads", [(1, 2), (0, 3, 2, 0), (-1, 2), (2, -3, 1, 1)])
def test_pad_and_slice_gradients_match_torch(device, rng, pads):
    x = _leaf(rng.standard_normal((3, 5, 6)).astype(np.float32), device)
    _backward(F.pad(x[0], pads, value=0.5), torch.nn.functional.pad(x[1], pads, value=0.5), rng)
    _same_grads([x])
    y = _leaf(rng.standard_normal((7, 9)).astype(np.float32), device)
    _backward(y[0][1:6:2, 3:], y[1][1:6:2, 3:], rng)  # a strided slice and an offset one
    _backward(y[0][-1], y[1][-1], rng)  # a select, accumulated onto the first
    _same_grads([y])


def _traced(fn):
    before = lt.metrics.counters()["traced_ops"]
    fn()
    return lt.metrics.counters()["traced_ops"] - before


def test_backward_traced_ops_are_pinned():
    """On lazy, so nothing runs: the gradient of a cat is one slice per piece (before, the where
    chain's own rules traced ~5 ops per piece more), and a slice's gradient is a pad of 5 ops (the
    piece tiled: reshape, expand, reshape; the fill constant; a where against the cached mask,
    which was 4 ops more: positions compared with both ends, and-ed)."""
    a, b, c = (lt.randn(2, 8, device="lazy", requires_grad=True) for _ in range(3))
    out = lt.cat([a, b, c], 1)
    g = lt.randn(2, 24, device="lazy")
    assert _traced(lambda: out.backward(g)) == 3
    x = lt.randn(2, 16, device="lazy", requires_grad=True)
    part = x[:, 4:8]
    g = lt.randn(2, 4, device="lazy")
    assert _traced(lambda: part.backward(g)) == 5
    lt.mark_step()
