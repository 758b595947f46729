"""Dynamic shapes (issue 30): a graph whose input sizes change compiles once with those sizes
symbolic. lt.mark_dynamic marks a dim; without marks, the second size seen at a call site makes the
dims that changed symbolic (torch.compile's automatic dynamic shapes); LT_DYNAMIC=0 turns that off.
Values are checked against numpy (and one symbolic compile against the static compile at the same
size), compile counts exactly."""
import os
import subprocess
import sys

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F


@pytest.fixture(autouse=True)
def fresh_cache():
    lt._C._clear_graph_cache()
    yield


def counters():
    return dict(lt.metrics.counters())


def delta(before):
    now = counters()
    return {k: now[k] - before.get(k, 0) for k in ("graph_compiles", "symbolic_compiles",
                                                   "graph_cache_hits")}


def mlp_rows(x, w, b):
    """A row-wise program over x [n, 16]: matmul, bias, GELU, a softmax over each row and the
    rows' mean: elementwise, GEMM, row reductions and a reduction over the dynamic dim."""
    h = F.gelu(x @ w + b)
    p = F.softmax(h, dim=1)
    return p * h, h.mean(0)


def mlp_rows_numpy(x, w, b):
    from math import erf
    h = x @ w + b
    h = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    p = np.exp(h - h.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return p * h, h.mean(0)


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((16, 24)).astype(np.float32),
            rng.standard_normal(24).astype(np.float32))


def run_rows(n, w, b, mark=False, seed=1):
    x = np.random.default_rng(seed + n).standard_normal((n, 16)).astype(np.float32)
    lx = lt.tensor(x, device="lazy")
    if mark:
        lt.mark_dynamic(lx, 0)
    y, m = mlp_rows(lx, lt.tensor(w, device="lazy"), lt.tensor(b, device="lazy"))
    lt.sync(y, m)
    ry, rm = mlp_rows_numpy(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(y.numpy(), ry, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(m.numpy(), rm, rtol=2e-4, atol=2e-5)
    return lt.metrics.last_graph()


def test_mark_dynamic_compiles_once_for_every_size():
    w, b = weights()
    before = counters()
    sizes = [37, 5, 41, 64, 100, 97, 300, 3]
    graphs = [run_rows(n, w, b, mark=True) for n in sizes]
    d = delta(before)
    # One symbolic compile serves 3..300 (its range is 3..593 around 37); nothing else compiles.
    assert d == {"graph_compiles": 1, "symbolic_compiles": 1, "graph_cache_hits": len(sizes) - 1}
    assert graphs[0]["cache"] == "compiled"
    assert all(g["cache"] == "memory" for g in graphs[1:])
    assert graphs[3]["symbolic_dims"] == [{"input": 0, "dim": 0, "size": 64}]


def test_sizes_one_and_zero_stay_static():
    w, b = weights()
    run_rows(37, w, b, mark=True)
    before = counters()
    g = run_rows(1, w, b, mark=True)  # size 1 broadcasts: never symbolic
    assert delta(before)["graph_compiles"] == 1 and delta(before)["symbolic_compiles"] == 0
    assert g["symbolic_dims"] == []


def test_second_size_at_a_call_site_makes_the_changed_dim_symbolic():
    w, b = weights(3)
    before = counters()
    first = run_rows(20, w, b)
    assert first["symbolic_dims"] == [] and delta(before)["graph_compiles"] == 1
    second = run_rows(21, w, b)
    assert second["symbolic_dims"] == [{"input": 0, "dim": 0, "size": 21}]
    for n in (22, 50, 19, 200, 33):
        assert run_rows(n, w, b)["cache"] == "memory", n
    assert delta(before) == {"graph_compiles": 2, "symbolic_compiles": 1, "graph_cache_hits": 5}


def test_a_symbolic_compile_equals_the_static_compile_at_the_same_size():
    """The same program at n = 48: compiled statically (LT_DYNAMIC=0 in a subprocess, so no state
    is shared) and served by a symbolic compile made at another size; bit-for-bit equal apart from
    reduction order (within float32 rounding)."""
    w, b = weights(5)
    run_rows(31, w, b, mark=True)
    x = np.random.default_rng(9).standard_normal((48, 16)).astype(np.float32)
    lx = lt.tensor(x, device="lazy")
    lt.mark_dynamic(lx, 0)
    y, m = mlp_rows(lx, lt.tensor(w, device="lazy"), lt.tensor(b, device="lazy"))
    lt.sync(y, m)
    assert lt.metrics.last_graph()["cache"] == "memory"
    code = (
        "import numpy as np, sys; sys.path.insert(0, %r)\n"
        "import lazytensor as lt\n"
        "from test_dynamic_shapes import mlp_rows, weights\n"
        "w, b = weights(5)\n"
        "x = np.random.default_rng(9).standard_normal((48, 16)).astype(np.float32)\n"
        "y, m = mlp_rows(lt.tensor(x, device='lazy'), lt.tensor(w, device='lazy'),\n"
        "                lt.tensor(b, device='lazy'))\n"
        "np.save(sys.argv[1], np.concatenate([y.numpy().ravel(), m.numpy().ravel()]))\n"
        "assert lt.metrics.counters()['symbolic_compiles'] == 0\n" % os.path.dirname(__file__))
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"lt_static_{os.getpid()}.npy")
    env = dict(os.environ, LT_DYNAMIC="0")
    subprocess.run([sys.executable, "-c", code, out], check=True, env=env)
    static = np.load(out)
    os.unlink(out)
    mine = np.concatenate([y.numpy().ravel(), m.numpy().ravel()])
    np.testing.assert_allclose(mine, static, rtol=1e-6, atol=1e-6)


def test_lt_dynamic_0_turns_automatic_dynamic_shapes_off():
    code = (
        "import numpy as np, lazytensor as lt\n"
        "w = lt.tensor(np.ones((16, 8), np.float32), device='lazy')\n"
        "for n in (10, 11, 12, 13):\n"
        "    x = lt.tensor(np.random.rand(n, 16).astype(np.float32), device='lazy')\n"
        "    (x @ w).relu().sum(1).numpy()\n"
        "c = lt.metrics.counters()\n"
        "print(c['graph_compiles'], c['symbolic_compiles'])\n")
    for value, expect in (("0", "4 0"), ("1", "2 1")):
        env = dict(os.environ, LT_DYNAMIC=value)
        out = subprocess.run([sys.executable, "-c", code], check=True, env=env,
                             capture_output=True, text=True).stdout.split()
        assert " ".join(out) == expect, (value, out)


def test_lt_debug_says_which_dims_became_symbolic_and_why():
    code = (
        "import numpy as np, lazytensor as lt\n"
        "w = lt.tensor(np.ones((16, 8), np.float32), device='lazy')\n"
        "for n in (10, 11, 12):\n"
        "    x = lt.tensor(np.random.rand(n, 16).astype(np.float32), device='lazy')\n"
        "    (x @ w).relu().sum(1).numpy()\n")
    env = dict(os.environ, LT_DEBUG="1")
    err = subprocess.run([sys.executable, "-c", code], check=True, env=env,
                         capture_output=True, text=True).stderr
    assert "dynamic shapes: input 0 dim 0 changed from 10 to 11" in err
    assert "compiled symbolic (s0 = input 0 dim 0 (11))" in err


def test_mark_dynamic_bad_uses_are_clear_errors():
    x = lt.tensor(np.ones((3, 4), np.float32), device="lazy")
    with pytest.raises(IndexError, match="dim 2 out of range"):
        lt.mark_dynamic(x, 2)
    with pytest.raises(ValueError, match="only lazy tensors"):
        lt.mark_dynamic(lt.tensor(np.ones(3, np.float32)), 0)
    with pytest.raises(TypeError):
        lt.mark_dynamic(np.ones(3), 0)
    y = (x * 2).sum(1)  # pending: materialized first
    lt.mark_dynamic(y, -1)
    np.testing.assert_allclose(y.numpy(), [8, 8, 8])


def test_variable_length_training_compiles_at_most_three_graphs():
    """A small GPT (examples/python/train_gpt.py's) trained on 50 batches whose sequence length is
    drawn from 16..512: the step (forward, backward, AdamW) compiles at most 3 graphs on lazy, and
    its losses equal eager cpu's on the same batches from the same weights (the first 10 steps)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
    from train_gpt import GPT
    vocab = 29
    lt.manual_seed(0)
    lazy_model = GPT(vocab, 512, layers=1, heads=2, dim=32).to("lazy")
    cpu_model = GPT(vocab, 512, layers=1, heads=2, dim=32).to("cpu")
    cpu_model.load_state_dict({k: v.to("cpu") for k, v in lazy_model.state_dict().items()})
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(50):
        T = int(rng.integers(16, 513))
        start = rng.integers(0, vocab, size=(2, 1))
        batches.append((np.arange(T + 1)[None, :] * 3 + start) % vocab)  # learnable: step 3

    def train(model, device, steps):
        opt = lt.optim.AdamW(model.parameters(), lr=3e-3)
        losses = []
        for data in batches[:steps]:
            T = data.shape[1] - 1
            x = lt.tensor(data[:, :-1], device=device)
            y = lt.tensor(data[:, 1:], device=device)
            pos = lt.arange(T, device=device).unsqueeze(0)
            loss = F.cross_entropy(model(x, pos).reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    before = counters()
    lazy = train(lazy_model, "lazy", 50)
    d = delta(before)
    assert d["graph_compiles"] <= 3, d
    assert d["symbolic_compiles"] >= 1
    assert all(np.isfinite(lazy)) and np.mean(lazy[-5:]) < 0.5 * np.mean(lazy[:5])
    cpu = train(cpu_model, "cpu", 10)
    np.testing.assert_allclose(lazy[:10], cpu, rtol=1e-4)
