"""Each GPU is a device of its own (issue 31), on every GPU the machine shows: a graph on
lazy:cuda:N and the same ops eagerly on cuda:N against PyTorch on cuda:N; DLPack with torch tensors
on cuda:N (lazytensor's tensor lands on cuda:N); with two GPUs or more, a tensor moved from GPU 0
to GPU 1 keeps its values and computes there; with one, asking for GPU 1 is a clear error. Prints
one line per check; exit 1 on any failure.

  PYTHONPATH=build-gpu/python python3 tests/gpu/check_devices_cuda.py
"""
import sys
import traceback

import numpy as np
import torch

import lazytensor as lt

FAILS = []


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        FAILS.append(name)


def on_each_gpu(i, a, b):
    ref = (torch.from_numpy(a).to(f"cuda:{i}") @ torch.from_numpy(b).to(f"cuda:{i}")).relu()
    ref = ref.sum(1).cpu().numpy()
    for dev in (f"lazy:cuda:{i}", f"cuda:{i}"):
        x, w = lt.tensor(a, device=dev), lt.tensor(b, device=dev)
        y = (x @ w).relu().sum(1)
        got = y.cpu().numpy()
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        check(f"{dev}: matmul, relu, sum vs torch cuda:{i}",
              err < 1e-5 and y.device == lt.device(dev), f"rel err {err:.1e}, on {y.device}")
    t = torch.randn(300, device=f"cuda:{i}")
    lz = lt.from_dlpack(t)
    check(f"from_dlpack of a torch cuda:{i} tensor", lz.device == lt.device(f"cuda:{i}")
          and np.array_equal(lz.cpu().numpy(), t.cpu().numpy()), f"on {lz.device}")
    back = torch.from_dlpack(lz * 2)
    check(f"torch.from_dlpack of a lazytensor cuda:{i} tensor", back.device == t.device
          and torch.equal(back, t * 2), f"on {back.device}")


def main():
    n, tn = lt.cuda.device_count(), torch.cuda.device_count()
    check("lt.cuda.device_count() == torch.cuda.device_count()", n == tn, f"{n} vs {tn}")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((257, 129)).astype(np.float32)
    b = rng.standard_normal((129, 65)).astype(np.float32)
    for i in range(n):
        try:
            on_each_gpu(i, a, b)
        except Exception:  # one GPU's failure must not hide the others'
            traceback.print_exc()
            check(f"GPU {i}", False, "raised")
    if n >= 2:
        x = lt.tensor(a, device="lazy:cuda")
        y = (x * 2).to("lazy:cuda:1")
        z = (y + 1).cpu().numpy()
        check("lazy:cuda -> lazy:cuda:1 keeps the values and computes there",
              y.device == lt.device("lazy:cuda:1") and np.array_equal(z, a * 2 + 1))
    else:
        try:
            lt.zeros(2, device="lazy:cuda:1").sum().item()
            check("lazy:cuda:1 on one GPU is an error", False, "no error")
        except RuntimeError as e:
            check("lazy:cuda:1 on one GPU is a clear error", "no CUDA device 1" in str(e), str(e))
    print(f"{len(FAILS)} failed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
