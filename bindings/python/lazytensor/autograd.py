"""Autograd: grad mode (`no_grad`, `enable_grad`, `set_grad_enabled`), `grad` and `backward`.

The tape lives in the C++ library (autograd/autograd.h): an op whose operand requires grad records
its VJP rule, and the rules are tensor ops, so on "lazy" the backward pass is more IR that compiles
into the same graph as the forward pass and the optimizer update.
"""
import functools

from . import _C

__all__ = ["grad", "backward", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode", "Function"]


def is_grad_enabled():
    return _C.is_grad_enabled()


class _GradMode:
    """A context manager that is also a decorator (as torch.no_grad is)."""

    _mode = None

    def __enter__(self):
        self._prev = _C.is_grad_enabled()
        _C.set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_GradMode):
    """Ops inside record no history: `with lt.no_grad(): ...` or `@lt.no_grad()`."""
    _mode = False


class enable_grad(_GradMode):
    """Turns recording back on inside a no_grad region."""
    _mode = True


class inference_mode(no_grad):
    """lazytensor has no separate inference tensors: the same as no_grad."""

    def __init__(self, mode=True):
        self._mode = not mode

    def clone(self):
        return self.__class__(not self._mode)


class set_grad_enabled(_GradMode):
    """Sets grad mode now (a plain call) or for a `with` block, as torch.set_grad_enabled does."""

    def __init__(self, mode):
        self._prev = _C.is_grad_enabled()
        self._mode = bool(mode)
        _C.set_grad_enabled(self._mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self._prev)
        return False

    def clone(self):
        return self.__class__(self._mode)


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, _C.Tensor):
        return (x,)
    return tuple(x)


def _check_tensors(ts, what):
    for t in ts:
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"{what}: expected Tensors, got {type(t).__name__}")


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs` (a tuple, one per input); nothing is
    accumulated into `.grad`. `grad_outputs` defaults to ones for one-element outputs."""
    if create_graph:
        raise NotImplementedError("not implemented: autograd.grad(create_graph=True) on lazytensor "
                                  "(higher-order gradients)")
    if is_grads_batched:
        raise NotImplementedError("not implemented: autograd.grad(is_grads_batched=True) on lazytensor")
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    _check_tensors(outputs, "autograd.grad(outputs)")
    _check_tensors(inputs, "autograd.grad(inputs)")
    gos = _as_tuple(grad_outputs) or (None,) * len(outputs)
    if len(gos) != len(outputs):
        raise RuntimeError(f"grad_outputs has {len(gos)} entries but outputs has {len(outputs)}")
    allow = bool(allow_unused) or materialize_grads
    res = _C.autograd_grad(list(outputs), list(inputs), list(gos), bool(retain_graph), allow)
    if materialize_grads:
        res = tuple(_C.zeros_like(i) if g is None else g for g, i in zip(res, inputs))
    return res


def _queue_callback(fn):
    """Runs fn() once, after this thread's next backward pass has accumulated every gradient (what
    torch's Variable._execution_engine.queue_callback does; DistributedDataParallel averages
    gradients there). On "lazy" that is when the backward is traced: what fn traces joins the same
    graph. The queue is the C++ engine's (lt::queue_callback): an exception in fn, or a backward
    that fails, empties it and reaches backward's caller."""
    _C.autograd_queue_callback(fn)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of `tensors` into the `.grad` of the leaves they depend on."""
    if create_graph:
        raise NotImplementedError("not implemented: backward(create_graph=True) on lazytensor")
    if inputs is not None:
        raise NotImplementedError("not implemented: backward(inputs=...) on lazytensor")
    tensors = _as_tuple(tensors)
    _check_tensors(tensors, "autograd.backward(tensors)")
    gts = _as_tuple(grad_tensors) or (None,) * len(tensors)
    if len(gts) != len(tensors):
        raise RuntimeError(f"grad_tensors has {len(gts)} entries but tensors has {len(tensors)}")
    _C.autograd_backward(list(tensors), list(gts), bool(retain_graph))


class Function:
    """Custom autograd functions need Python callbacks inside the C++ tape: not available yet."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)

    @classmethod
    def apply(cls, *args, **kwargs):
        raise NotImplementedError("not implemented: autograd.Function on lazytensor")


class GradFn:
    """What `tensor.grad_fn` returns: names the backward rule that produced the tensor."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def name(self):
        return self._name

    def __repr__(self):
        return f"<{self._name} object>"
