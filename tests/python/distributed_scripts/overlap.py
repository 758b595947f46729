"""One rank of tests/python/test_distributed.py's overlap check (run by torchrun): a 6-layer MLP
trained through DistributedDataParallel on `lazy` with one bucket per layer, LT_PROFILE writing
each rank's Chrome trace; a gradient bucket's all_reduce (a collective step, run on the CPU
backend's collective worker) must overlap in time with kernels of the same step's backward pass
that run after it: tests/python/test_distributed.py reads the traces (written at exit). Prints
"ok <rank>"."""
import json
import os
import sys

TRACE = os.path.join(os.environ["LT_TEST_TRACE_DIR"], f"trace_{os.environ['RANK']}.json")
os.environ["LT_PROFILE"] = TRACE  # read when lazytensor loads

import numpy as np  # noqa: E402

import lazytensor as lt  # noqa: E402
import lazytensor.distributed as dist  # noqa: E402
from _common import say  # noqa: E402
from lazytensor.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def main():
    dist.init_process_group()
    rank = dist.get_rank()
    lt.manual_seed(0)
    d = 512
    layers = []
    for _ in range(6):
        layers += [lt.nn.Linear(d, d), lt.nn.Tanh()]
    model = DDP(lt.nn.Sequential(*layers).to("lazy"), bucket_cap_mb=1.1)  # a layer a bucket
    opt = lt.optim.SGD(model.parameters(), lr=0.01)
    rng = np.random.default_rng(rank)
    x = lt.tensor(rng.standard_normal((256, d)).astype(np.float32), device="lazy")
    lt.mark_step()
    for _ in range(4):
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
    lt.sync()
    dist.destroy_process_group()
    say(f"ok {rank}")


if __name__ == "__main__":
    sys.exit(main())
