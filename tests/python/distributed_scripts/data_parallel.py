"""One rank of tests/python/test_distributed.py's data-parallel check (run by torchrun): a small
MLP trained 6 steps on `lazy` (or LT_TEST_DEVICE's device: _common.rank_device), each rank on its
slice of a global batch, the gradients averaged with lt.distributed.all_reduce(op="avg") before
SGD with momentum; rank 0 compares the losses and final weights with the same training in one
PyTorch process on the whole batch. Prints "ok <rank>"."""
import sys

import numpy as np
import torch

import lazytensor as lt
import lazytensor.distributed as dist
from _common import STEPS, check_against_one_process, make, rank_device, say, start

DEVICE = rank_device()  # "lazy", or LT_TEST_DEVICE's (tests/gpu/check_ddp_cuda.py)


def main():
    rank, world, xs, ys, ref, lo, hi = start(dist)
    state = {k: v.detach().numpy().astype(np.float32) for k, v in ref.state_dict().items()}
    model = make(lt.nn).to(DEVICE)
    model.load_state_dict({k: lt.tensor(v, device=DEVICE) for k, v in state.items()})
    opt = lt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step in range(STEPS):
        x = lt.tensor(xs[step % 3][lo:hi], device=DEVICE)
        y = lt.tensor(ys[step % 3][lo:hi], device=DEVICE)
        opt.zero_grad(set_to_none=True)
        loss = lt.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, op="avg")
        opt.step()
        mean_loss = loss.detach() * 1
        dist.all_reduce(mean_loss, op="avg")  # equal slices: the global batch's mean loss
        losses.append(mean_loss.item())
    if rank == 0:
        check_against_one_process(ref, xs, ys, losses, model)
    dist.destroy_process_group()
    say(f"ok {rank}")


if __name__ == "__main__":
    sys.exit(main())
