"""One rank of tests/python/test_distributed.py's failure check (run by torchrun): the last rank
dies after the group's first barrier; every other rank's next all_reduce (on `lazy`, or
LT_TEST_DEVICE's device) must raise RuntimeError (a peer gone, or LT_DIST_TIMEOUT) instead of
hanging. Prints "raised <rank>: <message> [after <s> s]". Then the process must keep working:
destroy_process_group() returns, and a new computation on the same device gives the right values
(prints "alive <rank>")."""
import os
import sys

import lazytensor as lt
import lazytensor.distributed as dist
from _common import init_group, must_raise, rank_device, say


def main():
    init_group(dist)
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.barrier()  # every rank fully connected: the death below is mid-training, not mid-join
    if rank == world - 1:
        os._exit(0)  # dies without leaving the group
    t = lt.ones(5, device=rank_device())

    def reduce():
        dist.all_reduce(t)
        t.numpy()

    def keeps_working():
        dist.destroy_process_group()  # leaves the broken group without a hang or a crash
        u = lt.arange(4, device=rank_device()) * 3
        assert u.numpy().tolist() == [0, 3, 6, 9], u.numpy()
        assert not dist.is_initialized()
        say(f"alive {rank}")
    must_raise(rank, reduce, then=keeps_working)


if __name__ == "__main__":
    sys.exit(main())
