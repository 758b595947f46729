"""One rank of tests/python/test_distributed.py's check that DistributedDataParallel works under
lt.compile (issue 31): ddp.py's training (ranks start from different weights, DDP broadcasts rank
0's; a small MLP on slices of a global batch; SGD with momentum), the whole step compiled with
lt.compile: zero_grad, forward, backward with DDP's bucket all_reduces, the update. Rank 0 compares
losses and weights with one PyTorch process on the whole batch; the step is traced once and
replayed, and its graph compiled once. Prints "ok <rank>"."""
import sys


import lazytensor as lt
import lazytensor.distributed as dist
from _common import STEPS, check_against_one_process, ddp_from_own_start, rank_device, start

DEVICE = rank_device()


def main():
    rank, world, xs, ys, ref, lo, hi = start(dist)
    model, ddp, opt = ddp_from_own_start(lt, rank, DEVICE)  # DDP must replace rank r's start

    @lt.compile(fullgraph=True)
    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = lt.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    losses = []
    lt.mark_step()
    compiles0 = lt.metrics.counters()["graph_compiles"]
    for step in range(STEPS):
        x = lt.tensor(xs[step % 3][lo:hi], device=DEVICE)
        y = lt.tensor(ys[step % 3][lo:hi], device=DEVICE)
        loss = train_step(x, y)
        dist.all_reduce(loss, op="avg")
        losses.append(loss.item())
    compiles = lt.metrics.counters()["graph_compiles"] - compiles0
    if rank == 0:
        check_against_one_process(ref, xs, ys, losses, model)
    # The compiled step (forward, backward, the buckets' all_reduces, the update) and the loss
    # averaging: each compiled once, whatever the replays.
    assert compiles == 2, compiles
    print(f"ok {rank}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
