#!/usr/bin/env python3
"""Where the ResNet-18 training row's time goes (issue 28): per-kernel GPU time of one step of
torch.compile(model) and of lazytensor on lazy:cuda (our API, one graph a step), the same model,
weights, batch and SGD as bench/gpu_resnet.py's row; then lazytensor's host breakdown and kernel
grouping under --out.

  PYTHONPATH=build-gpu/python python3 tests/gpu/profile_resnet.py --out DIR [--quick]
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import lazytensor as lt  # noqa: E402
from gpu_resnet import lt_step, setup, torch_model, torch_step  # noqa: E402
from profile_gpt import host_breakdown, kernel_table, profiled  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="batch 16 (smoke run)")
    ap.add_argument("--top", type=int, default=45)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    state, x_np, y_np = setup(args.quick)
    x, y = torch.from_numpy(x_np).cuda(), torch.from_numpy(y_np).cuda()
    m = torch_model(state)
    prof, wall = profiled(torch_step(m, torch.compile(m), x, y), args.steps)
    report = [f"== torch.compile: wall {wall:.3f} ms/step\n{kernel_table(prof, args.steps, args.top)}"]
    step = lt_step(lt, state, x_np, y_np)
    prof, wall = profiled(step, args.steps)
    g = lt.metrics.last_graph()
    report.append(f"== lazytensor lazy:cuda: wall {wall:.3f} ms/step, {g['kernels']} kernels, "
                  f"{g['nodes']} nodes\n{kernel_table(prof, args.steps, args.top)}\n"
                  + host_breakdown(step, 5))
    with open(os.path.join(args.out, "resnet_profile.txt"), "w") as f:
        f.write("\n".join(report) + "\n")
    with open(os.path.join(args.out, "resnet_grouping.txt"), "w") as f:
        f.write(g.get("grouping", ""))
    print(*report, sep="\n", flush=True)


if __name__ == "__main__":
    main()
