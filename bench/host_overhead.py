#!/usr/bin/env python3
"""Issue 28's host time, measured without a GPU: bench/gpu_gpt2.py's GPT-2 training step (the same
model code, 12 layers, tied head, bf16 autocast forward, cross_entropy, backward, AdamW; the step
ends at the optimizer's update) with tiny dimensions on `lazy:cpu`, so that running the graph is
cheap and the step's time is the host work that the H200 run pays at full size too: Python API
calls, tracing into the IR, autograd recording, autocast casts, the optimizer's ops, hashing the
trace, the graph-cache lookup, gathering inputs and binding outputs. None of that depends on the
device or on the tensor sizes, only on the graph (same node count at any width).

  PYTHONPATH=build/python LT_CACHE_DIR=off .venv/bin/python bench/host_overhead.py
      [--steps 30] [--rounds 5] [--fp32] [--cprofile plain|compile] [--json out.json]

One row per configuration, the median over steps of each part of a step (ms):
  plain       step_ms     wall time of one step (bench/timing.py's median_ms_per_step)
              trace_ms    Python + tracing until the step's sync (zero_grad, forward, backward,
                          the optimizer's ops), in the thread's CPU time (robust to a loaded
                          machine)
              hash_ms     the sync's graph walk and key (the runtime's "hash" phase)
              sync_ms     the rest of the sync: cache lookup, input gathering, donations, output
                          binding, tensor re-pointing
              run_ms      the executable's run (last_graph()["run_ms"]): device work, not host
  lt.compile  guard_ms    lt.compile's Python per call (signature, module and optimizer guards),
                          thread CPU time
              replay_ms   the capture's replay less its run: binding state and arguments, lookup,
                          outputs
              run_ms      as above
Also per step: traced_ops (ops traced by Python code; 0 on replay), graph inputs, the graph's
primitive node count after lowering (last_graph()["nodes"]) and its kernels.
"""
import argparse
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import sys
import time

import numpy as np

import lazytensor as lt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_gpt2 import lt_train_step  # noqa: E402  (the GPU row's step)
from timing import median_ms_per_step  # noqa: E402

DEVICE = "lazy:cpu"


def make_step(vocab, ctx, layers, d, heads, batch, bf16, seed=0):
    """The lazytensor step of bench/gpu_gpt2.py's gpt2_124m_train_row on DEVICE."""
    lt.manual_seed(seed)
    rng = np.random.default_rng(seed)
    idx, tgt = (rng.integers(0, vocab, (batch, ctx)).astype(np.int64) for _ in range(2))
    amp = (lambda: lt.autocast("lazy", dtype=lt.bfloat16)) if bf16 else contextlib.nullcontext
    return lt_train_step(lt, (vocab, ctx, layers, d, heads), idx, tgt,
                         np.arange(ctx, dtype=np.int64), amp, device=DEVICE)


class _Timed:
    """Wraps a function of lt._C (looked up by name at call time by its callers) and sums the
    wall and thread CPU time spent in it."""

    def __init__(self, name):
        self.name, self.fn = name, getattr(lt._C, name)
        self.ms = self.cpu_ms = 0.0

    def __call__(self, *a, **k):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return self.fn(*a, **k)
        finally:
            self.ms += (time.perf_counter() - t0) * 1e3
            self.cpu_ms += (time.thread_time() - c0) * 1e3

    def __enter__(self):
        setattr(lt._C, self.name, self)
        return self

    def __exit__(self, *exc):
        setattr(lt._C, self.name, self.fn)


def _phase_total(name):
    return lt.metrics.timings().get(name, {}).get("total_ms", 0.0)


def split_steps(step, steps, compiled, stat=statistics.median):
    """Per step: the wall and thread CPU time outside and inside the sync (plain: _C.mark_step)
    or the replay (_C._capture_replay), the runtime's hash phase and the run; medians. The part
    outside is timed in this thread's CPU time, so that the other builds and tests of a shared
    machine inflate it less; the run (on the CPU backend, the kernels) in wall time."""
    parts = {k: [] for k in ("wall", "outside_cpu", "inside", "hash", "run", "traced")}
    with _Timed("_capture_replay" if compiled else "mark_step") as timed:
        for _ in range(steps):
            timed.ms = timed.cpu_ms = 0.0
            h0, ops0 = _phase_total("hash"), lt.metrics.counters()["traced_ops"]
            t0, c0 = time.perf_counter(), time.thread_time()
            step()
            parts["wall"].append((time.perf_counter() - t0) * 1e3)
            parts["outside_cpu"].append((time.thread_time() - c0) * 1e3 - timed.cpu_ms)
            parts["inside"].append(timed.ms)
            parts["hash"].append(_phase_total("hash") - h0)
            parts["run"].append(lt.metrics.last_graph()["run_ms"])
            parts["traced"].append(lt.metrics.counters()["traced_ops"] - ops0)
    return {k: stat(v) for k, v in parts.items()}


def row(name, step, steps, rounds, compiled, stat=statistics.median):
    for _ in range(3):  # compile, then warm
        loss = step()
    loss.item()
    g = lt.metrics.last_graph()
    out = {"config": name, "prim_nodes": g["nodes"], "kernels": g["kernels"],
           "graph_inputs": g["inputs"]}
    out["step_ms"] = median_ms_per_step(step, steps, rounds)
    med = split_steps(step, steps * rounds, compiled, stat)
    out["traced_ops"] = int(med["traced"])
    out["run_ms"] = med["run"]
    if compiled:
        out["guard_ms"] = med["outside_cpu"]
        out["replay_ms"] = med["inside"] - med["run"]
        out["host_ms"] = out["guard_ms"] + out["replay_ms"]
    else:
        out["trace_ms"] = med["outside_cpu"]
        out["hash_ms"] = med["hash"]
        out["sync_ms"] = med["inside"] - med["hash"] - med["run"]
        out["host_ms"] = out["trace_ms"] + out["hash_ms"] + out["sync_ms"]
    out["split_wall_ms"] = med["wall"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10, help="steps per timed round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fp32", action="store_true", help="no autocast (the fp32 row)")
    ap.add_argument("--dims", default="512,16,12,64,2,2",
                    help="vocab,T,layers,d_model,heads,batch (GPT-2 124M: 50304,1024,12,768,12,8)")
    ap.add_argument("--only", choices=("plain", "compile"))
    ap.add_argument("--cprofile", choices=("plain", "compile"),
                    help="profile that configuration's steps instead and print the top functions")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="of each part over the steps (min: on a loaded machine, the work itself)")
    ap.add_argument("--json")
    args = ap.parse_args()
    vocab, ctx, layers, d, heads, batch = (int(v) for v in args.dims.split(","))
    bf16 = not args.fp32
    step = make_step(vocab, ctx, layers, d, heads, batch, bf16)
    if args.cprofile:
        run = lt.compile(step) if args.cprofile == "compile" else step
        for _ in range(3):
            run()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.steps):
            run()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(40)
        return 0
    rows = []
    configs = [("plain", step, False), ("lt.compile", lt.compile(step), True)]
    for name, fn, compiled in configs:
        if args.only and (args.only == "compile") != compiled:
            continue
        r = row(name, fn, args.steps, args.rounds, compiled,
                statistics.median if args.stat == "median" else min)
        rows.append(r)
        print(json.dumps(r), flush=True)
    print(f"\n# GPT-2 step on {DEVICE}, dims vocab,T,layers,d,heads,B = {args.dims}, "
          f"{'bf16 autocast' if bf16 else 'fp32'}; ms per step, {args.stat} over steps "
          f"(step: median of rounds)")
    print(f"{'config':12}{'step':>8}{'host':>8}{'trace':>8}{'hash':>8}{'sync':>8}{'guard':>8}"
          f"{'replay':>8}{'run':>8}{'ops':>7}{'nodes':>7}{'inputs':>7}")
    for r in rows:
        f = lambda k: f"{r[k]:8.2f}" if k in r else f"{'-':>8}"  # noqa: E731
        print(f"{r['config']:12}{f('step_ms')}{f('host_ms')}{f('trace_ms')}{f('hash_ms')}"
              f"{f('sync_ms')}{f('guard_ms')}{f('replay_ms')}{f('run_ms')}{r['traced_ops']:7d}"
              f"{r['prim_nodes']:7d}{r['graph_inputs']:7d}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"dims": args.dims, "bf16": bf16, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
