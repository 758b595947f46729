"""lt.autocast against torch 2.13's CPU autocast and torch ops on explicitly cast inputs.

PyTorch's CPU and CUDA autocast op lists differ; lt.autocast follows the CUDA lists on every
device (the contract). Where torch's CPU autocast agrees (the low-precision list, the losses,
prod) its output dtype is the oracle; for softmax, log_softmax, layer_norm, sum, cumsum, softplus
and normalize (float32 on CUDA, left alone by CPU autocast) the oracle is the torch op on
float32-cast inputs, which is what CUDA autocast runs.
"""
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazytensor as lt
import lazytensor.nn.functional as F

DEVICES = ["cpu", "lazy"]
BF16_RTOL, BF16_ATOL = 2e-2, 2e-2


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def to_np(t):
    return t.float().detach().cpu().numpy() if isinstance(t, torch.Tensor) else \
        t.to(lt.float32).detach().to("cpu").numpy()


def close_bf16(got, want):
    """Within two bfloat16 ulps of the largest magnitude (the bias add of a conv or linear may
    round once more than torch's fused kernel) plus 2% relative."""
    np.testing.assert_allclose(got, want, rtol=BF16_RTOL, atol=np.abs(want).max() * 2.0**-6)


def lt_dtype_name(t):
    return str(t.dtype).split(".")[-1]


def torch_dtype_name(t):
    return str(t.dtype).split(".")[-1]


def leaves(arrays, device, torch_side):
    if torch_side:
        return [torch.tensor(a, requires_grad=True) for a in arrays]
    return [lt.tensor(a, device=device, requires_grad=True) for a in arrays]


# name -> (input shapes, lt fn, torch fn); each is called under autocast on float32 leaves.
LOW = {
    "F.linear": ([(5, 8), (6, 8), (6,)], F.linear, TF.linear),
    "Tensor.matmul": ([(5, 8), (8, 3)], lambda a, b: a.matmul(b), lambda a, b: a.matmul(b)),
    "@": ([(2, 5, 8), (8, 3)], lambda a, b: a @ b, lambda a, b: a @ b),
    "lt.matmul": ([(5, 8), (8, 3)], lt.matmul, torch.matmul),
    "mm": ([(5, 8), (8, 3)], lt.mm, torch.mm),
    "bmm": ([(2, 5, 8), (2, 8, 3)], lambda a, b: a.bmm(b), lambda a, b: a.bmm(b)),
    "F.conv2d": ([(2, 3, 7, 6), (4, 3, 3, 3), (4,)], lambda x, w, b: F.conv2d(x, w, b, padding=1),
                 lambda x, w, b: TF.conv2d(x, w, b, padding=1)),
    "F.conv1d": ([(2, 3, 9), (4, 3, 3)], lambda x, w: F.conv1d(x, w, stride=2),
                 lambda x, w: TF.conv1d(x, w, stride=2)),
}


def run_both(device, shapes, lt_fn, torch_fn, seed, prep_lt=None, prep_torch=None):
    """Runs fn under autocast on float32 leaves in lt and torch; returns (lt out, lt leaves,
    torch out, torch leaves) after backward of out.float().sum() * a fixed weighting."""
    rng = np.random.default_rng(seed)
    arrays = [rand(rng, *s) for s in shapes]
    lt_in, t_in = leaves(arrays, device, False), leaves(arrays, device, True)
    lt_args = prep_lt(lt_in) if prep_lt else lt_in
    t_args = prep_torch(t_in) if prep_torch else t_in
    with lt.autocast(device, dtype=lt.bfloat16):
        out = lt_fn(*lt_args)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tout = torch_fn(*t_args)
    wt = rand(rng, *tout.shape)
    (out.to(lt.float32) * lt.tensor(wt, device=device)).sum().backward()
    (tout.float() * torch.tensor(wt)).sum().backward()
    return out, lt_in, tout, t_in


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(LOW))
def test_low_precision_ops_match_torch_cpu_autocast(device, name):
    shapes, lt_fn, torch_fn = LOW[name]
    out, lt_in, tout, t_in = run_both(device, shapes, lt_fn, torch_fn, seed=len(name))
    assert tout.dtype == torch.bfloat16
    assert lt_dtype_name(out) == torch_dtype_name(tout) == "bfloat16"
    close_bf16(to_np(out), to_np(tout))
    for a, b in zip(lt_in, t_in):
        assert a.grad is not None and a.grad.dtype == lt.float32
        close_bf16(to_np(a.grad), b.grad.numpy())


# name -> (input shapes, lt fn, torch fn, torch CPU autocast agrees on float32). The inputs are
# bfloat16 (cast from float32 leaves outside autocast), so float32 outputs show the policy.
TARGET = torch.tensor([0, 3, 1, 2, 3])
F32 = {
    "softmax": ([(5, 4)], lambda x: x.softmax(-1), lambda x: x.softmax(-1), False),
    "log_softmax": ([(5, 4)], lambda x: F.log_softmax(x, -1), lambda x: TF.log_softmax(x, -1),
                    False),
    "F.softmax": ([(5, 4)], lambda x: F.softmax(x, 0), lambda x: TF.softmax(x, 0), False),
    "layer_norm": ([(5, 4), (4,), (4,)], lambda x, w, b: F.layer_norm(x, (4,), w, b),
                   lambda x, w, b: TF.layer_norm(x, (4,), w, b), False),
    "sum": ([(5, 4)], lambda x: x.sum(1), lambda x: x.sum(1), False),
    "lt.sum": ([(5, 4)], lambda x: lt.sum(x), lambda x: torch.sum(x), False),
    "cumsum": ([(5, 4)], lambda x: x.cumsum(0), lambda x: x.cumsum(0), False),
    "prod": ([(5, 4)], lambda x: x.prod(1), lambda x: x.prod(1), True),
    "softplus": ([(5, 4)], F.softplus, TF.softplus, False),
    "normalize": ([(5, 4)], F.normalize, TF.normalize, False),
    "cross_entropy": ([(5, 4)], lambda x: F.cross_entropy(x, lt.tensor(TARGET.numpy(),
                                                                       device=x.device)),
                      lambda x: TF.cross_entropy(x, TARGET), True),
    "nll_loss": ([(5, 4)], lambda x: F.nll_loss(x, lt.tensor(TARGET.numpy(), device=x.device)),
                 lambda x: TF.nll_loss(x, TARGET), True),
    "mse_loss": ([(5, 4), (5, 4)], F.mse_loss, TF.mse_loss, True),
    "l1_loss": ([(5, 4), (5, 4)], F.l1_loss, TF.l1_loss, True),
    "smooth_l1_loss": ([(5, 4), (5, 4)], F.smooth_l1_loss, TF.smooth_l1_loss, True),
    "huber_loss": ([(5, 4), (5, 4)], F.huber_loss, TF.huber_loss, True),
    "bce_with_logits": ([(5, 4), (5, 4)], F.binary_cross_entropy_with_logits,
                        TF.binary_cross_entropy_with_logits, True),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(F32))
def test_float32_ops(device, name):
    shapes, lt_fn, torch_fn, cpu_agrees = F32[name]
    rng = np.random.default_rng(len(name))
    arrays = [rand(rng, *s) for s in shapes]
    if name == "bce_with_logits":
        arrays[1] = (arrays[1] > 0).astype(np.float32)
    lt_in, t_in = leaves(arrays, device, False), leaves(arrays, device, True)
    lt_bf = [a.to(lt.bfloat16) for a in lt_in]
    t_bf = [a.bfloat16() for a in t_in]
    with lt.autocast(device):
        out = lt_fn(*lt_bf)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu_autocast = torch_fn(*t_bf)
    # torch 2.13's CPU list: these agree with CUDA's float32 policy, the others stay bfloat16.
    assert (cpu_autocast.dtype == torch.float32) == cpu_agrees
    want = torch_fn(*[a.float() for a in t_bf])  # what CUDA autocast runs
    assert out.dtype == lt.float32 and want.dtype == torch.float32
    np.testing.assert_allclose(to_np(out), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    wt = rand(rng, *want.shape)
    (out * lt.tensor(wt, device=device)).sum().backward()
    (want * torch.tensor(wt)).sum().backward()
    for a, b in zip(lt_in, t_in):
        assert a.grad.dtype == lt.float32
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=BF16_RTOL, atol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_sdpa_runs_in_low_precision(device):
    rng = np.random.default_rng(3)
    arrays = [rand(rng, 2, 3, 5, 8) for _ in range(3)]
    q, k, v = leaves(arrays, device, False)
    with lt.autocast(device):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == lt.bfloat16
    # torch's F.scaled_dot_product_attention on bfloat16 inputs (the fused op's inputs are cast
    # once and its result stays in the low precision).
    tq, tk, tv = [torch.tensor(a).bfloat16() for a in arrays]
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    assert want.dtype == torch.bfloat16
    np.testing.assert_allclose(to_np(out), want.float().numpy(), rtol=5e-2, atol=5e-2)
    out.to(lt.float32).sum().backward()
    assert q.grad.dtype == k.grad.dtype == v.grad.dtype == lt.float32


@pytest.mark.parametrize("device", DEVICES)
def test_integer_and_float64_inputs_are_not_cast(device):
    i = lt.tensor([[1, 2], [3, 4]], device=device)
    d = lt.tensor(np.ones((2, 2)), device=device)
    f = lt.ones(2, 2, device=device)
    with lt.autocast(device):
        assert i.sum().dtype == lt.int64  # float32 list: integers untouched
        assert (d @ d).dtype == lt.float64  # low list: float64 untouched, as PyTorch
        assert (f + f).dtype == lt.float32  # unlisted ops: unchanged
        assert (F.linear(f, f) + f).dtype == lt.float32  # promotion of bfloat16 and float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        td = torch.ones(2, 2, dtype=torch.float64)
        assert (td @ td).dtype == torch.float64


def mlp_step(device, arrays, target):
    lt.manual_seed(0)
    model = lt.nn.Sequential(lt.nn.Linear(6, 16), lt.nn.ReLU(), lt.nn.Linear(16, 4)).to(device)
    params = list(model.parameters())
    with lt.no_grad():
        for p, a in zip(params, arrays):
            p.copy_(lt.tensor(a, device=device))
    x = lt.tensor(arrays[-1], device=device)
    with lt.autocast(device):
        logits = model(x)
        loss = F.cross_entropy(logits, lt.tensor(target, device=device))
    loss.backward()
    return logits, loss, params


def test_mlp_cpu_and_lazy_agree():
    rng = np.random.default_rng(5)
    arrays = [rand(rng, 16, 6), rand(rng, 16), rand(rng, 4, 16), rand(rng, 4), rand(rng, 8, 6)]
    target = rng.integers(0, 4, size=8)
    res = {d: mlp_step(d, arrays, target) for d in DEVICES}
    (lc, sc, pc), (ll, sl, pl) = res["cpu"], res["lazy"]
    assert lc.dtype == ll.dtype == lt.bfloat16 and sc.dtype == sl.dtype == lt.float32
    np.testing.assert_allclose(to_np(ll), to_np(lc), rtol=BF16_RTOL, atol=BF16_ATOL)
    np.testing.assert_allclose(to_np(sl), to_np(sc), rtol=1e-2, atol=1e-2)
    for a, b in zip(pc, pl):
        assert a.grad.dtype == b.grad.dtype == lt.float32
        np.testing.assert_allclose(to_np(b.grad), to_np(a.grad), rtol=BF16_RTOL, atol=1e-2)
    # And the same step in torch under CPU autocast (linear in bf16, cross_entropy in float32).
    tm = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        for p, a in zip(tm.parameters(), arrays):
            p.copy_(torch.tensor(a))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tl = tm(torch.tensor(arrays[-1]))
        ts = TF.cross_entropy(tl, torch.tensor(target))
    ts.backward()
    assert tl.dtype == torch.bfloat16 and ts.dtype == torch.float32
    np.testing.assert_allclose(to_np(sc), ts.item(), rtol=1e-2, atol=1e-2)
    for a, b in zip(pc, tm.parameters()):
        np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=BF16_RTOL, atol=1e-2)


def test_nesting_enabled_false_and_state():
    x = lt.ones(2, 2, device="lazy")
    assert not lt.is_autocast_enabled("lazy")
    with lt.autocast("lazy"):
        assert lt.is_autocast_enabled("lazy") and not lt.is_autocast_enabled("cpu")
        assert (x @ x).dtype == lt.bfloat16
        with lt.autocast("lazy", enabled=False):
            assert not lt.is_autocast_enabled("lazy")
            assert (x @ x).dtype == lt.float32
            with lt.autocast("lazy", dtype=lt.float16):
                assert lt.get_autocast_dtype("lazy") == lt.float16
                assert (x @ x).dtype == lt.float16
        assert (x @ x).dtype == lt.bfloat16 and lt.get_autocast_dtype("lazy") == lt.bfloat16
    assert not lt.is_autocast_enabled("lazy") and (x @ x).dtype == lt.float32
    assert lt.amp.autocast is lt.autocast


def test_device_coverage():
    c, z = lt.ones(2, 2), lt.ones(2, 2, device="lazy")
    with lt.autocast("cuda"):  # covers cuda and lazy:cuda only
        assert (c @ c).dtype == lt.float32
        if z.device.backend != "cuda":
            assert (z @ z).dtype == lt.float32
    with lt.autocast("lazy"):
        assert (c @ c).dtype == lt.float32 and (z @ z).dtype == lt.bfloat16
    with lt.autocast("cpu"):
        assert (c @ c).dtype == lt.bfloat16
        # a lazy tensor is covered by its backend's device type too (lazy:cpu here)
        assert (z @ z).dtype == (lt.bfloat16 if z.device.backend == "cpu" else lt.float32)


def test_decorator_and_thread_local():
    x = lt.ones(2, 2, device="lazy")
    seen = {}

    @lt.autocast("lazy")
    def f():
        t = threading.Thread(target=lambda: seen.setdefault("other", (x @ x).dtype))
        t.start()
        t.join()
        return (x @ x).dtype

    assert f() == lt.bfloat16
    assert seen["other"] == lt.float32
    assert (x @ x).dtype == lt.float32


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="device_type"):
        lt.autocast("tpu")
    with pytest.raises(RuntimeError, match="dtype"):
        lt.autocast("cpu", dtype=lt.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_off_is_bit_identical_to_undecorated(device):
    rng = np.random.default_rng(9)
    x, w, b = (lt.tensor(rand(rng, *s), device=device) for s in [(4, 8), (3, 8), (3,)])
    with lt.autocast(device):  # a region before must leave nothing behind
        F.linear(x, w, b)
    for hooked, args in [(F.linear, (x, w, b)), (F.layer_norm, (x, (8,))),
                         (F.softmax, (x, 1)), (lt.Tensor.matmul, (x, w.T)),
                         (lt.Tensor.sum, (x,))]:
        got, want = hooked(*args), hooked.__wrapped__(*args)
        assert got.dtype == want.dtype
        assert np.array_equal(got.numpy(), want.numpy())


def test_weight_cast_cache_keeps_gradients():
    rng = np.random.default_rng(2)
    x = lt.tensor(rand(rng, 3, 4), device="lazy")
    w = lt.tensor(rand(rng, 5, 4), device="lazy", requires_grad=True)
    with lt.autocast("lazy"):
        y = F.linear(x, w) + F.linear(x * 2, w)  # w cast once, used twice
    y.to(lt.float32).sum().backward()
    want = 3 * x.numpy().sum(0)
    np.testing.assert_allclose(w.grad.numpy(), np.broadcast_to(want, (5, 4)), rtol=2e-2, atol=2e-2)


def test_compile_retraces_when_autocast_changes():
    rng = np.random.default_rng(4)
    w = lt.tensor(rand(rng, 6, 8), device="lazy")

    @lt.compile
    def f(x):
        return F.linear(x, w).to(lt.float32).softmax(-1)

    x = lt.tensor(rand(rng, 3, 8), device="lazy")
    with lt.no_grad():
        a = f(x)
        with lt.autocast("lazy"):
            b = f(x)
            b2 = f(x)
        c = f(x)
    assert f.stats["traces"] == 2 and f.stats["replays"] == 2
    np.testing.assert_array_equal(a.numpy(), c.numpy())
    np.testing.assert_array_equal(b.numpy(), b2.numpy())
    assert not np.array_equal(a.numpy(), b.numpy())  # the autocast graph ran in bfloat16
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=5e-2, atol=5e-2)
