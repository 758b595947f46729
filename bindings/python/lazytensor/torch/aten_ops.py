"""The aten table's core: the table itself, the decorator that fills it, and the helpers every
group of entries shares (aten_table.py has the table's contract)."""
import torch

from .. import _C
from . import attention  # noqa: F401  (defines torch.ops.lazytensor.sdpa*, entries of aten_nn)

aten = torch.ops.aten
prims = torch.ops.prims
TABLE = {}


def op(*overloads):
    def register(fn):
        for o in overloads:
            TABLE[o] = fn
        return fn
    return register


def _dims(dim, ndim):
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return [d % ndim if ndim else 0 for d in dim]


def _cast(x, dtype):
    return x if dtype is None or x.dtype == dtype else _C.cast(x, dtype)
