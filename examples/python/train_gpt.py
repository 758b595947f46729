"""Train a character-level GPT on this repository's own text; `--device` is the only switch.

    .venv/bin/python examples/python/train_gpt.py --device lazy     # traced: one compiled graph per step
    .venv/bin/python examples/python/train_gpt.py --device cpu      # eager, op by op
    .venv/bin/python examples/python/train_gpt.py --device cuda     # eager on the GPU

Corpus: README.md and the docs and Python sources that ship in the repository (nothing to
download). Model: token + position embeddings, pre-LayerNorm transformer blocks with causal
F.scaled_dot_product_attention and a GELU MLP, weight-tied output; AdamW with warm-up.
Shows a progress bar, writes the loss curve to --plot (PNG), prints a sample of generated text
and lt.metrics.report(), and exits with status 1 if the final loss is above --max-loss.

Sampling feeds a fixed-length window (left-padded) at every position, so on "lazy" every
generated character reuses one compiled graph instead of compiling one per prefix length.
"""
import argparse
import math
import os
import pathlib
import sys
import time

import numpy as np

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _progress import Progress, save_loss_curve, steady_rate, timing_line  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_corpus(max_chars=200_000):
    files = [ROOT / "README.md"] + sorted((ROOT / "bindings/python/lazytensor").rglob("*.py")) + \
        sorted((ROOT / "examples/python").glob("*.py"))
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files if p.exists())
    return text[:max_chars]


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, block, dim=64, heads=4, layers=2):
        super().__init__()
        self.block = block
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        for name, p in self.named_parameters():  # GPT-2's initialization
            if name.endswith("weight") and p.ndim == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, positions):
        x = self.tok(idx) + self.pos(positions)
        for b in self.blocks:
            x = b(x)
        return self.ln(x).matmul(self.tok.weight.T)  # weight-tied output layer


def sample(model, stoi, itos, device, prompt, length, rng, temperature=0.8):
    """Generates `length` characters after `prompt` (host-side sampling from the logits)."""
    block = model.block
    pad = stoi.get(" ", 0)
    ids = [stoi.get(c, pad) for c in prompt]
    positions = lt.arange(block, device=device).unsqueeze(0)
    model.eval()
    with lt.no_grad():
        for _ in range(length):
            window = ids[-block:]
            n = len(window)
            x = np.full((1, block), pad, np.int64)
            x[0, block - n:] = window  # left-padded: the last position predicts the next char
            logits = model(lt.tensor(x, device=device), positions)[0, -1].numpy().astype(np.float64)
            p = np.exp((logits - logits.max()) / temperature)
            ids.append(int(rng.choice(len(p), p=p / p.sum())))
    model.train()
    return "".join(itos[i] for i in ids)


def train(device="lazy", steps=300, batch_size=16, block=64, lr=3e-3, seed=0, plot=None,
          sample_chars=200, quiet=False):
    lt.manual_seed(seed)
    text = load_corpus()
    chars = sorted(set(text))
    stoi, itos = {c: i for i, c in enumerate(chars)}, chars
    data = np.array([stoi[c] for c in text], np.int64)
    split = int(0.9 * len(data))
    rng = np.random.default_rng(seed)

    def batch(source, n):
        starts = rng.integers(0, len(source) - block - 1, n)
        x = np.stack([source[s:s + block] for s in starts])
        y = np.stack([source[s + 1:s + block + 1] for s in starts])
        return lt.tensor(x, device=device), lt.tensor(y, device=device)

    model = GPT(len(chars), block).to(device)
    positions = lt.arange(block, device=device).unsqueeze(0)
    opt = lt.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.95))
    warmup = max(1, steps // 10)
    sched = lt.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * s / steps))))
    lt.mark_step()
    lt.metrics.reset()

    out = open(os.devnull, "w") if quiet else sys.stdout
    bar = Progress(steps, f"gpt/{device}", every=10, stream=out)
    losses, t0, t_first = [], time.perf_counter(), None
    for step in range(steps):
        xb, yb = batch(data[:split], batch_size)
        opt.zero_grad()
        logits = model(xb, positions)
        loss = F.cross_entropy(logits.reshape(-1, len(chars)), yb.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()  # on lazy: ends the step (forward + backward + clipping + update: one graph)
        sched.step()
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
        xv, yv = batch(data[split:], 32)
        val = F.cross_entropy(model(xv, positions).reshape(-1, len(chars)), yv.reshape(-1)).item()
    model.train()
    text_out = sample(model, stoi, itos, device, "import lazytensor", sample_chars,
                      np.random.default_rng(seed)) if sample_chars else ""
    if plot:
        save_loss_curve(losses, plot, f"char-level GPT on the repository ({device})")
    steps_per_s = steady_rate(steps, seconds, t_first)
    return {"device": device, "losses": losses, "val_loss": val, "sample": text_out,
            "seconds": seconds, "first_step_s": t_first, "steps_per_s": steps_per_s,
            "graph_compiles": counters["graph_compiles"], "report": report,
            "model": model, "stoi": stoi, "itos": itos}  # for examples/python/generate.py


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="lazy", help="cpu | lazy | cuda (the only switch)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--block", type=int, default=64, help="context length")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max-loss", type=float, default=2.6,
                    help="exit with status 1 if the final training loss is above this")
    ap.add_argument("--sample-chars", type=int, default=200)
    ap.add_argument("--plot", default="train_gpt_loss.png", help="loss curve PNG ('' for none)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    r = train(args.device, args.steps, args.batch_size, args.block, args.lr, args.seed,
              args.plot or None, args.sample_chars)
    final = float(np.mean(r["losses"][-10:]))
    print("\n" + timing_line(args.device, args.steps, r))
    print(f"final training loss {final:.3f} (mean of the last 10 steps; required <= {args.max_loss}), "
          f"validation loss {r['val_loss']:.3f}" + (f"; loss curve: {args.plot}" if args.plot else ""))
    if r["sample"]:
        print("\n--- sample ---\n" + r["sample"] + "\n--------------")
    print("\n" + r["report"])
    if final > args.max_loss:
        print(f"FAILED: final loss {final:.3f} > {args.max_loss}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
