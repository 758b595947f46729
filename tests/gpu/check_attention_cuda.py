"""Fused (flash) attention on lazy:cuda and cuda (backends/cuda/flash_attention.cc): output and
q/k/v gradients of F.scaled_dot_product_attention against PyTorch CUDA float64 math, for causal and
plain attention, L != S, lengths that are not multiples of the 64-row tiles, transposed q/k/v views
(a transformer's heads), GQA; that the flash kernels ran (kernel sources); and the time of a GPT-2
size attention forward + backward: flash vs LT_FLASH_ATTENTION=0 (matmul + softmax with cuBLAS) vs
torch's scaled_dot_product_attention. Run by tests/gpu/run.sh (stage py); exits 1 on a failure."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as TF

import lazytensor as lt
import lazytensor.nn.functional as F

failures = []
rng = np.random.default_rng(11)


def torch_math(q, k, v, causal, scale, gqa):
    if gqa:
        rep = q.shape[-3] // k.shape[-3]
        k = k.repeat_interleave(rep, dim=-3)
        v = v.repeat_interleave(rep, dim=-3)
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        L, S = q.shape[-2], k.shape[-2]
        keep = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v


def check(name, qs, ks, vs, causal, device, transposed=False, gqa=False, scale=None):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in (qs, ks, vs)]
    g = rng.standard_normal(qs[:-1] + (vs[-1],)).astype(np.float32)
    sc = scale if scale is not None else 1.0 / np.sqrt(qs[-1])
    tts = [torch.tensor(a, dtype=torch.float64, device="cuda", requires_grad=True) for a in arrays]
    want = torch_math(*tts, causal, sc, gqa)
    want.backward(torch.tensor(g, dtype=torch.float64, device="cuda"))
    if transposed:  # [B, L, H, D] storage viewed as [B, H, L, D]
        leaves = [lt.tensor(np.ascontiguousarray(a.transpose(0, 2, 1, 3)), device=device,
                            requires_grad=True) for a in arrays]
        views = [t.transpose(1, 2) for t in leaves]
    else:
        leaves = [lt.tensor(a, device=device, requires_grad=True) for a in arrays]
        views = leaves
    y = F.scaled_dot_product_attention(*views, is_causal=causal, scale=scale, enable_gqa=gqa)
    y.backward(lt.tensor(g, device=device))
    got = [y.detach().numpy()] + [
        (t.grad.numpy().transpose(0, 2, 1, 3) if transposed else t.grad.numpy()) for t in leaves]
    ref = [want.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in tts]
    worst = 0.0
    for what, a, b in zip(["out", "dq", "dk", "dv"], got, ref):
        err = float(np.max(np.abs(a - b) / (np.abs(b) + 1e-2)))
        worst = max(worst, err)
        if not np.allclose(a, b, rtol=2e-3, atol=2e-4):
            failures.append(f"{name} {device} {what}: max rel err {err:.3g}")
    print(f"{name:28s} {device:10s} worst rel err {worst:.2e}")


def flash_ran():
    srcs = "\n".join(lt.debug.kernel_sources())
    return "lt_flash_attention_fwd_f32" in srcs


def main():
    cases = [
        ("causal 2x3x128", (2, 3, 128, 64), (2, 3, 128, 64), (2, 3, 128, 64), True, {}),
        ("plain 2x3x128", (2, 3, 128, 64), (2, 3, 128, 64), (2, 3, 128, 64), False, {}),
        ("causal L100 S70", (1, 2, 100, 64), (1, 2, 70, 64), (1, 2, 70, 64), True, {}),
        ("plain L70 S100 scale", (1, 2, 70, 64), (1, 2, 100, 64), (1, 2, 100, 64), False,
         dict(scale=0.3)),
        ("causal 1 row", (2, 1, 1, 64), (2, 1, 1, 64), (2, 1, 1, 64), True, {}),
        ("causal transposed 2x4x200", (2, 4, 200, 64), (2, 4, 200, 64), (2, 4, 200, 64), True,
         dict(transposed=True)),
        ("gqa causal", (1, 4, 96, 64), (1, 2, 96, 64), (1, 2, 96, 64), True, dict(gqa=True)),
        ("unbatched plain", (90, 64), (130, 64), (130, 64), False, {}),
    ]
    for name, qs, ks, vs, causal, kw in cases:
        for device in ("lazy:cuda", "cuda"):
            try:
                check(name, qs, ks, vs, causal, device, **kw)
            except Exception as e:  # noqa: BLE001 - report and go on
                failures.append(f"{name} {device}: {type(e).__name__}: {e}")
    # The lazy graph of the last lazy case ran the flash kernels (not the decomposition).
    q = lt.tensor(rng.standard_normal((1, 2, 64, 64)).astype(np.float32), device="lazy:cuda")
    F.scaled_dot_product_attention(q, q, q, is_causal=True).numpy()
    if not flash_ran():
        failures.append("the lazy:cuda graph did not use the flash kernels")
    timing()
    print("FAILED:\n  " + "\n  ".join(failures) if failures else "all attention checks passed")
    return 1 if failures else 0


def timing():
    """GPT-2 small attention (B 8, H 12, T 512, D 64, causal) forward + backward, median ms."""
    B, H, T, D = 8, 12, 512, 64
    arrays = [rng.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(3)]
    g = rng.standard_normal((B, H, T, D)).astype(np.float32)

    def cuda_ms(step, n=20):
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(n):
                step()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / n)
        return float(np.median(times))

    leaves = [lt.tensor(a, device="lazy:cuda", requires_grad=True) for a in arrays]
    lg = lt.tensor(g, device="lazy:cuda")

    def lt_step():
        for t in leaves:
            t.grad = None
        y = F.scaled_dot_product_attention(*leaves, is_causal=True)
        y.backward(lg)
        lt.sync(*[t.grad for t in leaves])

    tl = [torch.tensor(a, device="cuda", requires_grad=True) for a in arrays]
    tg = torch.tensor(g, device="cuda")

    def torch_step():
        for t in tl:
            t.grad = None
        TF.scaled_dot_product_attention(*tl, is_causal=True).backward(tg)

    flash = cuda_ms(lt_step)
    os.environ["LT_FLASH_ATTENTION"] = "0"
    unfused = cuda_ms(lt_step)
    del os.environ["LT_FLASH_ATTENTION"]
    ref = cuda_ms(torch_step)
    print(f"attention fwd+bwd B{B} H{H} T{T} D{D} causal: lazytensor flash {flash:.3f} ms, "
          f"unfused {unfused:.3f} ms, torch sdpa {ref:.3f} ms")


if __name__ == "__main__":
    sys.exit(main())
