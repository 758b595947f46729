"""Views alias their base, as in PyTorch (issue 26, items 1 and 2): an in-place op on a view
changes the base and every other view of it, on every device, and autograd follows the write.
torch 2.13 (CPU, eager) is the oracle through parity.check; values are drawn at random."""
import numpy as np
import pytest
import torch

import lazytensor as lt
from parity import check


def _base(lib, dev, rng, shape=(3, 4)):
    return lib.tensor(rng.standard_normal(shape).astype(np.float32).tolist(), device=dev)


# Each writes through a view and returns the base and the views (their values after the write).
WRITES = {
    "slice_zero": lambda b: (b[1:].zero_(), b)[1:],
    "transpose_setitem": lambda b: (lambda v: (v.__setitem__(0, 9.0), b, v)[1:])(b.t()),
    "strided_view_setitem": lambda b: (lambda v: (v.__setitem__(slice(None, None, 2), 7.0), b, v)[1:])(b.view(-1)),
    "column_add": lambda b: (b[:, 1].add_(1.5), b)[1:],
    "data_add": lambda b: (b.data.add_(2.0), b)[1:],
    "detach_mul": lambda b: (b.detach().mul_(3.0), b)[1:],
    "two_views": lambda b: (lambda v, w: (v.mul_(10.0), w.add_(w), b.add_(v.sum()), b, v, w)[3:])(b[1], b[:, 2]),
    "view_of_view": lambda b: (lambda v: (v[1:, ::2].fill_(-1.0), b, v)[1:])(b.unsqueeze(0).transpose(1, 2)),
    "narrow_copy": lambda b: (b.narrow(1, 1, 2).copy_(b[:, :2] * 2), b)[1:],
    "unsqueeze_squeeze": lambda b: (b[2].unsqueeze(0).squeeze(0).clamp_(-0.1, 0.1), b)[1:],
    "flatten_index": lambda b: (lambda v: (v.__setitem__(slice(3, 9), 0.5), b, v)[1:])(b.flatten()),
    "chunk_write": lambda b: (lambda c: (c[1].neg_(), b, c[0])[1:])(b.chunk(2, dim=1)),
    "base_write_seen_by_view": lambda b: (lambda v: (b.mul_(2.0), b, v)[1:])(b[:, 1:3]),
    "select_of_permute": lambda b: (b.permute(1, 0)[2].sub_(4.0), b)[1:],
}


@pytest.mark.parametrize("case", sorted(WRITES))
def test_write_through_view_reaches_base(device, rng, case):
    seed = int(rng.integers(1 << 30))  # the same draw for both libraries
    check(lambda lib, dev: WRITES[case](_base(lib, dev, np.random.default_rng(seed))), device)


@pytest.mark.parametrize("case", ["clone_slice_mul", "setitem_whole", "setitem_colon", "view_write_value_grad",
                                  "base_and_view_both_used", "strided_write"])
def test_autograd_follows_write_through_view(device, rng, case):
    xs = rng.standard_normal(3).astype(np.float32)
    ys = rng.standard_normal(3).astype(np.float32)

    def program(lib, dev):
        x = lib.tensor(xs.tolist(), device=dev, requires_grad=True)
        y = lib.tensor(ys.tolist(), device=dev, requires_grad=True)
        if case == "clone_slice_mul":
            c = x.clone()
            c[1:].mul_(5)
            out = c
        elif case == "setitem_whole":
            c = x * 2
            c[...] = y * x
            out = c
        elif case == "setitem_colon":
            c = x * 2
            c[:] = y
            out = c
        elif case == "view_write_value_grad":
            c = x * 1.0
            c[1:2].copy_(y[0:1] * 3)
            out = c * c
        elif case == "base_and_view_both_used":
            c = x * 1.5
            v = c[::2]
            v.mul_(y[:2])
            out = c * v.sum()
        else:
            c = (x * y).unsqueeze(1).expand(3, 2).clone()
            c.t()[1].add_(y)
            out = c
        (out * lib.tensor([0.5, -1.5, 2.0], device=dev).reshape(3, *([1] * (out.ndim - 1)))).sum().backward()
        return out, x.grad, y.grad

    check(program, device, rtol=1e-5, atol=1e-6)


def test_manual_sgd_through_data_trains(device, rng):
    """pytorch/examples' regression.py pattern: `p.data.add_(-lr * p.grad)` must update p."""
    w_true = rng.standard_normal((4, 1)).astype(np.float32)
    xs = rng.standard_normal((64, 4)).astype(np.float32)
    ys = xs @ w_true + 0.5

    def program(lib, dev):
        lib.manual_seed(0)
        fc = lib.nn.Linear(4, 1).to(dev)
        with lib.no_grad():
            fc.weight.copy_(lib.tensor([[0.1, -0.2, 0.3, 0.0]], device=dev))
            fc.bias.fill_(0.0)
        x, y = lib.tensor(xs.tolist(), device=dev), lib.tensor(ys.tolist(), device=dev)
        losses = []
        for _ in range(30):
            fc.zero_grad()
            loss = ((fc(x) - y) ** 2).mean()
            loss.backward()
            for p in fc.parameters():
                p.data.add_(-0.1 * p.grad)
            losses.append(loss.item())
        return lib.tensor(losses), fc.weight, fc.bias

    check(program, device, rtol=1e-4, atol=1e-5)


def test_leaf_view_in_place_raises_like_pytorch(device):
    def program(lib, dev):
        w = lib.ones(3, 2, device=dev, requires_grad=True)
        w[0].mul_(2)
        return w
    check(program, device)


def test_expanded_view_write_raises_like_pytorch(device):
    def program(lib, dev):
        b = lib.ones(1, 3, device=dev)
        b.expand(2, 3).add_(1)
        return b
    check(program, device)


def test_strides_and_contiguity_match_pytorch(device):
    def info(t):
        return tuple(t.shape), tuple(t.stride()), t.is_contiguous()

    def views(lib, dev):
        b = lib.zeros(4, 6, 5, device=dev)
        return [b, b.t() if b.ndim == 2 else b.transpose(0, 2), b[1:, ::2], b[:, 2], b.permute(2, 0, 1),
                b.transpose(1, 2)[..., 1:3], b.reshape(24, 5), b[1:3].reshape(-1), b.unsqueeze(1).expand(4, 3, 6, 5),
                b[:, :, 0].unsqueeze(-1)]

    for lt_view, torch_view in zip(views(lt, device), views(torch, "cpu")):
        assert info(lt_view) == info(torch_view)


def test_view_of_non_viewable_raises_and_reshape_copies(device):
    def program(lib, dev):
        b = lib.arange(6.0, device=dev).reshape(2, 3)
        r = b.t().reshape(-1)  # a copy in PyTorch: writing it leaves b unchanged
        r[0] = 100.0
        c = b.t().contiguous()
        c[0, 0] = -5.0
        return b, r, c
    check(program, device)

    def bad(lib, dev):
        return lib.arange(6.0, device=dev).reshape(2, 3).t().view(-1)
    check(bad, device)
