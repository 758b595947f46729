"""Convolution, pooling, batch norm and attention against PyTorch (torch 2.13, CPU):
forward values and input/parameter gradients on random inputs, on the eager and the lazy device,
plus float64 finite differences for the window ops' gradients, kernel counts and bad input."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F
from conftest import torch_attention

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def pair_run(lt_fn, torch_fn, arrays, device, rtol=2e-5, atol=2e-5, grad=True, seed=0):
    """Runs both functions on the same random float32 inputs; compares outputs and (with a
    random upstream gradient) the gradients of every input."""
    lts = [lt.tensor(a, device=device, requires_grad=grad) for a in arrays]
    tts = [torch.tensor(a, requires_grad=grad) for a in arrays]
    yl, yt = lt_fn(*lts), torch_fn(*tts)
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=atol)
    if grad:
        g = np.random.default_rng(seed).standard_normal(tuple(yt.shape)).astype(np.float32)
        yl.backward(lt.tensor(g, device=device))
        yt.backward(torch.tensor(g))
        for i, (a, b) in enumerate(zip(lts, tts)):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4,
                                       err_msg=f"gradient of input {i}")
    return yl


CONV_CASES = [  # (N, C, H, W, O, kh, kw, stride, padding, dilation, groups)
    (2, 3, 8, 8, 4, 3, 3, 1, 0, 1, 1),
    (2, 3, 9, 7, 5, 3, 3, 1, 1, 1, 1),
    (1, 4, 10, 9, 6, 3, 2, 2, (1, 0), 1, 2),
    (2, 2, 11, 11, 3, 3, 3, (2, 3), 2, 2, 1),
    (1, 4, 6, 6, 4, 1, 1, 1, 0, 1, 4),       # depthwise 1x1
    (3, 1, 7, 8, 2, 5, 5, 1, 2, 1, 1),
    (2, 3, 12, 12, 4, 2, 2, 2, 0, 1, 1),     # non-overlapping (the reshape path)
    (1, 2, 9, 9, 2, 2, 2, 5, 0, 1, 1),       # stride larger than the kernel
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_torch(case, device, rng):
    N, C, H, W, O, kh, kw, s, p, d, g = case
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((O, C // g, kh, kw)).astype(np.float32)
    b = rng.standard_normal((O,)).astype(np.float32)
    pair_run(lambda x, w, b: F.conv2d(x, w, b, s, p, d, g), lambda x, w, b: TF.conv2d(x, w, b, s, p, d, g),
             [x, w, b], device, rtol=1e-4, atol=1e-4)


def test_conv2d_same_padding_and_unbatched(device, rng):
    x = rng.standard_normal((3, 7, 6)).astype(np.float32)
    w = rng.standard_normal((2, 3, 4, 3)).astype(np.float32)
    pair_run(lambda x, w: F.conv2d(x, w, padding="same", dilation=(1, 2)),
             lambda x, w: TF.conv2d(x, w, padding="same", dilation=(1, 2)), [x, w], device, rtol=1e-4, atol=1e-4)


def test_conv1d_matches_torch(device, rng):
    x = rng.standard_normal((2, 4, 13)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3)).astype(np.float32)
    b = rng.standard_normal((6,)).astype(np.float32)
    pair_run(lambda x, w, b: F.conv1d(x, w, b, 2, 1, 1, 2), lambda x, w, b: TF.conv1d(x, w, b, 2, 1, 1, 2),
             [x, w, b], device, rtol=1e-4, atol=1e-4)
    w4 = rng.standard_normal((3, 4, 4)).astype(np.float32)  # even kernel: the odd pad goes at the end
    pair_run(lambda x, w: F.conv1d(x, w, padding="same", dilation=2),
             lambda x, w: TF.conv1d(x, w, padding="same", dilation=2), [x, w4], device, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="strided"):
        F.conv1d(lt.tensor(x), lt.tensor(w4), padding="same", stride=2)


POOL_CASES = [  # (kernel, stride, padding, dilation, ceil_mode)
    (2, None, 0, 1, False),
    (3, 2, 1, 1, False),
    (3, 2, 1, 1, True),
    ((3, 2), (2, 1), (1, 0), 1, False),
    (2, 2, 0, 2, True),
    (3, 3, 0, 1, True),
]


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool2d_matches_torch(case, device, rng):
    k, s, p, d, ceil = case
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    pair_run(lambda x: F.max_pool2d(x, k, s, p, d, ceil), lambda x: TF.max_pool2d(x, k, s, p, d, ceil), [x], device)


@pytest.mark.parametrize("case", [c for c in POOL_CASES if c[3] == 1])  # avg_pool2d has no dilation
@pytest.mark.parametrize("include_pad", [True, False])
def test_avg_pool2d_matches_torch(case, include_pad, device, rng):
    k, s, p, d, ceil = case
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    pair_run(lambda x: F.avg_pool2d(x, k, s, p, ceil, include_pad),
             lambda x: TF.avg_pool2d(x, k, s, p, ceil, include_pad), [x], device)


def test_avg_pool2d_divisor_override_and_adaptive(device, rng):
    x = rng.standard_normal((2, 3, 8, 6)).astype(np.float32)
    pair_run(lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=4),
             lambda x: TF.avg_pool2d(x, 3, 2, 1, divisor_override=4), [x], device)
    pair_run(lambda x: F.adaptive_avg_pool2d(x, (4, 3)), lambda x: TF.adaptive_avg_pool2d(x, (4, 3)), [x], device)
    pair_run(lambda x: F.adaptive_avg_pool2d(x, 1), lambda x: TF.adaptive_avg_pool2d(x, 1), [x], device)
    with pytest.raises(NotImplementedError, match="adaptive_avg_pool2d"):
        F.adaptive_avg_pool2d(lt.tensor(x, device=device), (5, 4))


def finite_difference_check(fn, x, eps=1e-6, rtol=1e-6, atol=1e-8):
    """The gradient of sum(fn(x) * r) at float64 against central differences."""
    rng = np.random.default_rng(3)
    r = rng.standard_normal(fn(lt.tensor(x, dtype=lt.float64)).shape)
    xt = lt.tensor(x, dtype=lt.float64, requires_grad=True)
    (fn(xt) * lt.tensor(r)).sum().backward()
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        f = lambda v: float((fn(lt.tensor(v, dtype=lt.float64)).numpy() * r).sum())
        numeric[i] = (f(hi) - f(lo)) / (2 * eps)
    np.testing.assert_allclose(xt.grad.numpy(), numeric, rtol=rtol, atol=atol)


def test_window_gradients_match_finite_differences(rng):
    x = rng.standard_normal((1, 2, 6, 5))
    w = lt.tensor(rng.standard_normal((3, 2, 3, 2)), dtype=lt.float64)
    finite_difference_check(lambda t: F.conv2d(t, w, None, (2, 1), 1, (1, 2)), x, rtol=1e-5, atol=1e-7)
    finite_difference_check(lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True), x, rtol=1e-5, atol=1e-7)
    finite_difference_check(lambda t: F.avg_pool2d(t, 3, 2, 1, True, False), x, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm2d_matches_torch(training, device, rng):
    tm = torch.nn.BatchNorm2d(3, momentum=0.2)
    lm = nn.BatchNorm2d(3, momentum=0.2).to(device)
    with torch.no_grad():
        tm.weight.copy_(torch.randn(3))
        tm.bias.copy_(torch.randn(3))
        tm.running_mean.copy_(torch.randn(3))
        tm.running_var.copy_(torch.rand(3) + 0.5)
    lm.load_state_dict({k: lt.tensor(v.numpy(), device=device) for k, v in tm.state_dict().items()})
    tm.train(training)
    lm.train(training)
    for step in range(3):  # running statistics accumulate over steps
        x = (rng.standard_normal((4, 3, 5, 6)) * 2 + 1).astype(np.float32)
        xt, xl = torch.tensor(x, requires_grad=True), lt.tensor(x, device=device, requires_grad=True)
        yt, yl = tm(xt), lm(xl)
        np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
        g = rng.standard_normal(x.shape).astype(np.float32)
        yt.backward(torch.tensor(g))
        yl.backward(lt.tensor(g, device=device))
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
        for name in ("weight", "bias"):
            np.testing.assert_allclose(getattr(lm, name).grad.numpy(), getattr(tm, name).grad.numpy(),
                                       rtol=1e-4, atol=1e-4)
        lt.mark_step()
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(lm, name).numpy(), getattr(tm, name).numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def test_batch_norm1d_matches_torch(device, rng):
    tm, lm = torch.nn.BatchNorm1d(4), nn.BatchNorm1d(4).to(device)
    x = rng.standard_normal((6, 4, 3)).astype(np.float32)
    yl, yt = lm(lt.tensor(x, device=device)), tm(torch.tensor(x))
    np.testing.assert_allclose(yl.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lm.running_var.numpy(), tm.running_var.numpy(), rtol=1e-5)
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        lm(lt.zeros(2, 4, 3, 3, device=device))


@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float"])
def test_sdpa_matches_torch(mask, device, rng):
    q = rng.standard_normal((2, 3, 5, 8)).astype(np.float32)
    k = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    v = rng.standard_normal((2, 3, 7, 4)).astype(np.float32)
    m_np = None
    if mask == "bool":
        m_np = rng.random((5, 7)) > 0.3
        m_np[:, 0] = True  # no fully masked row (NaN in both, but a different NaN pattern)
    elif mask == "float":
        m_np = rng.standard_normal((2, 1, 5, 7)).astype(np.float32)
    causal = mask == "causal"
    ml = None if m_np is None else lt.tensor(m_np, device=device)
    mt = None if m_np is None else torch.tensor(m_np)
    pair_run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, ml, is_causal=causal, scale=0.3),
             lambda q, k, v: torch_attention(q, k, v, mt, is_causal=causal, scale=0.3),
             [q, k, v], device, rtol=1e-4, atol=1e-5)


def test_sdpa_grouped_query_attention(device, rng):
    q = rng.standard_normal((1, 4, 3, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    pair_run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
             lambda q, k, v: torch_attention(q, k, v, enable_gqa=True), [q, k, v], device,
             rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_torch(batch_first, device, rng):
    E, H = 8, 2
    tm = torch.nn.MultiheadAttention(E, H, batch_first=batch_first)
    lm = nn.MultiheadAttention(E, H, batch_first=batch_first).to(device)
    assert sorted(dict(lm.named_parameters())) == sorted(dict(tm.named_parameters()))
    with torch.no_grad():
        tm.in_proj_bias.copy_(torch.randn(3 * E))
        tm.out_proj.bias.copy_(torch.randn(E))
    lm.load_state_dict({k: lt.tensor(v.numpy(), device=device) for k, v in tm.state_dict().items()})
    shape = (2, 5, E) if batch_first else (5, 2, E)
    x = rng.standard_normal(shape).astype(np.float32)
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)  # True = not allowed (MHA's convention)
    pad = np.zeros((2, 5), dtype=bool)
    pad[1, 3:] = True
    xt, xl = torch.tensor(x, requires_grad=True), lt.tensor(x, device=device, requires_grad=True)
    ot, wt = tm(xt, xt, xt, key_padding_mask=torch.tensor(pad), attn_mask=torch.tensor(causal))
    ol, wl = lm(xl, xl, xl, key_padding_mask=lt.tensor(pad, device=device), attn_mask=lt.tensor(causal, device=device))
    np.testing.assert_allclose(ol.detach().numpy(), ot.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(wl.detach().numpy(), wt.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = rng.standard_normal(shape).astype(np.float32)
    ot.backward(torch.tensor(g))
    ol.backward(lt.tensor(g, device=device))
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    lp = dict(lm.named_parameters())
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(lp[name].grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)


def test_layers_match_torch_state_dict_and_values(device, rng):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                             torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 6, 3, stride=2, groups=2, bias=False),
                             torch.nn.AvgPool2d(2, ceil_mode=True), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    lm = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                       nn.Conv2d(4, 6, 3, stride=2, groups=2, bias=False), nn.AvgPool2d(2, ceil_mode=True),
                       nn.AdaptiveAvgPool2d(1), nn.Flatten()).to(device)
    assert list(lm.state_dict()) == list(tm.state_dict())
    lm.load_state_dict({k: lt.tensor(v.numpy(), device=device) for k, v in tm.state_dict().items()})
    x = rng.standard_normal((3, 1, 12, 12)).astype(np.float32)
    np.testing.assert_allclose(lm(lt.tensor(x, device=device)).numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_conv_default_init_has_torch_bounds():
    m = nn.Conv2d(3, 8, 5)
    bound = 1 / np.sqrt(3 * 25)  # kaiming_uniform(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    w, b = m.weight.numpy(), m.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(b).max() <= bound and w.std() > 0.4 * bound


def test_lazy_conv_step_kernel_counts(rng):
    """A conv + relu + maxpool forward on lazy: the window view is index arithmetic, the conv one
    GEMM step; compile once, then every step hits the cache."""
    conv = nn.Conv2d(3, 8, 3, padding=1).to("lazy")
    x = lt.tensor(rng.standard_normal((2, 3, 10, 10)).astype(np.float32), device="lazy")
    lt.mark_step()
    lt.metrics.reset()
    for _ in range(3):
        with lt.no_grad():  # under grad mode the values autograd saves are outputs too (runtime/saved.h)
            y = F.max_pool2d(conv(x).relu(), 2)
        lt.mark_step()
    c = lt.metrics.counters()
    assert c["graph_compiles"] == 1 and c["graph_cache_hits"] == 2
    assert lt.metrics.last_graph()["kernels"] <= 3  # im2col copy, GEMM, bias+relu+pool
    assert tuple(y.shape) == (2, 8, 5, 5)


@pytest.mark.parametrize("call, message", [
    (lambda: F.conv2d(lt.zeros(1, 3, 5, 5), lt.zeros(4, 2, 3, 3)), r"conv2d: input \[1, 3, 5, 5\] and weight \[4, 2, 3, 3\]"),
    (lambda: F.conv2d(lt.zeros(3, 5), lt.zeros(4, 3, 3, 3)), r"conv2d: expected 3-D .* input, got input of shape \[3, 5\]"),
    (lambda: F.conv2d(lt.zeros(1, 3, 2, 2), lt.zeros(4, 3, 3, 3)), "smaller than the kernel extent"),
    (lambda: F.conv2d(lt.zeros(1, 3, 5, 5), lt.zeros(4, 3, 3, 3), lt.zeros(3)), r"expected bias of shape \[4\]"),
    (lambda: F.conv2d(lt.zeros(1, 3, 5, 5, dtype=lt.float64), lt.zeros(4, 3, 3, 3)), "same dtype"),
    (lambda: F.conv2d(lt.zeros(1, 3, 5, 5), lt.zeros(4, 3, 3, 3), stride=0), "stride must be positive"),
    (lambda: F.max_pool2d(lt.zeros(1, 1, 5, 5), 2, padding=2), "pad should be at most half"),
    (lambda: F.max_pool2d(lt.zeros(1, 1, 5, 5, dtype=lt.int64), 2), "not implemented for int64"),
    (lambda: F.avg_pool2d(lt.zeros(1, 1, 5, 5), 2, divisor_override=0), "divisor must be not zero"),
])
def test_bad_input_gives_clear_errors(call, message, device):
    with pytest.raises(RuntimeError, match=message):
        call()
    y = F.conv2d(lt.ones(1, 1, 3, 3, device=device), lt.ones(1, 1, 2, 2, device=device))
    np.testing.assert_allclose(y.numpy(), np.full((1, 1, 2, 2), 4.0))  # the session keeps working
