"""gather / scatter_add as IR primitives (indexed loads and accumulating stores), and the ops built
on them (index_select, embedding, x[idx], nll_loss/cross_entropy's target pick): values against
PyTorch on random inputs for every dtype, on the eager cpu device, lazy (LLVM) and the reference
interpreter; gradients against PyTorch and float64 finite differences; kernel counts; bad input."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F

from conftest import torch_or_skip

torch = torch_or_skip()
TF = torch.nn.functional

DEVICES = ["cpu", "lazy", "lazy:reference"]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"]
SUM_DTYPES = [d for d in DTYPES if d != "bool"]


def _data(rng, shape, dtype):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype in ("int8", "uint8"):
        return rng.integers(0, 60, shape).astype(dtype)
    if dtype in ("int32", "int64"):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32)


def _pair(x, dtype, device):
    """The same values as a lazytensor and a torch tensor of `dtype`."""
    tt = torch.tensor(x).to(getattr(torch, dtype))
    lx = lt.tensor(x, device=device)
    if dtype == "bfloat16":
        lx = lt.tensor(tt.float().numpy(), device=device)
    return lx.to(getattr(lt, dtype)), tt


def _same(lv, tv, dtype):
    got = lv.to(lt.float64).numpy() if dtype in ("float16", "bfloat16") else lv.numpy()
    want = tv.double().numpy() if dtype in ("float16", "bfloat16") else tv.numpy()
    assert tuple(lv.shape) == tuple(tv.shape)
    tol = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-6}.get(dtype, 0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_matches_torch(device, dtype, rng):
    x = _data(rng, (5, 7, 3), dtype)
    lx, tx = _pair(x, dtype, device)
    for dim, ishape in ((0, (9, 7, 3)), (1, (4, 12, 2)), (2, (5, 7, 6)), (-1, (2, 3, 1))):
        idx = rng.integers(0, x.shape[dim], ishape)  # duplicates and an index smaller than x
        _same(lx.gather(dim, lt.tensor(idx, device=device)), tx.gather(dim, torch.tensor(idx)), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_add_matches_torch(device, dtype, rng):
    base, src = _data(rng, (6, 5), dtype), _data(rng, (8, 6), dtype)
    lb, tb = _pair(base, dtype, device)
    ls, ts = _pair(src, dtype, device)
    for dim, ishape in ((0, (8, 5)), (1, (6, 4)), (0, (3, 2))):
        idx = rng.integers(0, base.shape[dim], ishape)  # many duplicates
        _same(lb.scatter_add(dim, lt.tensor(idx, device=device), ls),
              tb.scatter_add(dim, torch.tensor(idx), ts), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_index_select_embedding_and_advanced_indexing(device, rng):
    x = rng.standard_normal((6, 4, 5)).astype(np.float32)
    lx, tx = lt.tensor(x, device=device), torch.tensor(x)
    idx = rng.integers(0, 4, 7)
    for it, tt in ((lt.tensor(idx, device=device), torch.tensor(idx)),
                   (lt.tensor(idx, device=device).to(lt.int32), torch.tensor(idx).int())):
        _same(lt.index_select(lx, 1, it), torch.index_select(tx, 1, tt.long()), "float32")
    ids = rng.integers(0, 6, (3, 4))
    _same(F.embedding(lt.tensor(ids, device=device), lx.reshape(6, 20)),
          TF.embedding(torch.tensor(ids), tx.reshape(6, 20)), "float32")
    neg = np.array([[5, -1], [0, -6]])
    _same(lx[lt.tensor(neg, device=device)], tx[torch.tensor(neg)], "float32")
    _same(lx[:, lt.tensor(idx, device=device)], tx[:, torch.tensor(idx)], "float32")


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_match_torch_with_duplicates(device, rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)
    idx = np.array([[0, 0, 4], [1, 1, 1], [5, 2, 5], [3, 3, 0], [2, 2, 2]])  # duplicates per row
    lx = lt.tensor(x, device=device, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    g = rng.standard_normal((5, 3)).astype(np.float32)
    lx.gather(1, lt.tensor(idx, device=device)).backward(lt.tensor(g, device=device))
    tx.gather(1, torch.tensor(idx)).backward(torch.tensor(g))
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)

    base = rng.standard_normal((4, 6)).astype(np.float32)
    src = rng.standard_normal((5, 6)).astype(np.float32)
    sidx = rng.integers(0, 4, (5, 6))  # (torch's backward, 2.13's too, needs index and src of one shape)
    lb, ls = (lt.tensor(v, device=device, requires_grad=True) for v in (base, src))
    tb, ts = (torch.tensor(v, requires_grad=True) for v in (base, src))
    w = rng.standard_normal((4, 6)).astype(np.float32)
    (lb.scatter_add(0, lt.tensor(sidx, device=device), ls) * lt.tensor(w, device=device)).sum().backward()
    (tb.scatter_add(0, torch.tensor(sidx), ts) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(lb.grad.numpy(), tb.grad.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ls.grad.numpy(), ts.grad.numpy(), rtol=1e-6, atol=1e-6)

    wv = rng.standard_normal((7, 3)).astype(np.float32)
    ids = np.array([[1, 1, 6], [1, 0, 6]])
    lw, tw = lt.tensor(wv, device=device, requires_grad=True), torch.tensor(wv, requires_grad=True)
    (F.embedding(lt.tensor(ids, device=device), lw) ** 2).sum().backward()
    (TF.embedding(torch.tensor(ids), tw) ** 2).sum().backward()
    np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def _finite_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_gradients_match_float64_finite_differences(device, rng):
    x = rng.standard_normal((4, 5))
    src = rng.standard_normal((7, 5))  # the index covers 6 rows: the last gets no gradient
    idx = rng.integers(0, 4, (6, 5))
    gidx = lt.tensor(rng.integers(0, 5, (4, 7)), device=device)
    sidx = lt.tensor(idx, device=device)
    w = rng.standard_normal((4, 5))

    def loss(xv, sv):
        lx, ls = lt.tensor(xv, device=device), lt.tensor(sv, device=device)
        y = lx.scatter_add(0, sidx, ls * ls)
        return float(((y * lt.tensor(w, device=device)).sin().sum() + lx.gather(1, gidx).exp().sum()).item())

    lx = lt.tensor(x, device=device, requires_grad=True)
    ls = lt.tensor(src, device=device, requires_grad=True)
    y = lx.scatter_add(0, sidx, ls * ls)
    ((y * lt.tensor(w, device=device)).sin().sum() + lx.gather(1, gidx).exp().sum()).backward()
    np.testing.assert_allclose(lx.grad.numpy(), _finite_differences(lambda v: loss(v, src), x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ls.grad.numpy(), _finite_differences(lambda v: loss(x, v), src), rtol=1e-6, atol=1e-7)


def _kernels(fn):
    lt.mark_step()
    out = fn()
    lt.mark_step()
    return lt.metrics.last_graph()["kernels"], out


def test_embedding_with_epilogue_is_one_kernel(rng):
    w = lt.tensor(rng.standard_normal((50, 8)).astype(np.float32), device="lazy")
    pos = lt.tensor(rng.standard_normal((6, 8)).astype(np.float32), device="lazy")
    ids = rng.integers(0, 50, (3, 6))
    li = lt.tensor(ids, device="lazy")
    n, y = _kernels(lambda: F.embedding(li, w) * 0.5 + pos)
    assert n == 1
    np.testing.assert_allclose(y.numpy(), w.numpy()[ids] * 0.5 + pos.numpy(), rtol=1e-6)


def test_embedding_backward_is_one_scatter(rng):
    w = lt.tensor(rng.standard_normal((50, 8)).astype(np.float32), device="lazy", requires_grad=True)
    ids = rng.integers(0, 50, (4, 6))
    g = rng.standard_normal((4, 6, 8)).astype(np.float32)

    def step():
        F.embedding(lt.tensor(ids, device="lazy"), w).backward(lt.tensor(g, device="lazy"))
        return w.grad

    n, grad = _kernels(step)
    graph = lt.metrics.last_graph()
    # The zero fill of the [50, 8] gradient and one scatter kernel over the [24, 8] rows: no
    # [24, 50] one-hot matrix, no GEMM.
    assert n == 2, graph
    want = np.zeros((50, 8))
    np.add.at(want, ids.reshape(-1), g.reshape(-1, 8))
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-5, atol=1e-6)


def test_cross_entropy_kernels(rng):
    x = lt.tensor(rng.standard_normal((16, 10)).astype(np.float32), device="lazy")
    t = rng.integers(0, 10, 16)
    n, loss = _kernels(lambda: F.cross_entropy(x, lt.tensor(t, device="lazy")))
    # One row kernel writes the row max and the row sum of exp(x - max) (a two-output kernel),
    # then one kernel for the loss sum (the target's logit gathered inside it) and the count of
    # non-ignored targets, both over the same 16 rows.
    assert n == 2, lt.metrics.last_graph()["grouping"]
    want = TF.cross_entropy(torch.tensor(x.numpy()), torch.tensor(t))
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_nll_loss_weights_and_ignore_index(device, rng):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    t = np.array([0, 4, -100, 2, 2, 1])
    wt = rng.random(5).astype(np.float32)
    for kw in ({}, {"weight": wt}, {"reduction": "none"}, {"label_smoothing": 0.2}):
        lk = {k: (lt.tensor(v, device=device) if k == "weight" else v) for k, v in kw.items()}
        tk = {k: (torch.tensor(v) if k == "weight" else v) for k, v in kw.items()}
        got = F.cross_entropy(lt.tensor(x, device=device), lt.tensor(t, device=device), **lk)
        want = TF.cross_entropy(torch.tensor(x), torch.tensor(t), **tk)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_names_op_and_shapes(device):
    x = lt.zeros([3, 4], device=device)
    with pytest.raises(RuntimeError, match=r"gather.*int64.*int32.*\[3, 4\]"):
        x.gather(1, lt.zeros([3, 2], device=device).to(lt.int32))
    with pytest.raises(RuntimeError, match=r"gather.*same number of dimensions.*\[3, 4\].*\[3\]"):
        x.gather(1, lt.zeros([3], device=device).to(lt.int64))
    with pytest.raises(IndexError, match=r"gather.*range"):
        x.gather(2, lt.zeros([3, 2], device=device).to(lt.int64))
    with pytest.raises(RuntimeError, match=r"scatter_add.*int64.*int32"):
        x.scatter_add(0, lt.zeros([3, 4], device=device).to(lt.int32), x)
    with pytest.raises(RuntimeError, match=r"scatter_add.*rank.*\[3, 4\].*\[3\]"):
        x.scatter_add(0, lt.zeros([3], device=device).to(lt.int64), x)
    with pytest.raises(IndexError, match=r"scatter_add.*range"):
        x.scatter_add(-3, lt.zeros([3, 4], device=device).to(lt.int64), x)
    with pytest.raises(IndexError, match="gather"):  # host index values out of range, at the op
        x.gather(1, lt.tensor([[4], [0], [1]], device=device)).numpy()


def test_computed_out_of_range_index_raises_at_sync_and_never_reads_outside():
    x = lt.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="lazy")
    bad = lt.tensor([[1, 2], [3, 0], [0, 1]], device="lazy") * 1000  # computed: checked at the sync
    y = x.gather(1, bad)
    with pytest.raises(IndexError, match="gather"):
        y.numpy()
    lt.mark_step()
    ids = lt.tensor([0, 2, 7], device="lazy") + 0
    z = lt.zeros([4, 2], device="lazy").scatter_add(0, ids.unsqueeze(1).expand(3, 2).contiguous(),
                                                    lt.ones([3, 2], device="lazy"))
    with pytest.raises(IndexError, match="scatter_add"):
        z.numpy()


def test_large_vocabulary_embedding_is_cheap(rng):
    # 50k rows: a one-hot formulation would build a [tokens, 50k] comparison; the gather reads one
    # row per token.
    w = lt.tensor(rng.standard_normal((50000, 16)).astype(np.float32), device="lazy", requires_grad=True)
    ids = rng.integers(0, 50000, 300)
    y = F.embedding(lt.tensor(ids, device="lazy"), w)
    (y * y).sum().backward()
    lt.mark_step()
    np.testing.assert_allclose(y.numpy(), w.detach().numpy()[ids], rtol=0)
    want = np.zeros((50000, 16), np.float32)
    np.add.at(want, ids, 2 * w.detach().numpy()[ids])
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_class_targets_out_of_range_raise_index_error(device, rng):
    # Targets in host memory are checked at the op (PyTorch raises IndexError too); -100 is ignored.
    x = lt.tensor(rng.standard_normal((4, 5)).astype(np.float32), device=device)
    for bad in ([0, 5, 1, 2], [0, -1, 1, 2]):
        with pytest.raises(IndexError, match=r"cross_entropy: target -?\d+ is out of bounds for 5 classes"):
            F.cross_entropy(x, lt.tensor(bad, device=device))
    with pytest.raises(IndexError, match="nll_loss: target 7 is out of bounds"):
        F.nll_loss(F.log_softmax(x, 1), lt.tensor([7, 0, 0, 0], device=device))
    ok = F.cross_entropy(x, lt.tensor([0, -100, 4, 2], device=device))
    want = TF.cross_entropy(torch.tensor(x.numpy()), torch.tensor([0, -100, 4, 2]))
    np.testing.assert_allclose(ok.item(), want.item(), rtol=1e-5)
