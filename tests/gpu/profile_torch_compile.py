"""Where a torch.compile(backend="lazytensor") training step spends host time on the GPU: the
GPT-2 124M step (bench/torch_compile.py's gpt2 rows), timed per phase with and without a
synchronize, and cProfile's top host functions. Prints a report; used to direct issue 28's work.

  PYTHONPATH=build-gpu/python python3 tests/gpu/profile_torch_compile.py [--bf16]
"""
import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

import torch

import lazytensor.torch  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from torch_models import GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--layers", type=int, default=12)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = GPT(vocab=50304, dim=768, heads=12, block=1024, layers=args.layers).cuda()
    idx = torch.randint(0, 50304, (8, 1024), device="cuda")
    tgt = torch.randint(0, 50304, (8, 1024), device="cuda")
    m = torch.compile(model, backend="lazytensor")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(sync):
        t = [time.perf_counter()]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16):
            loss = m(idx, tgt)
        if sync:
            torch.cuda.synchronize()
        t.append(time.perf_counter())
        loss.backward()
        if sync:
            torch.cuda.synchronize()
        t.append(time.perf_counter())
        opt.step()
        opt.zero_grad()
        if sync:
            torch.cuda.synchronize()
        t.append(time.perf_counter())
        return [b - a for a, b in zip(t, t[1:])]

    for _ in range(4):
        step(True)
    for sync in (False, True):
        rows = [step(sync) for _ in range(8)]
        torch.cuda.synchronize()
        med = [statistics.median(r[i] for r in rows) * 1e3 for i in range(3)]
        print(f"{'synchronized' if sync else 'host only   '} forward {med[0]:7.2f} ms  backward "
              f"{med[1]:7.2f} ms  optimizer {med[2]:7.2f} ms", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(4):
        step(False)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
