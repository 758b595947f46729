"""One rank of tests/python/test_distributed.py's failure check (run by torchrun): the last rank
dies after the group's first barrier; every other rank's next all_reduce must raise RuntimeError
(a peer gone, or LT_DIST_TIMEOUT) instead of hanging. Prints "raised <rank>: <message>"."""
import os
import sys

import lazytensor as lt
import lazytensor.distributed as dist
from _common import must_raise


def main():
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.barrier()  # every rank fully connected: the death below is mid-training, not mid-join
    if rank == world - 1:
        os._exit(0)  # dies without leaving the group
    t = lt.ones(5, device="lazy")

    def reduce():
        dist.all_reduce(t)
        t.numpy()
    must_raise(rank, reduce)


if __name__ == "__main__":
    sys.exit(main())
