"""What the rank scripts of tests/python/test_distributed.py share: their output, the group and the
device (from the environment, so that tests/gpu/check_ddp_cuda.py runs the same scripts on GPUs),
the small MLP and data of the training checks, and the oracle (one PyTorch process, float64, whole
batch)."""
import os
import sys
import time

import numpy as np
import torch

BATCH = 12  # the global batch: divisible by 2 and 3 ranks
STEPS = 6


def say(line):
    """One write per line: the ranks share the launcher's pipe, and an unbuffered print() writes
    its pieces separately, so two ranks' lines could interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def rank_device():
    """The device the ranks compute on: LT_TEST_DEVICE, "lazy" when unset (the CPU tests), with
    "{local_rank}" replaced by this rank's LOCAL_RANK: tests/gpu/check_ddp_cuda.py sets
    "lazy:cuda:{local_rank}", each rank on its own GPU."""
    template = os.environ.get("LT_TEST_DEVICE") or "lazy"
    return template.replace("{local_rank}", os.environ.get("LOCAL_RANK", "0"))


def init_group(dist):
    """Joins the group with LT_TEST_BACKEND's backend ("gloo", "nccl"), and checks that the group
    runs on it (get_backend); unset or empty: the default (backend=None), as the CPU tests always
    did."""
    backend = os.environ.get("LT_TEST_BACKEND") or None
    dist.init_process_group(backend)
    assert backend is None or dist.get_backend() == backend, (dist.get_backend(), backend)


def must_raise(rank, collective, then=None):
    """Runs collective() (which must fail on every rank) and exits: prints "raised <rank>: <the
    RuntimeError's first line> [after <s> s]" (the seconds from the call to the error, so that a
    launcher can tell an error at the timeout from one after it), or "no error <rank>" and exits
    1. then(), when given, runs after the error (an exception there propagates: exit 1)."""
    t0 = time.perf_counter()
    try:
        collective()
    except RuntimeError as e:
        say(f"raised {rank}: {str(e).splitlines()[0]} [after {time.perf_counter() - t0:.1f} s]")
        if then is not None:
            then()  # what must still work after the error (its failure exits 1)
        os._exit(0)
    say(f"no error {rank}")
    os._exit(1)


def make(nn):
    return nn.Sequential(nn.Linear(10, 24), nn.Tanh(), nn.Linear(24, 5))


def ddp_from_own_start(lt, rank, device):
    """The DDP checks' model (ddp.py, ddp_compiled.py): the small MLP from this rank's own seed,
    which DistributedDataParallel must replace with rank 0's, wrapped with several buckets, and its
    SGD with momentum. Returns (the module, the DDP wrapper, the optimizer)."""
    from lazytensor.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(3 + rank)
    mine = make(torch.nn)
    model = make(lt.nn).to(device)
    model.load_state_dict({k: lt.tensor(v.detach().numpy(), device=device)
                           for k, v in mine.state_dict().items()})
    ddp = DDP(model, bucket_cap_mb=0.001)  # several buckets
    return model, ddp, lt.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)


def batches():
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((BATCH, 10)).astype(np.float32) for _ in range(3)]
    ys = [rng.integers(0, 5, BATCH) for _ in range(3)]
    return xs, ys


def start(dist):
    """Joins the group; returns (rank, world, xs, ys, ref, lo, hi): the batches, the oracle's
    float64 torch model (seed 3) and this rank's slice [lo, hi) of each batch."""
    init_group(dist)
    rank, world = dist.get_rank(), dist.get_world_size()
    xs, ys = batches()
    torch.manual_seed(3)
    ref = make(torch.nn).double()
    return rank, world, xs, ys, ref, rank * BATCH // world, (rank + 1) * BATCH // world


def check_against_one_process(ref, xs, ys, losses, model):
    """Trains `ref` (a float64 torch copy of the ranks' starting weights) on the whole batches with
    the same SGD, and compares the ranks' averaged losses and final weights to 1e-5."""
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    want = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(xs[step % 3]).double()),
                                                 torch.from_numpy(ys[step % 3]))
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=1e-5, atol=1e-6)
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(v.numpy(), ref.state_dict()[k].numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=k)
