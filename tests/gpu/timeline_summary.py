#!/usr/bin/env python3
"""Reads a GPU timeline (tests/gpu/profile_ddp.py --timeline: one kernel a line, "start_us end_us
dur_us stream name") and says where each step's time goes: its span, how long the GPU was busy
(the union of all kernels) and idle, NCCL's kernels alone and beside others, and the longest idle
gaps with the kernels around them. A step starts where the file's first kernel appears again.

  python3 tests/gpu/timeline_summary.py ddp_timeline_ddp.txt [--gaps 8]

No GPU needed: it reads what a GPU run wrote.
"""
import argparse
import sys


def read(path):
    """The kernels as (start, end, stream, name), in start order."""
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split(None, 4)
            if len(parts) < 5 or parts[0] == "start_us":
                continue
            name = parts[4].split("  [gap")[0].strip()
            rows.append((float(parts[0]), float(parts[1]), parts[3], name))
    rows.sort()
    return rows


def steps_of(rows):
    """The rows split where the first kernel's name comes back."""
    if not rows:
        return []
    first = rows[0][3]
    steps, cur = [], []
    for r in rows:
        if r[3] == first and cur:
            steps.append(cur)
            cur = []
        cur.append(r)
    steps.append(cur)
    return steps


def periods(steps):
    """Start-to-start times of consecutive steps (us): against a step's span, the GPU's idle
    time between steps (the host not ahead, or ranks waiting for one another)."""
    return [b[0][0] - a[0][0] for a, b in zip(steps, steps[1:])]


def union(intervals):
    """The intervals merged: a list of disjoint (start, end)."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def length(intervals):
    return sum(e - s for s, e in intervals)


def overlap(a, b):
    """Total length of the intersection of two disjoint interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def is_nccl(name):
    """NCCL's kernels: ncclDevKernel_* and, on a group of one rank, its `onerank` copy."""
    return "nccl" in name.lower() or "onerank" in name


def summarize(step, gaps=8):
    """Lines describing one step."""
    t0, t1 = step[0][0], max(r[1] for r in step)
    every = union((s, e) for s, e, _, _ in step)
    nccl = union((s, e) for s, e, _, n in step if is_nccl(n))
    other = union((s, e) for s, e, _, n in step if not is_nccl(n))
    busy, span = length(every), t1 - t0
    lines = [f"span {span / 1e3:.3f} ms, GPU busy {busy / 1e3:.3f}, idle {(span - busy) / 1e3:.3f}; "
             f"{len(step)} kernels"]
    if nccl:
        beside = overlap(nccl, other)
        lines.append(f"NCCL: {sum(1 for r in step if is_nccl(r[3]))} kernels, "
                     f"{length(nccl) / 1e3:.3f} ms, of which {beside / 1e3:.3f} beside other "
                     f"kernels and {(length(nccl) - beside) / 1e3:.3f} alone")
        last_other = max(e for s, e, _, n in step if not is_nccl(n))
        last_nccl = max(e for s, e, _, n in step if is_nccl(n))
        lines.append(f"the last NCCL kernel ends {(t1 - last_nccl) / 1e3:.3f} ms before the step "
                     f"does; the last other kernel ends at {(last_other - t0) / 1e3:.3f} ms")
    holes = [(every[k + 1][0] - every[k][1], every[k][1], every[k + 1][0])
             for k in range(len(every) - 1)]
    classes = [(0, 5), (5, 20), (20, 100), (100, float("inf"))]
    lines.append("idle gaps by size: " + ", ".join(
        f"{lo:g}-{hi:g} us: {sum(1 for h in holes if lo <= h[0] < hi)} "
        f"({sum(h[0] for h in holes if lo <= h[0] < hi) / 1e3:.3f} ms)" for lo, hi in classes))
    holes.sort(reverse=True)
    for size, s, e in holes[:gaps]:
        before = max((r for r in step if r[1] <= s + 1e-6), key=lambda r: r[1])
        after = min((r for r in step if r[0] >= e - 1e-6), key=lambda r: r[0])
        lines.append(f"  idle {size:7.1f} us at {(s - t0) / 1e3:7.3f} ms: after {before[3][:50]} "
                     f"(stream {before[2]}), before {after[3][:50]} (stream {after[2]})")
    return lines


def report(rows, gaps=8):
    """The whole reading, as lines: the steps' start-to-start times, then each step's summary."""
    steps = steps_of(rows)
    lines = []
    if len(steps) > 1:
        lines.append("start to start, ms: " + " ".join(f"{p / 1e3:.3f}" for p in periods(steps)))
    for i, step in enumerate(steps):
        lines.append(f"step {i}:")
        lines += ["  " + line for line in summarize(step, gaps)]
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("timeline")
    ap.add_argument("--gaps", type=int, default=8, help="idle gaps listed per step")
    args = ap.parse_args(argv)
    rows = read(args.timeline)
    if not rows:
        print(f"{args.timeline}: no kernels")
        return 1
    for line in report(rows, args.gaps):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
