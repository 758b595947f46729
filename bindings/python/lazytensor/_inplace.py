"""The in-place methods of `lazytensor.Tensor` (add_, mul_, fill_, copy_, ...), installed onto
`_C.Tensor` with the rest of the Python API (`_tensor._install`). Each rebinds the tensor's value:
every reference to the tensor sees the change, and PyTorch's in-place cast rule applies
(Tensor::assign_result)."""
from . import _C
from ._utils import is_number, normalize_dim

Tensor = _C.Tensor


def _inplace_operator(self, other, method):
    if not (isinstance(other, Tensor) or is_number(other)):
        return NotImplemented
    return self._set(getattr(self, method)(other))


class _InPlaceMethods:
    def _set(self, value):
        self._assign_result(value)  # PyTorch's in-place cast rule (Tensor::assign_result)
        return self

    def add_(self, other, *, alpha=1):
        return self._set(self.add(other, alpha=alpha))

    def sub_(self, other, *, alpha=1):
        return self._set(self.sub(other, alpha=alpha))

    def mul_(self, other):
        return self._set(self.mul(other))

    def div_(self, other):
        return self._set(self.div(other))

    def pow_(self, exponent):
        return self._set(self.pow(exponent))

    def __ipow__(self, exponent):
        if not (isinstance(exponent, Tensor) or is_number(exponent)):
            return NotImplemented
        return self._set(self.pow(exponent))

    def floor_divide_(self, other):
        return self._set(self.floor_divide(other))

    def remainder_(self, other):
        return self._set(self.remainder(other))

    def fmod_(self, other):
        return self._set(self.fmod(other))

    def bitwise_and_(self, other):
        return self._set(self.bitwise_and(other))

    def bitwise_or_(self, other):
        return self._set(self.bitwise_or(other))

    def bitwise_xor_(self, other):
        return self._set(self.bitwise_xor(other))

    def bitwise_not_(self):
        return self._set(self.bitwise_not())

    def bitwise_left_shift_(self, other):
        return self._set(self.bitwise_left_shift(other))

    def bitwise_right_shift_(self, other):
        return self._set(self.bitwise_right_shift(other))

    # //=, %=, &=, |=, ^=, <<=, >>=: rebind this tensor (every reference sees the change), with
    # PyTorch's in-place cast rule (an int tensor //= 2.5 raises). Other operands: NotImplemented,
    # so Python tries the reflected operator.
    def __ifloordiv__(self, other):
        return _inplace_operator(self, other, "floor_divide")

    def __imod__(self, other):
        return _inplace_operator(self, other, "remainder")

    def __iand__(self, other):
        return _inplace_operator(self, other, "bitwise_and")

    def __ior__(self, other):
        return _inplace_operator(self, other, "bitwise_or")

    def __ixor__(self, other):
        return _inplace_operator(self, other, "bitwise_xor")

    def __ilshift__(self, other):
        return _inplace_operator(self, other, "bitwise_left_shift")

    def __irshift__(self, other):
        return _inplace_operator(self, other, "bitwise_right_shift")

    def clamp_(self, min=None, max=None):
        return self._set(self.clamp(min, max))

    def neg_(self):
        return self._set(self.neg())

    def abs_(self):
        return self._set(self.abs())

    def exp_(self):
        return self._set(self.exp())

    def log_(self):
        return self._set(self.log())

    def sqrt_(self):
        return self._set(self.sqrt())

    def sin_(self):
        return self._set(self.sin())

    def cos_(self):
        return self._set(self.cos())

    def tanh_(self):
        return self._set(self.tanh())

    def sigmoid_(self):
        return self._set(self.sigmoid())

    def relu_(self):
        return self._set(self.relu())

    def floor_(self):
        return self._set(self.floor())

    def zero_(self):
        return self._set(_C.zeros_like(self))

    def fill_(self, value):
        if isinstance(value, Tensor):
            return self._set(value.to(self.device).expand(self.shape))
        return self._set(_C.full_like(self, value))

    def copy_(self, src):
        """Copies src's values (broadcast to this shape, moved to this device, cast to this dtype)."""
        value = src.to(self.device).to(self.dtype).expand(self.shape)
        if self.device.type == "cpu":  # own memory: cpu memory can be written through t.numpy()
            value = value.clone()
        return self._set(value)

    def masked_fill_(self, mask, value):
        return self._set(self.masked_fill(mask, value))

    def scatter_add_(self, dim, index, src):
        return self._set(self.scatter_add(dim, index, src))

    def index_fill_(self, dim, index, value):
        idx = [slice(None)] * normalize_dim(dim, self.ndim) + [index]
        self[tuple(idx)] = value
        return self

    def tril_(self, diagonal=0):
        return self._set(self.tril(diagonal))

    def triu_(self, diagonal=0):
        return self._set(self.triu(diagonal))

    def cumsum_(self, dim):
        return self._set(self.cumsum(dim).to(self.dtype))
