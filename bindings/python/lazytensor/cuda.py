"""`lazytensor.cuda`: whether the CUDA backend can run in this process."""
from . import _C


def is_available():
    """True when the cuda backend is built and a GPU is usable."""
    return bool(_C.backend_available("cuda"))


def device_count():
    return 1 if is_available() else 0


def synchronize(device=None):
    """Waits until every kernel and copy queued on the GPU has finished, like
    torch.cuda.synchronize(). Runs on `cuda` / `lazy:cuda` are asynchronous: mark_step() and eager
    ops return once their kernels are queued; reading a value (.item(), .numpy(), printing) waits
    by itself. Use this to time GPU work, or with LT_CUDA_SYNC=1 to make every run wait."""
    _C.synchronize_backend("cuda")
