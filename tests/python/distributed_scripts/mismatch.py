"""One rank of tests/python/test_distributed.py's mismatch check (run by torchrun): the ranks sync
different graphs (all_reduce of 5 elements on rank 0, of 6 elsewhere); each must raise a
RuntimeError saying the collectives differ, not exchange mismatched data or wait out the timeout.
Prints "raised <rank>: <message>"."""
import os
import sys

import lazytensor as lt
import lazytensor.distributed as dist
from _common import say


def main():
    dist.init_process_group()
    rank = dist.get_rank()
    t = lt.ones(5 if rank == 0 else 6, device="lazy")
    try:
        dist.all_reduce(t)
        t.numpy()
    except RuntimeError as e:
        say(f"raised {rank}: {str(e).splitlines()[0]}")
        os._exit(0)
    say(f"no error {rank}")
    os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
