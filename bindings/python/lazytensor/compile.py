"""`lt.compile(fn_or_module)`: trace a step once per input signature, then replay it.

Plain `lazy` re-runs the Python code every step: each op is traced again and the trace hashed, and
only then does the graph cache hit. A compiled function runs its Python code once per signature
(the capture, in the C++ runtime: capture/capture.h) and afterwards replays the recorded program:
new argument data and the current values of the state it reads (parameters, optimizer state) are
bound to the cached executable, which runs at once; the same parameter, optimizer-state and .grad
tensors are updated in place, and return values are fresh tensors on each call.

The signature (guard) of a call is:
  * the pytree structure of args/kwargs, and per tensor its shape, dtype, device, requires_grad;
    Python numbers, strings, None and NumPy arrays by value; other objects by identity;
  * grad mode (`lt.no_grad()`) and the autocast state (`lt.autocast`: enabled device types, dtypes);
  * for every module among the arguments, the compiled module, and the modules and numbers that
    the function names as globals or closure variables: parameter/buffer identities, their
    requires_grad, and each submodule's `training` flag;
  * for every optimizer whose step() ran during the capture: its hyperparameters (an lr scheduler's
    change re-traces; the graph cache still hits, so nothing recompiles).
A new signature traces again; a known one replays. The runtime also checks, on replay, that every
state tensor the program reads is alive with its shape, dtype and device: otherwise it re-traces.

What a compiled call means on `lazy`:
  * the call is one graph: `mark_step()` and `optimizer.step()`'s sync inside it are deferred to its
    end, where everything still pending is computed (returned tensors come back materialized);
  * a function that returns tensors requiring grad without running backward() itself (a forward
    pass under grad mode, e.g. a compiled module in training) has its backward compiled too, as
    torch.compile's AOTAutograd does (capture/capture_backward.cc): every call returns tensors whose
    autograd node replays the compiled backward, so neither pass traces an op on a replay. Each
    call keeps its own saved activations (two forwards before one backward work as in PyTorch);
    `backward()` twice needs `retain_graph=True`. Returned tensors that do not require grad, and
    the returns of a step that runs backward() itself, come back detached;
  * dropout and other random draws take new values on each replay, from the same generator stream
    that running the Python code would have drawn from;
  * index range checks (embedding, gather, index_select, scatter_add, indexing with integer
    tensors) are redone on every replay: indices given as arguments (or read from state) before
    the graph runs, indices computed in the step by the graph itself (extra outputs); a bad index
    raises IndexError from the replay as it would from the plain step. Indexing with an integer
    tensor whose data is in host memory, and F.one_hot of one, read its values in Python: such a
    step runs plainly (compute the index in the step, or use index_select/embedding);
  * a step that reads a value on the host (`.item()`, `.numpy()`, printing, `if tensor:`), syncs,
    calls manual_seed, or uses eager devices (`cpu`, `cuda`) cannot be captured as one graph: it
    runs as plain Python every time (`fullgraph=True` raises instead, except for eager devices,
    where lt.compile simply calls the function, as there is nothing to trace);
  * Python side effects other than tensor updates (appending to a list, counters, printing) happen
    on the tracing call only, as with torch.compile's graphs and CUDA graphs. Python numbers read
    from places the guard does not see (attributes of other objects, values computed in called
    functions) are baked in at trace time: pass them as arguments.

`lt.compile(module)` returns a module that shares the original's parameters, buffers and
submodules (so `state_dict()` has the same keys, without torch's `_orig_mod.` prefix) and whose
forward is compiled; `_orig_mod` is the original. PyTorch's keyword arguments are accepted:
`fullgraph` is honoured as above; `dynamic` (every new shape re-traces), `mode`, `backend` and
`options` are accepted and ignored; `disable=True` returns calls to the plain function.
"""
import functools
import os
import types
import weakref

import numpy as np

from . import _C, amp
from .nn.module import Module
from .optim import optimizer as _optimizer

__all__ = ["compile"]

Tensor = _C.Tensor
_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_MAX_ENTRIES = 8          # programs kept per signature (optimizer settings that alternate)
_MAX_STALE = 3            # re-traces of one signature in a row before it runs as plain Python
_EAGER = "it runs eager ops"


def _debug():
    return os.environ.get("LT_DEBUG", "0") not in ("", "0")


# ---- signatures ------------------------------------------------------------------------------

def _module_key(m):
    """Identity of what a module's forward reads: its parameters and buffers (and requires_grad),
    and the training flag of each submodule."""
    parts = []
    for sub in m.modules():
        parts.append(sub.training)
        for p in sub._parameters.values():
            parts.append(None if p is None else (id(p), p.requires_grad))
        for b in sub._buffers.values():
            parts.append(None if b is None else id(b))
    return id(m), tuple(parts)


def _sig(x, tensors):
    """A hashable signature of an argument pytree; its tensors are appended to `tensors`."""
    if isinstance(x, Tensor):
        tensors.append(x)
        return ("T", x.shape, x.dtype, x.device, x.requires_grad)
    t = type(x)
    if t in (int, float, bool, str, type(None), complex, bytes):
        return (t, x)
    if t in (tuple, list):
        return (t, tuple(_sig(v, tensors) for v in x))
    if t is dict:
        return (dict, tuple((k, _sig(v, tensors)) for k, v in x.items()))
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # namedtuple
        return (t, tuple(_sig(v, tensors) for v in x))
    if isinstance(x, Module):
        return ("M",) + _module_key(x)
    if isinstance(x, np.ndarray):
        return ("A", x.shape, x.dtype.str, x.tobytes())
    if isinstance(x, (np.generic,)):
        return (t, x.item())
    return ("O", t, id(x))  # by identity: in-place changes to such objects are not seen


def _flatten_out(x, tensors):
    """The return value's structure with tensors replaced by their index in `tensors`."""
    if isinstance(x, Tensor):
        tensors.append(x)
        return _Slot(len(tensors) - 1)
    t = type(x)
    if t in (tuple, list):
        return (t, [_flatten_out(v, tensors) for v in x])
    if t is dict:
        return (dict, [(k, _flatten_out(v, tensors)) for k, v in x.items()])
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (t, [_flatten_out(v, tensors) for v in x])
    return _Const(x)


class _Slot:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


class _Const:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


def _unflatten(spec, tensors):
    if type(spec) is _Slot:
        return tensors[spec.i]
    if type(spec) is _Const:
        return spec.v
    t, items = spec
    if t is dict:
        return {k: _unflatten(v, tensors) for k, v in items}
    vals = [_unflatten(v, tensors) for v in items]
    if t is list:
        return vals
    if t is tuple:
        return tuple(vals)
    return t(*vals)  # namedtuple


class _Scope:
    """The modules and numbers a function names as globals or closure variables (and a bound
    method's module): they are part of its signature."""

    def __init__(self, fn, modules):
        self.modules = list(modules)
        target = fn
        if isinstance(fn, types.MethodType):
            if isinstance(fn.__self__, Module):
                self.modules.append(fn.__self__)
            target = fn.__func__
        code = getattr(target, "__code__", None)
        self.globals = getattr(target, "__globals__", {}) if code else {}
        self.names = tuple(n for n in code.co_names if n in self.globals) if code else ()
        self.cells = tuple(getattr(target, "__closure__", None) or ())

    def key(self):
        parts = [_module_key(m) for m in self.modules]
        g = self.globals
        for v in [g.get(n) for n in self.names] + [_cell(c) for c in self.cells]:
            if isinstance(v, Module):
                parts.append(_module_key(v))
            elif type(v) in (int, float, bool):
                parts.append((type(v), v))
        return tuple(parts)


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:  # an empty cell (a variable assigned later)
        return None


# ---- the compiled function -------------------------------------------------------------------

class _Entry:
    __slots__ = ("program", "ret_spec", "optimizers", "why_not")

    def __init__(self, program, ret_spec, optimizers, why_not):
        self.program = program
        self.ret_spec = ret_spec
        self.optimizers = optimizers  # [(weakref to optimizer, its _compile_key() at capture)]
        self.why_not = why_not

    def optimizers_unchanged(self):
        for ref, key in self.optimizers:
            opt = ref()
            if opt is None or opt._compile_key() != key:
                return False
        return True


class _CompiledFunction:
    """The callable that lt.compile returns for a function."""

    def __init__(self, fn, fullgraph=False, modules=()):
        self._fn = fn
        self._fullgraph = fullgraph
        self._scope = _Scope(fn, modules)
        self._entries = {}  # signature -> [_Entry] (most recent first)
        self._stale = {}    # signature -> re-traces in a row
        self.stats = {"traces": 0, "replays": 0, "plain_calls": 0, "stale": 0}
        self.last_reason = None  # why the last capture cannot be replayed (None if it can)
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):  # decorating a method: bind like a function would
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        if _C._capture_active():  # called inside another compiled step: part of its graph
            return self._fn(*args, **kwargs)
        tensors = []
        key = (_sig(args, tensors), _sig(dict(sorted(kwargs.items())), tensors) if kwargs else None,
               _C.is_grad_enabled(), amp.state_key(), self._scope.key())
        entries = self._entries.get(key)
        if entries:
            for e in entries:
                if e.program is None:
                    self.stats["plain_calls"] += 1
                    return self._fn(*args, **kwargs)
                if e.optimizers_unchanged():
                    rets = _C._capture_replay(e.program, tensors)
                    if rets is not None:
                        self.stats["replays"] += 1
                        self._stale.pop(key, None)
                        return _unflatten(e.ret_spec, rets)
                    entries.remove(e)  # stale: its state changed under it
                    self.stats["stale"] += 1
                    self._stale[key] = self._stale.get(key, 0) + 1
                    break
        return self._capture(key, args, kwargs, tensors)

    def _capture(self, key, args, kwargs, tensors):
        stepped = []  # (optimizer, its settings as the step began)

        def observe(opt):
            stepped.append((opt, opt._compile_key()))

        _optimizer._step_observers.append(observe)
        try:
            _C._capture_begin(tensors)
            try:
                out = self._fn(*args, **kwargs)
            except BaseException:
                _C._capture_abort()
                raise
        finally:
            _optimizer._step_observers.remove(observe)
        ret_tensors = []
        spec = _flatten_out(out, ret_tensors)
        program, why = _C._capture_end(tensors, ret_tensors)
        self.stats["traces"] += 1
        if program is None:
            self.last_reason = why
            if self._fullgraph and not why.startswith(_EAGER):
                raise RuntimeError(f"lt.compile(fullgraph=True): {self._name()} cannot be captured as "
                                   f"one graph: {why}")
            if _debug():
                print(f"[lazytensor] lt.compile: {self._name()} runs as plain Python: {why}")
        elif self._stale.get(key, 0) >= _MAX_STALE:
            why = "its state tensors change identity on every call (e.g. gradients accumulated " \
                  "across calls without zero_grad())"
            self.last_reason, program = why, None
            if _debug():
                print(f"[lazytensor] lt.compile: {self._name()} runs as plain Python: {why}")
        else:
            self.last_reason = None
        opts, seen = [], set()
        for o, k in stepped:
            if id(o) not in seen:
                seen.add(id(o))
                opts.append((weakref.ref(o), k))
        entries = self._entries.setdefault(key, [])
        entries.insert(0, _Entry(program, spec, opts, why or None))
        del entries[_MAX_ENTRIES:]
        return out

    def _name(self):
        return getattr(self._fn, "__qualname__", None) or repr(self._fn)

    def __repr__(self):
        return f"<lt.compile of {self._name()}>"


class _CompiledModule(Module):
    """lt.compile(module): shares the original's parameters, buffers and submodules (same
    state_dict keys) and compiles its forward."""

    def __init__(self, mod, fullgraph):
        d = self.__dict__
        d["_orig_mod"] = mod
        for k in ("_parameters", "_buffers", "_non_persistent_buffers_set", "_modules"):
            d[k] = mod.__dict__[k]
        d["_compiled_forward"] = _CompiledFunction(mod.forward, fullgraph, modules=(mod,))

    @property
    def training(self):
        return self._orig_mod.training

    @training.setter
    def training(self, mode):
        self._orig_mod.training = mode

    def forward(self, *args, **kwargs):
        return self._compiled_forward(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_orig_mod"], name)

    def __repr__(self):
        return f"CompiledModule({self._orig_mod!r})"


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
            options=None, disable=False):
    """Traces `model` (a function or an nn.Module) once per input signature and replays it; see
    the module docstring. Usable as `lt.compile(fn)`, `@lt.compile` and `@lt.compile(...)`."""
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode!r}, should be one of: "
                           f"{', '.join(str(m) for m in _MODES[1:])}")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified "
                           "at the same time.")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"lt.compile: options must be a dict, got {type(options).__name__}")
    if not isinstance(fullgraph, bool):
        raise TypeError(f"lt.compile: fullgraph must be a bool, got {type(fullgraph).__name__}")
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if isinstance(model, (_CompiledFunction, _CompiledModule)):
        return model
    if isinstance(model, Module):
        return model if disable else _CompiledModule(model, fullgraph)
    if not callable(model):
        raise TypeError(f"lt.compile: expected a function or an nn.Module, got "
                        f"{type(model).__name__}")
    return model if disable else _CompiledFunction(model, fullgraph)
