"""Eager views that share memory (runtime/memory_views.h) and small products without oneDNN
(backends/cpu/small_gemm.h): on `cpu`, a reshape or a contiguous slice of materialized data is its
base's memory, as in PyTorch, so it runs no kernel and compiles nothing at any offset; values,
view semantics (writes through either side) and gradients stay PyTorch's."""
import numpy as np
import pytest
import torch

import lazytensor as lt

M = lt.metrics


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("index", [
    (slice(1, 5),), (3,), (slice(None), ), (0, slice(2, 7)), (2, 1), (slice(4, 5), slice(1, 3)),
    (slice(None), slice(1, 3)), (slice(0, 6, 2),), (Ellipsis, 2), (slice(2, 2),),
])
def test_slices_and_selects_match_torch(index):
    rng = np.random.default_rng(0)
    a = _rand(rng, 6, 8, 3)
    got = lt.tensor(a)[index]
    want = torch.from_numpy(a)[index]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_contiguous_views_share_the_base_memory_and_others_copy():
    rng = np.random.default_rng(1)
    base = lt.tensor(_rand(rng, 6, 8))
    mem = base.numpy()
    for view in (base[1:5], base[3], base.reshape(48), base.view(2, 24), base[2:4].reshape(-1)[3:9],
                 base.narrow(0, 2, 3), base.unsqueeze(0)[0, 4]):
        assert np.shares_memory(view.numpy(), mem)
    for copy in (base[:, 1:3], base[::2], base.t()):
        assert not np.shares_memory(copy.numpy(), mem)
    # A write through NumPy reaches every view, as with torch.
    row = base[2]
    mem[2, 5] = 123.0
    assert row.numpy()[5] == 123.0 and base[1:3].numpy()[1, 5] == 123.0


def test_view_semantics_survive_writes_to_either_side():
    rng = np.random.default_rng(2)
    a_np = _rand(rng, 5, 4)
    a, ta = lt.tensor(a_np), torch.from_numpy(a_np.copy())
    v, tv = a[1:3], ta[1:3]
    flat, tflat = a.reshape(-1), ta.reshape(-1)
    v.mul_(10)
    tv.mul_(10)
    a.add_(1)
    ta.add_(1)
    flat[0] = -7.0
    tflat[0] = -7.0
    for got, want in ((a, ta), (v, tv), (flat, tflat)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    # The memory the view shared is not written in place under it: a result computed from a base
    # whose memory a view holds goes to new memory.
    keep = a[0].clone()
    row = a[0]
    a.copy_(a * 3)
    np.testing.assert_allclose(row.numpy(), (keep * 3).numpy(), rtol=1e-6)


def test_gradients_through_shared_views_match_torch():
    rng = np.random.default_rng(3)
    x_np = _rand(rng, 4, 6)
    x = lt.tensor(x_np, requires_grad=True)
    tx = torch.from_numpy(x_np.copy()).requires_grad_()
    for lib, t in ((lt, x), (torch, tx)):
        (t[1:3].reshape(12).sin().sum() + (t[2] * t[3]).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_slicing_a_corpus_at_many_offsets_compiles_nothing():
    data = lt.tensor(np.random.default_rng(4).integers(0, 50, 2000))
    _ = lt.stack([data[0:32], data[5:37]])  # warm the stack kernel
    before = M.counters()
    rows = [data[i:i + 32] for i in range(0, 1500, 13)]
    after = M.counters()
    assert after["graph_compiles"] == before["graph_compiles"]
    assert after["kernel_launches"] == before["kernel_launches"]
    np.testing.assert_array_equal(rows[7].numpy(), data.numpy()[91:123])


@pytest.mark.parametrize("shapes", [
    ((16, 16), (16, 16), False, False), ((7, 5), (5, 9), False, False), ((3, 4), (9, 4), False, True),
    ((6, 3), (6, 8), True, False), ((2, 3, 4, 5), (5, 6), False, False),
    ((2, 1, 4, 5), (3, 5, 2), False, False), ((1, 8), (8, 1), False, False),
    ((12, 10), (8, 12), True, True), ((40, 40), (40, 40), False, False),
])
def test_products_small_and_large_match_numpy_float64(shapes):
    """Below small_gemm's bound the loop runs, above it oneDNN: both against float64."""
    (sa, sb, ta, tb) = shapes
    rng = np.random.default_rng(5)
    a_np, b_np = _rand(rng, *sa), _rand(rng, *sb)
    a, b = lt.tensor(a_np), lt.tensor(b_np)
    a64, b64 = a_np.astype(np.float64), b_np.astype(np.float64)
    if ta:
        a, a64 = a.transpose(-1, -2), np.swapaxes(a64, -1, -2)
    if tb:
        b, b64 = b.transpose(-1, -2), np.swapaxes(b64, -1, -2)
    for dev in ("cpu", "lazy"):
        got = (a.to(dev) @ b.to(dev)).numpy()
        np.testing.assert_allclose(got, np.matmul(a64, b64), rtol=1e-5, atol=1e-5)


def test_strided_views_run_no_kernel_and_fuse_into_their_reader():
    """A transpose, an expand or a column slice of data is computed inside the op that reads it
    (deferred_view): x @ w.t() is one run, with w read transposed, as PyTorch reads the strides."""
    rng = np.random.default_rng(6)
    x_np, w_np = _rand(rng, 8, 5), _rand(rng, 7, 5)
    x, w = lt.tensor(x_np), lt.tensor(w_np)
    before = M.counters()["kernel_launches"]
    wt, col, wide = w.t(), w[:, 1:4], w[:1].expand(4, 5)
    assert M.counters()["kernel_launches"] == before
    np.testing.assert_allclose((x @ wt).numpy(), x_np @ w_np.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(col.numpy(), w_np[:, 1:4])
    np.testing.assert_array_equal(wide.numpy(), np.broadcast_to(w_np[:1], (4, 5)))
    # Views of views, writes through them, and the base written after: PyTorch's values.
    tw = torch.from_numpy(w_np.copy())
    v, tv = w.t()[1:3], tw.t()[1:3]
    v.mul_(2)
    tv.mul_(2)
    w.add_(1)
    tw.add_(1)
    np.testing.assert_allclose(v.numpy(), tv.numpy(), rtol=1e-6)
    np.testing.assert_allclose(w.numpy(), tw.numpy(), rtol=1e-6)


def test_column_slices_at_many_offsets_compile_a_few_kernels():
    data = lt.tensor(np.random.default_rng(7).standard_normal((16, 300)).astype(np.float32))
    outs = [(data[:, i:i + 8] * 2.0).sum() for i in range(3)]  # warm-up
    c0 = M.counters()["graph_compiles"]
    outs = [(data[:, i:i + 8] * 2.0).sum().item() for i in range(3, 103)]
    assert M.counters()["graph_compiles"] - c0 <= 2
    np.testing.assert_allclose(outs[50], (data.numpy()[:, 53:61] * 2).sum(), rtol=1e-5)


def test_eager_cat_stack_and_pad_run_as_one_graph():
    """Composite runtime ops (EagerComposite) run one graph on an eager device, not one kernel per
    internal op; values and gradients as torch's."""
    rng = np.random.default_rng(8)
    pieces = [_rand(rng, 4, 3 + i % 3) for i in range(8)]
    xs = [lt.tensor(p, requires_grad=True) for p in pieces]
    ts = [torch.from_numpy(p.copy()).requires_grad_() for p in pieces]
    k0 = M.counters()["kernel_launches"]
    out = lt.cat(xs, 1)
    assert M.counters()["kernel_launches"] - k0 == 1
    k0 = M.counters()["kernel_launches"]
    st = lt.stack([x[:, :3] for x in xs])
    padded = lt.nn.functional.pad(xs[0], (2, 1))
    assert M.counters()["kernel_launches"] - k0 == 2
    tout = torch.cat(ts, 1)
    np.testing.assert_array_equal(out.numpy(), tout.detach().numpy())
    np.testing.assert_array_equal(st.numpy(), torch.stack([t[:, :3] for t in ts]).detach().numpy())
    np.testing.assert_array_equal(padded.numpy(), torch.nn.functional.pad(ts[0], (2, 1)).detach().numpy())
    w = _rand(rng, *out.shape)
    (out * lt.tensor(w)).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def _eager_runs():
    return M.syncs_by_reason().get("eager", 0)


def test_eager_backward_and_recurrent_layers_run_one_graph_each():
    """On an eager device the backward pass and a recurrent layer's forward are traced and run as
    one graph each (as PyTorch runs an LSTM as one native call); values and gradients as torch's."""
    rng = np.random.default_rng(9)
    x_np, w_np = _rand(rng, 4, 5), _rand(rng, 5, 3)
    x, w = lt.tensor(x_np, requires_grad=True), lt.tensor(w_np, requires_grad=True)
    tx, tw = (torch.from_numpy(a.copy()).requires_grad_() for a in (x_np, w_np))
    loss = ((x @ w).tanh() * 2).sum()
    before = _eager_runs()
    loss.backward()
    assert _eager_runs() - before == 1
    ((tx @ tw).tanh() * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)

    lt.manual_seed(0)
    torch.manual_seed(0)
    ref = torch.nn.LSTM(5, 6, 2)
    mine = lt.nn.LSTM(5, 6, 2)
    mine.load_state_dict({k: lt.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    inp_np, h0_np, c0_np = _rand(rng, 7, 3, 5), _rand(rng, 2, 3, 6), _rand(rng, 2, 3, 6)
    inp = lt.tensor(inp_np, requires_grad=True)
    tinp = torch.from_numpy(inp_np.copy()).requires_grad_()
    h0, c0 = lt.tensor(h0_np), lt.tensor(c0_np)
    before = _eager_runs()
    out, (h, c) = mine(inp, (h0, c0))
    assert _eager_runs() - before == 1
    tout, (th, tc) = ref(tinp, (torch.from_numpy(h0_np), torch.from_numpy(c0_np)))
    for a, b in ((out, tout), (h, th), (c, tc)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    (out.sin().sum() + h.sum()).backward()
    (tout.sin().sum() + th.sum()).backward()
    np.testing.assert_allclose(inp.grad.numpy(), tinp.grad.numpy(), rtol=1e-4, atol=1e-6)
    for (name, p), tp in zip(mine.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


def test_eager_fuse_off_runs_op_by_op_with_the_same_values():
    """LT_EAGER_FUSE=0 (read at start): composites run each internal op as a kernel again."""
    import json
    import os
    import subprocess
    import sys
    code = (
        "import json, numpy as np, lazytensor as lt\n"
        "lt.manual_seed(0)\n"
        "m = lt.nn.LSTM(5, 6, 2)\n"
        "x = lt.tensor(np.random.default_rng(0).standard_normal((7, 3, 5)).astype(np.float32),"
        " requires_grad=True)\n"
        "s = lt.metrics.syncs_by_reason().get('eager', 0)\n"
        "out, _ = m(x)\n"
        "runs = lt.metrics.syncs_by_reason().get('eager', 0) - s\n"
        "out.sin().sum().backward()\n"
        "print(json.dumps([runs, out.numpy().tolist(), x.grad.numpy().tolist()]))\n")
    got = {}
    for fuse in ("1", "0"):
        r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, LT_EAGER_FUSE=fuse),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        got[fuse] = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["1"][0] == 3 and got["0"][0] > 50, (got["1"][0], got["0"][0])  # h0, c0, one graph
    for k in (1, 2):
        np.testing.assert_allclose(np.array(got["0"][k]), np.array(got["1"][k]), rtol=1e-5, atol=1e-6)
