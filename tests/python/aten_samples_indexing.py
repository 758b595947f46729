"""Samples of the aten table's indexing and movement (test_torch_aten_table.py runs them)."""
import math

import torch

from aten_samples import BOOL, F32, F64, I64, S, samples

aten = torch.ops.aten


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
