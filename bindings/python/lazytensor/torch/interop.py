"""Tensors across the bridge: torch dtypes and devices as lazytensor's, and data exchanged by
DLPack without copies (a torch CPU tensor's memory becomes a `lazy:cpu` graph input; a result's
memory becomes a torch tensor)."""
import weakref

import torch

from .. import _C

# torch dtype -> lazytensor dtype; a dtype missing here (complex, int16, uint16+, float8, ...) makes
# the op that touches it run in PyTorch (partition.py).
DTYPES = {
    torch.float32: _C.float32,
    torch.float64: _C.float64,
    torch.float16: _C.float16,
    torch.bfloat16: _C.bfloat16,
    torch.int64: _C.int64,
    torch.int32: _C.int32,
    torch.int8: _C.int8,
    torch.uint8: _C.uint8,
    torch.bool: _C.bool,
}
TORCH_DTYPES = {v.name: k for k, v in DTYPES.items()}


def lt_dtype(dtype):
    """The lazytensor dtype of a torch dtype (None stays None: "the op's default")."""
    if dtype is None:
        return None
    try:
        return DTYPES[dtype]
    except KeyError:
        raise NotImplementedError(f"not implemented: dtype {dtype} on lazytensor") from None


def torch_dtype(dtype):
    return TORCH_DTYPES[dtype.name]


def lazy_device(device):
    """The lazytensor device that runs graphs over torch tensors on `device`: our CPU backend for
    CPU tensors, our CUDA backend for CUDA tensors (one GPU: lazytensor's cuda backend is
    device 0)."""
    device = torch.device(device)
    if device.type == "cpu":
        return _C.device("lazy:cpu")
    if device.type == "cuda":
        if device.index not in (None, 0):
            raise NotImplementedError(f"not implemented: torch.compile on {device} (lazytensor's "
                                      f"CUDA backend runs on cuda:0)")
        return _C.device("lazy:cuda")
    raise NotImplementedError(f"not implemented: torch.compile on device {device} with "
                              f"backend='lazytensor' (CPU and CUDA tensors are supported)")


# id(nn.Parameter) -> (a weak reference to it, its data's address, the lazytensor tensor over
# it); the entry goes when the parameter does. Parameters enter every call of a model's graphs
# and an optimizer updates them in place, so the tensor sharing their memory is made once, not per
# call (GPT-2 124M: ~150 parameters in each of two graphs per step). Keyed by identity: torch
# tensors compare by value.
_param_views = {}


# id(torch tensor made by to_torch) -> (a weak reference to it, its data's address, the lazytensor
# tensor it shares memory with). A graph's outputs that the next graph takes back (the
# activations a forward saves for its backward: ~90 per ResNet-18 step) then cross back without
# a second DLPack exchange, which costs more host time than the GPU spends on many of them.
_made_by_us = {}


def to_lazy(t, device):
    """A lazytensor tensor on the lazy `device` sharing `t`'s memory (a non-contiguous `t` is
    copied dense first)."""
    made = _made_by_us.get(id(t))
    if made is not None and made[0]() is t and made[1] == t.data_ptr() and made[2].device == device \
            and tuple(made[2].shape) == tuple(t.shape) and t.is_contiguous():
        return made[2]
    param = isinstance(t, torch.nn.Parameter)
    if param:
        hit = _param_views.get(id(t))
        if hit is not None and hit[0]() is t and hit[1] == t.data_ptr() \
                and hit[2].device == device and tuple(hit[2].shape) == tuple(t.shape):
            return hit[2]
    if not t.is_contiguous():
        t = t.contiguous()
    source = t.detach() if t.requires_grad else t
    lazy = _C.from_dlpack(source)._shared_on(device)
    if param and source.data_ptr() == t.data_ptr():
        key = id(t)
        _param_views[key] = (weakref.ref(t, lambda _, key=key: _param_views.pop(key, None)),
                             t.data_ptr(), lazy)
    return lazy


def dlpack_stream(device):
    """The stream argument torch.from_dlpack passes to a producer on the lazy `device` (PyTorch's
    current CUDA stream; 1 for CUDA's legacy default stream; None for host memory), worked out
    once per graph call instead of once per tensor."""
    if device.backend != "cuda":
        return None
    s = torch.cuda.current_stream().cuda_stream
    return 1 if s == 0 else s


def to_torch(t, stream=None):
    """A torch tensor sharing the (materialized) memory of lazytensor tensor `t`; `stream` as
    dlpack_stream gives it for `t`'s device."""
    x = torch._C._from_dlpack(t.__dlpack__() if stream is None else t.__dlpack__(stream=stream))
    key = id(x)
    _made_by_us[key] = (weakref.ref(x, lambda _, key=key: _made_by_us.pop(key, None)),
                        x.data_ptr(), t)
    return x
