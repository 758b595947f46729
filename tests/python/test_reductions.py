"""Reductions over dims and keepdim on cpu and lazy against NumPy (and PyTorch for composites)."""
import numpy as np
import pytest

import lazytensor as lt
from conftest import assert_close, torch_or_skip

DIMS = [None, 0, 1, -1, (0, 2), (1, -1), (0, 1, 2)]

REDUCTIONS = {
    "sum": np.sum,
    "mean": np.mean,
    "amax": np.amax,
    "amin": np.amin,
    "prod": np.prod,
}


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction(device, rng, name, dim, keepdim):
    x = (rng.uniform(0.6, 1.4, (3, 4, 5)) * rng.choice([-1, 1], (3, 4, 5))).astype(np.float32)
    t = lt.tensor(x, device=device)
    want = REDUCTIONS[name](x.astype(np.float64), axis=dim, keepdims=keepdim)
    if dim is None and keepdim:
        out = getattr(t, name)(dim=(0, 1, 2), keepdim=True)
    else:
        out = getattr(t, name)(dim, keepdim) if dim is not None else getattr(t, name)()
    assert_close(out, want, dtype=lt.float32, rtol=1e-5, atol=1e-5)
    assert_close(getattr(lt, name)(t, dim=dim if dim is not None else (0, 1, 2), keepdim=keepdim),
                 REDUCTIONS[name](x.astype(np.float64), axis=dim if dim is not None else (0, 1, 2),
                                  keepdims=keepdim),
                 rtol=1e-5, atol=1e-5)


def test_reduce_size_one_and_zero_dim(device, rng):
    x = rng.standard_normal((4, 1, 3)).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert_close(t.sum(1), x.sum(1).astype(np.float64))
    assert_close(t.mean(1, keepdim=True), x.mean(1, keepdims=True).astype(np.float64))
    s = lt.tensor(2.5, device=device)
    assert_close(s.sum(), 2.5)
    assert_close(s.sum(0), 2.5)
    assert_close(s.amax(-1), 2.5)


def test_max_min_full(device, rng):
    x = rng.standard_normal((5, 7)).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert_close(t.max(), x.max())
    assert_close(t.min(), x.min())
    assert_close(lt.max(t), x.max())
    assert_close(lt.min(t), x.min())
    y = rng.standard_normal((7,)).astype(np.float32)
    assert_close(t.max(lt.tensor(y, device=device)), np.maximum(x, y))
    assert_close(lt.min(t, lt.tensor(y, device=device)), np.minimum(x, y))
    assert t.max().item() == pytest.approx(float(x.max()))


def test_integer_and_bool_reductions(device, rng):
    xi = rng.integers(-20, 20, (4, 6)).astype(np.int32)
    ti = lt.tensor(xi, device=device)
    assert_close(ti.sum(), xi.sum(), dtype=lt.int64)  # sums of integers are int64, as in PyTorch
    assert_close(ti.sum(1), xi.sum(1), dtype=lt.int64)
    assert_close(ti.amax(0), xi.max(0), dtype=lt.int32)
    assert_close(ti.amin(), xi.min(), dtype=lt.int32)
    xs = rng.integers(1, 3, (3, 4))
    assert_close(lt.tensor(xs, device=device).prod(1), xs.prod(1), dtype=lt.int64)
    b = rng.random((5, 5)) > 0.3
    tb = lt.tensor(b, device=device)
    assert_close(tb.sum(), b.sum(), dtype=lt.int64)
    assert_close(tb.sum(0), b.sum(0), dtype=lt.int64)
    with pytest.raises(RuntimeError):
        ti.mean()  # as in PyTorch: mean needs a floating input
    assert_close(ti.mean(dtype=lt.float64), xi.astype(np.float64).mean(), dtype=lt.float64)
    assert_close(ti.sum(dtype=lt.float32), xi.sum().astype(np.float64), dtype=lt.float32)


def test_sum_large_reduction_accuracy(device, rng):
    x = rng.standard_normal((64, 513)).astype(np.float32)
    t = lt.tensor(x, device=device)
    assert_close(t.sum(), x.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)
    assert_close(t.mean(0), x.astype(np.float64).mean(0), rtol=1e-5, atol=1e-5)


# Few outputs over a long reduced space are reduced in two stages (lowering/split_reduce.cc): a
# whole-tensor sum, column sums (bias gradients), reduced runs of several axes, keepdim, half types.
@pytest.mark.parametrize("shape,dim", [((8, 64, 96), None), ((4096, 24), 0), ((2, 6, 1024, 3), (1, 2)),
                                       ((8, 512, 4), (0, 1)), ((3, 20000), 1)], ids=str)
@pytest.mark.parametrize("name", ["sum", "amax", "amin", "mean"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_wide_reductions_in_two_stages(device, rng, shape, dim, name, keepdim):
    x = rng.standard_normal(shape).astype(np.float32)
    t = lt.tensor(x, device=device)
    axes = dim if dim is not None else tuple(range(len(shape)))
    want = REDUCTIONS[name](x.astype(np.float64) ** 2, axis=axes, keepdims=keepdim)
    got = getattr(t * t, name)(axes, keepdim)
    assert_close(got, want, dtype=lt.float32, rtol=2e-5, atol=1e-4)
    if device == "lazy":
        assert lt.metrics.last_graph()["kernels"] == 2


def test_wide_bfloat16_sum_accumulates_in_float32(device, rng):
    x = rng.uniform(0.5, 1.5, (64, 4096)).astype(np.float32)
    t = lt.tensor(x, device=device).to(lt.bfloat16)
    exact = t.float().numpy().astype(np.float64).sum()
    got = t.sum()
    assert got.dtype == lt.bfloat16
    # Within the final rounding to bfloat16 (8 bits): a bfloat16 running sum would be far off.
    assert abs(got.float().item() - exact) <= exact * 2 ** -8


@pytest.mark.parametrize("dim", [None, 1, (0, 2)], ids=str)
def test_var_std(device, rng, dim):
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    t = lt.tensor(x, device=device)
    x64 = x.astype(np.float64)
    assert_close(t.var(dim), x64.var(axis=dim, ddof=1), rtol=1e-4, atol=1e-5)
    assert_close(t.std(dim), x64.std(axis=dim, ddof=1), rtol=1e-4, atol=1e-5)
    assert_close(t.var(dim, unbiased=False), x64.var(axis=dim), rtol=1e-4, atol=1e-5)
    if dim is not None:
        assert_close(t.std(dim, correction=0, keepdim=True), x64.std(axis=dim, keepdims=True),
                     rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family_matches_torch(device, rng, dim):
    torch = torch_or_skip()
    x = (rng.standard_normal((4, 6)) * 3).astype(np.float32)
    t = lt.tensor(x, device=device)
    px = torch.tensor(x, dtype=torch.float64)
    assert_close(t.softmax(dim), torch.softmax(px, dim).numpy(), rtol=1e-5, atol=1e-6)
    assert_close(lt.log_softmax(t, dim), torch.log_softmax(px, dim).numpy(), rtol=1e-5, atol=1e-5)
    assert_close(t.logsumexp(dim), torch.logsumexp(px, dim).numpy(), rtol=1e-5, atol=1e-5)
    assert_close(t.logsumexp(dim, keepdim=True), torch.logsumexp(px, dim, keepdim=True).numpy(),
                 rtol=1e-5, atol=1e-5)


def test_reduce_then_elementwise_chain(device, rng):
    x = rng.standard_normal((6, 8)).astype(np.float32)
    t = lt.tensor(x, device=device)
    x64 = x.astype(np.float64)
    centered = t - t.mean(1, keepdim=True)
    assert_close(centered, x64 - x64.mean(1, keepdims=True), atol=1e-5)
    norm = (centered * centered).sum(1).sqrt()
    assert_close(norm, np.sqrt(((x64 - x64.mean(1, keepdims=True)) ** 2).sum(1)), rtol=1e-5, atol=1e-5)


# Reductions down columns (the reduced axes outside the innermost kept one), which the CPU backend
# sums a block of neighbouring outputs at a time (backends/cpu/codegen.cc emit_column_segment):
# widths that are not a multiple of the block, several outer dims, runs split across threads
# mid-row, a fused producer, and every reduce op and accumulator dtype.
COLUMN_CASES = [
    ((128, 1024), 0),
    ((37, 200), 0),
    ((5, 3), 0),
    ((4, 64, 1000), 1),
    ((6, 7, 129), (0, 1)),
    ((3, 50, 2, 70), (1, 2)),
]


@pytest.mark.parametrize("shape,dim", COLUMN_CASES, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_column_reductions(device, rng, shape, dim, name):
    x = (rng.uniform(0.9, 1.1, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
    y = rng.uniform(0.9, 1.1, shape[-1]).astype(np.float32)  # products stay in float32's range
    t, u = lt.tensor(x, device=device), lt.tensor(y, device=device)
    want = REDUCTIONS[name](x.astype(np.float64), axis=dim)
    assert_close(getattr(t, name)(dim), want, rtol=1e-5, atol=1e-5)
    fused = (x * y).astype(np.float64)  # float32 products, as the kernel forms them
    assert_close(getattr(t * u, name)(dim, keepdim=True),
                 REDUCTIONS[name](fused, axis=dim, keepdims=True), rtol=1e-5, atol=1e-5)


def test_column_reductions_of_empty_columns(device):
    # Reducing a zero-length axis down columns gives the identity (a kernel with an empty inner
    # space must not run its loop body).
    x = np.zeros((0, 70), np.float32)
    t = lt.tensor(x, device=device)
    assert_close(t.sum(0), np.zeros(70))
    assert_close(t.prod(0), np.ones(70))
    assert_close(lt.tensor(np.zeros((3, 0, 70), np.float32), device=device).sum(1), np.zeros((3, 70)))


def test_column_reductions_of_integers_halves_and_nan(device, rng):
    xi = rng.integers(-50, 50, (33, 77)).astype(np.int32)
    ti = lt.tensor(xi, device=device)
    assert_close(ti.sum(0), xi.sum(0, dtype=np.int64))
    assert_close(ti.amax(0), xi.max(0))
    xh = rng.standard_normal((300, 70)).astype(np.float16)
    assert_close(lt.tensor(xh, device=device).sum(0), xh.astype(np.float64).sum(0), rtol=2e-3, atol=5e-2)
    xn = rng.standard_normal((20, 90)).astype(np.float32)
    xn[7, 3] = np.nan
    xn[0, 80] = np.nan
    got = lt.tensor(xn, device=device).amax(0).numpy()
    assert np.isnan(got[3]) and np.isnan(got[80])
    np.testing.assert_array_equal(np.delete(got, [3, 80]), np.delete(xn.max(0), [3, 80]))


def test_a_bias_gradient_gathered_by_cat_keeps_its_two_stages(rng):
    # DistributedDataParallel concatenates gradients into buckets: cat tiles each piece along the
    # bucket's length, which is no read-back over the reduced rows, so the [8192, 768] column sum
    # stays split in two stages (8 x 768 partial rows of 1024). A read-back at the rows' own size
    # (x - x.mean(0)) keeps one row kernel.
    x_np = rng.standard_normal((8192, 768)).astype(np.float32)
    w_np = rng.standard_normal(1000).astype(np.float32)
    x, w = lt.tensor(x_np, device="lazy"), lt.tensor(w_np, device="lazy")
    lt.mark_step()
    bucket = lt.cat([x.sum(0), w * 2])
    got = bucket.numpy()
    grouping = lt.metrics.last_graph()["grouping"]
    assert "reduce_sum: outer [8, 768] inner [1024]" in grouping, grouping
    np.testing.assert_allclose(got, np.concatenate([x_np.sum(0, dtype=np.float64), w_np * 2]),
                               rtol=1e-4, atol=1e-3)
    centered = x - x.mean(0, keepdim=True)
    centered_np = centered.numpy()
    grouping = lt.metrics.last_graph()["grouping"]
    assert "outer [8, 768]" not in grouping, grouping
    np.testing.assert_allclose(centered_np, x_np - x_np.mean(0, keepdims=True, dtype=np.float64),
                               rtol=1e-4, atol=1e-4)
