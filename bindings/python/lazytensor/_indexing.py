"""`tensor[...]` and `tensor[...] = value` with PyTorch's semantics, built on the runtime's slicing
and index ops (runtime/indexing.h).

Reading:
- ints select (negative from the end; IndexError when out of range), slices are strided views
  (positive steps; a negative step is a ValueError, as in PyTorch), None inserts a dim, `...` fills.
- Integer index tensors (or lists / NumPy arrays of ints) are advanced indices. One of them is an
  index_select; several broadcast together and index the flattened tensor through one linear index.
  Their result dims go where PyTorch puts them: in place of the indexed dims when those are adjacent
  (after ints have been applied), else first.
- Index values already on the host (lists, cpu tensors, materialized lazy data in host memory) are
  range-checked (IndexError) and negative values wrap; an index computed inside a pending lazy graph
  wraps on the device and is range-checked at the sync that computes the result (an IndexError
  raised there, after the sync's results are assigned; runtime/index_check.h), never read back early.
- A boolean mask has a data-dependent result shape: the mask is read to the host (a sync point on
  lazy, recorded as "control_flow", like torch.nonzero on CUDA) and turned into integer indices.

Writing (`__setitem__`) is functional: the new value is built with pad/where (ints, slices, None,
`...`), where (a boolean mask with a broadcastable value; no sync) or scatter_add through a linear
index (integer index tensors), and the tensor is rebound to it as in-place ops are (`_assign`).
With duplicate indices the written values are averaged (PyTorch leaves the winner unspecified).

Cost model: index_select, gather and scatter_add are IR primitives (an indexed load fused into
its kernel; an accumulating store): work proportional to the elements selected or written,
whatever the indexed dimension's size; slicing and ints are views.
"""
import numbers
import operator

import numpy as np

from . import _C

Tensor = _C.Tensor
_R = _C.SyncReason


def exact(fn, out_dtype, *tensors):
    """fn(*tensors) as out_dtype. The runtime's index ops keep integer and bool dtypes exact
    (runtime/indexing.cc fills with a value of the tensor's own kind), so this only casts."""
    out = fn(*tensors)
    return out if out.dtype == out_dtype else out._cast(out_dtype)


def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def _as_index_operand(x, device):
    """A list / NumPy array / Tensor used as an advanced index, as a lazytensor Tensor (or a NumPy
    array of ints/bools when the data is on the host)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (list, tuple)):
        if any(isinstance(v, (slice, type(Ellipsis), type(None))) for v in x):
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                             "Variables are valid indices")
        arr = np.asarray(x)
        if arr.size == 0:
            arr = arr.astype(np.int64)
    else:
        arr = np.asarray(x)
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind not in "iu":
        raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors (got "
                         f"{arr.dtype})")
    return arr.astype(np.int64)


def _sequence_as_tuple(index):
    """PyTorch's (and old NumPy's) rule: a short list holding a sequence, a tensor, a slice, `...`
    or None is read as a tuple of indices (x[[[0, 1], [2, 2]]] is x[[0, 1], [2, 2]])."""
    if not isinstance(index, (list, np.ndarray)) or len(index) >= 32:
        return False
    return any(isinstance(v, (Tensor, list, tuple, np.ndarray, slice)) or v is None or v is Ellipsis
               for v in index)


def _expand_index(self, index):
    """The index as a list of entries with Ellipsis expanded, Python bools resolved and index
    operands converted. Entries: ("int", i), ("slice", s), ("none",), ("adv", array_or_tensor),
    ("mask", array_or_tensor)."""
    if not isinstance(index, tuple):
        index = tuple(index) if _sequence_as_tuple(index) else (index,)
    entries = []
    for item in index:
        if item is None:
            entries.append(("none",))
        elif item is Ellipsis:
            entries.append(("ellipsis",))
        elif isinstance(item, (bool, np.bool_)):
            entries.append(("bool", bool(item)))
        elif _is_int(item):
            entries.append(("int", operator.index(item)))
        elif isinstance(item, slice):
            entries.append(("slice", item))
        elif isinstance(item, (Tensor, list, tuple, np.ndarray)):
            op = _as_index_operand(item, self.device)
            is_mask = op.dtype in (np.bool_, np.uint8) if isinstance(op, np.ndarray) else \
                op.dtype in (_C.bool, _C.uint8)
            if isinstance(op, Tensor) and op.dtype.is_floating_point:
                raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors "
                                 f"(got {op.dtype})")
            entries.append(("mask" if is_mask else "adv", op))
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                             f"Variables are valid indices (got {type(item).__name__})")
    consumed = 0
    for e in entries:
        if e[0] in ("int", "slice", "adv"):
            consumed += 1
        elif e[0] == "mask":
            consumed += max(e[1].ndim, 0)
    if consumed > self.ndim:
        raise IndexError(f"too many indices for tensor of dimension {self.ndim}")
    fill = self.ndim - consumed
    # Each `...` skips the unindexed dims, as in PyTorch (which accepts x[0, ..., 1, ...]: there the
    # second one runs past the last dim and does nothing).
    full = ("slice", slice(None), "...")
    out = []
    for e in entries:
        out += [full] * fill if e[0] == "ellipsis" else [e]
    if not any(e[0] == "ellipsis" for e in entries):
        out += [full] * fill
    total = consumed + fill * sum(e[0] == "ellipsis" for e in entries)
    while total > self.ndim and out and out[-1] is full:
        out.pop()
        total -= 1
    if total > self.ndim:
        raise IndexError(f"too many indices for tensor of dimension {self.ndim} (several '...')")
    return out


def _mask_to_indices(mask, x, dim):
    """A bool mask over x's dims [dim, dim + mask.ndim) as mask.ndim int64 NumPy index arrays (reads
    a device mask to the host: a sync point on lazy)."""
    if isinstance(mask, Tensor):
        arr = mask._numpy(_R.control_flow, False)
    else:
        arr = mask
    arr = arr.astype(np.bool_)
    for k in range(arr.ndim):
        if dim + k >= x.ndim or arr.shape[k] != x.shape[dim + k]:
            size = x.shape[dim + k] if dim + k < x.ndim else None
            raise IndexError(f"The shape of the mask {list(arr.shape)} at index {k} does not match the "
                             f"shape of the indexed tensor {list(x.shape)} at index {dim + k}"
                             + ("" if size is not None else " (too many dims)"))
    if arr.ndim == 0:
        return None
    return list(np.nonzero(arr))


def _index_tensor(idx, size, device, dim, shape, alone):
    """An int64 index on `device` with negative values wrapped; host values are range-checked now,
    values computed in a lazy graph at the sync (runtime/index_check.h). `shape`: the indexed
    tensor's; `alone`: the only advanced index (then index_select checks it)."""
    host = idx if isinstance(idx, np.ndarray) else idx._host_int_values()
    if host is not None:
        host = np.asarray(host, dtype=np.int64)
        bad = (host < -size) | (host >= size)
        if bad.any():
            v = int(host[bad].flat[0])
            raise IndexError(f"index {v} is out of bounds for dimension {dim} with size {size}")
        host = np.where(host < 0, host + size, host)
        return _C.from_numpy(host.copy(order="C"), device)  # (ascontiguousarray makes 0-d 1-d)
    t = idx if idx.device == device else idx.to(device)
    if t.dtype != _C.int64:
        t = t._cast(_C.int64)
    # Only in-range negatives wrap, so an out-of-range value reaches the check unchanged. A lone
    # index goes to index_select, whose own check (at the sync) names it; several combine into one
    # linear index, where a bad component can land in range, so each is checked here first.
    wrapped = _C.where(_C.logical_and(_C.lt(t, 0), _C.ge(t, -size)), _C.add(t, size), t)
    if not alone:
        _C._check_index(t, -size, size, "indexing", dim, list(shape), wrapped)
    return wrapped


def _basic(self, entries):
    """Applies ints, slices and None; returns (result, [(dim in result, index operand), ...])."""
    x = self
    d = 0
    adv = []
    for e in entries:
        kind = e[0]
        if kind == "int":
            n = x.shape[d]
            i = e[1]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
            x = _C.select(x, d, i)
        elif kind == "slice":
            s = e[1]
            step = 1 if s.step is None else operator.index(s.step)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            start = None if s.start is None else operator.index(s.start)
            stop = None if s.stop is None else operator.index(s.stop)
            if not (start is None and stop is None and step == 1):
                x = _C.slice(x, d, start, stop, step)
            d += 1
        elif kind == "none":
            x = x.unsqueeze(d)
            d += 1
        elif kind == "bool":
            x = x.unsqueeze(d)
            if not e[1]:
                x = _C.slice(x, d, 0, 0, 1)
            d += 1
        elif kind == "adv":
            adv.append((d, e[1]))
            d += 1
        elif kind == "mask":
            idxs = _mask_to_indices(e[1], x, d)
            if idxs is None:  # a 0-d mask: like a Python bool
                x = x.unsqueeze(d)
                if not bool(e[1] if isinstance(e[1], np.ndarray) else e[1]._numpy(_R.control_flow, False)):
                    x = _C.slice(x, d, 0, 0, 1)
                d += 1
                continue
            for k, ix in enumerate(idxs):
                adv.append((d + k, ix))
            d += len(idxs)
    return x, adv


def _broadcast_shapes(shapes):
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with "
                         f"shapes {', '.join(str(list(s)) for s in shapes)}") from None


def _advanced(x, adv):
    """x indexed by advanced indices at dims `adv` (ascending), with PyTorch's placement."""
    dims = [d for d, _ in adv]
    bshape = _broadcast_shapes([ix.shape for _, ix in adv])
    rest_sizes = [x.shape[d] for d in range(x.ndim) if d not in dims]
    if 0 in bshape or 0 in rest_sizes:
        # An empty result: PyTorch checks no index values then; neither do we.
        adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
        p = dims[0] if adjacent else 0
        shape = rest_sizes[:p] + list(bshape) + rest_sizes[p:]
        return _C.slice(x.reshape(-1), 0, 0, 0, 1).reshape(shape)
    idxs = [_index_tensor(ix, x.shape[d], x.device, d, x.shape, len(adv) == 1) for d, ix in adv]
    if len(idxs) == 1:
        d, idx = dims[0], idxs[0]
        out = exact(lambda a: _C.index_select(a, d, idx.reshape(-1)), x.dtype, x)
        return out.reshape(list(x.shape[:d]) + list(idx.shape) + list(x.shape[d + 1:]))
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    rest = [d for d in range(x.ndim) if d not in dims]
    xp = x.permute(*(dims + rest))
    lead = [x.shape[d] for d in dims]
    flat = xp.reshape([int(np.prod(lead))] + [x.shape[d] for d in rest])
    linear = None
    stride = 1
    for idx, n in zip(reversed(idxs), reversed(lead)):
        term = idx if stride == 1 else _C.mul(idx, stride)
        linear = term if linear is None else _C.add(linear, term)
        stride *= n
    linear = linear.expand(*bshape) if tuple(linear.shape) != bshape else linear
    out = exact(lambda a: _C.index_select(a, 0, linear.reshape(-1)), x.dtype, flat)
    out = out.reshape(list(bshape) + [x.shape[d] for d in rest])
    if adjacent and dims[0] > 0:
        nb, p = len(bshape), dims[0]
        perm = list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, out.ndim))
        out = out.permute(*perm)
    return out


def getitem(self, index):
    # The commonest forms first, without building an entry list: x[i] and x[a:b(:c)] with plain
    # ints (per-op cost is most of a small eager slice; issue 32's eager row).
    kind = type(index)
    if kind is int:
        return self._getitem_int(index)
    if kind is slice and self.ndim > 0:
        start, stop, step = index.start, index.stop, index.step
        if (start is None or type(start) is int) and (stop is None or type(stop) is int) and \
                (step is None or (type(step) is int and step > 0)):
            if start is None and stop is None and (step is None or step == 1):
                return self
            return _C.slice(self, 0, start, stop, 1 if step is None else step)
    if self.ndim == 0 and isinstance(index, (int, slice)) and not isinstance(index, bool):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    entries = _expand_index(self, index)
    x, adv = _basic(self, entries)
    if not adv:
        return x
    return _advanced(x, adv)


# ---- __setitem__ ----------------------------------------------------------------------------------

def _value_tensor(value, like):
    if isinstance(value, Tensor):
        v = value if value.device == like.device else value.to(like.device)
        return v if v.dtype == like.dtype else v._cast(like.dtype)
    if isinstance(value, (numbers.Number, np.bool_, np.number)):
        return _C.scalar_tensor(value, like.dtype, like.device)
    return _C.from_numpy(np.asarray(value), like.device)._cast(like.dtype)


def _broadcast_to(v, shape, what):
    shape = tuple(shape)
    if tuple(v.shape) == shape:
        return v
    # PyTorch drops leading size-1 dims of the value when it has more dims than the target.
    vs = list(v.shape)
    while len(vs) > len(shape) and vs[0] == 1:
        vs.pop(0)
    if len(vs) != v.ndim:
        v = v.reshape(vs)
    try:
        np.broadcast_shapes(tuple(vs), shape)
        if len(vs) > len(shape):
            raise ValueError
    except ValueError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(v.shape)} cannot be "
                           f"broadcast to indexing result of shape {list(shape)}") from None
    return v.expand(*shape)


def _set_basic(self, entries, value):
    """Ints, slices, None: pad the value into place and select it with a mask (views, no gather)."""
    # Per dim of self: (start, step, count, is_int); and the shape of self[index].
    specs = []
    result_shape = []
    d = 0
    for e in entries:
        kind = e[0]
        if kind in ("none", "bool"):
            result_shape.append(1 if kind == "none" or e[1] else 0)
            continue
        n = self.shape[d]
        if kind == "int":
            i = e[1]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
            specs.append((i + n if i < 0 else i, 1, 1, True))
        else:
            s = e[1]
            step = 1 if s.step is None else operator.index(s.step)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            start, stop, _ = slice(s.start, s.stop, 1).indices(n)
            count = max(0, (stop - start + step - 1) // step)
            specs.append((start if count else 0, step, count, False))
            result_shape.append(count)
        d += 1
    v = _broadcast_to(_value_tensor(value, self), result_shape, "setitem")
    if any(c == 0 for _, _, c, _ in specs) or 0 in result_shape:
        return self
    box = [c for _, _, c, _ in specs]
    placed = v.reshape(box)
    mask = None
    for dim, (start, step, count, _) in enumerate(specs):
        n = self.shape[dim]
        if start == 0 and step == 1 and count == n:
            continue
        if step > 1 and count > 1:  # dilate: count values `step` apart
            t = placed.unsqueeze(dim + 1)
            t = _C.pad_dim(t, dim + 1, 0, step - 1, 0.0)
            shp = list(placed.shape)
            shp[dim] = count * step
            placed = _C.narrow(t.reshape(shp), dim, 0, (count - 1) * step + 1)
        length = (count - 1) * step + 1
        placed = _C.pad_dim(placed, dim, start, n - start - length, 0.0)
        m = np.zeros(n, dtype=np.bool_)
        m[start:start + length:step] = True
        shape = [1] * self.ndim
        shape[dim] = n
        mt = _C.from_numpy(m.reshape(shape), self.device)
        mask = mt if mask is None else _C.logical_and(mask, mt)
    if placed.dtype != self.dtype:
        placed = placed._cast(self.dtype)
    if mask is None:  # the whole tensor
        placed = placed.expand(*self.shape)
        if self.requires_grad:  # the old value gets a zero gradient, as PyTorch's CopySlices gives
            return _C.where(_C.scalar_tensor(True, _C.bool, self.device), placed, self)
        return placed
    return _C.where(mask, placed, self)


def _set_by_linear_index(self, index, value):
    """Integer index tensors (possibly with ints/slices): scatter through a linear index."""
    n = self.numel()
    pos = _C.positions(n, self.device).reshape(list(self.shape)) if n else None
    if pos is None:
        getitem(self, index)  # still validates the index
        return self
    lin = getitem(pos, index)
    v = _broadcast_to(_value_tensor(value, self), lin.shape, "setitem")
    if lin.numel() == 0:
        return self
    lin = lin.reshape(-1)
    acc_dtype = self.dtype if self.dtype in (_C.float32, _C.float64) else _C.float64
    src = v.reshape(-1)._cast(acc_dtype) if v.dtype != acc_dtype else v.reshape(-1)
    zeros = _C.zeros([n], acc_dtype, self.device)
    added = _C.scatter_add(zeros, 0, lin, src)
    count = _C.scatter_add(zeros, 0, lin, _C.ones([lin.shape[0]], acc_dtype, self.device))
    hit = _C.gt(count, 0)
    new = _C.div(added, _C.where(hit, count, 1.0))
    if new.dtype != self.dtype:
        new = new._cast(self.dtype)
    return _C.where(hit, new, self.reshape(-1)).reshape(list(self.shape))


def setitem(self, index, value):
    entries = _expand_index(self, index)
    kinds = {e[0] for e in entries}
    if not kinds & {"adv", "mask"}:
        return self._set(_set_basic(self, entries, value))
    # A boolean mask over the leading dims and a value that broadcasts over the rest: a where, no sync.
    real = [e for e in entries if e[0] != "slice" or e[1] != slice(None)]
    if (len(real) == 1 and entries[0][0] == "mask" and isinstance(entries[0][1], Tensor)
            and entries[0][1].ndim >= 1):
        mask = entries[0][1]
        k = mask.ndim
        if k > self.ndim or tuple(mask.shape) != tuple(self.shape[:k]):
            raise IndexError(f"The shape of the mask {list(mask.shape)} does not match the shape of "
                             f"the indexed tensor {list(self.shape)}")
        rest = tuple(self.shape[k:])
        vshape = tuple(value.shape) if isinstance(value, Tensor) else ()
        vs = list(vshape)
        while len(vs) > len(rest) and vs[0] == 1:
            vs.pop(0)
        try:
            ok = len(vs) <= len(rest) and np.broadcast_shapes(tuple(vs), rest) == rest
        except ValueError:
            ok = False
        if ok:
            m = mask if mask.device == self.device else mask.to(self.device)
            if m.dtype != _C.bool:
                m = m._cast(_C.bool)
            m = m.reshape(list(mask.shape) + [1] * len(rest))
            v = _value_tensor(value, self)
            if len(vs) != v.ndim:
                v = v.reshape(vs)
            return self._set(_C.where(m, v, self))
    return self._set(_set_by_linear_index(self, index, value))
