#!/usr/bin/env python3
"""The ResNet-18 row's lazytensor step (bench/gpu_resnet.py) under the environment's code-generation
switches, for quick A/B runs on the GPU machine: wall ms per step over 20 steps (one synchronize),
kernels, counters, then the host breakdown. E.g.

  for cl in 0 1; do LT_CHANNELS_LAST=$cl PYTHONPATH=build-gpu/python python3 tests/gpu/resnet_variants.py; done
"""
import os, sys, time
sys.path.insert(0, "tests/gpu"); sys.path.insert(0, "bench")
import lazytensor as lt
from gpu_resnet import lt_step, setup
from profile_gpt import host_breakdown
state, x, y = setup(False)
step = lt_step(lt, state, x, y)
step(); lt.cuda.synchronize()
for _ in range(3): step()
lt.cuda.synchronize(); lt.metrics.reset()
t0 = time.perf_counter()
for _ in range(20): step()
lt.cuda.synchronize()
wall = (time.perf_counter() - t0) * 50
print("channels_last", os.environ.get("LT_CHANNELS_LAST", "-"), "split", os.environ.get("LT_CUDA_SPLIT_REDUCTIONS", "-"), "wall ms", round(wall, 3), "kernels", lt.metrics.last_graph()["kernels"], "counters", lt.metrics.counters())
print(host_breakdown(step, 5, top=12))
