"""Autograd from Python: gradients of every differentiable op and composite against PyTorch
(float64, CPU) on random inputs with broadcasting shapes, on cpu and lazy; and the tape's API
(backward, grad, accumulation, retain_graph, detach, no_grad/enable_grad, errors)."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as LF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

POS = "pos"    # inputs drawn in [0.5, 2] (log, sqrt, pow base, ...)
ANY = "any"    # standard normal
IDX = "idx"    # class indices (not differentiated)

# name -> (fn(mod, F, *inputs), [(shape, kind), ...]); `mod` is lazytensor or torch, `F` their
# nn.functional. Shapes broadcast where the op does.
CASES = {
    "add": (lambda m, F, a, b: a + b, [((3, 1, 4), ANY), ((2, 4), ANY)]),
    "sub": (lambda m, F, a, b: a - b, [((2, 3), ANY), ((3,), ANY)]),
    "mul": (lambda m, F, a, b: a * b, [((4, 1), ANY), ((1, 5), ANY)]),
    "div": (lambda m, F, a, b: a / b, [((2, 3), ANY), ((2, 1), POS)]),
    "pow": (lambda m, F, a, b: a ** b, [((2, 3), POS), ((3,), ANY)]),
    "pow_scalar": (lambda m, F, a: a ** 3, [((2, 3), ANY)]),
    "rpow_scalar": (lambda m, F, a: 2.0 ** a, [((2, 3), ANY)]),
    "rsub_rdiv": (lambda m, F, a: 1.5 - 2.0 / a, [((2, 3), POS)]),
    "maximum": (lambda m, F, a, b: m.maximum(a, b), [((3, 4), ANY), ((4,), ANY)]),
    "minimum": (lambda m, F, a, b: m.minimum(a, b), [((3, 1), ANY), ((3, 4), ANY)]),
    "where": (lambda m, F, a, b: m.where(a > 0, a, b), [((3, 4), ANY), ((1, 4), ANY)]),
    "neg": (lambda m, F, a: -a, [((5,), ANY)]),
    "exp": (lambda m, F, a: a.exp(), [((3, 4), ANY)]),
    "log": (lambda m, F, a: a.log(), [((3, 4), POS)]),
    "sqrt": (lambda m, F, a: a.sqrt(), [((3, 4), POS)]),
    "rsqrt": (lambda m, F, a: a.rsqrt(), [((3, 4), POS)]),
    "sin": (lambda m, F, a: a.sin(), [((3, 4), ANY)]),
    "cos": (lambda m, F, a: a.cos(), [((3, 4), ANY)]),
    "tanh": (lambda m, F, a: a.tanh(), [((3, 4), ANY)]),
    "sigmoid": (lambda m, F, a: a.sigmoid(), [((3, 4), ANY)]),
    "relu": (lambda m, F, a: a.relu(), [((3, 4), ANY)]),
    "abs": (lambda m, F, a: a.abs(), [((3, 4), ANY)]),
    "erf": (lambda m, F, a: a.erf(), [((3, 4), ANY)]),
    "floor": (lambda m, F, a: a.floor() * a, [((3, 4), ANY)]),
    "reciprocal": (lambda m, F, a: a.reciprocal(), [((3, 4), POS)]),
    "clamp": (lambda m, F, a: a.clamp(-0.5, 0.7), [((4, 5), ANY)]),
    "cast": (lambda m, F, a: a.float().double() * 2, [((3, 4), ANY)]),
    "sum_dim": (lambda m, F, a: a.sum(1), [((3, 4, 2), ANY)]),
    "sum_keepdim": (lambda m, F, a: a.sum((0, 2), keepdim=True), [((3, 4, 2), ANY)]),
    "sum_all": (lambda m, F, a: a.sum(), [((3, 4), ANY)]),
    "mean": (lambda m, F, a: a.mean(-1), [((3, 4), ANY)]),
    "var": (lambda m, F, a: a.var(1), [((3, 5), ANY)]),
    "std": (lambda m, F, a: a.std(0, keepdim=True), [((4, 3), ANY)]),
    "prod": (lambda m, F, a: a.prod(1), [((3, 4), POS)]),
    "amax": (lambda m, F, a: a.amax(1), [((3, 6), ANY)]),
    "amin": (lambda m, F, a: a.amin(0), [((3, 6), ANY)]),
    "max_all": (lambda m, F, a: a.max(), [((3, 6), ANY)]),
    "logsumexp": (lambda m, F, a: a.logsumexp(1), [((3, 6), ANY)]),
    "softmax": (lambda m, F, a: a.softmax(-1), [((3, 6), ANY)]),
    "log_softmax": (lambda m, F, a: a.log_softmax(0), [((4, 5), ANY)]),
    "matmul_2d": (lambda m, F, a, b: a @ b, [((3, 4), ANY), ((4, 5), ANY)]),
    "matmul_batched_broadcast": (lambda m, F, a, b: a @ b, [((2, 1, 3, 4), ANY), ((3, 4, 2), ANY)]),
    "matmul_vec": (lambda m, F, a, b: a @ b, [((3, 4), ANY), ((4,), ANY)]),
    "matmul_vec_left": (lambda m, F, a, b: a @ b, [((4,), ANY), ((2, 4, 3), ANY)]),
    "reshape": (lambda m, F, a: a.reshape(4, 3) * 2, [((2, 6), ANY)]),
    "permute": (lambda m, F, a: a.permute(2, 0, 1) * 2, [((2, 3, 4), ANY)]),
    "transpose": (lambda m, F, a: a.transpose(0, 1) * 2, [((2, 3), ANY)]),
    "expand": (lambda m, F, a: a.expand(3, 4, 2) * 2, [((4, 1), ANY)]),
    "unsqueeze_squeeze": (lambda m, F, a: a.unsqueeze(1).squeeze(1).flatten() * 2, [((3, 4), ANY)]),
    "relu_gelu": (lambda m, F, a: F.gelu(a), [((3, 4), ANY)]),
    "gelu_tanh": (lambda m, F, a: F.gelu(a, approximate="tanh"), [((3, 4), ANY)]),
    "silu": (lambda m, F, a: F.silu(a), [((3, 4), ANY)]),
    "layer_norm": (lambda m, F, a, w, b: F.layer_norm(a, (5,), w, b), [((3, 5), ANY), ((5,), ANY), ((5,), ANY)]),
    "layer_norm_2d_noaffine": (lambda m, F, a: F.layer_norm(a, (3, 4)), [((2, 3, 4), ANY)]),
    "linear": (lambda m, F, x, w, b: F.linear(x, w, b), [((2, 3, 4), ANY), ((5, 4), ANY), ((5,), ANY)]),
    "mse_loss": (lambda m, F, a, b: F.mse_loss(a, b), [((3, 4), ANY), ((3, 4), ANY)]),
    "cross_entropy": (lambda m, F, a, t: F.cross_entropy(a, t), [((6, 5), ANY), ((6,), IDX)]),
    "cross_entropy_smooth_sum": (lambda m, F, a, t: F.cross_entropy(a, t, reduction="sum", label_smoothing=0.1),
                                 [((6, 5), ANY), ((6,), IDX)]),
    "cross_entropy_3d": (lambda m, F, a, t: F.cross_entropy(a, t), [((2, 5, 3), ANY), ((2, 3), IDX)]),
    "nll_loss": (lambda m, F, a, t: F.nll_loss(a.log_softmax(1), t), [((6, 5), ANY), ((6,), IDX)]),
    "embedding": (lambda m, F, t, w: F.embedding(t, w), [((2, 3), IDX), ((5, 4), ANY)]),
}


def _draw(rng, shape, kind):
    if kind == POS:
        return rng.uniform(0.5, 2.0, shape)
    if kind == IDX:
        return rng.integers(0, 5, shape)
    return rng.standard_normal(shape)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_matches_torch(name, device, rng):
    fn, specs = CASES[name]
    arrays = [_draw(rng, s, k) for s, k in specs]
    lt_in = [lt.tensor(a, dtype=lt.float64 if k != IDX else lt.int64, device=device) for a, (s, k)
             in zip(arrays, specs)]
    th_in = [torch.tensor(a, dtype=torch.float64 if k != IDX else torch.int64) for a, (s, k)
             in zip(arrays, specs)]
    for t, th, (s, k) in zip(lt_in, th_in, specs):
        if k != IDX:
            t.requires_grad_()
            th.requires_grad_()
    out = fn(lt, LF, *lt_in)
    ref = fn(torch, TF, *th_in)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    # A random upstream gradient (never all ones) checks the VJP of non-scalar outputs.
    g = rng.standard_normal(tuple(ref.shape))
    out.backward(lt.tensor(g, dtype=lt.float64, device=device))
    ref.backward(torch.tensor(g))
    for i, (t, th, (s, k)) in enumerate(zip(lt_in, th_in, specs)):
        if k == IDX:
            continue
        assert t.grad is not None, f"input {i} got no gradient"
        assert t.grad.dtype == lt.float64 and tuple(t.grad.shape) == s
        np.testing.assert_allclose(t.grad.numpy(), th.grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=f"{name}: gradient of input {i}")


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "gelu_tanh", "cross_entropy", "pow"])
def test_gradient_matches_finite_differences(name, rng):
    """An oracle independent of PyTorch: central differences in float64."""
    fn, specs = CASES[name]
    arrays = [_draw(rng, s, k) for s, k in specs]
    g = None

    def value(arrs):
        ins = [lt.tensor(a, dtype=lt.float64 if k != IDX else lt.int64) for a, (s, k) in zip(arrs, specs)]
        out = fn(lt, LF, *ins)
        return float((out * lt.tensor(g, dtype=lt.float64)).sum().item())

    ins = [lt.tensor(a, dtype=lt.float64 if k != IDX else lt.int64) for a, (s, k) in zip(arrays, specs)]
    diff = [t.requires_grad_() for t, (s, k) in zip(ins, specs) if k != IDX]
    out = fn(lt, LF, *ins)
    g = rng.standard_normal(tuple(out.shape))
    grads = lt.autograd.grad((out * lt.tensor(g, dtype=lt.float64)).sum(), diff)
    gi = 0
    for i, (s, k) in enumerate(specs):
        if k == IDX:
            continue
        num = np.zeros(s)
        for j in np.ndindex(*s):
            hi = [a.copy() for a in arrays]
            lo = [a.copy() for a in arrays]
            hi[i][j] += 1e-6
            lo[i][j] -= 1e-6
            num[j] = (value(hi) - value(lo)) / 2e-6
        np.testing.assert_allclose(grads[gi].numpy(), num, rtol=1e-5, atol=1e-7)
        gi += 1


def test_backward_accumulates_and_zeroes(device, rng):
    a = rng.standard_normal((3, 4))
    x = lt.tensor(a, device=device, requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * a + 3, rtol=1e-5)
    x.grad = None
    assert x.grad is None
    x.sin().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(a), rtol=1e-5)


def test_retain_graph(device, rng):
    x = lt.tensor(rng.standard_normal(4), device=device, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (np.exp(x.numpy()) * (1 + x.numpy())), rtol=1e-5)
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()


def test_backward_needs_gradient_for_non_scalar(device, rng):
    x = lt.tensor(rng.standard_normal(4), device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        lt.tensor(rng.standard_normal(2), device=device).sum().backward()
    with pytest.raises(RuntimeError, match="shape"):
        (x * 2).backward(lt.ones(3, device=device))


def test_leaf_flags_and_detach(device, rng):
    x = lt.tensor(rng.standard_normal(3), device=device)
    assert not x.requires_grad and x.is_leaf and x.grad_fn is None
    x.requires_grad = True
    y = x * 2
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    assert "mul" in y.grad_fn.name()
    d = y.detach()
    assert not d.requires_grad and d.is_leaf
    np.testing.assert_allclose(d.numpy(), 2 * x.numpy())
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="floating point"):
        lt.tensor([1, 2], device=device).requires_grad_()
    with pytest.raises(RuntimeError):
        x.grad = lt.ones(5, device=device)
    with pytest.raises(RuntimeError, match="in-place"):
        x.add_(1)  # a leaf that requires grad, outside no_grad
    assert lt.zeros(2, 3, device=device, requires_grad=True).requires_grad


def test_comparisons_and_integer_results_carry_no_gradient(device, rng):
    x = lt.tensor(rng.standard_normal(5), device=device, requires_grad=True)
    assert not (x > 0).requires_grad
    assert not (x > 0).to(lt.int64).requires_grad


def test_no_grad_and_enable_grad(device, rng):
    x = lt.tensor(rng.standard_normal(3), device=device, requires_grad=True)
    with lt.no_grad():
        assert not lt.is_grad_enabled()
        y = x * 2
        with lt.enable_grad():
            z = x * 2
    assert lt.is_grad_enabled()
    assert not y.requires_grad and z.requires_grad

    @lt.no_grad()
    def f(t):
        return t * 3

    @lt.enable_grad()
    def g(t):
        return t * 3

    assert not f(x).requires_grad
    with lt.no_grad():
        assert g(x).requires_grad
    with lt.set_grad_enabled(False):
        assert not (x + 1).requires_grad
    assert (x + 1).requires_grad
    # An exception inside restores the mode.
    with pytest.raises(ValueError):
        with lt.no_grad():
            raise ValueError("boom")
    assert lt.is_grad_enabled()
    # In-place update of a leaf is allowed under no_grad (what optimizers do).
    with lt.no_grad():
        x.sub_(1.0)


def test_autograd_grad(device, rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    x = lt.tensor(a, device=device, requires_grad=True)
    w = lt.tensor(b, device=device, requires_grad=True)
    unused = lt.tensor(b, device=device, requires_grad=True)
    y = (x * w).sin()
    go = rng.standard_normal((3, 4))
    gx, gw = lt.autograd.grad(y, (x, w), grad_outputs=lt.tensor(go, device=device), retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), go * np.cos(a * b) * b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw.numpy(), (go * np.cos(a * b) * a).sum(0), rtol=1e-5, atol=1e-6)
    assert x.grad is None and w.grad is None  # grad() does not accumulate
    with pytest.raises(RuntimeError, match="not used"):
        lt.autograd.grad(y.sum(), [x, unused], retain_graph=True)
    gx2, gu = lt.autograd.grad(y.sum(), [x, unused], allow_unused=True)
    assert gu is None and gx2 is not None
    with pytest.raises(NotImplementedError, match="create_graph"):
        lt.autograd.grad(y.sum(), x, create_graph=True)


def test_autograd_backward_several_roots(device, rng):
    a = rng.standard_normal(4)
    x = lt.tensor(a, device=device, requires_grad=True)
    lt.autograd.backward([(x * 2).sum(), x * x], [None, lt.tensor(np.full(4, 0.5), device=device)])
    np.testing.assert_allclose(x.grad.numpy(), 2 + a, rtol=1e-5)


def test_lazy_backward_is_traced_not_run(rng):
    """On lazy, backward adds IR; the gradient is computed at the next sync, in one graph."""
    x = lt.tensor(rng.standard_normal((8, 8)), device="lazy", requires_grad=True)
    lt.mark_step()
    lt.metrics.reset()
    (x.tanh() @ x).sum().backward()
    assert lt.metrics.counters()["graph_compiles"] == 0
    assert x.grad._is_pending
    lt.mark_step()
    assert lt.metrics.counters()["graph_compiles"] == 1
    t = torch.tensor(x.numpy().astype(np.float64), requires_grad=True)
    (t.tanh() @ t).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
