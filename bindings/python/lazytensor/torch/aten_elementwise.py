"""Elementwise ops: arithmetic, comparisons, logic, unary math, activations. Entries of the aten
table (aten_table.py)."""
import operator

from .. import _C
from .aten_ops import TABLE, _cast, aten, op, prims


# ---- elementwise --------------------------------------------------------------------------------

@op(aten.add.Tensor, aten.add.Scalar)
def _add(cx, a, b, alpha=1):
    return a + (b if alpha == 1 else b * alpha)


@op(aten.sub.Tensor, aten.sub.Scalar)
def _sub(cx, a, b, alpha=1):
    return a - (b if alpha == 1 else b * alpha)


@op(aten.rsub.Tensor, aten.rsub.Scalar)
def _rsub(cx, a, b, alpha=1):
    return b - (a if alpha == 1 else a * alpha)


@op(aten.mul.Tensor, aten.mul.Scalar)
def _mul(cx, a, b):
    return a * b


@op(aten.div.Tensor, aten.div.Scalar)
def _div(cx, a, b):
    return a / b


@op(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(cx, a, b, rounding_mode=None):
    if rounding_mode is None:
        return a / b
    if rounding_mode == "floor" and a.dtype.is_floating_point:
        return (a / b).floor()
    raise NotImplementedError(f"not implemented: div(rounding_mode={rounding_mode!r}) on "
                              f"{a.dtype} in lazytensor")


@op(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)
def _pow(cx, a, b):
    return a.pow(b)


@op(aten.pow.Scalar)
def _rpow(cx, a, b):
    return _C.rpow(b, a)


@op(aten.maximum.default)
def _maximum(cx, a, b):
    return _C.maximum(a, b)


@op(aten.minimum.default)
def _minimum(cx, a, b):
    return _C.minimum(a, b)


for _name, _fn in (("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                   ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)):
    op(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar)(
        lambda cx, a, b, _fn=_fn: _fn(a, b))


def _bool_only(name, *xs):
    for x in xs:
        if not isinstance(x, bool) and getattr(x, "dtype", None) != _C.bool:
            raise NotImplementedError(f"not implemented: {name} of {getattr(x, 'dtype', type(x))} "
                                      f"in lazytensor (bool tensors only)")


@op(aten.logical_and.default, aten.bitwise_and.Tensor)
def _and(cx, a, b):
    _bool_only("bitwise_and", a, b)
    return _C.logical_and(a, b)


@op(aten.logical_or.default, aten.bitwise_or.Tensor)
def _or(cx, a, b):
    _bool_only("bitwise_or", a, b)
    return _C.logical_or(a, b)


@op(aten.logical_xor.default, aten.bitwise_xor.Tensor)
def _xor(cx, a, b):
    _bool_only("bitwise_xor", a, b)
    return a != b


@op(aten.logical_not.default, aten.bitwise_not.default)
def _not(cx, a):
    _bool_only("bitwise_not", a)
    return _C.logical_not(a)


@op(aten.where.self)
def _where(cx, c, a, b):
    return _C.where(c, a, b)


@op(aten.clamp.default, aten.clamp.Tensor)
def _clamp(cx, x, min=None, max=None):
    return x.clamp(min, max)


@op(aten.clamp_min.default)
def _clamp_min(cx, x, m):
    return x.clamp(m, None)


@op(aten.clamp_max.default)
def _clamp_max(cx, x, m):
    return x.clamp(None, m)


@op(aten.lerp.Scalar, aten.lerp.Tensor)
def _lerp(cx, start, end, weight):
    """start + weight * (end - start): Adam's first-moment update (torch.optim uses lerp_)."""
    return start + (end - start) * weight


@op(aten.addcmul.default)
def _addcmul(cx, x, a, b, *, value=1):
    return x + (a * b if value == 1 else a * b * value)


@op(aten.addcdiv.default)
def _addcdiv(cx, x, a, b, *, value=1):
    return x + (a / b if value == 1 else a / b * value)


def _fma(cx, a, b, c):
    return a * b + c


def register_inductor_prims():
    """prims.fma exists once torch._inductor's prims are imported (the backend does; importing
    them here would cost the `lazy` device's first op about a second)."""
    if hasattr(prims, "fma"):
        TABLE[prims.fma.default] = _fma


register_inductor_prims()


for _name in ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh",
              "sigmoid", "relu", "erf", "expm1", "floor"):
    op(getattr(aten, _name).default)(lambda cx, x, _name=_name: getattr(x, _name)())


@op(aten.sign.default)
def _sign(cx, x):
    # No sign op in lazytensor (abs's derivative needs it): (x > 0) - (x < 0) in x's dtype, which
    # gives torch's sign(nan) = 0 too; a bool is its own sign.
    if x.dtype == _C.bool:
        return x
    return _cast(x > 0, x.dtype) - _cast(x < 0, x.dtype)


@op(aten.gelu.default)
def _gelu(cx, x, approximate="none"):
    return _C.gelu(x, approximate)


@op(aten.silu.default)
def _silu(cx, x):
    return _C.silu(x)
