"""`lazytensor.cuda`: whether the CUDA backend can run in this process; seeding; and the
`lazytensor.cuda.amp` namespace (GradScaler, autocast) that older PyTorch scripts import."""
import sys
import types
import warnings

from . import _C
from ._creation import manual_seed as _seed_generator
from .amp import autocast as _autocast
from .amp_scaler import GradScaler as _GradScaler


def is_available():
    """True when the cuda backend is built and a GPU is usable."""
    return bool(_C.backend_available("cuda"))


def device_count():
    """The GPUs lazytensor sees (CUDA_VISIBLE_DEVICES selects them); each is `cuda:N` and
    `lazy:cuda:N`, with a backend of its own."""
    n = 0
    while _C.backend_available(_C.device(f"cuda:{n}").backend):
        n += 1
    return n


def _backend_of(device):
    if device is None:
        device = 0
    if isinstance(device, int):
        device = f"cuda:{device}"
    d = device if isinstance(device, _C.device) else _C.device(str(device))
    if not d.backend.startswith("cuda"):
        raise ValueError(f"lt.cuda.synchronize: {d} is not a CUDA device")
    return d.backend


def synchronize(device=None):
    """Waits until every kernel and copy queued on the GPU (`device`: an index, "cuda:N" or
    "lazy:cuda:N"; default GPU 0) has finished, like torch.cuda.synchronize(). Runs on `cuda` /
    `lazy:cuda` are asynchronous: mark_step() and eager ops return once their kernels are queued;
    reading a value (.item(), .numpy(), printing) waits by itself. Use this to time GPU work, or
    with LT_CUDA_SYNC=1 to make every run wait."""
    _C.synchronize_backend(_backend_of(device))


def manual_seed(seed):
    """Seeds lazytensor's generator, as lt.manual_seed does. PyTorch keeps one generator per GPU;
    lazytensor has one counter-based generator for every device, so this seeds them all."""
    _seed_generator(seed)


def manual_seed_all(seed):
    """Seeds lazytensor's generator (one for every device), as lt.manual_seed does."""
    _seed_generator(seed)


# ---- lazytensor.cuda.amp: PyTorch's deprecated spelling of lazytensor.amp for device "cuda" ----

class _CudaAutocast(_autocast):
    """torch.cuda.amp.autocast: autocast("cuda") with its float16 default."""

    def __init__(self, enabled=True, dtype=_C.float16, cache_enabled=True):
        warnings.warn("`lazytensor.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`lazytensor.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class _CudaGradScaler(_GradScaler):
    """torch.cuda.amp.GradScaler: GradScaler("cuda", ...)."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        warnings.warn("`lazytensor.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`lazytensor.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


_CudaAutocast.__name__ = _CudaAutocast.__qualname__ = "autocast"
_CudaGradScaler.__name__ = _CudaGradScaler.__qualname__ = "GradScaler"

amp = types.ModuleType(__name__ + ".amp", "PyTorch's torch.cuda.amp: GradScaler and autocast for "
                       "device 'cuda' (deprecated there too; use lazytensor.amp).")
amp.autocast = _CudaAutocast
amp.GradScaler = _CudaGradScaler
_CudaAutocast.__module__ = _CudaGradScaler.__module__ = amp.__name__
# cuda is a module, not a package: registering the namespace makes `import lazytensor.cuda.amp`
# and `from lazytensor.cuda.amp import GradScaler` work (as os.path is registered by os).
sys.modules[amp.__name__] = amp
