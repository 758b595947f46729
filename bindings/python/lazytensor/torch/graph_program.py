"""One FX graph of aten ops, run by lazytensor.

The first call with a given input signature walks the graph once through the aten table
(aten_table.py), recording lazytensor IR on the graph's lazy device, and runs it as one graph
under lt.compile's capture (capture/capture.h): the trace is hashed, lowered, fused and compiled
once, and the capture keeps a Program that knows where each graph input comes from. Later calls
with the same signature bind the new torch tensors' memory (DLPack, no copies) and replay the
Program: no Python per op, no re-tracing, no re-hashing.

The signature is each tensor's shape, dtype and device, and each Python number's value: a new size
traces the graph again, but the dims Dynamo made symbolic are marked dynamic in lazytensor
(lt.mark_dynamic), so the lazytensor graph compiles once for every size (issue 30).
"""
import os

import torch
import torch.fx

from .. import _C
from .aten_table import builder
from .interop import dlpack_stream, lazy_device, lt_dtype, to_lazy, to_torch


class Unsupported(NotImplementedError):
    """A node of the graph that lazytensor cannot run (its builder said so while tracing)."""

    def __init__(self, node, why):
        super().__init__(why)
        self.node = node


def debug_enabled():
    return os.environ.get("LT_DEBUG", "0") not in ("", "0")


class _Context:
    __slots__ = ("device",)

    def __init__(self, device):
        self.device = device


class _Entry:
    __slots__ = ("program", "extras", "out_spec", "clone_outs")

    def __init__(self, program, extras, out_spec, clone_outs):
        self.program = program        # None: the graph cannot be replayed (re-traced each call)
        self.extras = extras          # non-tensor outputs (sizes) by output position
        self.out_spec = out_spec      # per output: index into the program's tensors, or None
        self.clone_outs = clone_outs  # output positions that are graph inputs passed through


class _Staging:
    """Stable addresses for the small CUDA inputs that torch allocates anew on every call.

    A graph's CUDA graph (backends/cuda/cuda_graph.h) replays with whatever addresses its inputs
    have, but a cuBLAS or cuDNN step whose operand moved is captured again, at ~100x the host time
    of a kernel launch, and a graph whose replays keep doing that falls back to plain launches. Our
    own outputs come back at their addresses (the caching allocator's preference); what torch
    computes between two graphs does not: the loss's gradient that a backward's first GEMM reads
    (an MLP's backward then recaptured 2 of its 7 steps every call and ran plainly). An input
    position whose address changed since the last call is copied into a buffer kept for that
    position (one device-to-device copy, which costs the GPU less than a microsecond at these
    sizes) and the graph reads the buffer. Large inputs are passed as they are: copying GPT-2's
    1.6 GB logits gradient would cost the GPU more than the recapture costs the host. A strided
    input (not a permutation of a dense tensor: those are taken as they are) is copied dense
    anyway, so it goes to its position's buffer from the first call, at any size, instead of to a
    new allocation every call."""

    LIMIT_BYTES = 16 << 20

    __slots__ = ("device_types", "last", "buffers")

    def __init__(self, device_types=("cuda",)):  # CPU graphs have no CUDA graphs to keep
        self.device_types = device_types
        self.last = {}      # input position -> its data address at the last call
        self.buffers = {}   # input position -> the buffer it is copied into

    def stable(self, i, t):
        """The tensor to pass at input position `i` for the torch tensor `t`: `t`, or its copy in
        the position's buffer."""
        if t.device.type not in self.device_types:
            return t
        ptr = t.data_ptr()
        last = self.last.get(i)
        self.last[i] = ptr
        dense = t.is_contiguous()
        buf = self.buffers.get(i)
        if buf is None:
            if dense and (last is None or last == ptr or
                          t.numel() * t.element_size() > self.LIMIT_BYTES):
                return t
            buf = self.buffers[i] = torch.empty(t.shape, dtype=t.dtype, device=t.device)
        if buf.shape != t.shape or buf.dtype != t.dtype:
            del self.buffers[i]  # another signature at this position: stop staging it
            return t
        with torch.no_grad():
            buf.copy_(t)
        return buf


def _dense_permutation(t):
    """The permutation p for which t.permute(p) is contiguous, when t is a permuted view of a
    dense tensor (and not contiguous already); else None (a contiguous tensor, or one that
    needs a copy to be dense: slices, expands)."""
    if t.ndim < 2 or t.is_contiguous():
        return None
    p = tuple(sorted(range(t.ndim), key=lambda d: (-t.stride(d), d)))
    return p if t.permute(p).is_contiguous() else None


def _inverse(p):
    inv = [0] * len(p)
    for i, d in enumerate(p):
        inv[d] = i
    return inv


def _symbolic_dims(gm):
    """(placeholder index, dim) of every tensor input dim whose size Dynamo traced as a SymInt."""
    dims = []
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(places):
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor):
            dims += [(i, d) for d, s in enumerate(val.shape) if isinstance(s, torch.SymInt)]
    return dims


def _tensor_positions(gm):
    """Per placeholder index, its position among the tensor inputs (lt_args), by its traced value:
    a placeholder without one (a SymInt) is no tensor."""
    pos, k = {}, 0
    for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        if isinstance(n.meta.get("val"), torch.Tensor):
            pos[i] = k
            k += 1
    return pos


def _tensor_device(values):
    for v in values:
        if isinstance(v, torch.Tensor):
            return v.device
    return torch.device("cpu")


class LazyGraph:
    """Callable with the graph's inputs (boxed as a list when `boxed=True`, AOTAutograd's
    convention); returns the graph's outputs as a list of torch tensors (and numbers)."""

    def __init__(self, gm, name="graph"):
        self.gm = gm
        self.name = name
        self._entries = {}
        self.stats = {"traces": 0, "replays": 0}
        self._view_outs, self._view_bases = _view_outputs(gm)
        self._passthrough = _passthrough_outputs(gm)
        self._symbolic_dims = _symbolic_dims(gm)
        self._tensor_pos = _tensor_positions(gm)
        self._staging = _Staging()

    # AOTAutograd calls compiled graphs with one list (and may clear it to free inputs early).
    _boxed_call = True

    def __call__(self, args):
        args = list(args)
        device = _tensor_device(args)
        # A permuted input (a weight's transpose saved by the forward) is passed as its dense base
        # and permuted back inside the graph, where a permutation is index arithmetic, not a copy.
        perms = [_dense_permutation(a) if isinstance(a, torch.Tensor) else None for a in args]
        key = tuple((tuple(a.shape), a.dtype, a.device, p) if isinstance(a, torch.Tensor) else
                    (type(a), a) for a, p in zip(args, perms))
        entry = self._entries.get(key)
        lt_device = lazy_device(device)
        lt_args = [to_lazy(self._staging.stable(i, a) if p is None else a.permute(p), lt_device)
                   for i, (a, p) in enumerate(zip(args, perms)) if isinstance(a, torch.Tensor)]
        # Dims that Dynamo made symbolic (dynamic=True, or its automatic dynamic shapes) are
        # symbolic in lazytensor's graph too: one compile serves every size (issue 30).
        for i, d in self._symbolic_dims:
            p = perms[i]
            _C.mark_dynamic(lt_args[self._tensor_pos[i]], d if p is None else p.index(d))
        if entry is not None and entry.program is not None:
            rets = _C._capture_replay(entry.program, lt_args)
            if rets is not None:
                self.stats["replays"] += 1
                return self._outputs(entry, rets, args)
        return self._trace_and_run(key, args, lt_args, lt_device, perms)

    def _outputs(self, entry, rets, args):
        outs = []
        stream = dlpack_stream(rets[0].device) if rets else None
        for i, slot in enumerate(entry.out_spec):
            if i in self._view_outs:
                outs.append(None)  # made below, once every output it may view exists
            elif slot is None:
                outs.append(entry.extras[i])
            elif i in self._passthrough:  # the input itself, as the FX graph returns it
                outs.append(args[self._passthrough[i]])
            else:
                t = to_torch(rets[slot], stream)
                outs.append(t.clone() if i in entry.clone_outs else t)
        for i, view in self._view_outs.items():
            outs[i] = _run_in_torch(view, args, outs)
        return outs[:len(outs) - len(self._view_bases)]  # the bases were for the views only

    def _trace_and_run(self, key, args, lt_args, lt_device, perms):
        self.stats["traces"] += 1
        _C._capture_begin(lt_args)
        try:
            outs = self._interpret(args, lt_args, lt_device, perms)
        except BaseException:
            _C._capture_abort()
            raise
        for i in self._view_outs:  # PyTorch makes these: drop ours, or the capture computes them
            outs[i] = None
        rets, out_spec, extras = [], [], {}
        for i, o in enumerate(outs):
            if isinstance(o, _C.Tensor):
                out_spec.append(len(rets))
                rets.append(o)
            else:
                out_spec.append(None)
                extras[i] = o
        program, why = _C._capture_end(lt_args, rets)
        if program is None and debug_enabled():
            print(f"[lazytensor] torch.compile: {self.name} is traced again on every call: {why}")
        clone_outs = _outputs_to_clone(lt_args, rets, out_spec)
        entry = _Entry(program, extras, out_spec, clone_outs)
        self._entries[key] = entry
        return self._outputs(entry, rets, args)

    def _interpret(self, args, lt_args, lt_device, perms):
        cx = _Context(lt_device)
        env = {}
        it_lt = iter(lt_args)
        it_args = iter(args)
        it_perms = iter(perms)
        prev_grad = _C.is_grad_enabled()
        _C.set_grad_enabled(False)  # AOTAutograd's graphs are already differentiated
        try:
            for node in self.gm.graph.nodes:
                if node.op == "placeholder":
                    a, perm = next(it_args), next(it_perms)
                    env[node] = a if not isinstance(a, torch.Tensor) else \
                        next(it_lt) if perm is None else next(it_lt).permute(_inverse(perm))
                elif node.op == "call_function":
                    env[node] = self._run_node(cx, node, env)
                elif node.op == "get_attr":
                    env[node] = _constant(self.gm, node.target, lt_device)
                elif node.op == "output":
                    out = torch.fx.node.map_arg(node.args[0], lambda n: env[n])
                    out = list(out) if isinstance(out, (tuple, list)) else [out]
                    return out + [env[b] for b in self._view_bases]
                else:
                    raise Unsupported(node, f"not implemented: FX node kind {node.op!r} in "
                                            f"lazytensor's torch.compile backend")
        finally:
            _C.set_grad_enabled(prev_grad)
        raise RuntimeError(f"lazytensor: FX graph {self.name} has no output node")

    def _run_node(self, cx, node, env):
        fn = builder(node.target)
        if fn is None:
            raise Unsupported(node, f"not implemented: {node.target} in lazytensor")
        a = torch.fx.node.map_arg(node.args, lambda n: env[n])
        k = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
        try:
            out = fn(cx, *a, **k)
        except NotImplementedError as e:
            raise Unsupported(node, str(e)) from None
        except (RuntimeError, ValueError, TypeError, IndexError) as e:
            raise type(e)(f"lazytensor: {node.target} ({node.format_node()}): {e}") from e
        return _conform(node, out)


# Ops whose result is a view of their input in PyTorch.
_VIEW_OPS = {torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default,
             torch.ops.aten.permute.default, torch.ops.aten.t.default,
             torch.ops.aten.transpose.int, torch.ops.aten.expand.default,
             torch.ops.aten.unsqueeze.default, torch.ops.aten.squeeze.dim,
             torch.ops.aten.squeeze.dims, torch.ops.aten.squeeze.default,
             torch.ops.aten.alias.default, torch.ops.aten.slice.Tensor,
             torch.ops.aten.select.int}


def _outputs_to_clone(lt_args, rets, out_spec):
    """Output positions torch must get copies of: those whose memory is an input's (a graph input
    passed through), and those whose memory overlaps another output's (a root our lowering made a
    view of another root's buffer, lowering/output_views.h, where the FX graph has two distinct
    tensors: an in-place op torch runs on one must not reach the other). The same program tensor
    returned twice stays shared, as before."""
    in_ptrs = {a.data_ptr() for a in lt_args if a.numel()}
    spans, clone = [], set()
    for i, slot in enumerate(out_spec):
        if slot is None or not rets[slot].numel():
            continue
        t = rets[slot]
        start = t.data_ptr()
        end = start + t.numel() * t.element_size()
        if start in in_ptrs or any(s < end and start < e and k != slot for s, e, k in spans):
            clone.add(i)
        else:
            spans.append((start, end, slot))
    return clone


def _passthrough_outputs(gm):
    """{output position: input position} for outputs that are graph inputs themselves (a forward
    returns the weights it saves for its backward): the call returns the input tensor it was given,
    as the FX graph does, with no copy and no exchange."""
    places = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    if not isinstance(out, (list, tuple)):  # a graph of one output returns it bare
        return {}
    return {i: places[o] for i, o in enumerate(out) if isinstance(o, torch.fx.Node) and o in places}


def _view_outputs(gm):
    """Outputs that are views (a chain of view ops) of a graph input or of a value lazytensor
    computes, by output position: (the chain's nodes, ("in", input position) or ("out", position
    of the base among the outputs)), and the bases to add as extra outputs. The forward graph saves
    such views for the backward (a weight's transpose, a layer's output reshaped for its matmul);
    lazytensor's tensors are dense, so computed by it each would be a copy; PyTorch makes them
    from the input or from the base's buffer, as views."""
    places = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    position = {}
    for i, node in enumerate(outs):
        position.setdefault(node, i)
    views, bases = {}, []
    for i, node in enumerate(outs):
        chain = []
        while isinstance(node, torch.fx.Node) and node.op == "call_function" \
                and node.target in _VIEW_OPS and node.all_input_nodes == [node.args[0]]:
            chain.append(node)
            node = node.args[0]
        if not chain or not isinstance(node, torch.fx.Node):
            continue
        chain = chain[::-1]
        if node in places:
            views[i] = (chain, ("in", places[node]), _view_methods(chain))
        elif node.op == "call_function" and isinstance(node.meta.get("val"), torch.Tensor):
            if node not in position:
                position[node] = len(outs) + len(bases)
                bases.append(node)
            views[i] = (chain, ("out", position[node]), _view_methods(chain))
    return views, bases


_aten = torch.ops.aten
# View ops as tensor methods: the same aten kernels, reached through the method's argument parser,
# which costs less than an OpOverload call's Python (a ResNet-18 step makes 23 such views:
# 0.69 -> 0.38 ms of host time a step on the development machine).
_VIEW_METHODS = {
    _aten.view.default: lambda t, size: t.view(size),
    _aten.permute.default: lambda t, dims: t.permute(dims),
    _aten.t.default: lambda t: t.t(),
    _aten.transpose.int: lambda t, a, b: t.transpose(a, b),
    _aten.expand.default: lambda t, size: t.expand(size),
    _aten.unsqueeze.default: lambda t, d: t.unsqueeze(d),
    _aten.squeeze.dim: lambda t, d: t.squeeze(d),
    _aten.squeeze.dims: lambda t, dims: t.squeeze(dims),
    _aten.squeeze.default: lambda t: t.squeeze(),
    _aten.select.int: lambda t, d, i: t.select(d, i),
}


def _view_methods(chain):
    """Per node of a view chain (whose arguments besides its input are constants: _view_outputs
    stops a chain at any other input node), its tensor method, or None to call the op itself."""
    return [None if node.kwargs else _VIEW_METHODS.get(node.target) for node in chain]


def _run_in_torch(view, args, outs):
    chain, (kind, source), methods = view
    t = args[source] if kind == "in" else outs[source]
    for node, method in zip(chain, methods):
        t = method(t, *node.args[1:]) if method is not None else \
            node.target(t, *node.args[1:], **node.kwargs)
    return t


def _constant(gm, target, device):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, torch.Tensor):
        lt_dtype(obj.dtype)  # raises for a dtype lazytensor lacks
        return to_lazy(obj.detach().contiguous().clone(), device)
    return obj


def _conform(node, out):
    """Checks a builder's result against the shapes and dtypes torch traced (node.meta["val"]),
    and casts to torch's dtype where our promotion differs: the graph's later nodes and its
    outputs then see exactly what PyTorch would give."""
    val = node.meta.get("val")
    if isinstance(out, _C.Tensor) and isinstance(val, torch.Tensor):
        return _conform_one(node, out, val)
    if isinstance(out, (tuple, list)) and isinstance(val, (tuple, list)) and len(out) == len(val):
        fixed = [_conform_one(node, o, v) if isinstance(o, _C.Tensor) and isinstance(v, torch.Tensor)
                 else o for o, v in zip(out, val)]
        return type(out)(fixed) if isinstance(out, tuple) else fixed
    return out


def _conform_one(node, out, val):
    want = list(val.shape)  # a symbolic size (SymInt) is not compared
    got = list(out.shape)
    if len(want) != len(got) or any(isinstance(w, int) and w != g for w, g in zip(want, got)):
        raise RuntimeError(f"lazytensor: {node.target} gave shape {got} where torch traced "
                           f"{list(val.shape)} ({node.format_node()})")
    dt = lt_dtype(val.dtype)
    return out if out.dtype == dt else _C.cast(out, dt)
