#!/usr/bin/env python3
"""Does an NCCL communicator in the process slow the launches of unrelated kernels? (issue 31)

tests/gpu/profile_ddp.py --ddp-first showed the bare GPT-2 step's CUDA graph, run after this
process made its NCCL communicator, with a 0.3-0.4 us gap before each of its ~930 kernels (idle
0.58 ms a step against 0.27 before). This measures that alone, with PyTorch only: a CUDA graph of
--kernels small kernels in a chain, replayed, per kernel in us, before and after
torch.distributed's NCCL communicator exists (a group of one rank; an all_reduce makes the
communicator). Run under other environments (--variants "A=1;B=2,C=3"), each in its own process,
to find the NCCL setting behind the gap.

Found on 2 H200s (thirty-third and thirty-fourth sessions, bench/README.md): the gap is not
NCCL's. A tiny PyTorch kernel run once on each of 3 new streams (--lt-code, no NCCL, no waits
between them) adds the same 0.18 us a kernel (1.24 -> 1.42) to every later graph in the process;
so does lazytensor's collective step, which runs work on its compute stream and on the
communicator's stream, and PyTorch's DDP would as well (pytorch/pytorch#161104 reports the same
step on H100). Made by a host-staged collective alone (--ours --barrier: copies only on the
communicator's stream), by NCCL through ctypes on one stream or two joined by events (--ctypes
[--nonblocking] [--cross-stream] [--all-gather]), or by PyTorch's communicator in place or out of
place, there is no gap; CUDA_DEVICE_MAX_CONNECTIONS (1, 2, 4, 32), NCCL_CGA_CLUSTER_SIZE,
NCCL_CTA_POLICY, LT_NCCL_STREAM_PRIORITY, NCCL_CUMEM_ENABLE=0, NCCL_MEM_SYNC_DOMAIN=0 and
LT_CUDA_GRAPHS=0 do not change it, and it stays after destroy_process_group. Overlapping
communication with compute needs a second stream, so the ~0.2 ms a GPT-2 step pays for it stays.

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

# one()'s switches: each an argparse flag (store_true, this help) that the parent passes on to
# its child processes.
SWITCHES = {
    "ours": "lazytensor's communicator (lt.distributed) instead of PyTorch's",
    "lt_only": "lazytensor's CUDA backend used, no communicator made",
    "out_of_place": "PyTorch's communicator: a reduce_scatter into another tensor, not an in-place "
                    "all_reduce (which NCCL may skip on one rank)",
    "no_collective": "with --ours: the group made, no collective run",
    "destroy_first": "measure 'after' once the group is destroyed",
    "barrier": "with --ours: the communicator made by dist.barrier() (host memory, no lazy graph) "
               "instead of an all_reduce on lazy:cuda:0",
    "ctypes": "NCCL called through ctypes, neither torch.distributed nor lazytensor",
    "nonblocking": "with --ctypes: made as lazytensor makes its communicator (a 2.18 config, "
                   "blocking 0)",
    "cross_stream": "with --ctypes: the all_reduce on a second blocking stream joined both ways "
                    "by events, as lazytensor's collective steps run",
    "copy_only": "with --ctypes: --cross-stream's pattern with a device copy, no NCCL",
    "all_gather": "with --ctypes: an all_gather of 8 bytes instead of the all_reduce",
    "side_stream": "replay the measured graph on a non-blocking stream of PyTorch's pool",
}


def ctypes_nccl(torch, nonblocking, cross_stream=False, all_gather=False):
    """NCCL called from here through ctypes (no torch.distributed, no lazytensor): a one-rank
    communicator on the current device and an out-of-place all_reduce on PyTorch's stream. With
    `nonblocking`, made as lazytensor makes its own (ncclCommInitRankConfig, a config of version
    2.18 with blocking 0, polled until it has joined). Returns a function that destroys it."""
    import ctypes
    lib = ctypes.CDLL("libnccl.so.2")  # torch loaded it first: the same library

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    class Config(ctypes.Structure):
        _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                    ("blocking", ctypes.c_int), ("cga", ctypes.c_int), ("min_ctas", ctypes.c_int),
                    ("max_ctas", ctypes.c_int), ("net_name", ctypes.c_char_p),
                    ("split_share", ctypes.c_int)]

    def ok(r, what):
        if r not in (0, 7):
            raise RuntimeError(f"{what}: ncclResult {r}")

    uid = UniqueId()
    ok(lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    comm = ctypes.c_void_p()
    if nonblocking:
        undef = -2147483648
        cfg = Config(ctypes.sizeof(Config), 0xcafebeef, 21800, 0, undef, undef, undef, None, undef)
        ok(lib.ncclCommInitRankConfig(ctypes.byref(comm), 1, uid, 0, ctypes.byref(cfg)),
           "ncclCommInitRankConfig")
        state = ctypes.c_int(7)
        while state.value == 7:
            ok(lib.ncclCommGetAsyncError(comm, ctypes.byref(state)), "ncclCommGetAsyncError")
            time.sleep(0.001)
    else:
        ok(lib.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0), "ncclCommInitRank")
    if cross_stream:
        cross_stream_call(torch, lambda src, dst, stream: ok(lib.ncclAllReduce(
            ctypes.c_void_p(src), ctypes.c_void_p(dst), ctypes.c_size_t(4), 7, 0, comm, stream),
            "ncclAllReduce"))
        return lambda: ok(lib.ncclCommDestroy(comm), "ncclCommDestroy")
    a = torch.ones(4, device="cuda")
    b = torch.empty(4, device="cuda")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    if all_gather:  # 8 bytes of int8, as lazytensor's check that every rank has the same graph
        ok(lib.ncclAllGather(ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()),
                             ctypes.c_size_t(8), 0, comm, stream), "ncclAllGather")
        torch.cuda.synchronize()
        return lambda: ok(lib.ncclCommDestroy(comm), "ncclCommDestroy")
    ok(lib.ncclAllReduce(ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()),
                         ctypes.c_size_t(4), 7, 0, comm, stream), "ncclAllReduce")
    torch.cuda.synchronize()
    return lambda: ok(lib.ncclCommDestroy(comm), "ncclCommDestroy")


def cross_stream_call(torch, comm_all_reduce):
    """The pattern of lazytensor's collective step, with the driver API through ctypes: two
    blocking streams (CU_STREAM_DEFAULT, as CudaDevice makes them), an event from the first
    joined by the second, the reduction (comm_all_reduce(src, dst, stream), or a device copy when
    None) on the second, and the first joining it back."""
    import ctypes
    cuda = ctypes.CDLL("libcuda.so.1")

    def ok(r, what):
        if r != 0:
            raise RuntimeError(f"{what}: CUresult {r}")

    a_s, b_s, e1, e2 = (ctypes.c_void_p() for _ in range(4))
    ok(cuda.cuStreamCreate(ctypes.byref(a_s), 0), "cuStreamCreate")
    ok(cuda.cuStreamCreate(ctypes.byref(b_s), 0), "cuStreamCreate")
    ok(cuda.cuEventCreate(ctypes.byref(e1), 2), "cuEventCreate")
    ok(cuda.cuEventCreate(ctypes.byref(e2), 2), "cuEventCreate")
    a = torch.ones(4, device="cuda")
    b = torch.empty(4, device="cuda")
    torch.cuda.synchronize()
    ok(cuda.cuEventRecord(e1, a_s), "cuEventRecord")
    ok(cuda.cuStreamWaitEvent(b_s, e1, 0), "cuStreamWaitEvent")
    if comm_all_reduce:
        comm_all_reduce(a.data_ptr(), b.data_ptr(), b_s)
    else:
        ok(cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(b.data_ptr()), ctypes.c_uint64(a.data_ptr()),
                                     ctypes.c_size_t(16), b_s), "cuMemcpyDtoDAsync")
    ok(cuda.cuEventRecord(e2, b_s), "cuEventRecord")
    ok(cuda.cuStreamWaitEvent(a_s, e2, 0), "cuStreamWaitEvent")
    ok(cuda.cuStreamSynchronize(a_s), "cuStreamSynchronize")



def graph_us_per_kernel(torch, kernels, replays, side_stream=False):
    if side_stream:  # replayed on a stream of PyTorch's pool (non-blocking), not the legacy one
        with torch.cuda.stream(torch.cuda.Stream()):
            return graph_us_per_kernel(torch, kernels, replays)
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
    before = graph_us_per_kernel(torch, args.kernels, args.replays, args.side_stream)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # lazytensor's group of one rank reads torchrun's variables.
    one_rank = dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port))
    destroy = None  # ends the communicator (or group) made below, if one was
    if args.ctypes:
        if args.copy_only:
            cross_stream_call(torch, None)
        else:
            destroy = ctypes_nccl(torch, args.nonblocking, args.cross_stream, args.all_gather)
    elif args.lt_code:  # any lazytensor code (lt, np, dist, torch in scope), e.g. to bisect --ours
        import numpy as np
        import lazytensor as lt
        import lazytensor.distributed as dist
        os.environ.update(one_rank)
        exec(args.lt_code, {"lt": lt, "np": np, "dist": dist, "torch": torch})
        if dist.is_initialized():
            destroy = dist.destroy_process_group
    elif args.lt_only:  # lazytensor's CUDA backend alone, no communicator
        import lazytensor as lt
        t = lt.ones(4, device="lazy:cuda:0") * 2
        t.numpy()
    elif args.ours:  # lazytensor's communicator (dlopened NCCL, its watchdog) instead of PyTorch's
        import lazytensor as lt
        import lazytensor.distributed as dist
        os.environ.update(one_rank)
        dist.init_process_group("nccl")
        destroy = dist.destroy_process_group
        if args.barrier:  # the communicator made by a host-staged collective, no lazy graph
            dist.barrier()
        elif not args.no_collective:  # the first collective makes the communicator
            t = lt.ones(4, device="lazy:cuda:0")
            dist.all_reduce(t)
            t.numpy()
    else:
        import torch.distributed as dist
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=1, device_id=torch.device("cuda:0"))
        destroy = dist.destroy_process_group
        t = torch.ones(4, device="cuda")
        if args.out_of_place:
            # Out of place, so that NCCL launches its one-rank reduction kernel as ours does (an
            # in-place all_reduce of one rank may launch nothing, a one-rank all_gather is a copy).
            out = torch.empty(4, device="cuda")
            dist.reduce_scatter_tensor(out, t)
        else:
            dist.all_reduce(t)
    torch.cuda.synchronize()
    if destroy and args.destroy_first:  # what remains once the group (its threads, NCCL) is gone
        destroy()
        destroy = None
    after = graph_us_per_kernel(torch, args.kernels, args.replays, args.side_stream)
    if destroy:
        destroy()
    print(json.dumps({"before_us": before, "after_us": after}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=2000)
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--variants", default="")
    for name, text in SWITCHES.items():
        ap.add_argument(f"--{name.replace('_', '-')}", action="store_true", help=text)
    ap.add_argument("--lt-code", default="",
                    help="run this Python (lt, np, dist and torch in scope) between the two "
                         "measurements, e.g. to find which part of --ours leaves the gap")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return one(args)
    runs = [("default", {})] + environments(args.variants)
    # The child measures under the same switches (those of one()).
    child = [sys.executable, __file__, "--one", "--kernels", str(args.kernels), "--replays",
             str(args.replays)] + [f"--{name.replace('_', '-')}" for name in SWITCHES
                                   if getattr(args, name)]
    if args.lt_code:
        child += ["--lt-code", args.lt_code]
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
