"""Fused (flash) attention on lazy:cuda and cuda (backends/cuda/flash_attention.cc): output and
q/k/v gradients of F.scaled_dot_product_attention against PyTorch CUDA float64 math, for causal and
plain attention, L != S, lengths that are not multiples of the 64-row tiles, transposed q/k/v views
(a transformer's heads), GQA; that the flash kernels ran (kernel sources); the same cases in
bfloat16 and float16 (the tensor-core kernels), whose error against float64 math (from the same
16-bit inputs) must stay within 2x PyTorch CUDA's own 16-bit scaled_dot_product_attention error
plus a little; and the time of a GPT-2 size attention forward + backward in float32 and bfloat16:
flash vs LT_FLASH_ATTENTION=0 (matmul + softmax with cuBLAS) vs torch's
scaled_dot_product_attention. Run by tests/gpu/run.sh (stage py); exits 1 on a failure."""
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


LT_DTYPES = {"float32": lt.float32, "bfloat16": lt.bfloat16, "float16": lt.float16}
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def check(name, qs, ks, vs, causal, device, transposed=False, gqa=False, scale=None,
          dtype="float32"):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in (qs, ks, vs)]
    g = rng.standard_normal(qs[:-1] + (vs[-1],)).astype(np.float32)
    if dtype != "float32":  # the oracle sees the values the 16-bit inputs hold
        td = TORCH_DTYPES[dtype]
        arrays = [torch.tensor(a).to(td).float().numpy() for a in arrays]
        g = torch.tensor(g).to(td).float().numpy()
    sc = scale if scale is not None else 1.0 / np.sqrt(qs[-1])
    tts = [torch.tensor(a, dtype=torch.float64, device="cuda", requires_grad=True) for a in arrays]
    want = torch_math(*tts, causal, sc, gqa)
    want.backward(torch.tensor(g, dtype=torch.float64, device="cuda"))
    ldt = LT_DTYPES[dtype]
    if transposed:  # [B, L, H, D] storage viewed as [B, H, L, D]
        leaves = [lt.tensor(np.ascontiguousarray(a.transpose(0, 2, 1, 3)), device=device,
                            dtype=ldt, requires_grad=True) for a in arrays]
        views = [t.transpose(1, 2) for t in leaves]
    else:
        leaves = [lt.tensor(a, device=device, dtype=ldt, requires_grad=True) for a in arrays]
        views = leaves
    y = F.scaled_dot_product_attention(*views, is_causal=causal, scale=scale, enable_gqa=gqa)
    y.backward(lt.tensor(g, device=device, dtype=ldt))
    if y.dtype != ldt:
        failures.append(f"{name} {device} {dtype}: output dtype {y.dtype}")

    def host(t):
        return t.detach().float().numpy()

    got = [host(y)] + [
        (host(t.grad).transpose(0, 2, 1, 3) if transposed else host(t.grad)) for t in leaves]
    ref = [want.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in tts]
    what = ["out", "dq", "dk", "dv"]
    if dtype == "float32":
        worst = 0.0
        for w, a, b in zip(what, got, ref):
            err = float(np.max(np.abs(a - b) / (np.abs(b) + 1e-2)))
            worst = max(worst, err)
            if not np.allclose(a, b, rtol=2e-3, atol=2e-4):
                failures.append(f"{name} {device} {w}: max rel err {err:.3g}")
        print(f"{name:28s} {device:10s} {dtype:8s} worst rel err {worst:.2e}")
        return
    # 16-bit: the error relative to each result's largest value, against torch's own kernel's.
    peer = torch_16bit(arrays, g, causal, scale, gqa, TORCH_DTYPES[dtype])
    errs, peer_errs = [], []
    for w, a, b, c in zip(what, got, ref, peer):
        top = float(np.max(np.abs(b))) + 1e-6
        err, perr = float(np.max(np.abs(a - b))) / top, float(np.max(np.abs(c - b))) / top
        errs.append(err)
        peer_errs.append(perr)
        if not np.all(np.isfinite(a)) or err > 2 * perr + 2e-3:
            failures.append(f"{name} {device} {dtype} {w}: err {err:.3g} (torch {perr:.3g})")
    print(f"{name:28s} {device:10s} {dtype:8s} err {max(errs):.2e} (torch sdpa {max(peer_errs):.2e})")


def torch_16bit(arrays, g, causal, scale, gqa, td):
    """PyTorch CUDA's own scaled_dot_product_attention in 16 bits: out, dq, dk, dv as float."""
    ts = [torch.tensor(a, device="cuda").to(td).requires_grad_(True) for a in arrays]
    y = TF.scaled_dot_product_attention(*ts, is_causal=causal, scale=scale, enable_gqa=gqa)
    y.backward(torch.tensor(g, device="cuda").to(td))
    return [y.detach().float().cpu().numpy()] + [t.grad.float().cpu().numpy() for t in ts]


def flash_ran(dtype="f32"):
    srcs = "\n".join(lt.debug.kernel_sources())
    return f"lt_flash_attention_fwd_{dtype}" in srcs


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
    for dtype in ("float32", "bfloat16", "float16"):
        for name, qs, ks, vs, causal, kw in cases:
            for device in ("lazy:cuda", "cuda"):
                try:
                    check(name, qs, ks, vs, causal, device, dtype=dtype, **kw)
                except Exception as e:  # noqa: BLE001 - report and go on
                    failures.append(f"{name} {device} {dtype}: {type(e).__name__}: {e}")
        # A lazy graph of this dtype ran the flash kernels (not the decomposition).
        q = lt.tensor(rng.standard_normal((1, 2, 64, 64)).astype(np.float32), device="lazy:cuda",
                      dtype=LT_DTYPES[dtype])
        F.scaled_dot_product_attention(q, q, q, is_causal=True).float().numpy()
        short = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}[dtype]
        if not flash_ran(short):
            failures.append(f"the {dtype} lazy:cuda graph did not use the flash kernels")
    timing("float32")
    timing("bfloat16", T=1024)
    print("FAILED:\n  " + "\n  ".join(failures) if failures else "all attention checks passed")
    return 1 if failures else 0


def timing(dtype, T=512):
    """GPT-2 small attention (B 8, H 12, T, D 64, causal) forward + backward, median ms."""
    B, H, D = 8, 12, 64
    arrays = [rng.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(3)]
    g = rng.standard_normal((B, H, T, D)).astype(np.float32)
    ldt, td = LT_DTYPES[dtype], TORCH_DTYPES[dtype]

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

    leaves = [lt.tensor(a, device="lazy:cuda", dtype=ldt, requires_grad=True) for a in arrays]
    lg = lt.tensor(g, device="lazy:cuda", dtype=ldt)

    def lt_step():
        for t in leaves:
            t.grad = None
        y = F.scaled_dot_product_attention(*leaves, is_causal=True)
        y.backward(lg)
        lt.sync(*[t.grad for t in leaves])

    tl = [torch.tensor(a, device="cuda").to(td).requires_grad_(True) for a in arrays]
    tg = torch.tensor(g, device="cuda").to(td)

    def torch_step():
        for t in tl:
            t.grad = None
        TF.scaled_dot_product_attention(*tl, is_causal=True).backward(tg)

    flash = cuda_ms(lt_step)
    os.environ["LT_FLASH_ATTENTION"] = "0"
    unfused = cuda_ms(lt_step)
    del os.environ["LT_FLASH_ATTENTION"]
    ref = cuda_ms(torch_step)
    print(f"attention fwd+bwd {dtype} B{B} H{H} T{T} D{D} causal: lazytensor flash {flash:.3f} ms, "
          f"unfused {unfused:.3f} ms, torch sdpa {ref:.3f} ms")


if __name__ == "__main__":
    sys.exit(main())
