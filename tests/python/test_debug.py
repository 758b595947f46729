"""lazytensor.debug: readable IR, Graphviz, kernel sources, dump and replay (with checks)."""
import json

import numpy as np
import pytest

import lazytensor as lt


def _pending(rng):
    x = lt.tensor(rng.standard_normal((4, 8)).astype(np.float32), device="lazy")
    w = lt.tensor(rng.standard_normal((8, 3)).astype(np.float32), device="lazy")
    return x, w, ((x @ w).relu() * 2.5).sum(1)


def test_ir_text_and_dot_do_not_sync(rng):
    x, w, y = _pending(rng)
    lt.metrics.reset()
    text = lt.debug.ir_text(y)
    dot = lt.debug.ir_dot(y)
    assert "matmul" in text and "relu" in text and "reduce_sum" in text
    assert dot.lstrip().startswith("digraph") and "matmul" in dot
    assert lt.metrics.counters()["syncs"] == 0 and y._is_pending
    assert "relu" in lt.debug.ir_text([y, x])
    with pytest.raises(TypeError):
        lt.debug.ir_text(3)
    with pytest.raises(ValueError):
        lt.debug.ir_text()


def test_kernel_sources_of_last_graph(rng):
    _, _, y = _pending(rng)
    lt.mark_step()
    srcs = lt.debug.kernel_sources()
    assert isinstance(srcs, list) and srcs and all(isinstance(s, str) and s for s in srcs)


def test_dump_and_replay(tmp_path, rng):
    x, w, y = _pending(rng)
    path = tmp_path / "step.json"
    key = lt.debug.dump(path, y)
    assert isinstance(key, str) and key
    trace = json.loads(path.read_text())
    assert trace["format"] == "lazytensor-trace" and any(n["op"] == "matmul" for n in trace["nodes"])
    want = np.maximum(x.numpy() @ w.numpy(), 0).astype(np.float64) * 2.5
    np.testing.assert_allclose(y.numpy(), want.sum(1), rtol=1e-5, atol=1e-5)
    for backend in ("reference", "cpu"):
        rep = lt.debug.replay(path, backend=backend, check=True)
        assert rep["ok"] and rep["checked"] and rep["outputs"] == 1, rep["message"]
        assert rep["max_abs_error"] < 1e-4
        np.testing.assert_allclose(rep["results"][0].numpy(), y.numpy(), rtol=1e-5, atol=1e-5)


def test_replay_detects_a_mismatch(tmp_path, rng):
    _, _, y = _pending(rng)
    path = tmp_path / "t.json"
    lt.debug.dump(path, y)
    out = tmp_path / "t.outputs.bin"
    assert out.exists()
    data = np.fromfile(out, dtype=np.float32)
    (data + 1.0).astype(np.float32).tofile(out)
    rep = lt.debug.replay(path, backend="reference", check=True)
    assert rep["checked"] and not rep["ok"] and rep["max_abs_error"] > 0.5


def test_replay_of_bad_input_is_an_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "lazytensor-trace", "version": 999}')
    with pytest.raises((RuntimeError, ValueError)):
        lt.debug.replay(bad, backend="reference")
    with pytest.raises((RuntimeError, ValueError)):
        lt.debug.replay(tmp_path / "missing.json")
