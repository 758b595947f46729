"""Samplers, as torch.utils.data's: iterables of dataset indices (or, BatchSampler, of lists)."""
import numbers

import numpy as np

from ... import _C
from ..._generator import Generator, default_seed

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


def _generator_or_fresh(generator):
    """`generator` itself, or (None) a new one seeded from the global generator, per iteration."""
    if generator is None:
        return Generator().manual_seed(default_seed())
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a lazytensor.Generator, got {type(generator).__name__}")
    return generator


def _check_positive_int(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


class Sampler:
    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices (or `num_samples` draws with replacement); a new order
    each epoch."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _check_positive_int(self.num_samples, "num_samples")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = _generator_or_fresh(self.generator)
        if self.replacement:  # drawn in chunks: num_samples may be huge (minGPT asks for 1e10)
            for start in range(0, self.num_samples, 1024):
                yield from g._integers(n, min(1024, self.num_samples - start)).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from g._randperm(n).tolist()
        yield from g._randperm(n)[:self.num_samples % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, a new one each epoch."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        g = _generator_or_fresh(self.generator)
        for i in g._randperm(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probability proportional to `weights`."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _check_positive_int(num_samples, "num_samples")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        w = weights.to(_C.float64).numpy() if isinstance(weights, _C.Tensor) \
            else np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise RuntimeError("invalid multinomial distribution (weights must be finite, "
                               "non-negative and not all zero)")
        if not replacement and num_samples > int((w > 0).sum()):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                               "replacement")
        self.weights = w
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        g = _generator_or_fresh(self.generator)
        p = self.weights / self.weights.sum()
        yield from g._rng.choice(len(p), size=self.num_samples, replace=self.replacement,
                                 p=p).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of `batch_size` indices from `sampler`; the last one shorter unless `drop_last`."""

    def __init__(self, sampler, batch_size, drop_last):
        _check_positive_int(batch_size, "batch_size")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
