"""`lazytensor.Tensor`: the C++ tensor class (`_C.Tensor`) with PyTorch's Python API.

The extension binds the operators and fixed-signature methods; this module adds the methods whose
argument conventions are PyTorch's (reshape(*shape), sum(dim=None, keepdim=False), to(...), printing,
host conversions, ...) directly onto that class, so that every tensor the runtime returns already is a
`lazytensor.Tensor` with no wrapper object in between.

Host reads (`item`, `numpy`, `tolist`, printing, `bool(t)`) are sync points: on a lazy device they
compute the tensor and what it depends on, and record their reason in `lazytensor.metrics`.
"""
import operator

import numpy as np

from . import _C, _indexing, _sorting, amp, return_types
from ._utils import (as_device, as_dtype, dims_arg, is_number, normalize_dim,
                     size_args)

Tensor = _C.Tensor
Tensor.__module__ = "lazytensor"
_C.device.__module__ = "lazytensor"
_C.dtype.__module__ = "lazytensor"

_R = _C.SyncReason
_export_dlpack = Tensor.__dlpack__  # the extension's export; Tensor.__dlpack__ below wraps it
# dtypes that PyTorch's repr leaves implicit.
_IMPLICIT_REPR_DTYPES = (_C.float32, _C.int64, _C.bool)


def _tensor_or_number(x, op):
    if isinstance(x, Tensor) or is_number(x):
        return x
    raise TypeError(f"{op}(): expected a Tensor or a number, got {type(x).__name__}")


def _format_body(arr):
    """PyTorch's layout: 4 decimals, or `1., 2.` when every value is integral; NumPy's summarization."""
    kwargs = {}
    if arr.dtype.kind == "f":
        finite = np.abs(arr[np.isfinite(arr)].astype(np.float64))
        integral = bool(np.all(finite == np.round(finite)))
        nonzero = finite[finite != 0]
        # NumPy and PyTorch switch to scientific notation on the same thresholds; integral values
        # print as `1.` only outside scientific notation (PyTorch then prints 1.0000e+10).
        sci = nonzero.size > 0 and (nonzero.max() / nonzero.min() > 1000 or nonzero.max() > 1e8
                                    or nonzero.min() < 1e-4)
        kwargs = dict(precision=4, floatmode="maxprec" if integral and not sci else "fixed")
    return np.array2string(arr, separator=", ", prefix="tensor(", max_line_width=80,
                           threshold=1000, edgeitems=3, **kwargs)


class _TensorMethods:
    """The methods below are installed onto `_C.Tensor` (see `_install`)."""

    # ---- metadata --------------------------------------------------------------------------

    def size(self, dim=None):
        """The shape, or the size of one dimension."""
        if dim is None:
            return self.shape
        return self._size(dim)

    def nelement(self):
        return self.numel()

    def element_size(self):
        return self.dtype.itemsize

    def is_floating_point(self):
        return self.dtype.is_floating_point

    @property
    def is_lazy(self):
        return self.device.type == "lazy"

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def T(self):
        """All dims reversed (a 2-D tensor's transpose)."""
        if self.ndim < 2:
            return self
        return self._permute(list(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self):
        """The last two dims swapped (a batch of matrices, transposed)."""
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                               f"Got {self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    # ---- movement ----------------------------------------------------------------------------

    def reshape(self, *shape):
        return self._reshape(size_args(shape, "shape"))

    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], _C.dtype):
            raise NotImplementedError("not implemented: view(dtype) (reinterpreting bits)")
        return self._view(size_args(shape, "shape"))

    def reshape_as(self, other):
        return self._reshape(list(other.shape))

    def view_as(self, other):
        return self._view(list(other.shape))

    def stride(self, dim=None):
        """PyTorch's strides of this tensor as a view of its base (values are stored dense)."""
        strides = tuple(self._strides())
        return strides if dim is None else strides[normalize_dim(dim, self.ndim)]

    def permute(self, *dims):
        return self._permute(size_args(dims, "dims"))

    def expand(self, *sizes):
        return self._expand(size_args(sizes, "size"))

    def expand_as(self, other):
        return self._expand(list(other.shape))

    def squeeze(self, dim=None):
        if isinstance(dim, (tuple, list)):
            out = self
            for d in sorted((normalize_dim(d, self.ndim) for d in dims_arg(dim)), reverse=True):
                out = out._squeeze(d)
            return out
        return self._squeeze(dim)

    def swapaxes(self, axis0, axis1):
        return self.transpose(axis0, axis1)

    swapdims = swapaxes

    def t(self):
        n = self.ndim
        if n == 2:  # the common case first: one C++ call
            return self.transpose(0, 1)
        if n > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {n}D")
        return self

    def __deepcopy__(self, memo):
        """A copy with its own values (`copy.deepcopy(model.state_dict())`), keeping the subclass
        (Parameter), requires_grad of a leaf, and a deep copy of .grad, as PyTorch's."""
        if id(self) in memo:
            return memo[id(self)]
        from .autograd import no_grad
        with no_grad():
            new = self.clone()
        if type(self) is not Tensor:
            new = type(self)(new, self.requires_grad) if self.is_leaf else type(self)(new)
        elif self.requires_grad and self.is_leaf:
            new.requires_grad_(True)
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new

    def contiguous(self, memory_format=None):
        """Itself when contiguous, else a copy (as PyTorch: writes to the copy stay in the copy)."""
        return self if self.is_contiguous() else self.clone()

    @amp.lower_precision
    def matmul(self, other):
        return _C.matmul(self, other)

    @amp.lower_precision
    def __matmul__(self, other):
        return _C.matmul(self, other)

    @amp.lower_precision
    def mm(self, mat2):
        if self.ndim != 2 or mat2.ndim != 2:
            raise RuntimeError(f"mm: expected 2-D tensors, got {self.ndim}-D and {mat2.ndim}-D")
        return self.matmul(mat2)

    @amp.lower_precision
    def bmm(self, mat2):
        if self.ndim != 3 or mat2.ndim != 3:
            raise RuntimeError(f"bmm: expected 3-D tensors, got {self.ndim}-D and {mat2.ndim}-D")
        return self.matmul(mat2)

    # ---- reductions --------------------------------------------------------------------------

    @amp.float32
    def sum(self, dim=None, keepdim=False, *, dtype=None):
        x = self if dtype is None else self.to(dtype)
        return x._sum(dims_arg(dim), keepdim)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        x = self if dtype is None else self.to(dtype)
        return x._mean(dims_arg(dim), keepdim)

    @amp.float32
    def prod(self, dim=None, keepdim=False, *, dtype=None):
        x = self if dtype is None else self.to(dtype)
        return x._prod(dims_arg(dim), keepdim)

    def amax(self, dim=(), keepdim=False):
        return self._amax(dims_arg(dim), keepdim)

    def amin(self, dim=(), keepdim=False):
        return self._amin(dims_arg(dim), keepdim)

    def max(self, dim=None, keepdim=False):
        """max() over all elements, the elementwise maximum with another tensor, or max(dim) ->
        (values, indices) of the first maximum along dim (lazytensor.return_types.max)."""
        if isinstance(dim, Tensor):
            return _C.maximum(self, dim)
        if dim is None:
            return self._amax([], False)
        return return_types.max(*_values_and_indices(self, dim, keepdim, True))

    def min(self, dim=None, keepdim=False):
        """min() over all elements, the elementwise minimum with another tensor, or min(dim) ->
        (values, indices) of the first minimum along dim (lazytensor.return_types.min)."""
        if isinstance(dim, Tensor):
            return _C.minimum(self, dim)
        if dim is None:
            return self._amin([], False)
        return return_types.min(*_values_and_indices(self, dim, keepdim, False))

    def argmax(self, dim=None, keepdim=False):
        """int64 index of the first maximum along dim (of the flattened tensor when dim is None)."""
        return _C.argmax(self, None if dim is None else operator.index(dim), keepdim)

    def argmin(self, dim=None, keepdim=False):
        """int64 index of the first minimum along dim (of the flattened tensor when dim is None)."""
        return _C.argmin(self, None if dim is None else operator.index(dim), keepdim)

    @amp.float32
    def cumsum(self, dim, *, dtype=None):
        """Running sums along dim; integer and bool inputs sum in int64, as in PyTorch."""
        x = self if dtype is None else self.to(dtype)
        out_dtype = x.dtype if x.dtype.is_floating_point else _C.int64
        return _indexing.exact(lambda a: _C.cumsum(a, operator.index(dim)), out_dtype, x)

    def sort(self, dim=-1, descending=False, stable=False):
        """(values, indices) sorted along dim; the order is found on the host (lazytensor/_sorting.py)."""
        return _sorting.sort(self, dim, descending, stable)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        """(values, indices) of the k largest (smallest) along dim (lazytensor/_sorting.py)."""
        return _sorting.topk(self, k, dim, largest, sorted)

    def argsort(self, dim=-1, descending=False, stable=False):
        """Indices that sort along dim (lazytensor/_sorting.py)."""
        return _sorting.argsort(self, dim, descending, stable)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return self._var(dims_arg(dim), _correction(unbiased, correction), keepdim)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return self._std(dims_arg(dim), _correction(unbiased, correction), keepdim)

    def logsumexp(self, dim, keepdim=False):
        return self._logsumexp(dims_arg(dim), keepdim)

    @amp.float32
    def softmax(self, dim, dtype=None):
        x = self if dtype is None else self.to(dtype)
        return x._softmax(dim)

    @amp.float32
    def log_softmax(self, dim, dtype=None):
        x = self if dtype is None else self.to(dtype)
        return x._log_softmax(dim)

    # ---- elementwise -------------------------------------------------------------------------

    def add(self, other, *, alpha=1):
        other = _tensor_or_number(other, "add")
        return _C.add(self, other if alpha == 1 else other * alpha)

    def sub(self, other, *, alpha=1):
        other = _tensor_or_number(other, "sub")
        return _C.sub(self, other if alpha == 1 else other * alpha)

    subtract = sub

    def mul(self, other):
        return _C.mul(self, _tensor_or_number(other, "mul"))

    multiply = mul

    def div(self, other, *, rounding_mode=None):
        """True division, or with rounding_mode "floor" (floor_divide) or "trunc" (toward 0); the
        rounded forms keep integer dtypes, as in PyTorch."""
        other = _tensor_or_number(other, "div")
        if rounding_mode is None:
            return _C.div(self, other)
        if rounding_mode == "floor":
            return _C.floor_divide(self, other)
        if rounding_mode == "trunc":
            rem = _C.fmod(self, other)
            if not rem.dtype.is_floating_point:
                # a - fmod(a, b) is an exact multiple of b: flooring its quotient truncates.
                return _C.floor_divide(_C.sub(self, rem), other)
            q = _C.div(self, other)
            return _C.where(q < 0, -((-q).floor()), q.floor())
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                         f"found '{rounding_mode}'")

    divide = div
    true_divide = div

    def pow(self, exponent):
        return _C.pow(self, _tensor_or_number(exponent, "pow"))

    def square(self):
        return _C.mul(self, self)

    def negative(self):
        return self.neg()

    def absolute(self):
        return self.abs()

    def clamp(self, min=None, max=None):
        if isinstance(min, Tensor) or isinstance(max, Tensor):
            out = self
            if min is not None:
                out = _C.maximum(out, min if isinstance(min, Tensor) else _C.full_like(out, min))
            if max is not None:
                out = _C.minimum(out, max if isinstance(max, Tensor) else _C.full_like(out, max))
            if min is None and max is None:
                raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
            return out
        return self._clamp(min, max)

    clip = clamp

    def clamp_min(self, min):
        return self.clamp(min=min)

    def clamp_max(self, max):
        return self.clamp(max=max)

    def maximum(self, other):
        return _C.maximum(self, other)

    def minimum(self, other):
        return _C.minimum(self, other)

    def eq(self, other):
        return _C.eq(self, _tensor_or_number(other, "eq"))

    def ne(self, other):
        return _C.ne(self, _tensor_or_number(other, "ne"))

    def lt(self, other):
        return _C.lt(self, _tensor_or_number(other, "lt"))

    def le(self, other):
        return _C.le(self, _tensor_or_number(other, "le"))

    def gt(self, other):
        return _C.gt(self, _tensor_or_number(other, "gt"))

    def ge(self, other):
        return _C.ge(self, _tensor_or_number(other, "ge"))

    def logical_and(self, other):
        return _C.logical_and(self, other)

    def logical_or(self, other):
        return _C.logical_or(self, other)

    def logical_not(self):
        return _C.logical_not(self)

    def logical_xor(self, other):
        return _C.ne(self.bool(), other.bool())

    def where(self, condition, other):
        from ._functions import where
        return where(condition, self, other)

    def masked_fill(self, mask, value):
        """`value` where the bool `mask` is True, else self, both broadcast to their common shape
        (PyTorch); keeps self's dtype. `value` is a number or a 0-d tensor."""
        if not isinstance(mask, Tensor):
            raise TypeError(f"masked_fill(): argument 'mask' must be Tensor, not {type(mask).__name__}")
        if mask.dtype != _C.bool:
            raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                               f"{mask.dtype}")
        try:
            np.broadcast_shapes(tuple(mask.shape), tuple(self.shape))
        except ValueError:
            raise RuntimeError(f"masked_fill: the mask of shape {list(mask.shape)} does not broadcast "
                               f"with the input of shape {list(self.shape)}") from None
        if isinstance(value, Tensor):
            if value.ndim != 0:
                raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                                   f"tensor with {value.ndim} dimension(s).")
            value = value.to(self.device).to(self.dtype)
        elif is_number(value):
            value = _C.scalar_tensor(value, self.dtype, self.device)
        else:
            raise TypeError(f"masked_fill(): argument 'value' must be a number or a Tensor, not "
                            f"{type(value).__name__}")
        out = _C.where(mask, value, self)
        return out if out.dtype == self.dtype else out._cast(self.dtype)

    # Python's // and % and the bitwise operators (__floordiv__, __mod__, __and__, __or__,
    # __xor__, __invert__, __lshift__, __rshift__ and their reflected forms) are bound by the
    # extension (src/tensor_bindings.cc); the in-place forms are in _inplace.py.

    def floor_divide(self, other):
        """Division rounded toward -inf (Python's //); integer division by zero gives 0."""
        return _C.floor_divide(self, _tensor_or_number(other, "floor_divide"))

    def remainder(self, other):
        """Python's %: the result has the divisor's sign; an integer remainder by zero is 0."""
        return _C.remainder(self, _tensor_or_number(other, "remainder"))

    def fmod(self, other):
        """C's fmod: the result has the dividend's sign; an integer fmod by zero is 0."""
        return _C.fmod(self, _tensor_or_number(other, "fmod"))

    def bitwise_and(self, other):
        return _C.bitwise_and(self, _tensor_or_number(other, "bitwise_and"))

    def bitwise_or(self, other):
        return _C.bitwise_or(self, _tensor_or_number(other, "bitwise_or"))

    def bitwise_xor(self, other):
        return _C.bitwise_xor(self, _tensor_or_number(other, "bitwise_xor"))

    def bitwise_not(self):
        return _C.bitwise_not(self)

    def bitwise_left_shift(self, other):
        return _C.bitwise_left_shift(self, _tensor_or_number(other, "bitwise_left_shift"))

    def bitwise_right_shift(self, other):
        return _C.bitwise_right_shift(self, _tensor_or_number(other, "bitwise_right_shift"))

    # ---- dtype and device --------------------------------------------------------------------

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype), to(other) or keywords, as in PyTorch."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        if kwargs.pop("copy", False):
            raise NotImplementedError("not implemented: to(copy=True) (clone)")
        for k in ("non_blocking", "memory_format"):
            kwargs.pop(k, None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, _C.dtype):
                dtype = a
            elif isinstance(a, (str, _C.device)):
                device = a
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, bool):  # positional non_blocking / copy
                continue
            else:
                raise TypeError(f"to() received an invalid combination of arguments: got "
                                f"{type(a).__name__}; expected a device, a dtype or a Tensor")
        out = self
        dtype = as_dtype(dtype)
        if dtype is not None and dtype != out.dtype:
            out = out._cast(dtype)
        if device is not None:
            device = as_device(device)
            if device != out.device:
                out = out._to_device(device)
        return out

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to(as_device("cuda" if device is None else device))

    def type_as(self, other):
        return self.to(other.dtype)

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def half(self):
        return self.to(_C.float16)

    def bfloat16(self):
        return self.to(_C.bfloat16)

    def int(self):
        return self.to(_C.int32)

    def long(self):
        return self.to(_C.int64)

    def bool(self):
        return self.to(_C.bool)

    def byte(self):
        return self.to(_C.uint8)

    def char(self):
        return self.to(_C.int8)

    # ---- host reads (sync points) ------------------------------------------------------------

    def numpy(self, *, force=False):
        """The values as a NumPy array: on cpu an array over the tensor's own memory (as in PyTorch,
        writes through it are seen by the tensor); elsewhere a copy (a sync point, reason "numpy")."""
        return self._numpy_view()

    def __array__(self, dtype=None, copy=None):
        a = self._numpy(_R.numpy, False)  # always a fresh array
        return a if dtype is None else a.astype(dtype, copy=False)

    def __dlpack__(self, stream=None, *, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule sharing the tensor's memory (a pending lazy tensor is synced first), with
        PyTorch 2's signature (the Array API's): `max_version` is accepted and the capsule is the
        unversioned DLPack 0.x one, which such consumers take; `dl_device` must be the tensor's own
        (BufferError otherwise); `copy=True` exports a copy."""
        if dl_device is not None and tuple(dl_device) != tuple(self.__dlpack_device__()):
            raise BufferError(f"Tensor.__dlpack__: cannot export to DLPack device {tuple(dl_device)} "
                              f"(the tensor is on {tuple(self.__dlpack_device__())})")
        return _export_dlpack(self.clone() if copy else self, stream)

    def item(self):
        """The one value of a one-element tensor as a Python number (a sync point, reason "item")."""
        return self._item(_R.item)

    def tolist(self):
        """Nested Python lists (a number for a 0-d tensor); a sync point, reason "tolist"."""
        return self._tolist()

    def _scalar_for_python(self, what):
        if self.numel() != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars "
                             f"(got shape {tuple(self.shape)} for {what})")
        return self._item(_R.item)

    def __float__(self):
        return float(self._scalar_for_python("float()"))

    def __int__(self):
        return int(self._scalar_for_python("int()"))

    def __index__(self):
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._item(_R.item))

    def __bool__(self):
        """Truth of a one-element tensor: control flow on a value (a sync, reason "control_flow")."""
        n = self.numel()
        if n != 1:
            raise RuntimeError(f"Boolean value of Tensor with {'no values' if n == 0 else 'more than one value'} "
                               "is ambiguous")
        return bool(self._item(_R.control_flow))

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self):
        """PyTorch's layout, e.g. `tensor([1., 2.], device='lazy:0')`; a sync point, reason "print"."""
        arr = self._numpy(_R.print, True)
        extras = []
        if arr.size == 0 and arr.ndim != 1:
            body = "[]"
            extras.append(f"size={tuple(arr.shape)}")
        else:
            body = _format_body(arr)
        if self.device.type != "cpu":
            extras.append(f"device='{self.device}'")
        if self.dtype not in _IMPLICIT_REPR_DTYPES:
            extras.append(f"dtype={self.dtype!r}")
        return "tensor(" + ", ".join([body] + extras) + ")"

    __str__ = __repr__

    def __format__(self, spec):
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        return format(repr(self), spec)

    # ---- autograd (the tape is in the C++ runtime; see lazytensor/autograd.py) ----------------

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulates d(self)/d(leaf) into every leaf's `.grad`; `gradient` is required unless self
        has one element. On "lazy" this traces the backward pass (no compute until a sync)."""
        if create_graph:
            raise NotImplementedError("not implemented: backward(create_graph=True) on lazytensor")
        if inputs is not None:
            raise NotImplementedError("not implemented: backward(inputs=...) on lazytensor")
        if gradient is not None and not isinstance(gradient, Tensor):
            raise TypeError(f"backward(): gradient must be a Tensor, got {type(gradient).__name__}")
        self._backward(gradient, bool(retain_graph))  # runs what _queue_callback queued

    @property
    def grad_fn(self):
        """None for leaves; otherwise an object naming the backward rule (`grad_fn.name()`)."""
        name = self._grad_fn_name
        if not name:
            return None
        from .autograd import GradFn
        return GradFn(name)

    @property
    def data(self):
        """The same values without history: an alias, as in PyTorch (`p.data.add_(u)` updates p);
        assign `t.data = value` to replace its data."""
        return self.detach()

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        self._set_data(value)

    def detach_(self):
        if not self.is_leaf:
            raise RuntimeError("detach_() is not implemented for non-leaf tensors on lazytensor")
        return self.requires_grad_(False)

    def clone(self, *, memory_format=None):
        """A copy with its own history node (values are immutable here, so no data is copied)."""
        return _C.add(self, 0) if self.dtype != _C.bool else self.to(_C.int8).to(_C.bool)

    def retain_grad(self):
        raise NotImplementedError("not implemented: retain_grad() on lazytensor")

    # ---- indexing, slicing and joining (see lazytensor/_indexing.py) -------------------------

    def __getitem__(self, index):
        """ints, slices (positive steps), None, ..., integer index tensors/lists and bool masks. A
        bool mask has a data-dependent shape: on lazy it is read to the host (a sync point)."""
        return _indexing.getitem(self, index)

    def __setitem__(self, index, value):
        """Functional: builds the new value and rebinds this tensor to it, as in-place ops do."""
        _indexing.setitem(self, index, value)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter([_C.select(self, 0, i) for i in range(self.shape[0])])

    def unbind(self, dim=0):
        dim = normalize_dim(dim, self.ndim)
        return tuple(_C.select(self, dim, i) for i in range(self.shape[dim]))

    def narrow(self, dim, start, length):
        return _C.narrow(self, dim, operator.index(start), operator.index(length))

    def select(self, dim, index):
        return _C.select(self, dim, operator.index(index))

    def flip(self, *dims):
        return _C.flip(self, size_args(dims, "dims"))

    def fliplr(self):
        if self.ndim < 2:
            raise RuntimeError("Input must be >= 2-d.")
        return _C.flip(self, [1])

    def flipud(self):
        if self.ndim < 1:
            raise RuntimeError("Input must be >= 1-d.")
        return _C.flip(self, [0])

    def split(self, split_size_or_sections, dim=0):
        """Pieces of `split_size` along dim (the last one smaller), or of the listed sizes."""
        if isinstance(split_size_or_sections, (list, tuple)):
            sizes = [operator.index(s) for s in split_size_or_sections]
            d = normalize_dim(dim, self.ndim)
            n = self.shape[d]
            if any(s < 0 for s in sizes) or sum(sizes) != n:
                raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                                   f"(input tensor's size at dimension {d}), but got split_sizes="
                                   f"{sizes}")
            out, start = [], 0
            for s in sizes:
                out.append(_C.narrow(self, d, start, s))
                start += s
            return tuple(out)
        return tuple(_C.split(self, operator.index(split_size_or_sections), dim))

    def split_with_sizes(self, split_sizes, dim=0):
        return self.split(list(split_sizes), dim)

    def chunk(self, chunks, dim=0):
        return tuple(_C.chunk(self, operator.index(chunks), dim))

    def gather(self, dim, index, *, sparse_grad=False):
        index = _index_arg(index, self, "gather")
        return _indexing.exact(lambda a: _C.gather(a, dim, index), self.dtype, self)

    def scatter_add(self, dim, index, src):
        if not isinstance(src, Tensor):
            raise TypeError(f"scatter_add(): argument 'src' must be Tensor, not {type(src).__name__}")
        index = _index_arg(index, self, "scatter_add")
        if src.device != self.device:
            src = src.to(self.device)
        return _indexing.exact(lambda a, s: _C.scatter_add(a, dim, index, s), self.dtype, self, src)

    def index_select(self, dim, index):
        index = _index_arg(index, self, "index_select")
        return _indexing.exact(lambda a: _C.index_select(a, dim, index), self.dtype, self)

    def tril(self, diagonal=0):
        k = operator.index(diagonal)
        return _indexing.exact(lambda a: _C.tril(a, k), self.dtype, self)

    def triu(self, diagonal=0):
        k = operator.index(diagonal)
        return _indexing.exact(lambda a: _C.triu(a, k), self.dtype, self)


def _index_arg(index, self, op):
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}(): argument 'index' must be Tensor, not {type(index).__name__}")
    return index if index.device == self.device else index.to(self.device)


def _values_and_indices(self, dim, keepdim, largest):
    """(values, indices) of the first extreme along dim. Float values are gathered at the index, so
    the gradient reaches that one element (PyTorch's rule, also under ties)."""
    dim = operator.index(dim)
    # bool has no argmax of its own (PyTorch's neither); its max(dim) is uint8's, read back as bool.
    x = self._cast(_C.uint8) if self.dtype == _C.bool else self
    idx = _C.argmax(x, dim, True) if largest else _C.argmin(x, dim, True)
    if self.dtype.is_floating_point:
        values = _C.gather(self, dim, idx)
    else:
        values = self._amax([dim], True) if largest else self._amin([dim], True)
    if self.ndim == 0:
        return values, idx
    if not keepdim and self.ndim > 0:
        d = normalize_dim(dim, self.ndim)
        values, idx = values._squeeze(d), idx._squeeze(d)
    return values, idx


def _correction(unbiased, correction):
    if correction is not None:
        return float(correction)
    return 0.0 if unbiased is False else 1.0


_SKIP = {"__module__", "__dict__", "__weakref__", "__doc__", "__qualname__"}


def _install():
    from ._inplace import _InPlaceMethods
    from ._tensor_new import _NewTensorMethods
    for cls in (_TensorMethods, _InPlaceMethods, _NewTensorMethods):
        for name, attr in vars(cls).items():
            if name not in _SKIP:
                setattr(Tensor, name, attr)


_install()
