"""Named tuples returned by reductions with values and indices (PyTorch's torch.return_types)."""
from collections import namedtuple

__all__ = ["max", "min", "sort", "topk"]

max = namedtuple("max", ["values", "indices"])  # noqa: A001
min = namedtuple("min", ["values", "indices"])  # noqa: A001
sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
max.__module__ = min.__module__ = sort.__module__ = topk.__module__ = "lazytensor.return_types"
