"""Module-level functions mirroring Tensor methods (`lt.exp(x)` is `x.exp()`), as in PyTorch."""
from . import _C
from ._indexing import exact
from ._utils import is_number

Tensor = _C.Tensor

# lt.<name>(input, *args, **kwargs) is input.<name>(*args, **kwargs).
_MIRRORED = [
    # elementwise
    "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs", "absolute",
    "neg", "negative", "erf", "log1p", "expm1", "floor", "reciprocal", "square", "pow", "clamp", "clip",
    "clamp_min", "clamp_max", "add", "sub", "subtract", "mul", "multiply", "div", "divide",
    "true_divide", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not",
    "logical_xor", "masked_fill", "tril", "triu", "fmod", "bitwise_not",
    # reductions
    "sum", "mean", "prod", "amax", "amin", "max", "min", "var", "std", "logsumexp", "softmax",
    "log_softmax", "argmax", "argmin", "cumsum",
    # movement and linear algebra
    "reshape", "permute", "transpose", "swapaxes", "swapdims", "unsqueeze", "squeeze", "flatten",
    "t", "matmul", "mm", "bmm", "numel", "is_floating_point", "clone",
    # slicing and indexing
    "narrow", "select", "flip", "fliplr", "flipud", "split", "chunk", "unbind", "gather",
    "scatter_add", "index_select", "sort", "argsort", "topk",
]


def _mirror(name):
    method = getattr(Tensor, name)

    def fn(input, *args, **kwargs):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        return method(input, *args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"lazytensor.{name}(input, ...) is input.{name}(...)."
    return fn


for _name in _MIRRORED:
    globals()[_name] = _mirror(_name)
del _name


def where(condition, input=None, other=None):
    """`input` where `condition` is True, else `other`; either may be a Python number."""
    if input is None and other is None:
        raise NotImplementedError("not implemented: where(condition) (nonzero)")
    if not isinstance(condition, Tensor):
        raise TypeError(f"where(): argument 'condition' must be Tensor, not {type(condition).__name__}")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        if not (is_number(input) and is_number(other)):
            raise TypeError("where(): input and other must be Tensors or numbers")
        input = _C.scalar_tensor(input, None, condition.device)
    return _C.where(condition, input, other)


def maximum(input, other):
    return _C.maximum(input, other)


def minimum(input, other):
    return _C.minimum(input, other)


def _number_first(name, reflected):
    """lt.<name>(input, other) where input may be a Python number when other is a tensor
    (torch.remainder(7, t), torch.bitwise_left_shift(1, t), ...): `reflected(tensor, number)`."""
    def fn(input, other):
        if isinstance(input, Tensor):
            return getattr(input, name)(other)
        if is_number(input) and isinstance(other, Tensor):
            return reflected(other, input)
        raise TypeError(f"{name}(): expected a Tensor as input or other, got "
                        f"{type(input).__name__} and {type(other).__name__}")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"lazytensor.{name}(input, other) is input.{name}(other); input may be a number."
    return fn


floor_divide = _number_first("floor_divide", _C.rfloor_divide)
remainder = _number_first("remainder", _C.rremainder)
bitwise_and = _number_first("bitwise_and", _C.bitwise_and)  # commutative
bitwise_or = _number_first("bitwise_or", _C.bitwise_or)
bitwise_xor = _number_first("bitwise_xor", _C.bitwise_xor)
bitwise_left_shift = _number_first("bitwise_left_shift", _C.rbitwise_left_shift)
bitwise_right_shift = _number_first("bitwise_right_shift", _C.rbitwise_right_shift)


def is_tensor(obj):
    return isinstance(obj, Tensor)


def _tensor_list(tensors, op):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' must be a tuple or list of Tensors, not "
                        f"{type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    return list(tensors)


def cat(tensors, dim=0, *, axis=None):
    """Concatenates along an existing dim (dtypes promote, as in PyTorch)."""
    ts = _tensor_list(tensors, "cat")
    out_dtype = _promoted(ts)
    return exact(lambda *xs: _C.cat(list(xs), dim if axis is None else axis), out_dtype, *ts)


def _promoted(ts):
    out = ts[0].dtype if ts else _C.float32
    for t in ts[1:]:
        out = _C.promote_types(out, t.dtype)
    return out


concat = concatenate = cat


def stack(tensors, dim=0):
    """Joins equally shaped tensors along a new dim."""
    ts = _tensor_list(tensors, "stack")
    return exact(lambda *xs: _C.stack(list(xs), dim), _promoted(ts), *ts)


def hstack(tensors):
    ts = _tensor_list(tensors, "hstack")
    return cat(ts, 0 if all(t.ndim == 1 for t in ts) else 1)


def vstack(tensors):
    ts = [t if t.ndim >= 2 else t.reshape(1, -1) for t in _tensor_list(tensors, "vstack")]
    return cat(ts, 0)


from_dlpack = _C.from_dlpack  # bindings/python/src/dlpack.cc

__all__ = _MIRRORED + ["where", "maximum", "minimum", "floor_divide", "remainder", "bitwise_and",
                       "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
                       "is_tensor", "cat", "concat", "concatenate",
                       "stack", "hstack", "vstack", "from_dlpack"]
