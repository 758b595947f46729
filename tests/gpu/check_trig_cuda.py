"""float32 sin/cos on the CUDA backend (inline Cody-Waite + polynomial below |x| = 39000, CUDA's
sinf/cosf beyond: backends/cuda/cuda_preamble.h kPreambleTrig) against float64 numpy, in ulps of
the float32 result, on `cuda` and `lazy:cuda`; float16/bfloat16 against PyTorch CUDA. Run by
tests/gpu/run.sh (stage py); exits 1 on a failure."""
import sys

import numpy as np
import torch

import lazytensor as lt

failures = []
MAX_ULP = 2.5  # the CPU backend's inline sin/cos bound (tests/python/test_cpu_trig.py)


def ulp_error(got, want64):
    """|got - want| in units of the float32 spacing at want (denormal spacing near zero)."""
    want32 = want64.astype(np.float32)
    spacing = np.spacing(np.abs(want32)).astype(np.float64)
    spacing = np.maximum(spacing, np.float64(np.finfo(np.float32).smallest_subnormal))
    return np.abs(got.astype(np.float64) - want64) / spacing


def inputs():
    rng = np.random.default_rng(7)
    parts = [
        rng.uniform(-4, 4, 200_000),                  # the polynomial's own range and one fold
        rng.uniform(-1000, 1000, 200_000),
        rng.uniform(-39000, 39000, 200_000),          # up to the inline path's bound
        rng.uniform(38990, 39010, 20_000) * rng.choice([-1, 1], 20_000),  # across it
        10.0 ** rng.uniform(4.6, 38, 50_000) * rng.choice([-1, 1], 50_000),  # CUDA's sinf/cosf
        np.pi / 2 * rng.integers(-20000, 20000, 20_000),  # near multiples of pi/2
        np.array([0.0, -0.0, 1e-30, -1e-30, 1e-40, 39000.0, -39000.0, 3.4e38]),
    ]
    return np.concatenate(parts).astype(np.float32)


def check_f32(device, name):
    x = inputs()
    for op in ("sin", "cos"):
        t = lt.tensor(x, device=device)
        got = getattr(t, op)().numpy()
        want = getattr(np, op)(x.astype(np.float64))
        err = ulp_error(got, want)
        worst = int(np.argmax(err))
        msg = (f"{op} float32 on {device}: max {err[worst]:.2f} ulp at x = {x[worst]!r} "
               f"(got {got[worst]!r}, float64 {want[worst]!r})")
        if op == "sin":  # sign of zero kept: sin(-0) = -0
            z = lt.tensor(np.array([-0.0, 0.0], np.float32), device=device).sin().numpy()
            if not (np.signbit(z[0]) and not np.signbit(z[1])):
                failures.append(f"{name}: sin(-0.0) / sin(0.0) gave {z!r}")
        if err[worst] > MAX_ULP:
            failures.append(msg)
            print("FAIL ", msg)
        else:
            print("pass ", msg)
    specials = np.array([np.inf, -np.inf, np.nan], np.float32)
    for op in ("sin", "cos"):
        got = getattr(lt.tensor(specials, device=device), op)().numpy()
        if not np.all(np.isnan(got)):
            failures.append(f"{op}(inf, -inf, nan) on {device} gave {got!r}, want NaN")


def check_chain(device):
    """The fused chain of the benchmark: 20 x = x + sin(x) against PyTorch CUDA float32."""
    x0 = np.random.default_rng(3).standard_normal(1 << 16).astype(np.float32) * 10
    x, xt = lt.tensor(x0, device=device), torch.from_numpy(x0).cuda()
    for _ in range(20):
        x, xt = x + x.sin(), xt + torch.sin(xt)
    got, want = x.numpy(), xt.cpu().numpy()
    err = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1)))
    (failures.append if err > 1e-4 else print)(f"x + sin(x) x20 on {device} vs PyTorch: rel err {err:.2e}")


def check_half(device, dtype):
    x0 = np.random.default_rng(5).uniform(-100, 100, 10_000).astype(np.float32)
    tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    for op in ("sin", "cos"):
        got = getattr(lt.tensor(x0, device=device).to(getattr(lt, dtype)), op)().float().numpy()
        want = getattr(torch.from_numpy(x0).cuda().to(tdt), op)().float().cpu().numpy()
        tol = 1e-3 if dtype == "float16" else 8e-3  # one rounding of the 16-bit result
        err = float(np.max(np.abs(got - want)))
        (failures.append if err > tol else print)(f"{op} {dtype} on {device} vs PyTorch: max abs {err:.2e}")


for dev in ("cuda", "lazy:cuda"):
    for fn, args in ((check_f32, (dev, dev)), (check_chain, (dev,)), (check_half, (dev, "float16")),
                     (check_half, (dev, "bfloat16"))):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - every failure is reported by name
            failures.append(f"{fn.__name__}{args}: {type(e).__name__}: {e}")

for f in failures:
    print("FAIL ", f)
print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
