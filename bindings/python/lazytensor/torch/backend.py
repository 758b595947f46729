"""`torch.compile(model, backend="lazytensor")`.

TorchDynamo captures the Python; AOTAutograd traces forward and backward into aten graphs,
functionalizes them (in-place updates of inputs come back as extra outputs that AOTAutograd copies
into the inputs after the call; BatchNorm's running statistics and optimizer state go that way)
and decomposes composite ops with torch._decomp's core aten table, except the ops lazytensor
translates whole (aten_table.TABLE: softmax, layer_norm, gelu, ... fuse better as ours; attention
is kept whole by rewriting Dynamo's graph first, attention.py).
Each graph then runs through graph_program.LazyGraph: traced through the aten table once per input
signature, compiled through lazytensor's cache, replayed after that.

Options (`torch.compile(..., backend="lazytensor", options={...})`):
  fallback: "split" (default): an op lazytensor cannot run runs in PyTorch, the graph split around
            it; "raise": NotImplementedError naming the ops instead.
"""
import functools
import itertools

import torch._decomp
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition

from .aten_table import TABLE, register_inductor_prims
from .attention import attention_as_ours, keep_attention_whole
from .partition import Compiled

register_inductor_prims()  # Dynamo is loaded by now, and with it the prims Inductor defines

_FALLBACK_MODES = ("split", "raise")
_graph_ids = itertools.count()


@functools.lru_cache(None)
def decompositions():
    """torch's core aten decompositions less the ops lazytensor translates itself.

    The post-autograd table, not core_aten_decompositions(): the latter adds a Python
    decomposition for every CompositeImplicitAutograd op (what torch.export needs), which costs
    55 ms to build and makes AOTAutograd trace those ops through Python where the dispatcher would
    decompose them in C++ anyway (they never reach a graph either way)."""
    table = getattr(torch._decomp, "_core_aten_decompositions_post_autograd", None)
    table = table() if table is not None else torch._decomp.core_aten_decompositions()
    return {op: fn for op, fn in table.items() if op not in TABLE}


def _options(options):
    options = dict(options or {})
    mode = options.pop("fallback", "split")
    if mode not in _FALLBACK_MODES:
        raise ValueError(f"lazytensor backend: options['fallback'] must be one of "
                         f"{_FALLBACK_MODES}, got {mode!r}")
    if options:
        raise ValueError(f"lazytensor backend: unknown options {sorted(options)} (known: fallback)")
    return mode


def _compiler(kind, mode):
    def compile_graph(gm, example_inputs):
        return Compiled(gm, f"{kind}{next(_graph_ids)}", mode)
    return compile_graph


def lazytensor_backend(gm, example_inputs, options=None):
    """The torch.compile backend (Dynamo's calling convention: an FX graph of torch ops and its
    example inputs; returns the callable that replaces the graph)."""
    mode = _options(options)
    keep_attention_whole(gm)
    with attention_as_ours():
        return aot_autograd(
            fw_compiler=_compiler("forward", mode),
            bw_compiler=_compiler("backward", mode),
            inference_compiler=_compiler("inference", mode),
            decompositions=decompositions(),
            # What the forward saves for the backward: the min-cut partitioner (Inductor's)
            # recomputes cheap elementwise values in the backward graph instead of saving them.
            # The default one saved GPT-2's float32 logits for the loss's gradient (1.6 GB written
            # and read again per step at B 8, T 1024, vocab 50304); recomputed, the cast fuses
            # into the kernels that read it.
            partition_fn=min_cut_rematerialization_partition,
            keep_inference_input_mutations=False,
        )(gm, example_inputs)


def register():
    """Registers the backend under its name, unless torch's entry-point discovery already knows
    it (then Dynamo loads it by name itself, and a second registration would be refused)."""
    from torch._dynamo.backends import registry
    if "lazytensor" not in registry._BACKENDS and "lazytensor" not in registry._COMPILER_FNS:
        registry.register_backend(lazytensor_backend, name="lazytensor")


__all__ = ["lazytensor_backend", "decompositions", "register"]
