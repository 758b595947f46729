"""The `lazy` device inside PyTorch (issue 27) against its peers, in one run on one machine:
  * host cost of tracing one elementwise op through torch's dispatcher (LazyTensor.__torch_dispatch__)
    against lazytensor's own API on `lazy`, and torch eager on `cpu` running it;
  * the nanoGPT-style training step (tests/python/torch_models.py GPT, AdamW) on device "lazy"
    against the same script on "cpu" (torch eager), median of rounds after warm-up.
Every contender is timed the same way (time.perf_counter around N calls, a sync where the
contender is lazy). Prints a JSON line and a markdown table; ratios are to the first column.

    PYTHONPATH=build/python .venv/bin/python bench/lazy_device.py
"""
import json
import pathlib
import sys

import numpy as np
import torch

import lazytensor as lt
import lazytensor.torch  # noqa: F401

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))
from timing import median_ms_per_step, median_us_per_call  # noqa: E402  (bench/)
from torch_models import GPT  # noqa: E402


def step_ms(device, steps=10, rounds=3):
    torch.manual_seed(0)
    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    idx, tgt = (torch.from_numpy(rng.integers(0, 64, (8, 16))).to(device) for _ in range(2))

    def step():
        opt.zero_grad()
        loss = model(idx, tgt)
        loss.backward()
        opt.step()
        return loss
    for _ in range(3):
        step().item()
    return median_ms_per_step(step, steps, rounds)


def main():
    a, b = torch.randn(16, 16, device="lazy"), torch.randn(16, 16, device="lazy")
    la, lb = lt.randn(16, 16, device="lazy"), lt.randn(16, 16, device="lazy")
    c, d = torch.randn(16, 16), torch.randn(16, 16)
    ops = {
        "lt API on lazy": median_us_per_call(lambda: la * lb, sync=lt.mark_step),
        "torch, device lazy": median_us_per_call(lambda: a * b, sync=lt.mark_step),
        "torch eager cpu": median_us_per_call(lambda: c * d),
    }
    steps = {"torch eager cpu": step_ms("cpu"), "torch, device lazy": step_ms("lazy")}
    print(json.dumps({"trace_us_per_op": ops, "gpt_step_ms": steps}))
    print("| measure | " + " | ".join(ops) + " |")
    print("| --- |" + " --- |" * len(ops))
    base = ops["lt API on lazy"]
    print("| host us per traced op (ratio) | " + " | ".join(f"{v:.2f} ({v / base:.1f}x)" for v in ops.values()) + " |")
    base = steps["torch eager cpu"]  # the columns in the header's order: none for the lt API
    print("| GPT step ms (ratio to cpu eager) | | " + " | ".join(
        f"{steps[k]:.1f} ({steps[k] / base:.2f}x)" for k in ("torch, device lazy", "torch eager cpu")) + " |")


if __name__ == "__main__":
    main()
