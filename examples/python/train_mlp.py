"""Train a small MLP classifier with lazytensor, PyTorch style; `--device` is the only switch.

    .venv/bin/python examples/python/train_mlp.py --device lazy     # traced: one compiled graph per step
    .venv/bin/python examples/python/train_mlp.py --device cpu      # eager, op by op
    .venv/bin/python examples/python/train_mlp.py --device cuda     # eager on the GPU

Data: a synthetic, learnable classification task drawn with a fixed NumPy seed (each class is a
mixture of two Gaussian blobs, so a linear model is not enough). Model: Linear-GELU-Linear-GELU-
Linear, AdamW, cross_entropy, cosine learning-rate schedule. The script prints the loss every
--log-every steps (as a progress bar when run from the command line), the steps/s, the held-out
accuracy, and lt.metrics.report(), writes the loss curve to --plot (PNG); it exits with status 1
if the accuracy is below --min-accuracy (default 0.93).

On "lazy" nothing else changes: optimizer.step() ends the step (as lt.mark_step() does), so the
forward pass, the backward pass and the AdamW update are one graph, compiled once and replayed.
"""
import argparse
import os
import sys
import time

import numpy as np

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _progress import Progress, save_loss_curve, steady_rate, timing_line  # noqa: E402

FEATURES, CLASSES, BLOBS = 16, 8, 3


def make_data(n, seed):
    """n points in FEATURES dims; class c is a mixture of BLOBS Gaussian blobs."""
    rng = np.random.default_rng(seed)
    centers = np.random.default_rng(1234).normal(0.0, 1.0, (CLASSES, BLOBS, FEATURES)) * 1.2
    y = rng.integers(0, CLASSES, n)
    blob = rng.integers(0, BLOBS, n)
    x = centers[y, blob] + rng.normal(0.0, 1.0, (n, FEATURES))
    return x.astype(np.float32), y.astype(np.int64)


class MLP(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        h = F.gelu(self.fc2(h))
        return self.out(h)


def train(device="lazy", steps=300, batch_size=128, lr=3e-3, log_every=50, seed=0, quiet=False,
          progress=False, plot=None):
    """Trains on `device` and returns a dict: losses, accuracy, seconds, steps_per_s, report.
    progress=True shows a progress bar instead of log lines; plot= a path for the loss curve PNG."""
    say = (lambda *a: None) if quiet or progress else print
    bar = Progress(steps, f"mlp/{device}", every=log_every) if progress and not quiet else None
    lt.manual_seed(seed)  # the same initial weights on every device
    x_np, y_np = make_data(batch_size * 16, seed)
    xt_np, yt_np = make_data(2048, seed + 1)
    # Batches live on the device; every batch has the same shape, so every step is the same graph.
    batches = [(lt.tensor(x_np[i:i + batch_size], device=device),
                lt.tensor(y_np[i:i + batch_size], device=device))
               for i in range(0, len(x_np), batch_size)]
    model = MLP().to(device)
    opt = lt.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-2)
    sched = lt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=lr * 0.05)
    lt.mark_step()  # data and initial weights are materialized before timing
    lt.metrics.reset()

    losses = []
    t0 = time.perf_counter()
    t_first = None
    for step in range(steps):
        xb, yb = batches[step % len(batches)]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()      # on lazy: ends the step; forward + backward + update run as one graph
        sched.step()    # a new learning rate is a runtime scalar: no recompile
        losses.append(loss)
        if step == 0:
            loss.item()
            t_first = time.perf_counter() - t0
        if bar:
            bar.update(step, loss)
        elif (step + 1) % log_every == 0 or step == steps - 1:
            say(f"step {step + 1:5d}  loss {loss.item():.4f}  lr {sched.get_last_lr()[0]:.2e}")
    losses = [l.item() for l in losses]  # already computed: reading them compiles nothing
    seconds = time.perf_counter() - t0
    counters = lt.metrics.counters()
    report = lt.metrics.report()

    model.eval()
    with lt.no_grad():
        logits = model(lt.tensor(xt_np, device=device)).numpy()
    accuracy = float((logits.argmax(1) == yt_np).mean())
    steps_per_s = steady_rate(steps, seconds, t_first)
    if plot:
        save_loss_curve(losses, plot, f"MLP on synthetic blobs ({device})")
    return {"device": device, "losses": losses, "accuracy": accuracy, "seconds": seconds,
            "first_step_s": t_first, "steps_per_s": steps_per_s,
            "graph_compiles": counters["graph_compiles"], "report": report}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="lazy", help="cpu | lazy | cuda (the only switch)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--min-accuracy", type=float, default=0.93,
                    help="exit with status 1 below this held-out accuracy (default 0.93)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", default="train_mlp_loss.png", help="loss curve PNG ('' for none)")
    args = ap.parse_args(argv)

    r = train(args.device, args.steps, args.batch_size, args.lr, args.log_every, args.seed,
              progress=True, plot=args.plot or None)
    print("\n" + timing_line(args.device, args.steps, r))
    print(f"final loss {r['losses'][-1]:.4f}, held-out accuracy {r['accuracy']:.3f} "
          f"(required: {args.min_accuracy:.2f})")
    print("\n" + r["report"])
    if r["accuracy"] < args.min_accuracy:
        print(f"FAILED: accuracy {r['accuracy']:.3f} < {args.min_accuracy:.2f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
