"""The tensor of the `lazy` device inside PyTorch: a torch.Tensor wrapper subclass whose value is a
lazytensor tensor on our lazy device (pending IR until a sync). PyTorch sees an ordinary tensor on
device `lazy:0` (its autograd, optimizers and nn run above the dispatcher unchanged); every aten op
that reaches it goes to `__torch_dispatch__` (lazy_dispatch.py), which records the op into our IR
through the same aten table the torch.compile backend uses."""
import torch

from .. import _C
from .interop import lt_dtype, torch_dtype

TORCH_DEVICE = torch.device("lazy", 0)


def lt_device():
    """The lazytensor device our `lazy` tensors live on: the runtime's default lazy backend."""
    return _C.device("lazy")


class LazyTensor(torch.Tensor):
    """A torch tensor on `lazy:0` holding `_lt`, a lazytensor tensor on the lazy device."""

    @staticmethod
    def __new__(cls, value, requires_grad=False):
        r = torch.Tensor._make_wrapper_subclass(
            cls, tuple(value.shape), dtype=torch_dtype(value.dtype), device=TORCH_DEVICE,
            requires_grad=requires_grad)
        r._lt = value
        return r

    def __repr__(self, *, tensor_contents=None):
        # torch's own formatting of the values (a sync, as printing is), with this device named.
        with torch._C.DisableTorchFunctionSubclass():
            text = repr(to_cpu(self))
        suffix = f", device='{TORCH_DEVICE}'"
        cut = text.find(", dtype=") if ", dtype=" in text else text.rfind(")")
        text = text[:cut] + suffix + text[cut:]
        if self.grad_fn is not None:
            text = text[:-1] + f", grad_fn=<{type(self.grad_fn).__name__}>)"
        elif self.requires_grad:
            text = text[:-1] + ", requires_grad=True)"
        return text

    def __reduce_ex__(self, protocol):
        """torch.save / pickle: the values as a CPU tensor (saved as torch saves any), rebuilt on
        the lazy device when loaded (rebuild_lazy is on torch.load's weights_only allowlist)."""
        return rebuild_lazy, (to_cpu(self), self.requires_grad)

    def tolist(self):
        """The values as nested Python lists (a sync), as a CPU tensor's tolist()."""
        return to_cpu(self).tolist()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # The first op imports lazy_dispatch (it loads the aten table), which replaces this
        # method with a direct call of its dispatch.
        from .lazy_dispatch import dispatch
        return dispatch(func, args, kwargs or {})


def rebuild_lazy(cpu_tensor, requires_grad=False):
    """A saved lazy tensor, loaded: its values on the lazy device again."""
    return cpu_tensor.to(TORCH_DEVICE).requires_grad_(requires_grad)


_make_wrapper = torch.Tensor._make_wrapper_subclass
_TORCH_DTYPES = {}  # lazytensor dtype -> torch dtype, filled as dtypes are met


def wrap(value):
    """LazyTensor(value), without the class call's __new__/__init__ round (the hot path of every
    traced op: issue 27's per-op host cost)."""
    dtype = _TORCH_DTYPES.get(value.dtype)
    if dtype is None:
        dtype = _TORCH_DTYPES[value.dtype] = torch_dtype(value.dtype)
    r = _make_wrapper(LazyTensor, value.shape, dtype=dtype, device=TORCH_DEVICE)
    r._lt = value
    return r


def to_cpu(t):
    """The values of LazyTensor `t` as a new torch CPU tensor (a sync point)."""
    value = t._lt
    host = value.to(_C.device("cpu"))
    return torch.from_dlpack(host).clone() if host.numel() else \
        torch.empty(tuple(value.shape), dtype=t.dtype)


def from_torch(t):
    """A lazytensor tensor on the lazy device with the values of torch tensor `t` (any device)."""
    t = t.detach().cpu().contiguous()
    dtype = lt_dtype(t.dtype)
    if t.numel() == 0:
        return _C.full(list(t.shape), 0, dtype, lt_device())
    if t.dtype == torch.bfloat16:  # through float32: exact both ways
        return _C.cast(_C.from_dlpack(t.float()), dtype).to(lt_device())
    return _C.from_dlpack(t).to(lt_device())  # the copy to the lazy device owns its memory
