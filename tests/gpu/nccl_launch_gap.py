#!/usr/bin/env python3
"""Does an NCCL communicator in the process slow the launches of unrelated kernels? (issue 31)

tests/gpu/profile_ddp.py --ddp-first showed the bare GPT-2 step's CUDA graph, run after this
process made its NCCL communicator, with a 0.3-0.4 us gap before each of its ~930 kernels (idle
0.58 ms a step against 0.27 before). This measures that alone, with PyTorch only: a CUDA graph of
--kernels small kernels in a chain, replayed, per kernel in us, before and after
torch.distributed's NCCL communicator exists (a group of one rank; an all_reduce makes the
communicator). Run under other environments (--variants "A=1;B=2,C=3"), each in its own process,
to find the NCCL setting behind the gap.

Found on 2 H200s (thirty-third session, bench/README.md): PyTorch's own communicator changes
nothing (1.23 us a kernel before and after), lazytensor's adds 0.15-0.20 us a kernel (--ours:
1.23 -> 1.40), and that stays after destroy_process_group (--destroy-first). The group made
without a collective (--no-collective, so no communicator) and lazytensor's CUDA backend alone
(--lt-only) change nothing; NCCL_CUMEM_ENABLE=0, NCCL_MEM_SYNC_DOMAIN=0, LT_CUDA_GRAPHS=0 and a
blocking communicator do not remove it. What lazytensor's communicator does differently is not
yet known; one difference to test first: PyTorch's in-place all_reduce of one rank may launch no
NCCL kernel at all, where ours (out of place) does (--out-of-place runs a reduce_scatter instead).

  PYTHONPATH=build-gpu/python python3 tests/gpu/nccl_launch_gap.py [--ours] [--variants "NCCL_CUMEM_ENABLE=0;NCCL_MEM_SYNC_DOMAIN=0"]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from ddp_gpu import environments  # noqa: E402

# one()'s switches, each an argparse flag the parent passes on to its child processes.
SWITCHES = ("ours", "lt_only", "out_of_place", "no_collective", "destroy_first")


def graph_us_per_kernel(torch, kernels, replays):
    x = torch.randn(1 << 18, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.mul_(1.0000001)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(kernels):
            x.mul_(1.0000001)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(replays):
            g.replay()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / (replays * kernels) * 1e6)
    return best


def one(args):
    import torch
    before = graph_us_per_kernel(torch, args.kernels, args.replays)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    if args.lt_only:  # lazytensor's CUDA backend alone, no communicator
        import lazytensor as lt
        t = lt.ones(4, device="lazy:cuda:0") * 2
        t.numpy()
        dist = None
    elif args.ours:  # lazytensor's communicator (dlopened NCCL, its watchdog) instead of PyTorch's
        import lazytensor as lt
        import lazytensor.distributed as dist
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(port))
        dist.init_process_group("nccl")
        if not args.no_collective:  # the first collective makes the communicator
            t = lt.ones(4, device="lazy:cuda:0")
            dist.all_reduce(t)
            t.numpy()
    else:
        import torch.distributed as dist
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=1, device_id=torch.device("cuda:0"))
        t = torch.ones(4, device="cuda")
        if args.out_of_place:
            # Out of place, so that NCCL launches its one-rank reduction kernel as ours does (an
            # in-place all_reduce of one rank may launch nothing, a one-rank all_gather is a copy).
            out = torch.empty(4, device="cuda")
            dist.reduce_scatter_tensor(out, t)
        else:
            dist.all_reduce(t)
    torch.cuda.synchronize()
    if dist and args.destroy_first:  # what remains once the group (its threads, NCCL) is gone
        dist.destroy_process_group()
        dist = None
    after = graph_us_per_kernel(torch, args.kernels, args.replays)
    if dist:
        dist.destroy_process_group()
    print(json.dumps({"before_us": before, "after_us": after}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=2000)
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--variants", default="")
    ap.add_argument("--ours", action="store_true",
                    help="lazytensor's communicator (lt.distributed) instead of PyTorch's")
    ap.add_argument("--lt-only", action="store_true",
                    help="lazytensor's CUDA backend used, no communicator made")
    ap.add_argument("--out-of-place", action="store_true",
                    help="PyTorch's communicator: a reduce_scatter into another tensor, not an "
                         "in-place all_reduce (which NCCL may skip on one rank)")
    ap.add_argument("--no-collective", action="store_true",
                    help="with --ours: the group made, no collective run")
    ap.add_argument("--destroy-first", action="store_true",
                    help="measure 'after' once the group is destroyed")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return one(args)
    runs = [("default", {})] + environments(args.variants)
    # The child measures under the same switches (those of one()).
    child = [sys.executable, __file__, "--one", "--kernels", str(args.kernels), "--replays",
             str(args.replays)] + [f"--{name.replace('_', '-')}" for name in SWITCHES
                                   if getattr(args, name)]
    print(f"a CUDA graph of {args.kernels} chained small kernels, us per kernel (best of 5 x "
          f"{args.replays} replays), before and after an NCCL communicator exists")
    failed = 0
    for label, env in runs:
        r = subprocess.run(child, env={**os.environ, **env}, capture_output=True, text=True,
                           timeout=120)
        try:
            d = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"  {label:40s} before {d['before_us']:.3f}  after {d['after_us']:.3f}  "
                  f"(+{d['after_us'] - d['before_us']:.3f})", flush=True)
        except (ValueError, IndexError, KeyError):
            print(f"  {label:40s} FAILED (exit {r.returncode}): {r.stderr.strip()[-400:]}")
            failed += 1
    return 1 if failed else 0  # run.sh's gap stage records a failed measurement as FAIL


if __name__ == "__main__":
    sys.exit(main())
