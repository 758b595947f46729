"""The timing shared by bench/gpu.py's whole-model training rows (gpu_resnet.py, gpu_gpt2.py):
PyTorch eager and torch.compile(model) with the optimizer eager, then lazytensor's step plain and
under lt.compile, every contender timed as the other rows of bench/gpu.py."""
import time

import torch


def time_torch_training(row, torch_model, torch_step, torch_ms, first_call_s, repeats):
    """Fills row's eager_ms, compile_first_s and compile_ms. torch_model() makes the model with
    the row's initial weights; torch_step(m, fwd) returns a step (zero_grad, loss of fwd,
    backward, optimizer step; returns the loss) training m through fwd. Returns the first step's
    loss, lazytensor's reference."""
    m = torch_model()
    step = torch_step(m, m)
    want = float(step().item())  # the first step's loss, from the initial weights
    for _ in range(3):
        step()
    row["eager_ms"] = torch_ms(step, repeats)
    del m, step
    torch._dynamo.reset()
    m = torch_model()
    cstep = torch_step(m, torch.compile(m))
    row["compile_first_s"] = first_call_s(cstep)
    for _ in range(3):
        cstep()
    row["compile_ms"] = torch_ms(cstep, repeats)
    del m, cstep
    torch.cuda.empty_cache()  # the models' memory, before lazytensor's run
    return want


def time_lt_training(lt, row, lt_step, wall_ms, repeats, want):
    """Fills row's lazytensor fields for lt_step (one training step on lazy:cuda ending at the
    optimizer's update, returning its loss): the first call until its GPU work is done, the loss
    against `want`, plain steps, and the same step under lt.compile (captured once, replayed
    without tracing)."""
    t0 = time.perf_counter()
    first = lt_step()
    lt.cuda.synchronize()
    row["lt_first_s"] = time.perf_counter() - t0
    row["lt_first_compile_ms"] = lt.metrics.last_graph()["compile_ms"]  # lowering + NVRTC
    # Two independent first-step losses (torch eager's `want`, ours). For GPT-2 124M the loss is
    # ~484 (the tied head scores each position's own input token at ~|wte|^2), where float32's
    # spacing is 3.05e-5: two tree reductions of the same per-row losses land on the same float
    # (0.0 on the H200 in fp32), a sequential float32 sum 9 spacings away (2.7e-4, the CPU run).
    row["max_abs_err_vs_torch"] = abs(float(first.item()) - want)
    for _ in range(3):
        lt_step()
    row["lt_ms"] = wall_ms(lt_step, repeats)
    row["lt_backend"] = lt.metrics.last_graph()["backend"]
    row["lt_kernels"] = lt.metrics.last_graph()["kernels"]
    # Runs so far whose kernels went to the GPU as one CUDA graph (0: every launch plain).
    row["lt_cuda_graph_launches"] = lt.metrics.counters().get("cuda_graph_launches", 0)
    compiled = lt.compile(lt_step)
    for _ in range(3):
        compiled()
    row["lt_compile_ms"] = wall_ms(compiled, repeats)
