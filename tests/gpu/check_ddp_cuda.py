"""Data parallel on GPUs: lt.distributed over NCCL with each rank on its own GPU
(lazy:cuda:{local_rank}), checked by the CPU tests' own rank scripts (tests/python/
distributed_scripts/, which take the device and backend from LT_TEST_DEVICE and LT_TEST_BACKEND)
and by examples/python/train_ddp.py, each launched here on N ranks with torchrun:

- collectives: all_reduce sum/avg/max in float32, float64, float16, bfloat16, int64 and int32,
  broadcast and all_gather against numpy, and a collective inside a graph;
- data_parallel, ddp, ddp_compiled: a small MLP trained on slices of a global batch (all_reduce by
  hand, then DistributedDataParallel, then DDP with the whole step under lt.compile) equals one
  float64 PyTorch process on the whole batch (1e-5);
- dead_rank: a rank that dies makes the others raise an error naming the timeout, within it;
- mismatch: ranks that sync different graphs raise "collectives differ between ranks", before
  the timeout;
- cpp_train_ddp: examples/cpp/train_ddp.cpp (the C++ API's DistributedDataParallel) reaches 90%
  held-out accuracy with equal weights on every rank;
- train_ddp: the character-level GPT example trains (--steps 20, mean loss of the last 10 steps
  below 3.7; it starts at ln 65 = 4.17, and reaches 3.35 on 2 CPU ranks) with equal weights on
  every rank.

Prints one PASS/FAIL line per check (a failure with the end of its ranks' output); exit 0 only
when every check passed.

  PYTHONPATH=build-gpu/python python3 tests/gpu/check_ddp_cuda.py [--nproc N]
  # the launcher itself, on the CPU over Gloo:
  PYTHONPATH=build/python .venv/bin/python tests/gpu/check_ddp_cuda.py \\
      --device-template lazy --backend gloo --nproc 2
"""
import argparse
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(ROOT, "tests", "python", "distributed_scripts")
EXAMPLE = os.path.join(ROOT, "examples", "python", "train_ddp.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))
# The launcher bench/ddp_gpu.py uses: torchrun in a session of its own, killed at a deadline, and
# the environment every rank gets (NVLink multicast off: mandatory on the shared GPU hosts).
from ddp_gpu import RANK_ENV, default_nproc, gpus_missing, rank_env, torchrun  # noqa: E402

# Seconds a failing rank may take beyond LT_DIST_TIMEOUT: the sync compiles its graph before the
# collective waits, and a wait notices its timeout by polling.
SLACK_S = 10
RAISED = re.compile(r"^raised (\d+): (.*) \[after ([0-9.]+) s\]$", re.M)
# torchrun's own log lines (its agent's warnings and, after a rank failed, its traceback).
AGENT_LOG = re.compile(r"^[IWE]\d{4} [0-9:.]+ +\d+ .*torch/distributed/", re.M)


def run_script(args, nproc, script, **extra_env):
    """One of the CPU tests' rank scripts on nproc ranks of args' device and backend."""
    env = rank_env(args.timeout, LT_TEST_DEVICE=args.device_template, LT_TEST_BACKEND=args.backend,
                   **extra_env)
    return torchrun([os.path.join(SCRIPTS, script)], nproc, env, args.deadline)


def exit_text(rc, args):
    return f"exit {rc}" if rc is not None else f"killed at the {args.deadline} s deadline"


def ranks_output(out):
    """The end of the ranks' own output: what precedes torchrun's log of their failure, whose
    traceback would otherwise fill a failure's tail."""
    m = AGENT_LOG.search(out)
    return out[:m.start()] if m and out[:m.start()].strip() else out


def raised_by_rank(out):
    """rank -> (the error's first line, seconds from the call to the error), from must_raise."""
    return {int(r): (msg, float(s)) for r, msg, s in RAISED.findall(out)}


def every_rank_ok(script, **extra_env):
    """A check that passes when the script exits 0 and every rank printed "ok <rank>"."""
    def check(args, nproc):
        rc, out = run_script(args, nproc, script, **extra_env)
        done = {int(r) for r in re.findall(r"^ok (\d+)$", out, re.M)}
        missing = sorted(set(range(nproc)) - done)
        detail = exit_text(rc, args) + (f", no 'ok' from rank(s) {missing}" if missing else "")
        return rc == 0 and not missing, detail, out
    return check


def dead_rank(args, nproc):
    """The last rank dies after a barrier; every other one must raise, naming the timeout (the
    contract of lt.distributed's docstring), at most SLACK_S after LT_DIST_TIMEOUT, then leave the
    group and compute on its device again ("alive <rank>")."""
    _, out = run_script(args, nproc, "dead_rank.py")
    raised, problems = raised_by_rank(out), []
    for r in range(nproc - 1):
        if r not in raised:
            problems.append(f"rank {r} did not raise")
            continue
        msg, s = raised[r]
        if not re.search(r"timeout|timed out", msg, re.I):
            problems.append(f"rank {r}'s error does not name the timeout: {msg}")
        if s > args.timeout + SLACK_S:
            problems.append(f"rank {r} raised after {s} s (LT_DIST_TIMEOUT {args.timeout} s)")
        if f"alive {r}" not in out:
            problems.append(f"rank {r} did not keep working after the error (destroy_process_group "
                            "and a new computation on its device)")
    if "no error" in out:
        problems.append("a rank got no error")
    if problems:
        return False, "; ".join(problems), out
    slowest = max(s for _, s in raised.values())
    return True, f"raised within {slowest:.1f} s (timeout {args.timeout} s): {raised[0][0]}", out


def mismatch(args, nproc):
    """Rank 0 syncs an all_reduce of 5 elements, the others of 6: every rank must raise
    "collectives differ between ranks", found by comparing, not by waiting out the timeout."""
    _, out = run_script(args, nproc, "mismatch.py")
    raised, problems = raised_by_rank(out), []
    for r in range(nproc):
        msg, s = raised.get(r, ("(did not raise)", 0.0))
        if not msg.startswith("collectives differ between ranks"):
            problems.append(f"rank {r}: {msg}")
        elif s >= args.timeout:
            problems.append(f"rank {r} raised after {s} s, the timeout ({args.timeout} s)")
    if problems:
        return False, "; ".join(problems), out
    return True, f"every rank raised within {max(s for _, s in raised.values()):.1f} s", out


def train_ddp(args, nproc):
    """examples/python/train_ddp.py on args' device (its --device takes "{local_rank}" too).
    LT_DIST_TIMEOUT 60 at least, as tests/python/test_distributed.py gives it: the ranks compile
    the model's graphs side by side, and one may reach a collective well before the others."""
    env = rank_env(max(args.timeout, 60))
    rc, out = torchrun([EXAMPLE, "--device", args.device_template, "--backend", args.backend,
                        "--steps", "20", "--max-loss", "3.7"], nproc, env, args.deadline)
    summary = re.search(r"^\d+ ranks, .*$", out, re.M)
    ok = rc == 0 and "weights equal on every rank: True" in out
    detail = f"{exit_text(rc, args)}: " + (summary.group(0) if summary else "no summary line")
    return ok, detail, out


def cpp_train_ddp(args, nproc):
    """examples/cpp/train_ddp.cpp (lt::nn::DistributedDataParallel from C++) under torchrun
    --no-python, on args' device: its MLP must reach 90% held-out accuracy with equal weights on
    every rank. The binary comes from the GPU build (build-gpu/bin), else build/bin."""
    exe = next((p for p in (os.path.join(ROOT, d, "bin", "train_ddp") for d in ("build-gpu", "build"))
                if os.path.exists(p)), None)
    if exe is None:
        return False, "examples/cpp/train_ddp.cpp is not built (build-gpu/bin/train_ddp)", ""
    env = rank_env(max(args.timeout, 60))
    rc, out = torchrun(["--no-python", exe, "--device", args.device_template, "--steps", "100"],
                       nproc, env, args.deadline)
    summary = re.search(r"^\d+ ranks on .*$", out, re.M)
    ok = rc == 0 and "weights equal on every rank: true" in out
    detail = f"{exit_text(rc, args)}: " + (summary.group(0) if summary else "no summary line")
    return ok, detail, out


CHECKS = {
    "collectives": every_rank_ok("collectives.py"),
    "data_parallel": every_rank_ok("data_parallel.py"),
    "ddp": every_rank_ok("ddp.py"),
    "ddp_compiled": every_rank_ok("ddp_compiled.py"),
    # DDP's other ways to average a bucket (runtime/distributed.h): bucket is NCCL's group call.
    "ddp_mixed": every_rank_ok("ddp.py", LT_DDP_REDUCE="mixed"),
    "ddp_bucket": every_rank_ok("ddp.py", LT_DDP_REDUCE="bucket"),
    "ddp_bucket_compiled": every_rank_ok("ddp_compiled.py", LT_DDP_REDUCE="bucket"),
    # The collectives' kernels at the greatest stream priority (CUDA graph node priorities too).
    "ddp_bucket_priority": every_rank_ok("ddp_compiled.py", LT_DDP_REDUCE="bucket",
                                         LT_NCCL_STREAM_PRIORITY="high"),
    # The step's graph replayed as linear segments between its collectives
    # (LT_CUDA_GRAPH_SEGMENTS, cuda_executable.h's launch_segments), traced and compiled.
    "ddp_segments": every_rank_ok("ddp.py", LT_CUDA_GRAPH_SEGMENTS="1"),
    # Without CUDA graphs: every kernel launched alone between the NCCL calls (launch_segments
    # without capture, the path every step takes before its graph is captured).
    "ddp_no_graphs": every_rank_ok("ddp.py", LT_CUDA_GRAPHS="0"),
    "ddp_segments_compiled": every_rank_ok("ddp_compiled.py", LT_CUDA_GRAPH_SEGMENTS="1"),
    "dead_rank": dead_rank,
    "mismatch": mismatch,
    "train_ddp": train_ddp,
    "cpp_train_ddp": cpp_train_ddp,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", type=int, default=0,
                    help="ranks (default: every visible GPU, at least 2; 2 off the GPU)")
    ap.add_argument("--device-template", default="lazy:cuda:{local_rank}",
                    help='each rank\'s device, "{local_rank}" its LOCAL_RANK')
    ap.add_argument("--backend", default="nccl")
    ap.add_argument("--timeout", type=int, default=20, help="LT_DIST_TIMEOUT, seconds")
    ap.add_argument("--deadline", type=int, default=150, help="seconds per check, then killed")
    ap.add_argument("--only", default="", help=f"comma-separated, of: {', '.join(CHECKS)}")
    args = ap.parse_args(argv)
    os.environ.update(RANK_ENV)  # this process and torchrun's agents too
    nproc = args.nproc or default_nproc(args.device_template)
    names = [n for n in args.only.split(",") if n] or list(CHECKS)
    unknown = set(names) - set(CHECKS)
    if unknown:
        ap.error(f"unknown checks {sorted(unknown)}")
    why = gpus_missing(args.device_template, nproc)
    if why:
        print(f"FAIL all checks: {why}", flush=True)
        return 1
    print(f"{nproc} ranks on {args.device_template} over {args.backend}, LT_DIST_TIMEOUT "
          f"{args.timeout} s", flush=True)
    failed = []
    for name in names:
        t0 = time.perf_counter()
        ok, detail, out = CHECKS[name](args, nproc)
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail} ({time.perf_counter() - t0:.1f} s)",
              flush=True)
        if not ok:
            failed.append(name)
            tail = ranks_output(out).strip().splitlines()[-60:]
            print("\n".join("    | " + line for line in tail), flush=True)
    print(f"{len(failed)} of {len(names)} failed" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
