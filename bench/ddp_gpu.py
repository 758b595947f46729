#!/usr/bin/env python3
"""Data-parallel GPT-2 124M training throughput in tokens/s, on 1 GPU and on N GPUs.

lazytensor's own API on lazy:cuda:{local_rank}, the model wrapped in
lt.nn.parallel.DistributedDataParallel.

The model, weights, batch, bf16 autocast and AdamW are bench/gpu_gpt2.py's training row (12 layers,
d 768, 12 heads, vocabulary 50304, T 1024, tied embedding and head), each rank with its own batch of
--batch rows (weak scaling: N GPUs train on N times the tokens per step). Timed as that row is
(bench/gpu.py's wall_ms: rounds of 10 steps back to back, then one synchronize; the median round).

The script launches its own runs with torchrun (python -m torch.distributed.run), each rank a
process of this same script (--worker):

  1. world 1 (--nproc-per-node 1): DDP over a group of one rank, the same code path as N;
  2. world N: the throughput, rank 0's losses, the losses averaged over the ranks, and whether every
     rank ends with the same weights;
  3. world 1 on run 2's global batch (its ranks' rows concatenated, N x --batch), the oracle:
     its first --loss-steps losses must equal run 2's averaged ones (bf16, so loosely: within
     --loss-tol of how far the loss moved).

--peer adds PyTorch's runs (bench/ddp_torch_worker.py: torch.nn.parallel.DistributedDataParallel,
then torch.compile, AdamW eager, the same weights, batches and timing): the bare compiled model
on 1 GPU and DDP on N twice, with dynamo's DDPOptimizer (PyTorch's default: a graph per bucket)
and without (one graph); the table shows the peer's speedup and our N-GPU step against the
faster of the two.

--reduce-modes and --variants rerun the N-rank step under other environments (DDP's ways to
average a bucket, NCCL's settings); the variants are timed only, not checked against the oracle.

Prints a table to stdout (every rank's output goes to stderr, the log) and writes the figures as
JSON to --out. Exit 0 when every run finished and the losses and weights agree (the throughput
target, >= 0.95 x N, is reported, not enforced).

  PYTHONPATH=build-gpu/python python3 bench/ddp_gpu.py [--nproc N] [--batch 8]
  PYTHONPATH=build/python .venv/bin/python bench/ddp_gpu.py --device-template lazy --backend gloo \\
      --tiny            # the CPU validation: a 2-layer, d 64, T 32 model, 3 steps
"""
import argparse
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# Every process these runs start gets these. The first three are mandatory on the shared GPU hosts
# (NVLink multicast off in NCCL, torch's symmetric memory and NVSHMEM: using it can take the host's
# GPUs out of service); never remove them. LT_CACHE_DIR=off: every run compiles its own graphs.
RANK_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1", "LT_CACHE_DIR": "off", "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1"}

FULL = (50304, 1024, 12, 768, 12)  # gpu_gpt2's VOCAB, CTX, LAYERS, DIM, HEADS
TINY = (512, 32, 2, 64, 4)
LR = 1e-4  # gpu_gpt2's AdamW (weight decay 0.1)


# ---- launching ranks (tests/gpu/check_ddp_cuda.py launches its checks with these too) ----

def free_port_pair():
    """A port p with p + 1 free too (under torchrun lazytensor's store takes MASTER_PORT + 1)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p >= 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise RuntimeError("no free pair of ports")


def rank_env(dist_timeout_s, **extra):
    """This process's environment plus RANK_ENV and LT_DIST_TIMEOUT (and `extra`), for the ranks."""
    return dict(os.environ, **RANK_ENV, LT_DIST_TIMEOUT=str(dist_timeout_s), **extra)


def torchrun(script_and_args, nproc, env, deadline_s):
    """Runs `python -m torch.distributed.run --nproc-per-node nproc script args...`; returns (exit
    status, the ranks' stdout and stderr together). Past deadline_s torchrun and its ranks are
    killed and the status is None: a hung collective cannot hang the caller. The output goes
    through a file, not a pipe, so that no process left holding it can block the reading."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
           "--master-addr=127.0.0.1", f"--master-port={free_port_pair()}", *script_and_args]
    with tempfile.TemporaryFile("w+") as log:
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=deadline_s)
            note = ""
        except subprocess.TimeoutExpired:
            kill_torchrun(p)
            rc, note = None, f"\n[killed: past the {deadline_s} s deadline]\n"
        log.seek(0)
        return rc, log.read() + note


def kill_torchrun(p):
    """SIGKILL to torchrun's ranks and to torchrun (p). torchrun starts each rank in a session of
    its own, so killing torchrun's process group would leave them running: each rank's group is
    killed by its id (the rank's pid), found among p's children."""
    for pid in children(p.pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def children(pid):
    """The processes whose parent is `pid` (Linux's /proc)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after it.
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            kids.append(int(entry))
    return kids


def visible_gpus():
    """The GPUs this process sees (torch.cuda.device_count() reads them without making a CUDA
    context here, which would hold GPU 0's memory through the runs)."""
    import torch
    return torch.cuda.device_count()


def default_nproc(device_template):
    """Every visible GPU (at least 2) for a GPU template; 2 ranks otherwise."""
    return max(2, visible_gpus()) if "cuda" in device_template else 2


def gpus_missing(device_template, nproc):
    """Why nproc ranks cannot run on this host's GPUs ("" when they can)."""
    if "{local_rank}" in device_template and "cuda" in device_template:
        n = visible_gpus()
        if n < nproc:
            return f"{nproc} ranks on {device_template} need {nproc} GPUs; this host shows {n}"
    return ""


# ---- one rank (--worker) ----

def initial_state(cfg):
    """gpu_gpt2's starting weights: its GPT-2 built in PyTorch after torch.manual_seed(0), as
    numpy arrays (every rank makes the same; DDP broadcasts rank 0's anyway)."""
    import torch
    from gpu_gpt2 import _model
    torch.manual_seed(0)
    tm = _model(torch.nn, torch.nn.functional, *cfg)
    return {k: v.detach().numpy() for k, v in tm.state_dict().items()}


def global_batch(cfg, rows):
    """The step's global batch (token ids and targets, rows x T), drawn as gpu_gpt2 draws its
    batch (seed 5): with rows = 8 it is the row's own batch. Rank r trains on its r-th slice."""
    vocab, ctx = cfg[0], cfg[1]
    rng = np.random.default_rng(5)
    idx = rng.integers(0, vocab, (rows, ctx)).astype(np.int64)
    tgt = rng.integers(0, vocab, (rows, ctx)).astype(np.int64)
    return idx, tgt


def ddp_train_step(lt, cfg, state, idx_np, tgt_np, device, wrap=True, compiled=False,
                   bucket_cap_mb=25.0):
    """gpu_gpt2.lt_train_step's step (the model with `state`'s weights, cross_entropy under bf16
    autocast, backward, AdamW; the optimizer's update ends the step: one graph) with the model
    wrapped in DistributedDataParallel, whose gradient all_reduces join that graph. lt_train_step
    builds its model inside and cannot wrap it, hence this copy. wrap=False: the bare model (the
    step a one-GPU user runs, without DDP's bucketing and collectives). compiled: the step under
    lt.compile (traced once, then replayed without Python tracing); bucket_cap_mb: DDP's bucket
    size. Returns (step, the model)."""
    from gpu_gpt2 import _amp, _model
    from lazytensor.nn.parallel import DistributedDataParallel as DDP
    vocab, ctx = cfg[0], cfg[1]
    m = _model(lt.nn, lt.nn.functional, *cfg).to(device)
    m.load_state_dict({k: lt.tensor(v, device=device) for k, v in state.items()})
    ddp = DDP(m, bucket_cap_mb=bucket_cap_mb) if wrap else m
    lidx, ltgt = lt.tensor(idx_np, device=device), lt.tensor(tgt_np, device=device)
    lpos = lt.tensor(np.arange(ctx, dtype=np.int64), device=device)
    opt = lt.optim.AdamW(ddp.parameters(), lr=LR, weight_decay=0.1)
    amp = _amp(lt, True)[1]
    lt.mark_step()

    def step():
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = lt.nn.functional.cross_entropy(ddp(lidx, lpos).reshape(-1, vocab),
                                                  ltgt.reshape(-1))
        loss.backward()
        opt.step()  # ends the step on lazy (one graph)
        return loss
    return (lt.compile(step, fullgraph=True) if compiled else step), m


def synchronizer(lt, device, losses):
    """What ends a timing round: lt.cuda.synchronize(device) on a GPU, as gpu_gpt2's rows do;
    elsewhere (the CPU validation; lazytensor has no device-neutral synchronize) reading the last
    step's loss, which waits for that step."""
    if "cuda" in device:
        return lambda: lt.cuda.synchronize(device)
    return lambda: losses[-1].item()


def weights_equal_on_every_rank(lt, dist, model, device, world):
    """Every parameter's sum, gathered from every rank: equal bytes on every rank (each applies the
    same averaged gradients to rank 0's starting weights with the same kernels)."""
    sums = lt.stack([p.detach().float().sum() for p in model.parameters()])
    gathered = [lt.zeros(tuple(sums.shape), device=device) for _ in range(world)]
    dist.all_gather(gathered, sums)
    mine = gathered[0].numpy()
    return all(np.array_equal(g.numpy(), mine) for g in gathered)


def worker(args):
    """One rank: --loss-steps steps (the first timed to the end of its GPU work, compile included),
    then, with --timed, 3 warm-up steps and wall_ms's rounds; rank 0 writes the figures to
    --result as JSON. Every rank makes the same syncs in the same order (the collectives)."""
    import lazytensor as lt
    import lazytensor.distributed as dist
    from gpu import wall_ms
    dist.init_process_group(args.backend or None)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = args.device_template.replace("{local_rank}", os.environ.get("LOCAL_RANK", "0"))
    cfg = TINY if args.tiny else FULL
    rows = args.global_batch // world
    idx, tgt = global_batch(cfg, args.global_batch)
    step, model = ddp_train_step(lt, cfg, initial_state(cfg), idx[rank * rows:(rank + 1) * rows],
                                 tgt[rank * rows:(rank + 1) * rows], device, wrap=not args.no_ddp,
                                 compiled=args.compile, bucket_cap_mb=args.bucket_cap_mb)
    losses = []
    sync = synchronizer(lt, device, losses)
    t0 = time.perf_counter()
    losses.append(step())
    sync()
    res = {"world": world, "device": device, "rows_per_rank": rows, "global_rows": rows * world,
           "ddp": not args.no_ddp, "lt_compile": args.compile,
           "first_step_s": time.perf_counter() - t0}
    for _ in range(args.loss_steps - 1):
        losses.append(step())
    res["losses_rank0"] = [float(l.item()) for l in losses]  # this rank's; rank 0 writes them
    averaged = lt.stack([l.detach().float() for l in losses])
    dist.all_reduce(averaged, op="avg")  # equal slices: the global batch's mean loss
    res["losses_avg"] = [float(v) for v in averaged.numpy()]
    if args.timed:
        for _ in range(3):
            losses.append(step())
        compiles0 = lt.metrics.counters()["graph_compiles"]
        ms = wall_ms(lambda: losses.append(step()), args.repeats, rounds=args.rounds, sync=sync)
        res["graph_compiles_while_timed"] = lt.metrics.counters()["graph_compiles"] - compiles0
        slowest = lt.tensor(np.array([ms], np.float32), device=device)
        dist.all_reduce(slowest, op="max")  # the ranks wait for each other: the slowest one counts
        res["step_ms"] = float(slowest.numpy()[0])
        res["step_ms_rank0"] = ms
        res["tokens_per_s"] = world * rows * cfg[1] * 1e3 / res["step_ms"]
    res["weights_equal"] = weights_equal_on_every_rank(lt, dist, model, device, world)
    if rank == 0:
        with open(args.result, "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()
    return 0


# ---- the launcher ----

PEER = os.path.join(HERE, "ddp_torch_worker.py")  # --peer's ranks: PyTorch's DDP + torch.compile


def run_phase(args, name, nproc, global_rows, timed, no_ddp=False, script=None, env=None,
              extra_args=()):
    """Runs this script's worker (or `script`, the peer's) on nproc ranks, with `env` added to
    their environment; returns rank 0's figures, or None when the run failed. Every rank's output
    goes to stderr, the log, which says why."""
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "result.json")
        worker_args = [script or os.path.abspath(__file__), "--worker", "--result", result,
                       "--device-template", args.device_template, "--backend", args.backend,
                       "--global-batch", str(global_rows), "--loss-steps", str(args.loss_steps),
                       "--repeats", str(args.repeats), "--rounds", str(args.rounds)]
        worker_args += (["--timed"] if timed else []) + (["--tiny"] if args.tiny else [])
        worker_args += ["--no-ddp"] if no_ddp else []
        worker_args += ["--compile"] if args.compile else []
        worker_args += ["--bucket-cap-mb", str(args.bucket_cap_mb)]
        worker_args += list(extra_args)
        t0 = time.perf_counter()
        rc, out = torchrun(worker_args, nproc, rank_env(args.dist_timeout, **(env or {})),
                           args.deadline)
        status = f"exit {rc}" if rc is not None else f"killed at the {args.deadline} s deadline"
        sys.stderr.write(f"==== {name}: {nproc} rank(s), {global_rows} rows per step, {status}, "
                         f"{time.perf_counter() - t0:.1f} s\n{out}")
        sys.stderr.flush()
        if rc != 0 or not os.path.exists(result):
            return None
        with open(result) as f:
            return json.load(f)


def compare_losses(many, oracle, tol):
    """Run 2's averaged losses against the oracle's, step by step. The differences (bf16 rounding,
    the GEMMs' other shapes) are judged against how far the oracle's loss moved over those steps:
    a difference of 1% of the loss would hide a wrong gradient when the loss moves less than that
    (the tiny model's 0.24 of 43 in 3 steps), so the largest difference may be at most `tol` of the
    movement, which must not be 0."""
    got, want = np.array(many["losses_avg"]), np.array(oracle["losses_avg"])
    diff = np.abs(got - want)
    moved = float(abs(want[-1] - want[0]))
    return {"steps": len(want), "max_abs_diff": float(diff.max()),
            "max_rel_diff": float((diff / np.maximum(np.abs(want), 1e-12)).max()),
            "loss_moved": moved, "tol_of_moved": tol,
            "passed": bool(moved > 0 and diff.max() <= tol * moved)}


def summarize(args, nproc, one, many, oracle, plain=None, peer_one=None, peer_many=None,
              peer_one_graph=None):
    """The JSON's figures: the three runs as they came, the speedup and the loss comparison."""
    import torch
    import lazytensor as lt
    cfg = TINY if args.tiny else FULL
    out = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
           "git": git_revision(), "device_template": args.device_template,
           "backend": args.backend, "torch": torch.__version__, "lazytensor": lt.__file__,
           "gpu": torch.cuda.get_device_name(0) if visible_gpus() else None,
           # The ranks load torch (initial_state) before lazytensor makes its communicator, so
           # its dlopen of libnccl.so.2 finds PyTorch's (bench/README.md, thirty-third session):
           # this is the NCCL that ran.
           "nccl": ".".join(map(str, torch.cuda.nccl.version())) if visible_gpus() else None,
           "model": dict(zip(["vocab", "ctx", "layers", "d", "heads"], cfg)),
           "batch_per_rank": args.batch, "amp": "bf16 autocast", "optimizer":
               f"AdamW lr {LR} weight_decay 0.1", "one_gpu_run": "DDP over a group of 1 rank",
           "timing": f"bench/gpu.py wall_ms: {args.rounds} round(s) of "
                     f"{max(10, args.repeats // args.rounds)} steps, each ended by one "
                     "synchronize; the median round",
           "nproc": nproc, "one": one, "one_plain": plain, "n": many, "oracle": oracle}
    # The one-GPU baseline is the faster of DDP over one rank and the bare model (what a one-GPU
    # user runs): DDP's own cost on one GPU counts against the speedup, as it should.
    ones = [r for r in (one, plain) if r and "tokens_per_s" in r]
    best = max(ones, key=lambda r: r["tokens_per_s"]) if ones else None
    if best:
        out["one_gpu_tokens_per_s"] = best["tokens_per_s"]
    if best and many and "tokens_per_s" in many:
        out["one_gpu_baseline"] = "bare model, no DDP" if best is plain else "DDP over 1 rank"
        out["speedup"] = many["tokens_per_s"] / best["tokens_per_s"]
        out["scaling_efficiency"] = out["speedup"] / nproc
        out["target_speedup"] = 0.95 * nproc  # 1.9x on 2 GPUs
        out["target_met"] = out["speedup"] >= out["target_speedup"]
    if many and oracle:
        out["loss_check"] = compare_losses(many, oracle, args.loss_tol)
    if args.peer:
        out["peer"] = "PyTorch: torch.nn.parallel.DistributedDataParallel, then torch.compile"
        out["peer_one"], out["peer_n"] = peer_one, peer_many
        out["peer_n_one_graph"] = peer_one_graph
        runs = [r for r in (peer_many, peer_one_graph) if r and "step_ms" in r]
        best = min(runs, key=lambda r: r["step_ms"]) if runs else None
        if best:
            out["peer_n_best"] = "one graph" if best is peer_one_graph else "DDPOptimizer"
        if peer_one and best:
            out["peer_speedup"] = best["tokens_per_s"] / peer_one["tokens_per_s"]
        if many and best and "step_ms" in many:
            out["n_step_vs_peer"] = many["step_ms"] / best["step_ms"]
    return out


def git_revision():
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return None


def print_table(s):
    """The human-readable summary (stdout)."""
    m = s["model"]
    print(f"GPT-2 ({m['layers']} layers, d {m['d']}, vocab {m['vocab']}, T {m['ctx']}), "
          f"{s['batch_per_rank']} rows per rank (weak scaling), {s['amp']}, {s['optimizer']}; "
          f"{s['device_template']} over {s['backend']}; 1-GPU run: {s['one_gpu_run']}")
    print(f"{'ranks':>5} {'rows/step':>9} {'step ms':>9} {'tokens/s':>12} {'first step s':>12} "
          f"{'compiles':>8} {'weights equal':>13}")
    for r in (s.get("one_plain"), s["one"], s["n"], s.get("peer_one"), s.get("peer_n"),
              s.get("peer_n_one_graph")):
        if r and "tokens_per_s" in r:
            who = ("torch " if r.get("peer") else "") + ("" if r.get("ddp", True) else "bare")
            who += "1graph" if r.get("one_graph") else ""
            compiles = r["graph_compiles_while_timed"]
            print(f"{r['world']:>5} {who:<12} "
                  f"{r['global_rows']:>9} {r['step_ms']:>9.2f} "
                  f"{r['tokens_per_s']:>12,.0f} {r['first_step_s']:>12.2f} "
                  f"{'-' if compiles is None else compiles:>8} {str(r['weights_equal']):>13}")
    if "speedup" in s:
        print(f"speedup {s['nproc']} vs 1 ({s['one_gpu_baseline']}): {s['speedup']:.3f}x (efficiency "
              f"{s['scaling_efficiency']:.1%}; target >= {s['target_speedup']:.2f}x: "
              f"{'met' if s['target_met'] else 'NOT met'})")
    if "peer_speedup" in s:
        print(f"peer ({s['peer']}; N ranks: the faster, {s['peer_n_best']}): speedup "
              f"{s['nproc']} vs 1 (bare compiled model): {s['peer_speedup']:.3f}x")
    if "n_step_vs_peer" in s:
        print(f"our {s['nproc']}-rank step / the peer's: {s['n_step_vs_peer']:.3f}x")
    for name in ("one", "n"):
        if s[name]:
            print(f"rank 0's losses, {s[name]['world']} rank(s): "
                  + " ".join(f"{v:.4f}" for v in s[name]["losses_rank0"]))
    if "loss_check" in s:
        c, n, o = s["loss_check"], s["n"], s["oracle"]
        print(f"averaged losses, {n['world']} ranks:      "
              + " ".join(f"{v:.4f}" for v in n["losses_avg"]))
        print(f"1 process, {o['global_rows']} rows (oracle): "
              + " ".join(f"{v:.4f}" for v in o["losses_avg"]))
        print(f"loss check ({c['steps']} steps): max |diff| {c['max_abs_diff']:.3g} (relative "
              f"{c['max_rel_diff']:.3g}); the oracle's loss moved {c['loss_moved']:.3g}, allowed "
              f"{c['tol_of_moved']:g} of that: {'PASS' if c['passed'] else 'FAIL'}")


def parse_variants(args):
    """--reduce-modes m1,m2 and --variants "K=V,K2=V2;K=V3" as (label, environment) pairs."""
    out = [(f"LT_DDP_REDUCE={m}", {"LT_DDP_REDUCE": m}) for m in args.reduce_modes.split(",") if m]
    return out + environments(args.variants)


def environments(spec):
    """A --variants string, "K=V,K2=V2;K=V3", as (label, environment) pairs."""
    out = []
    for v in (spec or "").split(";"):
        v = v.strip()
        if not v:
            continue
        env = {}
        for kv in v.split(","):
            k, eq, val = kv.strip().partition("=")
            if not eq or not k:
                raise SystemExit(f"--variants: {kv!r} is not NAME=VALUE (in {v!r})")
            env[k] = val
        out.append((v, env))
    return out


def launch(args):
    os.environ.update(RANK_ENV)  # this process and torchrun's agent too
    nproc = args.nproc or default_nproc(args.device_template)
    why = gpus_missing(args.device_template, nproc)
    if why:
        print(f"FAIL: {why}")
        return 2
    plain = run_phase(args, "1 rank, no DDP", 1, args.batch, timed=True, no_ddp=True)
    one = run_phase(args, "1 rank", 1, args.batch, timed=True)
    many = run_phase(args, f"{nproc} ranks", nproc, nproc * args.batch, timed=True)
    oracle = run_phase(args, "oracle", 1, nproc * args.batch, timed=False)
    peer_one = peer_many = peer_one_graph = None
    if args.peer:
        peer_one = run_phase(args, "peer, 1 rank, no DDP", 1, args.batch, timed=True, no_ddp=True,
                             script=PEER)
        peer_many = run_phase(args, f"peer, {nproc} ranks", nproc, nproc * args.batch, timed=True,
                              script=PEER)
        # Dynamo's DDPOptimizer (a compiled graph per bucket, so the all-reduces overlap backward)
        # is PyTorch's default, but on 2 H200s one graph with the all-reduces after it was faster
        # (26.3 against 48.5 ms): the peer's figure is the faster of the two.
        peer_one_graph = run_phase(args, f"peer, {nproc} ranks, one graph", nproc,
                                   nproc * args.batch, timed=True, script=PEER,
                                   extra_args=["--peer-one-graph"])
    # The N-rank step again under each variant: DDP's ways to average a bucket
    # (runtime/distributed.h) and any other environment (NCCL's channels, the stream priority).
    variants = parse_variants(args)
    by_variant = {label: run_phase(args, f"{nproc} ranks, {label}", nproc, nproc * args.batch,
                                   timed=True, env=env)
                  for label, env in variants}
    s = summarize(args, nproc, one, many, oracle, plain, peer_one, peer_many, peer_one_graph)
    s["n_by_variant"] = by_variant
    print_table(s)
    for label, r in by_variant.items():
        if not r:
            print(f"{nproc} ranks with {label}: failed")
            continue
        vs_one = (f", {r['tokens_per_s'] / s['one_gpu_tokens_per_s']:.2f}x one GPU"
                  if "one_gpu_tokens_per_s" in s else "")
        print(f"{nproc} ranks with {label}: {r['step_ms']:.2f} ms a step{vs_one}")
    phases = (("1 rank, no DDP", plain), ("1 rank", one), (f"{nproc} ranks", many),
              ("oracle", oracle))
    if args.peer:
        phases += (("peer, 1 rank", peer_one), (f"peer, {nproc} ranks", peer_many),
                   (f"peer, {nproc} ranks, one graph", peer_one_graph))
    phases += tuple(by_variant.items())
    failed = [name for name, r in phases if r is None]
    if many and not many["weights_equal"]:
        failed.append("weights differ between ranks")
    if "loss_check" in s and not s["loss_check"]["passed"]:
        failed.append("loss check")
    s["failed"] = failed
    out = args.out or os.path.join(HERE, "results", f"ddp_{'tiny' if args.tiny else 'gpu'}_"
                                   f"{datetime.date.today().isoformat()}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(s, f, indent=1)
    print(f"figures: {out}")
    print(("FAIL: " + "; ".join(failed) + " (the log, on stderr, has each run's output)")
          if failed else "PASS")
    return 1 if failed else 0


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", type=int, default=0, help="N (default: every visible GPU, >= 2)")
    ap.add_argument("--batch", type=int, default=8, help="rows per rank (B)")
    ap.add_argument("--device-template", default="lazy:cuda:{local_rank}")
    ap.add_argument("--backend", default="nccl")
    ap.add_argument("--tiny", action="store_true",
                    help="a 2-layer, d 64, T 32 model: 3 steps compared with the oracle, one "
                         "timing round")
    ap.add_argument("--loss-steps", type=int, default=None,
                    help="steps compared with the oracle (default 5; --tiny: 3)")
    ap.add_argument("--loss-tol", type=float, default=0.05,
                    help="the largest loss difference allowed, as a fraction of how far the "
                         "oracle's loss moved over the compared steps")
    ap.add_argument("--repeats", type=int, default=10, help="wall_ms's repeats (gpu_gpt2's 10)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="wall_ms's rounds (default 5; --tiny: 1)")
    ap.add_argument("--dist-timeout", type=int, default=120, help="LT_DIST_TIMEOUT, seconds")
    ap.add_argument("--deadline", type=int, default=180,
                    help="seconds per run (three runs), then killed")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0,
                    help="DDP's bucket size in MB (every DDP run; default 25, PyTorch's)")
    ap.add_argument("--compile", action="store_true",
                    help="every run's step under lt.compile (no Python tracing on replays)")
    ap.add_argument("--peer", action="store_true",
                    help="also time the peer (bench/ddp_torch_worker.py): PyTorch's DDP then "
                         "torch.compile, bare on 1 GPU and on N")
    ap.add_argument("--reduce-modes", default="",
                    help="comma-separated LT_DDP_REDUCE values (flat, per_tensor, mixed, "
                         "bucket): the "
                         "N-rank run again under each")
    ap.add_argument("--variants", default="",
                    help='semicolon-separated environments, each "NAME=VALUE[,NAME=VALUE]" '
                         '(e.g. "NCCL_MAX_NCHANNELS=8;LT_DDP_REDUCE=bucket,NCCL_PROTO=LL128"): '
                         "the N-rank run again under each")
    ap.add_argument("--out", default=None, help="JSON (default bench/results/ddp_gpu_<date>.json)")
    # The ranks' own arguments (the launcher passes them).
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--global-batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--timed", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-ddp", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--peer-eager", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--peer-one-graph", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.loss_steps is None:
        args.loss_steps = 3 if args.tiny else 5
    if args.rounds is None:
        args.rounds = 1 if args.tiny else 5
    return args


def main(argv=None):
    args = parse(argv)
    if args.worker:
        return worker(args)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
