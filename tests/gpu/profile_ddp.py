#!/usr/bin/env python3
"""Where DistributedDataParallel's cost goes on one GPU (issue 31): bench/ddp_gpu.py's GPT-2 124M
bf16 step, the bare model against the model wrapped in DDP over a group of one rank (this process,
NCCL), each with its per-kernel GPU time (torch.profiler sees our launches), its GPU busy time and
idle gaps, and lazytensor's host breakdown (tests/gpu/profile_gpt.py's tables); each variant's
kernel grouping goes to DIR/ddp_grouping_{bare,ddp}.txt (kernel names to IR nodes).

  PYTHONPATH=build-gpu/python python3 tests/gpu/profile_ddp.py --out DIR [--top 30]

Under torchrun (RANK etc. set) each rank profiles its own GPU and rank 0 writes the files: the DDP
variant is then the real data-parallel step, with NCCL's kernels in the table (their time beyond
"GPU busy"'s union is what overlapped):

  PYTHONPATH=build-gpu/python python3 -m torch.distributed.run --nproc-per-node 2 \
      tests/gpu/profile_ddp.py --out DIR

--compile profiles both steps under lt.compile (no Python tracing: the host keeps ahead, so the
timeline's start-to-start times are the GPU's own period); --order chooses which steps run and in
what order (ddp,bare: the bare step in a process whose NCCL communicator exists). --timeline adds
each step's kernels in time order with their streams and tests/gpu/timeline_summary.py's reading.
"""
import argparse
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import torch  # noqa: E402

import lazytensor as lt  # noqa: E402
import lazytensor.distributed as dist  # noqa: E402
from ddp_gpu import FULL, RANK_ENV, ddp_train_step, global_batch, initial_state  # noqa: E402
from profile_gpt import host_breakdown, kernel_table, profiled  # noqa: E402


def write_timeline(prof, path):
    """Every GPU kernel and copy of the profiled steps, in start order: start and end (us from
    the first), duration, stream and name; a blank line marks a gap of over 20 us on a stream.
    From the Chrome trace, whose GPU events carry their stream as "tid"."""
    import json
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        prof.export_chrome_trace(tmp.name)
        with open(tmp.name) as f:
            trace = json.load(f)
    gpu = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"
           and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    gpu.sort(key=lambda e: e["ts"])
    if not gpu:
        return
    t0 = gpu[0]["ts"]
    last_end = {}
    with open(path, "w") as f:
        f.write("start_us end_us dur_us stream name\n")
        for e in gpu:
            s, d, tid = e["ts"] - t0, e.get("dur", 0), e.get("tid")
            gap = s - last_end.get(tid, s)
            mark = f"  [gap {gap:.0f} us on stream {tid}]" if gap > 20 else ""
            f.write(f"{s:10.1f} {s + d:10.1f} {d:8.1f} {tid} {e['name'][:90]}{mark}\n")
            last_end[tid] = s + d


def timeline_report(path):
    """tests/gpu/timeline_summary.py's reading of a written timeline, one block per step."""
    import timeline_summary
    lines = timeline_summary.report(timeline_summary.read(path), gaps=4)
    return "\n".join([f"  timeline {os.path.basename(path)}:"] + ["    " + line for line in lines])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--compile", action="store_true",
                    help="both steps under lt.compile (replayed without Python tracing)")
    ap.add_argument("--order", default="bare,ddp",
                    help="the steps profiled, in order, each of bare and ddp (e.g. ddp,bare: the "
                         "bare step in a process whose NCCL communicator exists; bare,bare: what "
                         "a second profiling session alone changes)")
    ap.add_argument("--timeline", action="store_true",
                    help="also write DIR/ddp_timeline.txt: the DDP step's GPU kernels in time "
                         "order with their streams (rank 0)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.environ.update(RANK_ENV)
    if "RANK" not in os.environ:  # alone: a group of one rank
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(port))
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # profile_gpt's synchronize: this GPU
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = f"lazy:cuda:{os.environ.get('LOCAL_RANK', '0')}"
    idx, tgt = global_batch(FULL, 8)
    state = initial_state(FULL)
    report = []
    order = args.order.split(",")
    if not order or any(w not in ("bare", "ddp") for w in order):
        ap.error(f"--order: a comma-separated list of bare and ddp, not {args.order!r}")
    for n, wrap in enumerate(w == "ddp" for w in order):
        step, _ = ddp_train_step(lt, FULL, state, idx, tgt, device, wrap=wrap,
                                 compiled=args.compile)
        c0 = lt.metrics.counters()
        # Every rank synchronized and at the barrier before the profiled steps (profiled's align).
        prof, wall = profiled(step, args.steps,
                              align=lambda: (lt.cuda.synchronize(device), dist.barrier()))
        c1 = lt.metrics.counters()
        g = lt.metrics.last_graph()
        print(f"{'ddp' if wrap else 'bare'}: cuda_graph_launches "
              f"{c1['cuda_graph_launches'] - c0['cuda_graph_launches']}, kernel_launches "
              f"{c1['kernel_launches'] - c0['kernel_launches']} over {2 * args.steps + 3} steps",
              flush=True)
        name = f"DDP over {world} rank(s)" if wrap else "bare model"
        kind = order[n] if order.count(order[n]) == 1 else f"{order[n]}{n}"  # file names
        report.append(f"== {name}: wall {wall:.3f} ms/step, {g['kernels']} kernels, "
                      f"{g['nodes']} nodes\n{kernel_table(prof, args.steps, args.top)}\n"
                      + host_breakdown(step, 5))
        if rank:
            continue
        print(report[-1], flush=True)
        with open(os.path.join(args.out, f"ddp_grouping_{kind}.txt"), "w") as f:
            f.write(g.get("grouping", ""))
        if args.timeline:
            path = os.path.join(args.out, f"ddp_timeline_{kind}.txt")
            write_timeline(prof, path)
            report.append(timeline_report(path))
    if rank == 0:
        with open(os.path.join(args.out, "ddp_profile.txt"), "w") as f:
            f.write("\n".join(report) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
