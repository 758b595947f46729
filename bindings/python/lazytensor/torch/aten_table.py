"""The bridge's "ops are data": one entry per aten op, from the op to a builder that records the
same computation as lazytensor IR.

A builder takes the graph's context (`cx`: the lazy device the graph runs on) and the op's
arguments with torch tensors replaced by lazytensor tensors, and returns what the aten op returns
(a tensor, a tuple of tensors, or a list). Python numbers stay numbers: they become scalars of the
graph. A builder raises NotImplementedError for an argument combination it does not cover; the
partitioner (partition.py) asks `supports(node)` first, so such a node runs in PyTorch instead.

Ops that torch._decomp already decomposes well are not here (the backend keeps torch's
decompositions for them); ops we fuse better ourselves (softmax, layer_norm, attention, gelu) are
kept whole (backend.py's decomposition table leaves them out).
"""
# Each group module registers its entries into TABLE (aten_ops.py) when imported.
from . import aten_creation, aten_elementwise, aten_indexing, aten_nn, aten_reductions  # noqa: F401
from .aten_elementwise import register_inductor_prims
from .aten_ops import TABLE

__all__ = ["TABLE", "builder", "register_inductor_prims"]


def builder(target):
    """The builder of an FX node's target, or None."""
    return TABLE.get(target)
