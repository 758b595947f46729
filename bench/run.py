#!/usr/bin/env python3
"""CPU benchmark: each workload on lazytensor `lazy`, lazytensor `cpu` (eager), numpy and PyTorch
eager CPU, in one process, reported as medians and ratios (and JSON with --json).

  PYTHONPATH=build/python .venv/bin/python bench/run.py [--quick] [--json out.json] [--only NAME]
                  [--repeats 30] [--rounds 6] [--trace-cost-bin build/bin/bench_trace_cost]

Each workload's implementations take turns in `rounds` blocks, each after a 0.3 s pause (see
time_impls): the medians are over all blocks.

PyTorch runs with torch.set_num_threads(os.cpu_count()); install libopenblas0-pthread, or torch
measures reference BLAS on one thread. Speed claims come from this table, never from unit tests.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

import lazytensor as lt

try:
    import torch
    torch.set_num_threads(os.cpu_count())
except ImportError:  # the table says "n/a"
    torch = None


# Before each timed block: long enough for another runtime's worker threads to stop spinning.
# OpenBLAS's (PyTorch's GEMMs) busy-wait about 2^28 cycles (~0.1 s) after each call, and on this
# 2-core machine a spinning thread takes half the machine from whatever runs next: lazytensor's
# MLP step measured 25 ms right after a PyTorch step and 13-15 ms after a pause (or with
# OPENBLAS_THREAD_TIMEOUT=4). Every implementation gets the same pause.
SETTLE_S = 0.3


# After the pause, untimed calls for at least this long. The VM is slow for a while after being
# idle, whatever runs: a numpy sum of 16 MB took 2.5x its usual time on the first call after a
# 0.3 s sleep and 1.25x on the next few; lazytensor's layer_norm+gelu row 4-9 ms for two calls,
# then 1.0, then its usual 0.5. Warming up by time, not by a count of calls, gives every
# implementation a machine back at speed, so the medians measure the implementations, not the
# pause (both sides: PyTorch's first calls after the pause are slow too).
WARMUP_S = 0.05


def time_block(fn, repeats, warmup, settle_s):
    """`repeats` timings of fn (seconds), after a pause and at least `warmup` untimed calls (and
    WARMUP_S seconds of them when there was a pause)."""
    if settle_s:
        time.sleep(settle_s)
    t_end = time.perf_counter() + (WARMUP_S if settle_s else 0)
    done = 0
    while done < warmup or time.perf_counter() < t_end:
        fn()
        done += 1
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def time_impls(impls, repeats, rounds, settle_s=SETTLE_S):
    """Median ms of each implementation (None where it raised NotImplementedError, with a note).

    The implementations take turns, `rounds` blocks each: this VM's speed drifts by up to 2x over
    seconds to minutes (lazytensor's and PyTorch's layer_norm rows both flip between two speeds
    about 1.9x apart within a block), and short alternating blocks spread the drift over all of
    them instead of charging it to whichever ran during a slow phase."""
    times = {impl: [] for impl in impls}
    notes = []
    per_block = max(1, -(-repeats // rounds))
    for r in range(rounds):
        for impl, fn in impls.items():
            if times[impl] is None:
                continue
            try:
                times[impl] += time_block(fn, per_block, 2 if r == 0 else 1, settle_s)
            except NotImplementedError as e:  # reported, never hidden
                times[impl] = None
                notes.append(f"{impl}: {e}")
    ms = {impl: (statistics.median(t) * 1e3 if t else None) for impl, t in times.items()}
    return ms, notes


def lt_sync(x):
    lt.mark_step()
    return x


# ---- workloads: each returns {impl: callable} built on shared random inputs --------------------

def sin_chain(n=1 << 20):
    x0 = np.random.default_rng(0).standard_normal(n).astype(np.float32)

    def lazy_run(dev):
        x = lt.tensor(x0, device=dev)
        def f():
            y = x
            for _ in range(20):
                y = y + y.sin()
            lt.mark_step()
            return y
        return f

    def np_run():
        y = x0
        for _ in range(20):
            y = y + np.sin(y)
        return y

    impls = {"lazy": lazy_run("lazy"), "cpu": lazy_run("cpu"), "numpy": np_run}
    if torch is not None:
        xt = torch.from_numpy(x0)
        def torch_run():
            y = xt
            for _ in range(20):
                y = y + y.sin()
            return y
        impls["torch"] = torch_run
    return impls


def ln_gelu(rows=2048, cols=1024):
    rng = np.random.default_rng(1)
    x0, r0 = (rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(2))
    w0, b0 = (rng.standard_normal(cols).astype(np.float32) for _ in range(2))

    def lt_run(dev):
        x, r, w, b = (lt.tensor(a, device=dev) for a in (x0, r0, w0, b0))
        def f():
            y = lt.nn.functional.gelu(lt.nn.functional.layer_norm(x, (cols,), w, b)) + r
            lt.mark_step()
            return y
        return f

    impls = {"lazy": lt_run("lazy"), "cpu": lt_run("cpu")}
    if torch is not None:
        x, r, w, b = (torch.from_numpy(a) for a in (x0, r0, w0, b0))
        impls["torch"] = lambda: torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (cols,), w, b)) + r
    return impls


def softmax(n=2048):
    x0 = np.random.default_rng(2).standard_normal((n, n)).astype(np.float32)

    def lt_run(dev):
        x = lt.tensor(x0, device=dev)
        def f():
            y = x.softmax(-1)
            lt.mark_step()
            return y
        return f

    def np_run():
        e = np.exp(x0 - x0.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    impls = {"lazy": lt_run("lazy"), "cpu": lt_run("cpu"), "numpy": np_run}
    if torch is not None:
        xt = torch.from_numpy(x0)
        impls["torch"] = lambda: torch.softmax(xt, -1)
    return impls


def matmul(n=1024):
    rng = np.random.default_rng(3)
    a0, b0 = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))

    def lt_run(dev):
        a, b = lt.tensor(a0, device=dev), lt.tensor(b0, device=dev)
        def f():
            y = a @ b
            lt.mark_step()
            return y
        return f

    impls = {"lazy": lt_run("lazy"), "cpu": lt_run("cpu"), "numpy": lambda: a0 @ b0}
    if torch is not None:
        at, bt = torch.from_numpy(a0), torch.from_numpy(b0)
        impls["torch"] = lambda: at @ bt
    return impls


def train_step_impls(logits, w0, x0, y0):
    """{lazy, cpu, torch: one SGD step (forward, cross_entropy, backward, update)} of the model
    `logits(F, ws, x)`, from the same weights w0 and batch (x0, y0) in each framework."""
    def step_fn(ws, x, y, F, no_grad, sync=lambda: None):
        def step():
            for w in ws:
                w.grad = None
            loss = F.cross_entropy(logits(F, ws, x), y)
            loss.backward()
            with no_grad():
                for w in ws:
                    w -= w.grad * 0.01
            sync()  # lt.mark_step on lazytensor: the step is one graph
            return loss
        return step

    def lt_run(dev):
        ws = [lt.tensor(w, device=dev, requires_grad=True) for w in w0]
        return step_fn(ws, lt.tensor(x0, device=dev), lt.tensor(y0, device=dev), lt.nn.functional, lt.no_grad,
                       lt.mark_step)

    impls = {"lazy": lt_run("lazy"), "cpu": lt_run("cpu")}
    if torch is not None:
        tws = [torch.tensor(w, requires_grad=True) for w in w0]
        impls["torch"] = step_fn(tws, torch.from_numpy(x0), torch.from_numpy(y0), torch.nn.functional,
                                 torch.no_grad)
    return impls


def cnn_train_step(batch=64, size=28):
    """A small CNN train step (forward, cross_entropy, backward, SGD): Conv(1,8,3)-ReLU-MaxPool-
    Conv(8,16,3)-ReLU-MaxPool-Linear on [batch, 1, size, size], the same weights everywhere."""
    rng = np.random.default_rng(4)
    x0 = rng.standard_normal((batch, 1, size, size)).astype(np.float32)
    y0 = rng.integers(0, 10, batch).astype(np.int64)
    flat = 16 * (size // 4) * (size // 4)
    shapes = [(8, 1, 3, 3), (8,), (16, 8, 3, 3), (16,), (10, flat), (10,)]
    w0 = [(rng.standard_normal(s) * 0.1).astype(np.float32) for s in shapes]

    def logits(F, ws, x):
        h = F.max_pool2d(F.relu(F.conv2d(x, ws[0], ws[1], padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, ws[2], ws[3], padding=1)), 2)
        return F.linear(h.reshape(h.shape[0], -1), ws[4], ws[5])
    return train_step_impls(logits, w0, x0, y0)


def mlp_train_step(batch=128, sizes=(784, 1024, 1024, 10)):
    """An MLP train step (forward, cross_entropy, backward, SGD): Linear-ReLU-Linear-ReLU-Linear on
    [batch, 784], the same weights everywhere."""
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y0 = rng.integers(0, sizes[-1], batch).astype(np.int64)
    w0 = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w0 += [(rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype(np.float32),
               (rng.standard_normal(fan_out) * 0.1).astype(np.float32)]

    def logits(F, ws, x):
        h = x
        for i in range(0, len(ws) - 2, 2):
            h = F.relu(F.linear(h, ws[i], ws[i + 1]))
        return F.linear(h, ws[-2], ws[-1])
    return train_step_impls(logits, w0, x0, y0)


WORKLOADS = {
    "sin_chain_20_n2^20": (sin_chain, {}),
    "layer_norm_gelu_res_2048x1024": (ln_gelu, {}),
    "softmax_2048x2048": (softmax, {}),
    "matmul_1024^3": (matmul, {}),
    "mlp_train_step_784_1024_1024_10_b128": (mlp_train_step, {}),
    "cnn_train_step_b64_28x28": (cnn_train_step, {}),
}
QUICK = {"sin_chain_20_n2^20": {"n": 1 << 16}, "layer_norm_gelu_res_2048x1024": {"rows": 256, "cols": 256},
         "softmax_2048x2048": {"n": 256}, "matmul_1024^3": {"n": 128},
         "mlp_train_step_784_1024_1024_10_b128": {"batch": 8, "sizes": (32, 64, 64, 10)},
         "cnn_train_step_b64_28x28": {"batch": 8, "size": 12}}


def host_cpu():
    """The CPU's model name and widest vector ISA from /proc/cpuinfo: results differ by CPU (the
    generated kernels use AVX-512 where the host has it), so each table says which one it came from."""
    info, flags = {}, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = (part.strip() for part in line.partition(":"))
                if key == "flags":
                    flags = set(value.split())
                    break
                info.setdefault(key, value)
    except OSError:
        pass
    # A VM may name only the brand ("AMD EPYC"); family and model tell the generation.
    model = info.get("model name", platform.processor() or platform.machine())
    if "cpu family" in info:
        model += f" (family {info['cpu family']}, model {info.get('model', '?')})"
    isa = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("sse4_2", "SSE4.2"))
                if flag in flags), "unknown")
    return {"model": model, "vector_isa": isa}


def first_call_s(fn):
    """The first call of a lazy workload with nothing compiled: the in-memory graph cache cleared and
    the disk cache off (main sets LT_CACHE_DIR=off), so it traces, lowers, compiles and runs."""
    lt._C._clear_graph_cache()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def trace_cost(binary):
    """bench_trace_cost's JSON line (C++ tracing cost per op, cold and warm sync of a 1,000-node
    graph), or None when the binary is not there."""
    if not binary or not os.path.exists(binary):
        return None
    import subprocess
    env = dict(os.environ, LT_CACHE_DIR="off")
    time.sleep(SETTLE_S)  # PyTorch's worker threads, still spinning in this process, share the cores
    out = subprocess.run([binary], capture_output=True, text=True, env=env, timeout=300)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def default_trace_cost_bin():
    """build/bin/bench_trace_cost next to the build whose python/ dir holds this lazytensor."""
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(lt.__file__))))
    return os.path.join(build, "bin", "bench_trace_cost")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--repeats", type=int, default=None, help="timed calls per implementation (default 30)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="alternating blocks the repeats are split into (default 6)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default=None)
    ap.add_argument("--trace-cost-bin", default=None,
                    help="bench_trace_cost binary (default: build/bin next to the Python module)")
    args = ap.parse_args()
    # Cold compiles are measured, so nothing may come from an earlier run's disk cache.
    os.environ["LT_CACHE_DIR"] = "off"
    repeats = args.repeats or (3 if args.quick else 30)
    rounds = args.rounds or (1 if args.quick else 6)
    rows = []
    for name, (make, kw) in WORKLOADS.items():
        if args.only and args.only not in name:
            continue
        kw = QUICK.get(name, {}) if args.quick else kw
        impls = make(**kw)
        row = {"workload": name}
        if "lazy" in impls:
            row["lazy_first_s"] = first_call_s(impls["lazy"])
        ms, notes = time_impls(impls, repeats, rounds, 0 if args.quick else SETTLE_S)
        row.update(ms)
        if notes:
            row["notes"] = notes
        rows.append(row)
    impls = ["lazy", "cpu", "numpy", "torch"]
    cpu = host_cpu()
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{cpu['model']} ({cpu['vector_isa']}), "
          f"torch {torch.__version__ if torch else 'n/a'} ({torch.get_num_threads() if torch else 0} threads)")
    print(f"{'workload':38}" + "".join(f"{i + ' ms':>11}" for i in impls) + f"{'torch/lazy':>12}{'lazy 1st s':>12}")
    for r in rows:
        cells = "".join(f"{r[i]:11.3f}" if r.get(i) is not None else f"{'n/a':>11}" for i in impls)
        ratio = r["torch"] / r["lazy"] if r.get("torch") and r.get("lazy") else None
        first = f"{r['lazy_first_s']:12.3f}" if r.get("lazy_first_s") is not None else f"{'n/a':>12}"
        print(f"{r['workload']:38}{cells}{(f'{ratio:11.2f}x' if ratio else 'n/a'):>12}{first}")
        for n in r.get("notes", []):
            print(f"    note: {n}")
    print("lazy 1st s: the first call with nothing compiled (trace, lower, LLVM, run), LT_CACHE_DIR=off")
    tc = None if args.quick else trace_cost(args.trace_cost_bin or default_trace_cost_bin())
    if tc:
        # Wall time per op is the figure; the thread's CPU time per op (median and 10th percentile
        # over groups of 1,000 ops) shows how much of it the VM's neighbours took.
        print(f"C++ tracing (bench_trace_cost, {tc['ops']} elementwise ops): {tc['trace_us_per_op']:.3f} us per op "
              f"(thread CPU median {tc['trace_cpu_us_per_op_median']:.3f}, p10 {tc['trace_cpu_us_per_op_p10']:.3f}); "
              f"1,000-node graph: cold sync {tc['graph_1000_nodes_cold_ms']:.0f} ms, "
              f"warm sync {tc['graph_1000_nodes_warm_sync_us']:.0f} us")
    elif not args.quick:
        print("C++ tracing: n/a (bench_trace_cost not found; pass --trace-cost-bin)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.node(), "cores": os.cpu_count(), "cpu": cpu, "rows": rows,
                       "trace_cost": tc}, f,
                      indent=1)


if __name__ == "__main__":
    sys.exit(main())
