"""Greedy generation from train_gpt.py's char-level GPT: a growing context against a KV cache.

    .venv/bin/python examples/python/generate.py                 # train briefly, 256 tokens each way
    .venv/bin/python examples/python/generate.py --tokens 32     # shorter
    .venv/bin/python examples/python/generate.py --steps 300 --prompt "def forward(self"

Trains the model of examples/python/train_gpt.py briefly on "lazy" (at a context long enough for
the prompt and every generated token), then generates --tokens characters greedily (argmax) from
--prompt, on "lazy" and on eager "cpu" with the same weights, two ways:

- growing context: every step feeds the whole sequence so far (batch 1, T grows by one), as a
  plain `model(idx, positions)`. On "lazy" the first length compiles a graph; the second, seen to
  differ only in the length, compiles one with the length symbolic (automatic dynamic shapes, as
  torch.compile's), which serves every later length.
- KV cache: a per-layer K and V cache of [1, heads, T_max, head_dim], preallocated; one prefill
  pass over the prompt, then one decoding step per token that writes its K/V in place at the
  current position (`cache[:, :, pos] = k`, pos an int64 tensor, never a Python int) and attends
  over the whole cache with a mask of the positions filled so far. Every decoding step has the same
  shapes and the same trace, so on "lazy" one compiled graph serves every token.

Prints each way's text, tokens/s and compile counts (lt.metrics), and exits with status 1 unless
all four ways produce the same tokens.
"""
import argparse
import os
import sys
import time

import numpy as np

import lazytensor as lt
import lazytensor.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_gpt import GPT, train  # noqa: E402


def greedy_growing(model, ids, tokens, device):
    """Yields `tokens` argmax tokens after `ids`, each step a forward pass over the whole sequence."""
    ids = list(ids)
    for _ in range(tokens):
        x = lt.tensor([ids], device=device)
        positions = lt.arange(len(ids), device=device).unsqueeze(0)
        ids.append(int(model(x, positions)[0, -1].argmax().item()))
        yield ids[-1]


def _attend_cached(block, x, pos, cache_k, cache_v, keys):
    """train_gpt.Block.forward for the rows of x at positions `pos` (int64 [T]): their K and V go
    into the caches at those positions (in place), and each query attends to the cached keys at
    positions <= its own (the prompt's causal mask and the filled part of the cache in one)."""
    B, T, C = x.shape
    q, k, v = block.qkv(block.ln1(x)).split(C, dim=2)
    q, k, v = (t.reshape(B, T, block.heads, C // block.heads).transpose(1, 2) for t in (q, k, v))
    cache_k[:, :, pos] = k  # an indexed write with a tensor index: traced, no sync, no recompile
    cache_v[:, :, pos] = v
    mask = keys <= pos.unsqueeze(1)  # [T, T_max]: True where the key is visible
    y = F.scaled_dot_product_attention(q, cache_k, cache_v, attn_mask=mask)
    x = x + block.proj(y.transpose(1, 2).reshape(B, T, C))
    return x + block.out(F.gelu(block.fc(block.ln2(x))))


def _forward_cached(model, idx, pos, caches, keys):
    x = model.tok(idx) + model.pos(pos)
    for block, (cache_k, cache_v) in zip(model.blocks, caches):
        x = _attend_cached(block, x, pos, cache_k, cache_v, keys)
    return model.ln(x).matmul(model.tok.weight.T)


def greedy_kv_cache(model, ids, tokens, device):
    """Yields the same tokens as greedy_growing: one prefill pass over `ids`, then one decoding step
    per token with the position as a tensor, so that every decoding step traces the same graph."""
    t_max = model.block
    if len(ids) + tokens - 1 > t_max:
        raise ValueError(f"prompt + tokens need {len(ids) + tokens - 1} positions; the model has {t_max}")
    heads = model.blocks[0].heads
    dim = model.tok.weight.shape[1]
    caches = [(lt.zeros(1, heads, t_max, dim // heads, device=device),
               lt.zeros(1, heads, t_max, dim // heads, device=device)) for _ in model.blocks]
    keys = lt.arange(t_max, device=device)
    pos = lt.arange(len(ids), device=device)
    nxt = _forward_cached(model, lt.tensor([ids], device=device), pos, caches, keys)[:, -1:].argmax(-1)
    pos = lt.tensor([len(ids)], device=device)
    lt.mark_step()  # the prefill graph: the prompt's K/V in the caches and the first token
    yield nxt.item()
    for _ in range(tokens - 1):
        nxt = _forward_cached(model, nxt, pos, caches, keys)[:, -1:].argmax(-1)  # [1, 1]
        pos += 1
        lt.mark_step()  # one decoding step: the token, the caches and pos; the same graph every time
        yield nxt.item()


WAYS = {"growing": greedy_growing, "kv_cache": greedy_kv_cache}


def run_way(way, model, ids, tokens, device):
    """One way on one device: its tokens, seconds, tokens/s, lt.metrics counters over the run, and
    the tokens/s of the steps that compiled nothing (None when every step compiled)."""
    lt.mark_step()
    lt.metrics.reset()
    out, warm_s, warm_steps, compiles = [], 0.0, 0, 0
    t_start = t = time.perf_counter()
    with lt.no_grad():
        for token in WAYS[way](model, ids, tokens, device):
            out.append(token)
            counters = lt.metrics.counters()
            now, c = time.perf_counter(), counters["graph_compiles"] + counters["disk_cache_hits"]
            if c == compiles:  # this step compiled (or loaded from disk) nothing
                warm_s, warm_steps = warm_s + now - t, warm_steps + 1
            t, compiles = now, c
    seconds = time.perf_counter() - t_start
    return {"way": way, "device": device, "tokens": out, "seconds": seconds,
            "tokens_per_s": tokens / seconds,
            "warm_tokens_per_s": warm_steps / warm_s if warm_steps else None,
            "counters": lt.metrics.counters(),
            "last_graph": lt.metrics.last_graph() if device.startswith("lazy") else None}


def train_model(steps=300, batch_size=4, block=273, lr=6e-3, seed=0, device="lazy"):
    """train_gpt.train's model after `steps` steps at context `block`, its vocabulary and the
    training result (losses, ...)."""
    r = train(device, steps, batch_size, block, lr, seed, sample_chars=0, quiet=True)
    return r["model"], r["stoi"], r["itos"], r


def to_device(model, device):
    """A copy of model on `device` (the same weights), in eval mode."""
    other = GPT(model.tok.weight.shape[0], model.block).to(device)
    other.load_state_dict({k: v.to(device) for k, v in model.state_dict().items()})
    return other.eval()


def generate_all(model, ids, tokens, devices=("lazy", "cpu"), ways=("growing", "kv_cache")):
    """run_way for every way on every device, from copies of `model`."""
    models = {d: to_device(model, d) for d in devices}
    return [run_way(way, models[d], ids, tokens, d) for d in devices for way in ways]


def _rate(x):
    return "-" if x is None else f"{x:.1f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=256, help="characters to generate each way")
    ap.add_argument("--prompt", default="import lazytensor")
    ap.add_argument("--steps", type=int, default=300, help="training steps (on lazy)")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--lr", type=float, default=6e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.tokens < 1 or not args.prompt:
        ap.error("--tokens must be >= 1 and --prompt not empty")

    block = len(args.prompt) + args.tokens  # trained at every position that generation uses
    t0 = time.perf_counter()
    model, stoi, itos, r = train_model(args.steps, args.batch_size, block, args.lr, args.seed)
    print(f"trained {args.steps} steps at context {block} on lazy in {time.perf_counter() - t0:.1f} s, "
          f"final loss {np.mean(r['losses'][-10:]):.3f}")
    ids = [stoi.get(c, stoi.get(" ", 0)) for c in args.prompt]

    results = generate_all(model, ids, args.tokens)
    ref = results[0]["tokens"]
    print(f"\n--- {args.tokens} greedy tokens after {args.prompt!r} ---\n"
          + args.prompt + "".join(itos[i] for i in ref) + "\n" + "-" * 40)
    print("\ntokens/s: all tokens, compiles included; warm: the steps that compiled nothing")
    print(f"{'way':<9} {'device':<6} {'tokens/s':>9} {'warm':>8} {'seconds':>8} {'graphs compiled':>16} "
          f"{'cache hits':>11} {'kernels compiled':>17}  same tokens")
    for res in results:
        c = res["counters"]
        print(f"{res['way']:<9} {res['device']:<6} {res['tokens_per_s']:>9.1f} "
              f"{_rate(res['warm_tokens_per_s']):>8} {res['seconds']:>8.2f} "
              f"{c['graph_compiles']:>16} {c['graph_cache_hits'] + c['disk_cache_hits']:>11} "
              f"{c['kernels_compiled']:>17}  {'yes' if res['tokens'] == ref else 'NO'}")
    grow, kv = (next(x for x in results if x["way"] == w and x["device"] == "lazy")
                for w in ("growing", "kv_cache"))
    g = kv["last_graph"]
    print(f"\nlazy, KV cache: {kv['counters']['graph_compiles']} graphs (the prefill and one decoding "
          f"step) for {args.tokens} tokens; the decoding step is {g['nodes']} nodes, {g['kernels']} "
          f"kernels, {g['run_ms']:.2f} ms a run")
    print(f"lazy, growing context: {grow['counters']['graph_compiles']} graphs "
          f"({grow['counters']['symbolic_compiles']} with the length symbolic), "
          f"{kv['tokens_per_s'] / grow['tokens_per_s']:.1f}x slower "
          f"than the KV cache")
    same = all(x["tokens"] == ref for x in results)
    print("the KV cache's tokens equal the growing context's, on lazy and on cpu" if same
          else "FAILED: the ways generated different tokens")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
