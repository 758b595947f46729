"""The DataLoader's worker processes: each takes (task id, indices) from its own queue, fetches and
collates that batch, and puts (task id, pickled batch) on the shared result queue. An exception is
sent back wrapped with its traceback and re-raised in the main process naming the worker.

Workers start with the "spawn" method by default: a forked child of a process whose CPU thread pool
has run would wait forever on pool threads that fork did not copy. So the dataset, collate_fn and
worker_init_fn must be picklable; tensors travel as NumPy arrays (the reducer below)."""
import os
import pickle
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import numpy as np

from ... import _C
from ..._utils import dtype_by_name

_POLL_S = 1.0  # how often an idle worker checks that its parent is still alive


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info = None


def get_worker_info():
    """In a DataLoader worker process: its WorkerInfo (id, num_workers, seed, dataset); else None."""
    return _worker_info


# ---- tensors across processes --------------------------------------------------------------

def _rebuild_tensor(array, dtype_name, device, requires_grad):
    from ..._creation import from_numpy
    t = from_numpy(array)
    dtype = dtype_by_name(dtype_name)
    if t.dtype != dtype:
        t = t.to(dtype)  # bfloat16 travels as float32 (exactly)
    if device != "cpu":
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _reduce_tensor(t):
    d = t.detach()
    if d.device != _C.device("cpu"):
        d = d.cpu()
    if d.dtype == _C.bfloat16:
        d = d.to(_C.float32)
    array = np.ascontiguousarray(d.numpy())
    return _rebuild_tensor, (array, str(t.dtype).rsplit(".", 1)[-1], str(t.device), t.requires_grad)


ForkingPickler.register(_C.Tensor, _reduce_tensor)


# ---- messages ------------------------------------------------------------------------------

class ExceptionWrapper:
    """An exception caught in a worker, with its formatted traceback, to re-raise in the parent."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.msg}"
        if self.exc_type is KeyError:
            msg = KeyError(msg)  # KeyError repr()s its message; keep the traceback readable
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


class IterableDatasetStopIteration:
    """Worker `worker_id`'s copy of an IterableDataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


RESUME = "resume"  # the main process's request to start a new epoch


class Resumed:
    """A worker's answer to RESUME: everything it sent before belongs to the last epoch."""


def _wrap_current(worker_id):
    return ExceptionWrapper(sys.exc_info(), where=f"in DataLoader worker process {worker_id}")


# ---- fetchers (used by the single-process iterator too) ------------------------------------

class MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation = dataset, auto_collation
        self.collate_fn, self.drop_last = collate_fn, drop_last

    def fetch(self, index):
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


class IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset_iter = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn, self.drop_last = collate_fn, drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def numpy_seed(base_seed, worker_id):
    return np.random.SeedSequence([worker_id, base_seed & 0xFFFFFFFF, base_seed >> 32]).generate_state(4)


def worker_loop(iterable, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn,
                drop_last, base_seed, init_fn, worker_id, num_workers, parent_pid):
    global _worker_info
    try:
        seed = base_seed + worker_id
        random.seed(seed)
        _C.manual_seed(seed & 0xFFFFFFFFFFFFFFFF)
        np.random.seed(numpy_seed(base_seed, worker_id))
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = (IterableFetcher if iterable else MapFetcher)(dataset, auto_collation,
                                                                     collate_fn, drop_last)
        except Exception:
            init_error = _wrap_current(worker_id)
        ended = False
        while True:
            try:
                task = index_queue.get(timeout=_POLL_S)
            except queue.Empty:
                if os.getppid() != parent_pid or done_event.is_set():  # nobody will read us
                    break
                continue
            if task is None or done_event.is_set():
                break
            if task == RESUME:  # a new epoch (persistent workers): a fresh iterator of the dataset
                if init_error is None:
                    fetcher = (IterableFetcher if iterable else MapFetcher)(
                        dataset, auto_collation, collate_fn, drop_last)
                ended = False
                data_queue.put(bytes(ForkingPickler.dumps((None, Resumed()))))
                continue
            if ended:
                continue
            idx, index = task
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if not iterable:
                        data = _wrap_current(worker_id)
                    else:
                        data, ended = IterableDatasetStopIteration(worker_id), True
                except Exception:
                    data = _wrap_current(worker_id)
            try:  # pickled here, not in the queue's feeder thread, so a failure is reported
                payload = ForkingPickler.dumps((idx, data), pickle.HIGHEST_PROTOCOL)
            except Exception:
                if isinstance(data, ExceptionWrapper):  # an exception class pickle cannot name
                    data.exc_type = RuntimeError
                else:  # a sample pickle cannot send
                    data = _wrap_current(worker_id)
                payload = ForkingPickler.dumps((idx, data))
            data_queue.put(bytes(payload))
            del data, task, payload
    except KeyboardInterrupt:
        pass
    data_queue.cancel_join_thread()  # exit without waiting for a reader that has gone
