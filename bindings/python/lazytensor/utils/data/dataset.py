"""Datasets, as torch.utils.data's: map-style (`__getitem__` + `__len__`) and iterable ones."""
import bisect
import itertools
import math
import numbers
import warnings

from ... import _C
from ..._creation import from_numpy
from ..._generator import Generator, default_seed
from ._collate import _host_array

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset",
           "ChainDataset", "Subset", "random_split"]


class Dataset:
    """A map-style dataset: subclasses define `__getitem__(index)` and usually `__len__()`."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define `__iter__()`. With several DataLoader workers
    each worker iterates its own copy; `get_worker_info()` tells a copy which share to yield."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is `tuple(t[i] for t in tensors)`; all tensors share their first dimension."""

    def __init__(self, *tensors):
        for t in tensors:
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"TensorDataset: expected Tensors, got {type(t).__name__}")
        if any(t.ndim == 0 for t in tensors) or len({t.shape[0] for t in tensors}) > 1:
            raise ValueError("Size mismatch between tensors: TensorDataset needs tensors with the "
                             f"same first dimension, got shapes {[tuple(t.shape) for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(_row(t, index) for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0] if self.tensors else 0


def _row(t, index):
    """t[index]; for an int index into a cpu tensor, a view of its memory made on the host (eager
    slicing compiles a kernel per offset, one per sample here)."""
    if isinstance(index, numbers.Integral) and not isinstance(index, bool):
        array = _host_array(t)
        if array is not None:
            n = array.shape[0]
            if not -n <= index < n:
                raise IndexError(f"index {index} is out of bounds for dimension 0 with size {n}")
            return from_numpy(array[index, ...])
    return t[index]


class StackDataset(Dataset):
    """Sample i is `tuple(d[i] for d in args)` or `{k: d[i] for k, d in kwargs.items()}`."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) "
                             "like input/output, but both types are given.")
        datasets = args or tuple(kwargs.values())
        if len({len(d) for d in datasets}) > 1:
            raise ValueError("Size mismatch between datasets")
        self._length = len(datasets[0]) if datasets else 0
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """The datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        i = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[i][idx - (self.cumulative_sizes[i - 1] if i > 0 else 0)]


class ChainDataset(IterableDataset):
    """Iterable datasets chained one after the other."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Splits `dataset` into non-overlapping Subsets of the given lengths, or of fractions of its
    length (summing to 1; the remainder is spread one by one, round-robin, as PyTorch does)."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * frac)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty "
                              "dataset.")
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    if any(int(x) != x or x < 0 for x in lengths):
        raise ValueError(f"random_split: lengths must be non-negative integers, got {lengths}")
    if generator is None:
        generator = Generator().manual_seed(default_seed())
    perm = generator._randperm(n).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + int(length)]))
        start += int(length)
    return out
