"""Samples of the aten table's entries for tests/python/test_torch_aten_table.py: what a
sample is (S), random inputs (Rand) and the registry (SAMPLES, filled by the aten_samples_*
modules, one per op group)."""
import torch

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


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [y for v in x for y in _flat(v)]
    return [x]
