"""Pooling gradients against PyTorch (torch 2.13, CPU) and float64 finite differences: max_pool2d
sends each window's gradient to its first maximum (ties included, as PyTorch does), avg_pool2d's
is the scaled col2im; strides unlike the kernel, padding, ceil_mode; kernel counts on lazy."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

CASES = [  # (kernel, stride, padding, dilation, ceil_mode)
    (2, 2, 0, 1, False),
    (3, 2, 1, 1, False),
    (3, 2, 1, 1, True),
    (2, 1, 0, 1, False),             # overlapping: stride < kernel
    ((3, 2), (1, 3), (1, 1), 1, True),  # stride > kernel along W
    (2, 3, 0, 1, True),              # gaps between windows, ceil-mode overhang
    (3, 2, 1, 2, False),             # dilation (max only)
]


def grads(lt_fn, torch_fn, x, g, device):
    xl = lt.tensor(x, device=device, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    yl, yt = lt_fn(xl), torch_fn(xt)
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)
    yl.backward(lt.tensor(g, device=device))
    yt.backward(torch.tensor(g))
    return xl.grad.numpy(), xt.grad.numpy()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool2d_gradient_matches_torch(case, ties, device, rng):
    k, s, p, d, ceil = case
    x = rng.standard_normal((2, 3, 9, 10)).astype(np.float32)
    if ties:  # few distinct values: most windows hold their maximum more than once
        x = rng.integers(0, 3, x.shape).astype(np.float32)
    fl = lambda t: F.max_pool2d(t, k, s, p, d, ceil)
    ft = lambda t: TF.max_pool2d(t, k, s, p, d, ceil)
    g = rng.standard_normal(tuple(ft(torch.tensor(x)).shape)).astype(np.float32)
    got, want = grads(fl, ft, x, g, device)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_max_pool2d_tie_goes_to_the_first_maximum(device):
    x = np.array([[[[1.0, 5.0, 5.0], [5.0, 0.0, 5.0], [2.0, 5.0, 1.0]]]], dtype=np.float32)
    xl = lt.tensor(x, device=device, requires_grad=True)
    F.max_pool2d(xl, 2, 1).sum().backward()
    # windows (row-major): [1 5; 5 0] -> (0,1); [5 5; 0 5] -> (0,1); [5 0; 2 5] -> (1,0); [0 5; 5 1] -> (1,2)
    want = np.array([[[[0, 2, 0], [1, 0, 1], [0, 0, 0]]]], dtype=np.float32)
    np.testing.assert_array_equal(xl.grad.numpy(), want)
    xt = torch.tensor(x, requires_grad=True)
    TF.max_pool2d(xt, 2, 1).sum().backward()
    np.testing.assert_array_equal(xt.grad.numpy(), want)


@pytest.mark.parametrize("case", [c for c in CASES if c[3] == 1])
@pytest.mark.parametrize("include_pad", [True, False])
def test_avg_pool2d_gradient_matches_torch(case, include_pad, device, rng):
    k, s, p, _, ceil = case
    x = rng.standard_normal((2, 3, 9, 10)).astype(np.float32)
    fl = lambda t: F.avg_pool2d(t, k, s, p, ceil, include_pad)
    ft = lambda t: TF.avg_pool2d(t, k, s, p, ceil, include_pad)
    g = rng.standard_normal(tuple(ft(torch.tensor(x)).shape)).astype(np.float32)
    got, want = grads(fl, ft, x, g, device)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES)
def test_max_pool2d_gradient_matches_finite_differences(case, rng):
    """Distinct values (no ties), float64: the gradient is the derivative."""
    k, s, p, d, ceil = case
    x = rng.permutation(4 * 6 * 7).reshape(1, 4, 6, 7) * 0.01
    fn = lambda t: F.max_pool2d(t, k, s, p, d, ceil)
    r = rng.standard_normal(tuple(fn(lt.tensor(x)).shape))
    xl = lt.tensor(x, requires_grad=True)
    (fn(xl) * lt.tensor(r)).sum().backward()
    eps = 1e-6
    for _ in range(4):
        u = rng.standard_normal(x.shape)
        f = lambda v: float((fn(lt.tensor(v)).numpy() * r).sum())
        numeric = (f(x + eps * u) - f(x - eps * u)) / (2 * eps)
        np.testing.assert_allclose(float((xl.grad.numpy() * u).sum()), numeric, rtol=1e-6, atol=1e-8)


# Kernels of one lazy pooling forward + backward on [4, 8, 16, 16]. Before these rules: max 2/2/0
# took 3 (max, tie count, backward), max 3/2/1 took 6 and avg 3/2/1 took 7 (the overlapping
# window view's movement VJPs: sums of mostly-zero copies over several kernels); avg 2/2/0 took 2
# and keeps the view's VJP (a reshape), which is already optimal. Max pooling is now 2: the window
# max is computed and stored by the kernel that finds each window's first max (two outputs).
@pytest.mark.parametrize("kind, k, s, p, kernels", [("max", 2, 2, 0, 2), ("max", 3, 2, 1, 2),
                                                    ("avg", 2, 2, 0, 2), ("avg", 3, 2, 1, 2)])
def test_lazy_pool_forward_backward_kernel_count(kind, k, s, p, kernels, rng):
    x = lt.tensor(rng.standard_normal((4, 8, 16, 16)).astype(np.float32), device="lazy", requires_grad=True)
    lt.mark_step()
    y = F.max_pool2d(x, k, s, p) if kind == "max" else F.avg_pool2d(x, k, s, p)
    y.backward(lt.ones(*y.shape, device="lazy"))
    lt.sync(y, x.grad)
    assert lt.metrics.last_graph()["kernels"] == kernels
