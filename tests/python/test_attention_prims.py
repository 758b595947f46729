"""The attention prims (attention, attention_lse, attention_grad_{q,k,v}): what
scaled_dot_product_attention traces on every backend without a mask or dropout; run by fused
attention where the backend has it (CUDA's flash kernels; here the reference interpreter, whose
LowerOptions list them too), expanded into matmuls and softmax by lowering elsewhere (the CPU).
Values and q/k/v gradients against float64 torch math and float64 finite differences; the prims in
the trace; one trace on the CPU and reference backends; replay of such a trace on the CPU backend;
the cases that keep the decomposition (masks, dropout); bad prim operands."""
import json

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F
from conftest import torch_attention

torch = pytest.importorskip("torch")

REF = "lazy:reference"

# name: (q shape, k shape, v shape, causal, scale, gqa)
CASES = {
    "plain": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), False, None, False),
    "scale": ((2, 2, 4, 6), (2, 2, 4, 6), (2, 2, 4, 6), False, 0.3, False),
    "causal": ((2, 2, 6, 8), (2, 2, 6, 8), (2, 2, 6, 5), True, None, False),
    "causal_short_q": ((1, 2, 3, 4), (1, 2, 7, 4), (1, 2, 7, 4), True, 0.7, False),
    "causal_long_q": ((1, 2, 6, 4), (1, 2, 4, 4), (1, 2, 4, 3), True, None, False),
    "gqa_causal": ((2, 6, 4, 4), (2, 3, 4, 4), (2, 3, 4, 4), True, None, True),
    "unbatched": ((5, 8), (7, 8), (7, 3), False, None, False),
    "rows_past_a_tile": ((1, 1, 70, 4), (1, 1, 70, 4), (1, 1, 70, 4), True, None, False),
}


def run(case, rng, device, dtype=np.float32):
    qs, ks, vs, causal, scale, gqa = CASES[case]
    arrays = [rng.standard_normal(s) for s in (qs, ks, vs)]
    lts = [lt.tensor(a.astype(dtype), device=device, requires_grad=True) for a in arrays]
    y = F.scaled_dot_product_attention(*lts, is_causal=causal, scale=scale, enable_gqa=gqa)
    return arrays, lts, y, dict(is_causal=causal, scale=scale, enable_gqa=gqa)


@pytest.mark.parametrize("case", sorted(CASES))
def test_prims_match_torch(case, rng):
    arrays, lts, y, kw = run(case, rng, REF)
    tts = [torch.tensor(a, requires_grad=True) for a in arrays]
    yt = torch_attention(*tts, None, **kw)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = rng.standard_normal(tuple(yt.shape))
    y.backward(lt.tensor(g.astype(np.float32), device=REF))
    yt.backward(torch.tensor(g))
    for name, a, b in zip(["query", "key", "value"], lts, tts):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("case", ["plain", "causal_short_q", "causal_long_q", "gqa_causal"])
def test_prim_gradients_match_finite_differences(case, rng):
    qs, ks, vs, causal, scale, gqa = CASES[case]
    inputs = [rng.standard_normal(s) for s in (qs, ks, vs)]
    kw = dict(is_causal=causal, scale=scale, enable_gqa=gqa)
    f = lambda *xs: F.scaled_dot_product_attention(*xs, **kw)
    r = rng.standard_normal(tuple(f(*[lt.tensor(a, device=REF) for a in inputs]).shape))
    leaves = [lt.tensor(a, device=REF, requires_grad=True) for a in inputs]
    (f(*leaves) * lt.tensor(r, device=REF)).sum().backward()
    loss = lambda xs: float((f(*[lt.tensor(x, device=REF) for x in xs]).numpy() * r).sum())
    eps = 1e-6
    for i, leaf in enumerate(leaves):
        for _ in range(2):
            u = rng.standard_normal(inputs[i].shape)
            hi = [a + eps * u if j == i else a for j, a in enumerate(inputs)]
            lo = [a - eps * u if j == i else a for j, a in enumerate(inputs)]
            numeric = (loss(hi) - loss(lo)) / (2 * eps)
            analytic = float((leaf.grad.numpy() * u).sum())
            np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8, err_msg=f"input {i}")


def test_trace_holds_the_prims_and_replays_on_cpu(tmp_path, rng):
    """Forward and backward in one trace: attention + attention_lse, and the three gradient prims;
    the CPU backend (no attention library) replays it through the decomposition."""
    arrays, lts, y, _ = run("causal", rng, REF)
    (y * y).sum().backward()
    grads = [t.grad for t in lts]
    path = tmp_path / "attention.json"
    lt.debug.dump(path, [y] + grads)
    ops = {n["op"] for n in json.loads(path.read_text())["nodes"]}
    assert {"attention", "attention_lse", "attention_grad_q", "attention_grad_k",
            "attention_grad_v"} <= ops
    assert "softmax" not in ops
    for backend in ("reference", "cpu"):
        rep = lt.debug.replay(path, backend=backend, check=True)
        assert rep["ok"] and rep["outputs"] == 4, rep["message"]
        assert rep["max_abs_error"] < 1e-4


@pytest.mark.parametrize("kw", [dict(dropout_p=0.5), dict(attn_mask="bool")])
def test_masks_and_dropout_keep_the_decomposition(kw, rng):
    q, k, v = (lt.tensor(rng.standard_normal((2, 4, 8)).astype(np.float32), device=REF)
               for _ in range(3))
    if kw.get("attn_mask") == "bool":
        kw = dict(attn_mask=lt.tensor(rng.random((4, 4)) > 0.3, device=REF))
    y = F.scaled_dot_product_attention(q, k, v, **kw)
    text = lt.debug.ir_text(y)
    assert "= softmax(" in text and "= attention" not in text


def test_bad_prim_operands_are_clear_errors(tmp_path, rng):
    """A trace whose attention prim has mismatched shapes is refused by the shape rule, naming the
    op and the shapes."""
    _, _, y, _ = run("plain", rng, REF)
    path = tmp_path / "attention.json"
    lt.debug.dump(path, y)
    trace = json.loads(path.read_text())
    node = next(n for n in trace["nodes"] if n["op"] == "attention")
    node["inputs"] = [node["inputs"][0], node["inputs"][0], node["inputs"][2]]  # q as the key
    path.write_text(json.dumps(trace))
    with pytest.raises(Exception, match="attention: shapes do not match"):
        lt.debug.replay(path, backend="reference")



@pytest.mark.parametrize("case", ["plain", "scale", "unbatched", "causal", "causal_long_q",
                                  "gqa_causal"])
def test_attention_traces_one_graph_on_every_backend(case, rng, tmp_path):
    """Attention without an explicit mask or dropout traces the attention prims on every backend:
    the CPU backend, which has no attention library, traces the same graph (same trace key) as the
    reference interpreter, and lowering expands the prims into matmuls and softmax there. Values
    and gradients of both against torch."""
    keys = {}
    for device in ("lazy", REF):
        arrays, lts, y, kw = run(case, rng, device)
        g = rng.standard_normal(tuple(y.shape))
        y.backward(lt.tensor(g.astype(np.float32), device=device))
        grads = [t.grad for t in lts]
        keys[device] = lt.debug.dump(tmp_path / f"{device}.json", y, *grads, data=False)
        ops = {n["op"] for n in json.loads((tmp_path / f"{device}.json").read_text())["nodes"]}
        assert {"attention", "attention_grad_q", "attention_grad_k", "attention_grad_v"} <= ops
        assert "softmax" not in ops
        tts = [torch.tensor(a, requires_grad=True) for a in arrays]
        yt = torch_attention(*tts, None, **kw)
        yt.backward(torch.tensor(g))
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
        for name, a, b in zip(["query", "key", "value"], grads, tts):
            np.testing.assert_allclose(a.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4,
                                       err_msg=f"{device} {name}")
    assert keys["lazy"] == keys[REF]
