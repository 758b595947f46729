"""Zero-copy exchange with NumPy and PyTorch: lt.from_numpy / Tensor.numpy() share cpu memory, and
DLPack (Tensor.__dlpack__, __dlpack_device__, lt.from_dlpack) shares host memory both ways. Sharing
is proven by writing through one side and reading through the other (and by data pointers where the
peer gives a read-only view); lifetimes by dropping the producer and using the consumer."""
import gc
import threading
import weakref

import numpy as np
import pytest

import lazytensor as lt

torch = pytest.importorskip("torch")

NP_DTYPES = ["float64", "float32", "float16", "int64", "int32", "int8", "uint8", "bool"]
SHAPES = [(3, 4), (), (0,), (2, 0, 3), (5,), (2, 3, 4)]


def _random(rng, dtype, shape):
    if dtype == "bool":
        return np.asarray(rng.random(shape) > 0.5)
    if dtype.startswith("float"):
        return np.asarray(rng.standard_normal(shape)).astype(dtype)
    lo = 0 if dtype == "uint8" else -100
    return np.asarray(rng.integers(lo, 100, shape)).astype(dtype)


def _addr(a):
    return a.__array_interface__["data"][0]


# ---- lt.from_numpy / Tensor.numpy() ------------------------------------------------------------

@pytest.mark.parametrize("dtype", NP_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_from_numpy_shares_memory_both_ways(rng, dtype, shape):
    x = _random(rng, dtype, shape)
    t = lt.from_numpy(x)
    assert t.dtype.name == dtype and tuple(t.shape) == shape and t.device.type == "cpu"
    np.testing.assert_array_equal(t.numpy(), x)
    if x.size == 0:
        return
    assert t.data_ptr() == _addr(x)
    new = _random(rng, dtype, shape)
    x[...] = new  # a write through the array is seen by the tensor ...
    np.testing.assert_array_equal(t.numpy(), new)
    np.testing.assert_array_equal((t + t if dtype != "bool" else t | t).numpy(), new + new if dtype != "bool" else new)
    view = t.numpy()  # ... and a write through t.numpy() by the array
    assert np.shares_memory(view, x) and view.flags.writeable
    view[...] = _random(rng, dtype, shape)
    np.testing.assert_array_equal(x, view)


def test_from_numpy_keeps_the_array_alive():
    x = np.arange(1000, dtype=np.float64) * 1.5
    t = lt.from_numpy(x)
    del x
    gc.collect()
    _ = [np.ones(1000) for _ in range(50)]  # reuse freed memory if it had been freed
    np.testing.assert_array_equal(t.numpy(), np.arange(1000) * 1.5)
    v = t.numpy()
    del t
    gc.collect()
    np.testing.assert_array_equal(v, np.arange(1000) * 1.5)  # the view keeps the storage


def test_from_numpy_copies_what_it_cannot_share(rng):
    x = rng.standard_normal((4, 6))
    for view in (x.T, x[:, ::2], x[::-1], x.astype(">f8")):
        t = lt.from_numpy(view)
        np.testing.assert_array_equal(t.numpy(), np.asarray(view, dtype=np.float64))
        before = t.numpy().copy()
        view_writable = view if view.flags.writeable else None
        if view_writable is not None:
            view_writable[...] = 0
        np.testing.assert_array_equal(t.numpy(), before)  # a copy: unaffected
    # Misaligned data (an offset of one byte into a buffer) is copied too, never read misaligned.
    buf = np.zeros(8 * 5 + 1, np.uint8)
    mis = buf[1:].view(np.float64)
    assert not mis.flags.aligned
    mis[...] = np.arange(5)
    t = lt.from_numpy(mis)
    np.testing.assert_array_equal((t * 2).numpy(), np.arange(5) * 2.0)
    with pytest.raises(TypeError, match="uint16"):
        lt.from_numpy(np.zeros(3, np.uint16))
    with pytest.raises(TypeError, match="complex"):
        lt.from_numpy(np.zeros(3, np.complex64))


def test_read_only_arrays_stay_read_only():
    x = np.frombuffer(b"\x01\x02\x03\x04", dtype=np.uint8)
    assert not x.flags.writeable
    t = lt.from_numpy(x)
    assert t.tolist() == [1, 2, 3, 4] and t.data_ptr() == _addr(x)
    v = t.numpy()
    assert not v.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        v[0] = 9
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()


def test_numpy_of_other_devices_is_a_copy(device):
    t = lt.arange(6, device=device).float()
    a = t.numpy()
    np.testing.assert_array_equal(a, np.arange(6.0))
    if device != "cpu":
        a[0] = 100
        assert t.tolist()[0] == 0.0
    with pytest.raises(TypeError, match="BFloat16"):
        t.bfloat16().numpy()


def test_in_place_ops_give_the_tensor_new_memory():
    # Documented difference from PyTorch: in-place tensor ops are functional underneath.
    x = np.zeros(3, np.float32)
    t = lt.from_numpy(x)
    t.add_(1)
    assert t.tolist() == [1.0, 1.0, 1.0]
    np.testing.assert_array_equal(x, 0)


def test_shared_memory_never_reaches_other_devices_or_copies(device):
    # .to(another device) and copy_ copy (as in PyTorch), so writes through a NumPy view of cpu
    # memory reach only the tensors that share it (detach(), as in PyTorch).
    x = np.zeros(4, np.float32)
    t = lt.from_numpy(x)
    moved = t.to(device) if device != "cpu" else t.to("lazy:cpu")
    dst = lt.ones(4)
    dst.copy_(t)
    view = t.detach()
    back = moved.to("cpu")
    x[0] = 5
    back.numpy()[1] = 7
    assert moved.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert dst.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert view.tolist()[0] == 5.0 and x[1] == 0


# ---- DLPack ------------------------------------------------------------------------------------

def _torch_dtype(name):
    return getattr(torch, name)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int8",
                                   "uint8"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_torch_round_trips_share_memory(rng, dtype, shape):
    src = torch.from_numpy(_random(rng, "float32" if dtype == "bfloat16" else dtype, shape)).to(_torch_dtype(dtype))
    t = lt.from_dlpack(src)  # torch -> lt
    assert t.dtype.name == dtype and tuple(t.shape) == shape
    assert torch.equal(torch.from_dlpack(t), src)  # lt -> torch
    if src.numel() == 0:
        return
    assert t.data_ptr() == src.data_ptr()
    src.fill_(3)  # a write through torch is seen by lt
    assert np.all(t.float().numpy() == 3)
    back = torch.from_dlpack(t)
    assert back.data_ptr() == src.data_ptr()
    back.fill_(5)  # ... and by torch through the re-exported memory
    assert bool((src == 5).all()) and np.all(t.float().numpy() == 5)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64", "int32", "int8", "uint8"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_numpy_round_trips_share_memory(rng, dtype, shape):
    x = _random(rng, dtype, shape)
    t = lt.from_dlpack(x)  # numpy -> lt
    assert t.dtype.name == dtype and tuple(t.shape) == shape
    np.testing.assert_array_equal(t.numpy(), x)
    a = np.from_dlpack(t)  # lt -> numpy (NumPy makes unversioned DLPack imports read-only)
    np.testing.assert_array_equal(a, x)
    assert a.dtype == x.dtype and a.shape == x.shape
    if x.size == 0:
        return
    assert t.data_ptr() == _addr(x) == _addr(a)
    x[...] = _random(rng, dtype, shape)
    np.testing.assert_array_equal(t.numpy(), x)
    np.testing.assert_array_equal(a, x)


def test_bool_and_bfloat16_through_dlpack(rng):
    # DLPack's bool (kDLBool), between lazytensor tensors and with NumPy 2 and PyTorch 2.
    x = rng.random(7) > 0.5
    b = lt.from_numpy(x)
    c = lt.from_dlpack(b)
    assert c.dtype == lt.bool and c.data_ptr() == b.data_ptr() and c.tolist() == b.tolist()
    tb, nb = torch.from_dlpack(b), np.from_dlpack(b)
    assert tb.dtype == torch.bool and tb.data_ptr() == b.data_ptr() and tb.tolist() == x.tolist()
    assert nb.dtype == np.bool_ and _addr(nb) == b.data_ptr() and nb.tolist() == x.tolist()
    for back in (lt.from_dlpack(torch.tensor(x)), lt.from_dlpack(x)):
        assert back.dtype == lt.bool and back.tolist() == x.tolist()
    h = lt.tensor(rng.standard_normal(5), dtype=lt.bfloat16)
    k = lt.from_dlpack(h.__dlpack__())
    assert k.dtype == lt.bfloat16 and k.data_ptr() == h.data_ptr()
    assert torch.equal(torch.from_dlpack(h).float(), torch.tensor(h.float().numpy()))


def test_capsules_are_consumed_once_and_free_their_memory():
    x = np.arange(4.0)
    cap = lt.from_numpy(x).__dlpack__()
    assert "dltensor" in repr(cap)
    t = lt.from_dlpack(cap)
    assert "used_dltensor" in repr(cap)
    with pytest.raises(ValueError, match="already consumed"):
        lt.from_dlpack(cap)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    # A capsule nobody consumed frees its reference when it goes (no leak, no crash).
    for _ in range(100):
        lt.ones(1000).__dlpack__()
    gc.collect()


def test_exports_keep_the_storage_alive_and_imports_the_producer():
    t = lt.arange(1000).float() * 2
    a = torch.from_dlpack(t)
    cap = t.__dlpack__()
    del t
    gc.collect()
    _ = [lt.ones(1000) for _ in range(50)]
    assert torch.equal(a, torch.arange(1000).float() * 2)
    assert lt.from_dlpack(cap).tolist()[:3] == [0.0, 2.0, 4.0]
    src = torch.arange(1000, dtype=torch.float64)
    imported = lt.from_dlpack(src)
    del src
    gc.collect()
    _ = [torch.ones(1000, dtype=torch.float64) for _ in range(50)]
    np.testing.assert_array_equal(imported.numpy(), np.arange(1000.0))


def test_lazy_tensors_sync_and_export_their_buffer():
    t = lt.arange(6, device="lazy:cpu").float() * 3
    assert t.__dlpack_device__() == (1, 0)
    before = lt.metrics.syncs_by_reason().get("numpy", 0)
    a = torch.from_dlpack(t)
    assert lt.metrics.syncs_by_reason().get("numpy", 0) == before + 1  # one sync, reason "numpy"
    assert torch.equal(a, torch.arange(6).float() * 3)
    assert a.data_ptr() == t.data_ptr()


def test_dlpack_export_takes_the_array_api_keywords():
    # PyTorch 2's from_dlpack calls __dlpack__(max_version=(1, 0)[, dl_device=..., copy=...]).
    t = lt.arange(4).float()
    a = torch.from_dlpack(t.__dlpack__(max_version=(1, 0), dl_device=(1, 0)))
    assert a.data_ptr() == t.data_ptr()
    c = torch.from_dlpack(t.__dlpack__(copy=True))
    assert c.data_ptr() != t.data_ptr() and torch.equal(c, a)
    assert torch.from_dlpack(t, copy=True).data_ptr() != t.data_ptr()
    with pytest.raises(BufferError, match="cannot export to DLPack device"):
        t.__dlpack__(dl_device=(2, 0))


def test_strided_imports_are_copied(rng):
    x = rng.standard_normal((4, 6))
    for take in (lambda a: a.T, lambda a: a[:, ::2], lambda a: a[1:3, 2:5]):
        view = take(torch.from_numpy(x.copy()))
        t = lt.from_dlpack(view)
        np.testing.assert_array_equal(t.numpy(), view.numpy())
        view.fill_(0)
        assert (t.numpy() != 0).any()  # a copy: unaffected
    t = lt.from_dlpack(torch.from_numpy(x)[1:3])  # a contiguous slice at an offset is shared
    assert t.data_ptr() == torch.from_numpy(x)[1:3].data_ptr()


def test_dlpack_errors():
    with pytest.raises(TypeError, match="__dlpack__ or a DLPack capsule"):
        lt.from_dlpack([1, 2, 3])
    with pytest.raises(BufferError, match="stream must be None"):
        lt.ones(2).__dlpack__(stream=1)
    with pytest.raises(BufferError, match="unsupported DLPack dtype"):
        lt.from_dlpack(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(BufferError, match="unsupported DLPack dtype"):
        lt.from_dlpack(torch.zeros(2, dtype=torch.int16))

    class OnDevice:
        def __init__(self, kind):
            self.kind = kind

        def __dlpack_device__(self):
            return (self.kind, 0)

        def __dlpack__(self, stream=None):
            raise AssertionError("not reached")

    with pytest.raises(BufferError, match="device type 8"):  # Metal: neither host nor CUDA
        lt.from_dlpack(OnDevice(8))
    if not lt._C.backend_available("cuda"):
        with pytest.raises(BufferError, match="no CUDA device"):
            lt.from_dlpack(OnDevice(2))
    import ctypes
    pycapsule_new = ctypes.pythonapi.PyCapsule_New
    pycapsule_new.restype, pycapsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    other = pycapsule_new(ctypes.addressof(ctypes.c_int(1)), b"something_else", None)
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        lt.from_dlpack(other)
    # The session keeps working.
    assert (lt.ones(3, device="lazy") * 2).sum().item() == 6


def test_cuda_tensors_report_their_dlpack_device():
    # Sharing CUDA memory with PyTorch is tested on the GPU machine (tests/gpu/check_dlpack_cuda.py).
    if not lt._C.backend_available("cuda"):
        pytest.skip("no CUDA device")
    t = lt.ones(2, device="cuda")
    assert t.__dlpack_device__() == (2, 0)
    with pytest.raises(TypeError, match="stream must be None or an int"):
        t.__dlpack__(stream="default")


def test_memory_released_off_the_gil_reaches_python_later():
    # The autograd graph holds the last reference to the array's memory (saved for mul's backward);
    # backward frees it with the GIL released, so the array is released later on Python's main
    # thread (queued, never taking the GIL there: no deadlock against a thread that holds it).
    x = np.arange(8, dtype=np.float32)
    alive = weakref.ref(x)
    p = lt.ones(8, requires_grad=True)
    loss = (p * lt.from_numpy(x)).sum()
    del x
    gc.collect()
    assert alive() is not None
    loss.backward()
    assert p.grad.tolist() == [float(i) for i in range(8)]
    del loss
    for _ in range(1000):
        if alive() is None:
            break
        sum(range(100))  # the interpreter runs pending calls between bytecodes
    assert alive() is None


def test_sharing_from_several_threads():
    errors = []

    def work(seed):
        try:
            r = np.random.default_rng(seed)
            for _ in range(50):
                x = r.standard_normal(64)
                t = lt.from_numpy(x)
                u = lt.from_dlpack(torch.from_dlpack(t))
                np.testing.assert_array_equal((u * 2).numpy(), x * 2)
                del t, u
        except Exception as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
