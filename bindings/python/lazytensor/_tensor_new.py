"""Tensor methods that scripts use every day and PyTorch has on `torch.Tensor`: the `new_*`
constructors (a new tensor with this tensor's dtype and device), `type()` and `roll()`.

Installed onto `_C.Tensor` with the rest of the Python API (`_tensor._install`). Pure Python over
existing ops: roll is two narrows and a cat, so it traces like any movement op and has a gradient.
"""
import warnings

from . import _C
from . import _creation
from ._utils import as_dtype, is_number, normalize_dim, size_args

Tensor = _C.Tensor

# PyTorch's legacy tensor-type names ("torch.FloatTensor"), by dtype.
_TYPE_NAMES = {
    _C.float32: "FloatTensor",
    _C.float64: "DoubleTensor",
    _C.float16: "HalfTensor",
    _C.bfloat16: "BFloat16Tensor",
    _C.int64: "LongTensor",
    _C.int32: "IntTensor",
    _C.int8: "CharTensor",
    _C.uint8: "ByteTensor",
    _C.bool: "BoolTensor",
}
_DTYPES_BY_TYPE_NAME = {name: dtype for dtype, name in _TYPE_NAMES.items()}
# Device types a type string may name after "torch." ("torch.cuda.FloatTensor"); none means cpu.
_TYPE_STRING_DEVICES = ("cuda", "lazy")


def _type_string(t):
    """torch's spelling: "torch.FloatTensor" on the cpu, "torch.<device type>.FloatTensor" elsewhere
    (torch.cuda.FloatTensor; torch.lazy.FloatTensor, as PyTorch's own lazy tensors say)."""
    device_type = t.device.type
    prefix = "torch." if device_type == "cpu" else f"torch.{device_type}."
    return prefix + _TYPE_NAMES[t.dtype]


def _parse_type_string(name):
    """(device type, dtype) of "torch.LongTensor" / "torch.cuda.HalfTensor"; ValueError as torch."""
    parts = name.split(".")
    device_type = "cpu"
    if len(parts) == 3 and parts[0] == "torch" and parts[1] in _TYPE_STRING_DEVICES:
        device_type = parts[1]
        parts = [parts[0], parts[2]]
    if len(parts) != 2 or parts[0] != "torch" or parts[1] not in _DTYPES_BY_TYPE_NAME:
        raise ValueError(f"invalid type: {name!r}")
    return device_type, _DTYPES_BY_TYPE_NAME[parts[1]]


def _new_size(size, op):
    if not size:
        raise TypeError(f'{op}() missing 1 required positional arguments: "size"')
    return size_args(size)


def _new_options(t, dtype, device):
    """new_*'s dtype and device: the given ones, else t's."""
    return dict(dtype=as_dtype(dtype) or t.dtype, device=t.device if device is None else device)


def _shift_list(shifts):
    return [int(s) for s in shifts] if isinstance(shifts, (tuple, list)) else [int(shifts)]


def roll(input, shifts, dims=None):
    """Rolls `input` by `shifts` along `dims` (elements pushed past the end come back at the start);
    with dims=None the tensor is rolled flattened and then given its shape back, as torch.roll."""
    if not isinstance(input, Tensor):
        raise TypeError(f"roll(): argument 'input' must be Tensor, not {type(input).__name__}")
    shift_list = _shift_list(shifts)
    if not shift_list:
        raise RuntimeError("`shifts` required")
    if dims is None:
        if len(shift_list) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shift_list)}, "
                               "dims:0")
        return roll(input.reshape(-1), shift_list, [0]).reshape(list(input.shape))
    dim_list = [int(d) for d in dims] if isinstance(dims, (tuple, list)) else [int(dims)]
    if len(shift_list) != len(dim_list):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shift_list)}, "
                           f"dims:{len(dim_list)}")
    if input.ndim == 0:
        # normalize_dim lets a 0-d tensor take dim 0 or -1 (as most ops do); roll does not.
        raise IndexError(f"Dimension specified as {dim_list[0]} but tensor has no dimensions")
    out = input
    for shift, dim in zip(shift_list, dim_list):
        d = normalize_dim(dim, input.ndim)
        n = input.shape[d]
        if n == 0 or shift % n == 0:
            continue
        s = shift % n  # Python's % is non-negative: rolling by -k is rolling by n - k
        out = _C.cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    # Every shift a multiple of its size: still a new tensor, as torch.roll returns one.
    return out.clone() if out is input else out


class _NewTensorMethods:
    # ---- new_* constructors: dtype and device default to this tensor's ------------------------

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False, pin_memory=False):
        return _creation.zeros(_new_size(size, "new_zeros"), requires_grad=requires_grad,
                               **_new_options(self, dtype, device))

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False, pin_memory=False):
        return _creation.ones(_new_size(size, "new_ones"), requires_grad=requires_grad,
                              **_new_options(self, dtype, device))

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False, pin_memory=False):
        """Zero-filled, as lt.empty (the runtime has no uninitialized memory to hand out)."""
        return _creation.empty(_new_size(size, "new_empty"), requires_grad=requires_grad,
                               **_new_options(self, dtype, device))

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
                 pin_memory=False):
        """`fill_value` cast to this tensor's dtype (torch does not infer the dtype from the value
        here, unlike torch.full)."""
        if not isinstance(size, (tuple, list)):
            raise TypeError(f"new_full(): argument 'size' (position 1) must be tuple of ints, not "
                            f"{type(size).__name__}")
        if not (is_number(fill_value) or isinstance(fill_value, Tensor)):
            raise TypeError(f"new_full(): argument 'fill_value' must be a number, not "
                            f"{type(fill_value).__name__}")
        return _creation.full(list(size), fill_value, requires_grad=requires_grad,
                              **_new_options(self, dtype, device))

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False, pin_memory=False):
        """A copy of `data` with this tensor's dtype and device (not one inferred from data)."""
        if isinstance(data, Tensor):
            warnings.warn("To copy construct from a tensor, it is recommended to use "
                          "sourceTensor.detach().clone() or "
                          "sourceTensor.detach().clone().requires_grad_(True), rather than "
                          "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
        return _creation.tensor(data, requires_grad=requires_grad,
                                **_new_options(self, dtype, device))

    # ---- type ------------------------------------------------------------------------------------

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """With no argument: PyTorch's type string, "torch.FloatTensor" (cpu),
        "torch.cuda.FloatTensor", "torch.lazy.FloatTensor". The prefix is "torch." rather than
        "lazytensor." because scripts compare it with torch's strings (CONTRACT.md names no
        other).

        With a dtype or such a string: the cast (and, for a string, the move to the device type it
        names, as in PyTorch); this tensor itself when nothing changes."""
        if dtype is None:
            return _type_string(self)
        if isinstance(dtype, str):
            device_type, target = _parse_type_string(dtype)
            if device_type != self.device.type:
                return self.to(device_type).to(target)
        elif isinstance(dtype, _C.dtype):
            target = dtype
        else:
            raise TypeError("dtype must be a type, str, or dtype object")
        return self if target == self.dtype else self.to(target)

    # ---- movement --------------------------------------------------------------------------------

    def roll(self, shifts, dims=None):
        return roll(self, shifts, dims)
