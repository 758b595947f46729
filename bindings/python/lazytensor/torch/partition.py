"""Graphs with ops lazytensor does not run: split, so those ops run in PyTorch and the rest in
lazytensor (torch.fx's CapabilityBasedPartitioner draws the boundaries). Every op left to PyTorch
is counted in `lt.metrics` `fallbacks` each time it runs, and LT_DEBUG=1 names it once."""
import collections
import copy
import operator

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .. import _C
from .aten_table import builder
from .graph_program import LazyGraph, Unsupported, debug_enabled
from .interop import DTYPES

_named = set()  # ops LT_DEBUG has already named
# op name -> nodes left to PyTorch, over every graph compiled so far (fallback_ops()).
_fallback_nodes = collections.Counter()


def fallback_ops():
    """The aten ops that run in PyTorch, with the number of graph nodes of each, over every graph
    the backend compiled in this process (the `fallbacks` counter counts their executions)."""
    return dict(_fallback_nodes)


class _Support(OperatorSupportBase):
    def __init__(self, rejected):
        self.rejected = rejected  # node name -> why (found while tracing)
        self.why = {}

    def is_node_supported(self, submodules, node):
        if node.op != "call_function":
            return False
        why = self._why_not(node)
        if why:
            self.why[node] = why
        return why is None

    def _why_not(self, node):
        if node.name in self.rejected:
            return self.rejected[node.name]
        if builder(node.target) is None:
            return f"not implemented: {node.target} in lazytensor"
        if node.target is operator.getitem and node.args[0].op == "call_function" \
                and self._why_not(node.args[0]):
            return "its tuple comes from an op that runs in PyTorch"
        for v in _tensor_values(node):
            if v.dtype not in DTYPES:
                return f"not implemented: dtype {v.dtype} in lazytensor"
            if v.device.type not in ("cpu", "cuda"):
                return f"not implemented: device {v.device} in lazytensor"
        return None


def _tensor_values(node):
    vals = [node.meta.get("val")]
    for a in node.all_input_nodes:
        vals.append(a.meta.get("val"))
    out = []
    for v in vals:
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, torch.Tensor):
                out.append(x)
    return out


class _LazySubgraph(torch.nn.Module):
    """A lazytensor partition inside a split graph (called like the submodule it replaces)."""

    def __init__(self, gm, name):
        super().__init__()
        self.graph_fn = LazyGraph(gm, name)
        out = next(n for n in gm.graph.nodes if n.op == "output")
        self.single = not isinstance(out.args[0], (tuple, list))  # returns a tensor, not a tuple

    def forward(self, *args):
        out = self.graph_fn(args)
        return out[0] if self.single else tuple(out)


class SplitGraph:
    """The whole graph as PyTorch runs it, its supported parts replaced by lazytensor graphs."""

    _boxed_call = True

    def __init__(self, split, name, fallback_ops):
        self.gm = split
        self.name = name
        self.fallback_ops = fallback_ops  # number of op nodes that run in PyTorch per call

    def __call__(self, args):
        if self.fallback_ops:
            _C.metrics._count_fallbacks(self.fallback_ops)
        out = self.gm(*args)
        return list(out) if isinstance(out, (tuple, list)) else [out]


def split_graph(gm, name, rejected, mode):
    """A callable for `gm` (boxed): one LazyGraph when every op is supported, else the split
    graph. `rejected` maps node names to why lazytensor cannot run them (found by tracing).
    mode "raise" raises instead of splitting."""
    support = _Support(rejected)
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    unsupported = [n for n in ops if not support.is_node_supported(None, n)]
    if not unsupported:
        return LazyGraph(gm, name)
    if mode == "raise":
        lines = "; ".join(f"{n.format_node()}: {support.why[n]}" for n in unsupported[:8])
        raise NotImplementedError(f"lazytensor torch.compile(options={{'fallback': 'raise'}}): "
                                  f"{len(unsupported)} op(s) of {name} cannot run in lazytensor: "
                                  f"{lines}")
    _fallback_nodes.update(str(n.target) for n in unsupported)
    if debug_enabled():
        for n in unsupported:
            key = str(n.target)
            if key not in _named:
                _named.add(key)
                count = sum(1 for m in unsupported if str(m.target) == key)
                print(f"[lazytensor] torch.compile: {key} runs in PyTorch ({count} in {name}): "
                      f"{support.why[n]}")
    # fuse_partitions rewrites the graph it is given: split a copy, so that a later split of the
    # same graph (after tracing rejected another node) starts from the whole graph again.
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    split = partitioner.fuse_partitions(partitioner.propose_partitions())
    for sub_name, sub in list(split.named_children()):
        if isinstance(sub, torch.fx.GraphModule):
            setattr(split, sub_name, _LazySubgraph(sub, f"{name}.{sub_name}"))
    return SplitGraph(split, name, len(unsupported))


class Compiled:
    """What the backend hands AOTAutograd for one graph: runs it, and when tracing finds an op
    lazytensor cannot run after all (an argument a builder does not cover), splits the graph
    around that node and carries on, once per such node."""

    _boxed_call = True

    def __init__(self, gm, name, mode):
        self.gm = gm
        self.name = name
        self.mode = mode
        self._boxed_call = True  # per instance: torch._dynamo.disable's wrapper copies __dict__
        self.rejected = {}
        self.fn = split_graph(gm, name, self.rejected, mode)

    def __call__(self, *args):
        # Boxed (one list: AOTAutograd's convention) or not (its backward arrives through
        # torch._dynamo.disable's wrapper, which drops the _boxed_call mark). A graph input is
        # never a list, so one list argument is the boxed form.
        if len(args) == 1 and isinstance(args[0], list):
            args = args[0]
        while True:
            try:
                return self.fn(list(args))
            except Unsupported as e:
                if self.mode == "raise":
                    raise NotImplementedError(f"lazytensor torch.compile(options={{'fallback': "
                                              f"'raise'}}): {e.node.format_node()}: {e}") from None
                name = e.node.name  # a partition's nodes keep their names from the whole graph
                if name in self.rejected:
                    raise
                self.rejected[name] = str(e)
                self.fn = split_graph(self.gm, self.name, self.rejected, self.mode)

