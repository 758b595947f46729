"""Issue 3's pinned kernel counts on the lazy CPU backend, each result against numpy (float64
oracles computed from the same random inputs), and LT_DEBUG=2 printing a graph's kernel grouping."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F

ERF = np.vectorize(math.erf)


def _run(fn, *arrays):
    """fn on lazy tensors of `arrays` (cpu backend), synced as one graph: (kernels, result)."""
    xs = [lt.tensor(a, device="lazy:cpu") for a in arrays]
    lt.mark_step()
    out = fn(*xs)
    lt.sync(out)
    g = lt.metrics.last_graph()
    assert g["backend"] == "cpu"
    return g["kernels"], out.numpy(), g["grouping"]


def _layer_norm(x, w=None, b=None, eps=1e-5):
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * w + b if w is not None else y


def _gelu(x):
    return 0.5 * x * (1 + ERF(x / math.sqrt(2)))


def test_softmax_is_one_kernel(rng):
    x = rng.standard_normal((64, 333)).astype(np.float32) * 3
    n, y, grouping = _run(lambda t: F.softmax(t, -1), x)
    assert n == 1, grouping
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_layer_norm_is_one_kernel(rng):
    x = rng.standard_normal((48, 257)).astype(np.float32) * 2 + 0.5
    n, y, grouping = _run(lambda t: F.layer_norm(t, (257,)), x)
    assert n == 1, grouping
    np.testing.assert_allclose(y, _layer_norm(x), rtol=1e-4, atol=1e-5)


def test_gelu_of_layer_norm_plus_residual_is_one_kernel(rng):
    x, r = (rng.standard_normal((32, 200)).astype(np.float32) for _ in range(2))
    w, b = rng.standard_normal(200).astype(np.float32), rng.standard_normal(200).astype(np.float32)
    n, y, grouping = _run(lambda t, tw, tb, tr: F.gelu(F.layer_norm(t, (200,), tw, tb)) + tr, x, w, b, r)
    assert n == 1, grouping
    np.testing.assert_allclose(y, _gelu(_layer_norm(x, w, b)) + r, rtol=1e-4, atol=1e-5)


def test_permute_reshape_is_index_arithmetic_not_a_copy(rng):
    x = rng.standard_normal((24, 40)).astype(np.float32)
    y = rng.standard_normal(960).astype(np.float32)
    n, out, grouping = _run(lambda a, b: a.permute(1, 0).reshape(960) * 2 + b, x, y)
    assert n == 1, grouping
    np.testing.assert_allclose(out, x.T.reshape(960) * 2 + y, rtol=1e-6)


def test_matmul_bias_relu_is_a_matmul_and_one_kernel(rng):
    a = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal((48, 80)).astype(np.float32)
    bias = rng.standard_normal(80).astype(np.float32)
    n, y, grouping = _run(lambda ta, tb, tbias: (ta @ tb + tbias).relu(), a, b, bias)
    assert n <= 2, grouping  # the GEMM step + the bias/relu kernel
    assert "gemm" in grouping or "matmul" in grouping, grouping
    want = np.maximum(a.astype(np.float64) @ b + bias, 0)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_cross_entropy_is_at_most_two_kernels(rng):
    logits = rng.standard_normal((40, 17)).astype(np.float32) * 2
    target = rng.integers(0, 17, 40)
    n, loss, grouping = _run(lambda x, t: F.cross_entropy(x, t), logits, target)
    assert n <= 2, grouping
    z = logits.astype(np.float64)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    np.testing.assert_allclose(loss, (lse - z[np.arange(40), target]).mean(), rtol=1e-5)


def test_twenty_step_sin_chain_is_one_kernel(rng):
    x = rng.standard_normal(5000).astype(np.float32)

    def chain(t):
        for _ in range(20):
            t = t + t.sin()
        return t

    n, y, grouping = _run(chain, x)
    assert n == 1, grouping
    want = x.astype(np.float64)
    for _ in range(20):
        want = want + np.sin(want)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_debug_level_2_prints_the_kernel_grouping(tmp_path):
    script = ("import lazytensor as lt, lazytensor.nn.functional as F\n"
              "x = lt.randn(8, 16, device='lazy:cpu')\n"
              "print(F.softmax(x, -1).sum().item())\n")
    env = dict(os.environ, LT_DEBUG="2", LT_CACHE_DIR="off")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # One line per kernel: its name, outer and inner spaces and the nodes it computes.
    assert "reduce_max" in r.stderr and "outer [" in r.stderr and "inner [" in r.stderr, r.stderr


def test_weight_gradient_gemm_writes_the_transposed_product(rng):
    """dW = g^T x of a linear layer is stored [out, in]: the GEMM computes that orientation
    (x^T g transposed) instead of a kernel transposing its [in, out] result, and the SGD update
    reads it contiguously: 2 GEMMs (forward, weight gradient) and the update, no transpose."""
    x0 = rng.standard_normal((16, 48)).astype(np.float32)
    w0 = rng.standard_normal((24, 48)).astype(np.float32)
    g0 = rng.standard_normal((16, 24)).astype(np.float32)
    x = lt.tensor(x0, device="lazy:cpu")
    w = lt.tensor(w0, device="lazy:cpu", requires_grad=True)
    lt.mark_step()
    (F.linear(x, w) * lt.tensor(g0, device="lazy:cpu")).sum().backward()
    with lt.no_grad():
        w -= w.grad * 0.5
    lt.sync(w, w.grad)
    g = lt.metrics.last_graph()
    steps = [line.split(":")[0] for line in g["grouping"].splitlines() if line]
    # g * (upstream ones), the weight-gradient GEMM, the update; the forward product is not needed.
    assert len(steps) == 3 and not any(s.endswith("_permute") for s in steps), g["grouping"]
    assert g["grouping"].count("gemm") == 1, g["grouping"]
    np.testing.assert_allclose(w.grad.numpy(), g0.T.astype(np.float64) @ x0, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(w.numpy(), w0 - 0.5 * (g0.T.astype(np.float64) @ x0), rtol=1e-4, atol=1e-4)
