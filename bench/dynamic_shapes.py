"""A symbolic compile's speed against the static compile of the same program at the same size
(issue 30): each workload runs at size n from a graph compiled statically at n and from one compiled
symbolically at another size (n's dim marked dynamic), timed the same way (the executor's run time
of the graph, lt.metrics.last_graph()["run_ms"], median of rounds), reported as a ratio.

    PYTHONPATH=build/python LT_CACHE_DIR=off .venv/bin/python bench/dynamic_shapes.py [--device lazy:cuda]
        [--json out.json]
"""
import argparse
import json
import os
import platform
import statistics
import sys

import numpy as np

import lazytensor as lt
import lazytensor.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "python"))
from train_gpt import GPT  # noqa: E402


def workloads(device):
    rng = np.random.default_rng(0)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    w512 = lt.tensor(arr(512, 512), device=device)
    lt.manual_seed(0)
    gpt = GPT(65, 1024, dim=128, heads=4, layers=2).to(device).eval()

    def elementwise(n):
        x = lt.tensor(arr(n, 1024), device=device)
        return [x], lambda x: (x.sin() * 2 + x.exp() * 0.5).tanh()

    def softmax_rows(n):
        x = lt.tensor(arr(n, 1024), device=device)
        return [x], lambda x: F.softmax(x, dim=1)

    def softmax_long_rows(n):
        x = lt.tensor(arr(64, n), device=device)
        return [x], lambda x: F.softmax(x, dim=1)  # the dynamic dim is the reduced one

    def matmul(n):
        x = lt.tensor(arr(n, 512), device=device)
        return [x], lambda x: F.gelu(x @ w512)

    def gpt_forward(n):
        idx = lt.tensor(rng.integers(0, 65, size=(1, n)), device=device)
        pos = lt.arange(n, device=device).unsqueeze(0)
        return [idx], lambda idx: gpt(idx, pos)

    return [("elementwise [n, 1024]", elementwise, 4096, 0),
            ("softmax rows [n, 1024]", softmax_rows, 4096, 0),
            ("softmax [64, n] (reduced dim dynamic)", softmax_long_rows, 8192, 1),
            ("matmul + gelu [n, 512] x [512, 512]", matmul, 2048, 0),
            ("GPT forward (2 layers, d 128), T = n", gpt_forward, 512, 1)]


def run_ms(make, n, mark_dim, rounds):
    times = []
    for _ in range(rounds + 2):
        inputs, f = make(n)
        if mark_dim is not None:
            lt.mark_dynamic(inputs[0], mark_dim)
        out = f(*inputs)
        lt.sync(out)
        times.append(lt.metrics.last_graph()["run_ms"])
    return statistics.median(times[2:]), lt.metrics.last_graph()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="lazy:cpu")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'workload':<40} {'n':>6} {'static ms':>10} {'symbolic ms':>12} {'ratio':>7}")
    for name, make, n, dim in workloads(args.device):
        lt._C._clear_graph_cache()
        static, g_static = run_ms(make, n, None, args.rounds)
        assert g_static["symbolic_dims"] == [], name
        lt._C._clear_graph_cache()
        run_ms(make, n // 2 + 1, dim, 1)  # the symbolic compile, made at another size
        symbolic, g_sym = run_ms(make, n, dim, args.rounds)
        assert g_sym["symbolic_dims"] and g_sym["cache"] == "memory", (name, g_sym)
        rows.append({"workload": name, "n": n, "static_ms": static, "symbolic_ms": symbolic,
                     "ratio": symbolic / static})
        print(f"{name:<40} {n:>6} {static:>10.3f} {symbolic:>12.3f} {symbolic / static:>6.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "machine": platform.machine(),
                       "processor": platform.processor(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
