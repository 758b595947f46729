"""Where a benchmark round's time goes (bench/gpu.py's wall_ms: N steps back to back, then one
synchronize), per rank: the host time of each call in a round, the round's wall time and the final
synchronize's wait, for rounds of 10, 40 and 10 steps. Two round lengths give the step's period
(the slope) and what a round pays once (the intercept: the first step traced while the GPU idles).
bench/ddp_gpu.py's GPT-2 124M step, DDP (WRAP=1, default) or the bare model (WRAP=0):

  PYTHONPATH=build-gpu/python WRAP=0 python3 -m torch.distributed.run --nproc-per-node 1 \
      tests/gpu/bench_rounds_probe.py
  PYTHONPATH=build-gpu/python python3 -m torch.distributed.run --nproc-per-node 2 \
      tests/gpu/bench_rounds_probe.py

NCCL_NVLS_ENABLE=0 (and the other settings of ddp_gpu.RANK_ENV) are set before NCCL starts."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from ddp_gpu import FULL, RANK_ENV, ddp_train_step, global_batch, initial_state  # noqa: E402

os.environ.update(RANK_ENV)
import lazytensor as lt  # noqa: E402
import lazytensor.distributed as dist  # noqa: E402

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
device = f"lazy:cuda:{os.environ.get('LOCAL_RANK', '0')}"
idx, tgt = global_batch(FULL, 8 * world)
wrap = os.environ.get("WRAP", "1") == "1"
step, _ = ddp_train_step(lt, FULL, initial_state(FULL), idx[rank * 8:(rank + 1) * 8],
                         tgt[rank * 8:(rank + 1) * 8], device, wrap=wrap)
for _ in range(5):
    step()
lt.cuda.synchronize(device)
for per_round in (10, 40, 10):
    calls, rounds, syncs = [], [], []
    for r in range(8):
        ts = [time.perf_counter()]
        for _ in range(per_round):
            step()
            ts.append(time.perf_counter())
        lt.cuda.synchronize(device)
        te = time.perf_counter()
        calls.append([(b - a) * 1e3 for a, b in zip(ts, ts[1:])])
        rounds.append((te - ts[0]) * 1e3)
        syncs.append((te - ts[-1]) * 1e3)
    med = [statistics.median(c[i] for c in calls) for i in range(per_round)]
    print(f"rank {rank} wrap {wrap} per_round {per_round}: round {statistics.median(rounds):.2f} ms "
          f"= {statistics.median(rounds) / per_round:.3f}/step; sync wait {statistics.median(syncs):.2f}; "
          f"host per call (median over rounds): " + " ".join(f"{m:.2f}" for m in med[:12]), flush=True)
dist.destroy_process_group()
