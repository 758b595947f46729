"""Samples of the aten table's elementwise ops (test_torch_aten_table.py runs them)."""
import torch

from aten_samples import F32, F64, S, samples

aten = torch.ops.aten
prims = torch.ops.prims


# ---- elementwise --------------------------------------------------------------------------------

@samples(aten.add.Tensor, aten.sub.Tensor, aten.rsub.Tensor)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.f(*r.broadcast(sh))),
            S(r.f(*sh), r.f(*sh), alpha=r.f().item()),
            S(r.f(*r.shape(2), dtype=F64), r.f(dtype=F64)),
            S(r.i(*sh), r.i(*r.broadcast(sh)), alpha=3),
            S(r.f(), r.f())]


@samples(aten.add.Scalar, aten.sub.Scalar, aten.rsub.Scalar)
def _(r, op):
    return [S(r.f(*r.shape(2)), r.f().item()),
            S(r.f(*r.shape(3)), r.f().item(), alpha=r.f().item()),
            S(r.i(*r.shape(2)), r.int(-5, 5)),
            S(r.f(dtype=F64), 1.5)]


@samples(aten.mul.Tensor)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.f(*r.broadcast(sh))), S(r.f(*sh, dtype=F64), r.f(*sh, dtype=F64)),
            S(r.i(*sh), r.i(*r.broadcast(sh))), S(r.f(*sh), r.i(*sh)), S(r.f(1), r.f())]


@samples(aten.mul.Scalar, aten.div.Scalar)
def _(r, op):
    return [S(r.f(*r.shape(2)), r.nonzero().item()), S(r.f(*r.shape(1), dtype=F64), -2.5),
            S(r.i(*r.shape(2)), 3)]


@samples(aten.div.Tensor)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.nonzero(*r.broadcast(sh))), S(r.f(*sh, dtype=F64), r.nonzero(dtype=F64)),
            # Integer true division gives floats.
            S(r.i(*sh), r.i(*sh, lo=1, hi=4) * torch.where(r.b(*sh), 1, -1))]


@samples(aten.div.Tensor_mode)
def _(r, op):
    sh = r.shape(2)
    return [S(r.f(*sh), r.nonzero(*sh), rounding_mode="floor"),
            S(r.f(*sh), r.nonzero(*sh), rounding_mode=None),
            S(r.f(*sh, dtype=F64), r.nonzero(dtype=F64), rounding_mode="floor")]


@samples(aten.div.Scalar_mode)
def _(r, op):
    return [S(r.f(*r.shape(2)) * 4, r.nonzero().item(), rounding_mode="floor"),
            S(r.f(*r.shape(3)), -1.5, rounding_mode=None)]


@samples(aten.pow.Tensor_Scalar)
def _(r, op):
    sh = r.shape(2)
    return [S(r.pos(*sh), r.f().item()), S(r.f(*sh), 2), S(r.f(*sh), 3.0), S(r.f(*sh), 0.5 * 0 + 1),
            S(r.pos(*sh, dtype=F64), -1.5), S(r.i(*sh), 2)]


@samples(aten.pow.Tensor_Tensor)
def _(r, op):
    sh = r.shape(3)
    return [S(r.pos(*sh), r.f(*r.broadcast(sh))), S(r.pos(*sh, dtype=F64), r.f(dtype=F64))]


@samples(aten.pow.Scalar)
def _(r, op):
    return [S(r.pos().item(), r.f(*r.shape(2))), S(2.0, r.f(*r.shape(3))), S(2, r.i(*r.shape(2), lo=0))]


@samples(aten.maximum.default, aten.minimum.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.f(*r.broadcast(sh))), S(r.f(*sh, dtype=F64), r.f(*sh, dtype=F64)),
            S(r.i(*sh), r.i(*sh))]


_CMP = ("eq", "ne", "lt", "le", "gt", "ge")


@samples(*(getattr(aten, n).Tensor for n in _CMP))
def _(r, op):
    sh = r.shape(3)
    a = r.i(*sh, lo=-2, hi=2).float()
    return [S(a, r.i(*r.broadcast(sh), lo=-2, hi=2).float()),  # float, with equal entries
            S(r.f(*sh, dtype=F64), r.f(*sh, dtype=F64)),
            S(r.i(*sh, lo=-2, hi=2), r.i(*r.broadcast(sh), lo=-2, hi=2)),
            S(r.b(*sh), r.b(*sh)),
            S(r.i(*sh, lo=-2, hi=2), r.f()),  # promoted to float
            S(r.f(), r.f())]


@samples(*(getattr(aten, n).Scalar for n in _CMP))
def _(r, op):
    sh = r.shape(2)
    return [S(r.i(*sh, lo=-2, hi=2).float(), 1.0), S(r.f(*sh), r.f().item()),
            S(r.i(*sh, lo=-2, hi=2), 0), S(r.i(*sh, lo=-2, hi=2), 0.5), S(r.f(dtype=F64), 0.25)]


@samples(aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default,
         aten.bitwise_and.Tensor, aten.bitwise_or.Tensor, aten.bitwise_xor.Tensor)
def _(r, op):
    sh = r.shape(3)
    return [S(r.b(*sh), r.b(*r.broadcast(sh))), S(r.b(), r.b(*sh)), S(r.b(1, 0), r.b(1))]


@samples(aten.logical_not.default, aten.bitwise_not.default)
def _(r, op):
    return [S(r.b(*r.shape(3))), S(r.b())]


@samples(aten.where.self)
def _(r, op):
    sh = r.shape(3)
    return [S(r.b(*sh), r.f(*r.broadcast(sh)), r.f(*r.broadcast(sh))),
            S(r.b(*r.broadcast(sh)), r.f(*sh, dtype=F64), r.f(dtype=F64)),
            S(r.b(*sh), r.i(*sh), r.i(*r.broadcast(sh))),
            S(r.b(*sh), r.b(*sh), r.b(*sh))]


@samples(aten.clamp.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), -0.5, 1.0), S(r.f(*sh), None, 0.3), S(r.f(*sh), -0.3), S(r.i(*sh), -2, 3),
            S(r.f(*sh, dtype=F64), -1.0, 0.5)]


@samples(aten.clamp.Tensor)
def _(r, op):
    sh = r.shape(3)
    lo = r.f(*r.broadcast(sh), lo=-2, hi=-0.1)
    return [S(r.f(*sh), lo, r.f(*r.broadcast(sh), lo=0.1, hi=2)), S(r.f(*sh), None, r.f(*sh)),
            S(r.f(*sh), lo), S(r.i(*sh), r.i(*sh, lo=-5, hi=-1), r.i(*sh, lo=1, hi=5))]


@samples(aten.clamp_min.default, aten.clamp_max.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.f().item()), S(r.f(*sh, dtype=F64), 0.0), S(r.i(*sh), 1)]


@samples(prims.fma.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.f(*sh), r.f(*sh)), S(r.f(*sh, dtype=F64), r.f(*sh, dtype=F64),
                                                 r.f(*sh, dtype=F64))]


@samples(aten.lerp.Scalar)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.f(*r.broadcast(sh)), 0.1), S(r.f(*sh, dtype=F64), r.f(*sh, dtype=F64), 0.75)]


@samples(aten.lerp.Tensor)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.f(*sh), r.f(*r.broadcast(sh))), S(r.f(*sh), r.f(*sh), r.f())]


@samples(aten.addcmul.default, aten.addcdiv.default)
def _(r, op):
    sh = r.shape(3)
    positive = r.f(*sh).abs() + 0.5  # a divisor away from zero
    return [S(r.f(*sh), r.f(*r.broadcast(sh)), positive), S(r.f(*sh), r.f(*sh), positive, value=-0.25),
            S(r.f(*sh, dtype=F64), r.f(*sh, dtype=F64), positive.double(), value=3)]


@samples(aten.sign.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.sparse(*sh)), S(r.sparse(*sh, dtype=F64)), S(r.i(*sh)), S(r.b(*sh)),
            S(torch.tensor([float("nan"), -0.0, 0.0, float("inf"), -2.0]))]


_UNARY = {"abs": "any", "neg": "any", "exp": "float", "log": "pos", "sqrt": "pos", "rsqrt": "pos",
          "reciprocal": "nonzero", "sin": "float", "cos": "float", "tanh": "float",
          "sigmoid": "float", "relu": "any", "erf": "float", "floor": "float", "expm1": "float"}


@samples(*(getattr(aten, n).default for n in _UNARY))
def _(r, op):
    domain = _UNARY[op.__name__.split(".")[0]]
    make = {"pos": r.pos, "nonzero": r.nonzero}.get(domain, lambda *s, dtype=F32: r.f(*s, dtype=dtype) * 3)
    out = [S(make(*r.shape(3))), S(make(*r.shape(1), dtype=F64)), S(make()), S(make(1, 0, 2))]
    if domain == "any":
        out.append(S(r.i(*r.shape(2))))
    return out


@samples(aten.gelu.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh) * 3), S(r.f(*sh) * 3, approximate="tanh"), S(r.f(*sh, dtype=F64) * 3)]


@samples(aten.silu.default)
def _(r, op):
    return [S(r.f(*r.shape(3)) * 3), S(r.f(*r.shape(2), dtype=F64) * 3), S(r.f())]
