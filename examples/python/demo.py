"""`make demo`: one fused elementwise + reduction expression, run step by step on "lazy" and "cpu".

    y = relu(sin(x * w + b) * scale).sum(1)     x: (512, 1024), w, b: (1024,), scale changes each step

On "lazy" each step is traced and compiled once into one fused kernel; later steps hit the graph
cache (the changing `scale` is a runtime parameter, so it never recompiles). On "cpu" every op runs
eagerly as its own kernel and writes its full-size intermediate to memory. Both runs use the same
random inputs (same seed, same numbers on every device) and must agree.
"""
import time

import numpy as np

import lazytensor as lt

STEPS = 20
SHAPE = (512, 1024)


def step(x, w, b, scale):
    return ((x * w + b).sin() * scale).relu().sum(1)


def run(device):
    lt.manual_seed(0)
    x = lt.randn(*SHAPE, device=device)
    w = lt.randn(SHAPE[1], device=device)
    b = lt.randn(SHAPE[1], device=device)
    lt.mark_step()  # materialize the inputs before timing
    lt.metrics.reset()
    times = []
    y = None
    for i in range(STEPS):
        t0 = time.perf_counter()
        y = step(x, w, b, 1.0 + 0.1 * i)
        lt.mark_step()  # the end of a step: compiles (first time) and runs the lazy graph
        y.numpy()       # a no-op sync once materialized; on cpu the result is already there
        times.append(time.perf_counter() - t0)
    counters = lt.metrics.counters()
    graph = lt.metrics.last_graph()
    report = lt.metrics.report()
    reference = x.numpy().astype(np.float64), w.numpy().astype(np.float64), b.numpy().astype(np.float64)
    return {
        "y": y.numpy(),
        "first_ms": times[0] * 1e3,
        "steady_ms": float(np.median(times[1:])) * 1e3,
        "compiles": counters["graph_compiles"],
        "cache_hits": counters["graph_cache_hits"],
        "kernels_compiled": counters["kernels_compiled"],
        "kernel_launches": counters["kernel_launches"],
        "kernels_last_graph": graph["kernels"],
        "backend": graph["backend"],
        "report": report,
        "inputs": reference,
    }


def main():
    lazy = run("lazy")
    cpu = run("cpu")

    xs, ws, bs = lazy["inputs"]
    want = np.maximum(np.sin(xs * ws + bs) * (1.0 + 0.1 * (STEPS - 1)), 0).sum(1)
    err_lazy = np.max(np.abs(lazy["y"] - want) / (1 + np.abs(want)))
    err_cpu = np.max(np.abs(cpu["y"] - want) / (1 + np.abs(want)))
    same_inputs = all(np.array_equal(a, c) for a, c in zip(lazy["inputs"], cpu["inputs"]))

    print(f"y = relu(sin(x * w + b) * scale).sum(1), x: {SHAPE}, {STEPS} steps, scale changes every step\n")
    rows = [
        ("first step (ms, incl. compile)", "first_ms", "{:.2f}"),
        ("later steps (ms, median)", "steady_ms", "{:.3f}"),
        ("graphs compiled", "compiles", "{}"),
        ("graph cache hits", "cache_hits", "{}"),
        ("kernels compiled", "kernels_compiled", "{}"),
        ("kernel launches", "kernel_launches", "{}"),
        ("kernels in the last graph", "kernels_last_graph", "{}"),
    ]
    print(f"{'':34}{'lazy':>12}{'cpu (eager)':>14}")
    for label, key, fmt in rows:
        print(f"{label:34}{fmt.format(lazy[key]):>12}{fmt.format(cpu[key]):>14}")
    ratio = cpu["steady_ms"] / lazy["steady_ms"] if lazy["steady_ms"] > 0 else float("nan")
    print(f"\nsteady-state step time, cpu / lazy: {ratio:.2f}x  (lazy backend: {lazy['backend']})")
    print(f"same random inputs on both devices: {same_inputs}")
    print(f"max relative error vs NumPy float64: lazy {err_lazy:.2e}, cpu {err_cpu:.2e}")
    print("\nlt.metrics.report() after the lazy run:")
    print(lazy["report"])
    if not same_inputs or err_lazy > 1e-4 or err_cpu > 1e-4:
        raise SystemExit("demo: results disagree")


if __name__ == "__main__":
    main()
