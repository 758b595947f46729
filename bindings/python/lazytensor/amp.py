"""`lt.autocast`: automatic mixed precision with PyTorch's autocast rules.

    with lt.autocast("lazy", dtype=lt.bfloat16):
        loss = F.cross_entropy(model(x), y)   # linears in bfloat16, the loss in float32
    loss.backward()                           # gradients reach float32 weights as float32

Inside an enabled region, ops on tensors whose device the region covers cast their floating
inputs (never integer or bool ones, and never float64 for the low-precision list, as PyTorch):
  * to the autocast dtype: matmul/mm/bmm/`@`, F.linear, F.conv1d/conv2d,
    F.scaled_dot_product_attention (PyTorch's CUDA "lower precision" list, for the ops we have);
  * to float32: softmax, log_softmax, sum, prod, cumsum, F.softplus, F.layer_norm, F.normalize
    and the losses cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss, huber_loss,
    binary_cross_entropy_with_logits (PyTorch's CUDA float32 list, for the ops we have; the
    elementwise exp/log/pow/rsqrt/reciprocal of that list are C++ methods and are not hooked);
  * every other op follows normal type promotion.
A hooked op runs its body with autocast suspended, so its internal ops keep the dtype the policy
chose (scaled_dot_product_attention's internal softmax stays in bfloat16, as PyTorch's fused op).
Casts are ordinary `.to(dtype)` ops, so gradients flow back to the inputs in their own dtype.

Device types: "cpu", "cuda" and "lazy". A tensor is covered by the region of its device's type;
a lazy tensor also by the region of the backend it runs on ("cuda" covers cuda and lazy:cuda,
"cpu" covers cpu and lazy:cpu), so PyTorch code written for `autocast("cuda")` keeps working on
lazy:cuda. Where both apply, the "lazy" region wins. The policy (and dtype) of an op is chosen by
its first floating tensor argument; only arguments covered by the same region are cast.

State is per thread; regions nest (an inner `enabled=False` region turns autocast off inside).
Autocast is off by default and then costs one global integer check per hooked op.
"""
import functools
import inspect
import os
import sys
import threading

from . import _C

Tensor = _C.Tensor

DEVICE_TYPES = ("cpu", "cuda", "lazy")
_LOW_DTYPES = (_C.bfloat16, _C.float16)

# Number of enabled autocast regions open in any thread: the fast path of every hooked op is
# `if not _active`. The per-thread state below is consulted only when it is nonzero.
_active = 0
_active_lock = threading.Lock()
_this_module = sys.modules[__name__]


class _State(threading.local):
    def __init__(self):
        self.enabled = dict.fromkeys(DEVICE_TYPES, False)
        self.dtype = dict.fromkeys(DEVICE_TYPES, _C.bfloat16)
        self.cache_enabled = True
        self.suspended = 0  # > 0 inside a hooked op's body
        self.depth = 0  # open autocast regions (enabled or not) in this thread
        self.cache = {}  # id(leaf) -> (leaf, dtype, cast): weights cast once per outer region


_tls = _State()


def _check_device_type(device_type, fn):
    if device_type not in DEVICE_TYPES:
        raise RuntimeError(f"{fn}: unsupported device_type {device_type!r}; expected one of "
                           f"{', '.join(map(repr, DEVICE_TYPES))}")


def is_autocast_enabled(device_type="cuda"):
    _check_device_type(device_type, "is_autocast_enabled")
    return _tls.enabled[device_type]


def get_autocast_dtype(device_type):
    _check_device_type(device_type, "get_autocast_dtype")
    return _tls.dtype[device_type]


def is_autocast_cache_enabled():
    return _tls.cache_enabled


def state_key():
    """A hashable summary of this thread's autocast state (lt.compile's guard includes it)."""
    if not _active:
        return None
    s = _tls
    return tuple((d, s.dtype[d].name) for d in DEVICE_TYPES if s.enabled[d])


class autocast:
    """Context manager and decorator: ops in its scope run in mixed precision (see module doc).

    dtype: the low-precision dtype (bfloat16 or float16); None keeps the device type's current
    one (bfloat16 initially). cache_enabled: cast each float32 leaf requiring grad (a weight) at
    most once per outermost region; None keeps the current setting (on initially)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: expected device_type a str, got "
                             f"{type(device_type).__name__}")
        _check_device_type(device_type, "autocast")
        if dtype is not None and dtype not in _LOW_DTYPES:
            raise RuntimeError(f"autocast: dtype must be lazytensor.bfloat16 or lazytensor.float16 "
                               f"for device_type {device_type!r}, got {dtype}")
        self.device_type = device_type
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled
        self._saved = []

    def __enter__(self):
        global _active
        s, d = _tls, self.device_type
        self._saved.append((s.enabled[d], s.dtype[d], s.cache_enabled))
        s.enabled[d] = self._enabled
        if self.fast_dtype is not None:
            s.dtype[d] = self.fast_dtype
        if self._cache_enabled is not None:
            s.cache_enabled = bool(self._cache_enabled)
        s.depth += 1
        with _active_lock:
            _active += 1 if self._enabled else 0
        return self

    def __exit__(self, *exc):
        global _active
        s, d = _tls, self.device_type
        s.enabled[d], s.dtype[d], s.cache_enabled = self._saved.pop()
        s.depth -= 1
        if s.depth == 0:
            s.cache.clear()
        with _active_lock:
            _active -= 1 if self._enabled else 0
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return wrapper


def _region(t, s):
    """The enabled autocast device type covering tensor t, or None."""
    dev = t.device
    typ = dev.type
    if typ == "lazy":
        if s.enabled["lazy"]:
            return "lazy"
        typ = dev.backend
    return typ if typ in s.enabled and s.enabled[typ] else None


def _cast(t, dtype, s):
    if s.cache_enabled and t.is_leaf and t.requires_grad:
        hit = s.cache.get(id(t))
        if hit is not None and hit[0] is t and hit[1] == dtype:
            return hit[2]
        out = t.to(dtype)
        s.cache[id(t)] = (t, dtype, out)
        return out
    return t.to(dtype)


def _cast_args(args, kwargs, low):
    """(region, args, kwargs) with eligible floating tensors cast; region None if not covered."""
    s = _tls
    if s.suspended:
        return None, args, kwargs
    first = next((a for a in (*args, *kwargs.values())
                  if isinstance(a, Tensor) and a.dtype.is_floating_point), None)
    region = None if first is None else _region(first, s)
    if region is None:
        return None, args, kwargs
    target = s.dtype[region] if low else _C.float32

    def conv(a):
        if (isinstance(a, Tensor) and a.dtype.is_floating_point and a.dtype != target
                and not (low and a.dtype == _C.float64) and _region(a, s) == region):
            return _cast(a, target, s)
        return a

    return region, tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()}


def _same_signature(fn, slow):
    """A wrapper with fn's own parameter list whose autocast-off path calls fn directly: the
    generic `*args, **kwargs` wrapper cost an eager `a @ b` 0.15 us of its 1.6 (issue 32's per-op
    bar). None for functions taking *args or **kwargs, which keep the generic wrapper."""
    code = fn.__code__
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        return None
    pos = code.co_varnames[:code.co_argcount]
    kwonly = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    params = ", ".join(pos + (("*",) + kwonly if kwonly else ()))
    call = ", ".join(pos + tuple(f"{k}={k}" for k in kwonly))
    scope = {"_amp": _this_module, "_fn": fn, "_slow": slow}
    src = (f"def {fn.__name__}({params}):\n"
           f"    if not _amp._active:\n"
           f"        return _fn({call})\n"
           f"    return _slow({call})\n")
    # A file name under the package: source locations skip the frame as lazytensor's own.
    where = os.path.join(os.path.dirname(__file__), f"<autocast hook of {fn.__qualname__}>")
    exec(compile(src, where, "exec"), scope)
    fast = scope[fn.__name__]
    fast.__defaults__ = fn.__defaults__
    fast.__kwdefaults__ = fn.__kwdefaults__
    return fast


def _hook(low):
    def deco(fn):
        def wrapper(*args, **kwargs):
            if not _active:
                return fn(*args, **kwargs)
            region, args, kwargs = _cast_args(args, kwargs, low)
            if region is None:
                return fn(*args, **kwargs)
            s = _tls
            s.suspended += 1
            try:
                return fn(*args, **kwargs)
            finally:
                s.suspended -= 1
        out = functools.wraps(fn)(_same_signature(fn, wrapper) or wrapper)
        out.__wrapped_autocast__ = "lower_precision" if low else "float32"
        return out
    return deco


# Decorators for the hooked ops (where they are defined: _tensor.py, nn/functional.py).
lower_precision = _hook(True)
float32 = _hook(False)


# Loss scaling for float16 training (PyTorch's torch.amp.GradScaler); its own file, re-exported here.
from .amp_scaler import GradScaler  # noqa: E402
