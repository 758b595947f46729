"""Every GPU is a device of its own (issue 31): "cuda:N" and "lazy:cuda:N" name backend "cuda:N"
(GPU 0 keeps the name "cuda"), with its own context, stream, allocator and executables; a GPU
that is not there is a clear error. Running on two GPUs is checked on the GPU machine."""
import pytest
import torch

import lazytensor as lt
from lazytensor.torch.interop import lazy_device


def test_devices_name_their_gpu():
    d = lt.device("lazy:cuda:2")
    assert (str(d), d.backend, d.index, d.type) == ("lazy:cuda:2", "cuda:2", 2, "lazy")
    assert repr(d) == "device(type='lazy', backend='cuda', index=2)"
    assert lt.device(str(d)) == d and d != lt.device("lazy:cuda")
    assert lt.device("lazy:cuda").index is None and lt.device("lazy:cuda").backend == "cuda"
    assert lt.device("cuda:1").backend == "cuda:1" and lt.device("cuda").backend == "cuda"
    assert lt.device("cuda:0") == lt.device("cuda")
    with pytest.raises(RuntimeError, match="Invalid device string"):
        lt.device("lazy:cuda:one")


def test_a_gpu_that_is_not_there_is_a_clear_error():
    n = lt.cuda.device_count()
    assert n == (0 if not lt.cuda.is_available() else n) and n >= 0
    assert not lt._C.backend_available(f"cuda:{n}")
    for dev in (f"lazy:cuda:{n}", f"cuda:{n}"):
        with pytest.raises(RuntimeError, match="no CUDA device"):
            lt.zeros(2, device=dev).sum().item()
    # The process keeps working.
    assert (lt.ones(3, device="lazy:cpu") * 2).sum().item() == 6


def test_synchronize_names_the_gpu():
    with pytest.raises(ValueError, match="not a CUDA device"):
        lt.cuda.synchronize("lazy:cpu")
    if not lt.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            lt.cuda.synchronize(1)


def test_torch_compile_maps_each_torch_gpu_to_ours():
    # torch.device objects need no GPU; the bridge runs torch's cuda:N graphs on lazy:cuda:N.
    assert str(lazy_device(torch.device("cuda", 0))) == "lazy:cuda"
    assert str(lazy_device(torch.device("cuda", 3))) == "lazy:cuda:3"
    assert str(lazy_device(torch.device("cpu"))) == "lazy:cpu"
