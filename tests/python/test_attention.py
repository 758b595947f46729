"""F.scaled_dot_product_attention, one autograd node with the flash-attention backward: values and
gradients of query, key, value and a float mask against torch 2.13's F.scaled_dot_product_attention
in float64 and against float64 finite differences of lazytensor itself, on the eager and the lazy
device; the kernel count of a lazy forward + backward; dropout; bad input."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F
from conftest import torch_attention

torch = pytest.importorskip("torch")


# name: (q shape, k shape, v shape, mask: None | "bool" (shape) | "float" (shape), causal, scale, gqa)
CASES = {
    "plain": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), None, False, None, False),
    "scale": ((2, 2, 4, 6), (2, 2, 4, 6), (2, 2, 4, 6), None, False, 0.3, False),
    "causal": ((2, 2, 6, 8), (2, 2, 6, 8), (2, 2, 6, 5), None, True, None, False),
    "causal_short_q": ((1, 2, 3, 4), (1, 2, 7, 4), (1, 2, 7, 4), None, True, 0.7, False),
    "causal_long_q": ((1, 2, 6, 4), (1, 2, 4, 4), (1, 2, 4, 3), None, True, None, False),
    "bool": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), ("bool", (5, 7)), False, 0.3, False),
    "bool_batched": ((2, 2, 4, 4), (2, 2, 6, 4), (2, 2, 6, 4), ("bool", (2, 1, 4, 6)), False, None, False),
    "float": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), ("float", (2, 1, 5, 7)), False, None, False),
    "float_full": ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 2), ("float", (1, 2, 3, 5)), False, 1.5, False),
    "gqa": ((1, 4, 3, 8), (1, 2, 5, 8), (1, 2, 5, 6), None, False, None, True),
    "gqa_causal": ((2, 6, 4, 4), (2, 3, 4, 4), (2, 3, 4, 4), None, True, None, True),
    "gqa_float": ((1, 4, 3, 4), (1, 1, 5, 4), (1, 1, 5, 4), ("float", (3, 5)), False, None, True),
    "broadcast_batch": ((2, 3, 5, 4), (3, 6, 4), (1, 3, 6, 2), None, False, None, False),
    "unbatched": ((5, 8), (7, 8), (7, 3), ("bool", (5, 7)), False, None, False),
}


def make_inputs(case, rng):
    qs, ks, vs, mask, causal, scale, gqa = CASES[case]
    arrays = [rng.standard_normal(s) for s in (qs, ks, vs)]
    m = None
    if mask is not None:
        kind, shape = mask
        if kind == "bool":
            m = rng.random(shape) > 0.4
            m[..., 0] = True  # no fully masked row (NaN in both, in different places)
        else:
            m = rng.standard_normal(shape)
    return arrays, m, dict(is_causal=causal, scale=scale, enable_gqa=gqa)


@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_gradients_match_torch(case, device, rng):
    arrays, m, kw = make_inputs(case, rng)
    float_mask = m is not None and m.dtype != bool
    inputs = arrays + ([m] if float_mask else [])
    lts = [lt.tensor(a.astype(np.float32), device=device, requires_grad=True) for a in inputs]
    tts = [torch.tensor(a, requires_grad=True) for a in inputs]  # float64 oracle
    lm = lts[3] if float_mask else (None if m is None else lt.tensor(m, device=device))
    tmask = tts[3] if float_mask else (None if m is None else torch.tensor(m))
    yl = F.scaled_dot_product_attention(*lts[:3], lm, **kw)
    yt = torch_attention(*tts[:3], tmask, **kw)
    assert yl.grad_fn is not None and "ScaledDotProductAttention" in yl.grad_fn.name()
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = rng.standard_normal(tuple(yt.shape))
    yl.backward(lt.tensor(g.astype(np.float32), device=device))
    yt.backward(torch.tensor(g))
    for name, a, b in zip(["query", "key", "value", "attn_mask"], lts, tts):
        assert a.grad is not None, name
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("case", ["plain", "causal_short_q", "bool", "float_full", "gqa_causal",
                                  "broadcast_batch"])
def test_gradients_match_finite_differences(case, device, rng):
    """float64: <grad, u> of sum(out * r) against a central difference along random directions u."""
    arrays, m, kw = make_inputs(case, rng)
    float_mask = m is not None and m.dtype != bool
    inputs = arrays + ([m] if float_mask else [])
    fixed_mask = None if m is None or float_mask else lt.tensor(m, device=device)

    def f(*xs):
        mask = xs[3] if float_mask else fixed_mask
        return F.scaled_dot_product_attention(xs[0], xs[1], xs[2], mask, **kw)

    r = rng.standard_normal(tuple(f(*[lt.tensor(a, device=device) for a in inputs]).shape))
    leaves = [lt.tensor(a, device=device, requires_grad=True) for a in inputs]
    (f(*leaves) * lt.tensor(r, device=device)).sum().backward()
    loss = lambda xs: float((f(*[lt.tensor(x, device=device) for x in xs]).numpy() * r).sum())
    eps = 1e-6
    for i, leaf in enumerate(leaves):
        for _ in range(3):
            u = rng.standard_normal(inputs[i].shape)
            hi = [a + eps * u if j == i else a for j, a in enumerate(inputs)]
            lo = [a - eps * u if j == i else a for j, a in enumerate(inputs)]
            numeric = (loss(hi) - loss(lo)) / (2 * eps)
            analytic = float((leaf.grad.numpy() * u).sum())
            np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8, err_msg=f"input {i}")


def test_dropout_is_one_mask_in_forward_and_backward(device, rng):
    """With a fixed seed the dropped forward is a deterministic function: its gradient must match
    finite differences, and dropout_p=0 must give the undropped result."""
    q, k, v = (rng.standard_normal((1, 2, 4, 4)) for _ in range(3))

    def f(x):
        lt.manual_seed(7)
        return F.scaled_dot_product_attention(x, lt.tensor(k, device=device), lt.tensor(v, device=device),
                                              dropout_p=0.4)
    xl = lt.tensor(q, device=device, requires_grad=True)
    out = f(xl)
    plain = F.scaled_dot_product_attention(*(lt.tensor(a, device=device) for a in (q, k, v)))
    assert not np.allclose(out.detach().numpy(), plain.numpy())  # something was dropped
    out.sum().backward()
    eps, u = 1e-6, rng.standard_normal(q.shape)
    numeric = (f(lt.tensor(q + eps * u, device=device)).numpy().sum()
               - f(lt.tensor(q - eps * u, device=device)).numpy().sum()) / (2 * eps)
    np.testing.assert_allclose(float((xl.grad.numpy() * u).sum()), numeric, rtol=1e-6, atol=1e-8)
    zero = F.scaled_dot_product_attention(*(lt.tensor(a, device=device) for a in (q, k, v)), dropout_p=1.0)
    np.testing.assert_array_equal(zero.numpy(), np.zeros_like(q))


# Kernels of one lazy forward + backward (q, k and v require grad; upstream gradient given). The
# former decomposition (matmul, scale, mask, softmax, matmul and their VJPs) took 9 (no mask) and
# 10 (causal): 6 GEMMs, the softmax row kernel, the softmax-backward row kernel, a transposed copy
# of dK (and the causal mask). The rule's dK = dS^T Q is written in [S, E] order, so no copy.
@pytest.mark.parametrize("causal, kernels", [(False, 8), (True, 8)])
def test_lazy_forward_backward_kernel_count(causal, kernels, rng):
    q, k, v, g = (lt.tensor(rng.standard_normal((2, 4, 32, 16)).astype(np.float32), device="lazy")
                  for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    lt.mark_step()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out.backward(g)
    lt.sync(out, q.grad, k.grad, v.grad)
    assert lt.metrics.last_graph()["kernels"] == kernels


def test_low_precision_inputs_keep_their_dtype(device, rng):
    arrays = [rng.standard_normal((2, 2, 5, 8)).astype(np.float32) for _ in range(3)]
    q, k, v = (lt.tensor(a, device=device).to(lt.bfloat16).requires_grad_() for a in arrays)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == lt.bfloat16
    want = torch_attention(*(torch.tensor(a, dtype=torch.float64) for a in arrays), is_causal=True)
    np.testing.assert_allclose(out.to(lt.float32).numpy(), want.numpy(), rtol=3e-2, atol=3e-2)
    out.to(lt.float32).sum().backward()
    assert q.grad.dtype == lt.bfloat16 and np.isfinite(q.grad.to(lt.float32).numpy()).all()


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.scaled_dot_product_attention(lt.zeros(1, 2, 3, 4), lt.zeros(1, 2, 5, 4, dtype=lt.float64),
                                            lt.zeros(1, 2, 5, 4)), RuntimeError, "same dtype"),
    (lambda: F.scaled_dot_product_attention(lt.zeros(1, 2, 3, 4), lt.zeros(1, 2, 5, 3), lt.zeros(1, 2, 5, 4)),
     RuntimeError, r"shapes do not match: query \[1, 2, 3, 4\], key \[1, 2, 5, 3\]"),
    (lambda: F.scaled_dot_product_attention(lt.zeros(1, 2, 3, 4), lt.zeros(1, 2, 5, 4), lt.zeros(1, 2, 5, 4),
                                            lt.zeros(3, 5, dtype=lt.int64)), RuntimeError, "bool or floating attn_mask"),
    (lambda: F.scaled_dot_product_attention(lt.zeros(1, 3, 3, 4), lt.zeros(1, 2, 5, 4), lt.zeros(1, 2, 5, 4),
                                            enable_gqa=True), RuntimeError, "must be a multiple"),
    (lambda: F.scaled_dot_product_attention(lt.zeros(1, 2, 3, 4), lt.zeros(1, 2, 5, 4), lt.zeros(1, 2, 5, 4),
                                            lt.ones(3, 5, dtype=lt.bool), is_causal=True), RuntimeError, "is_causal"),
    (lambda: F.scaled_dot_product_attention(lt.zeros(1, 2, 3, 4), lt.zeros(1, 2, 5, 4), lt.zeros(1, 2, 5, 4),
                                            dropout_p=1.5), ValueError, "dropout probability"),
])
def test_bad_input_gives_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_mixed_masks_match_torch(need_weights, device, rng):
    """MultiheadAttention through the one-node attention: a 3-D float attn_mask with a bool
    key_padding_mask (merged into one additive mask), kdim/vdim projections, unaveraged weights."""
    import lazytensor.nn as nn
    E, H, N, L, S = 8, 2, 2, 4, 5
    tm = torch.nn.MultiheadAttention(E, H, batch_first=True, kdim=6, vdim=3)
    lm = nn.MultiheadAttention(E, H, batch_first=True, kdim=6, vdim=3).to(device)
    with torch.no_grad():
        tm.in_proj_bias.copy_(torch.randn(3 * E))
    lm.load_state_dict({k: lt.tensor(v.numpy(), device=device) for k, v in tm.state_dict().items()})
    x, kx, vx = (rng.standard_normal(s).astype(np.float32) for s in ((N, L, E), (N, S, 6), (N, S, 3)))
    am = rng.standard_normal((N * H, L, S)).astype(np.float32)
    pad = np.zeros((N, S), dtype=bool)
    pad[0, 3:] = True
    tin = [torch.tensor(a, requires_grad=True) for a in (x, kx, vx)]
    lin = [lt.tensor(a, device=device, requires_grad=True) for a in (x, kx, vx)]
    ot, wt = tm(*tin, key_padding_mask=torch.tensor(pad), attn_mask=torch.tensor(am),
                need_weights=need_weights, average_attn_weights=False)
    ol, wl = lm(*lin, key_padding_mask=lt.tensor(pad, device=device), attn_mask=lt.tensor(am, device=device),
                need_weights=need_weights, average_attn_weights=False)
    np.testing.assert_allclose(ol.detach().numpy(), ot.detach().numpy(), rtol=1e-4, atol=1e-5)
    if need_weights:
        np.testing.assert_allclose(wl.detach().numpy(), wt.detach().numpy(), rtol=1e-4, atol=1e-5)
    else:
        assert wl is None and wt is None
    g = rng.standard_normal(ot.shape).astype(np.float32)
    ot.backward(torch.tensor(g))
    ol.backward(lt.tensor(g, device=device))
    for a, b in zip(lin, tin):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)
    lp = dict(lm.named_parameters())
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(lp[name].grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)
