"""Indexing and movement: gather/scatter, slicing, views, concatenation. Entries of the aten table
(aten_table.py)."""
from .. import _C
from .aten_ops import _cast, _dims, aten, op
from .interop import lt_dtype


# ---- indexing -----------------------------------------------------------------------------------

@op(aten.embedding.default)
def _embedding(cx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return _C.embedding(weight, indices)


@op(aten.embedding_dense_backward.default)
def _embedding_backward(cx, grad_out, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise NotImplementedError("not implemented: embedding(scale_grad_by_freq=True) backward "
                                  "in lazytensor")
    dim = grad_out.shape[-1]
    idx = indices.reshape([-1])
    g = grad_out.reshape([-1, dim])
    if padding_idx is not None and padding_idx >= 0:
        g = _C.masked_fill(g, (idx == padding_idx).unsqueeze(-1), 0.0)
    zeros = _C.zeros([num_weights, dim], grad_out.dtype, cx.device)
    return _C.scatter_add(zeros, 0, idx.unsqueeze(-1).expand(-1, dim), g)


@op(aten.index_select.default)
def _index_select(cx, x, dim, index):
    return _C.index_select(x, dim, index)


@op(aten.gather.default)
def _gather(cx, x, dim, index, *, sparse_grad=False):
    return _C.gather(x, dim, index)


@op(aten.scatter_add.default)
def _scatter_add(cx, x, dim, index, src):
    return _C.scatter_add(x, dim, index, src)


@op(aten.scatter.value, aten.scatter.src)
def _scatter(cx, x, dim, index, value):
    # Each (index) position is written once with the value (PyTorch leaves duplicates'
    # winner unspecified): x where no index points, else the value. A position's hit count
    # comes from a scatter_add of ones.
    hits = _C.scatter_add(_C.zeros_like(x), dim, index, _cast(_C.ones_like(index), x.dtype)) > 0
    if not isinstance(value, _C.Tensor):
        return _C.where(hits, _C.full([], value, x.dtype, cx.device), x)
    src = value
    for d in range(index.ndim):  # torch reads src only where index has entries
        if src.shape[d] != index.shape[d]:
            src = _C.slice(src, d, 0, index.shape[d], 1)
    # With unique indices (the defined case), the sum of the scattered values is the value.
    placed = _C.scatter_add(_C.zeros_like(x), dim, index, _cast(src, x.dtype))
    return _C.where(hits, placed, x)


def _one_index(name, x, indices):
    """(dim, index) of an aten.index/index_put whose indices are one integer tensor after Nones
    (x[i], x[:, i], ...: also what index_select's and index_add's derivatives produce), negative
    entries counted back from the end as torch counts them."""
    d = len(indices) - 1
    if d < 0 or any(i is not None for i in indices[:-1]) or indices[-1] is None \
            or indices[-1].dtype == _C.bool:
        raise NotImplementedError(f"not implemented: aten.{name} with other than one integer "
                                  f"index tensor (after full slices) in lazytensor")
    idx = indices[-1]
    return d, _C.where(idx < 0, idx + x.shape[d], idx)


@op(aten.index.Tensor)
def _index(cx, x, indices):
    d, idx = _one_index("index", x, indices)
    flat = _C.index_select(x, d, idx.reshape([-1]))
    return flat.reshape(list(x.shape[:d]) + list(idx.shape) + list(x.shape[d + 1:]))


@op(aten.index_put.default)
def _index_put(cx, x, indices, values, accumulate=False):
    d, idx = _one_index("index_put", x, indices)
    lead, row = list(x.shape[:d]), list(x.shape[d + 1:])
    shape = lead + list(idx.shape) + row
    if idx.ndim == 0 and values.ndim > len(shape):
        # index_select's derivative (through index_add) passes a 0-d index with values that keep
        # the indexed dim (size 1), which torch's index_put takes.
        shape = lead + [1] + row
    vals = values.expand(shape).reshape(lead + [-1] + row)
    full_idx = idx.reshape([1] * d + [-1] + [1] * len(row)).expand(lead + [-1] + row)
    if accumulate:
        return _C.scatter_add(x, d, full_idx, _cast(vals, x.dtype))
    return _scatter(cx, x, d, full_idx, _cast(vals, x.dtype))


# ---- movement -----------------------------------------------------------------------------------

@op(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(cx, x, size):
    return x.reshape(list(size))


@op(aten.permute.default)
def _permute(cx, x, dims):
    return x.permute(list(dims))


@op(aten.expand.default)
def _expand(cx, x, size, implicit=False):
    return x.expand(list(size))


@op(aten.unsqueeze.default)
def _unsqueeze(cx, x, dim):
    return x.unsqueeze(dim)


@op(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def _squeeze(cx, x, dim=None):
    if dim is None:
        return x.squeeze()
    keep = [s for i, s in enumerate(x.shape) if not (i in _dims(dim, x.ndim) and s == 1)]
    return x.reshape(keep)


@op(aten.slice.Tensor)
def _slice(cx, x, dim=0, start=None, end=None, step=1):
    n = x.shape[dim]
    start = 0 if start is None else start
    end = n if end is None else end
    start = max(0, min(n, start + n if start < 0 else start))
    end = max(start, min(n, end + n if end < 0 else end))
    return _C.slice(x, dim, start, end, step)


@op(aten.select.int)
def _select(cx, x, dim, index):
    return _C.select(x, dim, index)


@op(aten.cat.default)
def _cat(cx, tensors, dim=0):
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    return _C.cat(tensors, dim)


@op(aten.split_with_sizes.default)
def _split_with_sizes(cx, x, sizes, dim=0):
    return list(x.split(list(sizes), dim))


@op(aten.split.Tensor)
def _split(cx, x, size, dim=0):
    return list(x.split(size, dim))


@op(aten.transpose.int)
def _transpose(cx, x, a, b):
    return x.transpose(a, b)


@op(aten.t.default)
def _t(cx, x):
    return x.t()


@op(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default)
def _clone(cx, x, *, memory_format=None):
    return x


@op(aten._to_copy.default)
def _to_copy(cx, x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    return _cast(x, lt_dtype(dtype))


@op(aten.copy.default)
def _copy(cx, x, src, non_blocking=False):
    return _cast(src, x.dtype).expand(list(x.shape))


@op(aten.constant_pad_nd.default)
def _constant_pad_nd(cx, x, pad, value=0):
    return _C.pad(x, list(pad), float(value))


@op(aten.flip.default)
def _flip(cx, x, dims):
    return _C.flip(x, list(dims))


@op(aten.tril.default)
def _tril(cx, x, diagonal=0):
    return _C.tril(x, diagonal)


@op(aten.triu.default)
def _triu(cx, x, diagonal=0):
    return _C.triu(x, diagonal)
