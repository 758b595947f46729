"""Debugging tools (runtime/debug.h): readable IR of pending tensors, the kernels of the last graph,
trace dumps with data, and replay of a dump on any backend with output checks.

    print(lt.debug.ir_text(loss))                     # the pending IR behind `loss`
    lt.debug.dump("step.json", loss)                  # trace + inputs/outputs beside it (a sync)
    lt.debug.replay("step.json", backend="reference") # -> {"ok": True, "max_abs_error": ..., ...}
"""
import os

from . import _C

__all__ = ["ir_text", "ir_dot", "kernel_sources", "dump", "replay"]


def _tensors(tensors, fn):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise ValueError(f"{fn}(): expected at least one tensor")
    for t in tensors:
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"{fn}(): expected Tensors, got {type(t).__name__}")
    return list(tensors)


def ir_text(*tensors):
    """The IR that computes these tensors, one node per line (no sync)."""
    return _C.debug.ir_text(_tensors(tensors, "ir_text"))


def ir_dot(*tensors):
    """The same IR as a Graphviz digraph (no sync)."""
    return _C.debug.ir_dot(_tensors(tensors, "ir_dot"))


def kernel_sources():
    """The generated kernel sources of the last executed graph (a list of strings)."""
    return list(_C.debug.kernel_sources())


def dump(path, *tensors, data=True):
    """Writes the trace of these tensors to `path` (JSON) and, with data=True, their inputs and
    outputs beside it (this computes them: a sync). Returns the graph key."""
    return _C.debug.dump(os.fspath(path), _tensors(tensors, "dump"), bool(data))


def replay(path, backend="reference", check=True, tol=1e-5):
    """Re-executes a dump on `backend` ("reference", "cpu", "cuda"); with check=True compares the
    outputs with the recorded ones. Returns a dict: ok, checked, backend, outputs, max_abs_error,
    max_rel_error, message, results (the output tensors)."""
    return _C.debug.replay(os.fspath(path), backend, bool(check), float(tol))
