"""Slicing at moving offsets compiles once (issue 26 item 7): a slice at a nonzero start of device
data reads its start at run time, so get_batch-style `data[i:i+T]` at every i, eager or lazy,
replays one graph. Values against numpy; compile counts exact."""
import numpy as np
import pytest

import lazytensor as lt

DEVICES = ["cpu", "lazy"]


def _sync(device):
    if device == "lazy":
        lt.mark_step()


def _compiles():
    return lt.metrics.counters()["graph_compiles"]


@pytest.mark.parametrize("device", DEVICES)
def test_batches_sliced_from_a_corpus_compile_once(device):
    rng = np.random.default_rng(3)
    corpus = rng.integers(0, 65, size=4000)
    data = lt.tensor(corpus, device=device)
    _sync(device)
    block = 16

    def get_batch(starts):
        x = lt.stack([data[i:i + block] for i in starts])
        y = lt.stack([data[i + 1:i + 1 + block] for i in starts])
        _sync(device)
        return x, y

    get_batch(rng.integers(0, len(corpus) - block - 1, size=4))  # first batch: compiles
    lt.metrics.reset()
    for _ in range(12):
        starts = rng.integers(0, len(corpus) - block - 1, size=4)
        x, y = get_batch(starts)
        np.testing.assert_array_equal(x.numpy(), np.stack([corpus[i:i + block] for i in starts]))
        np.testing.assert_array_equal(y.numpy(), np.stack([corpus[i + 1:i + 1 + block] for i in starts]))
    assert _compiles() == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1])
def test_strided_and_negative_starts_in_any_dim(device, dim):
    rng = np.random.default_rng(4)
    a_np = rng.standard_normal((40, 30)).astype(np.float32)
    a = lt.tensor(a_np, device=device)
    _sync(device)

    def take(start, stop, step):
        index = [slice(None)] * 2
        index[dim] = slice(start, stop, step)
        out = (a[tuple(index)] * 2 + 1).sum(dim)
        _sync(device)
        return out.numpy(), (a_np[tuple(index)] * 2 + 1).sum(dim)

    take(1, 13, 3)
    lt.metrics.reset()
    for start in (2, 5, 9, -25, -20):
        got, want = take(start, start + 12, 3)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert _compiles() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_slices_of_tensors_that_need_gradients_differentiate(device):
    # These keep their start in the graph (an affine slice, whose VJP is a pad): gradients as
    # numpy computes them, for several offsets.
    rng = np.random.default_rng(5)
    w_np = rng.standard_normal((12, 5)).astype(np.float32)
    for start in (1, 4, 7):
        w = lt.tensor(w_np, device=device, requires_grad=True)
        (w[start:start + 3] ** 2).sum().backward()
        want = np.zeros_like(w_np)
        want[start:start + 3] = 2 * w_np[start:start + 3]
        np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_write_through_a_run_time_start_slice_reaches_its_base(device):
    # The view still aliases its base: the slice's value reads the start at run time, the view
    # link keeps the offset for writes.
    base_np = np.arange(20, dtype=np.float32)
    base = lt.tensor(base_np, device=device)
    _sync(device)
    v = base[5:9]
    v.mul_(10)
    base_np[5:9] *= 10
    np.testing.assert_array_equal(base.numpy(), base_np)
    base.add_(1)
    np.testing.assert_array_equal(v.numpy(), base_np[5:9] + 1)
