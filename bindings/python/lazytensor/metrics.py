"""Process-wide counters and the description of the last executed graph.

    counters()         traced_ops, syncs, graph_compiles, graph_cache_hits, disk_cache_hits,
                       kernels_compiled, kernel_launches, fallbacks
    syncs_by_reason()  mark_step, item, numpy, print, to_cpu, tolist, sync, eager, control_flow
    last_graph()       hash, nodes, kernels, cache ("memory" | "disk" | "compiled"), compile_ms,
                       run_ms, inputs, outputs, backend, grouping
    timings()          per phase (hash, lower, compile, run, transfer): count, total and percentiles
    report()           all of the above as readable text
    reset()            zeroes the counters and forgets the last graph
"""
from . import _C

__all__ = ["counters", "syncs_by_reason", "last_graph", "timings", "report", "reset"]


def counters():
    """Counter name -> value (a fresh dict)."""
    return dict(_C.metrics.counters())


def syncs_by_reason():
    """Sync reason -> number of syncs for that reason (a fresh dict)."""
    return dict(_C.metrics.syncs_by_reason())


def last_graph():
    """The last graph that ran: hash, nodes, kernels, cache, compile_ms, run_ms, inputs, outputs,
    backend (and grouping, the kernel grouping shown by LT_DEBUG=2)."""
    return _C.metrics.last_graph()


def timings():
    """Phase name -> {count, total_ms, p50_ms, p90_ms, p99_ms, max_ms} over recent syncs. With
    LT_PROFILE=trace.json the same intervals are written as Chrome/Perfetto trace events."""
    return dict(_C.metrics.timings())


def report():
    """A readable summary of the counters, sync reasons and the last graph."""
    return _C.metrics.report()


def reset():
    """Zeroes every counter and forgets the last graph."""
    _C.metrics.reset()
