"""The lazy device: graphs compile once and hit the cache, runtime scalars never recompile, sync
points compute only what they need and record their reasons, in-place updates, backends."""
import numpy as np
import pytest

import lazytensor as lt
from conftest import assert_close


def _np_step(x, w, b):
    return np.maximum(np.sin(x * w + b) * 2, 0).sum(1)


def test_acceptance_ten_steps_compile_once_into_one_kernel():
    """Issue 2: y = ((x * w + b).sin() * 2).relu().sum(1) for 10 steps on "lazy"."""
    rng = np.random.default_rng(2)
    xn = rng.standard_normal((32, 64)).astype(np.float32)
    wn = rng.standard_normal((64,)).astype(np.float32)
    bn = rng.standard_normal((64,)).astype(np.float32)
    x, w, b = (lt.tensor(v, device="lazy") for v in (xn, wn, bn))
    lt.mark_step()
    want = _np_step(xn.astype(np.float64), wn.astype(np.float64), bn.astype(np.float64))
    lt.metrics.reset()
    for _ in range(10):
        y = ((x * w + b).sin() * 2).relu().sum(1)
        lt.mark_step()
        assert not y._is_pending
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-4)
    c = lt.metrics.counters()
    assert c["graph_compiles"] == 1
    assert c["graph_cache_hits"] == 9
    assert lt.metrics.last_graph()["kernels"] == 1
    assert lt.metrics.syncs_by_reason()["mark_step"] == 10


def test_acceptance_changing_python_scalar_compiles_once():
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((100,)).astype(np.float32)
    x = lt.tensor(xn, device="lazy")
    lt.mark_step()
    lt.metrics.reset()
    for step in range(1, 11):
        scale = 0.1 * step
        y = (x * scale).sum()
        lt.mark_step()
        want = (xn * np.float32(scale)).astype(np.float64).sum()
        assert y.item() == pytest.approx(want, rel=1e-5, abs=1e-4)
    c = lt.metrics.counters()
    assert c["graph_compiles"] == 1
    assert c["graph_cache_hits"] == 9


def test_new_data_same_shapes_hits_the_cache(rng):
    f = lambda a, b: (a * b + 1).tanh().mean(0)  # noqa: E731
    lt.metrics.reset()
    for _ in range(3):
        an, bn = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5,)).astype(np.float32)
        out = f(lt.tensor(an, device="lazy"), lt.tensor(bn, device="lazy"))
        assert_close(out, np.tanh(an.astype(np.float64) * bn + 1).mean(0), rtol=1e-5, atol=1e-6)
    c = lt.metrics.counters()
    assert c["graph_compiles"] == 1 and c["graph_cache_hits"] == 2


def test_tracing_does_not_compute_until_a_sync(rng):
    x = lt.tensor(rng.standard_normal((4, 4)).astype(np.float32), device="lazy")
    lt.mark_step()
    lt.metrics.reset()
    y = (x + 1).exp() * 3
    assert y._is_pending
    assert y.shape == (4, 4) and y.dtype == lt.float32  # known at trace time
    c = lt.metrics.counters()
    assert c["syncs"] == 0 and c["graph_compiles"] == 0
    assert c["traced_ops"] >= 3


def test_materializing_one_tensor_leaves_others_pending(rng):
    x = lt.tensor(rng.standard_normal((8,)).astype(np.float32), device="lazy")
    lt.mark_step()
    a, b = x.sin().sum(), x.cos()
    assert lt._C.pending_tensor_count() == 2
    a.item()
    assert not a._is_pending and b._is_pending
    assert lt._C.pending_tensor_count() == 1
    lt.mark_step()
    assert not b._is_pending
    assert lt._C.pending_tensor_count() == 0
    assert_close(b, np.cos(x.numpy().astype(np.float64)))


def test_sync_materializes_the_given_tensors(rng):
    x = lt.tensor(rng.standard_normal((5,)).astype(np.float32), device="lazy")
    a, b, c = x * 2, x + 1, x - 1
    lt.sync(a, b)
    assert not a._is_pending and not b._is_pending and c._is_pending
    lt.sync([c])
    assert not c._is_pending
    assert lt.metrics.syncs_by_reason()["sync"] >= 2


def test_sync_reasons():
    x = lt.tensor(np.arange(4, dtype=np.float32), device="lazy")
    lt.mark_step()
    lt.metrics.reset()
    (x.sum()).item()
    (x * 2).numpy()
    (x * 3).cpu()
    repr(x * 4)
    (x * 5).tolist()
    if (x.sum() > 1):
        pass
    np.asarray(x * 6)
    lt.mark_step()
    r = lt.metrics.syncs_by_reason()
    assert r["item"] == 1
    assert r["numpy"] == 2
    assert r["to_cpu"] == 1
    assert r["print"] == 1
    assert r["tolist"] == 1
    assert r["control_flow"] == 1
    assert r["mark_step"] == 1
    assert lt.metrics.counters()["syncs"] == 8


def test_metrics_shapes():
    x = lt.tensor([1.0, 2.0], device="lazy")
    (x * 2).sum().item()
    c = lt.metrics.counters()
    for key in ("traced_ops", "syncs", "graph_compiles", "graph_cache_hits", "disk_cache_hits",
                "kernels_compiled", "kernel_launches", "fallbacks"):
        assert isinstance(c[key], int)
    g = lt.metrics.last_graph()
    for key in ("hash", "nodes", "kernels", "cache", "compile_ms", "run_ms", "inputs", "outputs",
                "backend"):
        assert key in g
    assert g["cache"] in ("memory", "disk", "compiled")
    assert g["outputs"] >= 1 and g["nodes"] >= 1 and isinstance(g["hash"], str) and g["hash"]
    for key in ("mark_step", "item", "numpy", "print", "to_cpu"):
        assert key in lt.metrics.syncs_by_reason()
    report = lt.metrics.report()
    assert isinstance(report, str) and "graph_compiles" in report
    lt.metrics.reset()
    assert all(v == 0 for v in lt.metrics.counters().values())
    assert lt.metrics.last_graph()["hash"] == ""


def test_mark_step_with_nothing_pending():
    lt.mark_step()
    lt.metrics.reset()
    lt.mark_step()
    assert lt.metrics.counters()["graph_compiles"] == 0


def test_inplace_updates_on_lazy_and_cpu(device, rng):
    xn = rng.standard_normal((3, 4)).astype(np.float32)
    dn = rng.standard_normal((4,)).astype(np.float32)
    x, d = lt.tensor(xn, device=device), lt.tensor(dn, device=device)
    alias = x
    want = xn.astype(np.float64)
    x += d
    want = want + dn
    x *= 2
    want = want * 2
    x -= 0.5
    want = want - 0.5
    x /= d.abs() + 1
    want = want / (np.abs(dn) + 1)
    x.add_(d, alpha=3)
    want = want + 3 * dn
    x.mul_(0.25).sub_(1)
    want = want * 0.25 - 1
    x.clamp_(-1, 1)
    want = np.clip(want, -1, 1)
    assert alias is x
    assert_close(x, want, atol=1e-5)
    x.exp_().relu_()
    assert_close(x, np.exp(want), atol=1e-5)
    x.zero_()
    assert_close(x, np.zeros((3, 4)))
    x.fill_(2.5)
    assert_close(x, np.full((3, 4), 2.5))
    x.copy_(d)
    assert_close(x, np.broadcast_to(dn, (3, 4)))
    i = lt.tensor([1, 2, 3], device=device)
    i += 2
    assert_close(i, [3, 4, 5], dtype=lt.int64)


def test_inplace_in_a_loop_does_not_grow_the_graph(rng):
    x = lt.tensor(rng.standard_normal((16,)).astype(np.float32), device="lazy")
    acc = lt.zeros(16, device="lazy")
    lt.mark_step()
    lt.metrics.reset()
    for step in range(5):
        acc += x * (step + 1.0)
        lt.mark_step()
    assert lt.metrics.counters()["graph_compiles"] == 1
    assert_close(acc, x.numpy().astype(np.float64) * 15, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["lazy:0", "lazy:cpu", "lazy:reference"])
def test_named_lazy_backends(rng, name):
    xn = rng.standard_normal((6, 7)).astype(np.float32)
    x = lt.tensor(xn, device=name)
    assert x.device.type == "lazy" and str(x.device) == name
    y = (x.exp() - x * 2).amax(1)
    lt.mark_step()
    assert lt.metrics.last_graph()["backend"] == lt.device(name).backend
    assert_close(y, (np.exp(xn.astype(np.float64)) - xn * 2).max(1), rtol=1e-5, atol=1e-5)


def test_set_lazy_backend():
    before = lt._C.default_lazy_backend()
    try:
        lt.set_lazy_backend("reference")
        x = lt.tensor([1.0, 4.0, 9.0], device="lazy")
        y = x.sqrt() + 1
        assert_close(y, [2.0, 3.0, 4.0])
        assert lt.metrics.last_graph()["backend"] == "reference"
    finally:
        lt.set_lazy_backend(before)


def test_moving_between_devices(rng):
    xn = rng.standard_normal((3, 2)).astype(np.float32)
    c = lt.tensor(xn)
    z = c.to("lazy")
    assert z.device == lt.device("lazy")
    y = (z * 2).to("cpu")
    assert y.device == lt.device("cpu")
    assert_close(y, xn * 2.0)
    assert_close((z + 1).to(lt.device("lazy:reference")), xn + 1.0)
    assert_close(z.to("lazy", lt.float64), xn.astype(np.float64), dtype=lt.float64)
    assert_close(z.to(device="cpu", dtype=lt.int32), xn.astype(np.int32), dtype=lt.int32)
