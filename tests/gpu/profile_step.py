"""Where one training step of a bench/torch_compile.py workload spends its time on the GPU, per
backend: the step's wall time, the host time until the step returns (nothing waited for), and
torch.profiler's GPU kernels (it sees lazytensor's driver-API launches too) grouped by name, with
counts per step. Prints a report; used to direct issue 28's work.

  PYTHONPATH=build-gpu/python python3 tests/gpu/profile_step.py --workload resnet18_cifar \
      [--backend lazytensor|inductor|eager] [--steps 5] [--top 25]
"""
import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch_compile as bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="resnet18_cifar")
    ap.add_argument("--backend", default="lazytensor")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--cprofile", action="store_true", help="also cProfile's top host functions")
    args = ap.parse_args()
    if args.backend == "lazytensor":
        import lazytensor.torch  # noqa: F401
    bench.DEVICE = "cuda"
    step, _, _ = bench.make_step(bench.WORKLOADS[args.workload][1], args.backend)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    host, wall = [], []
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        host.append((t1 - t0) * 1e3)
        wall.append((time.perf_counter() - t0) * 1e3)
    print(f"{args.workload} on {args.backend}: step {statistics.median(wall):.2f} ms, host until return "
          f"{statistics.median(host):.2f} ms")
    if args.backend == "lazytensor":
        import lazytensor as lt
        before = lt.metrics.counters()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        after = lt.metrics.counters()
        print("lazytensor counters per step: " + ", ".join(
            f"{k} {(after[k] - before.get(k, 0)) / args.steps:g}" for k in sorted(after)
            if isinstance(after[k], (int, float)) and after[k] != before.get(k, 0)))
    if args.cprofile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(args.top)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        r = rows.setdefault(e.name, [0, 0.0])
        r[0] += 1
        r[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    total = sum(r[1] for r in rows.values())
    count = sum(r[0] for r in rows.values())
    print(f"GPU time per step {total / args.steps / 1e3:.2f} ms in {count / args.steps:.0f} kernels")
    for name, (n, us) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{us / args.steps / 1e3:8.3f} ms {n / args.steps:6.1f}x  {name[:110]}")


if __name__ == "__main__":
    main()
