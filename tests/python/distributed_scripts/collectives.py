"""One rank of tests/python/test_distributed.py's collective checks (run by torchrun): every rank
draws its values from a seed of its own rank, so each computes the expected results of all ranks
with numpy; all_reduce (sum, avg, max), broadcast and all_gather in float32, float64, float16,
bfloat16, int64 and int32 on `lazy` (one graph per sync, the collectives inside it), on
lazy:reference and on the eager `cpu` device; or, when LT_TEST_DEVICE names a device
(tests/gpu/check_ddp_cuda.py: "lazy:cuda:{local_rank}"), on that device alone. Prints
"ok <rank>"."""
import os
import sys

import numpy as np
import torch

import lazytensor as lt
import lazytensor.distributed as dist
from _common import init_group, rank_device, say

# The dtypes, each with its unit roundoff (2^-p, p its significand's bits): a sum of `world` values
# rounds at most once per addition (world - 1 times, whether a ring or a tree of partial sums adds
# them, each partial sum at most sum(|values|)) and an average at most twice more (a division, or a
# multiplication by a rounded 1/world), so both stay within (world + 1) * roundoff * sum(|values|)
# (divided by world for the average). Integers are exact.
DTYPES = {"float32": 2.0**-24, "float64": 2.0**-53, "float16": 2.0**-11, "bfloat16": 2.0**-8,
          "int64": 0.0, "int32": 0.0}


def values(rank, shape, dtype):
    """Rank `rank`'s values, exactly representable in `dtype` (a numpy dtype or one of DTYPES'
    names); bfloat16 ones (numpy has no bfloat16) rounded to it and held as float32."""
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    rng = np.random.default_rng(100 + rank)
    if name.startswith("int"):
        return rng.integers(-1000, 1000, shape).astype(name)
    v = rng.standard_normal(shape).astype(np.float32 if name == "bfloat16" else name)
    if name == "bfloat16":
        return torch.from_numpy(v).bfloat16().float().numpy()  # PyTorch's rounding, the oracle's
    return v


def to_lt(a, name, device):
    t = lt.tensor(a, device=device)
    return t.bfloat16() if name == "bfloat16" else t


def to_np(t):
    """The values as numpy (bfloat16 widened to float32, exactly)."""
    return (t.float() if t.dtype == lt.bfloat16 else t).numpy()


def check_all_reduce(device, name, all_vals, rank, world):
    mine, stack = all_vals[rank], np.stack(all_vals).astype(np.float64)
    floating = not name.startswith("int")
    for op in ["sum", "max"] + (["avg"] if floating else []):
        t = to_lt(mine, name, device)
        before = t * 1  # a computed value that reads t: must keep the old one
        dist.all_reduce(t, op=op)
        got = to_np(t).astype(np.float64)
        what = f"{device} {name} {op}"
        if op == "max" or not floating:
            # Max picks one of the values, integer sums wrap alike: exact.
            want = np.max(stack, axis=0) if op == "max" else np.sum(all_vals, axis=0)
            np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)
        else:
            div = world if op == "avg" else 1
            want = np.sum(stack, axis=0) / div
            bound = (world + 1) * DTYPES[name] * np.abs(stack).sum(axis=0) / div
            err = np.abs(got - want)
            assert np.all(err <= bound), (f"{what}: error {err.max():.3g} above the bound "
                                          f"{bound[np.argmax(err - bound)]:.3g}")
        np.testing.assert_array_equal(to_np(before), mine, err_msg=f"{what}: the input's old value")


def check_broadcast_and_gather(device, name, all_vals, rank, world):
    mine, shape = all_vals[rank], all_vals[rank].shape
    src = world - 1
    t = to_lt(mine, name, device)
    dist.broadcast(t, src=src)
    np.testing.assert_array_equal(to_np(t), all_vals[src], err_msg=f"{device} {name} broadcast")
    out = [lt.zeros(shape, dtype=getattr(lt, name), device=device) for _ in range(world)]
    dist.all_gather(out, to_lt(mine, name, device))
    for r in range(world):
        np.testing.assert_array_equal(to_np(out[r]), all_vals[r],
                                      err_msg=f"{device} {name} all_gather[{r}]")


def main():
    init_group(dist)
    rank, world = dist.get_rank(), dist.get_world_size()
    devices = [rank_device()] if os.environ.get("LT_TEST_DEVICE") else \
        ["lazy", "lazy:reference", "cpu"]
    for device in devices:
        for name in DTYPES:
            all_vals = [values(r, (7, 33), name) for r in range(world)]
            check_all_reduce(device, name, all_vals, rank, world)
            check_broadcast_and_gather(device, name, all_vals, rank, world)
    # A lazy graph with a collective between computations: one graph, the collective inside.
    x = lt.tensor(values(rank, (64,), np.float32), device=rank_device())
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
