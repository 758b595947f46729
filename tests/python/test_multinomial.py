"""lt.multinomial against PyTorch 2.13: the distribution of the draws (frequencies over many draws
against the normalized weights), distinctness without replacement, shapes, dtypes and errors.
Draws come from lazytensor's own generator, so values are compared as distributions."""
import numpy as np
import pytest
import torch

import lazytensor as lt

DEVICES = ["cpu", "lazy"]


def _weights(rng, shape):
    w = rng.random(shape).astype(np.float32) + 0.05
    w[..., 1] = 0.0  # a zero-weight category is never drawn
    return w


@pytest.mark.parametrize("device", DEVICES)
def test_with_replacement_follows_the_weights(device):
    rng = np.random.default_rng(0)
    w = _weights(rng, (3, 6))
    lt.manual_seed(1)
    draws = lt.multinomial(lt.tensor(w, device=device), 20000, replacement=True).numpy()
    ref = torch.multinomial(torch.tensor(w), 20000, replacement=True)
    assert draws.shape == tuple(ref.shape) and draws.dtype == np.int64
    p = w / w.sum(-1, keepdims=True)
    for r in range(3):
        freq = np.bincount(draws[r], minlength=6) / 20000
        assert freq[1] == 0
        np.testing.assert_allclose(freq, p[r], atol=0.015)


@pytest.mark.parametrize("device", DEVICES)
def test_without_replacement_draws_distinct_indices_first_draw_follows_weights(device):
    rng = np.random.default_rng(2)
    w = rng.random(5).astype(np.float32) + 0.1
    t = lt.tensor(w, device=device)
    lt.manual_seed(3)
    full = lt.multinomial(t, 5).numpy()
    assert sorted(full.tolist()) == [0, 1, 2, 3, 4]
    rows = lt.tensor(np.tile(w, (20000, 1)), device=device)
    first = lt.multinomial(rows, 2).numpy()
    assert first.shape == (20000, 2) and (first[:, 0] != first[:, 1]).all()
    np.testing.assert_allclose(np.bincount(first[:, 0], minlength=5) / 20000, w / w.sum(),
                               atol=0.015)


@pytest.mark.parametrize("device", DEVICES)
def test_a_method_on_tensors_and_a_new_draw_each_call(device):
    t = lt.tensor([0.2, 0.3, 0.5], device=device)
    a = t.multinomial(50, replacement=True).numpy()
    b = t.multinomial(50, replacement=True).numpy()
    assert a.shape == (50,) and not np.array_equal(a, b)


def _torch_error(fn):
    with pytest.raises(Exception) as e:
        fn()
    return e.type


@pytest.mark.parametrize("args, kwargs", [
    (([[[0.5, 0.5]]], 1), {}),                  # 3-d
    (([0.5, 0.5], 3), {}),                      # more than n without replacement
    (([0.5, 0.5], 0), {}),                      # no samples
    (([0.5, -0.5], 1), {}),                     # negative weight
    (([0.0, 0.0], 1), {}),                      # zero sum
])
def test_errors_are_pytorchs(args, kwargs):
    data, k = args
    want = _torch_error(lambda: torch.multinomial(torch.tensor(data), k, **kwargs))
    with pytest.raises(want):
        lt.multinomial(lt.tensor(data, dtype=lt.float32), k, **kwargs)


def test_integer_weights_are_an_error_as_in_pytorch():
    want = _torch_error(lambda: torch.multinomial(torch.tensor([1, 2]), 1))
    with pytest.raises(want):
        lt.multinomial(lt.tensor([1, 2]), 1)

