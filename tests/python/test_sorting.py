"""sort, argsort and topk against PyTorch 2.13 (issue 32 item 3): values, indices (stable order:
PyTorch's `stable=True`), NaN placement, integer and bool inputs, gradients through the values,
and errors, on `cpu` and `lazy`, from random inputs with ties."""
import numpy as np
import pytest
import torch

import lazytensor as lt

DEVICES = ["cpu", "lazy"]


def _inputs(rng):
    ties = rng.integers(-3, 4, size=(4, 7)).astype(np.float32)  # many equal entries
    spread = rng.standard_normal((3, 5, 6)).astype(np.float32)
    specials = ties.copy()
    specials[0, 1], specials[1, 3], specials[2, 0] = np.nan, np.inf, -np.inf
    specials[3, 2] = np.nan
    return {
        "ties": ties, "spread": spread, "specials": specials,
        "int64": rng.integers(-50, 50, size=(5, 8)),
        "int32": rng.integers(-5, 5, size=(6, 4)).astype(np.int32),
        "bool": rng.random((4, 6)) < 0.5,
        "uint8": rng.integers(0, 255, size=(3, 9)).astype(np.uint8),
        "float64": rng.standard_normal((2, 9)),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort_match_torch_stable(device, descending):
    rng = np.random.default_rng(11)
    for name, x in _inputs(rng).items():
        for dim in range(-x.ndim, x.ndim):
            a, t = lt.tensor(x, device=device), torch.from_numpy(x)
            values, indices = a.sort(dim, descending=descending)
            want_v, want_i = torch.sort(t, dim=dim, descending=descending, stable=True)
            np.testing.assert_array_equal(indices.numpy(), want_i.numpy(), err_msg=f"{name} {dim}")
            np.testing.assert_array_equal(values.numpy(), want_v.numpy(), err_msg=f"{name} {dim}")
            assert values.dtype == a.dtype and indices.dtype == lt.int64
            got = lt.argsort(a, dim=dim, descending=descending)
            np.testing.assert_array_equal(got.numpy(), want_i.numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_torch(device, largest):
    rng = np.random.default_rng(12)
    for name, x in _inputs(rng).items():
        if x.dtype == np.bool_:
            continue  # torch: "topk" not implemented for 'Bool'
        for dim in range(x.ndim):
            for k in (0, 1, x.shape[dim] // 2, x.shape[dim]):
                a, t = lt.tensor(x, device=device), torch.from_numpy(x)
                values, indices = lt.topk(a, k, dim=dim, largest=largest)
                want_v, _ = torch.topk(t, k, dim=dim, largest=largest)
                np.testing.assert_array_equal(values.numpy(), want_v.numpy(), err_msg=f"{name}")
                # Among ties PyTorch's order is unspecified: the indices must point at the values.
                np.testing.assert_array_equal(
                    np.take_along_axis(x, indices.numpy(), dim), values.numpy())
                rows = np.moveaxis(indices.numpy(), dim, -1).reshape(-1, max(k, 1))[:, :k]
                assert all(len(set(r)) == k for r in rows.tolist())  # k distinct positions
    distinct = rng.permutation(40).astype(np.float32).reshape(5, 8)  # no ties: indices exact
    v, i = lt.tensor(distinct, device=device).topk(3, largest=largest)
    tv, ti = torch.from_numpy(distinct).topk(3, largest=largest)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    np.testing.assert_array_equal(v.numpy(), tv.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_flow_to_where_each_value_came_from(device):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((3, 6))
    g = rng.standard_normal((3, 6))
    a = lt.tensor(x, device=device, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    (a.sort(1, descending=True).values * lt.tensor(g, device=device)).sum().backward()
    (t.sort(1, descending=True).values * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12)
    a.grad = None
    t.grad = None
    gk = rng.standard_normal((3, 2))
    (a.topk(2, dim=1).values * lt.tensor(gk, device=device)).sum().backward()
    (t.topk(2, dim=1).values * torch.tensor(gk)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_dim_and_errors(device):
    s = lt.tensor(2.5, device=device)
    v, i = s.sort()
    assert v.item() == 2.5 and i.item() == 0 and v.shape == () and i.shape == ()
    v, i = s.topk(1)
    assert v.item() == 2.5 and i.item() == 0
    a = lt.tensor(np.arange(6.0).reshape(2, 3), device=device)
    with pytest.raises(RuntimeError, match="topk: k \\(4\\) is out of range for dimension 1 of size 3"):
        a.topk(4)
    with pytest.raises(IndexError, match="sort: dimension 2 out of range"):
        a.sort(2)
    assert isinstance(a.sort(), lt.return_types.sort)
    assert isinstance(a.topk(1), lt.return_types.topk)


def test_on_lazy_the_values_stay_in_the_graph():
    # Finding the order reads the input (a sync), but the values are a traced gather: work
    # after the sort joins the next graph instead of running eagerly.
    x = lt.tensor(np.random.default_rng(14).standard_normal((4, 5)).astype(np.float32), device="lazy")
    lt.mark_step()
    values = x.sort(1).values
    assert values.device.type == "lazy"
    y = (values * 2).sum(1)
    lt.mark_step()
    np.testing.assert_allclose(y.numpy(), np.sort(x.numpy(), 1).sum(1) * 2, rtol=1e-6)
