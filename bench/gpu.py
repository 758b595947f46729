#!/usr/bin/env python3
"""GPU benchmark (ANCHORS.md rows): lazytensor `lazy` (CUDA backend) vs PyTorch eager vs
torch.compile, same process, same inputs. Reports the median ms after warm-up and the first-call
seconds (compile included), as a table and JSON.

  PYTHONPATH=build-gpu/python python3 bench/gpu.py [--json out.json] [--only NAME] [--quick]
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

import lazytensor as lt


def cuda_ms(fn, repeats):
    """Median of CUDA-event timed calls (PyTorch)."""
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def wall_ms(fn, repeats, rounds=5, sync=None):
    """A step's time as a training loop sees it: a round of calls back to back (`repeats` /
    `rounds`, at least 10), then a synchronize (`sync`, lazytensor's by default), divided by the
    calls; the median of `rounds` such rounds. Runs on lazy:cuda are
    asynchronous (mark_step returns once the kernels are queued), so the host's tracing of one
    step overlaps the GPU's work on the previous one, as PyTorch eager's launches do."""
    times = []
    # At least 10 steps per round: the first step of a round is traced while the GPU has nothing
    # to do, a cost a training loop pays once, not per step (with 2-3 steps per round the GPT
    # rows measured GPU time + 1/2 to 1/3 of a step's host time: 22.2 ms for 20.4 ms of kernels).
    per_round = max(10, repeats // rounds)
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(per_round):
            fn()
        (sync or lt.cuda.synchronize)()
        times.append((time.perf_counter() - t0) * 1e3 / per_round)
    # Every round on stderr (the log), so that a row whose median moved shows whether one round or
    # all of them did (s27: GPT-2 bf16 read 24.8 ms once and 21.5-22.0 in every round after).
    print(f"    rounds ({per_round} calls each), ms: " + " ".join(f"{t:.3f}" for t in times),
          file=sys.stderr, flush=True)
    return statistics.median(times)


def torch_wall_ms(fn, repeats):
    """wall_ms for a PyTorch contender: ANCHORS' whole-model rows time every contender this way
    (rounds of steps back to back, one synchronize), so host overhead counts for everyone."""
    return wall_ms(fn, repeats, sync=torch.cuda.synchronize)


def wall_ms_without_graphs(fn, repeats):
    """wall_ms with CUDA graph replay off (LT_CUDA_GRAPHS=0), for the same step: executables read
    the variable when they are created, so the compiled graphs are dropped before and after."""
    old = os.environ.get("LT_CUDA_GRAPHS")
    os.environ["LT_CUDA_GRAPHS"] = "0"
    try:
        lt._C._clear_graph_cache()
        for _ in range(4):
            fn()
        return wall_ms(fn, repeats)
    finally:
        if old is None:
            del os.environ["LT_CUDA_GRAPHS"]
        else:
            os.environ["LT_CUDA_GRAPHS"] = old
        lt._C._clear_graph_cache()


def lt_first_s(fn):
    """The first call of a lazytensor step, compile included, until its GPU work is done."""
    t0 = time.perf_counter()
    out = fn()
    lt.cuda.synchronize()
    return out, time.perf_counter() - t0


def first_call_s(fn):
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def lt_row_step(arrays, lt_fn):
    """One step of a row on lazytensor: the inputs uploaded to lazy:cuda once (named: plain "lazy"
    would quietly fall back to the CPU without a GPU), then lt_fn and a mark_step per call."""
    ls = [lt.tensor(a, device="lazy:cuda") for a in arrays]
    lt.mark_step()

    def lt_step():
        y = lt_fn(*ls)
        lt.mark_step()
        return y
    return lt_step


def sin_chain(n):
    x0 = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    def torch_fn(x):
        for _ in range(20):
            x = x + torch.sin(x)
        return x
    def lt_fn(x):
        for _ in range(20):
            x = x + x.sin()
        return x
    return [x0], torch_fn, lt_fn


def _functional(name):
    """lt.nn.functional.<name> when the package has it, else the module-level function."""
    f = getattr(getattr(getattr(lt, "nn", None), "functional", None), name, None)
    return f or getattr(lt, name, None)


def lt_gelu(x):
    f = _functional("gelu")
    if f is None:
        raise NotImplementedError("lazytensor has no gelu in this build")
    return f(x)


def lt_layer_norm(x, shape, w, b, eps=1e-5):
    f = _functional("layer_norm")
    if f is not None:
        return f(x, shape, w, b, eps)
    # The same computation spelled out; lowering fuses it into one row kernel either way.
    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    return xc * ((xc * xc).mean(-1, keepdim=True) + eps).rsqrt() * w + b


def ln_gelu(rows=8192, cols=4096):
    rng = np.random.default_rng(1)
    arrs = [rng.standard_normal((rows, cols)).astype(np.float32), rng.standard_normal((rows, cols)).astype(np.float32),
            rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)]
    def torch_fn(x, r, w, b):
        return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (cols,), w, b)) + r
    def lt_fn(x, r, w, b):
        return lt_gelu(lt_layer_norm(x, (cols,), w, b)) + r
    return arrs, torch_fn, lt_fn


def softmax(n=4096):
    x0 = np.random.default_rng(2).standard_normal((n, n)).astype(np.float32)
    return [x0], (lambda x: torch.softmax(x, -1)), (lambda x: x.softmax(-1))


def mlp_train_row(quick, repeats):
    """ANCHORS' MLP 1024-4096-4096-10 train step (forward, cross_entropy, backward, SGD), batch 256:
    the same weights and batch in PyTorch eager, torch.compile and lazytensor lazy:cuda."""
    d_in, hid, n_out, batch = (256, 512, 10, 64) if quick else (1024, 4096, 10, 256)
    rng = np.random.default_rng(5)
    ws = [rng.standard_normal(s).astype(np.float32) * 0.02 for s in [(hid, d_in), (hid,), (hid, hid), (hid,), (n_out, hid), (n_out,)]]
    xb = rng.standard_normal((batch, d_in)).astype(np.float32)
    yb = rng.integers(0, n_out, batch).astype(np.int64)
    row = {"workload": f"mlp_train_{d_in}_{hid}_{hid}_{n_out}_b{batch}"}

    def torch_model():
        m = torch.nn.Sequential(torch.nn.Linear(d_in, hid), torch.nn.ReLU(), torch.nn.Linear(hid, hid), torch.nn.ReLU(),
                                torch.nn.Linear(hid, n_out)).cuda()
        with torch.no_grad():
            for p, w in zip(m.parameters(), ws):
                p.copy_(torch.from_numpy(w))
        return m
    x, y = torch.from_numpy(xb).cuda(), torch.from_numpy(yb).cuda()

    def torch_step_fn(m, opt):
        def step():
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss
        return step
    m = torch_model()
    step = torch_step_fn(m, torch.optim.SGD(m.parameters(), lr=1e-3))
    for _ in range(3):
        step()
    row["eager_ms"] = cuda_ms(step, repeats)
    torch._dynamo.reset()
    m = torch_model()
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    cstep = torch.compile(torch_step_fn(m, opt))
    row["compile_first_s"] = first_call_s(cstep)
    for _ in range(3):
        cstep()
    row["compile_ms"] = cuda_ms(cstep, repeats)
    try:
        nn = lt.nn
        lm = nn.Sequential(nn.Linear(d_in, hid), nn.ReLU(), nn.Linear(hid, hid), nn.ReLU(), nn.Linear(hid, n_out))
        lm.to("lazy:cuda")
        lm.load_state_dict({k: lt.tensor(w) for k, w in zip(lm.state_dict().keys(), ws)})
        lx, ly = lt.tensor(xb, device="lazy:cuda"), lt.tensor(yb, device="lazy:cuda")
        lopt = lt.optim.SGD(lm.parameters(), lr=1e-3)
        lt.mark_step()

        def lt_step():
            lopt.zero_grad(set_to_none=True)
            loss = lt.nn.functional.cross_entropy(lm(lx), ly)
            loss.backward()
            lopt.step()  # ends the step on lazy (one graph)
            return loss
        first, row["lt_first_s"] = lt_first_s(lt_step)
        row["lt_first_compile_ms"] = lt.metrics.last_graph()["compile_ms"]
        for _ in range(3):
            lt_step()
        row["lt_ms"] = wall_ms(lt_step, repeats)
        row["lt_ms_no_cuda_graphs"] = wall_ms_without_graphs(lt_step, repeats)
        ref = torch_model()
        want = torch.nn.functional.cross_entropy(ref(x), y).item()
        row["max_abs_err_vs_torch"] = abs(float(first.item()) - want)
        row["lt_backend"] = lt.metrics.last_graph()["backend"]
        row["lt_kernels"] = lt.metrics.last_graph()["kernels"]
    except (NotImplementedError, RuntimeError, AttributeError, TypeError, ValueError, KeyError) as e:
        row["lt_error"] = str(e).splitlines()[0]
    return row


ROWS = {
    "sin_chain_20_n10000": lambda q: sin_chain(10_000),
    "sin_chain_20_n2^24": lambda q: sin_chain(1 << (18 if q else 24)),
    "layer_norm_gelu_res_8192x4096": lambda q: ln_gelu(*((512, 512) if q else (8192, 4096))),
    "softmax_4096x4096": lambda q: softmax(512 if q else 4096),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    dev_name = torch.cuda.get_device_name(0)
    results = []
    if not args.only or args.only in "mlp_train":
        row = mlp_train_row(args.quick, args.repeats)
        results.append(row)
        print(json.dumps(row), flush=True)
    if not args.only or args.only in "gpt2_blocks":
        from gpu_gpt import gpt_blocks_row
        row = gpt_blocks_row(lt, cuda_ms, wall_ms, first_call_s, args.quick, max(5, args.repeats // 5))
        results.append(row)
        print(json.dumps(row), flush=True)
        from gpu_gpt import gpt_blocks_bf16_row
        row = gpt_blocks_bf16_row(lt, cuda_ms, wall_ms, first_call_s, args.quick,
                                  max(5, args.repeats // 5))
        results.append(row)
        print(json.dumps(row), flush=True)
    if not args.only or args.only in "resnet18":
        from gpu_resnet import resnet18_row
        row = resnet18_row(lt, torch_wall_ms, wall_ms, first_call_s, args.quick, max(10, args.repeats // 2))
        results.append(row)
        print(json.dumps(row), flush=True)
    import gpu_gpt2
    gpt2_rows = {  # --only gpt2_124m runs the three, --only gpt2_124m_train_bf16 one
        "gpt2_124m_train_fp32": lambda: gpu_gpt2.gpt2_124m_train_row(
            lt, torch_wall_ms, wall_ms, first_call_s, args.quick, max(10, args.repeats // 5), False),
        "gpt2_124m_train_bf16": lambda: gpu_gpt2.gpt2_124m_train_row(
            lt, torch_wall_ms, wall_ms, first_call_s, args.quick, max(10, args.repeats // 5), True),
        "gpt2_124m_infer_fp32": lambda: gpu_gpt2.gpt2_124m_infer_row(
            lt, torch_wall_ms, wall_ms, first_call_s, args.quick, max(10, args.repeats // 2)),
    }
    for name, make_row in gpt2_rows.items():
        if not args.only or args.only in name:
            row = make_row()
            results.append(row)
            print(json.dumps(row), flush=True)
    for name, make in ROWS.items():
        if args.only and args.only not in name:
            continue
        arrays, torch_fn, lt_fn = make(args.quick)
        row = {"workload": name}
        xs = [torch.from_numpy(a).cuda() for a in arrays]
        for _ in range(3):
            torch_fn(*xs)
        row["eager_ms"] = cuda_ms(lambda: torch_fn(*xs), args.repeats)
        torch._dynamo.reset()
        compiled = torch.compile(torch_fn)
        row["compile_first_s"] = first_call_s(lambda: compiled(*xs))
        for _ in range(3):
            compiled(*xs)
        row["compile_ms"] = cuda_ms(lambda: compiled(*xs), args.repeats)
        try:
            lt_step = lt_row_step(arrays, lt_fn)
            y, row["lt_first_s"] = lt_first_s(lt_step)
            row["lt_first_compile_ms"] = lt.metrics.last_graph()["compile_ms"]
            for _ in range(3):
                lt_step()
            row["lt_ms"] = wall_ms(lt_step, args.repeats)
            row["lt_ms_no_cuda_graphs"] = wall_ms_without_graphs(lt_step, args.repeats)
            # The same step under lt.compile, the peer of torch.compile: captured once, then
            # replayed without re-running the Python code (no tracing or hashing per op).
            compiled_step = lt.compile(lt_step)
            for _ in range(3):
                compiled_step()
            row["lt_compile_ms"] = wall_ms(compiled_step, args.repeats)
            want = torch_fn(*xs).cpu().numpy()
            got = y.numpy()
            row["max_abs_err_vs_torch"] = float(np.max(np.abs(got - want)))
            row["lt_backend"] = lt.metrics.last_graph()["backend"]
            row["lt_kernels"] = lt.metrics.last_graph()["kernels"]
        except (NotImplementedError, RuntimeError, AttributeError, TypeError, ValueError) as e:
            row["lt_error"] = str(e).splitlines()[0]
        results.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n# {dev_name}, torch {torch.__version__}")
    print(f"{'workload':32}{'eager ms':>10}{'compile ms':>12}{'lt ms':>10}{'lt/compile':>12}{'compile 1st s':>15}{'lt 1st s':>10}")
    for r in results:
        lt_ms = r.get("lt_ms")
        ratio = f"{lt_ms / r['compile_ms']:.2f}x" if lt_ms else "n/a"
        lt_first = f"{r['lt_first_s']:.3f}" if "lt_first_s" in r else "n/a"
        print(f"{r['workload']:32}{r['eager_ms']:10.3f}{r['compile_ms']:12.3f}{(f'{lt_ms:.3f}' if lt_ms else 'n/a'):>10}"
              f"{ratio:>12}{r['compile_first_s']:15.2f}{lt_first:>10}")
        if "lt_first_compile_ms" in r:
            print(f"    lt 1st call: {r['lt_first_compile_ms'] / 1000:.3f} s graph compile (lowering + NVRTC), "
                  f"the rest tracing and the first run")
        if "lt_compile_ms" in r:
            print(f"    lt.compile (replay, no re-tracing): {r['lt_compile_ms']:.3f} ms, "
                  f"{r['lt_compile_ms'] / r['compile_ms']:.2f}x torch.compile")
        if "lt_error" in r:
            print(f"    lazytensor: {r['lt_error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev_name, "torch": torch.__version__, "rows": results}, f, indent=1)
    # A row lazytensor could not run is a failure of the run (the table still shows the others).
    return 1 if any("lt_error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
