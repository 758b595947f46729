"""Indexing, slicing, joining and index-driven ops against PyTorch (values, dtypes, gradients, errors)
on cpu and lazy: tensor[...], tensor[...] = v, cat/stack/split/chunk/flip/narrow/select, gather,
scatter_add, index_select, masked_fill, tril/triu, cumsum, argmax/argmin, max/min(dim), F.pad,
F.one_hot, F.embedding."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F
from conftest import assert_close

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(arr, device, dtype=None):
    return lt.tensor(arr, device=device, dtype=dtype), torch.tensor(arr)


def _same(got, ref):
    """got (lazytensor) equals ref (torch) in shape, dtype name and values."""
    assert isinstance(got, lt.Tensor), type(got)
    assert tuple(got.shape) == tuple(ref.shape), f"shape {tuple(got.shape)} vs {tuple(ref.shape)}"
    assert got.dtype.name == str(ref.dtype).replace("torch.", ""), f"{got.dtype} vs {ref.dtype}"
    r = ref.detach().numpy()
    if r.dtype.kind == "f":
        np.testing.assert_allclose(got.detach().numpy(), r, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got.detach().numpy(), r)


# ---- tensor[...] ---------------------------------------------------------------------------------

BASIC = [
    0, -1, 2, (1, 2), (-1, -2, -3), (slice(None), 1), (Ellipsis, 2), (Ellipsis, -1, None), (None, 0),
    (0, None, slice(None), None), slice(1, 3), slice(None, None, 2), slice(-2, None), slice(5, 10),
    slice(3, 1), (slice(None), slice(1, 4, 2)), (slice(None), slice(None), slice(None, None, 3)),
    (1, Ellipsis, slice(0, 1)), Ellipsis, (Ellipsis, None), (slice(None), None, 1, slice(2, -1)),
    (0, 1, 2), (True,), (slice(0, 0),), (-3, slice(1, None, 4), None), (0, Ellipsis, 1, Ellipsis),
    (False, 1),
]


@pytest.mark.parametrize("index", BASIC, ids=[repr(i) for i in BASIC])
def test_getitem_basic_matches_torch(index, device, rng):
    t, r = _pair(rng.standard_normal((3, 4, 5)).astype(np.float32), device)
    _same(t[index], r[index])


ADVANCED = [
    [0, 2], [-1, 0, -3], [[0, 1], [2, 2]], ([0, 2], [1, 3]), ([0, 2], slice(None), [1, 3]),
    (slice(None), [0, 3], [4, 0]), (slice(None), [[0], [3]], [4, 0, 1]), ([1], 0, [2, 3]),
    (0, slice(None), [1, 2]), ([[0, 1]], slice(1, 3), [[1], [4]]), (Ellipsis, [0, -1]),
    (None, [1, 2], None, slice(None), [0, 0]), [], (slice(None), []), ([2, 0], [-1, 1], [4, 0]),
    ([0, 1, 2], Ellipsis, [1, 3, 4]),
]


@pytest.mark.parametrize("index", ADVANCED, ids=[repr(i) for i in ADVANCED])
def test_getitem_advanced_matches_torch(index, device, rng):
    t, r = _pair(rng.standard_normal((3, 4, 5)).astype(np.float32), device)
    _same(t[index], r[index])


def test_getitem_index_tensors_and_masks(device, rng):
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    t, r = _pair(x, device)
    idx = np.array([[3, -1], [0, 2]])
    for it in (lt.tensor(idx, device=device), lt.tensor(idx), lt.tensor(idx, dtype=lt.int32, device=device)):
        _same(t[it], r[torch.tensor(idx)])
        _same(t[:, it], r[:, torch.tensor(idx)])
    _same(t[lt.tensor(2, device=device)], r[torch.tensor(2)])
    # An index computed in a pending lazy graph (range-checked at the sync; negatives wrap).
    computed = lt.tensor([1, 2], device=device) - 2
    _same(t[computed], r[torch.tensor([-1, 0])])
    # Boolean masks: full shape, leading dims, trailing dims, with other indices, all False.
    m = x > 0.3
    _same(t[lt.tensor(m, device=device)], r[torch.tensor(m)])
    m2 = x[:, :, 0] > 0
    _same(t[lt.tensor(m2, device=device)], r[torch.tensor(m2)])
    m3 = np.array([True, False, True])
    _same(t[..., lt.tensor(m3, device=device)], r[..., torch.tensor(m3)])
    _same(t[1, lt.tensor(m2[1], device=device)], r[1, torch.tensor(m2[1])])
    _same(t[lt.tensor(x > 100, device=device)], r[torch.tensor(x > 100)])
    _same(t[[True, False, True, True]], r[[True, False, True, True]])
    _same(t[t > 0], r[r > 0])  # a mask computed on the device


def test_getitem_integer_dtypes_are_exact(device):
    big = np.array([2**40 + 3, -(2**35) - 7, 5, 2**31 + 1], dtype=np.int64)
    t, r = _pair(big, device)
    _same(t[[3, 0, 1]], r[[3, 0, 1]])
    _same(t[1:3], r[1:3])
    b, rb = _pair(big > 0, device)
    _same(b[[0, 2, 1]], rb[[0, 2, 1]])


def test_getitem_errors(device):
    t = lt.ones(3, 4, device=device)
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(IndexError):
        t[0, -5]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(IndexError):
        t[[0, 3]]
    with pytest.raises(IndexError, match="out of bounds"):
        t[lt.tensor([1, -4], device=device)]
    with pytest.raises(IndexError, match="out of bounds"):
        t[:, lt.tensor([4])]
    with pytest.raises(IndexError):
        t[lt.tensor([0.5, 1.0], device=device)]
    with pytest.raises(IndexError):
        t[lt.tensor([True, False], device=device)]  # mask shape mismatch
    with pytest.raises(IndexError):
        t[[0, 1], [0, 1, 2]]  # indices do not broadcast
    with pytest.raises(IndexError):
        t[..., 0, 1, 2]
    with pytest.raises(IndexError):
        t["a"]
    with pytest.raises(ValueError, match="step"):
        t[::-1]
    with pytest.raises(ValueError):
        t[:, ::0]
    with pytest.raises(IndexError):
        lt.tensor(1.0, device=device)[0]
    assert_close(t[1:, 2] * 2, np.full(2, 2.0))


def test_iteration_and_len(device, rng):
    x = rng.standard_normal((3, 2)).astype(np.float32)
    t, r = _pair(x, device)
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3
    for got, ref in zip(rows, r):
        _same(got, ref)
    for got, ref in zip(t.unbind(1), r.unbind(1)):
        _same(got, ref)
    a, b, c = t
    _same(c, r[2])
    with pytest.raises(TypeError):
        iter(lt.tensor(1.0, device=device))


# ---- tensor[...] = value -------------------------------------------------------------------------

SETS = [
    (0, 1.5), (-1, "row"), ((1, 2), -3.0), ((slice(None), 1), "col"), (slice(1, 3), 7.0),
    ((slice(None), slice(None, None, 2)), "strided"), ((Ellipsis, 3), 2.0), ((None, 1), "row"),
    ((slice(0, 3, 2), slice(1, 5, 3)), "box"), (slice(5, 9), 1.0), ((Ellipsis,), 4.0),
    ([0, 2], 9.0), (([0, 2], [1, 4]), "pair"), ((slice(None), [4, 0]), "cols2"), ([-1], "row"),
    (([1, 1], [2, 2]), 5.0), ("mask", 0.0), ("mask", "maskvals"), ("rowmask", "row"),
]


def _set_value(kind, shape, rng, device, count=None):
    shapes = {"row": (5,), "col": (3,), "strided": (3, 3), "box": (2, 2), "pair": (2,), "cols2": (3, 2),
              "maskvals": (count,)}
    v = rng.standard_normal(shapes[kind]).astype(np.float32)
    return lt.tensor(v, device=device), torch.tensor(v)


@pytest.mark.parametrize("index,value", SETS, ids=[f"{i!r}={v!r}" for i, v in SETS])
def test_setitem_matches_torch(index, value, device, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    t, r = _pair(x, device)
    alias = t
    if index == "mask":
        index_l, index_t = t > 0, r > 0
    elif index == "rowmask":
        index_l, index_t = lt.tensor([True, False, True], device=device), torch.tensor([True, False, True])
    else:
        index_l = index_t = index
    count = int((r[index_t] if index != "rowmask" else r[index_t][:, 0]).numel())
    if isinstance(value, str):
        vl, vt = _set_value(value, None, rng, device, count)
    else:
        vl, vt = value, value
    t[index_l] = vl
    r[index_t] = vt
    _same(t, r)
    assert alias is t


def test_setitem_dtypes_broadcast_and_alias(device, rng):
    x = rng.integers(-2**40, 2**40, (4, 3))
    t, r = _pair(x, device)
    t[1] = 7
    r[1] = 7
    t[:, 0] = lt.tensor([1, 2, 3, 4], device=device)
    r[:, 0] = torch.tensor([1, 2, 3, 4])
    t[[0, 3], 2] = 2**41 + 1
    r[[0, 3], 2] = 2**41 + 1
    t[t > 0] = -1
    r[r > 0] = -1
    _same(t, r)
    f, rf = _pair(rng.standard_normal((2, 3, 4)).astype(np.float32), device)
    f[:, 1:] = lt.ones(1, 1, 4, device=device)  # value with a leading 1 and broadcasting
    rf[:, 1:] = torch.ones(1, 1, 4)
    f[..., ::3] = 2.5
    rf[..., ::3] = 2.5
    f[0, :, None] = lt.zeros(3, 1, 4, device=device)
    rf[0, :, None] = torch.zeros(3, 1, 4)
    _same(f, rf)
    b, rb = _pair(rng.standard_normal(5) > 0, device)
    b[1:3] = True
    rb[1:3] = True
    _same(b, rb)
    with pytest.raises(RuntimeError):
        f[0] = lt.ones(2, 4, device=device)
    with pytest.raises(IndexError):
        f[2] = 1.0
    with pytest.raises(ValueError):
        f[::-1] = 1.0


def test_setitem_gradient_flows_like_torch(device, rng):
    x = rng.standard_normal((3, 4))
    v = rng.standard_normal(4)
    tl, tt = lt.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    vl, vt = lt.tensor(v, device=device, requires_grad=True), torch.tensor(v, requires_grad=True)
    yl, yt = tl * 2, tt * 2
    yl[1] = vl * 3
    yt[1] = vt * 3
    yl[:, ::2] = 0.5
    yt[:, ::2] = 0.5
    g = rng.standard_normal((3, 4))
    (yl * lt.tensor(g, device=device)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy())
    np.testing.assert_allclose(tl.grad.numpy(), tt.grad.numpy())
    np.testing.assert_allclose(vl.grad.numpy(), vt.grad.numpy())


# ---- functions -----------------------------------------------------------------------------------

def test_cat_stack_match_torch(device, rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 1, 4)).astype(np.float32)
    c = rng.standard_normal((2, 0, 4)).astype(np.float32)
    (la, ta), (lb, tb), (lc, tc) = _pair(a, device), _pair(b, device), _pair(c, device)
    for dim in (1, -2):
        _same(lt.cat([la, lb, lc, la], dim), torch.cat([ta, tb, tc, ta], dim))
    _same(lt.cat((la, la), 0), torch.cat((ta, ta), 0))
    _same(lt.concat([la, la], -1), torch.concat([ta, ta], -1))
    _same(lt.cat([la]), torch.cat([ta]))
    i, ti = _pair(rng.integers(0, 5, (2, 1, 4)), device)
    _same(lt.cat([i, lb], 1), torch.cat([ti, tb], 1))  # promotes to float32
    _same(lt.cat([i, i], 1), torch.cat([ti, ti], 1))  # stays int64
    for dim in (0, 1, 3, -1, -4):
        _same(lt.stack([la, la * 2, la], dim), torch.stack([ta, ta * 2, ta], dim))
    _same(lt.hstack([la, la]), torch.hstack([ta, ta]))
    _same(lt.vstack([la[0], la[1]]), torch.vstack([ta[0], ta[1]]))
    with pytest.raises(RuntimeError):
        lt.cat([la, lt.ones(3, 3, 4, device=device)], 1)
    with pytest.raises(RuntimeError):
        lt.stack([la, lb])
    with pytest.raises(RuntimeError):
        lt.cat([])
    with pytest.raises(IndexError):
        lt.cat([la, la], 3)
    with pytest.raises(TypeError):
        lt.cat(la)


def test_split_chunk_narrow_select_flip(device, rng):
    t, r = _pair(rng.standard_normal((5, 6)).astype(np.float32), device)
    for args in [(2,), (2, 1), (5, 0), (10,), ([1, 4], 0), ([3, 0, 3], -1), ((6,), 1)]:
        got, ref = t.split(*args), r.split(*args)
        assert isinstance(got, tuple) and len(got) == len(ref), args
        for g, e in zip(got, ref):
            _same(g, e)
    for g, e in zip(lt.split(t, 4, dim=1), torch.split(r, 4, dim=1)):
        _same(g, e)
    for chunks, dim in [(2, 0), (3, 1), (4, 1), (6, 0), (1, -1)]:
        got, ref = t.chunk(chunks, dim), r.chunk(chunks, dim)
        assert len(got) == len(ref)
        for g, e in zip(got, ref):
            _same(g, e)
    _same(t.narrow(1, 2, 3), r.narrow(1, 2, 3))
    _same(lt.narrow(t, 0, -2, 2), torch.narrow(r, 0, -2, 2))
    _same(t.select(1, -1), r.select(1, -1))
    _same(lt.select(t, 0, 3), torch.select(r, 0, 3))
    for dims in [(0,), (1,), (0, 1), (-1,)]:
        _same(t.flip(dims), r.flip(dims))
    _same(t.flip(0, 1), r.flip(0, 1))
    _same(lt.flip(t, [1]), torch.flip(r, [1]))
    _same(t.fliplr(), r.fliplr())
    with pytest.raises(RuntimeError):
        t.split([2, 2])
    with pytest.raises(IndexError):
        t.narrow(0, 3, 3)
    with pytest.raises(IndexError):
        t.select(1, 6)
    with pytest.raises(RuntimeError):
        t.flip(0, 0)


def test_gather_scatter_index_select(device, rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    t, r = _pair(x, device)
    for dim, shape in [(0, (3, 5)), (1, (4, 7)), (-1, (2, 3)), (0, (2, 2))]:
        n = x.shape[dim]
        idx = rng.integers(0, n, shape)
        li, ti = _pair(idx, device)
        _same(t.gather(dim, li), r.gather(dim, ti))
        _same(lt.gather(t, dim, li), torch.gather(r, dim, ti))
        src = rng.standard_normal(shape).astype(np.float32)
        ls, ts = _pair(src, device)
        _same(t.scatter_add(dim, li, ls), r.scatter_add(dim, ti, ts))
        _same(lt.scatter_add(t, dim, li, ls), torch.scatter_add(r, dim, ti, ts))
    t2, r2 = _pair(x, device)
    idx = rng.integers(0, 4, (6, 5))
    src = rng.standard_normal((6, 5)).astype(np.float32)
    assert t2.scatter_add_(0, lt.tensor(idx, device=device), lt.tensor(src, device=device)) is t2
    r2.scatter_add_(0, torch.tensor(idx), torch.tensor(src))
    _same(t2, r2)
    for dim in (0, 1, -1):
        idx = rng.integers(0, x.shape[dim], 7)
        _same(t.index_select(dim, lt.tensor(idx, device=device)), r.index_select(dim, torch.tensor(idx)))
    _same(lt.index_select(t, 0, lt.tensor([], dtype=lt.int64, device=device)),
          torch.index_select(r, 0, torch.tensor([], dtype=torch.int64)))
    big, rbig = _pair(np.array([[2**40 + 1, 3], [-(2**33) - 1, 7]]), device)
    ib, tib = _pair(np.array([[1, 0], [0, 0]]), device)
    _same(big.gather(0, ib), rbig.gather(0, tib))
    _same(big.index_select(1, ib[0]), rbig.index_select(1, tib[0]))
    _same(big.scatter_add(1, ib, big), rbig.scatter_add(1, tib, rbig))
    with pytest.raises(IndexError):
        t.gather(1, lt.tensor([[5]], device=device))
    with pytest.raises(IndexError):
        t.index_select(0, lt.tensor([4], device=device))
    with pytest.raises(RuntimeError):
        t.gather(0, lt.tensor([0, 1], device=device))  # rank mismatch
    with pytest.raises(RuntimeError):
        t.index_select(0, lt.tensor([0.0], device=device))


def test_masked_fill_tril_triu_cumsum(device, rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    t, r = _pair(x, device)
    m = x > 0
    _same(t.masked_fill(lt.tensor(m, device=device), -2.0), r.masked_fill(torch.tensor(m), -2.0))
    row = m[0, 0]
    _same(lt.masked_fill(t, lt.tensor(row, device=device), 1), torch.masked_fill(r, torch.tensor(row), 1))
    _same(t.masked_fill(t < 0, lt.tensor(3.0, device=device)), r.masked_fill(r < 0, torch.tensor(3.0)))
    i, ti = _pair(rng.integers(-9, 9, (4, 4)), device)
    _same(i.masked_fill(i > 0, 2.7), ti.masked_fill(ti > 0, 2.7))
    t2, r2 = _pair(x, device)
    t2.masked_fill_(t2 > 0.5, 0.0)
    r2.masked_fill_(r2 > 0.5, 0.0)
    _same(t2, r2)
    with pytest.raises(RuntimeError):
        t.masked_fill(lt.tensor(x, device=device), 0.0)  # not a bool mask
    # A mask larger than the input broadcasts it (PyTorch); in place, the result must fit.
    _same(t[0].masked_fill(lt.tensor(m, device=device), 0.0), r[0].masked_fill(torch.tensor(m), 0.0))
    with pytest.raises(RuntimeError):
        t[0].masked_fill_(lt.tensor(m, device=device), 0.0)
    for k in (0, 1, -1, 3, -7):
        _same(t.tril(k), r.tril(k))
        _same(lt.triu(t, k), torch.triu(r, k))
    _same(i.tril(), ti.tril())
    with pytest.raises(RuntimeError):
        lt.ones(3, device=device).tril()
    for dim in (0, 1, -1):
        _same(t.cumsum(dim), r.cumsum(dim))
    _same(lt.cumsum(i, 0), torch.cumsum(ti, 0))  # int64
    b, rb = _pair(x > 0, device)
    _same(b.cumsum(2), rb.cumsum(2))  # bool -> int64
    _same(i.cumsum(1, dtype=lt.float64), ti.cumsum(1, dtype=torch.float64))
    big, rbig = _pair(np.array([2**40, 3, -(2**38), 1]), device)
    _same(big.cumsum(0), rbig.cumsum(0))


def test_argmax_argmin_max_min_dim(device, rng):
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    x[1, 2, :] = x[1, 0, :]  # ties: the first index wins
    t, r = _pair(x, device)
    for dim in (None, 0, 1, -1):
        for keepdim in (False, True):
            if dim is None and keepdim:
                continue
            _same(t.argmax(dim, keepdim), r.argmax(dim, keepdim))
            _same(lt.argmin(t, dim=dim, keepdim=keepdim), torch.argmin(r, dim=dim, keepdim=keepdim))
    _same(lt.argmax(t), torch.argmax(r))
    _same(t.argmax(keepdim=True), r.argmax(keepdim=True))
    ties, rties = _pair(np.array([[1, 3, 3], [2, 2, 0]]), device)
    _same(ties.argmax(1), rties.argmax(1))
    _same(ties.argmin(0), rties.argmin(0))
    for dim, keepdim in [(0, False), (1, True), (-1, False)]:
        got, ref = t.max(dim, keepdim), r.max(dim, keepdim)
        assert isinstance(got, tuple) and got._fields == ("values", "indices")
        _same(got.values, ref.values)
        _same(got.indices, ref.indices)
        v, ix = lt.min(t, dim=dim, keepdim=keepdim)
        _same(v, r.min(dim, keepdim)[0])
        _same(ix, r.min(dim, keepdim)[1])
    assert type(t.max(0)).__name__ == "max" and type(t.min(0)).__name__ == "min"
    _same(ties.max(1).values, rties.max(1).values)
    _same(t.max(), r.max())
    with pytest.raises(IndexError):
        t.argmax(3)
    with pytest.raises(IndexError):
        lt.ones(0, 3, device=device).argmax(0)


def test_pad_one_hot_embedding(device, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t, r = _pair(x, device)
    for pads in [(1, 2), (0, 0, 2, 1), (1, 1, 1, 1, 1, 1), (-1, 2), (2, -3, 0, 1), (3, 0)]:
        _same(F.pad(t, pads), TF.pad(r, pads))
        _same(F.pad(t, pads, value=-1.5), TF.pad(r, pads, value=-1.5))
    i, ti = _pair(rng.integers(-5, 5, (2, 3)), device)
    _same(F.pad(i, (1, 1), value=7), TF.pad(ti, (1, 1), value=7))
    with pytest.raises(RuntimeError):
        F.pad(t, (1,))
    with pytest.raises(RuntimeError):
        F.pad(t, (1, 1) * 4)
    with pytest.raises(NotImplementedError, match="reflect"):
        F.pad(t, (1, 1), mode="reflect")
    idx = rng.integers(0, 6, (3, 4))
    li, ti = _pair(idx, device)
    _same(F.one_hot(li), TF.one_hot(ti))
    _same(F.one_hot(li, 9), TF.one_hot(ti, 9))
    with pytest.raises(RuntimeError):
        F.one_hot(li, 3)
    with pytest.raises(RuntimeError):
        F.one_hot(li.to(lt.int32), 9)
    with pytest.raises(RuntimeError):
        F.one_hot(lt.tensor([-1, 2], device=device), 4)
    w = rng.standard_normal((7, 3)).astype(np.float32)
    lw, tw = _pair(w, device)
    _same(F.embedding(li, lw), TF.embedding(ti, tw))
    _same(F.embedding(li.to(lt.int32), lw), TF.embedding(ti.int(), tw))
    _same(F.embedding(li, lw, padding_idx=2), TF.embedding(ti, tw, padding_idx=2))  # row kept as is
    with pytest.raises(IndexError):
        F.embedding(lt.tensor([7], device=device), lw)
    with pytest.raises(RuntimeError):
        F.embedding(lt.tensor([1.0], device=device), lw)


# ---- gradients -----------------------------------------------------------------------------------

GRADS = {
    "getitem_basic": (lambda m, a: a[1:, ::2, None, -1] * 2, [(3, 5, 4)]),
    "getitem_int_list": (lambda m, a: a[[2, 0, 2, -1]], [(3, 4)]),
    "getitem_two_lists": (lambda m, a: a[[0, 2, 2], :, [1, 0, 1]], [(3, 2, 4)]),
    "getitem_mask": (lambda m, a: a[a > 0], [(3, 4)]),
    "cat": (lambda m, a, b: m.cat([a, b, a], 1), [(2, 3), (2, 1)]),
    "stack": (lambda m, a, b: m.stack([a, b], -1), [(2, 3), (2, 3)]),
    "split": (lambda m, a: a.split([1, 3], 1)[1] * a.split(2, 1)[0].sum(), [(3, 4)]),
    "flip": (lambda m, a: a.flip(0, 1), [(3, 4)]),
    "gather": (lambda m, a: a.gather(1, m.tensor([[0, 2, 2], [1, 1, 0]])), [(2, 3)]),
    "scatter_add": (lambda m, a, s: a.scatter_add(0, m.tensor([[1, 0, 1], [1, 1, 1]]), s), [(2, 3), (2, 3)]),
    "index_select": (lambda m, a: a.index_select(1, m.tensor([2, 0, 2])), [(2, 3)]),
    "embedding": (lambda m, w: m.nn.functional.embedding(m.tensor([[1, 4], [4, 0]]), w), [(5, 3)]),
    "embedding_padding": (lambda m, w: m.nn.functional.embedding(m.tensor([[1, 4], [4, 0]]), w, padding_idx=4),
                          [(5, 3)]),
    "pad": (lambda m, a: m.nn.functional.pad(a, (1, 2, -1, 1), value=0.5), [(2, 3, 4)]),
    "cumsum": (lambda m, a: a.cumsum(1), [(3, 4)]),
    "tril": (lambda m, a: a.tril(-1) + a.triu(1) * 2, [(4, 4)]),
    "max_dim": (lambda m, a: a.max(1).values[:, None] + a.min(0, keepdim=True)[0], [(3, 4)]),
    "masked_fill": (lambda m, a: a.masked_fill(a > 0.5, 1.0), [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradient_matches_torch(name, device, rng):
    fn, shapes = GRADS[name]
    arrays = [rng.standard_normal(s) for s in shapes]
    lt_in = [lt.tensor(a, device=device, requires_grad=True) for a in arrays]
    th_in = [torch.tensor(a, requires_grad=True) for a in arrays]

    class _Lt:  # `m.tensor` builds index tensors on the device under test
        def __getattr__(self, k):
            return getattr(lt, k)

        @staticmethod
        def tensor(v):
            return lt.tensor(v, device=device)

    out, ref = fn(_Lt(), *lt_in), fn(torch, *th_in)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(tuple(ref.shape))
    out.backward(lt.tensor(g, device=device))
    ref.backward(torch.tensor(g))
    for i, (a, b) in enumerate(zip(lt_in, th_in)):
        assert a.grad is not None, f"input {i} got no gradient"
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=f"{name}: gradient of input {i}")


def test_embedding_module_gradient(device, rng):
    tm = torch.nn.Embedding(6, 3, padding_idx=1)
    lm = lt.nn.Embedding(6, 3, padding_idx=1).to(device)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w))
    lm.weight.data = lt.tensor(w, device=device)
    idx = rng.integers(0, 6, (4, 5))
    yl, yt = lm(lt.tensor(idx, device=device)), tm(torch.tensor(idx))
    _same(yl, yt)
    g = rng.standard_normal((4, 5, 3)).astype(np.float32)
    yl.backward(lt.tensor(g, device=device))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(lm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---- lazy graphs ---------------------------------------------------------------------------------

def test_cat_fuses_into_one_kernel():
    a = lt.randn(4, 3, device="lazy")
    b = lt.randn(4, 5, device="lazy")
    lt.mark_step()
    y = (lt.cat([a, b], 1) * 2).relu()
    lt.mark_step()
    assert lt.metrics.last_graph()["kernels"] == 1
    assert_close(y, np.maximum(np.concatenate([a.numpy(), b.numpy()], 1) * 2, 0))


def test_indexing_stays_lazy_without_masks():
    x = lt.randn(6, 5, device="lazy")
    lt.mark_step()
    before = lt.metrics.counters()["syncs"]
    y = x[1:4, ::2] + x[[0, 5, 2]][:, [1, 1, 0]] + x.flip(0)[:3, :3]
    x2 = x * 1
    x2[0] = 3.0
    x2[[1, 2]] = x2[[2, 1]]
    z = lt.cat(list(x2.split(2)), 1).sum()
    assert lt.metrics.counters()["syncs"] == before
    xn = x.numpy()
    ref = xn[1:4, ::2] + xn[[0, 5, 2]][:, [1, 1, 0]] + xn[::-1][:3, :3]
    assert_close(y, ref)
    x2n = xn.copy()
    x2n[0] = 3.0
    x2n[[1, 2]] = x2n[[2, 1]]
    assert_close(z, x2n.sum(), rtol=1e-5, atol=1e-5)


def test_boolean_mask_is_a_counted_sync():
    x = lt.randn(8, device="lazy")
    lt.mark_step()
    before = lt.metrics.syncs_by_reason().get("control_flow", 0)
    y = x[x > 0]
    after = lt.metrics.syncs_by_reason().get("control_flow", 0)
    assert after == before + 1
    xn = x.numpy()
    assert_close(y, xn[xn > 0])
