"""The `lazy` device inside PyTorch on the GPU machine (torch 2.11 CUDA): `lazy` tensors live on
lazytensor's default lazy backend, CUDA when a GPU is visible. The nanoGPT-style GPT and an MLP
train with device="lazy" against the same code on device "cuda" (PyTorch eager): losses over 20
steps within 1e-4 relative, no op falls back to PyTorch, no compile after the second step.
Prints one line per model; exit 1 on any failure.

  PYTHONPATH=build-gpu/python python3 tests/gpu/check_lazy_device_cuda.py
"""
import os
import sys
import traceback

import numpy as np
import torch
import torch.nn.functional as F

import lazytensor as lt
import lazytensor.torch  # noqa: F401  (autoload may already have installed the device)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from torch_models import GPT  # noqa: E402

STEPS = 20


def side_by_side(name, make, batch, loss_fn):
    torch.manual_seed(0)
    ref, mine = make().cuda(), make()
    mine.load_state_dict({k: v.cpu() for k, v in ref.state_dict().items()})
    mine = mine.to("lazy")
    opts = torch.optim.AdamW(ref.parameters(), lr=1e-3), torch.optim.AdamW(mine.parameters(), lr=1e-3)
    fallbacks = lt.metrics.counters().get("fallbacks", 0)
    worst, compiles = 0.0, []
    for _ in range(STEPS):
        pair = []
        for model, opt, dev in ((ref, opts[0], "cuda"), (mine, opts[1], "lazy")):
            opt.zero_grad()
            loss = loss_fn(model, *(b.to(dev) for b in batch))
            loss.backward()
            opt.step()
            pair.append(loss.item())
        worst = max(worst, abs(pair[1] - pair[0]) / max(abs(pair[0]), 1e-12))
        compiles.append(lt.metrics.counters()["graph_compiles"])
    fell = lt.metrics.counters().get("fallbacks", 0) - fallbacks
    ok = worst <= 1e-4 and fell == 0 and compiles[-1] == compiles[1]
    print(f"{'PASS' if ok else 'FAIL'} {name}: worst loss rel diff {worst:.2e} (tol 1e-4), fallbacks {fell}, "
          f"compiles after step 2: {compiles[-1] - compiles[1]}")
    return ok


def tf32_switch():
    """lt.backends.cuda.matmul.allow_tf32 reaches the CUDA GEMMs at run time: a float32 product's
    error against float64 is float32-sized with it off, TF32-sized (10-bit mantissa) with it on,
    and off again after; the same executable serves all three (its CUDA graph rebuilt)."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((512, 512)), rng.standard_normal((512, 512))
    ref = a @ b
    x, w = lt.tensor(a.astype(np.float32), device="lazy:cuda"), lt.tensor(b.astype(np.float32), device="lazy:cuda")
    errs = []
    for on in (False, True, False):
        lt.backends.cuda.matmul.allow_tf32 = on
        for _ in range(4):  # past the replays that turn into one captured CUDA graph
            got = (x @ w).numpy()
        errs.append(float(np.abs(got - ref).max() / np.abs(ref).max()))
    lt.backends.cuda.matmul.allow_tf32 = False
    ok = errs[0] < 1e-5 and errs[1] > 1e-4 and errs[2] < 1e-5
    print(f"{'PASS' if ok else 'FAIL'} TF32 switch: rel err off {errs[0]:.1e}, on {errs[1]:.1e}, off again {errs[2]:.1e}")
    return ok


def main():
    rng = np.random.default_rng(0)
    failures = 0
    cases = [
        ("MLP", lambda: torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 10)),
         (torch.from_numpy(rng.standard_normal((16, 32)).astype(np.float32)), torch.from_numpy(rng.integers(0, 10, 16))),
         lambda m, x, y: F.cross_entropy(m(x), y)),
        ("GPT (sdpa, tied weights)", GPT,
         (torch.from_numpy(rng.integers(0, 64, (4, 16))), torch.from_numpy(rng.integers(0, 64, (4, 16)))),
         lambda m, idx, tgt: m(idx, tgt)),
    ]
    for name, make, batch, loss_fn in cases:
        try:
            failures += not side_by_side(name, make, batch, loss_fn)
        except Exception:  # noqa: BLE001 (a failing case is reported, the others still run)
            traceback.print_exc()
            print(f"FAIL {name}: raised")
            failures += 1
    try:
        failures += not tf32_switch()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        print("FAIL TF32 switch: raised")
        failures += 1
    print(f"{len(cases) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
