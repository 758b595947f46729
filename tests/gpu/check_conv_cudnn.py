"""On the GPU machine: convolutions on `lazy:cuda` and eager `cuda` through cuDNN
(backends/cuda/cudnn_conv.h) against PyTorch CUDA in float64 from the same (rounded) inputs:
forward, input and weight gradients, bias and a fused ReLU, strides, padding, dilation, groups,
odd sizes, in float32, float64, float16 and bfloat16; the `cudnn.allow_tf32` switch's effect on
float32 values; and the same convolutions with LT_CUDNN=0's path (GEMMs) for comparison of the
step counts. Prints one line per check; exit 1 on any failure.

  PYTHONPATH=build-gpu/python python3 tests/gpu/check_conv_cudnn.py
"""
import sys
import time
import traceback

import numpy as np
import torch

import lazytensor as lt
import lazytensor.nn.functional as F

# Relative to the largest reference value. float32 without TF32 rounds like a float32 sum.
TOL = {"float32": 2e-5, "float64": 1e-12, "float16": 4e-3, "bfloat16": 3e-2}
LT_DTYPE = {"float32": lt.float32, "float64": lt.float64, "float16": lt.float16, "bfloat16": lt.bfloat16}
TORCH_DTYPE = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
               "bfloat16": torch.bfloat16}

# (N, C, H, W, O, kh, kw, stride, padding, dilation, groups, bias, relu)
CASES = [
    (2, 3, 17, 13, 8, 3, 3, 1, 1, 1, 1, True, False),
    (3, 16, 12, 12, 32, 3, 3, 2, 1, 1, 1, False, True),
    (2, 8, 9, 11, 8, 5, 3, (2, 1), (2, 0), (1, 2), 2, True, True),
    (4, 32, 8, 8, 32, 3, 3, 1, 1, 1, 32, False, False),  # depthwise
    (5, 64, 7, 7, 128, 1, 1, 2, 0, 1, 1, False, False),  # a ResNet downsample
]


def rounded(rng, shape, dtype):
    """float64 values that `dtype` holds exactly (drawn, then rounded through torch)."""
    v = torch.from_numpy(rng.standard_normal(shape))
    return v.to(TORCH_DTYPE[dtype]).double().numpy()


def one_case(case, dtype, device, rng):
    N, C, H, W, O, kh, kw, stride, padding, dilation, groups, bias, relu = case
    x = rounded(rng, (N, C, H, W), dtype)
    w = rounded(rng, (O, C // groups, kh, kw), dtype)
    b = rounded(rng, (O,), dtype) if bias else None
    # Reference: PyTorch CUDA in float64.
    tx, tw = (torch.tensor(v, device="cuda", requires_grad=True) for v in (x, w))
    tb = torch.tensor(b, device="cuda", requires_grad=True) if bias else None
    ty = torch.nn.functional.conv2d(tx, tw, tb, stride, padding, dilation, groups)
    if relu:
        ty = torch.relu(ty)
    g = rounded(rng, tuple(ty.shape), dtype)
    ty.backward(torch.tensor(g, device="cuda"))
    ref = [ty.detach().cpu().numpy(), tx.grad.cpu().numpy(), tw.grad.cpu().numpy()]
    if bias:
        ref.append(tb.grad.cpu().numpy())
    # lazytensor, in `dtype` on `device`.
    dt = LT_DTYPE[dtype]

    def leaf(v):
        return lt.tensor(v, device=device).to(dt).detach().requires_grad_()

    lx, lw = leaf(x), leaf(w)
    lb = leaf(b) if bias else None
    ly = F.conv2d(lx, lw, lb, stride, padding, dilation, groups)
    if relu:
        ly = F.relu(ly)
    ly.backward(lt.tensor(g, device=device).to(dt))
    got = [ly.detach(), lx.grad, lw.grad] + ([lb.grad] if bias else [])
    errs = []
    for r, t in zip(ref, got):
        t = t.to(lt.float64).numpy()
        errs.append(float(np.abs(t - r).max() / max(np.abs(r).max(), 1e-30)))
    ok = max(errs) <= TOL[dtype]
    print(f"{'PASS' if ok else 'FAIL'} conv {device} {dtype} N{N} C{C} {H}x{W} O{O} k{kh}x{kw} s{stride} p{padding} "
          f"d{dilation} g{groups}{' bias' if bias else ''}{' relu' if relu else ''}: rel err "
          + " ".join(f"{e:.1e}" for e in errs))
    return ok


def tf32_switch():
    """lt.backends.cudnn.allow_tf32 reaches the cuDNN launches: a float32 convolution over 2,304
    products per output is float32-accurate with it off, TF32-rounded with it on (PyTorch's
    default), and accurate again after; one executable serves all three (its graph rebuilt)."""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((8, 256, 14, 14)), rng.standard_normal((256, 256, 3, 3))
    ref = torch.nn.functional.conv2d(torch.tensor(x, device="cuda"), torch.tensor(w, device="cuda"),
                                     padding=1).cpu().numpy()
    lx = lt.tensor(x.astype(np.float32), device="lazy:cuda")
    lw = lt.tensor(w.astype(np.float32), device="lazy:cuda")
    errs = []
    for on in (False, True, False):
        lt.backends.cudnn.allow_tf32 = on
        for _ in range(5):  # past the replays that turn into one captured CUDA graph
            got = F.conv2d(lx, lw, padding=1).numpy()
        errs.append(float(np.abs(got - ref).max() / np.abs(ref).max()))
    lt.backends.cudnn.allow_tf32 = True
    ok = errs[0] < 1e-5 and errs[1] > 1e-4 and errs[2] < 1e-5
    print(f"{'PASS' if ok else 'FAIL'} cudnn.allow_tf32 switch: rel err off {errs[0]:.1e}, on {errs[1]:.1e}, "
          f"off again {errs[2]:.1e}")
    return ok


def resnet_block_timing():
    """Informational: a ResNet-18 stage-2 convolution's forward and backward, ours against
    PyTorch CUDA (both TF32, their defaults), median of 20 after warm-up. No assertion."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((128, 128, 16, 16)).astype(np.float32)
    w = (rng.standard_normal((128, 128, 3, 3)) * 0.05).astype(np.float32)
    tx = torch.tensor(x, device="cuda", requires_grad=True)
    tw = torch.tensor(w, device="cuda", requires_grad=True)
    lx = lt.tensor(x, device="lazy:cuda").requires_grad_()
    lw = lt.tensor(w, device="lazy:cuda").requires_grad_()

    def torch_step():
        tx.grad = tw.grad = None
        torch.nn.functional.conv2d(tx, tw, padding=1).square().mean().backward()
        torch.cuda.synchronize()

    def lt_step():
        lx.grad = lw.grad = None
        F.conv2d(lx, lw, padding=1).square().mean().backward()
        lt.sync([lx.grad, lw.grad])
        lt.cuda.synchronize()

    out = {}
    for name, fn in (("torch", torch_step), ("lazytensor", lt_step)):
        for _ in range(5):
            fn()
        ts = []
        for _ in range(20):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        out[name] = float(np.median(ts)) * 1e3
    print(f"INFO conv 128x128x16x16 3x3 fwd+bwd: torch {out['torch']:.3f} ms, lazytensor {out['lazytensor']:.3f} ms "
          f"({out['lazytensor'] / out['torch']:.2f}x)")


def main():
    failures = 0
    if not lt.backends.cudnn.is_available():
        print(f"FAIL cuDNN does not load: {lt._C.cudnn_version()[1]}")
        return 1
    print(f"cuDNN {lt.backends.cudnn.version()} (PyTorch's {torch.backends.cudnn.version()})")
    lt.backends.cudnn.allow_tf32 = False  # exact float32 for the value checks
    rng = np.random.default_rng(0)
    for device in ("lazy:cuda", "cuda"):
        for dtype in ("float32", "float64", "float16", "bfloat16"):
            for case in CASES:
                try:
                    failures += not one_case(case, dtype, device, rng)
                except Exception:  # noqa: BLE001 (a failing case is reported, the others still run)
                    traceback.print_exc()
                    print(f"FAIL conv {device} {dtype} {case}: raised")
                    failures += 1
    lt.backends.cudnn.allow_tf32 = True
    for check in (tf32_switch, resnet_block_timing):
        try:
            failures += check() is False
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            print(f"FAIL {check.__name__}: raised")
            failures += 1
    print("all passed" if failures == 0 else f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
