#!/usr/bin/env python3
"""Writes the trace of bench/gpu_gpt.py's GPT-2 train step (4 blocks, d 768, T 512, B 8, forward +
backward; bf16 autocast with --bf16) traced on lazy:reference without running it, for
`bench_compile_cost --cuda-lowering` (which expands the attention prims CUDA does not take), so
the CUDA cold compile of the step can be studied on a machine without a GPU:

  PYTHONPATH=build/python .venv/bin/python bench/dump_gpt_step.py gpt.json [--bf16]
  (--resnet18: bench/gpu_resnet.py's ResNet-18 training step, SGD momentum, instead;
   --gpt2-124m: bench/gpu_gpt2.py's GPT-2 124M forward and backward, with --bf16 under autocast)
  CUDA_CACHE_DISABLE=1 build/bin/bench_compile_cost --cuda-lowering gpt.json
"""
import argparse
import contextlib
import os
import sys

import numpy as np

import lazytensor as lt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_gpt import _lt_model  # noqa: E402  (the same model as the GPU benchmark)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--bf16", action="store_true", help="forward under lt.autocast bfloat16")
    ap.add_argument("--resnet18", action="store_true",
                    help="bench/gpu_resnet.py's ResNet-18 step (B 128, 32x32, cross_entropy) instead")
    ap.add_argument("--gpt2-124m", action="store_true",
                    help="bench/gpu_gpt2.py's GPT-2 124M forward, cross_entropy and backward "
                         "(B 8, T 1024; no optimizer) instead")
    args = ap.parse_args()
    if args.resnet18:
        return dump_resnet18(args.out)
    if args.gpt2_124m:
        return dump_gpt2_124m(args.out, args.bf16)
    d, heads, n_blocks, T, B = 768, 12, 4, 512, 8
    dev = "lazy:reference"
    model = _lt_model(lt, d, heads, n_blocks).to(dev)
    x = lt.tensor(np.random.default_rng(3).standard_normal((B, T, d)).astype(np.float32), device=dev)
    amp = (lambda: lt.autocast("lazy", dtype=lt.bfloat16)) if args.bf16 else contextlib.nullcontext
    with amp():
        loss = model(x).square().mean()
    loss.backward()
    lt.debug.dump(args.out, loss, *[p.grad for p in model.parameters()], data=False)
    print("wrote", args.out)


def dump_gpt2_124m(out, bf16):
    from gpu_gpt2 import _model
    dev = "lazy:reference"
    vocab, ctx = 50304, 1024
    model = _model(lt.nn, lt.nn.functional, vocab, ctx, 12, 768, 12).to(dev)
    rng = np.random.default_rng(0)
    idx, tgt = (lt.tensor(rng.integers(0, vocab, (8, ctx)).astype(np.int64), device=dev)
                for _ in range(2))
    pos = lt.tensor(np.arange(ctx, dtype=np.int64), device=dev)
    amp = (lambda: lt.autocast("lazy", dtype=lt.bfloat16)) if bf16 else contextlib.nullcontext
    with amp():
        logits = model(idx, pos).reshape(-1, vocab)
        loss = lt.nn.functional.cross_entropy(logits, tgt.reshape(-1))
    loss.backward()
    lt.debug.dump(out, loss, *[p.grad for p in model.parameters()], data=False)
    print("wrote", out)


def dump_resnet18(out):
    from gpu_resnet import _model, setup
    state, x_np, y_np = setup(False)
    dev = "lazy:reference"
    model = _model(lt.nn, lt.nn.functional).to(dev)
    model.load_state_dict({k: lt.tensor(v, device=dev) for k, v in state.items()})
    params = list(model.parameters())
    bufs = [lt.tensor(np.zeros(p.shape, np.float32), device=dev) for p in params]
    lt.mark_step()
    loss = lt.nn.functional.cross_entropy(model(lt.tensor(x_np, device=dev)), lt.tensor(y_np, device=dev))
    loss.backward()
    # SGD with momentum as lt.optim.SGD computes it (its step() would sync: written out here), so
    # the updated parameters and momentum buffers are outputs of the dumped step.
    new_bufs = [b * 0.9 + p.grad for b, p in zip(bufs, params)]
    new_params = [p - b * 0.01 for p, b in zip(params, new_bufs)]
    lt.debug.dump(out, loss, *new_params, *new_bufs, *model.buffers(), data=False)
    print("wrote", out)


if __name__ == "__main__":
    main()
