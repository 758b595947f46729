"""DLPack on CUDA between lazytensor and PyTorch: no copies, values equal, lifetimes kept, clear
errors for what cannot be shared. Run by tests/gpu/run.sh (stage py); exits 1 on a failure."""
import gc
import sys

import numpy as np
import torch

import lazytensor as lt

failures = []


def check(name, fn):
    try:
        fn()
        print(f"pass  {name}")
    except Exception as e:  # noqa: BLE001 - every failure is reported by name
        failures.append(name)
        print(f"FAIL  {name}: {type(e).__name__}: {e}")


def torch_to_lt_shares_memory():
    t = torch.randn(64, 33, device="cuda")
    x = lt.from_dlpack(t)
    assert "cuda" in str(x.device), x.device
    assert x.data_ptr() == t.data_ptr(), "a copy was made"
    np.testing.assert_array_equal(x.numpy(), t.cpu().numpy())
    t.mul_(2)  # torch writes, lazytensor reads the same memory
    np.testing.assert_array_equal(x.numpy(), t.cpu().numpy())
    y = (x * 3 + 1).sin()  # eager cuda kernels on the imported memory
    np.testing.assert_allclose(y.numpy(), (t * 3 + 1).sin().cpu().numpy(), rtol=1e-5, atol=1e-6)


def lt_to_torch_shares_memory():
    z = lt.tensor(np.random.default_rng(1).random((5, 7)).astype(np.float32), device="cuda")
    w = torch.from_dlpack(z)
    assert w.is_cuda and w.data_ptr() == z.data_ptr()
    np.testing.assert_array_equal(w.cpu().numpy(), z.numpy())


def pending_lazy_tensor_is_synced_then_shared():
    a = lt.tensor(np.random.default_rng(2).random(1000).astype(np.float32), device="lazy:cuda")
    b = a.exp() * 2
    wb = torch.from_dlpack(b)  # a sync point: the kernel runs, then torch reads its output
    np.testing.assert_allclose(wb.cpu().numpy(), np.exp(a.numpy()) * 2, rtol=1e-6)


def dtypes_round_trip():
    for dt in (torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.uint8,
               torch.bool):
        t = (torch.rand(3, 9, device="cuda") * 50).to(dt)
        back = torch.from_dlpack(lt.from_dlpack(t))
        assert back.dtype == dt and torch.equal(back, t), dt


def producer_memory_outlives_the_producer():
    t = torch.arange(4096, device="cuda", dtype=torch.float32)
    x = lt.from_dlpack(t)
    del t
    gc.collect()
    torch.cuda.empty_cache()
    junk = torch.full((1 << 20,), 7.0, device="cuda")  # would land in freed memory
    np.testing.assert_array_equal(x.numpy(), np.arange(4096, dtype=np.float32))
    del junk


def strided_cuda_tensor_is_a_clear_error():
    try:
        lt.from_dlpack(torch.randn(4, 6, device="cuda").T)
    except BufferError as e:
        assert "contiguous" in str(e), e
        return
    raise AssertionError("a strided CUDA tensor was accepted")


def imported_memory_feeds_a_lazy_graph():
    t = torch.randn(256, 128, device="cuda")
    x = lt.from_dlpack(t).to("lazy:cuda")
    y = lt.nn.functional.softmax(x, -1)
    np.testing.assert_allclose(y.numpy(), torch.softmax(t, -1).cpu().numpy(), rtol=1e-5, atol=1e-7)


def misaligned_import_through_row_kernels():
    """Row kernels read 4 elements at once where buffers are 16-byte aligned; imported memory 4
    bytes past a boundary must take their element-by-element path (same results)."""
    base = torch.randn(64 * 1024 + 1, device="cuda")
    t = base[1:].view(64, 1024)
    assert t.data_ptr() % 16 == 4, t.data_ptr() % 16
    x = lt.from_dlpack(t)
    assert x.data_ptr() == t.data_ptr(), "a copy was made"
    F = lt.nn.functional
    np.testing.assert_allclose(F.softmax(x, -1).numpy(), torch.softmax(t, -1).cpu().numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(F.layer_norm(x, (1024,)).numpy(),
                               torch.nn.functional.layer_norm(t, (1024,)).cpu().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose((x * 2).sum(-1).numpy(), (t * 2).sum(-1).cpu().numpy(), rtol=1e-5, atol=1e-4)


for fn in (torch_to_lt_shares_memory, lt_to_torch_shares_memory,
           pending_lazy_tensor_is_synced_then_shared, dtypes_round_trip,
           producer_memory_outlives_the_producer, strided_cuda_tensor_is_a_clear_error,
           imported_memory_feeds_a_lazy_graph, misaligned_import_through_row_kernels):
    check(fn.__name__, fn)

print(f"dlpack cuda: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
