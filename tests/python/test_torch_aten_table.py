"""The bridge's aten table (lazytensor/torch/aten_table.py) walked entry by entry against PyTorch
eager (torch 2.13, CPU) as the oracle.

Each aten overload in TABLE has samples here (random shapes up to 6 per dim, random values, the
dtypes the op takes). A sample calls the op itself inside a function compiled with
backend="lazytensor" (fullgraph, static shapes) and compares the result with the op called eagerly;
for float inputs that need gradients it also compares the gradients of (out * g).sum() for a
random g, which runs AOTAutograd's backward graph (the op's derivative, decomposed into other aten
ops of the table) through lazytensor too. Each sample must reach the op's builder (a spy counts
the calls) and must not fall back to PyTorch. Argument combinations a builder declares unsupported
(NotImplementedError) are checked separately: PyTorch's result through the fallback, counted.

Entries that are not aten ops (operator.*, math.*, getitem) and the size queries (sym_size,
sym_numel) run inside every graph with sizes and are not sampled one by one."""
import math
import operator
import zlib

import pytest
import torch

import lazytensor as lt
import lazytensor.torch  # noqa: F401  (registers the backend)
import lazytensor.torch.backend  # noqa: F401  (loads Dynamo and Inductor's prims, e.g. prims.fma)
from lazytensor.torch.aten_table import TABLE
from lazytensor.torch.graph_program import LazyGraph

aten = torch.ops.aten
prims = torch.ops.prims
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# Exercised by every graph that does size arithmetic; not sampled one by one.
IMPLICIT = {aten.sym_size.int, aten.sym_numel.default}
# Ops torch rewrites before a torch.compile backend sees them in these samples (reshape is
# CompositeImplicitAutograd: view/_unsafe_view by then; Dynamo drops lift_fresh_copy of an input).
# Their builders also run on a one-node FX graph handed to the backend's graph runner directly.
REWRITTEN = {aten.reshape.default, aten.lift_fresh_copy.default}

F32 = torch.float32
F64 = torch.float64
I64 = torch.int64
BOOL = torch.bool
TOL = {F32: (1e-5, 1e-5), F64: (1e-10, 1e-12)}
GRAD_TOL = {F32: (1e-4, 1e-5), F64: (1e-9, 1e-11)}


class S:
    """One sample: the op's positional and keyword arguments.

    grad: True (every floating-point tensor argument needs a gradient), False, or the positions
      of the arguments that need one.
    fn: what is compiled instead of calling the op (creation ops: the op's result added to an
      input, so the graph has one).
    check: "close" (values), "meta" (shape and dtype only: `empty` and friends), or a callable
      (compiled output, compiled args) for random ops.
    tol / grad_tol: (rtol, atol) for float32 where the default 1e-5 is too tight for the op's
      summation order.
    ref: what eager runs instead of `fn` (lazytensor's own custom ops: PyTorch's op they stand for).
    """

    def __init__(self, *args, grad=True, fn=None, check="close", tol=None, grad_tol=None,
                 ref=None, **kwargs):
        self.args, self.kwargs = args, kwargs
        self.grad, self.fn, self.check, self.ref = grad, fn, check, ref
        self.tol, self.grad_tol = tol, grad_tol


class Rand:
    """Random inputs from a generator seeded by the op's name."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def int(self, lo, hi):  # lo <= n <= hi
        return int(torch.randint(lo, hi + 1, (), generator=self.g))

    def shape(self, nd, lo=1, hi=6):
        return [self.int(lo, hi) for _ in range(nd)]

    def f(self, *shape, dtype=F32, lo=-2.0, hi=2.0):
        return (torch.rand(shape, generator=self.g, dtype=F64) * (hi - lo) + lo).to(dtype)

    def pos(self, *shape, dtype=F32):
        return self.f(*shape, dtype=dtype, lo=0.5, hi=3.0)

    def nonzero(self, *shape, dtype=F32):  # away from 0, either sign
        sign = torch.where(self.b(*shape), 1.0, -1.0).to(dtype)
        return self.pos(*shape, dtype=dtype) * sign

    def i(self, *shape, lo=-5, hi=5, dtype=I64):
        return torch.randint(lo, hi + 1, shape, generator=self.g).to(dtype)

    def b(self, *shape):
        return torch.rand(shape, generator=self.g) < 0.5

    def sparse(self, *shape, dtype=F32):  # about half the entries exactly zero
        return self.f(*shape, dtype=dtype) * self.b(*shape)

    def perm(self, n):
        return torch.randperm(n, generator=self.g)

    def broadcast(self, shape):
        """A shape that broadcasts to `shape`: some dims 1, maybe fewer leading dims."""
        out = [1 if self.int(0, 2) == 0 else s for s in shape]
        return out[self.int(0, len(out)):] if out else out


SAMPLES = {}


def samples(*ops):
    def register(fn):
        for o in ops:
            assert o not in SAMPLES, o
            SAMPLES[o] = fn
        return fn
    return register


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
          "sigmoid": "float", "relu": "any", "erf": "float", "floor": "float"}


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


# ---- reductions ---------------------------------------------------------------------------------

@samples(aten.sum.dim_IntList)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), [1]), S(r.f(*sh), [0, -1], True), S(r.f(*sh), [], dtype=F64),
            S(r.f(*sh, dtype=F64), [2]), S(r.i(*sh), [0, 2]), S(r.b(*sh), [1], True),
            S(r.i(*sh, dtype=torch.int32), [-1]), S(r.f(1, 0, 3), [1])]


@samples(aten.sum.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh)), S(r.f(*sh, dtype=F64)), S(r.i(*sh)), S(r.b(*sh)),
            S(r.i(*sh, dtype=torch.int32)), S(r.f(*sh), dtype=F64), S(r.f())]


@samples(aten.mean.dim)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), [1]), S(r.f(*sh), [0, -1], True), S(r.f(*sh, dtype=F64), [2]),
            S(r.f(*sh), [-2], dtype=F64)]


@samples(aten.mean.default)
def _(r, op):
    return [S(r.f(*r.shape(3))), S(r.f(*r.shape(2), dtype=F64)), S(r.f())]


@samples(aten.amax.default, aten.amin.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), [1]), S(r.f(*sh), [0, 2], True), S(r.f(*sh)), S(r.f(*sh, dtype=F64), [-1]),
            S(r.i(*sh), [0])]


def _unique(r, *shape, dtype=F32):
    """Distinct values (no ties for arg-reductions and max/min with indices)."""
    n = math.prod(shape)
    return (r.perm(n).to(dtype) - n / 2).reshape(shape) / (1 if dtype == I64 else 3)


@samples(aten.argmax.default, aten.argmin.default)
def _(r, op):
    sh = r.shape(3)
    return [S(_unique(r, *sh)), S(_unique(r, *sh), 1), S(_unique(r, *sh), -1, True),
            S(_unique(r, *sh, dtype=I64), 0), S(_unique(r, *sh, dtype=F64))]


@samples(aten.max.dim, aten.min.dim)
def _(r, op):
    sh = r.shape(3)
    return [S(_unique(r, *sh), 1), S(_unique(r, *sh), -1, True), S(_unique(r, *sh, dtype=F64), 0),
            S(_unique(r, *sh, dtype=I64), 2)]


@samples(aten.max.default, aten.min.default)
def _(r, op):
    sh = r.shape(3)
    return [S(_unique(r, *sh)), S(_unique(r, *sh, dtype=F64)), S(_unique(r, *sh, dtype=I64)),
            S(r.b(*sh)), S(r.f())]


@samples(aten.isnan.default)
def _(r, op):
    sh = r.shape(3)
    x = r.f(*sh)
    x.view(-1)[::3] = float("nan")
    return [S(x, grad=False), S(r.f(*sh, dtype=F64), grad=False), S(r.i(*sh), grad=False)]


@samples(aten.log1p.default, prims.log1p.default)
def _(r, op):
    sh = r.shape(3)
    tiny = r.f(*sh, lo=-1e-6, hi=1e-6)  # where log(1 + x) alone would lose every digit
    return [S(r.f(*sh, lo=-0.9, hi=3.0)), S(r.f(*sh, dtype=F64, lo=-0.9, hi=3.0)), S(tiny),
            S(r.i(*sh, lo=0, hi=5), grad=False)] if op is aten.log1p.default else \
        [S(r.f(*sh, lo=-0.9, hi=3.0), grad=False), S(tiny, grad=False)]  # prims: no autograd


def _multinomial_check(num_samples, replacement):
    def check(out, args):
        probs = args[0]
        assert out.shape == probs.shape[:-1] + (num_samples,) and out.dtype == I64
        assert bool(((out >= 0) & (out < probs.shape[-1])).all())
        picked = torch.gather(probs, -1, out.cpu())
        assert bool((picked > 0).all())  # never an index of weight 0
        if not replacement:
            assert all(len(set(row)) == num_samples for row in out.reshape(-1, num_samples).tolist())
    return check


@samples(aten.multinomial.default)
def _(r, op):
    w = r.pos(4, 7)
    w[:, 2] = 0  # a zero weight is never drawn
    return [S(w, 3, check=_multinomial_check(3, False), grad=False),
            S(w, 5, True, check=_multinomial_check(5, True), grad=False),
            S(r.pos(9, dtype=F64), 2, check=_multinomial_check(2, False), grad=False)]


@samples(aten.any.dim)
def _(r, op):
    sh = r.shape(3)
    return [S(r.b(*sh), 1), S(r.sparse(*sh), -1, True), S(r.i(*sh, lo=0, hi=1), 0)]


@samples(aten.any.dims)
def _(r, op):
    sh = r.shape(3)
    return [S(r.b(*sh), [0, 2]), S(r.sparse(*sh), [-1], True), S(r.b(*sh), None)]


@samples(aten.any.default)
def _(r, op):
    sh = r.shape(2)
    return [S(r.b(*sh)), S(r.sparse(*sh)), S(torch.zeros(sh, dtype=BOOL)), S(r.i(*sh, lo=0, hi=1))]


@samples(aten.var.correction)
def _(r, op):
    sh = r.shape(3, lo=2)
    return [S(r.f(*sh), [1]), S(r.f(*sh), [0, 2], correction=0, keepdim=True),
            S(r.f(*sh), None, correction=2), S(r.f(*sh, dtype=F64), [-1], correction=1),
            S(r.f(*sh))]


@samples(aten.cumsum.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), 1), S(r.f(*sh), -1), S(r.f(*sh, dtype=F64), 0), S(r.i(*sh), 2),
            S(r.b(*sh), 1), S(r.f(*sh), 0, dtype=F64), S(r.f(), 0)]


@samples(aten._softmax.default, aten._log_softmax.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh) * 3, -1, False), S(r.f(*sh) * 3, 0, False),
            S(r.f(*sh, dtype=F64) * 3, 1, False), S(r.f(), 0, False)]


# ---- normalization ------------------------------------------------------------------------------

@samples(aten.native_layer_norm.default)
def _(r, op):
    sh = r.shape(3, lo=2)
    return [S(r.f(*sh), sh[-1:], r.f(sh[-1]), r.f(sh[-1]), 1e-5),
            S(r.f(*sh), sh[-2:], r.f(*sh[-2:]), None, 1e-3),
            S(r.f(*sh), sh[-1:], None, None, 1e-5),
            S(r.f(*sh, dtype=F64), sh[-1:], r.f(sh[-1], dtype=F64), r.f(sh[-1], dtype=F64), 1e-5)]


def _bn_args(r, dtype=F32, nd=4):
    sh = [r.int(2, 4)] + r.shape(nd - 1)
    c = sh[1]
    return (r.f(*sh, dtype=dtype), r.f(c, dtype=dtype), r.f(c, dtype=dtype), r.f(c, dtype=dtype),
            r.pos(c, dtype=dtype))


@samples(aten._native_batch_norm_legit_functional.default)
def _(r, op):
    # The running statistics need no gradient (they are buffers).
    x, w, b, rm, rv = _bn_args(r)
    x3, w3, b3, rm3, rv3 = _bn_args(r, nd=3)
    x64, w64, b64, rm64, rv64 = _bn_args(r, F64)
    return [S(x, w, b, rm, rv, True, 0.1, 1e-5, grad=[0, 1, 2]),
            S(x3, None, None, rm3, rv3, True, 0.3, 1e-3, grad=[0]),
            S(x64, w64, b64, rm64, rv64, True, 0.1, 1e-5, grad=[0, 1, 2]),
            S(x, w, b, rm, rv, False, 0.1, 1e-5, grad=[0, 1, 2])]


@samples(aten._native_batch_norm_legit_no_training.default)
def _(r, op):
    x, w, b, rm, rv = _bn_args(r)
    x3, w3, b3, rm3, rv3 = _bn_args(r, nd=3)
    return [S(x, w, b, rm, rv, 0.1, 1e-5, grad=[0, 1, 2]),
            S(x3, None, None, rm3, rv3, 0.1, 1e-3, grad=[0])]


# ---- matmul and convolution ---------------------------------------------------------------------

@samples(aten.mm.default)
def _(r, op):
    m, k, n = r.shape(3)
    return [S(r.f(m, k), r.f(k, n)), S(r.f(m, k, dtype=F64), r.f(k, n, dtype=F64)),
            S(r.f(1, k), r.f(k, 1))]


@samples(aten.bmm.default)
def _(r, op):
    b, m, k, n = r.shape(4)
    return [S(r.f(b, m, k), r.f(b, k, n)), S(r.f(b, m, k, dtype=F64), r.f(b, k, n, dtype=F64))]


@samples(aten.addmm.default)
def _(r, op):
    m, k, n = r.shape(3)
    return [S(r.f(n), r.f(m, k), r.f(k, n)), S(r.f(m, n), r.f(m, k), r.f(k, n), beta=0.5, alpha=-2),
            S(r.f(1, n, dtype=F64), r.f(m, k, dtype=F64), r.f(k, n, dtype=F64), alpha=3)]


def _conv_cases(r):
    """(x, w, bias, stride, padding, dilation, groups): 2-d and 1-d, groups, strides, dilation."""
    n = r.int(1, 2)
    return [
        (r.f(n, 4, 7, 6), r.f(6, 2, 3, 2), r.f(6), [2, 1], [1, 0], [1, 2], 2),
        (r.f(n, 3, 5, 5), r.f(4, 3, 3, 3), None, [1, 1], [1, 1], [1, 1], 1),
        (r.f(n, 2, 6, 5), r.f(3, 2, 1, 1), r.f(3), [1, 2], [0, 0], [1, 1], 1),
        (r.f(n, 3, 9), r.f(4, 3, 3), r.f(4), [2], [1], [2], 1),
        (r.f(n, 4, 6, dtype=F64), r.f(4, 1, 3, dtype=F64), None, [1], [2], [1], 4),
    ]


@samples(aten.convolution.default)
def _(r, op):
    return [S(x, w, b, s, p, d, False, [0] * len(s), g, tol=(1e-4, 1e-5))
            for x, w, b, s, p, d, g in _conv_cases(r)]


@samples(aten.convolution_backward.default)
def _(r, op):
    out = []
    for (x, w, b, s, p, d, g), mask in zip(_conv_cases(r), ([True, True, True], [True, False, False],
                                                          [False, True, True], [True, True, False],
                                                          [True, True, True])):
        y = aten.convolution(x, w, b, s, p, d, False, [0] * len(s), g)
        bias_sizes = [w.shape[0]]  # torch passes the bias size, with a bias or without
        out.append(S(r.f(*y.shape, dtype=x.dtype), x, w, bias_sizes, s, p, d, False, [0] * len(s),
                     g, mask, grad=False, tol=(1e-4, 1e-5)))
    return out


# ---- pooling ------------------------------------------------------------------------------------

def _pool_cases(r):
    """(x, kernel, stride, padding, dilation, ceil_mode) for max_pool2d."""
    return [(r.f(2, 3, 6, 5), [2, 2], [2, 2], [0, 0], [1, 1], False),
            (r.f(1, 2, 7, 6), [3, 2], [2, 1], [1, 1], [1, 1], True),
            (r.f(3, 6, 6), [3, 3], [2, 2], [1, 0], [2, 1], False),
            (r.f(1, 1, 5, 5, dtype=F64), [2, 3], [], [0, 1], [1, 1], True),
            (r.f(2, 1, 4, 4), [2, 2], [1, 1], [0, 0], [1, 1], False)]


def _pool_samples(forward, backward, cases, backward_args):
    """A pooling op's samples (`cases`) and its backward op's on the same cases, whose arguments
    `backward_args(grad_out, case, forward's result)` makes."""
    samples(forward)(lambda r, op: [S(*c) for c in cases(r)])

    def backward_samples(r, op):
        out = []
        for c in cases(r):
            y = forward(*c)
            g = r.f(*_flat(y)[0].shape, dtype=c[0].dtype)
            out.append(S(*backward_args(g, c, y), grad=False))
        return out
    samples(backward)(backward_samples)


_pool_samples(aten.max_pool2d_with_indices.default, aten.max_pool2d_with_indices_backward.default,
              _pool_cases, lambda g, c, y: (g, c[0], c[1], c[2] or c[1], *c[3:], y[1]))


def _avg_cases(r):
    """(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)."""
    return [(r.f(2, 3, 6, 5), [2, 2], [2, 2], [0, 0], False, True, None),
            (r.f(1, 2, 7, 6), [3, 2], [2, 1], [1, 1], True, False, None),
            (r.f(3, 6, 6), [3, 3], [2, 2], [1, 0], False, True, None),
            (r.f(1, 2, 5, 5, dtype=F64), [2, 3], [1, 2], [1, 1], True, True, None),
            (r.f(2, 2, 5, 4), [2, 2], [1, 1], [1, 0], False, True, 3)]


_pool_samples(aten.avg_pool2d.default, aten.avg_pool2d_backward.default, _avg_cases,
              lambda g, c, y: (g, *c))


def _adaptive_cases(r):
    # Output sizes that divide the input's (lazytensor's adaptive pooling; others fall back).
    return [(r.f(2, 3, 6, 4), [3, 2]), (r.f(1, 2, 7, 5), [1, 1]), (r.f(3, 5, 6), [5, 3]),
            (r.f(1, 2, 4, 6, dtype=F64), [2, 3]), (r.f(1, 2, 4, 5), [4, 5])]


_pool_samples(aten._adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d_backward.default,
              _adaptive_cases, lambda g, c, y: (g, c[0]))


# ---- attention ----------------------------------------------------------------------------------

def _attn_cases(r):
    """(q, k, v, is_causal, attn_mask, scale)."""
    b, h = r.int(1, 2), r.int(1, 3)
    L, S_, E = r.int(2, 5), r.int(2, 6), r.int(2, 6)  # the flash op takes one head size
    qkv = lambda dtype=F32: (r.f(b, h, L, E, dtype=dtype), r.f(b, h, S_, E, dtype=dtype),  # noqa
                             r.f(b, h, S_, E, dtype=dtype))
    # (The flash op takes a float mask of q's dtype only; a bool mask is made float before.)
    return [(*qkv(), False, None, None),
            (*qkv(), True, None, None),
            (*qkv(), False, r.f(b, 1, L, S_), 0.3),
            (*qkv(F64), False, None, None)]


@samples(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _(r, op):
    return [S(q, k, v, 0.0, causal, attn_mask=m, scale=s, grad=[0, 1, 2], tol=(1e-4, 1e-5))
            for q, k, v, causal, m, s in _attn_cases(r)]


@samples(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _(r, op):
    out = []
    for q, k, v, causal, m, s in _attn_cases(r):
        o, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal,
                                                                   attn_mask=m, scale=s)
        out.append(S(r.f(*o.shape, dtype=o.dtype), q, k, v, o, lse, 0.0, causal, attn_mask=m,
                     scale=s, grad=False, tol=(1e-4, 1e-5)))
    return out


def _lt_attn_cases(r):
    """(q, k, v, attn_mask, is_causal, scale) for lazytensor::sdpa, which takes what
    F.scaled_dot_product_attention takes: also bool masks and a head size of v of its own."""
    b, h, L, S_, E, Ev = r.int(1, 2), r.int(1, 3), *r.shape(4, lo=2)
    keep = r.b(L, S_)
    keep[:, 0] = True  # every query keeps a key (an all-masked row is NaN in both)
    qkv = lambda dtype=F32: (r.f(b, h, L, E, dtype=dtype), r.f(b, h, S_, E, dtype=dtype),  # noqa
                             r.f(b, h, S_, Ev, dtype=dtype))
    return [(*qkv(), None, False, None), (*qkv(), None, True, 0.5), (*qkv(), keep, False, None),
            (*qkv(), r.f(b, 1, L, S_), False, None), (*qkv(F64), None, False, None)]


def _torch_sdpa(q, k, v, attn_mask, is_causal, scale):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal,
                                                            scale=scale)


def _torch_sdpa_backward(grad, q, k, v, attn_mask, is_causal, scale):
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with torch.enable_grad():
        return torch.autograd.grad(_torch_sdpa(*leaves, attn_mask, is_causal, scale), leaves, grad)


# lazytensor/torch/attention.py's custom ops, sampled once the table has them.
if hasattr(torch.ops.lazytensor, "sdpa") and torch.ops.lazytensor.sdpa.default in TABLE:
    @samples(torch.ops.lazytensor.sdpa.default)
    def _(r, op):
        return [S(*c, grad=[0, 1, 2], tol=(1e-4, 1e-5), ref=_torch_sdpa) for c in _lt_attn_cases(r)]

    @samples(torch.ops.lazytensor.sdpa_backward.default)
    def _(r, op):
        return [S(r.f(*q.shape[:-1], v.shape[-1], dtype=q.dtype), q, k, v, *rest, grad=False,
                  tol=(1e-4, 1e-5), ref=_torch_sdpa_backward) for q, k, v, *rest in _lt_attn_cases(r)]


# ---- indexing -----------------------------------------------------------------------------------

@samples(aten.embedding.default)
def _(r, op):
    n, d = r.int(3, 6), r.int(1, 5)
    return [S(r.f(n, d), r.i(*r.shape(2), lo=0, hi=n - 1)),
            S(r.f(n, d), r.i(r.int(1, 6), lo=0, hi=n - 1), 1),  # padding_idx: no gradient there
            S(r.f(n, d, dtype=F64), r.i(lo=0, hi=n - 1))]


@samples(aten.embedding_dense_backward.default)
def _(r, op):
    n, d = r.int(3, 6), r.int(1, 5)
    idx = r.i(*r.shape(2), lo=0, hi=n - 1)
    idx1 = r.i(r.int(1, 6), lo=0, hi=n - 1)
    return [S(r.f(*idx.shape, d), idx, n, -1, False),
            S(r.f(*idx1.shape, d), idx1, n, int(idx1[0]), False),
            S(r.f(*idx.shape, d, dtype=F64), idx, n, -1, False)]


@samples(aten.index_select.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), 1, r.i(r.int(1, 7), lo=0, hi=sh[1] - 1)),
            S(r.f(*sh), -1, r.i(lo=0, hi=sh[2] - 1)),
            S(r.i(*sh), 0, r.i(r.int(1, 4), lo=0, hi=sh[0] - 1)),
            S(r.b(*sh), 2, r.i(2, lo=0, hi=sh[2] - 1)),
            S(r.f(*sh, dtype=F64), 0, r.i(r.int(1, 7), lo=0, hi=sh[0] - 1))]


@samples(aten.gather.default)
def _(r, op):
    sh = r.shape(3)
    idx_sh = [s if d == 1 else r.int(1, s) for d, s in enumerate(sh)]
    idx_sh[1] = r.int(1, 6)
    return [S(r.f(*sh), 1, r.i(*idx_sh, lo=0, hi=sh[1] - 1)),
            S(r.f(*sh, dtype=F64), -1, r.i(*sh[:2], 2, lo=0, hi=sh[2] - 1)),
            S(r.i(*sh), 0, r.i(3, *sh[1:], lo=0, hi=sh[0] - 1))]


def _scatter_index(r, shape, dim, idx_shape):
    """Distinct positions along `dim` per line (scatter's defined case): a random permutation's
    first idx_shape[dim] entries for each line."""
    moved = list(idx_shape)
    n = moved.pop(dim)
    lines = math.prod(moved)
    rows = torch.stack([r.perm(shape[dim])[:n] for _ in range(lines)]) if lines else \
        torch.zeros(0, n, dtype=I64)
    return rows.reshape(moved + [n]).movedim(-1, dim).contiguous()


@samples(aten.scatter_add.default)
def _(r, op):
    sh = r.shape(3)
    idx_sh = [r.int(1, s) for s in sh]
    idx_sh[1] = r.int(1, 7)  # duplicates along dim 1: they add up
    # A src larger than the index: torch's own derivative for src is only defined when they match.
    return [S(r.f(*sh), 1, r.i(*idx_sh, lo=0, hi=sh[1] - 1), r.f(*idx_sh[:2], sh[2] + 1), grad=[0]),
            S(r.f(*sh), 1, r.i(*idx_sh, lo=0, hi=sh[1] - 1), r.f(*idx_sh)),
            S(r.f(*sh, dtype=F64), -1, r.i(*sh, lo=0, hi=sh[2] - 1), r.f(*sh, dtype=F64)),
            S(r.i(*sh), 0, r.i(*sh, lo=0, hi=sh[0] - 1), r.i(*sh))]


@samples(aten.scatter.src)
def _(r, op):
    sh = r.shape(3)
    idx_sh = [r.int(1, s) for s in sh]
    idx2 = list(sh)
    idx2[2] = r.int(1, sh[2])
    return [S(r.f(*sh), 1, _scatter_index(r, sh, 1, idx_sh), r.f(*idx_sh[:2], sh[2] + 1), grad=[0]),
            S(r.f(*sh), 1, _scatter_index(r, sh, 1, idx_sh), r.f(*idx_sh)),
            S(r.f(*sh, dtype=F64), -1, _scatter_index(r, sh, 2, idx2), r.f(*idx2, dtype=F64)),
            S(r.i(*sh), 0, _scatter_index(r, sh, 0, sh), r.i(*sh))]


@samples(aten.scatter.value)
def _(r, op):
    sh = r.shape(3)
    idx_sh = [r.int(1, s) for s in sh]
    return [S(r.f(*sh), 1, _scatter_index(r, sh, 1, idx_sh), r.f().item()),
            S(r.i(*sh), -1, _scatter_index(r, sh, 2, idx_sh), 7),
            S(r.f(*sh, dtype=F64), 0, _scatter_index(r, sh, 0, idx_sh), -2.5)]


@samples(aten.index.Tensor)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), [r.i(*r.shape(2), lo=0, hi=sh[0] - 1)]),
            S(r.f(*sh), [r.i(r.int(1, 6), lo=-sh[0], hi=sh[0] - 1)]),  # negative indices count back
            S(r.i(*sh), [r.i(lo=0, hi=sh[0] - 1)]),
            S(r.f(*sh, dtype=F64), [r.i(4, lo=0, hi=sh[0] - 1)]),
            S(r.f(*sh), [None, r.i(*r.shape(2), lo=-sh[1], hi=sh[1] - 1)]),  # x[:, i]
            S(r.b(*sh), [None, None, r.i(r.int(1, 6), lo=0, hi=sh[2] - 1)])]


@samples(aten.index_put.default)
def _(r, op):
    sh = r.shape(3)
    n = r.int(1, sh[0])
    uniq = r.perm(sh[0])[:n]
    dup = r.i(r.int(1, 7), lo=0, hi=sh[0] - 1)
    return [S(r.f(*sh), [uniq], r.f(n, *sh[1:])),
            S(r.f(*sh), [dup], r.f(*dup.shape, *sh[1:]), True),
            S(r.f(*sh), [uniq], r.f(sh[2])),  # values broadcast over the indexed rows
            S(r.f(*sh), [dup], r.f(), True),
            S(r.i(*sh), [dup], r.i(*dup.shape, *sh[1:]), True),
            S(r.f(*sh, dtype=F64), [uniq], r.f(n, *sh[1:], dtype=F64), False),
            S(r.f(*sh), [uniq - sh[0]], r.f(n, *sh[1:])),  # negative indices count back
            S(r.f(*sh), [None, dup], r.f(sh[0], *dup.shape, sh[2]), True),  # x[:, i] += v
            S(r.f(*sh), [None, None, r.perm(sh[2])[:2]], r.f(sh[0], 1, 1))]


# ---- movement -----------------------------------------------------------------------------------

@samples(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _(r, op):
    a, b, c = r.shape(3)
    return [S(r.f(a, b, c), [a * b, c]), S(r.f(a, b, c), [-1]), S(r.f(a, b * c), [a, 1, b, c]),
            S(r.i(a, b, c), [c, -1]), S(r.f(), [1, 1]), S(r.f(1), []),
            S(r.f(a, b, c, dtype=F64), [a, b * c])]


@samples(aten.permute.default)
def _(r, op):
    sh = r.shape(4)
    return [S(r.f(*sh), [2, 0, 3, 1]), S(r.f(*sh[:2]), [1, 0]), S(r.i(*sh[:3]), [0, -1, 1]),
            S(r.f(*sh, dtype=F64), [3, 2, 1, 0])]


@samples(aten.expand.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*r.broadcast(sh)), sh), S(r.f(1, sh[1]), [r.int(1, 4), sh[0], -1]),
            S(r.f(), sh), S(r.i(sh[0], 1), [-1, sh[1]]), S(r.f(sh[0], 1, dtype=F64), [sh[0], 3])]


@samples(aten.unsqueeze.default)
def _(r, op):
    sh = r.shape(2)
    return [S(r.f(*sh), 0), S(r.f(*sh), -1), S(r.f(*sh), 1), S(r.f(), 0), S(r.i(*sh), 2)]


@samples(aten.squeeze.dim)
def _(r, op):
    a, b = r.shape(2, lo=2)
    return [S(r.f(a, 1, b), 1), S(r.f(a, 1, b), -1), S(r.f(1), 0), S(r.i(1, a), 0)]


@samples(aten.squeeze.dims)
def _(r, op):
    a, b = r.shape(2, lo=2)
    return [S(r.f(1, a, 1, b), [0, 2]), S(r.f(1, a, 1, b), [-2, 1]), S(r.f(a, 1), [])]


@samples(aten.squeeze.default)
def _(r, op):
    a, b = r.shape(2, lo=2)
    return [S(r.f(1, a, 1, b)), S(r.f(a, b)), S(r.f(1, 1)), S(r.i(a, 1))]


@samples(aten.slice.Tensor)
def _(r, op):
    sh = r.shape(3, lo=2)
    return [S(r.f(*sh), 1, 1, sh[1]), S(r.f(*sh), 0, 0, 2 ** 63 - 1, 2), S(r.f(*sh), -1, -2),
            S(r.f(*sh), 2, -100, -1), S(r.f(*sh), 1, 1, 100, 3), S(r.f(*sh), 0, 1, 1),
            S(r.i(*sh), 2, 0, 1), S(r.f(*sh, dtype=F64), 1, None, None, 2)]


@samples(aten.select.int)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), 1, r.int(0, sh[1] - 1)), S(r.f(*sh), -1, -1), S(r.f(*sh), 0, -sh[0]),
            S(r.i(*sh), 2, 0), S(r.f(sh[0]), 0, r.int(0, sh[0] - 1))]


@samples(aten.cat.default)
def _(r, op):
    a, b = r.shape(2)
    return [S([r.f(a, b), r.f(r.int(1, 4), b)]), S([r.f(a, b), r.f(a, 3), r.f(a, 1)], -1),
            S([r.f(a, b), r.f(0), r.f(2, b)], 0),  # a 1-d empty tensor is skipped, as torch does
            S([r.i(a, b), r.i(a, b)], 1), S([r.f(a, b, dtype=F64)], 0)]


@samples(aten.split_with_sizes.default)
def _(r, op):
    sh = r.shape(2, lo=3)
    return [S(r.f(*sh), [1, sh[0] - 1]), S(r.f(*sh), [sh[1] - 2, 0, 2], -1),
            S(r.i(*sh), [sh[0]], 0)]


@samples(aten.split.Tensor)
def _(r, op):
    sh = r.shape(2, lo=3)
    return [S(r.f(*sh), 2), S(r.f(*sh), 2, -1), S(r.f(*sh), sh[0] + 1),
            S(r.i(*sh), 1, 1)]


@samples(aten.transpose.int)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), 0, 2), S(r.f(*sh), -1, -2), S(r.f(*sh), 1, 1), S(r.i(*sh[:2]), 0, 1)]


@samples(aten.t.default)
def _(r, op):
    return [S(r.f(*r.shape(2))), S(r.f(r.int(1, 6))), S(r.f()), S(r.i(*r.shape(2)))]


@samples(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh)), S(r.i(*sh)), S(r.b(*sh)), S(r.f(dtype=F64))]


@samples(aten._to_copy.default)
def _(r, op):
    sh = r.shape(3)
    x = r.f(*sh) * 4
    return [S(x, dtype=F64), S(x, dtype=I64), S(x * r.b(*sh), dtype=BOOL),
            S(r.i(*sh), dtype=F32), S(r.b(*sh), dtype=F32), S(r.f(*sh, dtype=F64), dtype=F32),
            S(r.i(*sh, lo=-300, hi=300), dtype=torch.int32), S(x), S(x, dtype=F32, device="cpu")]


@samples(aten.copy.default)
def _(r, op):
    sh = r.shape(3)
    # No gradients: torch defines no derivative for aten.copy (it only appears functionalized).
    return [S(r.f(*sh), r.f(*sh), grad=False), S(r.f(*sh), r.f(*r.broadcast(sh)), grad=False),
            S(r.f(*sh), r.i(*sh), grad=False), S(r.i(*sh), r.f(*sh) * 3, grad=False),
            S(r.f(*sh, dtype=F64), r.f(*sh), grad=False)]


@samples(aten.constant_pad_nd.default)
def _(r, op):
    sh = r.shape(3, lo=3)
    return [S(r.f(*sh), [1, 2]), S(r.f(*sh), [0, 1, 2, 0], r.f().item()),
            S(r.f(*sh), [-1, 1, 1, -2]),  # negative padding crops
            S(r.f(*sh), [1, 1, 0, 0, 2, 1], 1.5), S(r.i(*sh), [2, 0], 7),
            S(r.f(*sh, dtype=F64), [1, 1])]


@samples(aten.flip.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), [0]), S(r.f(*sh), [-1, 1]), S(r.f(*sh), [0, 1, 2]), S(r.i(*sh), [2]),
            S(r.f(*sh, dtype=F64), [])]


@samples(aten.tril.default, aten.triu.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh[1:])), S(r.f(*sh), 1), S(r.f(*sh), -2), S(r.i(*sh[1:]), 0),
            S(r.b(*sh[1:]), -1), S(r.f(*sh, dtype=F64), 3)]


# ---- creation and random ------------------------------------------------------------------------

def _created(op, kwargs):
    """A graph with an input around a creation op: the created tensor added to the input (its
    values then count), or beside it for dtypes that do not add (bool)."""
    def fn(x, *args):
        made = op(*args, **kwargs)
        return (x | made) if made.dtype == BOOL else x + made
    return fn


def _creation(op, x, *args, check="close", **kwargs):
    return S(x, *args, fn=_created(op, kwargs), grad=False, check=check)


@samples(aten.full.default)
def _(r, op):
    sh = r.shape(3)
    return [_creation(op, r.f(*sh), sh, r.f().item()), _creation(op, r.i(*sh), sh, 3),
            _creation(op, r.b(*sh), sh, True), _creation(op, r.f(*sh, dtype=F64), sh, 2.5, dtype=F64),
            _creation(op, r.f(*sh), [], -1.0, dtype=F32, device="cpu", pin_memory=False),
            _creation(op, r.i(*sh), sh[1:], 2, dtype=I64)]


@samples(aten.scalar_tensor.default)
def _(r, op):
    sh = r.shape(2)
    return [_creation(op, r.f(*sh), r.f().item()), _creation(op, r.i(*sh), 4, dtype=I64),
            _creation(op, r.f(*sh, dtype=F64), 3, dtype=F64), _creation(op, r.b(*sh), False, dtype=BOOL)]


@samples(aten.zeros.default, aten.ones.default)
def _(r, op):
    sh = r.shape(3)
    return [_creation(op, r.f(*sh), sh), _creation(op, r.i(*sh), sh[1:], dtype=I64),
            _creation(op, r.f(*sh, dtype=F64), [1], dtype=F64), _creation(op, r.f(*sh), [])]


@samples(aten.empty.memory_format)
def _(r, op):
    sh = r.shape(3)
    return [_creation(op, r.f(*sh), sh, check="meta"),
            _creation(op, r.i(*sh), sh, dtype=I64, check="meta"),
            _creation(op, r.f(*sh), sh, dtype=F32, memory_format=torch.contiguous_format,
                      check="meta")]


@samples(aten.empty_strided.default)
def _(r, op):
    sh = r.shape(2)
    return [_creation(op, r.f(*sh), sh, [sh[1], 1], check="meta"),
            _creation(op, r.f(*sh, dtype=F64), sh, [sh[1], 1], dtype=F64, check="meta")]


@samples(aten.full_like.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.f().item()), S(r.i(*sh), 5), S(r.f(*sh), 2, dtype=I64),
            S(r.b(*sh), True), S(r.f(dtype=F64), -0.5)]


@samples(aten.zeros_like.default, aten.ones_like.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh)), S(r.i(*sh)), S(r.f(*sh), dtype=I64), S(r.b(*sh)), S(r.f(dtype=F64))]


@samples(aten.empty_like.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), check="meta"), S(r.f(*sh), dtype=I64, check="meta"),
            S(r.b(*sh), check="meta")]


@samples(aten.arange.start_step)
def _(r, op):
    n = r.int(2, 6)
    return [_creation(op, r.i(n), 1, 1 + 2 * n, 2), _creation(op, r.f(n), 0.5, 0.5 + 0.3 * n, 0.3),
            _creation(op, r.f(n), 3, 3 - n, -1, dtype=F32),
            _creation(op, r.f(n, dtype=F64), -1.0, -1.0 + 0.25 * n, 0.25, dtype=F64)]


@samples(aten.arange.start)
def _(r, op):
    n = r.int(1, 6)
    return [_creation(op, r.i(n), -2, n - 2), _creation(op, r.f(n), 1.5, 1.5 + n),
            _creation(op, r.f(n), 0, n, dtype=F32)]


@samples(aten.arange.default)
def _(r, op):
    n = r.int(1, 6)
    return [_creation(op, r.i(n), n), _creation(op, r.f(n), n, dtype=F32),
            _creation(op, r.f(3, n, dtype=F64), float(n), dtype=F64)]


def _uniform(out, args):
    x = args[0]
    assert out.shape == x.shape and out.dtype == (x.dtype if x.is_floating_point() else F32)
    assert float(out.min()) >= 0 and float(out.max()) < 1
    assert abs(float(out.double().mean()) - 0.5) < 0.02 and abs(float(out.double().var()) - 1 / 12) < 0.01


def _normal(out, args):
    x = args[0]
    assert out.shape == x.shape and out.dtype == x.dtype
    assert abs(float(out.double().mean())) < 0.05 and abs(float(out.double().std()) - 1) < 0.05
    assert float((out.abs() < 1).double().mean()) == pytest.approx(0.6827, abs=0.02)


@samples(aten.rand_like.default)
def _(r, op):
    return [S(r.f(100, 100), check=_uniform), S(r.f(50, 200, dtype=F64), check=_uniform)]


@samples(aten.randn_like.default)
def _(r, op):
    return [S(r.f(100, 100), check=_normal), S(r.f(10000, dtype=F64), check=_normal)]


def _dropout_check(p):
    def check(out, args):
        y, mask = out
        x = args[0]
        assert y.shape == x.shape and y.dtype == x.dtype and mask.dtype == BOOL
        torch.testing.assert_close(y, torch.where(mask, x / (1 - p), torch.zeros_like(x)),
                                   rtol=1e-6, atol=0)
        assert float(mask.double().mean()) == pytest.approx(1 - p, abs=0.02)
    return check


@samples(aten.native_dropout.default)
def _(r, op):
    # train=False and p=0 are deterministic: compared with torch.
    return [S(r.f(100, 100), 0.3, True, check=_dropout_check(0.3), grad=False),
            S(r.f(40, 250, dtype=F64), 0.6, True, check=_dropout_check(0.6), grad=False),
            S(r.f(*r.shape(3)), 0.5, False), S(r.f(*r.shape(2)), 0.0, True)]


@samples(aten.native_dropout_backward.default)
def _(r, op):
    sh = r.shape(3)
    return [S(r.f(*sh), r.b(*sh), 1 / 0.7, grad=False), S(r.f(*sh, dtype=F64), r.b(*sh), 2.0),
            S(r.f(*sh), r.b(*sh), 1.0)]


# ---- running a sample ---------------------------------------------------------------------------

def _flat(x):
    if isinstance(x, (tuple, list)):
        return [y for v in x for y in _flat(v)]
    return [x]


def _copy_args(args, grad):
    """Fresh copies of the sample's tensors (a compiled call and an eager call each get their
    own), and the leaves that need a gradient."""
    leaves = []

    def copy(v, needs):
        if isinstance(v, torch.Tensor):
            t = v.detach().clone()
            if needs and t.is_floating_point():
                t.requires_grad_(True)
                leaves.append(t)
            return t
        if isinstance(v, (list, tuple)):
            return type(v)(copy(x, needs) for x in v)
        return v

    out = [copy(a, grad is True or (grad and i in grad)) for i, a in enumerate(args)]
    return out, leaves


def _assert_same(got, want, tol, what):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), f"{what}: {len(got)} results, torch gives {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, torch.Tensor):
            assert g == w, f"{what}[{i}]: {g!r}, torch gives {w!r}"
            continue
        assert isinstance(g, torch.Tensor), f"{what}[{i}]: {type(g)}"
        assert g.dtype == w.dtype and g.shape == w.shape, \
            f"{what}[{i}]: {g.dtype} {list(g.shape)}, torch gives {w.dtype} {list(w.shape)}"
        if w.is_floating_point():
            rtol, atol = tol if w.dtype == F32 and tol else (TOL[w.dtype] if w.dtype in TOL else tol)
            torch.testing.assert_close(g.detach(), w.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                       msg=lambda m: f"{what}[{i}]: {m}")
        else:
            torch.testing.assert_close(g, w, rtol=0, atol=0, msg=lambda m: f"{what}[{i}]: {m}")


def _compile(fn):
    return torch.compile(fn, backend="lazytensor", fullgraph=True, dynamic=False)


class _Spy:
    """Counts the calls of one op's builder while installed in TABLE."""

    def __init__(self, op):
        self.op, self.calls = op, 0

    def __enter__(self):
        self.builder = TABLE[self.op]

        def spy(*a, **k):
            self.calls += 1
            return self.builder(*a, **k)
        TABLE[self.op] = spy
        return self

    def __exit__(self, *exc):
        TABLE[self.op] = self.builder


def _sample_fn(op, s):
    return s.fn or (lambda *a: op(*a, **s.kwargs))


def run_samples(op, ss, seed):
    """Compiled vs eager forward (and gradients) of an op's samples, all in one compiled function
    (one Dynamo trace and one lazytensor graph per direction: compiling is what takes the time);
    returns lazytensor's counters and the number of times the op's builder ran."""
    def run_all(fns):
        def fn(*flat):
            outs, at = [], 0
            for f, s in zip(fns, ss):
                outs.append(f(*flat[at:at + len(s.args)]))
                at += len(s.args)
            return outs
        return fn

    fn = run_all([_sample_fn(op, s) for s in ss])
    ref = run_all([s.ref or _sample_fn(op, s) for s in ss])

    copies_c = [_copy_args(s.args, s.grad) for s in ss]
    copies_e = [_copy_args(s.args, s.grad) for s in ss]
    torch._dynamo.reset()
    lt.metrics.reset()
    with _Spy(op) as spy:
        torch.manual_seed(seed)
        outs_c = _compile(fn)(*[a for args, _ in copies_c for a in args])
        torch.manual_seed(seed)
        outs_e = ref(*[a for args, _ in copies_e for a in args])
        for n, (s, out_c, out_e) in enumerate(zip(ss, outs_c, outs_e)):
            what = f"{op} sample {n}"
            if callable(s.check):
                s.check(out_c, copies_c[n][0])
            elif s.check == "meta":
                _assert_same([(o.shape, o.dtype) for o in _flat(out_c)],
                             [(o.shape, o.dtype) for o in _flat(out_e)], None, what)
            else:
                _assert_same(out_c, out_e, s.tol, what)
        diff_e = [o for o in _flat(outs_e) if isinstance(o, torch.Tensor) and o.requires_grad]
        leaves_c = [x for _, leaves in copies_c for x in leaves]
        leaves_e = [x for _, leaves in copies_e for x in leaves]
        if leaves_e and diff_e:
            diff_c = [o for o in _flat(outs_c) if isinstance(o, torch.Tensor) and o.requires_grad]
            assert len(diff_c) == len(diff_e), f"{op}: differentiable outputs differ"
            gen = torch.Generator().manual_seed(seed)
            gs = [torch.rand(o.shape, generator=gen, dtype=F64).to(o.dtype) * 2 - 1 for o in diff_e]
            grads_c = torch.autograd.grad(sum((o * g).sum() for o, g in zip(diff_c, gs)), leaves_c,
                                          allow_unused=True)
            grads_e = torch.autograd.grad(sum((o * g).sum() for o, g in zip(diff_e, gs)), leaves_e,
                                          allow_unused=True)
            at = 0
            for n, (s, (_, leaves)) in enumerate(zip(ss, copies_e)):
                k = len(leaves)
                _assert_same(list(grads_c[at:at + k]), list(grads_e[at:at + k]),
                             s.grad_tol or GRAD_TOL[F32], f"{op} sample {n} grad")
                at += k
    return lt.metrics.counters(), spy.calls


def run_direct(op, s):
    """The op as the only node of an FX graph, run by the backend's graph runner (LazyGraph),
    against eager; returns the number of times the op's builder ran."""
    graph, inputs = torch.fx.Graph(), []

    def arg(v):
        if isinstance(v, torch.Tensor):
            inputs.append(v.clone())
            return graph.placeholder(f"a{len(inputs)}")
        return type(v)(arg(x) for x in v) if isinstance(v, (list, tuple)) else v

    node = graph.call_function(op, tuple(arg(a) for a in s.args),
                               {k: arg(v) for k, v in s.kwargs.items()})
    graph.output((node,))
    with _Spy(op) as spy:
        got = LazyGraph(torch.fx.GraphModule({}, graph), f"direct {op}")(inputs)
    _assert_same(got, [op(*s.args, **s.kwargs)], s.tol, f"{op} (FX graph)")
    return spy.calls


def _seed(op):
    return zlib.crc32(str(op).encode())


SAMPLED = sorted(SAMPLES, key=str)


@pytest.mark.parametrize("op", SAMPLED, ids=str)
def test_op_matches_torch(op):
    ss = SAMPLES[op](Rand(_seed(op)), op)
    counters, calls = run_samples(op, ss, _seed(op))
    assert counters["fallbacks"] == 0, f"{op}: {counters['fallbacks']} fallbacks"
    if op in REWRITTEN:
        calls = sum(run_direct(op, s) for s in ss)
    assert calls >= len(ss), f"{op}: the op reached its builder {calls} times for {len(ss)} samples"


def test_every_table_entry_has_samples():
    missing = [str(o) for o in TABLE if isinstance(o, torch._ops.OpOverload)
               and o not in IMPLICIT and o not in SAMPLES]
    assert not missing, f"aten table entries without samples in {__file__}: {missing}"
    helpers = [o for o in TABLE if not isinstance(o, torch._ops.OpOverload)]
    assert all(o is operator.getitem or getattr(o, "__module__", None) in ("_operator", "math")
               for o in helpers), helpers


# ---- what the table declines -------------------------------------------------------------------
# Argument combinations a builder declares unsupported (NotImplementedError): the graph is split
# around the op, which runs in PyTorch; results (and gradients) are still PyTorch's, and counted.

def _fallback_samples():
    r = Rand(1234)
    sh = r.shape(3)
    x = r.f(2, 3, 6, 5)
    return [
        (aten.convolution.default, S(r.f(1, 4, 5, 5), r.f(4, 2, 3, 3), r.f(2), [2, 2], [1, 1],
                                     [1, 1], True, [1, 0], 1)),  # transposed
        (aten.convolution.default, S(r.f(1, 2, 4, 4, 3), r.f(3, 2, 2, 2, 2), None, [1, 1, 1],
                                     [0, 0, 0], [1, 1, 1], False, [0, 0, 0], 1)),  # 3-d
        (aten._adaptive_avg_pool2d.default, S(x, [4, 3])),  # sizes that do not divide
        (aten._adaptive_avg_pool2d_backward.default, S(r.f(2, 3, 4, 3), x, grad=False)),
        (aten.div.Tensor_mode, S(r.f(*sh), r.nonzero(*sh), rounding_mode="trunc")),
        (aten.div.Tensor_mode, S(r.i(*sh), r.i(*sh, lo=1, hi=3), rounding_mode="floor")),
        (aten.div.Scalar_mode, S(r.i(*sh), 3, rounding_mode="trunc")),
        (aten.bitwise_and.Tensor, S(r.i(*sh, lo=0, hi=15), r.i(*sh, lo=0, hi=15))),
        (aten.bitwise_or.Tensor, S(r.i(*sh, lo=0, hi=15), r.i(*sh, lo=0, hi=15))),
        (aten.bitwise_xor.Tensor, S(r.i(*sh, lo=0, hi=15), r.i(*sh, lo=0, hi=15))),
        (aten.bitwise_not.default, S(r.i(*sh))),
        (aten.logical_and.default, S(r.sparse(*sh), r.sparse(*sh))),
        (aten.logical_not.default, S(r.i(*sh, lo=0, hi=1))),
        # A bool mask: its data-dependent size brings _assert_scalar nodes (run in PyTorch), so
        # the graph is split before the builder declines the mask.
        (aten.index.Tensor, S(r.f(*sh), [r.b(sh[0])])),
        (aten.index.Tensor, S(r.f(*sh), [r.i(3, lo=0, hi=sh[0] - 1), r.i(3, lo=0, hi=sh[1] - 1)])),
        (aten.index_put.default, S(r.f(*sh), [r.b(*sh)], r.f(), grad=[0])),
        (aten.embedding_dense_backward.default, S(r.f(4, 3), r.i(4, lo=0, hi=2), 3, -1, True)),
    ]


@pytest.mark.parametrize("n", range(len(_fallback_samples())))
def test_declined_arguments_fall_back_to_torch(n):
    op, s = _fallback_samples()[n]
    counters, calls = run_samples(op, [s], 99 + n)
    assert calls > 0, f"{op}: its builder never saw the arguments"
    assert counters["fallbacks"] > 0, f"{op}: expected the op to run in PyTorch"
