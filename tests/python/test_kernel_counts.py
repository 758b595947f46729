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


def test_adam_update_writes_the_parameter_and_both_moments_in_one_kernel(rng):
    """AdamW's new moments are graph outputs that its parameter update reads: the update's kernel
    computes and stores them at its own points (multi-output elementwise kernel) instead of two
    kernels writing them and the update reading them back (4 -> 1 passes over the gradient)."""
    shape = (300, 77)  # not a whole number of vectors
    p0, g0, m0 = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    v0 = rng.random(shape).astype(np.float32)
    p, g, m, v = (lt.tensor(a, device="lazy:cpu") for a in (p0, g0, m0, v0))
    lt.mark_step()
    lr, wd, b1, b2, eps, bc1, bc2 = 1e-2, 0.05, 0.9, 0.999, 1e-8, 0.271, 0.0030
    m2 = m * b1 + g * (1 - b1)
    v2 = v * b2 + g * g * (1 - b2)
    p2 = p * (1 - lr * wd) - (m2 / bc1) / ((v2 / bc2).sqrt() + eps) * lr
    lt.sync(p2, m2, v2)
    info = lt.metrics.last_graph()
    assert info["kernels"] == 1, info["grouping"]
    m_want = m0.astype(np.float64) * b1 + g0 * (1 - b1)
    v_want = v0.astype(np.float64) * b2 + g0.astype(np.float64) ** 2 * (1 - b2)
    p_want = p0 * (1 - lr * wd) - (m_want / bc1) / (np.sqrt(v_want / bc2) + eps) * lr
    np.testing.assert_allclose(m2.numpy(), m_want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v2.numpy(), v_want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(p2.numpy(), p_want, rtol=1e-5, atol=1e-6)


def test_adamw_step_counts_of_many_parameters_share_few_kernels(rng):
    """20 parameters: their step counts and bias corrections (3 values each) are computed by 0-d
    kernels of at most 48 values, so 2 kernels (16 + 4 parameters) instead of 20; the parameters
    after three steps (the second with different gradients per parameter) equal
    torch.optim.AdamW's."""
    torch = pytest.importorskip("torch")
    import lazytensor.optim as optim
    shapes = [(int(rng.integers(2, 9)), int(rng.integers(2, 9))) for _ in range(20)]
    p0 = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ps = [lt.tensor(a, device="lazy:cpu").requires_grad_() for a in p0]
    ref = [torch.tensor(a, requires_grad=True) for a in p0]
    opt = optim.AdamW(ps, lr=1e-2, weight_decay=0.05)
    ref_opt = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.05)
    for step in range(3):
        ws = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        loss = sum(((p * lt.tensor(w, device="lazy:cpu")) ** 2).sum() for p, w in zip(ps, ws))
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_loss = sum(((p * torch.from_numpy(w)) ** 2).sum() for p, w in zip(ref, ws))
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
    info = lt.metrics.last_graph()
    scalars = [l for l in info["grouping"].splitlines()
               if l.startswith("k") and "outer [] inner []" in l]
    assert len(scalars) == 2, info["grouping"]
    assert sorted(l.count(":pow") for l in scalars) == [8, 32], scalars
    for p, r in zip(ps, ref):
        np.testing.assert_allclose(p.numpy(), r.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_adamw_training_step_kernels_and_values_against_torch(rng):
    """A Linear layer's AdamW step on lazy: per parameter one kernel for its step count and one
    for the update with both moments (was three: each moment, then the update); parameters after
    three steps equal torch.optim.AdamW's."""
    torch = pytest.importorskip("torch")
    import lazytensor.nn as nn
    import lazytensor.optim as optim
    w0 = rng.standard_normal((24, 48)).astype(np.float32) * 0.2
    b0 = rng.standard_normal(24).astype(np.float32) * 0.2
    xs = [rng.standard_normal((16, 48)).astype(np.float32) for _ in range(3)]
    model = nn.Linear(48, 24).to("lazy:cpu")
    with lt.no_grad():
        model.weight.copy_(lt.tensor(w0, device="lazy:cpu"))
        model.bias.copy_(lt.tensor(b0, device="lazy:cpu"))
    opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    ref = torch.nn.Linear(48, 24)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(w0))
        ref.bias.copy_(torch.from_numpy(b0))
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.05)
    for x in xs:
        (model(lt.tensor(x, device="lazy:cpu")) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
        (ref(torch.from_numpy(x)) ** 2).mean().backward()
        ref_opt.step()
        ref_opt.zero_grad()
    info = lt.metrics.last_graph()
    # Forward GEMM, loss gradient, bias gradient, weight-gradient GEMM and its transpose (the
    # weight's .grad is an output), one 0-d kernel for both parameters' step counts and bias
    # corrections (computed once rather than by every thread of an update), then per parameter
    # its update: 8 (was 13).
    assert info["kernels"] == 8, info["grouping"]
    kernels = [l for l in info["grouping"].splitlines() if l.startswith("k")]
    scalars = [l for l in kernels if "outer [] inner []" in l]
    updates = [l for l in kernels if "outer []" not in l and ":sqrt" in l]
    assert len(scalars) == 1 and len(updates) == 2, info["grouping"]
    # Both step counts (t + 1) and their 1 - beta1^t, 1 - beta2^t.
    assert scalars[0].count(":pow") == 4 and scalars[0].count(":add") == 2, scalars[0]
    for line in updates:  # parameter, exp_avg and exp_avg_sq read by the update's own kernel
        assert line.count(":param") == 3 and ":pow" not in line, line
    np.testing.assert_allclose(model.weight.numpy(), ref.weight.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(model.bias.numpy(), ref.bias.detach().numpy(), rtol=1e-4, atol=1e-5)
