"""Eager `cpu` per-op cost against PyTorch eager (issue 32 item 2: an op that hits the kernel cache
should cost at most 1.5x PyTorch's per-op time for small tensors). Each op runs N times in a loop
after a warm-up, in one process, lazytensor and torch timed the same way (time.perf_counter around
the loop); median of rounds. Prints a JSON line and a markdown table (ratio = lazytensor / torch).

    PYTHONPATH=build/python .venv/bin/python bench/eager_ops.py
"""
import json

import numpy as np
import torch

import lazytensor as lt
from timing import median_us_per_call


def main():
    rng = np.random.default_rng(0)
    rows = {}
    for shape in [(16, 16), (256, 256)]:
        a_np, b_np = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        la, lb = lt.tensor(a_np), lt.tensor(b_np)
        ta, tb = torch.from_numpy(a_np.copy()), torch.from_numpy(b_np.copy())
        ops = {
            "a * b": (lambda: la * lb, lambda: ta * tb),
            "a + 1.5": (lambda: la + 1.5, lambda: ta + 1.5),
            "exp(a)": (lambda: la.exp(), lambda: ta.exp()),
            "a.sum(1)": (lambda: la.sum(1), lambda: ta.sum(1)),
            "a @ b": (lambda: la @ lb, lambda: ta @ tb),
            "a[1:5]": (lambda: la[1:5], lambda: ta[1:5]),
            "a[3]": (lambda: la[3], lambda: ta[3]),
            "a.reshape(-1)": (lambda: la.reshape(-1), lambda: ta.reshape(-1)),
            "a.t()": (lambda: la.t(), lambda: ta.t()),
        }
        for name, (mine, theirs) in ops.items():
            rows[f"{name} {list(shape)}"] = (median_us_per_call(mine, warmup=200),
                                                 median_us_per_call(theirs, warmup=200))
    print(json.dumps({k: {"lazytensor_us": v[0], "torch_us": v[1]} for k, v in rows.items()}))
    print("| op | lazytensor cpu us | torch cpu us | ratio |")
    print("| --- | --- | --- | --- |")
    for k, (mine, theirs) in rows.items():
        print(f"| {k} | {mine:.2f} | {theirs:.2f} | {mine / theirs:.2f}x |")


if __name__ == "__main__":
    main()
