"""Argument normalization shared by the package: devices, dtypes, sizes, dims, Python numbers.

PyTorch accepts `zeros(2, 3)` and `zeros((2, 3))`, devices as strings or objects, dims as an int,
a tuple or None; these helpers turn such arguments into what the C++ runtime takes.
"""
import numbers
import operator

import numpy as np

from . import _C

CPU = _C.device("cpu")

# NumPy dtypes the runtime stores as-is (bfloat16 has no NumPy dtype).
NUMPY_DTYPES = {
    _C.bool: np.dtype(np.bool_),
    _C.uint8: np.dtype(np.uint8),
    _C.int8: np.dtype(np.int8),
    _C.int32: np.dtype(np.int32),
    _C.int64: np.dtype(np.int64),
    _C.float16: np.dtype(np.float16),
    _C.float32: np.dtype(np.float32),
    _C.float64: np.dtype(np.float64),
}


def dtype_by_name(name):
    """The dtype object called `name` ("float32", ...); how dtypes unpickle."""
    dtype = getattr(_C, name, None)
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"unknown dtype name {name!r}")
    return dtype


def as_device(device, default=CPU):
    """A `lazytensor.device` from a device, a string ("lazy", "lazy:cpu", "cpu", ...) or None."""
    if device is None:
        return default
    if isinstance(device, _C.device):
        return device
    if isinstance(device, str):
        return _C.device(device)  # RuntimeError for unknown strings
    if isinstance(device, int) and not isinstance(device, bool):
        return _C.device("cuda", device)  # torch reads a bare int as a CUDA ordinal
    raise TypeError(f"expected a device (a string such as 'lazy' or a lazytensor.device), "
                    f"got {type(device).__name__}")


def as_dtype(dtype, what="dtype"):
    """`dtype` itself when it is a lazytensor dtype (None passes through); TypeError otherwise."""
    if dtype is None or isinstance(dtype, _C.dtype):
        return dtype
    raise TypeError(f"{what} must be a lazytensor.dtype (such as lazytensor.float32), got {dtype!r}")


def is_number(x):
    """A Python or NumPy bool/int/float (what the runtime takes as a wrapped scalar)."""
    return isinstance(x, (bool, np.bool_, numbers.Integral, numbers.Real)) and not isinstance(x, _C.Tensor)


def _index(v, what):
    if isinstance(v, (_C.dtype, _C.device, bool, np.bool_)):
        raise TypeError(f"{what} must be a sequence of ints, got an element {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of ints, got an element of type "
                        f"{type(v).__name__}") from None


def size_args(args, what="size"):
    """`f(2, 3)`, `f((2, 3))` and `f([2, 3])` all give [2, 3]."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    # Plain ints (the common case) need no checks: a view op's Python cost is most of an eager one.
    if all(type(v) is int for v in args):
        return list(args)
    return [_index(v, what) for v in args]


def dims_arg(dim):
    """A reduction's `dim`: None -> [] (all dims), an int -> [int], a tuple/list -> list."""
    if dim is None:
        return []
    if isinstance(dim, (tuple, list)):
        return [_index(d, "dim") for d in dim]
    return [_index(dim, "dim")]


def normalize_dim(dim, ndim):
    """Maps a possibly negative dim into [0, ndim); IndexError as PyTorch raises it."""
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], "
                         f"but got {dim})")
    return dim + max(ndim, 1) if dim < 0 else dim


def not_implemented(name):
    """A stand-in for an API of CONTRACT.md that the runtime does not provide yet."""
    def fn(*args, **kwargs):
        raise NotImplementedError(f"not implemented: {name}")
    fn.__name__ = fn.__qualname__ = name.split("(")[0].split(".")[-1]
    fn.__doc__ = f"Not implemented yet: raises NotImplementedError."
    return fn


def check_requires_grad(requires_grad):
    if requires_grad:
        raise NotImplementedError("not implemented: requires_grad (autograd from Python)")
