#!/usr/bin/env python3
"""Where the GPT-2 124M training row's time goes (issue 28): per-kernel GPU time of one step of
torch.compile(model) and of lazytensor on lazy:cuda (our API, one graph a step), bf16 autocast
and/or fp32, the same model, weights, batch and AdamW as bench/gpu_gpt2.py's row; then
lazytensor's host breakdown and its kernel grouping (to map kernel names to IR nodes) under --out.

  PYTHONPATH=build-gpu/python python3 tests/gpu/profile_gpt2.py --out DIR [--fp32 | --fp32-only] [--quick]
"""
import argparse
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import lazytensor as lt  # noqa: E402
from gpu_gpt2 import _amp, _model, _setup, lt_train_step, torch_train_step  # noqa: E402
from profile_gpt import host_breakdown, kernel_table, profiled  # noqa: E402


def torch_step(cfg, state, idx, tgt, pos, amp):
    m = _model(torch.nn, torch.nn.functional, *cfg).cuda()
    m.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    return torch_train_step(m, torch.compile(m), idx, tgt, pos, cfg[0], amp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--fp32", action="store_true", help="also profile the fp32 row")
    ap.add_argument("--fp32-only", action="store_true", help="profile the fp32 row alone")
    ap.add_argument("--quick", action="store_true", help="a small model (smoke run)")
    ap.add_argument("--top", type=int, default=45)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cfg, state, idx_np, tgt_np, pos_np = _setup(args.quick, 2 if args.quick else 8, 5)
    idx, tgt, pos = (torch.from_numpy(a).cuda() for a in (idx_np, tgt_np, pos_np))
    for bf16 in [False] if args.fp32_only else [True, False] if args.fp32 else [True]:
        tag = "bf16 autocast" if bf16 else "fp32"
        torch_amp, lt_amp = _amp(lt, bf16)
        prof, wall = profiled(torch_step(cfg, state, idx, tgt, pos, torch_amp), args.steps)
        report = [f"== torch.compile, {tag}: wall {wall:.3f} ms/step\n{kernel_table(prof, args.steps, args.top)}"]
        step = lt_train_step(lt, cfg, idx_np, tgt_np, pos_np, lt_amp, state=state)
        prof, wall = profiled(step, args.steps)
        g = lt.metrics.last_graph()
        report.append(f"== lazytensor lazy:cuda, {tag}: wall {wall:.3f} ms/step, {g['kernels']} kernels, "
                      f"{g['nodes']} nodes\n{kernel_table(prof, args.steps, args.top)}\n"
                      + host_breakdown(step, 5))
        name = "bf16" if bf16 else "fp32"
        with open(os.path.join(args.out, f"gpt2_profile_{name}.txt"), "w") as f:
            f.write("\n".join(report) + "\n")
        with open(os.path.join(args.out, f"gpt2_grouping_{name}.txt"), "w") as f:
            f.write(g.get("grouping", ""))
        # The CUDA source of the loop kernels in the table, in its order: what to look at next.
        table = kernel_table(prof, args.steps, args.top)
        names = list(dict.fromkeys(re.findall(r"\b(k\d+_\w+)", table)))
        sources = lt.debug.kernel_sources()
        with open(os.path.join(args.out, f"gpt2_top_kernels_{name}.cu"), "w") as f:
            for kn in names:
                src = next((x for x in sources if re.search(r"\b" + kn + r"\b", x)), None)
                f.write(f"// ===== {kn}\n{src or '// (source not found)'}\n")
        print(*report, sep="\n", flush=True)


if __name__ == "__main__":
    main()
