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
    CPU tensors, the CUDA backend of the same GPU for CUDA tensors (cuda:N -> lazy:cuda:N)."""
    device = torch.device(device)
    if device.type == "cpu":
        return _C.device("lazy:cpu")
    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        return _C.device(f"lazy:cuda:{index}")  # lazy:cuda:0 is lazy:cuda
    raise NotImplementedError(f"not implemented: torch.compile on device {device} with "
                              f"backend='lazytensor' (CPU and CUDA tensors are supported)")


# Data address -> (a weak reference, the lazytensor tensor sharing that memory). Filled by every
# import (parameters, batches) and by every output made by to_torch, so what enters graph after
# graph crosses once: parameters (an optimizer updates them in place), the inputs and weights a
# forward saves for its backward (autograd hands them back as new tensor objects, detached
# aliases, views or reshapes of the same memory, hence keyed by address, not identity), and the
# activations a forward returns for its backward (~90 per ResNet-18 step; a DLPack exchange costs
# more host time than the GPU spends on many of them). An output's entry lives as long as its
# torch storage does (torch keeps a storage's Python object while any tensor uses it): a weak
# reference to the first tensor object died with it while autograd's detached alias lived on,
# and GPT-2's saved bf16 weights and activations crossed again every step (25 imports a step for
# 2 layers). An import's entry lives with the torch tensor object, as the lazytensor tensor holds
# the import's storage (keyed by storage, it would never die). While either lives, no other
# allocation can take its address.
_shared = {}
# Tensors taken into graphs, by how: "imported" through DLPack, "reused" from _shared. Read by
# tests to pin how many exchanges a step makes.
counts = {"imported": 0, "reused": 0}


def _remember(x, lazy, by_storage):
    key = x.data_ptr()
    if not key:  # empty tensors have no memory to share
        return
    ref = weakref.ref(x.untyped_storage() if by_storage else x,
                      lambda r, key=key: _shared.pop(key, None)
                      if _shared.get(key, (None,))[0] is r else None)
    _shared[key] = (ref, lazy)


def _reused(t, device):
    """The lazytensor tensor for `t` from _shared, or None: the remembered one, or one over its
    data with t's shape when `t` is a contiguous view of the same memory with another shape."""
    hit = _shared.get(t.data_ptr())
    if hit is None or hit[0]() is None or not t.is_contiguous():
        return None
    lz = hit[1]
    if lz.device != device or lz.dtype != DTYPES.get(t.dtype):
        return None
    shape = tuple(t.shape)
    if tuple(lz.shape) == shape:
        return lz
    if t.numel() == lz.numel():  # the same memory (an allocation's address is its own)
        return lz._alias_as(shape)
    return None


def to_lazy(t, device):
    """A lazytensor tensor on the lazy `device` sharing `t`'s memory (a non-contiguous `t` is
    copied dense first)."""
    lz = _reused(t, device)
    if lz is not None:
        counts["reused"] += 1
        return lz
    dense = t if t.is_contiguous() else t.contiguous()
    lazy = _C.from_dlpack(dense.detach() if dense.requires_grad else dense)._shared_on(device)
    counts["imported"] += 1
    if dense is t:  # a copy's memory is not t's: nothing to remember
        _remember(t, lazy, by_storage=False)
    return lazy


def dlpack_stream(device):
    """The stream argument torch.from_dlpack passes to a producer on the lazy `device` (PyTorch's
    current CUDA stream; 1 for CUDA's legacy default stream; None for host memory), worked out
    once per graph call instead of once per tensor."""
    if not device.backend.startswith("cuda"):
        return None
    s = torch.cuda.current_stream().cuda_stream
    return 1 if s == 0 else s


def to_torch(t, stream=None):
    """A torch tensor sharing the (materialized) memory of lazytensor tensor `t`; `stream` as
    dlpack_stream gives it for `t`'s device."""
    x = torch._C._from_dlpack(t.__dlpack__() if stream is None else t.__dlpack__(stream=stream))
    _remember(x, t, by_storage=True)
    return x
