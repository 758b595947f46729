"""On the GPU machine: lt.compile(module) in training on `lazy:cuda` (the forward's compiled
backward, capture/capture_backward.cc) against the plain module, and eager `cuda` views that run
no kernel (runtime/memory_views.h deferred_view) against PyTorch CUDA. Prints one line per check;
exit 1 on any failure.

  PYTHONPATH=build-gpu/python python3 tests/gpu/check_compile_training_cuda.py
"""
import sys
import traceback

import numpy as np
import torch

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor import nn

DEV = "lazy:cuda"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, 2)
        self.bn = nn.BatchNorm1d(32)
        self.head = nn.Linear(32, 64)

    def forward(self, idx):
        h = self.body(self.emb(idx))
        return self.head(self.bn(h.mean(1)))


def compiled_training():
    rng = np.random.default_rng(0)
    data = [(rng.integers(0, 64, (8, 12)), rng.integers(0, 64, (8,))) for _ in range(6)]

    def run(compiled):
        lt.manual_seed(0)
        model = Net().to(DEV)
        f = lt.compile(model) if compiled else model
        opt = lt.optim.AdamW(model.parameters(), lr=1e-3)
        losses, traced = [], []
        for xb, yb in data:
            opt.zero_grad()
            t0 = lt.metrics.counters()["traced_ops"]
            out = f(lt.tensor(xb, device=DEV))
            traced.append(lt.metrics.counters()["traced_ops"] - t0)
            loss = F.cross_entropy(out, lt.tensor(yb, device=DEV))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return np.array(losses), traced, f

    plain, _, _ = run(False)
    comp, traced, f = run(True)
    worst = float(np.max(np.abs(comp - plain) / np.abs(plain)))
    ok = worst < 1e-4 and traced[1:] == [0] * (len(traced) - 1) and f._compiled_forward.stats["replays"] == 5
    print(f"lt.compile(module) training on {DEV}: worst loss rel diff {worst:.1e}, traced ops per "
          f"forward {traced}, stats {f._compiled_forward.stats}: {'PASS' if ok else 'FAIL'}")
    return ok


def eager_views():
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((8, 5)).astype(np.float32)
    w_np = rng.standard_normal((7, 5)).astype(np.float32)
    x, w = lt.tensor(x_np, device="cuda"), lt.tensor(w_np, device="cuda")
    tx, tw = torch.from_numpy(x_np).cuda(), torch.from_numpy(w_np).cuda()
    k0 = lt.metrics.counters()["kernel_launches"]
    views = (w.t(), w[:, 1:4], w[:1].expand(4, 5), w.t()[2:4], w[:, 2])
    launched = lt.metrics.counters()["kernel_launches"] - k0
    want = (tw.t(), tw[:, 1:4], tw[:1].expand(4, 5), tw.t()[2:4], tw[:, 2])
    worst = max(float(np.abs(v.cpu().numpy() - t.cpu().numpy()).max()) for v, t in zip(views, want))
    prod = float(np.abs((x @ w.t()).cpu().numpy() - (tx @ tw.t()).cpu().numpy()).max())
    v, tv = w.t()[1:3], tw.t()[1:3]
    v.mul_(2)
    tv.mul_(2)
    w.add_(1)
    tw.add_(1)
    writes = max(float(np.abs(v.cpu().numpy() - tv.cpu().numpy()).max()),
                 float(np.abs(w.cpu().numpy() - tw.cpu().numpy()).max()))
    ok = launched == 0 and worst == 0 and prod < 1e-4 and writes < 1e-6
    print(f"eager cuda views: {launched} kernels at the view ops, values {worst}, x @ w.t() {prod:.1e}, "
          f"writes through views {writes:.1e}: {'PASS' if ok else 'FAIL'}")
    return ok


def main():
    ok = True
    for check in (compiled_training, eager_views):
        try:
            ok = check() and ok
        except Exception:
            traceback.print_exc()
            print(f"{check.__name__}: FAIL (exception)")
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
