"""One rank of tests/python/test_distributed.py's mismatch check (run by torchrun): the ranks sync
different graphs on `lazy` (or LT_TEST_DEVICE's device): an all_reduce of 5 elements on rank 0, of
6 elsewhere; each must raise a RuntimeError saying the collectives differ, not exchange mismatched
data or wait out the timeout. Prints "raised <rank>: <message> [after <s> s]"."""
import sys

import lazytensor as lt
import lazytensor.distributed as dist
from _common import init_group, must_raise, rank_device


def main():
    init_group(dist)
    rank = dist.get_rank()
    t = lt.ones(5 if rank == 0 else 6, device=rank_device())

    def reduce():
        dist.all_reduce(t)
        t.numpy()
    must_raise(rank, reduce)


if __name__ == "__main__":
    sys.exit(main())
