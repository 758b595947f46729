#!/usr/bin/env python3
"""Where the GPT rows' time goes: per-kernel GPU time of one lazytensor step (fp32 and bf16
autocast) next to PyTorch eager's, from the PyTorch profiler (CUPTI sees every kernel of the
process, also those lazytensor launches through the driver API and cuBLAS). Writes a text report
and the lazytensor graphs' kernel grouping (to map kernel names to IR nodes) under --out.

  PYTHONPATH=build-gpu/python python3 tests/gpu/profile_gpt.py --out DIR [--quick]
"""
import argparse
import contextlib
import os
import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import lazytensor as lt  # noqa: E402
from gpu_gpt import _lt_model, _torch_model  # noqa: E402


def device_us(evt):
    for name in ("self_device_time_total", "self_cuda_time_total"):
        v = getattr(evt, name, None)
        if v is not None:
            return float(v)
    return 0.0


def kernel_table(prof, steps, top):
    """Rows (name, calls per step, us per step) of GPU kernels, largest first."""
    rows = []
    for e in prof.key_averages():
        us = device_us(e)
        if us <= 0:
            continue
        rows.append((e.key, e.count / steps, us / steps))
    rows.sort(key=lambda r: -r[2])
    total = sum(r[2] for r in rows)
    busy, span = gpu_busy(prof, steps)
    lines = [f"  total GPU time per step: {total / 1e3:.3f} ms over {sum(r[1] for r in rows):.0f} launches"
             f"; GPU busy {busy:.3f} ms of a {span:.3f} ms span per step (idle {span - busy:.3f})"]
    for name, calls, us in rows[:top]:
        lines.append(f"  {us / 1e3:8.3f} ms {100 * us / max(total, 1e-9):5.1f}%  x{calls:<5.0f} {name[:110]}")
    return "\n".join(lines)


def gpu_busy(prof, steps):
    """(busy, span) ms per step: the union of the kernels' intervals, and first start to last
    end; span - busy is the time the GPU sat idle between kernels (host-bound gaps)."""
    iv = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.end > e.time_range.start)
    if not iv:
        return 0.0, 0.0
    busy, cur_s, cur_e = 0.0, iv[0][0], iv[0][1]
    for s, e in iv[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    return busy / 1e3 / steps, (iv[-1][1] - iv[0][0]) / 1e3 / steps


def profiled(step, steps, align=None):
    """torch.profiler over `steps` calls of step after warm-up ones; align (optional) runs inside
    the profiler first: ranks of a data-parallel step start together there, where the profiler's
    own start takes each rank a different time (s35: one rank 4 ms late, so every NCCL kernel of
    the first step waited for it)."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3 / steps
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        if align:
            align()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    return prof, wall


def host_breakdown(step, steps, top=18):
    """Where the host's time of a lazytensor step goes: lt.metrics timings per step (trace, hash,
    run = launching on an asynchronous device) and the Python profile's largest own times."""
    import cProfile
    import io
    import pstats
    for _ in range(3):
        step()
    lt.cuda.synchronize()
    lt.metrics.reset()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    host = (time.perf_counter() - t0) * 1e3 / steps
    lt.cuda.synchronize()
    timings = lt.metrics.timings()
    cells = ", ".join(f"{k} {v['total_ms'] / steps:.3f}" for k, v in sorted(timings.items()))
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        step()
    pr.disable()
    lt.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(top)
    body = "\n".join(line for line in buf.getvalue().splitlines() if line.strip())
    return (f"  host: {host:.3f} ms per step to queue (no waiting); lt.metrics ms per step: {cells}\n"
            f"  cProfile of {steps} steps (own time):\n{body}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    d, heads, n_blocks, T, B = (128, 4, 2, 64, 2) if args.quick else (768, 12, 4, 512, 8)
    steps = 3
    report = []
    torch.manual_seed(0)
    tm = _torch_model(d, heads, n_blocks).cuda()
    state = {k: v.detach().cpu().numpy() for k, v in tm.state_dict().items()}
    x_np = np.random.default_rng(3).standard_normal((B, T, d)).astype(np.float32)
    x = torch.from_numpy(x_np).cuda()
    lm = _lt_model(lt, d, heads, n_blocks).to("lazy:cuda")
    lm.load_state_dict({k: lt.tensor(v, device="lazy:cuda") for k, v in state.items()})
    lx = lt.tensor(x_np, device="lazy:cuda")
    lt.mark_step()
    for bf16 in (False, True):
        tag = "bf16 autocast" if bf16 else "fp32"
        tamp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
        lamp = (lambda: lt.autocast("lazy", dtype=lt.bfloat16)) if bf16 else contextlib.nullcontext

        def torch_step():
            tm.zero_grad(set_to_none=True)
            with tamp():
                loss = tm(x).square().mean()
            loss.backward()

        def lt_step():
            lm.zero_grad(set_to_none=True)
            with lamp():
                loss = lm(lx).square().mean()
            loss.backward()
            lt.mark_step()

        prof, wall = profiled(torch_step, steps)
        report.append(f"== PyTorch eager, {tag}: wall {wall:.3f} ms/step\n{kernel_table(prof, steps, args.top)}")
        prof, wall = profiled(lt_step, steps)
        g = lt.metrics.last_graph()
        report.append(f"== lazytensor lazy:cuda, {tag}: wall {wall:.3f} ms/step, {g['kernels']} kernels\n"
                      f"{kernel_table(prof, steps, args.top)}")
        report[-1] += "\n" + host_breakdown(lt_step, 10)
        with open(os.path.join(args.out, f"grouping_{'bf16' if bf16 else 'fp32'}.txt"), "w") as f:
            f.write(g.get("grouping", ""))
        print(report[-2], report[-1], sep="\n", flush=True)
    with open(os.path.join(args.out, "profile_gpt.txt"), "w") as f:
        f.write("\n\n".join(report) + "\n")


if __name__ == "__main__":
    main()
