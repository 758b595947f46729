"""Datasets for test_data_utils.py's worker processes: they start by spawn and unpickle these from
here, a module that imports no torch, so each starts in a fraction of a second."""
import os
import time

import lazytensor as lt
import lazytensor.utils.data as ltd


class PairDataset(ltd.Dataset):
    """Sample i: (a float32 row, an int label); `bad` raises, `die` kills the worker, `slow` sleeps."""

    def __init__(self, n, bad=None, die=None, slow=None):
        self.n, self.bad, self.die, self.slow = n, bad, die, slow

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError(f"sample {i} is broken")
        if i == self.die:
            os._exit(3)
        if i == self.slow:
            time.sleep(3)
        return lt.tensor([float(i), float(i) / 2, -float(i)]), i


class ShardedStream(ltd.IterableDataset):
    """0..n-1, split among the workers by get_worker_info()."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = ltd.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))

    def __len__(self):
        return self.n


INITIALIZED = None


def init_worker(worker_id):
    global INITIALIZED
    INITIALIZED = 100 + worker_id


class WorkerIdDataset(ltd.Dataset):
    """Sample i: the loading worker's id plus what init_worker set in it (100 + id)."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return ltd.get_worker_info().id + (INITIALIZED or 0)


class PidDataset(ltd.Dataset):
    """Sample i: (i, the pid of the process that loaded it)."""

    def __len__(self):
        return 9

    def __getitem__(self, i):
        return i, os.getpid()


class UnsendableDataset(ltd.Dataset):
    """Sample 0 holds a lambda (pickle cannot send it); sample 1 raises a local exception class."""

    def __len__(self):
        return 2

    def __getitem__(self, i):
        if i == 0:
            return lambda: None

        class LocalError(Exception):
            pass
        raise LocalError("a local exception class")
