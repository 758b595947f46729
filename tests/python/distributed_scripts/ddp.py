"""One rank of tests/python/test_distributed.py's DistributedDataParallel check (run by torchrun):
ranks start from different weights (DDP broadcasts rank 0's), train 6 steps of a small MLP on
their slices of a global batch through lt.nn.parallel.DistributedDataParallel on `lazy` (or
LT_TEST_DEVICE's device: _common.rank_device), and rank 0 compares losses and weights with one
PyTorch process on the whole batch; the step's graph is compiled once. Then no_sync(): local
gradients stay local. Prints "ok <rank>"."""
import sys

import numpy as np

import lazytensor as lt
import lazytensor.distributed as dist
from _common import STEPS, check_against_one_process, ddp_from_own_start, rank_device, say, start

DEVICE = rank_device()  # "lazy", or LT_TEST_DEVICE's (tests/gpu/check_ddp_cuda.py)


def assert_all_reduces(grouping):
    """The step's gradient all_reduces: one per parameter where DDP reduces each gradient alone
    (LT_DDP_REDUCE=per_tensor or bucket), else one per bucket (_common's cap makes two of the four, and all
    four are below "mixed"'s size for reducing a gradient alone)."""
    steps = [ln for ln in grouping.splitlines() if ln.split(":")[0].endswith("all_reduce")]
    want = 4 if lt._C.distributed.ddp_reduce_mode() in ("per_tensor", "bucket") else 2
    assert len(steps) == want, (want, steps, grouping[:2000])


def main():
    rank, world, xs, ys, ref, lo, hi = start(dist)
    model, ddp, opt = ddp_from_own_start(lt, rank, DEVICE)  # DDP must replace rank r's start
    losses = []
    lt.mark_step()
    compiles0 = lt.metrics.counters()["graph_compiles"]
    for step in range(STEPS):
        x = lt.tensor(xs[step % 3][lo:hi], device=DEVICE)
        y = lt.tensor(ys[step % 3][lo:hi], device=DEVICE)
        opt.zero_grad(set_to_none=True)
        loss = lt.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()  # ends the step: forward, backward, the all_reduces and the update, one graph
        if step == 0:
            assert_all_reduces(lt.metrics.last_graph().get("grouping", ""))
        mean_loss = loss.detach() * 1
        dist.all_reduce(mean_loss, op="avg")
        losses.append(mean_loss.item())
    compiles = lt.metrics.counters()["graph_compiles"] - compiles0
    if rank == 0:
        check_against_one_process(ref, xs, ys, losses, model)
    # Two graphs, each compiled once: the training step (forward, backward, the buckets'
    # all_reduces, the update) and the loss averaging.
    assert compiles == 2, compiles
    # no_sync: the gradient of this rank's slice only, so ranks differ.
    opt.zero_grad(set_to_none=True)
    with ddp.no_sync():
        lt.nn.functional.cross_entropy(ddp(lt.tensor(xs[0][lo:hi], device=DEVICE)),
                                       lt.tensor(ys[0][lo:hi], device=DEVICE)).backward()
    g = model[0].weight.grad
    gathered = [lt.zeros(tuple(g.shape), device=DEVICE) for _ in range(world)]
    dist.all_gather(gathered, g)
    assert not np.allclose(gathered[0].numpy(), gathered[1].numpy())
    dist.destroy_process_group()
    say(f"ok {rank}")


if __name__ == "__main__":
    sys.exit(main())
