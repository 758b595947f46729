"""Named tuples returned by reductions with values and indices (PyTorch's torch.return_types)."""
from collections import namedtuple

__all__ = ["max", "min"]

max = namedtuple("max", ["values", "indices"])  # noqa: A001
min = namedtuple("min", ["values", "indices"])  # noqa: A001
max.__module__ = min.__module__ = "lazytensor.return_types"
