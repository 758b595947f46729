"""One rank of tests/python/test_distributed.py's collective checks (run by torchrun): every rank
draws its values from a seed of its own rank, so each computes the expected results of all ranks
with numpy; all_reduce (sum, avg, max), broadcast and all_gather on `lazy` (one graph per sync, the
collectives inside it), on lazy:reference and on the eager `cpu` device. Prints "ok <rank>"."""
import sys

import numpy as np

import lazytensor as lt
import lazytensor.distributed as dist
from _common import say


def values(rank, shape, dtype):
    rng = np.random.default_rng(100 + rank)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def main():
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    for device in ["lazy", "lazy:reference", "cpu"]:
        for dtype, tol in [(np.float32, 1e-6), (np.float64, 1e-12), (np.int64, 0), (np.int32, 0)]:
            shape = (7, 33)
            all_vals = [values(r, shape, dtype) for r in range(world)]
            mine = all_vals[rank]
            ops = ["sum", "max"] + (["avg"] if np.issubdtype(dtype, np.floating) else [])
            for op in ops:
                t = lt.tensor(mine, device=device)
                before = t * 1  # a computed value that reads t: must keep the old one
                dist.all_reduce(t, op=op)
                want = {"sum": np.sum, "max": np.max, "avg": np.mean}[op](np.stack(all_vals), axis=0)
                np.testing.assert_allclose(t.numpy(), want.astype(dtype), rtol=tol, atol=tol,
                                           err_msg=f"{device} {dtype.__name__} {op}")
                np.testing.assert_array_equal(before.numpy(), mine)
            src = world - 1
            t = lt.tensor(mine, device=device)
            dist.broadcast(t, src=src)
            np.testing.assert_array_equal(t.numpy(), all_vals[src])
            out = [lt.zeros(shape, dtype=lt.tensor(mine).dtype, device=device) for _ in range(world)]
            dist.all_gather(out, lt.tensor(mine, device=device))
            for r in range(world):
                np.testing.assert_array_equal(out[r].numpy(), all_vals[r])
    # A lazy graph with a collective between computations: one graph, the collective inside.
    x = lt.tensor(values(rank, (64,), np.float32), device="lazy")
    y = (x.exp() * 2)
    dist.all_reduce(y, op="sum")
    z = (y + 1).sum()
    want = sum(np.exp(values(r, (64,), np.float32)).astype(np.float64) * 2 for r in range(world)) + 1
    np.testing.assert_allclose(z.item(), want.sum(), rtol=1e-5)
    dist.barrier()
    dist.destroy_process_group()
    say(f"ok {rank}")


if __name__ == "__main__":
    sys.exit(main())
