"""bfloat16 and float16 matrix products on lazy:cpu run as GEMM steps (backends/cpu/onednn_gemm.h:
widened to float32, rounded once), not as multiply-and-sum loop kernels (~10x slower), and equal
PyTorch CPU's products of the same 16-bit tensors (which also accumulate in float32 and round
once), forward and backward, in every layout the GEMM matcher takes: plain, transposed operands,
batched, a batch broadcast against a matrix, and a slice with an offset."""
import numpy as np
import pytest

import lazytensor as lt

torch = pytest.importorskip("torch")

LAYOUTS = {
    # name: (shape a, shape b, f(a, b) as both libraries write it)
    "plain": ((37, 64), (64, 29), lambda a, b: a @ b),
    "a_transposed": ((64, 37), (64, 29), lambda a, b: a.t() @ b),
    "b_transposed": ((37, 64), (29, 64), lambda a, b: a @ b.t()),
    "batched": ((3, 17, 40), (3, 40, 23), lambda a, b: a @ b),
    "broadcast_batch": ((2, 5, 17, 40), (40, 23), lambda a, b: a @ b),
    "sliced": ((40, 70), (50, 23), lambda a, b: a[3:20, 10:60] @ b),
}


def _gemm_steps(dtype):
    return [ln for ln in lt.metrics.last_graph()["grouping"].splitlines()
            if f": gemm {dtype}" in ln]


def _ulps(got, want, dtype):
    """|got - want| in units of the 16-bit type's spacing at want (values below 1% of the largest
    count as that: sums that cancel)."""
    mant = 7 if dtype == "bfloat16" else 10
    floor = 0.01 * max(float(np.max(np.abs(want))), 1e-30)
    return np.abs(got - want) / (np.maximum(np.abs(want), floor) * 2.0 ** -mant)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_half_matmul_is_a_gemm_step_and_matches_torch_cpu(layout, dtype, rng):
    sa, sb, f = LAYOUTS[layout]
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    tdt, ldt = getattr(torch, dtype), getattr(lt, dtype)
    ta, tb = (torch.from_numpy(x).to(tdt).requires_grad_() for x in (a, b))
    ty = f(ta, tb)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.from_numpy(g).to(tdt))
    la, lb = (lt.tensor(x, device="lazy:cpu").to(ldt).detach().requires_grad_() for x in (a, b))
    ly = f(la, lb)
    lt.mark_step()
    assert len(_gemm_steps(dtype)) == 1, lt.metrics.last_graph()["grouping"]
    assert ly.dtype == ldt
    ly.backward(lt.tensor(g, device="lazy:cpu").to(ldt))
    lt.mark_step()
    assert len(_gemm_steps(dtype)) == 2, lt.metrics.last_graph()["grouping"]  # both gradients
    for what, got, want in (("output", ly, ty), ("grad a", la.grad, ta.grad),
                            ("grad b", lb.grad, tb.grad)):
        got = got.float().numpy()
        want = want.detach().float().numpy()
        assert got.shape == want.shape, what
        # Both round a float32 sum once; only the order of the sum differs: at most one unit.
        assert _ulps(got, want, dtype).max() <= 1.0, (what, _ulps(got, want, dtype).max())


def test_bfloat16_linear_under_autocast_runs_gemms(rng):
    """A model's linear layers under CPU autocast: every product a GEMM step, values as PyTorch's."""
    x = rng.standard_normal((8, 48)).astype(np.float32)
    w = (rng.standard_normal((32, 48)) * 0.2).astype(np.float32)
    tw = torch.from_numpy(w).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty = torch.nn.functional.linear(torch.from_numpy(x), tw)
    ty.float().sum().backward()
    lw = lt.tensor(w, device="lazy:cpu").detach().requires_grad_()
    with lt.autocast("cpu", dtype=lt.bfloat16):
        ly = lt.nn.functional.linear(lt.tensor(x, device="lazy:cpu"), lw)
    ly.float().sum().backward()
    lt.mark_step()
    assert len(_gemm_steps("bfloat16")) >= 1, lt.metrics.last_graph()["grouping"]
    assert ly.dtype == lt.bfloat16
    assert _ulps(ly.float().numpy(), ty.detach().float().numpy(), "bfloat16").max() <= 1.0
    np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), rtol=2e-2, atol=2e-2)
