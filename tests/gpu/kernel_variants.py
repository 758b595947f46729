"""A/B of generated CUDA kernels without building lazytensor: takes two CUDA sources written by
`bench_compile_cost --cuda-lowering --cuda-source FILE` (say, before and after a code generation
change, made on a machine without a GPU), compiles the named kernels of each with nvcc, runs them
on the same random inputs and prints each one's time and the largest difference between the two
versions' outputs.

    python3 tests/gpu/kernel_variants.py A.cu B.cu --kernels k105_mul,k1377_mul [--n N]

Every pointer argument gets a buffer of N elements of its type (N: the largest `n = ...u` the
kernels name), float inputs uniform in [-3, 3], integer inputs 0; double arguments 0.5. The last
pointer argument is taken as the output."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flash_variants import Driver, time_ms  # noqa: E402

TYPES = {"unsigned short": torch.bfloat16, "float": torch.float32, "double": torch.float64,
         "long long": torch.int64, "int": torch.int32, "unsigned char": torch.uint8}


def extract(text, names):
    """The source's helpers (everything before its first kernel) and the named kernels."""
    first = re.search(r"^// k\d+_\w+: ", text, re.M)
    pre = text[:first.start()]
    pre = pre[pre.find("\n", pre.find("NVRTC program")) + 1:] if "NVRTC program" in pre else pre
    out, sigs = [pre], {}
    for name in names:
        m = re.search(rf"^// {name}: .*?^}}\n", text, re.M | re.S)
        if not m:
            raise SystemExit(f"{name} is not in the source")
        out.append(m.group(0))
        sig = re.search(rf"{name}\((.*?)\) {{", m.group(0), re.S).group(1)
        sigs[name] = [a.strip() for a in sig.split(",")]
    return "\n".join(out), sigs


def build(drv_src, arch):
    with tempfile.TemporaryDirectory() as d:
        cu, cubin = os.path.join(d, "k.cu"), os.path.join(d, "k.cubin")
        open(cu, "w").write(drv_src)
        subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-O3", "-w", "-o", cubin, cu], check=True)
        return open(cubin, "rb").read()


def arguments(sig, n, dtype_of_half):
    args, out = [], None
    for a in sig:
        ptr = "*" in a
        base = re.sub(r"\b(const|__restrict__)\b|\*", " ", a).split()
        ctype = " ".join(base[:-1])
        t = TYPES.get(ctype)
        if t is None:
            raise SystemExit(f"argument type {ctype!r} not handled")
        if not ptr:
            args.append(0.5 if t == torch.float64 else 1)
            continue
        if t == torch.bfloat16:
            t = dtype_of_half
        if t.is_floating_point:
            buf = (torch.rand(n, device="cuda", dtype=torch.float32) * 6 - 3).to(t)
        else:
            buf = torch.zeros(n, device="cuda", dtype=t)
        args.append(buf)
        out = buf
    return args, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    names = args.kernels.split(",")
    srcs = [extract(open(p).read(), names) for p in (args.a, args.b)]
    n = args.n or max(int(x) for x in re.findall(r"const unsigned n = (\d+)u;", srcs[0][0]))
    drvs = [Driver(build(s, args.arch)) for s, _ in srcs]
    lines = []
    for name in names:
        outs, times = [], []
        for drv, (_, sigs) in zip(drvs, srcs):
            torch.manual_seed(0)
            kargs, out = arguments(sigs[name], n, torch.bfloat16)
            f = drv.function(name)
            grid = (n // 4 + 255) // 256

            def call():
                drv.launch(f, grid, 256, 0, kargs)
            call()
            torch.cuda.synchronize()
            outs.append(out.float().clone())
            times.append(time_ms(call, args.reps) * 1e3)
        diff = (outs[0] - outs[1]).abs().nan_to_num(0).max().item()
        lines.append(f"{name:14s} A {times[0]:8.1f} us  B {times[1]:8.1f} us  "
                     f"B/A {times[1] / times[0]:.2f}  max |A-B| {diff:.3g}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
