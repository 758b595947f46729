"""Tensor creation with PyTorch's signatures and dtype inference.

`tensor(data)` infers like torch.tensor: Python floats -> float32, ints -> int64, bools -> bool,
NumPy arrays keep their dtype. Data is copied, except by from_numpy (shares memory, as in PyTorch).
Random numbers come from one counter-based generator: the same seed gives the same numbers on
every device.
"""
import functools
import numbers

import numpy as np

from . import _C
from ._utils import NUMPY_DTYPES, as_device, as_dtype, is_number, size_args

Tensor = _C.Tensor


def _from_array(arr, dtype, device):
    """A tensor on `device` from a NumPy array, converted to `dtype` when given."""
    if dtype is None:
        return _C.from_numpy(arr, device)
    np_dtype = NUMPY_DTYPES.get(dtype)
    if np_dtype is None:  # bfloat16: no NumPy dtype, so convert on the device
        return _C.from_numpy(np.asarray(arr, dtype=np.float32), device)._cast(dtype)
    return _C.from_numpy(np.asarray(arr, dtype=np_dtype), device)


def _infer_array(data, dtype=None):
    """NumPy array of Python data with PyTorch's inference (floats -> float32, ints -> int64).
    Floats stay float64 when a dtype is requested: they round once, to that dtype."""
    if isinstance(data, np.ndarray):
        return data
    if isinstance(data, np.generic):
        return np.asarray(data)
    if isinstance(data, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    arr = np.array(data)
    kind = arr.dtype.kind
    if kind == "f" and arr.dtype == np.float64 and dtype is None:
        return arr.astype(np.float32)  # the default dtype, as torch.tensor([1.5]) is float32
    if kind in "iub" and arr.dtype in (np.int64, np.bool_):
        return arr
    if kind == "i":
        return arr.astype(np.int64)
    if kind == "u":
        raise ValueError(f"Overflow when unpacking long long: a value does not fit in int64 (data of "
                         f"NumPy dtype {arr.dtype})")
    if kind == "c":
        raise TypeError("complex tensors are not supported")
    if kind == "O":
        if any(isinstance(v, numbers.Integral) for v in arr.ravel()):
            raise ValueError("Overflow when unpacking long long: a value does not fit in int64")
        raise TypeError(f"could not infer a dtype from data of type {type(data).__name__}")
    if kind in "USV":
        raise TypeError(f"new(): invalid data type '{arr.dtype.name}'")
    return arr


def _grad_arg(fn):
    """Honours requires_grad=True by marking the new tensor as a leaf that requires grad."""
    @functools.wraps(fn)
    def wrapper(*args, requires_grad=False, **kwargs):
        t = fn(*args, **kwargs)
        if requires_grad:
            t.requires_grad_(True)
        return t
    return wrapper


@_grad_arg
def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, numbers, NumPy arrays or a Tensor)."""
    dtype, device = as_dtype(dtype), as_device(device)
    if isinstance(data, Tensor):
        src = data
        arr = src._numpy(_C.SyncReason.numpy, True)  # a copy, never an alias of `data`
        if dtype is None and src.dtype == _C.bfloat16:
            dtype = _C.bfloat16
        return _from_array(arr, dtype, device)
    return _from_array(_infer_array(data, dtype), dtype, device)


def as_tensor(data, dtype=None, device=None):
    """`data` itself when it already is a tensor of this dtype and device, else tensor(data, ...)."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray):
    """A cpu tensor sharing `ndarray`'s memory, as torch.from_numpy: a write through either is seen by
    the other. Arrays that are not C-contiguous, aligned and in native byte order are copied
    (lazytensor tensors are contiguous). In-place tensor ops give the tensor new memory, so they are
    not seen by the array (writes through the array or t.numpy() are)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return _C.from_numpy_shared(ndarray)


def _float_dtype(dtype):
    """The requested dtype, or the default float32."""
    dtype = as_dtype(dtype)
    return _C.float32 if dtype is None else dtype


@_grad_arg
def empty(*size, dtype=None, device=None, requires_grad=False, pin_memory=False,
          memory_format=None):
    """Zero-filled here (the runtime has no uninitialized memory to hand out)."""
    return _C.empty(size_args(size), _float_dtype(dtype), as_device(device))


@_grad_arg
def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _C.zeros(size_args(size), _float_dtype(dtype), as_device(device))


@_grad_arg
def ones(*size, dtype=None, device=None, requires_grad=False):
    return _C.ones(size_args(size), _float_dtype(dtype), as_device(device))


@_grad_arg
def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """Filled with `fill_value`; the dtype follows the value (float -> float32, int -> int64, bool)."""
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if not is_number(fill_value):
        raise TypeError(f"full(): fill_value must be a number, got {type(fill_value).__name__}")
    return _C.full(size_args((size,) if not isinstance(size, (tuple, list)) else size), fill_value,
                   as_dtype(dtype), as_device(device))


def _number(v, what):
    if isinstance(v, Tensor):
        v = v.item()
    if not is_number(v):
        raise TypeError(f"{what} must be a number, got {type(v).__name__}")
    return v


@_grad_arg
def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """[start, end) by step; int64 unless an argument is a float (then float32) or dtype is given."""
    if end is None:
        start, end = 0, start
    start, end, step = (_number(v, "arange()") for v in (start, end, step))
    dtype = as_dtype(dtype)
    if dtype is None:
        floats = any(isinstance(v, (float, np.floating)) for v in (start, end, step))
        dtype = _C.float32 if floats else _C.int64
    return _C.arange(float(start), float(end), float(step), dtype, as_device(device))


@_grad_arg
def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    return _C.linspace(float(_number(start, "linspace()")), float(_number(end, "linspace()")),
                       int(steps), _float_dtype(dtype), as_device(device))


@_grad_arg
def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    return _C.eye(int(n), None if m is None else int(m), _float_dtype(dtype), as_device(device))


def _check_generator(generator):
    if generator is not None:
        raise NotImplementedError("not implemented: generator= (use lazytensor.manual_seed)")


@_grad_arg
def rand(*size, dtype=None, device=None, generator=None, requires_grad=False):
    """Uniform on [0, 1)."""
    _check_generator(generator)
    return _C.rand(size_args(size), _float_dtype(dtype), as_device(device))


@_grad_arg
def randn(*size, dtype=None, device=None, generator=None, requires_grad=False):
    """Standard normal."""
    _check_generator(generator)
    return _C.randn(size_args(size), _float_dtype(dtype), as_device(device))


@_grad_arg
def randint(low, high=None, size=None, *, dtype=None, device=None, generator=None,
            requires_grad=False):
    """Integers uniform on [low, high): randint(high, size) or randint(low, high, size)."""
    _check_generator(generator)
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint() missing required argument 'size'")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    dtype = as_dtype(dtype) or _C.int64
    return _C.randint(int(low), int(high), size_args((size,) if not isinstance(size, (tuple, list)) else size),
                      dtype, as_device(device))


def _like(input, dtype, device, same, make):
    if not isinstance(input, Tensor):
        raise TypeError(f"expected a Tensor, got {type(input).__name__}")
    if dtype is None and device is None:
        return same(input)
    return make(list(input.shape), as_dtype(dtype) or input.dtype, as_device(device, input.device))


@_grad_arg
def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    return _like(input, dtype, device, _C.zeros_like, _C.zeros)


@_grad_arg
def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    return _like(input, dtype, device, _C.ones_like, _C.ones)


@_grad_arg
def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    return _like(input, dtype, device, _C.zeros_like, _C.empty)


@_grad_arg
def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _like(input, dtype, device, lambda t: _C.full_like(t, fill_value),
                 lambda s, t, d: _C.full(s, fill_value, t, d))


@_grad_arg
def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    return _like(input, dtype, device, _C.rand_like, _C.rand)


@_grad_arg
def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    return _like(input, dtype, device, _C.randn_like, _C.randn)


def manual_seed(seed):
    """Seeds the generator: the same seed gives the same numbers on cpu and lazy devices."""
    _C.manual_seed(int(seed) & 0xFFFFFFFFFFFFFFFF)
