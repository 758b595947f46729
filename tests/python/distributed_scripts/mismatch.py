"""One rank of tests/python/test_distributed.py's mismatch check (run by torchrun): the ranks sync
different graphs (all_reduce of 5 elements on rank 0, of 6 elsewhere); each must raise a
RuntimeError saying the collectives differ, not exchange mismatched data or wait out the timeout.
Prints "raised <rank>: <message>"."""
import sys

import lazytensor as lt
import lazytensor.distributed as dist
from _common import must_raise


def main():
    dist.init_process_group()
    rank = dist.get_rank()
    t = lt.ones(5 if rank == 0 else 6, device="lazy")

    def reduce():
        dist.all_reduce(t)
        t.numpy()
    must_raise(rank, reduce)


if __name__ == "__main__":
    sys.exit(main())
