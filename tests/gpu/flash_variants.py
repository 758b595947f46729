"""Times and checks the 16-bit flash attention kernels of backends/cuda/flash_attention.cu one by
one, outside the library, against PyTorch's SDPA (cuDNN and flash backends) on GPT-2 124M's
attention shape (B 8, 12 heads, T 1024, head dim 64, causal), so a kernel variant can be tried in
one short GPU call without building lazytensor: nvcc compiles the file to a cubin, the driver API
(ctypes) launches its kernels on PyTorch's stream and buffers.

    python3 tests/gpu/flash_variants.py [--kernels fwd,dkdv,dq] [--reps 50]

Values are compared with PyTorch's float32 SDPA and its gradients (bf16 tolerances)."""
import argparse
import ctypes
import math
import os
import subprocess
import tempfile

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "..", "backends", "cuda", "flash_attention.cu")
SMEM16 = 2 * (2 * 64 * 72 * 2)
SMEM_KV = SMEM16 + 2 * (2 * 64 * 4)  # flash_attention.h: the dK/dV kernel's
# name: (kernel, rows per block, threads, dynamic shared memory, kind)
KERNELS = {
    "fwd": ("lt_flash_attention_fwd_bf16", 64, 128, SMEM16, "fwd"),
    "dkdv": ("lt_flash_attention_bwd_dkdv_bf16", 64, 128, SMEM_KV, "dkdv"),
    "dq": ("lt_flash_attention_bwd_dq_bf16", 64, 128, SMEM16, "dq"),
}


class Driver:
    def __init__(self, cubin):
        self.cu = ctypes.CDLL("libcuda.so.1")
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # a current context
        self.mod = ctypes.c_void_p()
        data = ctypes.create_string_buffer(cubin, len(cubin))
        self._check(self.cu.cuModuleLoadData(ctypes.byref(self.mod), data), "cuModuleLoadData")

    def _check(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    def function(self, name):
        f = ctypes.c_void_p()
        self._check(self.cu.cuModuleGetFunction(ctypes.byref(f), self.mod, name.encode()), name)
        return f

    def launch(self, f, grid, threads, smem, args):
        if smem > 48 * 1024:  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._check(self.cu.cuFuncSetAttribute(f, 8, smem), "cuFuncSetAttribute")
        holders = []
        for a in args:
            if isinstance(a, torch.Tensor):
                holders.append(ctypes.c_void_p(a.data_ptr()))
            elif a is None:
                holders.append(ctypes.c_void_p(0))
            elif isinstance(a, float):
                holders.append(ctypes.c_float(a))
            else:
                holders.append(ctypes.c_int(a))
        arr = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self._check(self.cu.cuLaunchKernel(f, grid, 1, 1, threads, 1, 1, smem, stream, arr, None),
                    "cuLaunchKernel")


def time_ms(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--shape", default="8,12,1024")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    B, H, T = (int(x) for x in args.shape.split(","))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "fa.cubin")
        subprocess.run(["nvcc", "-cubin", f"-arch={args.arch}", "-O3", "-o", out, SOURCE],
                       check=True)
        cubin = open(out, "rb").read()
    drv = Driver(cubin)
    torch.manual_seed(0)
    dt = torch.bfloat16
    q, k, v, do = (torch.randn(B, H, T, 64, device="cuda", dtype=dt) for _ in range(4))
    scale = 1.0 / math.sqrt(64)
    # Reference in float32 (values and gradients).
    qf, kf, vf = (x.float().requires_grad_() for x in (q, k, v))
    of = F.scaled_dot_product_attention(qf, kf, vf, is_causal=True)
    of.backward(do.float())
    s = (qf.detach() @ kf.detach().transpose(-1, -2)) * scale
    s = s.masked_fill(torch.ones(T, T, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    lse_ref = torch.logsumexp(s, -1).contiguous()
    o16 = of.detach().to(dt)
    dsum = (do.float() * o16.float()).sum(-1).contiguous()
    batch = B * H
    sl2 = scale * 1.4426950408889634
    report = []

    def err(a, b):
        return (a.float() - b.float()).abs().max().item()

    for name in args.kernels.split(","):
        kname, rows, threads, smem, kind = KERNELS[name]
        f = drv.function(kname)
        grid = batch * ((T + rows - 1) // rows)
        if kind == "fwd":
            o = torch.empty_like(q)
            lse = torch.empty(B, H, T, device="cuda")
            call = lambda: drv.launch(f, grid, threads, smem, [q, k, v, o, lse, batch, T, T, 1, sl2])
            call()
            torch.cuda.synchronize()
            check = f"o err {err(o, of):.4f} lse err {err(lse, lse_ref):.5f}"
        elif kind == "dkdv":
            dk, dv = torch.empty_like(k), torch.empty_like(v)
            call = lambda: drv.launch(f, grid, threads, smem, [q, k, v, do, lse_ref, dsum, dk, dv,
                                                           batch, T, T, 1, sl2, scale])
            call()
            torch.cuda.synchronize()
            check = f"dk err {err(dk, kf.grad):.4f} dv err {err(dv, vf.grad):.4f}"
        else:
            dq = torch.empty_like(q)
            call = lambda: drv.launch(f, grid, threads, smem, [q, k, v, do, lse_ref, dsum, dq,
                                                           batch, T, T, 1, sl2, scale])
            call()
            torch.cuda.synchronize()
            check = f"dq err {err(dq, qf.grad):.4f}"
        ms = time_ms(call, args.reps)
        report.append(f"{name:8s} {ms * 1e3:8.1f} us  {check}")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for label, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))
                fwd = lambda: F.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
                fms = time_ms(fwd, args.reps)
                out = fwd()

                def fb():
                    o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
                    torch.autograd.grad(o, (qq, kk, vv), do)
                fbms = time_ms(fb, args.reps)
                report.append(f"torch {label}: fwd {fms * 1e3:.1f} us, fwd+bwd {fbms * 1e3:.1f} us"
                              f" (bwd ~{(fbms - fms) * 1e3:.1f}); o err {err(out, of):.4f}")
                with torch.profiler.profile(
                        activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    for _ in range(10):
                        fb()
                    torch.cuda.synchronize()
                for e in prof.key_averages():
                    if e.device_type == torch.autograd.DeviceType.CUDA and e.count >= 10:
                        report.append(f"    {e.device_time_total / e.count:8.1f} us x{e.count // 10}"
                                      f"  {e.key[:90]}")
        except Exception as e:  # a backend PyTorch cannot run here
            report.append(f"torch {label}: {type(e).__name__}: {str(e)[:100]}")
    text = "\n".join(report)
    print(text)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "flash_variants.txt"), "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
