#!/usr/bin/env python3
"""Writes the trace of bench/gpu_gpt.py's GPT-2 train step (4 blocks, d 768, T 512, B 8, forward +
backward; bf16 autocast with --bf16) traced on lazy:reference without running it, for
`bench_compile_cost --cuda-lowering` (which expands the attention prims CUDA does not take), so
the CUDA cold compile of the step can be studied on a machine without a GPU:

  PYTHONPATH=build/python .venv/bin/python bench/dump_gpt_step.py gpt.json [--bf16]
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
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
