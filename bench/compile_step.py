#!/usr/bin/env python3
"""Per-step host time of a small MLP training step: plain `lazy` against `lt.compile` of the whole
step and `lt.compile(model)` (the model only: its forward and compiled backward replay, the loss
and the optimizer step run as plain lazy code), in one process, on the same model, data and
optimizer (the loops alternate in blocks so that machine noise hits all alike).

  PYTHONPATH=build/python .venv/bin/python bench/compile_step.py [--steps 300] [--device lazy:cpu]
                                                                   [--json out.json]

A step is zero_grad + forward + cross_entropy + backward + AdamW step. Plain lazy re-runs that
Python code every step (tracing every op, hashing the graph, then a graph-cache hit); lt.compile
traces once and then replays the cached executable. Per step we record the wall time and the
executable's own run time (`lt.metrics.last_graph()["run_ms"]`); host time = wall - run is what
tracing, hashing and binding cost (for the compiled model, whose step runs four graphs, only the
wall time is comparable). Medians; the ratios are plain / compiled.
"""
import argparse
import json
import statistics
import time

import numpy as np

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F


def make(device, sizes, batch, seed=0, compile_model=False):
    lt.manual_seed(seed)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1]).to(device)
    run = lt.compile(model) if compile_model else model
    opt = lt.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    data = [(lt.tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32), device=device),
             lt.tensor(rng.integers(0, sizes[-1], batch), device=device)) for _ in range(4)]

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(run(x), y)
        loss.backward()
        opt.step()
        return loss

    lt.mark_step()
    return step, data


def measure(step, data, steps, start):
    walls, runs, traced, losses = [], [], [], []
    for i in range(start, start + steps):
        x, y = data[i % len(data)]
        before = lt.metrics.counters()["traced_ops"]
        t0 = time.perf_counter()
        loss = step(x, y)
        walls.append((time.perf_counter() - t0) * 1e3)
        runs.append(lt.metrics.last_graph()["run_ms"])
        traced.append(lt.metrics.counters()["traced_ops"] - before)
        losses.append(loss)
    return walls, runs, traced, [l.item() for l in losses]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--block", type=int, default=50)
    ap.add_argument("--device", default="lazy:cpu")
    ap.add_argument("--sizes", default="64,128,128,10")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--json")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    plain, pdata = make(a.device, sizes, a.batch)
    comp_fn, cdata = make(a.device, sizes, a.batch)
    comp = lt.compile(comp_fn)
    cmod, mdata = make(a.device, sizes, a.batch, compile_model=True)
    loops = (("plain", plain, pdata), ("compiled", comp, cdata), ("compiled_model", cmod, mdata))
    for _, s, d in loops:  # warm-up: compile, capture
        measure(s, d, 3, 0)
    res = {name: [[], [], [], []] for name, _, _ in loops}
    done = 3
    while done < a.steps + 3:
        n = min(a.block, a.steps + 3 - done)
        for name, s, d in loops:
            for acc, vals in zip(res[name], measure(s, d, n, done)):
                acc.extend(vals)
        done += n
    maxdiff = max(abs(p - c) / max(abs(p), 1e-12) for other in ("compiled", "compiled_model")
                  for p, c in zip(res["plain"][3], res[other][3]))
    out = {"device": a.device, "sizes": sizes, "batch": a.batch, "steps": a.steps,
           "max_rel_loss_diff": maxdiff, "compile_stats": comp.stats}
    for name, (walls, runs, traced, _) in res.items():
        host = [w - r for w, r in zip(walls, runs)]
        out[name] = {"wall_ms": statistics.median(walls), "run_ms": statistics.median(runs),
                     "host_ms": statistics.median(host), "traced_ops_per_step": statistics.median(traced)}
    out["host_ratio"] = out["plain"]["host_ms"] / out["compiled"]["host_ms"]
    out["wall_ratio"] = out["plain"]["wall_ms"] / out["compiled"]["wall_ms"]
    out["wall_ratio_compiled_model"] = out["plain"]["wall_ms"] / out["compiled_model"]["wall_ms"]
    print(f"MLP {'-'.join(map(str, sizes))} batch {a.batch}, AdamW, {a.device}, {a.steps} steps (medians)")
    print("| loop | wall ms | run ms | host ms | traced ops/step |")
    print("| --- | --- | --- | --- | --- |")
    for name, label in (("plain", "plain lazy"), ("compiled", "lt.compile(step)"),
                        ("compiled_model", "lt.compile(model)")):
        r = out[name]
        print(f"| {label} | {r['wall_ms']:.3f} | {r['run_ms']:.3f} | {r['host_ms']:.3f} | "
              f"{r['traced_ops_per_step']:.0f} |")
    print(f"host time plain / compiled step: {out['host_ratio']:.1f}x; wall: {out['wall_ratio']:.2f}x; "
          f"wall plain / compiled model: {out['wall_ratio_compiled_model']:.2f}x; "
          f"max relative loss difference {maxdiff:.1e}; {comp.stats}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
