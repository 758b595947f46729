#!/usr/bin/env python3
"""Where the one-graph rows of bench/gpu.py spend their time (sin chains, layer_norm+gelu+residual,
softmax): lazytensor's GPU kernel time per step (CUPTI, via the PyTorch profiler), its host time
per step (queueing a round of steps without waiting), and its wall time per step as the benchmark
takes it; torch.compile's kernel time and CUDA-event time next to it. Then the same lazytensor
steps under CUDA codegen variants (LT_CUDA_ROW_VEC, LT_CUDA_ROW_CACHE, LT_CUDA_BLOCK_THREADS), to choose defaults
from measurements.

  PYTHONPATH=build-gpu/python python3 tests/gpu/profile_rows.py [--out FILE] [--quick]
"""
import argparse
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import lazytensor as lt  # noqa: E402
from gpu import ROWS, cuda_ms, lt_row_step, wall_ms  # noqa: E402
from profile_gpt import device_us  # noqa: E402  (this directory is on sys.path: the script's own)

VARIANTS = [
    {},
    {"LT_CUDA_ROW_VEC": "0"},
    {"LT_CUDA_ROW_CACHE": "4"},
    {"LT_CUDA_BLOCK_THREADS": "512"},
    {"LT_CUDA_ROW_CACHE": "2", "LT_CUDA_BLOCK_THREADS": "512"},
    {"LT_CUDA_BLOCK_THREADS": "1024"},
    {"LT_CUDA_ROW_CACHE": "1", "LT_CUDA_BLOCK_THREADS": "1024"},
]


def kernel_us_per_step(step, steps):
    """GPU time of every kernel (and memcpy/memset) the process ran during `steps` calls, per call."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    lt.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        lt.cuda.synchronize()
    total, launches = 0.0, 0
    for e in prof.key_averages():
        us = device_us(e)
        if us > 0:
            total += us
            launches += e.count
    return total / steps, launches / steps


def host_us_per_step(step, steps, rounds=5):
    """Time to queue `steps` lazytensor steps (tracing, hashing, lookup, launches), without waiting for
    the GPU; median over rounds. The queue is drained between rounds."""
    times = []
    for _ in range(rounds):
        lt.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) * 1e6 / steps)
        lt.cuda.synchronize()
    return statistics.median(times)


def set_env(variant):
    for k in ("LT_CUDA_ROW_CACHE", "LT_CUDA_BLOCK_THREADS", "LT_CUDA_ROW_VEC"):
        os.environ.pop(k, None)
    os.environ.update(variant)
    lt._C._clear_graph_cache()  # executables are compiled under the variant's options


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--only", default=None, help="comma-separated substrings of row names")
    args = ap.parse_args()
    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    say(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}; times per step")
    for name, make in ROWS.items():
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        arrays, torch_fn, lt_fn = make(args.quick)
        xs = [torch.from_numpy(a).cuda() for a in arrays]
        compiled = torch.compile(torch_fn)
        for _ in range(3):
            compiled(*xs)
        t_ms = cuda_ms(lambda: compiled(*xs), args.steps)
        t_kern, t_launch = kernel_us_per_step(lambda: compiled(*xs), args.steps)
        say(f"\n== {name}")
        say(f"  torch.compile: events {t_ms * 1e3:8.1f} us, kernels {t_kern:8.1f} us over {t_launch:.0f} launches")
        lt_step = lt_row_step(arrays, lt_fn)
        for variant in VARIANTS:
            try:
                set_env(variant)
                for _ in range(3):
                    lt_step()
                wall = wall_ms(lt_step, args.steps) * 1e3
                host = host_us_per_step(lt_step, args.steps)
                kern, launches = kernel_us_per_step(lt_step, args.steps)
                tag = " ".join(f"{k[8:].lower()}={v}" for k, v in variant.items()) or "default"
                say(f"  lazytensor {tag:28} wall {wall:8.1f} us, host {host:8.1f} us, kernels {kern:8.1f} us "
                    f"over {launches:.0f} launches")
            except Exception as e:  # noqa: BLE001 - a variant that fails is reported, the rest go on
                say(f"  lazytensor {variant}: {type(e).__name__}: {str(e).splitlines()[0]}")
        set_env({})
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
