"""DataLoader, as torch.utils.data.DataLoader: batches of a dataset's samples (lazytensor tensors on
"cpu"; move them with .to(device)), optionally shuffled, loaded in `num_workers` worker processes.

Main-process waits are bounded: the parent polls the result queue and checks that its workers are
alive, so a worker that dies is a RuntimeError naming it, and `timeout=` seconds without a batch
is a RuntimeError too. With `persistent_workers=True` the same worker processes serve every
epoch."""
import itertools
import multiprocessing
import numbers
import os
import pickle
import queue
import time
import weakref

from ..._generator import Generator, default_seed
from . import _worker
from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]

get_worker_info = _worker.get_worker_info
_POLL_S = 0.5        # the main process checks its workers' liveness this often while it waits
_JOIN_S = 2.0        # how long shutdown waits for the workers to exit before terminating them

_MAIN_GUARD = ("DataLoader workers start by 'spawn', which imports the main script again in each "
               "worker: a script that iterates a DataLoader with num_workers > 0 must do so under "
               "`if __name__ == \"__main__\":`")


class _InfiniteConstantSampler(Sampler):
    """The index "sampler" of an IterableDataset: None forever (the dataset yields the samples)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing. "
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if prefetch_factor is None:
            prefetch_factor = 2 if num_workers > 0 else None
        elif prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if generator is not None and not isinstance(generator, Generator):
            raise TypeError(f"generator must be a lazytensor.Generator, got {type(generator).__name__}")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        self._iterator = None  # the workers' iterator, kept across epochs with persistent_workers

        if self._iterable:
            if isinstance(shuffle, bool) and shuffle:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        if self._iterator is None or self._iterator._shutdown:
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator._reset()
        return self._iterator


class _BaseIter:
    def __init__(self, loader):
        # Not the loader itself: a persistent-workers loader keeps its iterator, and without a cycle
        # the workers stop as soon as the loader is dropped (not at a garbage collection, by when
        # the queues to them may be closed).
        self._loader_ref = weakref.ref(loader)
        self._index_sampler = loader._index_sampler
        self._prefetch = loader.prefetch_factor
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = default_seed(loader.generator)
        self._fetcher_args = (loader.dataset, loader._auto_collation, loader.collate_fn,
                              loader.drop_last)
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _next_index(self):
        return next(self._sampler_iter)

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        return data

    def __len__(self):
        return len(self._loader_ref())


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        fetcher = _worker.IterableFetcher if loader._iterable else _worker.MapFetcher
        self._fetcher = fetcher(*self._fetcher_args)

    def _next_data(self):
        return self._fetcher.fetch(self._next_index())


class _MultiProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._shutdown = True  # until every worker has started
        nw = loader.num_workers
        ctx = loader.multiprocessing_context or "spawn"
        if isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        if getattr(multiprocessing.current_process(), "_inheriting", False):
            raise RuntimeError(_MAIN_GUARD)
        self._timeout = loader.timeout
        self._data_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        self._workers_status = [True] * nw
        self._worker_cycle = itertools.cycle(range(nw))
        self._persistent = loader.persistent_workers
        try:
            for i in range(nw):
                index_queue = ctx.Queue()
                index_queue.cancel_join_thread()
                w = ctx.Process(target=_worker.worker_loop, daemon=True, args=(
                    loader._iterable, *self._fetcher_args[:1], index_queue, self._data_queue,
                    self._done_event, *self._fetcher_args[1:], self._base_seed,
                    loader.worker_init_fn, i, nw, os.getpid()))
                self._index_queues.append(index_queue)
                self._workers.append(w)
                w.start()
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            self._shutdown = False
            self._shutdown_workers()
            raise RuntimeError(
                f"DataLoader could not start worker process {len(self._workers) - 1}: {e}. Workers "
                f"start with the {ctx.get_start_method()!r} method, so the dataset, collate_fn and "
                "worker_init_fn must be picklable (defined at a module's top level, no lambdas)") \
                from e
        self._shutdown = False
        self._reset(first=True)

    def _reset(self, first=False):
        """Starts an epoch; a later one (persistent workers) first has every worker restart its
        fetcher and drops what the last epoch left in flight, up to each worker's answer."""
        if not first:
            self._sampler_iter = iter(self._index_sampler)
            self._num_yielded = 0
            for q in self._index_queues:
                q.put(_worker.RESUME)
            waiting = len(self._workers)
            while waiting:
                waiting -= isinstance(self._get_data()[1], _worker.Resumed)
        self._workers_status = [True] * len(self._workers)
        self._send_idx = self._rcvd_idx = 0
        self._task_info = {}  # task id -> (worker id,) while pending, (worker id, data) once early
        for _ in range(self._prefetch * len(self._workers)):
            self._try_put_index()

    def _try_put_index(self):
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(len(self._workers)):
            worker_id = next(self._worker_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return  # every worker's dataset copy is exhausted
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._send_idx += 1

    def _try_get_data(self, timeout):
        try:
            return True, pickle.loads(self._data_queue.get(timeout=timeout))
        except queue.Empty:
            dead = [(i, w) for i, w in enumerate(self._workers)
                    if self._workers_status[i] and not w.is_alive()]
            if dead:
                self._shutdown_workers()
                names = ", ".join(f"{i} (pid {w.pid}, exit code {w.exitcode})" for i, w in dead)
                hint = f" ({_MAIN_GUARD})" if any(w.exitcode == 1 for _, w in dead) else ""
                raise RuntimeError(f"DataLoader worker process {names} exited unexpectedly{hint}") \
                    from None
            return False, None

    def _get_data(self):
        if self._timeout > 0:
            ok, data = self._try_get_data(self._timeout)
            if not ok:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
            return data
        while True:
            ok, data = self._try_get_data(_POLL_S)
            if ok:
                return data

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]  # its worker's iterable ended first
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process_data(data)
            if self._shutdown:
                raise StopIteration
            idx, data = self._get_data()
            if isinstance(data, _worker.IterableDatasetStopIteration):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)
                continue
            del self._task_info[idx]
            self._rcvd_idx += 1
            return self._process_data(data)

    def _process_data(self, data):
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        self._done_event.set()
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + _JOIN_S
        for w in self._workers:
            if w.pid is None:  # its start failed
                continue
            w.join(timeout=max(0.0, deadline - time.monotonic()))
            if w.is_alive():
                w.terminate()
                w.join(timeout=_JOIN_S)
        for q in self._index_queues + [self._data_queue]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            pass
