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


def test_dumped_training_step_with_donated_parameters_replays_exactly(tmp_path, rng, monkeypatch):
    """The optimizer writes its results into the parameters' buffers (donation); the dump must
    hold the inputs as the step read them, so `replay --check` matches on its own backend and on
    the reference interpreter (issue 26, item 9)."""
    model = lt.nn.Sequential(lt.nn.Linear(6, 12), lt.nn.ReLU(), lt.nn.Linear(12, 3)).to("lazy")
    opt = lt.optim.AdamW(model.parameters(), lr=0.05)
    x = lt.tensor(rng.standard_normal((8, 6)).astype(np.float32), device="lazy")
    y = lt.tensor(rng.integers(0, 3, 8), device="lazy")

    def step():
        opt.zero_grad()
        lt.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        lt.mark_step()

    step()  # state created; the next step's graph is every step's
    lt.metrics.reset()
    monkeypatch.setenv("LT_DUMP_DIR", str(tmp_path))
    monkeypatch.setenv("LT_DUMP_DATA", "1")
    lt._C._clear_graph_cache()  # compile again, so the dump is written
    step()
    monkeypatch.delenv("LT_DUMP_DIR")
    assert lt.metrics.counters()["donated_buffers"] > 0
    dumps = [p for p in tmp_path.glob("*.json")]
    assert dumps, "the step was not compiled in this test (cached), so nothing was dumped"
    for path in dumps:
        for backend in ("cpu", "reference"):
            rep = lt.debug.replay(path, backend=backend, check=True)
            assert rep["checked"] and rep["ok"], (backend, rep["message"])
