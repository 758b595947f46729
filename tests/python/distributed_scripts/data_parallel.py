"""One rank of tests/python/test_distributed.py's data-parallel check (run by torchrun): a small
MLP trained 6 steps on `lazy`, each rank on its slice of a global batch, the gradients averaged
with lt.distributed.all_reduce(op="avg") before SGD with momentum; rank 0 compares the losses
and final weights with the same training in one PyTorch process on the whole batch. Prints
"ok <rank>"."""
import sys

import numpy as np
import torch

import lazytensor as lt
import lazytensor.distributed as dist


def make(nn, d_in=10, d_hidden=24, d_out=5):
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.Tanh(), nn.Linear(d_hidden, d_out))


def main():
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(7)
    batch = 12  # divisible by 2 and 3
    xs = [rng.standard_normal((batch, 10)).astype(np.float32) for _ in range(3)]
    ys = [rng.integers(0, 5, batch) for _ in range(3)]
    torch.manual_seed(3)
    ref = make(torch.nn).double()
    state = {k: v.detach().numpy().astype(np.float32) for k, v in ref.state_dict().items()}
    model = make(lt.nn).to("lazy")
    model.load_state_dict({k: lt.tensor(v, device="lazy") for k, v in state.items()})
    opt = lt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    lo, hi = rank * batch // world, (rank + 1) * batch // world
    losses = []
    for step in range(6):
        x = lt.tensor(xs[step % 3][lo:hi], device="lazy")
        y = lt.tensor(ys[step % 3][lo:hi], device="lazy")
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
        topt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        want = []
        for step in range(6):
            topt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(xs[step % 3]).double()),
                                                     torch.from_numpy(ys[step % 3]))
            loss.backward()
            topt.step()
            want.append(loss.item())
        np.testing.assert_allclose(losses, want, rtol=1e-5, atol=1e-6)
        for k, v in model.state_dict().items():
            np.testing.assert_allclose(v.numpy(), ref.state_dict()[k].numpy(), rtol=1e-5, atol=1e-5,
                                       err_msg=k)
    dist.destroy_process_group()
    print("ok", rank, flush=True)


if __name__ == "__main__":
    sys.exit(main())
