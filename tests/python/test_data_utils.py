"""lt.utils.data against torch.utils.data on the same data: batch contents, order, dtypes and
lengths of DataLoader (batching, drop_last, samplers, collate of tensors, numbers, NumPy arrays,
tuples and dicts), shuffling (each epoch a permutation, epochs differ, a seeded generator repeats),
worker processes (same batches as in-process; a worker's exception, death or slowness is an error
in the main process, never a hang), random_split and the samplers; and lt.clone."""
import collections
import os
import time

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import lazytensor as lt
import lazytensor.utils.data as ltd
# Worker processes unpickle these from a module that does not import torch (fast to start).
from data_utils_datasets import (PairDataset, PidDataset, ShardedStream, UnsendableDataset,
                                 WorkerIdDataset, init_worker)

# ---- comparison helpers -----------------------------------------------------------------------

def plain(obj):
    """A batch of either library as plain Python: tensors -> ("T", dtype name, nested list)."""
    if isinstance(obj, (torch.Tensor, lt.Tensor)):
        name = str(obj.dtype).rsplit(".", 1)[-1]
        return ("T", name, obj.float().tolist() if name == "bfloat16" else obj.tolist())
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return (type(obj).__name__, *(plain(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(plain(v) for v in obj)
    return obj


def batches(loader):
    return [plain(b) for b in loader]


def both(make_data, **kwargs):
    """The batches of torch's and lazytensor's DataLoader over the same samples."""
    return (batches(tud.DataLoader(make_data(torch), **kwargs)),
            batches(ltd.DataLoader(make_data(lt), **kwargs)))


def tensor_data(mod, n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3) / 4
    y = np.arange(n, dtype=np.int64) * 7 % 5
    ds = tud.TensorDataset if mod is torch else ltd.TensorDataset
    return ds(mod.from_numpy(x.copy()), mod.from_numpy(y.copy()))


# ---- DataLoader without workers, against torch ---------------------------------------------

@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (10, False),
                                                  (4, True), (16, False)])
def test_tensor_dataset_batches_match_torch(batch_size, drop_last):
    t, ours = both(tensor_data, batch_size=batch_size, drop_last=drop_last)
    assert ours == t
    assert len(ltd.DataLoader(tensor_data(lt), batch_size=batch_size, drop_last=drop_last)) == \
        len(tud.DataLoader(tensor_data(torch), batch_size=batch_size, drop_last=drop_last))


def test_collate_of_dicts_tuples_numbers_and_numpy_matches_torch():
    def samples(mod):
        return [{"x": mod.tensor([i, i + 1], dtype=mod.float32), "label": i % 3,
                 "weight": 0.5 * i, "flag": i % 2 == 0, "name": f"s{i}",
                 "np": np.full((2, 2), i, dtype=np.int32), "np_scalar": np.float64(i) / 3,
                 "pair": (mod.tensor(i), [i, 2 * i]),
                 "nested": {"h": mod.full((1,), float(i), dtype=mod.float16)}}
                for i in range(7)]
    t, ours = both(samples, batch_size=3)
    assert ours == t
    assert ours[0]["label"][1] == "int64" and ours[0]["weight"][1] == "float64"
    assert ours[0]["flag"][1] == "bool" and ours[0]["np"][1] == "int32"
    assert isinstance(ours[0]["pair"], list)  # a tuple of fields collates to a list, as in torch


def test_collate_named_tuples_and_batch_size_none_match_torch():
    Point = collections.namedtuple("Point", "x y")

    def samples(mod):
        return [Point(mod.tensor([float(i)]), np.int64(i)) for i in range(5)]
    t, ours = both(samples, batch_size=2)
    assert ours == t
    t, ours = both(lambda mod: [(np.arange(3) + i, float(i)) for i in range(3)], batch_size=None)
    assert ours == t  # no batching: NumPy arrays become tensors, numbers stay numbers


def test_collate_errors_like_torch():
    with pytest.raises(RuntimeError, match="equal size"):
        list(ltd.DataLoader([lt.ones(2), lt.ones(3)], batch_size=2))
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        list(ltd.DataLoader([object(), object()], batch_size=2))


def test_custom_collate_fn_sampler_and_batch_sampler():
    ds = tensor_data(lt)
    got = list(ltd.DataLoader(ds, batch_size=4, collate_fn=lambda b: [int(y) for _, y in b]))
    assert got == [[int(y) for _, y in (ds[i] for i in range(k, min(k + 4, 10)))]
                   for k in range(0, 10, 4)]
    order = [9, 0, 8, 1]
    t = batches(tud.DataLoader(tensor_data(torch), batch_size=2, sampler=order))
    assert batches(ltd.DataLoader(ds, batch_size=2, sampler=order)) == t
    bs = [[3, 1], [0], [9, 9, 2]]
    assert batches(ltd.DataLoader(ds, batch_sampler=bs)) == \
        batches(tud.DataLoader(tensor_data(torch), batch_sampler=bs))
    with pytest.raises(ValueError, match="mutually exclusive"):
        ltd.DataLoader(ds, batch_sampler=bs, batch_size=2)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        ltd.DataLoader(ds, sampler=order, shuffle=True)


def test_iterable_dataset_batches_match_torch():
    class Stream(ltd.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    class TorchStream(tud.IterableDataset):
        def __iter__(self):
            return iter(range(7))
    for drop_last in (False, True):
        assert batches(ltd.DataLoader(Stream(), batch_size=3, drop_last=drop_last)) == \
            batches(tud.DataLoader(TorchStream(), batch_size=3, drop_last=drop_last))
    with pytest.raises(ValueError, match="shuffle"):
        ltd.DataLoader(Stream(), shuffle=True)


def test_shuffle_is_a_new_permutation_each_epoch_and_a_generator_repeats():
    ds = ltd.TensorDataset(lt.arange(50))
    loader = ltd.DataLoader(ds, batch_size=8, shuffle=True)
    epochs = [[v for (b,) in loader for v in b.tolist()] for _ in range(2)]
    for e in epochs:
        assert sorted(e) == list(range(50))
    assert epochs[0] != epochs[1]

    def seeded():
        g = lt.Generator().manual_seed(123)
        return [v for (b,) in ltd.DataLoader(ds, batch_size=8, shuffle=True, generator=g)
                for v in b.tolist()]
    assert seeded() == seeded() != list(range(50))
    lt.manual_seed(7)
    a = [v for (b,) in loader for v in b.tolist()]
    lt.manual_seed(7)
    assert [v for (b,) in loader for v in b.tolist()] == a


def test_tensor_dataset_rows_are_the_tensors_rows_on_both_devices():
    for device in ("cpu", "lazy"):
        x = lt.arange(12.0, device=device).reshape(4, 3)
        ds = ltd.TensorDataset(x, lt.arange(4, device=device))
        assert len(ds) == 4 and ds[2][0].tolist() == [6.0, 7.0, 8.0] and ds[-1][1].item() == 3
        assert [b[0].tolist() for b in ltd.DataLoader(ds, batch_size=3)] == \
            [x[:3].tolist(), x[3:].tolist()]
    with pytest.raises(IndexError):
        ltd.TensorDataset(lt.ones(3))[3]
    with pytest.raises(ValueError, match="Size mismatch"):
        ltd.TensorDataset(lt.ones(3), lt.ones(4))


def test_cpu_tensor_dataset_compiles_no_kernel_per_sample():
    ds = ltd.TensorDataset(lt.randn(300, 4), lt.arange(300))
    list(ltd.DataLoader(ds, batch_size=32))  # warm
    lt.metrics.reset()
    out = list(ltd.DataLoader(ds, batch_size=32, shuffle=True))
    assert len(out) == 10
    assert lt.metrics.counters()["kernels_compiled"] <= 2


# ---- worker processes -------------------------------------------------------------------------

def test_two_workers_give_the_same_batches_as_none():
    ds = PairDataset(23)
    one = batches(ltd.DataLoader(ds, batch_size=4))
    assert batches(ltd.DataLoader(ds, batch_size=4, num_workers=2)) == one
    t = batches(tud.DataLoader([(torch.tensor([float(i), i / 2, -float(i)]), i) for i in range(23)],
                               batch_size=4))
    assert one == t


def test_workers_with_shuffle_drop_last_and_a_tensor_dataset():
    ds = tensor_data(lt, 30)
    loader = ltd.DataLoader(ds, batch_size=4, shuffle=True, drop_last=True, num_workers=2,
                            generator=lt.Generator().manual_seed(5))
    got = batches(loader)
    assert len(got) == len(loader) == 7 and all(len(b[1][2]) == 4 for b in got)
    assert got == batches(ltd.DataLoader(ds, batch_size=4, shuffle=True, drop_last=True,
                                         generator=lt.Generator().manual_seed(5)))
    rows = sorted(r for b in got for r in b[0][2])
    assert len(set(map(tuple, rows))) == 28


def test_iterable_dataset_sharded_across_workers_and_worker_info():
    got = [v for b in ltd.DataLoader(ShardedStream(11), batch_size=2, num_workers=2)
           for v in b.tolist()]
    assert sorted(got) == list(range(11))
    ids = [v for b in ltd.DataLoader(WorkerIdDataset(), batch_size=2, num_workers=2,
                                     worker_init_fn=init_worker)
           for v in b.tolist()]
    # batches go round-robin and come back in order; each worker ran worker_init_fn first
    assert ids == [100, 100, 102, 102, 100, 100, 102, 102]
    assert ltd.get_worker_info() is None


def test_persistent_workers_serve_every_epoch_even_after_a_break():
    loader = ltd.DataLoader(PidDataset(), batch_size=2, num_workers=2, persistent_workers=True)
    first = [(i.tolist(), p.tolist()) for i, p in loader]
    assert [v for i, _ in first for v in i] == list(range(9))
    pids = {q for _, p in first for q in p}
    assert len(pids) == 2 and os.getpid() not in pids
    for i, _ in loader:  # leave the epoch with batches in flight
        break
    again = [(i.tolist(), p.tolist()) for i, p in loader]
    assert again == first  # same order, same worker per batch, same processes
    stream = ltd.DataLoader(ShardedStream(7), batch_size=2, num_workers=2, persistent_workers=True)
    for _ in range(2):
        assert sorted(v for b in stream for v in b.tolist()) == list(range(7))


def test_a_worker_exception_is_raised_in_the_main_process_naming_the_worker():
    loader = ltd.DataLoader(PairDataset(12, bad=5), batch_size=2, num_workers=2)
    it = iter(loader)
    assert next(it)[1].tolist() == [0, 1]
    assert next(it)[1].tolist() == [2, 3]
    with pytest.raises(ValueError, match=r"(?s)in DataLoader worker process 0.*sample 5 is broken"):
        next(it)
    del it


def test_a_dead_or_slow_worker_is_an_error_not_a_hang():
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker process \d \(pid \d+, exit code 3\) exited"):
        list(ltd.DataLoader(PairDataset(6, die=3), batch_size=1, num_workers=2))
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        list(ltd.DataLoader(PairDataset(6, slow=0), batch_size=1, num_workers=1, timeout=0.5))
    assert time.monotonic() - t0 < 20


def test_a_sample_or_exception_that_cannot_be_sent_is_an_error_in_the_main_process():
    it = iter(ltd.DataLoader(UnsendableDataset(), batch_size=None, num_workers=1))
    with pytest.raises(Exception, match=r"(?s)in DataLoader worker process 0.*pickle"):
        next(it)
    with pytest.raises(RuntimeError, match=r"(?s)LocalError.*a local exception class"):
        next(it)


def test_an_unpicklable_collate_fn_is_a_clear_error():
    with pytest.raises(RuntimeError, match="must be picklable"):
        iter(ltd.DataLoader(PairDataset(4), num_workers=1, collate_fn=lambda b: b))


def test_loader_argument_errors_like_torch():
    with pytest.raises(ValueError, match="num_workers"):
        ltd.DataLoader(PairDataset(4), num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor"):
        ltd.DataLoader(PairDataset(4), prefetch_factor=2)
    with pytest.raises(ValueError, match="drop_last"):
        ltd.DataLoader(PairDataset(4), batch_size=None, drop_last=True)


# ---- random_split, Subset, ConcatDataset, samplers --------------------------------------------

@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.5, 0.25, 0.25], [0.34, 0.33, 0.33],
                                     [10], [0.1] * 10])
def test_random_split_sizes_and_disjointness_match_torch(lengths):
    ds = list(range(10, 20))
    ours = ltd.random_split(ds, lengths, generator=lt.Generator().manual_seed(0))
    theirs = tud.random_split(ds, lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    values = [v for s in ours for v in s]
    assert sorted(values) == ds and all(isinstance(s, ltd.Subset) for s in ours)
    again = ltd.random_split(ds, lengths, generator=lt.Generator().manual_seed(0))
    assert [list(s) for s in again] == [list(s) for s in ours]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        ltd.random_split(ds, [3, 3])


def test_subset_and_concat_dataset():
    ds = ltd.ConcatDataset([list(range(3)), list(range(10, 14))])
    assert len(ds) == 7 and [ds[i] for i in range(7)] == [0, 1, 2, 10, 11, 12, 13] and ds[-1] == 13
    sub = ltd.Subset(ds, [6, 0, 4])
    assert [sub[i] for i in range(3)] == [13, 0, 11] and len(sub) == 3
    assert [b.tolist() for b in ltd.DataLoader(sub, batch_size=2)] == [[13, 0], [11]]


def test_samplers():
    g = lt.Generator().manual_seed(1)
    perm = list(ltd.RandomSampler(range(20), generator=g))
    assert sorted(perm) == list(range(20)) and perm != list(range(20))
    draws = list(ltd.RandomSampler(range(5), replacement=True, num_samples=50, generator=g))
    assert len(draws) == 50 and set(draws) <= set(range(5))
    assert len(list(ltd.RandomSampler(range(5), num_samples=12))) == 12
    huge = iter(ltd.RandomSampler(range(5), replacement=True, num_samples=10**10))
    assert len([next(huge) for _ in range(3000)]) == 3000  # drawn lazily, as minGPT's trainer asks
    assert list(ltd.SequentialSampler(range(4))) == [0, 1, 2, 3]
    sub = list(ltd.SubsetRandomSampler([2, 4, 6, 8], generator=g))
    assert sorted(sub) == [2, 4, 6, 8]
    w = list(ltd.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 400, generator=g))
    assert set(w) == {1, 3} and 200 < w.count(3) < 380
    assert sorted(ltd.WeightedRandomSampler(lt.tensor([1.0, 2, 3]), 3, replacement=False)) == [0, 1, 2]
    bs = ltd.BatchSampler(ltd.SequentialSampler(range(7)), 3, drop_last=False)
    assert list(bs) == list(tud.BatchSampler(tud.SequentialSampler(range(7)), 3, False))
    assert len(bs) == 3 and len(ltd.BatchSampler(range(7), 3, True)) == 2
    with pytest.raises(ValueError, match="batch_size"):
        ltd.BatchSampler(range(3), 0, False)


# ---- lt.clone ------------------------------------------------------------------------------

@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_clone_function(device):
    x = lt.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    c = lt.clone(x)
    assert c.tolist() == [1.0, 2.0, 3.0] and c.dtype == lt.float32 and c.device == x.device
    (c * c).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    b = lt.clone(lt.tensor([True, False], device=device))
    assert b.dtype == lt.bool and b.tolist() == [True, False]
    assert lt.Tensor.clone is not None


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (12, 4, False),
                                                  (2, 4, False)])
def test_distributed_sampler_shares_match_torch(n, replicas, drop_last):
    for shuffle in (False, True):
        shares = []
        for rank in range(replicas):
            ours = ltd.DistributedSampler(range(n), replicas, rank, shuffle=shuffle,
                                          drop_last=drop_last)
            theirs = tud.distributed.DistributedSampler(range(n), replicas, rank, shuffle=shuffle,
                                                        drop_last=drop_last)
            ours.set_epoch(1)
            shares.append(list(ours))
            assert len(ours) == len(theirs) == len(shares[-1])
            if not shuffle:
                assert shares[-1] == list(theirs)
        flat = sorted(v for s in shares for v in s)
        assert set(flat) == set(range(n)) if not drop_last else set(flat) <= set(range(n))
    with pytest.raises(RuntimeError, match="num_replicas"):
        ltd.DistributedSampler(range(4))


def test_a_training_loop_over_a_loader_matches_on_cpu_and_lazy_with_one_compile_per_shape():
    lt.manual_seed(0)
    x = lt.randn(100, 8)
    y = (x.sum(1) > 0).long()
    losses = {}
    for dev in ("cpu", "lazy"):
        lt.manual_seed(0)
        model = lt.nn.Sequential(lt.nn.Linear(8, 16), lt.nn.ReLU(), lt.nn.Linear(16, 2)).to(dev)
        opt = lt.optim.SGD(model.parameters(), lr=0.1)
        loader = ltd.DataLoader(ltd.TensorDataset(x, y), batch_size=32, shuffle=True,
                                generator=lt.Generator().manual_seed(1))
        lt.metrics.reset()
        losses[dev] = []
        for _ in range(2):
            for data, target in loader:
                assert data.device == lt.device("cpu")
                loss = lt.nn.functional.cross_entropy(model(data.to(dev)), target.to(dev))
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses[dev].append(loss.item())
        if dev == "lazy":  # a full batch and the last, shorter one: two step graphs, then replays
            assert lt.metrics.counters()["graph_compiles"] == 2
    np.testing.assert_allclose(losses["lazy"], losses["cpu"], rtol=1e-5, atol=1e-6)
