"""The Python surface: dtypes, devices, creation and inference, NumPy interop, metadata, printing and
conversions to Python values."""
import pickle

import numpy as np
import pytest

import lazytensor as lt
from conftest import assert_close, torch_or_skip

ALL_DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def test_dtype_objects():
    assert lt.float is lt.float32 and lt.double is lt.float64 and lt.half is lt.float16
    assert lt.long is lt.int64 and lt.int is lt.int32
    assert repr(lt.float32) == "lazytensor.float32" and str(lt.bool) == "lazytensor.bool"
    assert lt.float32.is_floating_point and not lt.int64.is_floating_point
    assert lt.bfloat16.itemsize == 2 and lt.float64.itemsize == 8 and lt.bool.itemsize == 1
    assert not lt.uint8.is_signed and lt.int8.is_signed
    assert pickle.loads(pickle.dumps(lt.bfloat16)) is lt.bfloat16
    assert len({lt.float32, lt.float, lt.int64}) == 2
    for name in ALL_DTYPES:
        assert isinstance(getattr(lt, name), lt.dtype)
    assert lt.tensor([1.0]).dtype is lt.float32  # the same object every time


def test_device_objects():
    d = lt.device("lazy")
    assert d.type == "lazy" and d.index == 0 and str(d) == "lazy:0"
    assert repr(d) == "device(type='lazy', index=0)"
    assert lt.device("lazy:0") == d and lt.device("lazy", 0) == d
    assert lt.device("cpu").type == "cpu" and lt.device("cpu").index is None
    assert str(lt.device("lazy:reference")) == "lazy:reference"
    assert lt.device("lazy:reference").backend == "reference"
    assert lt.device("cpu") != lt.device("lazy:reference")
    assert lt.device("cuda:1").index == 1
    assert pickle.loads(pickle.dumps(d)) == d
    assert len({lt.device("cpu"), lt.device("cpu")}) == 1
    t = lt.zeros(2, device="lazy")
    assert t.device == d and t.is_lazy and not t.is_cpu
    assert lt.zeros(2).device == lt.device("cpu")
    assert lt.zeros(2, device=lt.device("lazy:cpu")).device.backend == "cpu"


def test_tensor_inference():
    assert lt.tensor(1.5).dtype == lt.float32
    assert lt.tensor([1, 2]).dtype == lt.int64
    assert lt.tensor([True, False]).dtype == lt.bool
    assert lt.tensor([True, 2]).dtype == lt.int64
    assert lt.tensor([[1, 2.5]]).dtype == lt.float32
    assert lt.tensor([]).dtype == lt.float32 and lt.tensor([]).shape == (0,)
    assert lt.tensor(np.array([1.0])).dtype == lt.float64  # NumPy arrays keep their dtype
    assert lt.tensor(np.arange(3, dtype=np.int32)).dtype == lt.int32
    assert lt.tensor(np.float64(2.0)).dtype == lt.float64
    assert lt.tensor([1, 2], dtype=lt.float64).dtype == lt.float64
    assert lt.tensor([1.7, -1.7], dtype=lt.int64).tolist() == [1, -1]
    assert lt.tensor(3).shape == () and lt.tensor(3).ndim == 0
    with pytest.raises(ValueError):
        lt.tensor([[1, 2], [3]])


def test_tensor_inference_matches_torch():
    torch = torch_or_skip()
    for data in (1.5, 3, True, [1, 2], [[1.0, 2.0]], [True, False], [True, 2], [1, 2.0], [[]]):
        got = lt.tensor(data)
        want = torch.tensor(data)
        assert got.dtype.name == str(want.dtype)[6:], data
        assert got.shape == tuple(want.shape), data


@pytest.mark.parametrize("name", [n for n in ALL_DTYPES if n != "bfloat16"])
def test_numpy_round_trip_every_dtype(device, rng, name):
    if name == "bool":
        x = rng.random((3, 5)) > 0.5
    elif name.startswith("float"):
        x = rng.standard_normal((3, 5)).astype(name)
    else:
        x = rng.integers(0 if name == "uint8" else -100, 100, (3, 5)).astype(name)
    t = lt.from_numpy(x).to(device) if device == "cpu" else lt.tensor(x, device=device)
    assert t.dtype.name == name and t.shape == (3, 5)
    out = t.numpy()
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, x)
    assert np.asarray(t).dtype == x.dtype
    out[0, 0] = out[0, 1]  # writable: on cpu the tensor's (and x's) memory, elsewhere a fresh copy
    np.testing.assert_array_equal(t.numpy(), out if device == "cpu" else x)


def test_from_numpy_non_contiguous_and_byte_order(device, rng):
    x = rng.standard_normal((4, 6))
    for view in (x.T, x[:, ::2], x[::-1], x.astype(">f8"), np.asfortranarray(x)):
        t = lt.tensor(view, device=device)
        np.testing.assert_array_equal(t.numpy(), np.asarray(view, dtype=np.float64))
    assert lt.from_numpy(x.T).shape == (6, 4)
    with pytest.raises(TypeError):
        lt.from_numpy([1, 2])


def test_from_numpy_shares_memory():
    # As torch.from_numpy (tests/python/test_interop.py covers every dtype, copies and lifetimes).
    x = np.arange(4.0)
    t = lt.from_numpy(x)
    x[0] = 100
    assert t.tolist() == [100.0, 1.0, 2.0, 3.0]


def test_creation_functions(device):
    assert_close(lt.zeros(2, 3, device=device), np.zeros((2, 3)), dtype=lt.float32)
    assert_close(lt.zeros((2, 3), dtype=lt.int32, device=device), np.zeros((2, 3)), dtype=lt.int32)
    assert_close(lt.ones([4], device=device), np.ones(4), dtype=lt.float32)
    assert lt.empty(2, 2, device=device).shape == (2, 2)
    assert_close(lt.full((2, 2), 1.5, device=device), np.full((2, 2), 1.5), dtype=lt.float32)
    assert_close(lt.full((3,), 7, device=device), np.full(3, 7), dtype=lt.int64)
    assert_close(lt.full((3,), True, device=device), np.full(3, True), dtype=lt.bool)
    assert_close(lt.full((2,), 2.5, dtype=lt.float64, device=device), [2.5, 2.5], dtype=lt.float64)
    assert_close(lt.arange(5, device=device), np.arange(5), dtype=lt.int64)
    assert_close(lt.arange(1, 10, 3, device=device), np.arange(1, 10, 3), dtype=lt.int64)
    assert_close(lt.arange(0.0, 5.0, device=device), np.arange(5.0), dtype=lt.float32)
    assert_close(lt.arange(0, 1, 0.1, device=device), np.arange(0, 1, 0.1), dtype=lt.float32)
    assert_close(lt.arange(5, 0, -1.5, device=device), np.arange(5, 0, -1.5), dtype=lt.float32)
    assert_close(lt.arange(4, dtype=lt.float64, device=device), np.arange(4.0), dtype=lt.float64)
    assert_close(lt.linspace(-1, 1, 7, device=device), np.linspace(-1, 1, 7), dtype=lt.float32)
    assert_close(lt.linspace(0, 10, 5, dtype=lt.float64, device=device), np.linspace(0, 10, 5))
    assert_close(lt.eye(3, device=device), np.eye(3), dtype=lt.float32)
    assert_close(lt.eye(2, 4, dtype=lt.int64, device=device), np.eye(2, 4), dtype=lt.int64)
    assert lt.zeros(0, 3, device=device).shape == (0, 3)


def test_creation_matches_torch_dtypes():
    torch = torch_or_skip()
    pairs = [
        (lt.arange(5), torch.arange(5)), (lt.arange(0.0, 3), torch.arange(0.0, 3)),
        (lt.full((2,), 3), torch.full((2,), 3)), (lt.full((2,), 3.0), torch.full((2,), 3.0)),
        (lt.linspace(0, 1, 4), torch.linspace(0, 1, 4)), (lt.eye(2), torch.eye(2)),
        (lt.zeros(2), torch.zeros(2)), (lt.randint(0, 3, (2,)), torch.randint(0, 3, (2,))),
    ]
    for got, want in pairs:
        assert got.dtype.name == str(want.dtype)[6:]
        assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(lt.linspace(-3, 7, 11).numpy(), torch.linspace(-3, 7, 11).numpy())
    np.testing.assert_allclose(lt.arange(0, 1, 0.1).numpy(), torch.arange(0, 1, 0.1).numpy())


def test_like_functions(device, rng):
    base = lt.tensor(rng.standard_normal((2, 3)), device=device)  # float64
    for fn, want in ((lt.zeros_like, 0.0), (lt.ones_like, 1.0), (lt.empty_like, None)):
        out = fn(base)
        assert out.shape == (2, 3) and out.dtype == lt.float64 and out.device == base.device
        if want is not None:
            assert_close(out, np.full((2, 3), want))
    assert_close(lt.full_like(base, 4.0), np.full((2, 3), 4.0), dtype=lt.float64)
    assert_close(lt.full_like(base, 4, dtype=lt.int32), np.full((2, 3), 4), dtype=lt.int32)
    assert lt.zeros_like(base, device="cpu").device == lt.device("cpu")
    assert lt.ones_like(base, dtype=lt.bool).dtype == lt.bool


def test_metadata(device, rng):
    t = lt.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32), device=device)
    assert t.shape == (2, 3, 4) and isinstance(t.shape, tuple)
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24 and t.nelement() == 24
    assert len(t) == 2 and t.element_size() == 4 and t.is_floating_point()
    assert lt.numel(t) == 24 and lt.is_tensor(t) and not lt.is_tensor(np.zeros(2))
    assert isinstance(t, lt.Tensor) and type(t).__module__ == "lazytensor"
    assert not lt.tensor([1], device=device).is_floating_point()


def test_item_tolist_and_python_conversions(device):
    f = lt.tensor([[1.5, -2.0], [3.25, 0.0]], device=device)
    assert f.tolist() == [[1.5, -2.0], [3.25, 0.0]]
    big = lt.tensor([2**62 + 1, -(2**62) - 3], device=device)
    assert big.tolist() == [2**62 + 1, -(2**62) - 3]  # int64 is exact (never through a double)
    assert (big * 1).sum(0).item() == -2
    s = lt.tensor(2.5, device=device)
    assert s.item() == 2.5 and isinstance(s.item(), float) and s.tolist() == 2.5
    i = lt.tensor([7], device=device)
    assert i.item() == 7 and isinstance(i.item(), int)
    assert int(i) == 7 and float(i) == 7.0 and [10, 20, 30, 40, 50, 60, 70, 80][i] == 80
    b = lt.tensor(True, device=device)
    assert b.item() is True and bool(b) is True and bool(lt.tensor([0.0], device=device)) is False
    assert lt.tensor([True, False], device=device).tolist() == [True, False]
    assert lt.tensor([1.5], dtype=lt.bfloat16, device=device).tolist() == [1.5]
    assert f"{s:.2f}" == "2.50"
    with pytest.raises(TypeError):
        [1, 2][lt.tensor(1.0)]


REPR_CASES = [
    [1.0, 2.0, 3.0],
    [[1.0, 2.0], [3.0, 4.0]],
    [0.123456, 1.5, -2.25],
    [1, 2, 3],
    [True, False],
    3.5,
    7,
    [1e-8, 1.0],
    [[1e10, 2.0]],
]


@pytest.mark.parametrize("data", REPR_CASES, ids=str)
def test_repr_matches_torch_on_cpu(data):
    torch = torch_or_skip()
    assert repr(lt.tensor(data)) == repr(torch.tensor(data))


def test_repr_suffixes():
    torch = torch_or_skip()
    assert repr(lt.tensor([1.5, 2.0], dtype=lt.float64)) == \
        repr(torch.tensor([1.5, 2.0], dtype=torch.float64)).replace("torch.", "lazytensor.")
    assert repr(lt.tensor([1, 2], dtype=lt.int32)) == "tensor([1, 2], dtype=lazytensor.int32)"
    assert repr(lt.tensor([1.0, 2.5], device="lazy")) == "tensor([1.0000, 2.5000], device='lazy:0')"
    assert str(lt.tensor([1.0], device="lazy:reference")) == "tensor([1.], device='lazy:reference')"
    assert repr(lt.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(lt.tensor([1.5], dtype=lt.bfloat16)) == "tensor([1.5000], dtype=lazytensor.bfloat16)"
    big = repr(lt.arange(2000))
    assert "..." in big and big.startswith("tensor([   0,    1,    2,")


def test_pending_lazy_repr_is_a_print_sync():
    x = lt.tensor([1.0, 2.0], device="lazy")
    lt.mark_step()
    lt.metrics.reset()
    y = x * 2
    assert repr(y) == "tensor([2., 4.], device='lazy:0')"
    assert lt.metrics.syncs_by_reason()["print"] == 1


def test_module_functions_mirror_methods(rng):
    x = lt.tensor(rng.uniform(0.5, 2, (3, 4)).astype(np.float32))
    for name in ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs",
                 "neg", "erf", "floor", "sum", "mean", "amax", "amin", "prod"):
        np.testing.assert_array_equal(getattr(lt, name)(x).numpy(), getattr(x, name)().numpy())
    np.testing.assert_array_equal(lt.sum(x, 1).numpy(), x.sum(1).numpy())
    np.testing.assert_array_equal(lt.permute(x, (1, 0)).numpy(), x.T.numpy())
    np.testing.assert_array_equal(lt.unsqueeze(x, 0).numpy(), x.numpy()[None])
    np.testing.assert_array_equal(lt.squeeze(lt.unsqueeze(x, 0)).numpy(), x.numpy())
    with pytest.raises(TypeError):
        lt.exp([1.0, 2.0])


def test_to_variants(rng):
    x = lt.tensor(rng.standard_normal((2, 2)).astype(np.float32))
    assert x.to(lt.float32) is x and x.to("cpu") is x
    assert x.to(lt.float64).dtype == lt.float64
    assert x.to("lazy").device == lt.device("lazy")
    assert x.to(lt.device("lazy"), lt.int32).dtype == lt.int32
    assert x.to(dtype=lt.float16, device="lazy").device.type == "lazy"
    other = lt.zeros(1, dtype=lt.int64, device="lazy")
    y = x.to(other)
    assert y.dtype == lt.int64 and y.device == other.device
    assert x.to("lazy").cpu().device == lt.device("cpu")
    with pytest.raises(TypeError):
        x.to(42.0)
    with pytest.raises(TypeError):
        x.to(bogus=1)


def test_tensor_from_tensors_and_aliases(device):
    a, b = lt.tensor(1.5, device=device), lt.tensor(2.5, device=device)
    assert_close(lt.tensor([a, b]), [1.5, 2.5], dtype=lt.float32)
    rows = [lt.tensor([1.0, 2.0], device=device), lt.tensor([3.0, 4.0], device=device)]
    assert_close(lt.tensor(rows, device=device), [[1.0, 2.0], [3.0, 4.0]])
    copy = lt.tensor(rows[0])
    copy += 10
    assert rows[0].tolist() == [1.0, 2.0]  # tensor() copies
    alias = lt.Tensor(rows[0])
    alias += 10
    assert rows[0].tolist() == [11.0, 12.0]  # Tensor(t) is a second handle to the same value
    assert lt.as_tensor(rows[1]) is rows[1]
    assert lt.as_tensor([1, 2], dtype=lt.float64).dtype == lt.float64
