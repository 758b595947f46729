"""`lazytensor.cuda`: whether the CUDA backend can run in this process."""
from . import _C


def is_available():
    """True when the cuda backend is built and a GPU is usable."""
    return bool(_C.backend_available("cuda"))


def device_count():
    return 1 if is_available() else 0
