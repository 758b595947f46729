"""`one_graph`: a function's ops on an eager device traced and run as one graph when it returns
(the runtime's EagerComposite, runtime/tensor_impl.h), not a kernel run per op. For layers and
losses that PyTorch runs as one native call (a recurrent layer, nll_loss) where op by op they
were ~15 kernel runs. On lazy it changes nothing."""
from . import _C

Tensor = _C.Tensor


def one_graph(fn):
    def wrapper(*args, **kwargs):
        _C._composite_enter()
        results = []
        try:
            out = fn(*args, **kwargs)
            _collect(out, results)
            return out
        finally:
            _C._composite_exit(results)
    wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return wrapper


def _collect(x, into):
    if isinstance(x, Tensor):
        into.append(x)
    elif isinstance(x, (tuple, list)):
        for v in x:
            _collect(v, into)
