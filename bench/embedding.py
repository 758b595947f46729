"""Embedding forward + backward on the lazy device, against PyTorch (CPU) on the same inputs.

    PYTHONPATH=build/python .venv/bin/python bench/embedding.py [--vocab 50000 --dim 256 --tokens 4096]

One step: rows = embedding(ids, W); loss = (rows * G).sum(); loss.backward(); loss and gradient read.
Prints one JSON line: median wall ms per step (after a warm-up step that compiles), the graph's
kernel count and grouping, the first step's time, and PyTorch's median for the same step.
"""
import argparse
import json
import statistics
import time

import numpy as np

import lazytensor as lt
import lazytensor.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=50000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((a.vocab, a.dim)).astype(np.float32)
    ids = rng.integers(0, a.vocab, a.tokens)
    g0 = rng.standard_normal((a.tokens, a.dim)).astype(np.float32)

    w = lt.tensor(w0, device="lazy", requires_grad=True)
    li, lg = lt.tensor(ids, device="lazy"), lt.tensor(g0, device="lazy")
    lt.mark_step()

    def step():
        w.grad = None
        loss = (F.embedding(li, w) * lg).sum()
        loss.backward()
        lt.mark_step()  # forward and backward: one graph
        loss.item()
        return w.grad.numpy()

    t0 = time.perf_counter()
    grad = step()
    first = time.perf_counter() - t0
    graph = lt.metrics.last_graph()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        grad = step()
        times.append(time.perf_counter() - t0)

    out = {"vocab": a.vocab, "dim": a.dim, "tokens": a.tokens, "lazy_ms": 1e3 * statistics.median(times),
           "lazy_first_s": first, "kernels": graph["kernels"], "grouping": graph["grouping"]}
    try:
        import torch
        tw = torch.tensor(w0, requires_grad=True)
        ti, tg = torch.tensor(ids), torch.tensor(g0)
        ttimes = []
        for _ in range(a.steps + 1):
            t0 = time.perf_counter()
            tw.grad = None
            loss = (torch.nn.functional.embedding(ti, tw) * tg).sum()
            loss.backward()
            loss.item()
            tgrad = tw.grad.numpy()
            ttimes.append(time.perf_counter() - t0)
        out["torch_ms"] = 1e3 * statistics.median(ttimes[1:])
        out["max_abs_grad_diff"] = float(np.abs(grad - tgrad).max())
    except ImportError:
        pass
    print(json.dumps(out))


if __name__ == "__main__":
    main()
