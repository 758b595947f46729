"""One rank of the peer in bench/ddp_gpu.py (--peer): the same GPT-2 step in PyTorch as a PyTorch 2
user writes it for data parallel: torch.nn.parallel.DistributedDataParallel over torch.distributed
(NCCL on GPUs), then torch.compile of the wrapped model (default mode; DDP's bucketing splits the
compiled graph at bucket boundaries so its all-reduces overlap backward), AdamW eager, the forward
under bf16 autocast on GPUs. --no-ddp: the bare compiled model on one GPU (the one-GPU baseline).

Same starting weights, batch slices, learning rate and timing as ddp_gpu.py's own ranks (wall_ms:
rounds of steps back to back, then one synchronize; the median round). Rank 0 writes the figures
to --result as JSON, with the same keys as ddp_gpu.py's worker writes."""
import contextlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as tdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ddp_gpu import FULL, TINY, global_batch, initial_state  # noqa: E402
from gpu import wall_ms  # noqa: E402
from gpu_gpt2 import _model, torch_train_step  # noqa: E402


def peer_worker(args):
    local = int(os.environ.get("LOCAL_RANK", "0"))
    on_gpu = "cuda" in args.device_template
    device = torch.device(f"cuda:{local}" if on_gpu else "cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    tdist.init_process_group("nccl" if on_gpu else "gloo")
    rank, world = tdist.get_rank(), tdist.get_world_size()
    cfg = TINY if args.tiny else FULL
    vocab = cfg[0]
    rows = args.global_batch // world
    idx_np, tgt_np = global_batch(cfg, args.global_batch)
    idx = torch.from_numpy(idx_np[rank * rows:(rank + 1) * rows]).to(device)
    tgt = torch.from_numpy(tgt_np[rank * rows:(rank + 1) * rows]).to(device)
    pos = torch.arange(cfg[1], device=device)
    model = _model(torch.nn, torch.nn.functional, *cfg)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in initial_state(cfg).items()})
    model.to(device)
    wrapped = model if args.no_ddp else torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[local] if on_gpu else None, bucket_cap_mb=args.bucket_cap_mb)
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if on_gpu else \
        contextlib.nullcontext
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    # gpu_gpt2's torch step (its AdamW: lr 1e-4 = ddp_gpu.LR, weight decay 0.1).
    # --peer-eager: DDP without torch.compile; --peer-one-graph: dynamo's DDPOptimizer off (one
    # compiled graph, DDP's all-reduces after the whole backward), to see what each part costs.
    if args.peer_one_graph:
        torch._dynamo.config.optimize_ddp = False
    fwd = wrapped if args.peer_eager else torch.compile(wrapped)
    step = torch_train_step(model, fwd, idx, tgt, pos, vocab, amp)

    losses = []
    t0 = time.perf_counter()
    losses.append(step())
    sync()
    res = {"world": world, "device": str(device), "rows_per_rank": rows,
           "global_rows": rows * world, "ddp": not args.no_ddp, "peer": "torch.compile + DDP",
           "one_graph": bool(args.peer_one_graph), "eager": bool(args.peer_eager),
           "first_step_s": time.perf_counter() - t0}
    for _ in range(args.loss_steps - 1):
        losses.append(step())
    res["losses_rank0"] = [float(v) for v in losses]
    for _ in range(3):
        step()
    ms = wall_ms(step, args.repeats, rounds=args.rounds, sync=sync)
    slowest = torch.tensor([ms], dtype=torch.float64, device=device)
    tdist.all_reduce(slowest, op=tdist.ReduceOp.MAX)  # the slowest rank counts, as for ours
    res["step_ms"] = float(slowest.item())
    res["step_ms_rank0"] = ms
    res["tokens_per_s"] = world * rows * cfg[1] * 1e3 / res["step_ms"]
    res["graph_compiles_while_timed"] = None  # not counted for the peer
    sums = torch.stack([p.detach().double().sum() for p in model.parameters()])
    gathered = [torch.zeros_like(sums) for _ in range(world)]
    tdist.all_gather(gathered, sums)
    res["weights_equal"] = all(torch.equal(g, gathered[0]) for g in gathered)
    if rank == 0:
        with open(args.result, "w") as f:
            json.dump(res, f)
    tdist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from ddp_gpu import parse
    sys.exit(peer_worker(parse(sys.argv[1:])))
