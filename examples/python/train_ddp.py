"""examples/python/train_gpt.py's character-level GPT, data-parallel over processes:

    torchrun --nproc-per-node 2 examples/python/train_ddp.py [--steps 200] [--device lazy]
    torchrun --nproc-per-node 2 examples/python/train_ddp.py --device "lazy:cuda:{local_rank}"

(from the project's environment: `PYTHONPATH=build/python .venv/bin/python -m
torch.distributed.run --nproc-per-node 2 examples/python/train_ddp.py`). Each rank draws its own batches; lt.nn.parallel.
DistributedDataParallel starts every rank from rank 0's weights and averages the gradients over
the ranks after each backward pass (on "lazy" inside the step's one compiled graph, with the
forward, the backward and AdamW's update). In --device, "{local_rank}" stands for the rank's
LOCAL_RANK, so that each rank of a GPU host runs on its own GPU. Rank 0 prints progress and the
loss averaged over the ranks; every rank ends with the same weights (checked at the end). Exits
with status 1 if the final loss is above --max-loss.
"""
import argparse
import math
import os
import sys

import numpy as np

import lazytensor as lt
import lazytensor.distributed as dist
import lazytensor.nn.functional as F
from lazytensor.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_gpt import GPT, load_corpus  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="lazy",
                    help="lazy | cpu (CPU ranks talk over Gloo) | lazy:cuda:{local_rank} (each "
                         "rank on the GPU of its LOCAL_RANK, over NCCL)")
    ap.add_argument("--backend", default=None,
                    help="gloo | nccl (default: lt.distributed's choice, NCCL when a GPU is seen)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=16, help="per rank")
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max-loss", type=float, default=2.8)
    args = ap.parse_args(argv)

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    lt.manual_seed(rank)  # different starting weights per rank: DDP replaces them with rank 0's
    text = load_corpus()
    chars = sorted(set(text))
    data = np.array([{c: i for i, c in enumerate(chars)}[c] for c in text], np.int64)
    rng = np.random.default_rng(1000 + rank)  # each rank its own batches
    device = args.device.replace("{local_rank}", os.environ.get("LOCAL_RANK", "0"))
    block = args.block

    def batch():
        starts = rng.integers(0, len(data) - block - 1, args.batch_size)
        x = np.stack([data[s:s + block] for s in starts])
        y = np.stack([data[s + 1:s + block + 1] for s in starts])
        return lt.tensor(x, device=device), lt.tensor(y, device=device)

    model = DDP(GPT(len(chars), block).to(device))
    positions = lt.arange(block, device=device).unsqueeze(0)
    opt = lt.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 10)
    sched = lt.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) *
                                           (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * s / args.steps))))
    lt.mark_step()
    lt.metrics.reset()  # count the training's compiles only (not the weights' initialization)
    losses = []
    for step in range(args.steps):
        xb, yb = batch()
        opt.zero_grad()
        loss = F.cross_entropy(model(xb, positions).reshape(-1, len(chars)), yb.reshape(-1))
        loss.backward()  # DDP averages the gradients here (traced into the same graph on lazy)
        lt.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss)
        if rank == 0 and (step + 1) % 50 == 0:
            print(f"step {step + 1}/{args.steps}: loss {loss.item():.3f} (rank 0's batch)",
                  flush=True)
    final = lt.tensor(np.mean([l.item() for l in losses[-10:]]), device=device)
    dist.all_reduce(final, op="avg")
    # Every rank holds the same weights: rank 0's, updated with the same averaged gradients.
    first = next(iter(model.parameters())).detach() * 1
    gathered = [lt.zeros(tuple(first.shape), device=device) for _ in range(world)]
    dist.all_gather(gathered, first)
    same = all(np.allclose(g.numpy(), gathered[0].numpy(), rtol=0, atol=1e-6) for g in gathered)
    loss = final.item()
    if rank == 0:
        print(f"{world} ranks, {args.steps} steps: mean loss of the last 10 steps {loss:.3f}, "
              f"weights equal on every rank: {same}; graph compiles on rank 0 while training: "
              f"{lt.metrics.counters()['graph_compiles']}", flush=True)
    dist.destroy_process_group()
    return 0 if same and loss <= args.max_loss else 1


if __name__ == "__main__":
    sys.exit(main())
