"""Out-of-range indices computed inside a lazy graph (runtime/index_check.h): gather, scatter_add,
index_select, embedding, one_hot and integer-tensor indexing raise IndexError at the sync, naming
the op, the bad value and the shapes; in-range computed indices give NumPy's results; the process
keeps working (the next step runs and is right)."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F


def computed(values, device="lazy"):
    """An int64 index whose values exist only after the sync: floor((v + 0.25) / 10 * 10)."""
    v = (np.asarray(values, dtype=np.float32) + 0.25) / 10
    return (lt.tensor(v, device=device) * 10).floor().long()


# name -> (op under test on a 10 x 3 input `a` and an index, NumPy oracle, good index values)
def _cases(a_np):
    a = lambda: lt.tensor(a_np, device="lazy")  # noqa: E731
    return {
        "gather": (lambda i: a().gather(0, i), lambda i: np.take_along_axis(a_np, i, 0),
                   [[0, 9, 4], [2, 2, 7]]),
        "scatter_add": (lambda i: lt.zeros(10, 3, device="lazy").scatter_add(0, i, a()),
                        lambda i: _np_scatter_add(a_np, i), [[1, 8, 3], [5, 5, 0]]),
        "index_select": (lambda i: a().index_select(0, i), lambda i: a_np[i], [3, 0, 9, 3]),
        "embedding": (lambda i: F.embedding(i, a()), lambda i: a_np[i], [[9, 1], [0, 4]]),
        "one_hot": (lambda i: F.one_hot(i, 10), lambda i: np.eye(10, dtype=np.int64)[i], [0, 9, 3, 3, 1]),
        "indexing": (lambda i: a()[i], lambda i: a_np[i], [[9, -1], [0, -10]]),
    }


def _np_scatter_add(src, idx):
    out = np.zeros((10, 3), dtype=np.float64)
    for r in range(idx.shape[0]):
        for c in range(idx.shape[1]):
            out[idx[r, c], c] += src[r, c]
    return out


OPS = ["gather", "scatter_add", "index_select", "embedding", "one_hot", "indexing"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("bad", [12, -11, -3])
def test_computed_out_of_range_index_raises_at_the_sync(op, bad):
    a_np = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    run, _, good = _cases(a_np)[op]
    vals = np.array(good)
    if op == "indexing" and bad == -3:
        pytest.skip("negative indices within range wrap in tensor[index]")
    vals.flat[1] = bad
    out = run(computed(vals))
    with pytest.raises(IndexError) as e:
        lt.mark_step()
    msg = str(e.value)
    # A lone integer-tensor index is an index_select of the flattened index.
    name, shape = ("index_select", [vals.size]) if op == "indexing" else (op, list(vals.shape))
    value = "class value" if op == "one_hot" else "index"
    assert f"{name}: {value} {bad} is out of " in msg, msg
    assert f"index shape {shape}" in msg, msg
    assert "test_index_checks.py" in msg, msg  # the op's source line
    # The results were assigned: nothing stays pending, and reading them is no error.
    out.numpy()
    # The process continues: the next step with good indices is right.
    got = run(computed(good)).numpy()
    np.testing.assert_allclose(got, _cases(a_np)[op][1](np.array(good)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", OPS)
def test_computed_in_range_indices_match_numpy(op):
    a_np = np.random.default_rng(1).standard_normal((10, 3)).astype(np.float32)
    run, oracle, good = _cases(a_np)[op]
    for step in range(2):  # the second run is a cache hit: the same graph, check included
        got = run(computed(good)).numpy()
        np.testing.assert_allclose(got, oracle(np.array(good)), rtol=1e-6, atol=1e-6)
        assert lt.metrics.last_graph()["outputs"] == 2
        if step:
            assert lt.metrics.last_graph()["cache"] == "memory"


def test_error_surfaces_at_item_and_optimizer_style_mark_step():
    a = lt.randn(10, 3, device="lazy")
    bad = a.index_select(0, computed([1, 10]))
    with pytest.raises(IndexError, match=r"index_select: index 10 is out of bounds for dimension 0 "
                                         r"with size 10 \(input shape \[10, 3\], index shape \[2\]"):
        bad.sum().item()
    assert lt.tensor(3.0, device="lazy").add(1).item() == 4.0


def test_multiple_advanced_indices_are_checked_one_by_one():
    # x[i, j] combines i and j into one linear index: j = 5 on a dim of 4 would land in range.
    x_np = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = lt.tensor(x_np, device="lazy")
    with pytest.raises(IndexError, match="indexing: index 5 is out of bounds for dimension 1 with size 4"):
        x[computed([0, 1]), computed([5, 0])].numpy()
    got = x[computed([0, 2]), computed([3, -4])].numpy()
    np.testing.assert_array_equal(got, x_np[[0, 2], [3, -4]])


def test_embedding_int32_and_negative_host_indices():
    w_np = np.random.default_rng(2).standard_normal((10, 3)).astype(np.float32)
    w = lt.tensor(w_np, device="lazy")
    np.testing.assert_array_equal(F.embedding(computed([1, 9]).int(), w).numpy(), w_np[[1, 9]])
    for fn in (lambda i: F.embedding(i, w), lambda i: w.index_select(0, i), lambda i: w.gather(0, i.reshape(1, 1))):
        with pytest.raises(IndexError):
            fn(lt.tensor([-1]))
        out = fn(computed([-1]))
        with pytest.raises(IndexError):
            lt.mark_step()
        del out


def test_host_known_indices_add_no_kernel():
    a = lt.randn(10, 3, device="lazy")
    lt.mark_step()
    a.gather(0, lt.tensor([[0, 9, 4]], device="lazy")).numpy()
    host = lt.metrics.last_graph()
    a.gather(0, computed([[0, 9, 4]])).numpy()
    comp = lt.metrics.last_graph()
    assert host["outputs"] == 1 and comp["outputs"] == 2  # result + the index's [max, ~min]
    assert comp["kernels"] == host["kernels"] + 1  # the check is one reduction kernel
