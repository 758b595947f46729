"""sort, argsort and topk.

The permutation is found on the host: the input is read (a sync point on `lazy`, as a boolean
mask is, since the runtime has no sort kernel), NumPy's stable sort orders it with PyTorch's
rules (NaN after every number ascending, before every number descending; ties keep their order),
and the indices come back as device data. The values are then `gather(input, dim, indices)`, a
traced op: on `lazy` they stay in the graph, and gradients flow to the input through gather's
VJP exactly as PyTorch's sort gradient does (each value's gradient lands where it came from).
"""
import operator

import numpy as np

from . import _C, _creation, return_types
from ._utils import normalize_dim


def _descending_keys(a):
    """Keys whose ascending stable order is `a`'s descending one, without overflow."""
    if a.dtype == np.bool_:
        return ~a.astype(np.int16)
    if np.issubdtype(a.dtype, np.integer):
        return ~a.astype(np.int64) if np.issubdtype(a.dtype, np.unsignedinteger) else ~a
    return -a


def _host_argsort(x, dim, descending):
    """The stable sorting permutation of `x` along `dim`, as a NumPy int64 array."""
    a = x.detach().cpu().numpy()
    if a.dtype.kind == "f" or a.dtype == np.float16:
        nan = np.isnan(a)
        vals = np.where(nan, 0, a)
        if descending:  # NaN first, then the rest from large to small
            keys = (-vals, ~nan)
        else:           # the rest from small to large, NaN last
            keys = (vals, nan)
        # np.lexsort sorts by the last key first, stably: move `dim` last for it.
        moved = [np.moveaxis(k, dim, -1) for k in keys]
        order = np.lexsort(moved, axis=-1)
        return np.ascontiguousarray(np.moveaxis(order, -1, dim)).astype(np.int64)
    keys = _descending_keys(a) if descending else a
    return np.argsort(keys, axis=dim, kind="stable").astype(np.int64)


def _dim(x, dim, what):
    try:
        return normalize_dim(operator.index(dim), x.ndim)
    except IndexError as e:
        raise IndexError(f"{what}: dimension {dim} out of range for a tensor of {x.ndim} dims "
                         f"(shape {tuple(x.shape)}): {e}") from None


def argsort(x, dim=-1, descending=False, stable=False):
    """Indices that sort `x` along `dim` (always stable, which `stable=False` permits)."""
    dim = _dim(x, dim, "argsort")
    if x.ndim == 0:
        return _creation.zeros((), dtype=_C.int64, device=x.device)
    return _C.from_numpy(_host_argsort(x, dim, descending), x.device)


def sort(x, dim=-1, descending=False, stable=False):
    """(values, indices) of `x` sorted along `dim` (lazytensor.return_types.sort)."""
    indices = argsort(x, dim, descending, stable)
    if x.ndim == 0:
        return return_types.sort(x.clone(), indices)
    return return_types.sort(x.gather(_dim(x, dim, "sort"), indices), indices)


def topk(x, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (or smallest) entries along `dim`, in sorted order
    (lazytensor.return_types.topk; `sorted=False` may return them in any order: sorted here)."""
    dim = _dim(x, dim, "topk")
    k = operator.index(k)
    size = x.shape[dim] if x.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"topk: k ({k}) is out of range for dimension {dim} of size {size} "
                           f"(shape {tuple(x.shape)})")
    if x.ndim == 0:
        return return_types.topk(x.clone(), _creation.zeros((), dtype=_C.int64, device=x.device))
    indices = argsort(x, dim, largest).narrow(dim, 0, k)
    return return_types.topk(x.gather(dim, indices), indices)
