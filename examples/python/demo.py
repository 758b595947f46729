"""`make demo`: examples/python/train_mlp.py trained on "lazy" and then on "cpu", side by side.

The same script, the same seed, the same data; only the device differs. On "lazy" every training
step (forward, backward, AdamW update) is traced, compiled once into one fused graph and replayed
from the graph cache (the learning-rate schedule never recompiles: learning rates are runtime
scalars). On "cpu" every op runs eagerly as its own kernel. Both runs must reach the accuracy that
train_mlp.py states, and their losses must agree.
"""
import importlib.util
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
STEPS = 200
BATCH = 128
REQUIRED = 0.93  # held-out accuracy both runs must reach (train_mlp.py's default)


def _load_train_mlp():
    spec = importlib.util.spec_from_file_location("train_mlp", HERE / "train_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    train_mlp = _load_train_mlp()
    print(f"Training an MLP classifier ({STEPS} steps, batch {BATCH}, AdamW, cosine lr) on 'lazy'...")
    lazy = train_mlp.train("lazy", STEPS, BATCH, log_every=max(1, STEPS // 5))
    print(f"\n... and the same script on 'cpu' (eager):")
    cpu = train_mlp.train("cpu", STEPS, BATCH, log_every=max(1, STEPS // 5))

    rows = [
        ("total time (s)", "{:.2f}", lazy["seconds"], cpu["seconds"]),
        ("first step (ms, incl. compile)", "{:.1f}", lazy["first_step_s"] * 1e3, cpu["first_step_s"] * 1e3),
        ("steps/s after the first", "{:.1f}", lazy["steps_per_s"], cpu["steps_per_s"]),
        ("graphs compiled", "{}", lazy["graph_compiles"], cpu["graph_compiles"]),
        ("final loss", "{:.4f}", lazy["losses"][-1], cpu["losses"][-1]),
        ("held-out accuracy", "{:.3f}", lazy["accuracy"], cpu["accuracy"]),
    ]
    print(f"\n{'':34}{'lazy':>12}{'cpu (eager)':>14}")
    for label, fmt, a, b in rows:
        print(f"{label:34}{fmt.format(a):>12}{fmt.format(b):>14}")
    ratio = lazy["steps_per_s"] / cpu["steps_per_s"] if cpu["steps_per_s"] > 0 else float("nan")
    print(f"\nsteady-state speed, lazy / cpu: {ratio:.2f}x")
    worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(lazy["losses"], cpu["losses"]))
    print(f"largest relative loss difference lazy vs cpu over {STEPS} steps: {worst:.2e}")
    print("\nlt.metrics.report() after the lazy run:")
    print(lazy["report"])
    if lazy["accuracy"] < REQUIRED or cpu["accuracy"] < REQUIRED:
        raise SystemExit(f"demo: accuracy below {REQUIRED} (lazy {lazy['accuracy']:.3f}, "
                         f"cpu {cpu['accuracy']:.3f})")
    if worst > 1e-3:
        raise SystemExit(f"demo: lazy and cpu losses disagree ({worst:.2e} relative)")


if __name__ == "__main__":
    main()
