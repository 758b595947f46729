"""Train a small CNN on procedurally drawn digits with lazytensor; `--device` is the only switch.

    .venv/bin/python examples/python/train_cnn.py --device lazy     # traced: one compiled graph per step
    .venv/bin/python examples/python/train_cnn.py --device cpu      # eager, op by op
    .venv/bin/python examples/python/train_cnn.py --device cuda     # eager on the GPU

Data: 16x16 grey images of the digits 0-9 drawn as seven-segment strokes with random position,
size, stroke width, per-stroke brightness and pixel noise (a fixed NumPy seed; nothing to
download). Model: Conv-BatchNorm-ReLU-MaxPool twice, then Linear; Adam; cross_entropy.
Shows a progress bar, writes the loss curve to --plot (PNG), prints the held-out accuracy and
lt.metrics.report(), and exits with status 1 below --min-accuracy (default 0.88).
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

SIZE, CLASSES = 16, 10
# Segments a..g of a seven-segment display per digit.
SEGMENTS = ["abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg", "abcdfg"]


def draw_digit(digit, rng):
    img = np.zeros((SIZE, SIZE), np.float32)
    h, w = rng.integers(9, 13), rng.integers(5, 8)
    top, left = rng.integers(1, SIZE - h), rng.integers(1, SIZE - w)
    t = int(rng.integers(1, 3))  # stroke width
    mid = top + h // 2
    strokes = {  # (row0, row1, col0, col1) of each segment
        "a": (top, top + t, left, left + w), "g": (mid, mid + t, left, left + w),
        "d": (top + h - t, top + h, left, left + w),
        "f": (top, mid + 1, left, left + t), "b": (top, mid + 1, left + w - t, left + w),
        "e": (mid, top + h, left, left + t), "c": (mid, top + h, left + w - t, left + w),
    }
    for s in SEGMENTS[digit]:
        r0, r1, c0, c1 = strokes[s]
        img[r0:r1, c0:c1] = rng.uniform(0.6, 1.0)
    img += rng.normal(0.0, 0.15, img.shape)
    return img


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, n)
    x = np.stack([draw_digit(int(d), rng) for d in y])[:, None]  # [n, 1, 16, 16]
    return x.astype(np.float32), y.astype(np.int64)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),    # 8x8
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),  # 4x4
        )
        self.classifier = nn.Linear(16 * 4 * 4, CLASSES)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def train(device="lazy", steps=250, batch_size=64, lr=3e-3, seed=0, plot=None, quiet=False):
    """Trains on `device`; returns a dict: losses, accuracy, seconds, steps_per_s, report."""
    lt.manual_seed(seed)  # the same initial weights on every device
    x_np, y_np = make_data(batch_size * 32, seed)
    xt_np, yt_np = make_data(1024, seed + 1)
    batches = [(lt.tensor(x_np[i:i + batch_size], device=device),
                lt.tensor(y_np[i:i + batch_size], device=device))
               for i in range(0, len(x_np), batch_size)]
    model = SmallCNN().to(device)
    opt = lt.optim.Adam(model.parameters(), lr=lr)
    lt.mark_step()
    lt.metrics.reset()

    bar = Progress(steps, f"cnn/{device}", every=10, stream=open(os.devnull, "w") if quiet else sys.stdout)
    losses, t0, t_first = [], time.perf_counter(), None
    for step in range(steps):
        xb, yb = batches[step % len(batches)]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()  # on lazy: ends the step; forward + backward + update run as one graph
        losses.append(loss)
        if step == 0:
            loss.item()
            t_first = time.perf_counter() - t0
        bar.update(step, loss)
    losses = [l.item() for l in losses]
    seconds = time.perf_counter() - t0
    report = lt.metrics.report()
    counters = lt.metrics.counters()

    model.eval()
    with lt.no_grad():
        logits = model(lt.tensor(xt_np, device=device)).numpy()
    accuracy = float((logits.argmax(1) == yt_np).mean())
    steps_per_s = steady_rate(steps, seconds, t_first)
    if plot:
        save_loss_curve(losses, plot, f"SmallCNN on drawn digits ({device})")
    return {"device": device, "losses": losses, "accuracy": accuracy, "seconds": seconds,
            "first_step_s": t_first, "steps_per_s": steps_per_s,
            "graph_compiles": counters["graph_compiles"], "report": report}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="lazy", help="cpu | lazy | cuda (the only switch)")
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-accuracy", type=float, default=0.88)
    ap.add_argument("--plot", default="train_cnn_loss.png", help="loss curve PNG ('' for none)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    r = train(args.device, args.steps, args.batch_size, args.lr, args.seed, args.plot or None)
    print("\n" + timing_line(args.device, args.steps, r))
    print(f"final loss {r['losses'][-1]:.4f}, held-out accuracy {r['accuracy']:.3f} "
          f"(required: {args.min_accuracy:.2f})" + (f"; loss curve: {args.plot}" if args.plot else ""))
    print("\n" + r["report"])
    if r["accuracy"] < args.min_accuracy:
        print(f"FAILED: accuracy {r['accuracy']:.3f} < {args.min_accuracy:.2f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
