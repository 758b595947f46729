"""log1p and expm1: primitives (ir/ops.def) whose point is accuracy near 0, where log(1 + x) and
exp(x) - 1 lose every digit. Oracles: PyTorch 2.13 CPU on the same values, float64 finite
differences for the gradients, and the torch bridge's translation (no CPU fallback)."""
import numpy as np
import pytest
import torch

import lazytensor as lt

DTYPES = {"float32": (lt.float32, torch.float32, 2e-7), "float64": (lt.float64, torch.float64, 1e-15)}


def _values(rng):
    # Tiny (where the naive forms fail), moderate, large; log1p's domain is x > -1.
    tiny = rng.uniform(-1e-9, 1e-9, 200)
    mid = rng.uniform(-0.9, 5.0, 200)
    big = rng.uniform(5.0, 60.0, 50)
    return np.concatenate([tiny, mid, big, [0.0, -0.0]])


@pytest.mark.parametrize("name", ["log1p", "expm1"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_values_match_torch(name, dtype, device, rng):
    ltd, td, rtol = DTYPES[dtype]
    x = _values(rng)
    want = getattr(torch, name)(torch.tensor(x, dtype=td)).numpy()
    got = getattr(lt, name)(lt.tensor(x, dtype=ltd, device=device)).numpy()
    np.testing.assert_allclose(got, want, rtol=rtol * 4, atol=0)
    # Near 0 the result keeps x's sign and magnitude: the naive form would give 0 (or 1e-7 noise).
    small = np.abs(x) < 1e-9
    held = x.astype(np.float32) if dtype == "float32" else x  # x as the dtype holds it
    np.testing.assert_allclose(got[small], held[small], rtol=1e-7 if dtype == "float32" else 1e-9)
    # The method form is the same op.
    np.testing.assert_array_equal(getattr(lt.tensor(x, dtype=ltd, device=device), name)().numpy(), got)


def test_integer_input_promotes_like_torch(device):
    x = [0, 1, 7]
    for name in ("log1p", "expm1"):
        got = getattr(lt, name)(lt.tensor(x, device=device))
        want = getattr(torch, name)(torch.tensor(x))
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["log1p", "expm1"])
def test_gradients_match_float64_finite_differences(name, device, rng):
    x = rng.uniform(-0.5, 2.0, (3, 4))
    xt = lt.tensor(x, dtype=lt.float64, device=device, requires_grad=True)
    r = rng.standard_normal((3, 4))
    (getattr(xt, name)() * lt.tensor(r, dtype=lt.float64, device=device)).sum().backward()
    eps = 1e-6
    f = getattr(np, name)
    numeric = (f(x + eps) - f(x - eps)) / (2 * eps) * r
    np.testing.assert_allclose(xt.grad.numpy(), numeric, rtol=1e-7, atol=1e-10)


def test_the_torch_bridge_runs_them_without_fallback(rng):
    import lazytensor.torch  # noqa: F401  (the lazy device and the backend)
    x = torch.tensor(rng.uniform(-0.5, 2.0, 16), dtype=torch.float32)
    before = lt.metrics.counters().get("fallbacks", 0)
    got = (torch.log1p(x.to("lazy")) + torch.expm1(x.to("lazy"))).cpu()
    torch.testing.assert_close(got, torch.log1p(x) + torch.expm1(x))
    f = torch.compile(lambda v: torch.log1p(v) * torch.expm1(v), backend="lazytensor")
    torch.testing.assert_close(f(x), torch.log1p(x) * torch.expm1(x))
    assert lt.metrics.counters().get("fallbacks", 0) == before
